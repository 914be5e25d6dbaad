//! Request ids: every request carries `x-request-id` (the caller's, or a
//! new random UUID) from the outermost layer in, and its response carries
//! the same id back.
//!
//! tower-http's `SetRequestId` and `PropagateRequestId` do this too, and
//! also copy the id into the request's and the response's extensions.
//! Nothing here reads those copies, and making them took four allocations
//! a request (each extension map is allocated on its first insert).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{HeaderName, HeaderValue, Request, Response};
use pin_project_lite::pin_project;
use tower::{Layer, Service};

pub const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

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
        let id = match req.headers().get(REQUEST_ID) {
            Some(id) => id.clone(),
            None => {
                let id = random_id();
                req.headers_mut().insert(REQUEST_ID, id.clone());
                id
            }
        };
        WithRequestId {
            inner: self.inner.call(req),
            id: Some(id),
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

/// A random (version 4) UUID, hyphenated, from the thread's generator,
/// which the OS reseeds: `Uuid::new_v4` asks the kernel for fresh bytes on
/// every call, a system call per request.
fn random_id() -> HeaderValue {
    let uuid = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    let mut text = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid.hyphenated().encode_lower(&mut text);
    // Hex digits and hyphens are always a valid header value.
    HeaderValue::from_str(text).unwrap_or(HeaderValue::from_static("-"))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    /// Answers with the id the request reached it with, in the body, and
    /// with `x-request-id: own` when the request asks for that.
    async fn echo(req: Request<()>) -> Result<Response<String>, Infallible> {
        let seen = req
            .headers()
            .get(REQUEST_ID)
            .map(|v| v.to_str().unwrap().to_owned());
        let mut response = Response::new(seen.unwrap_or_default());
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
    async fn the_callers_id_goes_in_and_comes_back() {
        let response = call("/", Some("abc-1")).await;
        assert_eq!(response.body(), "abc-1");
        assert_eq!(response.headers()[REQUEST_ID], "abc-1");
    }

    #[tokio::test]
    async fn a_request_without_an_id_gets_a_fresh_uuid_both_ways() {
        let first = call("/", None).await;
        let id = first.headers()[REQUEST_ID].to_str().unwrap().to_owned();
        assert_eq!(first.body(), &id);
        assert!(
            uuid::Uuid::parse_str(&id).is_ok_and(|u| u.get_version_num() == 4),
            "{id}"
        );
        let second = call("/", None).await;
        assert_ne!(second.headers()[REQUEST_ID], id.as_str());
    }

    #[tokio::test]
    async fn a_handlers_own_id_is_kept() {
        let response = call("/own", Some("abc-1")).await;
        assert_eq!(response.headers()[REQUEST_ID], "own");
    }
}
