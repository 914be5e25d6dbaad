//! HTTP to upstream model servers, shared by every provider: a pooled
//! client, requests within the first-byte timeout, error answers read into
//! errors, and streamed bodies (SSE, or AWS's event-stream frames) decoded
//! into items with an idle timeout.

mod client;
mod error_body;
mod events;
mod plain_pool;

use std::future::Future;
use std::sync::{Arc, PoisonError, RwLock};

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, CONTENT_TYPE, HOST};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use serde::Serialize;
use switchyard_policies::{BackendTls, Timeouts};

pub use client::{HttpClient, http_client, http_client_trusting};
pub(crate) use error_body::status_error;
pub use events::{EventDecoder, Framer, Items, SseFramer, decode_events, decode_frames};

use crate::body::TooLarge;
use crate::error::{AdapterError, TimeoutPhase};
use client::client_error;

/// The W3C trace context of the attempt a backend call is made for.
#[derive(Debug, Clone)]
pub struct TraceContext {
    pub traceparent: HeaderValue,
    pub tracestate: Option<HeaderValue>,
}

tokio::task_local! {
    /// Set by the gateway around a backend call when traces are on, so
    /// every adapter's requests carry it without each taking it as an
    /// argument.
    static TRACE_CONTEXT: TraceContext;
}

/// Runs `call` with its upstream requests carrying `context`.
pub async fn with_trace_context<F: Future>(context: Option<TraceContext>, call: F) -> F::Output {
    match context {
        Some(context) => TRACE_CONTEXT.scope(context, call).await,
        None => call.await,
    }
}

/// How the gateway reaches one upstream server.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    pub max_response_bytes: usize,
    /// How the server's certificate is checked, and the gateway's own.
    pub tls: &'a BackendTls,
}

/// One upstream server: where it is, the headers every request carries
/// (credentials, API versions), and its timeouts.
pub struct Upstream {
    http: HttpClient,
    /// A plain `http://` server's own connections; requests to it skip
    /// `http` (see [`plain_pool`]).
    plain: Option<Arc<plain_pool::PlainPool>>,
    base_url: String,
    /// Each path's full URI, parsed on first use: parsing `base_url + path`
    /// on every call cost about 1,000 instructions.
    uris: RwLock<Vec<(&'static str, Uri)>>,
    /// Added after every path (`?api-version=...`), or empty.
    query: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    /// `Host`, made once for a plain `http://` server (see [`plain_http_host`]).
    host: Option<HeaderValue>,
    timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    max_response_bytes: usize,
}

/// The `Host` header for a plain `http://` server's requests, as
/// hyper_util's client writes it (the host, and the port unless it is 80),
/// made once. The server's own connections ([`plain_pool`]) write no
/// `Host` of their own, so this is the one its requests carry. (hyper_util
/// formatted it anew for every request: with it made once, `Upstream::send`
/// went from about 14,100 instructions to 12,200.) TLS servers get theirs
/// from hyper_util's client, which writes none over HTTP/2 (it carries the
/// host in `:authority`). None when a backend's configured headers set
/// `Host` themselves.
fn plain_http_host(base_url: &str, headers: &[(HeaderName, HeaderValue)]) -> Option<HeaderValue> {
    if headers.iter().any(|(name, _)| name == HOST) {
        return None;
    }
    let uri: Uri = base_url.parse().ok()?;
    if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
        return None;
    }
    let host = uri.host()?;
    let value = match uri.port_u16() {
        Some(port) if port != 80 => format!("{host}:{port}"),
        _ => host.to_owned(),
    };
    HeaderValue::from_str(&value).ok()
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Error answers are a few hundred bytes; more is not read.
const MAX_ERROR_BYTES: usize = 64 * 1024;

impl Upstream {
    pub fn new(
        base_url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        link: Link<'_>,
    ) -> Result<Self, AdapterError> {
        Ok(Upstream {
            http: http_client_trusting(link.timeouts.connect, link.tls)?,
            plain: plain_pool::PlainPool::for_base_url(base_url, link.timeouts.connect),
            base_url: base_url.to_owned(),
            uris: RwLock::new(Vec::new()),
            query: String::new(),
            host: plain_http_host(base_url, &headers),
            headers,
            timeouts: link.timeouts,
            max_response_bytes: link.max_response_bytes,
        })
    }

