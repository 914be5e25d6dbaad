//! An MCP server over the older HTTP+SSE transport (revision 2024-11-05,
//! still served by many): a GET opens an event stream whose first event,
//! `endpoint`, names where to POST messages; answers come back on the
//! stream as `message` events. One stream is kept open per server and
//! opened again (with a new handshake) when it ends.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use serde_json::Value;
use switchyard_adapters::sse::SseParser;
use switchyard_adapters::upstream::HttpClient;
use tokio::sync::{Mutex, mpsc, oneshot};

use crate::mcp::jsonrpc::{self, UpstreamError};
use crate::mcp::pending::{IfAbandoned, Pending, spawn_if_running};
use crate::mcp::progress::Progress;
use crate::mcp::session::{PROTOCOL_VERSION, initialize_params};

/// How long the stream may take to name its endpoint and answer
/// `initialize`.
const HANDSHAKE: Duration = Duration::from_secs(30);

pub struct SseServer {
    url: Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    http: HttpClient,
    max_bytes: usize,
    /// The open stream, when there is one; held while one is opened, so
    /// calls that find none wait for the same one.
    connection: Mutex<Option<Arc<Connection>>>,
}

/// One open event stream and where its messages are posted.
struct Connection {
    endpoint: Uri,
    pending: Arc<Pending>,
    /// The stream's reader and the task that answers the server's
    /// requests, ended with the connection (a reload that drops the server
    /// closes its stream).
    _tasks: [AbortOnDrop; 2],
}

/// Ends a task when dropped: a stream whose handshake fails or is given up
/// on is closed, not left open.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl SseServer {
    pub fn new(
        url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        http: HttpClient,
        max_bytes: usize,
    ) -> Result<Self, String> {
        let url: Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
        if url.authority().is_none() {
            return Err(format!("{url}: not an absolute URL"));
        }
        Ok(SseServer {
            url,
            headers,
            http,
            max_bytes,
            connection: Mutex::new(None),
        })
    }

    /// Sends a request and awaits its answer (the caller bounds the wait),
    /// relaying its progress to `progress`. A message the server never
    /// took (its stream had ended) is sent again on a new stream, once;
    /// one it took is not.
    pub async fn request(
        &self,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, UpstreamError> {
        for attempt in 0..2 {
            let connection = self.connection().await?;
            match self.call(&connection, method, params, progress).await {
                Err(Call::NotSent) if attempt == 0 => self.drop_connection(&connection).await,
                Err(Call::NotSent) => return Err(UpstreamError::Gone),
                Err(Call::Failed(err)) => return Err(err),
                Ok(answer) => return Ok(answer),
            }
        }
        Err(UpstreamError::Gone)
    }

    async fn drop_connection(&self, gone: &Arc<Connection>) {
        let mut held = self.connection.lock().await;
        if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, gone)) {
            *held = None;
        }
    }

    /// The open stream, opening one (and its handshake) when there is
    /// none or the last has ended.
    async fn connection(&self) -> Result<Arc<Connection>, UpstreamError> {
        let mut held = self.connection.lock().await;
        if let Some(connection) = held.as_ref()
            && !connection.pending.is_closed()
        {
            return Ok(Arc::clone(connection));
        }
        *held = None;
        let connection = tokio::time::timeout(HANDSHAKE, self.open())
            .await
            .map_err(|_| {
                UpstreamError::Unavailable("the tool server's stream did not open in time".into())
            })??;
        *held = Some(Arc::clone(&connection));
        Ok(connection)
    }

    async fn open(&self) -> Result<Arc<Connection>, UpstreamError> {
        let mut request = Request::builder()
            .method(Method::GET)
            .uri(self.url.clone())
            .header(ACCEPT, "text/event-stream");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        let response = self.http.request(request).await.map_err(|_| {
            UpstreamError::Unavailable("the tool server could not be reached".into())
        })?;
        if response.status() != StatusCode::OK {
            return Err(UpstreamError::Unavailable(format!(
                "the tool server's stream answered HTTP {}",
                response.status().as_u16()
            )));
        }
        let pending = Arc::new(Pending::new());
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        // The server's requests, answered once the endpoint is known.
        let (answers, to_answer) = mpsc::unbounded_channel();
        let reader = AbortOnDrop(
            tokio::spawn(read(
                response.into_body(),
                (Arc::clone(&pending), answers),
                endpoint_tx,
                self.max_bytes,
            ))
            .abort_handle(),
        );
        let named = endpoint_rx.await.map_err(|_| UpstreamError::Gone)?;
        let endpoint = resolve(&self.url, &named)?;
        let answerer = AbortOnDrop(
            tokio::spawn(answer_server(
                (self.http.clone(), self.headers.clone()),
                endpoint.clone(),
                to_answer,
            ))
            .abort_handle(),
        );
        let connection = Arc::new(Connection {
            endpoint,
            pending,
            _tasks: [reader, answerer],
        });
        let params = initialize_params(PROTOCOL_VERSION);
        self.call(&connection, "initialize", &params, None)
            .await
            .map_err(Call::into_error)?;
        let initialized = jsonrpc::notification("notifications/initialized");
        self.post(&connection, &initialized)
            .await
            .map_err(Call::into_error)?;
        Ok(connection)
    }

    async fn call(
        &self,
        connection: &Arc<Connection>,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, Call> {
        let (id, answer) = connection.pending.expect().ok_or(Call::NotSent)?;
        let params = connection.pending.with_progress(id, params, progress);
        let abandoned = {
            let (http, headers) = (self.http.clone(), self.headers.clone());
            let connection = Arc::clone(connection);
            // `initialize` is never cancelled (MCP's rule).
            let tell = method != "initialize";
            IfAbandoned::new(move || {
                connection.pending.forget(id);
                if tell {
                    spawn_if_running(async move {
                        let cancelled = jsonrpc::cancelled(id);
                        let _ = post(&http, &headers, &connection, &cancelled).await;
                    });
                }
            })
        };
        self.post(connection, &jsonrpc::request(id, method, &params))
            .await?;
        let answer = answer
            .await
            .map_err(|_| Call::Failed(UpstreamError::Gone))?;
        abandoned.disarm();
        answer.map_err(Call::Failed)
    }

    async fn post(&self, connection: &Connection, message: &Value) -> Result<(), Call> {
        post(&self.http, &self.headers, connection, message).await
    }
}

