//! A streamable-HTTP MCP server: each message a POST, answered with JSON
//! or with an SSE stream that ends with the answer. The session the
//! server gives at `initialize` is kept and sent back; a server that no
//! longer knows it (404) is initialized again, once per call.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use switchyard_adapters::sse::SseParser;
use switchyard_adapters::upstream::HttpClient;
use tokio::sync::RwLock;

use crate::mcp::jsonrpc::{self, UpstreamError};
use crate::mcp::pending::{IfAbandoned, spawn_if_running};
use crate::mcp::progress::{Progress, ask_for_progress, token_of};
use crate::mcp::session::{PROTOCOL_VERSION, initialize_params};

const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

pub struct HttpServer {
    url: http::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    http: HttpClient,
    max_bytes: usize,
    next_id: AtomicU64,
    /// The session and the revision agreed at `initialize`; `None` before.
    session: RwLock<Option<Session>>,
}

impl HttpServer {
    pub fn new(
        url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        http: HttpClient,
        max_bytes: usize,
    ) -> Result<Self, String> {
        Ok(HttpServer {
            url: url.parse().map_err(|e| format!("{url}: {e}"))?,
            headers,
            http,
            max_bytes,
            next_id: AtomicU64::new(1),
            session: RwLock::new(None),
        })
    }

    /// Sends a request and awaits its answer (the caller bounds the wait),
    /// relaying the progress the server sends before it to `progress`.
    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, UpstreamError> {
        for attempt in 0..2 {
            let session = self.session().await?;
            match self
                .exchange(method, params, Some(&session), progress)
                .await
            {
                // The server forgot the session (restarted): a new one.
                Err(Exchange::SessionGone) if attempt == 0 => {
                    *self.session.write().await = None;
                }
                Err(Exchange::SessionGone) => {
                    return Err(UpstreamError::Unavailable(
                        "the tool server keeps losing its session".into(),
                    ));
                }
                Err(Exchange::Failed(err)) => return Err(err),
                Ok((answer, _)) => return UpstreamError::from_response(answer),
            }
        }
        Err(UpstreamError::Unavailable(
            "the tool server keeps losing its session".into(),
        ))
    }

    /// The session, initializing one when there is none.
    async fn session(&self) -> Result<Session, UpstreamError> {
        if let Some(session) = self.session.read().await.clone() {
            return Ok(session);
        }
        let mut held = self.session.write().await;
        if let Some(session) = held.clone() {
            return Ok(session);
        }
        let params = initialize_params(PROTOCOL_VERSION);
        let (answer, id) = self
            .exchange("initialize", &params, None, None)
            .await
            .map_err(Exchange::into_error)?;
        let result = UpstreamError::from_response(answer)?;
        let version = result["protocolVersion"]
            .as_str()
            .unwrap_or(PROTOCOL_VERSION);
        let version = HeaderValue::from_str(version)
            .map_err(|_| UpstreamError::Protocol("a protocol version no header can hold".into()))?;
        let session = (id, version);
        self.notify("notifications/initialized", &session).await?;
        *held = Some(session.clone());
        Ok(session)
    }

    async fn notify(&self, method: &str, session: &Session) -> Result<(), UpstreamError> {
        let body = serde_json::to_vec(&jsonrpc::notification(method))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let response = self.post(body, Some(session)).await?;
        if !response.status().is_success() {
            return Err(UpstreamError::Unavailable(format!(
                "the tool server refused {method} (HTTP {})",
                response.status().as_u16()
            )));
        }
        Ok(())
    }

