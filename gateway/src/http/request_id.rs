//! Request ids: every request gets an id of the gateway's own, a
//! time-ordered UUID (version 7), in `x-request-id` from the outermost
//! layer in (logs and the ledger's `request_id` use it). A caller's own
//! `x-request-id` is kept beside it (the ledger's `client_request_id`)
//! and comes back on the response, but only when it is short and plain: at
//! most 128 characters of `[A-Za-z0-9._-]`. Anything else is dropped, so a
//! caller cannot write arbitrary text into logs and rows, nor make two
//! requests share an id.
//!
//! tower-http's `SetRequestId` and `PropagateRequestId` do this too, and
//! also copy the id into the request's and the response's extensions.
//! Nothing here reads those copies, and making them took four allocations
//! a request (each extension map is allocated on its first insert).
//!
//! Both ids are read back here too, as a request's ledger rows keep them
//! (`request_ids`, `header_text`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The longest caller's request id kept.
const MAX_CLIENT_ID: usize = 128;

/// The caller's own request id, when it sent a plain one.
#[derive(Debug, Clone)]
pub struct ClientRequestId(pub HeaderValue);

/// Whether a caller's id is short and plain enough to keep.
fn is_plain(id: &HeaderValue) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= MAX_CLIENT_ID
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

#[derive(Clone, Copy)]
pub struct RequestIdLayer;

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestIdService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestIdService { inner }
    }
}

#[derive(Clone)]
pub struct RequestIdService<S> {
    inner: S,
}

impl<S, B, R> Service<Request<B>> for RequestIdService<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = WithRequestId<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        let own = own_id();
        let client = req.headers_mut().insert(REQUEST_ID, own.clone());
        // The answer carries the caller's id when it was kept, else ours.
        let answer_id = match client.filter(is_plain) {
            Some(client) => {
                req.extensions_mut().insert(ClientRequestId(client.clone()));
                client
            }
            None => own,
        };
        WithRequestId {
            inner: self.inner.call(req),
            id: Some(answer_id),
        }
    }
}

pin_project! {
    /// The inner service's future; its response gets the request's id,
    /// unless a handler set one of its own.
    pub struct WithRequestId<F> {
        #[pin]
        inner: F,
        id: Option<HeaderValue>,
    }
}

impl<F, R, E> Future for WithRequestId<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<R>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut response = ready!(this.inner.poll(cx))?;
        if let Some(id) = this.id.take() {
            response.headers_mut().entry(REQUEST_ID).or_insert(id);
        }
        Poll::Ready(Ok(response))
    }
}

/// A version 7 UUID, hyphenated: the time in milliseconds, then 74 random
/// bits from the thread's generator, which the OS reseeds (the uuid
/// crate's `Uuid::now_v7`, like its `new_v4`, asks the kernel for fresh
/// bytes on every call, a system call per request). Ids made close in time sort close together, so the ledger's
/// index on them grows at its end; with random (version 4) ids each row
/// landed on a page of its own, and each commit wrote about a page per row.
fn own_id() -> HeaderValue {
    let since_epoch = std::time::UNIX_EPOCH.elapsed().unwrap_or_default();
    let millis = u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX);
    let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &rand::random()).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid.hyphenated().encode_lower(&mut text);
    // Hex digits and hyphens are always a valid header value.
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("-"))
}

/// A request's ids as its rows keep them: the gateway's own, and the
/// caller's when it was kept.
pub fn request_ids(
    headers: &http::HeaderMap,
    extensions: &http::Extensions,
) -> (Option<HeaderValue>, Option<HeaderValue>) {
    (
        headers.get(REQUEST_ID).cloned(),
        extensions.get::<ClientRequestId>().map(|c| c.0.clone()),
    )
}

/// A header value as ledger text (ids are ASCII by construction).
pub fn header_text(value: Option<&HeaderValue>) -> Option<String> {
    value.and_then(|v| v.to_str().ok()).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    /// Answers with the id the request reached it with and the caller's id
    /// kept beside it (`id client`), in the body, and with
    /// `x-request-id: own` when the request asks for that.
    async fn echo(req: Request<()>) -> Result<Response<String>, Infallible> {
        let seen = req
            .headers()
            .get(REQUEST_ID)
            .map(|v| v.to_str().unwrap().to_owned());
        let client = req
            .extensions()
            .get::<ClientRequestId>()
            .map(|c| c.0.to_str().unwrap().to_owned());
        let body = match client {
            Some(client) => format!("{} {client}", seen.unwrap_or_default()),
            None => seen.unwrap_or_default(),
        };
        let mut response = Response::new(body);
        if req.uri().path() == "/own" {
            response
                .headers_mut()
                .insert(REQUEST_ID, HeaderValue::from_static("own"));
        }
        Ok(response)
    }

    async fn call(path: &str, id: Option<&str>) -> Response<String> {
        let mut req = Request::builder().uri(path);
        if let Some(id) = id {
            req = req.header(REQUEST_ID, id);
        }
        RequestIdLayer
            .layer(tower::service_fn(echo))
            .oneshot(req.body(()).unwrap())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_callers_id_is_kept_beside_ours_and_comes_back() {
        let response = call("/", Some("abc-1")).await;
        let (own, client) = response.body().split_once(' ').unwrap();
        assert!(uuid::Uuid::parse_str(own).is_ok(), "{own}");
        assert_eq!(client, "abc-1");
        assert_eq!(response.headers()[REQUEST_ID], "abc-1");
    }

    #[tokio::test]
    async fn a_long_or_odd_callers_id_is_replaced() {
        let long = "a".repeat(129);
        for id in [
            long.as_str(),
            "has space",
            "semi;colon",
            "quote\"",
            "tab\there",
        ] {
            let response = call("/", Some(id)).await;
            let answered = response.headers()[REQUEST_ID].to_str().unwrap();
            assert!(uuid::Uuid::parse_str(answered).is_ok(), "{id}: {answered}");
            assert_eq!(response.body(), answered, "{id}: not kept beside ours");
        }
        let longest = "a".repeat(128);
        let response = call("/", Some(&longest)).await;
        assert_eq!(response.headers()[REQUEST_ID], longest.as_str());
    }

    #[tokio::test]
    async fn a_request_without_an_id_gets_a_fresh_uuid_both_ways() {
        let first = call("/", None).await;
        let id = first.headers()[REQUEST_ID].to_str().unwrap().to_owned();
        assert_eq!(first.body(), &id);
        let millis = |id: &str| {
            let uuid = uuid::Uuid::parse_str(id).unwrap();
            assert_eq!(uuid.get_version_num(), 7, "{id}");
            let (seconds, nanos) = uuid.get_timestamp().unwrap().to_unix();
            seconds * 1000 + u64::from(nanos) / 1_000_000
        };
        let now = crate::ledger::now_ms().unsigned_abs();
        assert!(millis(&id).abs_diff(now) < 10_000, "{id} is not of now");
        let second = call("/", None).await;
        let second = second.headers()[REQUEST_ID].to_str().unwrap();
        assert_ne!(second, id);
        // Made later, it sorts after (or in the same millisecond).
        assert!(millis(second) >= millis(&id), "{second} before {id}");
    }

    #[tokio::test]
    async fn a_handlers_own_id_is_kept() {
        let response = call("/own", Some("abc-1")).await;
        assert_eq!(response.headers()[REQUEST_ID], "own");
    }
}