/// Posts the answers to the server's own requests as they come.
async fn answer_server(
    (http, headers): (HttpClient, Vec<(HeaderName, HeaderValue)>),
    endpoint: Uri,
    mut answers: mpsc::UnboundedReceiver<Value>,
) {
    while let Some(answer) = answers.recv().await {
        if let Ok(request) = message_request(&endpoint, &headers, &answer) {
            let _ = http.request(request).await;
        }
    }
}

/// A POST of one message to the stream's endpoint.
fn message_request(
    endpoint: &Uri,
    headers: &[(HeaderName, HeaderValue)],
    message: &Value,
) -> Result<Request<Full<Bytes>>, UpstreamError> {
    let body = serde_json::to_vec(message).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(endpoint.clone())
        .header(CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| UpstreamError::Protocol(e.to_string()))
}

/// Posts one message to the stream's endpoint.
async fn post(
    http: &HttpClient,
    headers: &[(HeaderName, HeaderValue)],
    connection: &Connection,
    message: &Value,
) -> Result<(), Call> {
    let failed = |err| Call::Failed(err);
    let request = message_request(&connection.endpoint, headers, message).map_err(failed)?;
    let response = http.request(request).await.map_err(|_| {
        failed(UpstreamError::Unavailable(
            "the tool server could not be reached".into(),
        ))
    })?;
    let status = response.status();
    // The body says nothing the stream will not (an "Accepted").
    drop(response);
    match status {
        s if s.is_success() => Ok(()),
        // The server no longer knows this stream (it restarted): the
        // message was not taken.
        StatusCode::NOT_FOUND | StatusCode::GONE => {
            connection.pending.close();
            Err(Call::NotSent)
        }
        s => Err(failed(UpstreamError::Unavailable(format!(
            "the tool server refused a message (HTTP {})",
            s.as_u16()
        )))),
    }
}