    async fn post(
        &self,
        body: Vec<u8>,
        session: Option<&Session>,
    ) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
        post(&self.http, &self.url, &self.headers, body, session).await
    }

    /// What to do if request `id`'s caller stops waiting: tell the server
    /// (MCP asks for `notifications/cancelled`; a dropped connection is
    /// not one).
    fn cancel_if_abandoned(&self, id: u64, session: Option<Session>) -> IfAbandoned {
        let (http, url, headers) = (self.http.clone(), self.url.clone(), self.headers.clone());
        IfAbandoned::new(move || {
            spawn_if_running(async move {
                let Ok(body) = serde_json::to_vec(&jsonrpc::cancelled(id)) else {
                    return;
                };
                let _ = post(&http, &url, &headers, body, session.as_ref()).await;
            });
        })
    }

    /// One request and its answer, with the session id the answer gave; a
    /// request its caller stops waiting for is cancelled at the server.
    async fn exchange(
        &self,
        method: &str,
        params: &Value,
        session: Option<&Session>,
        progress: Option<&Progress>,
    ) -> Result<(Value, Option<HeaderValue>), Exchange> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        // `initialize` is never cancelled (MCP's rule).
        let abandoned =
            (method != "initialize").then(|| self.cancel_if_abandoned(id, session.cloned()));
        let answer = self
            .exchange_id((id, method), params, session, progress)
            .await;
        if let Some(abandoned) = abandoned {
            abandoned.disarm();
        }
        answer
    }

    async fn exchange_id(
        &self,
        (id, method): (u64, &str),
        params: &Value,
        session: Option<&Session>,
        progress: Option<&Progress>,
    ) -> Result<(Value, Option<HeaderValue>), Exchange> {
        // Its progress comes in the answer's own stream (read below).
        let params = ask_for_progress(params, id, progress.is_some());
        let body = serde_json::to_vec(&jsonrpc::request(id, method, &params))
            .map_err(|e| Exchange::Failed(UpstreamError::Protocol(e.to_string())))?;
        let response = self.post(body, session).await.map_err(Exchange::Failed)?;
        let status = response.status();
        if status == StatusCode::NOT_FOUND && session.is_some_and(|s| s.0.is_some()) {
            return Err(Exchange::SessionGone);
        }
        let given = response.headers().get(SESSION).cloned();
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.starts_with("text/event-stream"));
        let mut body = response.into_body();
        if !status.is_success() {
            // An error status may still carry the JSON-RPC error.
            let bytes = read_all(&mut body, self.max_bytes)
                .await
                .unwrap_or_default();
            return match serde_json::from_slice::<Value>(&bytes) {
                Ok(answer) if answer.get("error").is_some() => Ok((answer, given)),
                _ => Err(Exchange::Failed(UpstreamError::Unavailable(format!(
                    "the tool server answered HTTP {}",
                    status.as_u16()
                )))),
            };
        }
        let answer = if sse {
            read_sse_answer(&mut body, (id, progress), self.max_bytes).await
        } else {
            match read_all(&mut body, self.max_bytes).await {
                Ok(bytes) => serde_json::from_slice(&bytes).map_err(|_| {
                    UpstreamError::Protocol("the tool server's answer is not JSON".into())
                }),
                Err(err) => Err(err),
            }
        };
        answer
            .map(|answer| (answer, given))
            .map_err(Exchange::Failed)
    }
}

/// The session id the server gave (if any) and the revision agreed.
type Session = (Option<HeaderValue>, HeaderValue);

async fn post(
    http: &HttpClient,
    url: &http::Uri,
    headers: &[(HeaderName, HeaderValue)],
    body: Vec<u8>,
    session: Option<&Session>,
) -> Result<http::Response<hyper::body::Incoming>, UpstreamError> {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if let Some((id, version)) = session {
        if let Some(id) = id {
            request = request.header(SESSION, id);
        }
        request = request.header(VERSION, version);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
    http.request(request)
        .await
        .map_err(|_| UpstreamError::Unavailable("the tool server could not be reached".into()))
}

enum Exchange {
    SessionGone,
    Failed(UpstreamError),
}

impl Exchange {
    fn into_error(self) -> UpstreamError {
        match self {
            Exchange::SessionGone => {
                UpstreamError::Unavailable("the tool server lost its session".into())
            }
            Exchange::Failed(err) => err,
        }
    }
}

fn too_large(max: usize) -> UpstreamError {
    UpstreamError::Protocol(format!(
        "the tool server's answer is larger than {max} bytes"
    ))
}

async fn read_all(body: &mut hyper::body::Incoming, max: usize) -> Result<Vec<u8>, UpstreamError> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| UpstreamError::Gone)?;
        if let Ok(data) = frame.into_data() {
            out.extend_from_slice(&data);
            if out.len() > max {
                return Err(too_large(max));
            }
        }
    }
    Ok(out)
}

/// The answer to request `id` from an SSE stream: the first `message`
/// event that is it. Its progress before it goes to `progress`; other
/// notifications and requests the server sends are passed over.
async fn read_sse_answer(
    body: &mut hyper::body::Incoming,
    (id, progress): (u64, Option<&Progress>),
    max: usize,
) -> Result<Value, UpstreamError> {
    let mut parser = SseParser::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| UpstreamError::Gone)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for event in parser.feed(&data) {
            if event.event.as_deref().is_some_and(|e| e != "message") || event.data.is_empty() {
                continue;
            }
            if event.data.len() > max {
                return Err(too_large(max));
            }
            let Ok(message) = serde_json::from_str::<Value>(&event.data) else {
                continue;
            };
            if message.get("method").is_some() {
                if let Some(progress) = progress
                    && token_of(&message) == Some(id)
                {
                    progress.forward(message["params"].clone());
                }
            } else if message.get("id").and_then(Value::as_u64) == Some(id) {
                return Ok(message);
            }
        }
        if parser.pending_bytes() > max {
            return Err(too_large(max));
        }
    }
    Err(UpstreamError::Gone)
}