    /// The same server with `query` (`api-version=2024-10-21`) added to
    /// every request's URI.
    pub fn with_query(mut self, query: &str) -> Self {
        self.query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        self
    }

    /// The full URI of `path` on this server.
    fn uri(&self, path: &'static str) -> Result<Uri, AdapterError> {
        let known = self.uris.read().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, uri)) = known.iter().find(|(p, _)| *p == path) {
            return Ok(uri.clone());
        }
        drop(known);
        let uri = self.fresh_uri(path)?;
        self.uris
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((path, uri.clone()));
        Ok(uri)
    }

    /// The full URI of `path`, parsed now. `path` may carry its own query
    /// when the server adds none. For a plain `http://` server, only its
    /// path and query (origin form), as an HTTP/1 request line has them:
    /// its own connections send the URI as it is.
    fn fresh_uri(&self, path: &str) -> Result<Uri, AdapterError> {
        let uri: Uri = format!("{}{path}{}", self.base_url, self.query)
            .parse()
            .map_err(|err: http::uri::InvalidUri| AdapterError::Internal {
                message: format!("{}{path}: {err}", self.base_url),
            })?;
        Ok(match (&self.plain, uri.path_and_query()) {
            (Some(_), Some(origin)) => Uri::from(origin.clone()),
            _ => uri,
        })
    }

    /// Sends a request and waits for the response head; error statuses
    /// are read and turned into errors here. No deadline of its own:
    /// callers put one timer around all of their exchange.
    async fn send(
        &self,
        method: Method,
        uri: Uri,
        body: Option<(&'static str, Bytes)>,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Incoming, AdapterError> {
        // Set in place: the builder moves its whole head at every header.
        let (content_type, body) = match body {
            Some((content_type, bytes)) => (Some(content_type), bytes),
            None => (None, Bytes::new()),
        };
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = method;
        *request.uri_mut() = uri;
        let headers = request.headers_mut();
        headers.reserve(5 + self.headers.len() + extra_headers.len());
        if let Some(host) = &self.host
            && !extra_headers.iter().any(|(name, _)| name == HOST)
        {
            headers.append(HOST, host.clone());
        }
        headers.append(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(content_type) = content_type {
            headers.append(CONTENT_TYPE, HeaderValue::from_static(content_type));
        }
        // A per-request header replaces the backend's default of that name.
        for (name, value) in &self.headers {
            if !extra_headers.iter().any(|(n, _)| n == name) {
                headers.append(name.clone(), value.clone());
            }
        }
        for (name, value) in extra_headers {
            headers.append(name.clone(), value.clone());
        }
        if let Ok(context) = TRACE_CONTEXT.try_with(TraceContext::clone) {
            headers.append(TRACEPARENT, context.traceparent);
            if let Some(state) = context.tracestate {
                headers.append(TRACESTATE, state);
            }
        }
        let response = match &self.plain {
            Some(pool) => pool.request(request).await?,
            None => self
                .http
                .request(request)
                .await
                .map_err(|err| client_error(err, self.timeouts.connect))?,
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let (head, body) = response.into_parts();
        // The status says what happened; a body past the limit is not read
        // (nor needed to say it).
        let limit = MAX_ERROR_BYTES.min(self.max_response_bytes);
        let body = read_body(body, limit).await.unwrap_or_default();
        Err(status_error(status.as_u16(), &head.headers, &body))
    }

    /// `exchange` within the first-byte timeout (one timer for all of it).
    /// Not an async function, whose state would hold a copy of
    /// `exchange` and then copy it again into the timer's: each copy of a
    /// whole answer's exchange was about 200 instructions.
    #[inline(always)]
    fn within_first_byte<T>(
        &self,
        exchange: impl Future<Output = Result<T, AdapterError>>,
    ) -> impl Future<Output = Result<T, AdapterError>> {
        let after = self.timeouts.first_byte;
        tokio::time::timeout(after, exchange).map(move |timed| {
            timed.unwrap_or_else(|_| {
                Err(AdapterError::Timeout {
                    phase: TimeoutPhase::FirstByte,
                    after,
                })
            })
        })
    }

    /// The largest whole answer or streamed event read.
    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    /// POSTs `body` as JSON and reads the whole answer, within the
    /// first-byte timeout. `extra_headers` go with this request only.
    pub async fn call<B: Serialize>(
        &self,
        path: &'static str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.call_json(path, json_bytes(body)?, extra_headers).await
    }

    /// The same for a body already written as JSON.
    pub async fn call_json(
        &self,
        path: &'static str,
        json: Bytes,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        let body = Some(("application/json", json));
        self.whole(Method::POST, self.uri(path)?, body, extra_headers)
            .await
    }

    /// The same for a path made per request (one naming the model, as
    /// Google's APIs do), which is parsed each time rather than kept.
    pub async fn call_path<B: Serialize>(
        &self,
        path: &str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        let body = Some(("application/json", json_bytes(body)?));
        self.whole(Method::POST, self.fresh_uri(path)?, body, extra_headers)
            .await
    }

    /// POSTs bytes made (and perhaps signed) by the caller.
    pub async fn call_bytes(
        &self,
        path: &str,
        content_type: &'static str,
        body: Bytes,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        let body = Some((content_type, body));
        self.whole(Method::POST, self.fresh_uri(path)?, body, extra_headers)
            .await
    }

    /// GETs `path` and reads the whole answer.
    pub async fn get_path(
        &self,
        path: &str,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.whole(Method::GET, self.fresh_uri(path)?, None, extra_headers)
            .await
    }

    async fn whole(
        &self,
        method: Method,
        uri: Uri,
        body: Option<(&'static str, Bytes)>,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.within_first_byte(async {
            let incoming = self.send(method, uri, body, extra_headers).await?;
            read_body(incoming, self.max_response_bytes).await
        })
        .await
    }

    /// POSTs `body` as JSON and decodes the SSE answer as it arrives.
    pub async fn stream<B, T, D>(
        &self,
        path: &'static str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        B: Serialize,
        T: Send + 'static,
        D: EventDecoder<T>,
    {
        self.stream_json(path, json_bytes(body)?, extra_headers, decoder)
            .await
    }

    /// The same for a body already written as JSON.
    pub async fn stream_json<T, D>(
        &self,
        path: &'static str,
        json: Bytes,
        extra_headers: &[(HeaderName, HeaderValue)],
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        T: Send + 'static,
        D: EventDecoder<T>,
    {
        let body = ("application/json", json);
        let framer = SseFramer::new(self.max_response_bytes);
        self.stream_uri(self.uri(path)?, body, extra_headers, framer, decoder)
            .await
    }

    /// The same for a path made per request.
    pub async fn stream_path<B, T, D>(
        &self,
        path: &str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        B: Serialize,
        T: Send + 'static,
        D: EventDecoder<T>,
    {
        let body = ("application/json", json_bytes(body)?);
        let framer = SseFramer::new(self.max_response_bytes);
        self.stream_uri(self.fresh_uri(path)?, body, extra_headers, framer, decoder)
            .await
    }

    /// POSTs bytes made by the caller and decodes the answer's frames as
    /// they arrive, whatever their framing.
    pub async fn stream_bytes<T, F, D>(
        &self,
        path: &str,
        content_type: &'static str,
        body: Bytes,
        extra_headers: &[(HeaderName, HeaderValue)],
        framer: F,
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        T: Send + 'static,
        F: Framer,
        D: EventDecoder<T, F::Frame>,
    {
        let body = (content_type, body);
        self.stream_uri(self.fresh_uri(path)?, body, extra_headers, framer, decoder)
            .await
    }

    async fn stream_uri<T, F, D>(
        &self,
        uri: Uri,
        body: (&'static str, Bytes),
        extra_headers: &[(HeaderName, HeaderValue)],
        framer: F,
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        T: Send + 'static,
        F: Framer,
        D: EventDecoder<T, F::Frame>,
    {
        let incoming = self
            .within_first_byte(self.send(Method::POST, uri, Some(body), extra_headers))
            .await?;
        Ok(decode_frames(incoming, self.timeouts.idle, framer, decoder))
    }
}

/// A request body as JSON, by serde.
fn json_bytes<B: Serialize>(body: &B) -> Result<Bytes, AdapterError> {
    json_body(|out| serde_json::to_writer(out, body))
}

/// A request body as JSON, as `write` writes it: into a buffer sized for a
/// typical chat request, so writing it does not regrow the buffer five or
/// six times from an empty start.
pub(crate) fn json_body(
    write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
) -> Result<Bytes, AdapterError> {
    let mut json = Vec::with_capacity(1024);
    write(&mut json).map_err(|err| AdapterError::Internal {
        message: err.to_string(),
    })?;
    Ok(Bytes::from(json))
}

/// A whole body, cut with an error past `limit` bytes rather than held.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, AdapterError> {
    crate::body::collect_at_most(std::pin::pin!(body), limit)
        .await
        .map_err(|err| AdapterError::Reset {
            message: err.to_string(),
        })?
        .map_err(|TooLarge| AdapterError::Protocol {
            message: format!("the answer is larger than {limit} bytes (max_response_bytes)"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(base_url: &str) -> Option<String> {
        plain_http_host(base_url, &[]).map(|v| v.to_str().unwrap().to_owned())
    }

    /// The same `Host` hyper_util writes: the port only when it is not 80,
    /// IPv6 hosts in brackets; nothing over TLS or where config sets one.
    #[test]
    fn host_is_made_once_for_plain_http_servers_only() {
        assert_eq!(
            host("http://127.0.0.1:8080/v1").as_deref(),
            Some("127.0.0.1:8080")
        );
        assert_eq!(
            host("http://models.internal/v1").as_deref(),
            Some("models.internal")
        );
        assert_eq!(
            host("http://models.internal:80").as_deref(),
            Some("models.internal")
        );
        assert_eq!(host("http://[::1]:9000/v1").as_deref(), Some("[::1]:9000"));
        assert_eq!(host("https://api.openai.com/v1"), None);
        assert_eq!(host("https://localhost:8443/v1"), None);
        let configured = [(HOST, HeaderValue::from_static("models.example"))];
        assert_eq!(
            plain_http_host("http://127.0.0.1:8080/v1", &configured),
            None
        );
    }

    /// The head of one request a canned server on loopback received (it
    /// answers `{}` and hangs up), sent through an `Upstream` for
    /// `http://127.0.0.1:PORT/v1` with `headers` configured.
    async fn head_received(headers: Vec<(HeaderName, HeaderValue)>) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut received = Vec::new();
            let mut buf = [0u8; 4096];
            while !received.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert!(n > 0, "the request ended before its head");
                received.extend_from_slice(&buf[..n]);
            }
            socket
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                .await
                .unwrap();
            let text = String::from_utf8(received).unwrap();
            text[..text.find("\r\n\r\n").unwrap()].to_owned()
        });
        let tls = BackendTls::default();
        let link = Link {
            timeouts: Timeouts::default(),
            max_response_bytes: 1024,
            tls: &tls,
        };
        let upstream =
            Upstream::new(&format!("http://127.0.0.1:{port}/v1"), headers, link).unwrap();
        let answer = upstream
            .call("/chat/completions", &serde_json::json!({}), &[])
            .await
            .unwrap();
        assert_eq!(&answer[..], b"{}");
        (port, server.await.unwrap())
    }

    fn host_lines(head: &str) -> Vec<&str> {
        head.lines()
            .filter(|line| line.to_ascii_lowercase().starts_with("host:"))
            .collect()
    }

    /// A plain backend's connections write no `Host` of their own: each
    /// request carries exactly one, ours or the configured one, and the
    /// request line has the path alone.
    #[tokio::test]
    async fn a_plain_backends_request_carries_one_host() {
        let (port, head) = head_received(Vec::new()).await;
        assert!(
            head.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{head}"
        );
        assert_eq!(host_lines(&head), [format!("host: 127.0.0.1:{port}")]);
        let configured = vec![(HOST, HeaderValue::from_static("models.example"))];
        let (_, head) = head_received(configured).await;
        assert_eq!(host_lines(&head), ["host: models.example"]);
    }
}