/// Why a call has no answer.
enum Call {
    /// The server never took the message: its stream had ended.
    NotSent,
    Failed(UpstreamError),
}

impl Call {
    fn into_error(self) -> UpstreamError {
        match self {
            Call::NotSent => UpstreamError::Gone,
            Call::Failed(err) => err,
        }
    }
}

/// Where the `endpoint` event says to post: a path on the stream's own
/// server, or an absolute URL there. Another origin is refused: a server
/// may not send the gateway's messages (and its configured headers)
/// elsewhere.
fn resolve(base: &Uri, named: &str) -> Result<Uri, UpstreamError> {
    let refuse = || UpstreamError::Protocol(format!("the tool server named `{named}` to post to"));
    let named = named.trim();
    if named.starts_with('/') && !named.starts_with("//") {
        return Uri::builder()
            .scheme(base.scheme().cloned().ok_or_else(refuse)?)
            .authority(base.authority().cloned().ok_or_else(refuse)?)
            .path_and_query(named)
            .build()
            .map_err(|_| refuse());
    }
    let absolute: Uri = named.parse().map_err(|_| refuse())?;
    if absolute.scheme() == base.scheme() && absolute.authority() == base.authority() {
        Ok(absolute)
    } else {
        Err(refuse())
    }
}

/// Reads the stream: the first `endpoint` event goes to `endpoint`, each
/// answer to whoever awaits it. Past `max_bytes` in one event the stream
/// is dropped (it can no longer be read in step).
async fn read(
    mut body: hyper::body::Incoming,
    (pending, answers): (Arc<Pending>, mpsc::UnboundedSender<Value>),
    endpoint: oneshot::Sender<String>,
    max_bytes: usize,
) {
    let mut parser = SseParser::new();
    let mut endpoint = Some(endpoint);
    'stream: while let Some(Ok(frame)) = body.frame().await {
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for event in parser.feed(&data) {
            match event.event.as_deref() {
                Some("endpoint") => {
                    if let Some(tx) = endpoint.take() {
                        let _ = tx.send(event.data);
                    }
                }
                None | Some("message") => {
                    if event.data.len() > max_bytes {
                        tracing::warn!(
                            limit = max_bytes,
                            "MCP server sent a message over the limit"
                        );
                        break 'stream;
                    }
                    match serde_json::from_str::<Value>(&event.data) {
                        // The server's own request is answered; its
                        // notifications of progress go to their calls.
                        Ok(message) if message.get("method").is_some() => {
                            match jsonrpc::answer_server_request(&message) {
                                Some(answer) => drop(answers.send(answer)),
                                None => pending.relay(&message),
                            }
                        }
                        Ok(message) => pending.answer(message),
                        Err(_) => {}
                    }
                }
                Some(_) => {}
            }
        }
        if parser.pending_bytes() > max_bytes {
            tracing::warn!(
                limit = max_bytes,
                "MCP server sent a message over the limit"
            );
            break;
        }
    }
    pending.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_on_the_streams_own_server() {
        let base: Uri = "http://127.0.0.1:9000/sse".parse().unwrap();
        let at = |named| resolve(&base, named).map(|u| u.to_string());
        assert_eq!(
            at("/messages/?session_id=ab").unwrap(),
            "http://127.0.0.1:9000/messages/?session_id=ab"
        );
        assert_eq!(
            at("http://127.0.0.1:9000/m?x=1").unwrap(),
            "http://127.0.0.1:9000/m?x=1"
        );
        assert!(at("http://elsewhere:9000/m").is_err());
        assert!(at("//elsewhere/m").is_err());
        assert!(at("https://127.0.0.1:9000/m").is_err());
    }
}
