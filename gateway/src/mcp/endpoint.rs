//! `/mcp`: MCP's streamable-HTTP transport (revisions 2025-06-18 and
//! 2025-03-26) over the configured servers. Each POST carries one message
//! (or, in 2025-03-26, a batch); requests are answered with JSON (a tool
//! call that asks for progress, with an SSE stream of it and then the
//! answer), and a body of notifications only with 202. A session begins at `initialize`
//! (its id in `Mcp-Session-Id`) and ends with DELETE; the gateway sends
//! callers nothing unasked, so GET (a stream for that) is a 405.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::ALLOW;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use opentelemetry::KeyValue;
use serde_json::{Value, json};

use crate::admit::access::Caller;
use crate::error::GatewayError;
use crate::http::{Body, empty_response, json_response, sse_response};
use crate::mcp::jsonrpc::{
    self, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, Message, PARSE_ERROR,
    REQUEST_CANCELLED, UpstreamError,
};
use crate::mcp::progress::Progress;
use crate::mcp::servers::{Kind, McpServers};
use crate::mcp::session::{McpSession, SUPPORTED_VERSIONS, initialize_result, negotiate};
use crate::mcp::tool_row::{Recording, ToolCall};
use crate::state::app::App;
use crate::telemetry::{RequestTrace, names};

const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");

pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let Some(servers) = app.mcp.as_deref() else {
        return Err(GatewayError::NotFound {
            path: req.uri().path().to_owned(),
        });
    };
    match *req.method() {
        Method::POST => post(app, servers, req).await,
        Method::DELETE => Ok(end_session(servers, &req)),
        _ => {
            let mut response = empty_response(StatusCode::METHOD_NOT_ALLOWED);
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST, DELETE"));
            Ok(response)
        }
    }
}

/// Ends a session, if the caller's key began it.
fn end_session(servers: &McpServers, req: &Request<Incoming>) -> Response<Body> {
    let id = req
        .headers()
        .get(SESSION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let key = req
        .extensions()
        .get::<Caller>()
        .map(|c| c.key.name.as_str());
    let owned = servers
        .sessions
        .get(id)
        .is_some_and(|s| s.key.as_deref() == key);
    let status = if owned && servers.sessions.remove(id).is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    };
    json_response(status, &json!({}))
}

fn rpc_failure(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    json_response(status, &jsonrpc::error(&Value::Null, code, message))
}

async fn post(
    app: &App,
    servers: &McpServers,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let Ok(parsed) = serde_json::from_slice::<Value>(&bytes) else {
        return Ok(rpc_failure(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            "the body is not JSON",
        ));
    };
    let caller = parts.extensions.get::<Caller>();
    let batch = parsed.is_array();
    let mut messages: Vec<Message> = match parsed {
        Value::Array(items) if items.is_empty() => {
            return Ok(rpc_failure(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                "an empty batch",
            ));
        }
        Value::Array(items) => items.into_iter().map(Message::read).collect(),
        one => vec![Message::read(one)],
    };
    // A probe of the stateless revision (2026-07-28) comes before
    // `initialize`: answered at once, it sends the caller to the handshake.
    if let [Message::Request { id, method, .. }] = messages.as_slice()
        && method == "server/discover"
    {
        return Ok(json_response(
            StatusCode::OK,
            &jsonrpc::error(
                id,
                METHOD_NOT_FOUND,
                "server/discover: this server speaks 2025-06-18 and 2025-03-26; initialize",
            ),
        ));
    }
    let initializing = messages
        .iter()
        .any(|m| matches!(m, Message::Request { method, .. } if method == "initialize"));
    if initializing && batch {
        return Ok(rpc_failure(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "initialize may not be batched",
        ));
    }
    let header_version = parts.headers.get(VERSION).and_then(|v| v.to_str().ok());
    if let Some(version) = header_version
        && !initializing
        && !SUPPORTED_VERSIONS.contains(&version)
    {
        return Ok(rpc_failure(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            &format!("MCP-Protocol-Version {version} is not one of 2025-06-18, 2025-03-26"),
        ));
    }
    let session = if initializing {
        None
    } else {
        match parts.headers.get(SESSION).and_then(|v| v.to_str().ok()) {
            None => {
                return Ok(rpc_failure(
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    "Mcp-Session-Id is missing: initialize first",
                ));
            }
            Some(id) => match servers
                .sessions
                .get(id)
                .filter(|s| s.key.as_deref() == caller.map(|c| c.key.name.as_str()))
            {
                Some(session) => Some((id.to_owned(), session)),
                None => {
                    return Ok(rpc_failure(
                        StatusCode::NOT_FOUND,
                        INVALID_REQUEST,
                        "no such session: initialize again",
                    ));
                }
            },
        }
    };
    if batch
        && session
            .as_ref()
            .is_some_and(|(_, s)| s.version != "2025-03-26")
    {
        return Ok(rpc_failure(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "batches are 2025-03-26's; send one message per request",
        ));
    }
    if let Some(streamed) = stream_if_asked(app, &parts, &mut messages, session.as_ref()) {
        return Ok(streamed);
    }
    let mut answers = Vec::new();
    let mut new_session = None;
    for message in messages {
        match message {
            Message::Request { id, method, params } if method == "initialize" => {
                let version = negotiate(params["protocolVersion"].as_str());
                let session_id = new_session_id();
                servers.sessions.insert(
                    session_id.clone(),
                    McpSession {
                        version,
                        agent_session: agent_session(&parts.headers),
                        key: caller.map(|c| c.key.name.clone()),
                    },
                );
                new_session = Some(session_id);
                answers.push(jsonrpc::result(&id, initialize_result(version)));
            }
            Message::Request { id, method, params } => {
                let context = Context {
                    app,
                    servers,
                    caller,
                    session: session.as_ref().map(|(id, s)| (id.as_str(), s)),
                    headers: &parts.headers,
                    trace: parts.extensions.get::<RequestTrace>(),
                };
                answers.push(context.answer(&id, &method, params).await);
            }
            Message::Invalid { id, why } => answers.push(jsonrpc::error(&id, INVALID_REQUEST, why)),
            // The caller no longer wants an answer: its call is stopped,
            // and the server told (as every abandoned call's is).
            Message::Notification { method, params } if method == "notifications/cancelled" => {
                if let Some((session, _)) = &session {
                    servers.in_flight.cancel(session, &params["requestId"]);
                }
            }
            Message::Notification { .. } | Message::Response => {}
        }
    }
    let mut response = match (answers.len(), batch) {
        (0, _) => empty_response(StatusCode::ACCEPTED),
        (_, true) => json_response(StatusCode::OK, &Value::Array(answers)),
        (_, false) => json_response(StatusCode::OK, &answers.swap_remove(0)),
    };
    if let Some(id) = new_session
        && let Ok(value) = HeaderValue::from_str(&id)
    {
        response.headers_mut().insert(SESSION, value);
    }
    Ok(response)
}

/// How many of a call's progress notifications may wait for a slow
/// caller; past them, progress (advisory) is dropped.
const PROGRESS_BACKLOG: usize = 64;

/// A lone `tools/call` that asks for progress (a `progressToken`) from a
/// caller that takes SSE is answered as an event stream: the server's
/// progress as it comes, then the answer, and the stream ends. The call
/// runs in a task of its own that finishes (and records its row) even if
/// the caller goes away first.
fn stream_if_asked(
    app: &App,
    parts: &http::request::Parts,
    messages: &mut Vec<Message>,
    session: Option<&(String, McpSession)>,
) -> Option<Response<Body>> {
    let [Message::Request { method, params, .. }] = messages.as_slice() else {
        return None;
    };
    let takes_sse = parts
        .headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/event-stream"));
    let token = params["_meta"]["progressToken"].clone();
    if method != "tools/call" || !(token.is_string() || token.is_number()) || !takes_sse {
        return None;
    }
    let (app, servers) = (app.shared()?, app.mcp.clone()?);
    let Some(Message::Request { id, params, .. }) = messages.pop() else {
        return None;
    };
    let caller = parts.extensions.get::<Caller>().cloned();
    let trace = parts.extensions.get::<RequestTrace>().cloned();
    let (headers, session) = (parts.headers.clone(), session.cloned());
    let (sink, events) = tokio::sync::mpsc::channel(PROGRESS_BACKLOG);
    let answers = sink.clone();
    tokio::spawn(async move {
        let context = Context {
            app: &app,
            servers: &servers,
            caller: caller.as_ref(),
            session: session.as_ref().map(|(id, s)| (id.as_str(), s)),
            headers: &headers,
            trace: trace.as_ref(),
        };
        let progress = Progress { token, sink };
        let answer = context.call_tool(&id, params, Some(progress)).await;
        // A cancelled call is not answered (MCP's rule): the stream ends.
        if answer["error"]["code"] != json!(REQUEST_CANCELLED) {
            let _ = answers.send(answer).await;
        }
    });
    // Progress notifications, then the answer (the one message with no
    // `method`), and the stream ends.
    let stream = futures_util::stream::unfold(Some(events), |events| async move {
        let mut events = events?;
        let message = events.recv().await?;
        let last = message.get("method").is_none();
        let event = Bytes::from(format!("event: message\ndata: {message}\n\n"));
        Some((event, (!last).then_some(events)))
    });
    Some(sse_response(stream))
}

/// The agent session a caller's tool calls belong to: read as the model
/// endpoints read it (`x-session-id`, or the agents' own session headers),
/// so that both land in one session.
fn agent_session(headers: &HeaderMap) -> Option<String> {
    crate::route::view::session_header(headers).map(str::to_owned)
}

fn new_session_id() -> String {
    format!("{:032x}", rand::random::<u128>())
}

struct Context<'a> {
    app: &'a App,
    servers: &'a McpServers,
    caller: Option<&'a Caller>,
    /// The caller's MCP session: its id, and what it agreed.
    session: Option<(&'a str, &'a McpSession)>,
    headers: &'a HeaderMap,
    trace: Option<&'a RequestTrace>,
}

impl Context<'_> {
    /// Whether the caller's key may reach `server`'s `tool` (or the
    /// server at all, with no tool).
    fn allowed(&self, server: &str, tool: Option<&str>) -> bool {
        self.caller
            .is_none_or(|c| self.app.keys.may_use_mcp(c, server, tool))
    }

    async fn answer(&self, id: &Value, method: &str, params: Value) -> Value {
        let listed = |kind| async move {
            let items = self.servers.list(kind, |s| self.allowed(s, None)).await;
            let items = match kind {
                Kind::Tools => items
                    .into_iter()
                    .filter(|t| {
                        t["name"]
                            .as_str()
                            .and_then(|n| self.servers.split(n))
                            .is_some_and(|(s, tool)| self.allowed(s, Some(tool)))
                    })
                    .collect(),
                _ => items,
            };
            json!({ kind.field(): items })
        };
        match method {
            "ping" => jsonrpc::result(id, json!({})),
            "tools/list" => jsonrpc::result(id, listed(Kind::Tools).await),
            "prompts/list" => jsonrpc::result(id, listed(Kind::Prompts).await),
            "resources/list" => jsonrpc::result(id, listed(Kind::Resources).await),
            "resources/templates/list" => {
                jsonrpc::result(id, listed(Kind::ResourceTemplates).await)
            }
            "tools/call" => self.call_tool(id, params, None).await,
            "prompts/get" => self.named(id, "prompts/get", params).await,
            "resources/read" => self.read_resource(id, params).await,
            _ => jsonrpc::error(id, METHOD_NOT_FOUND, &format!("no method `{method}` here")),
        }
    }

    /// A prompt by its prefixed name.
    async fn named(&self, id: &Value, method: &str, mut params: Value) -> Value {
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let Some((server, own)) = self
            .servers
            .split(&name)
            .filter(|(s, _)| self.allowed(s, None))
        else {
            return jsonrpc::error(id, INVALID_PARAMS, &format!("no prompt `{name}`"));
        };
        params["name"] = json!(own);
        reply(id, self.servers.request(server, method, &params).await)
    }

    async fn read_resource(&self, id: &Value, params: Value) -> Value {
        let uri = params["uri"].as_str().unwrap_or_default();
        match self
            .servers
            .server_of_resource(uri, |s| self.allowed(s, None))
            .await
        {
            Some(server) => reply(
                id,
                self.servers
                    .request(&server, "resources/read", &params)
                    .await,
            ),
            None => jsonrpc::error(id, INVALID_PARAMS, &format!("no resource `{uri}`")),
        }
    }

    /// A tool call span's attributes: MCP's client ones, and ours.
    fn span_attributes(
        &self,
        id: &Value,
        server: &str,
        agent_session: Option<&str>,
    ) -> Vec<KeyValue> {
        // The caller's side of the call (its request id and session at
        // `/mcp`), under our own names: MCP's `jsonrpc.request.id` and
        // `mcp.session.id` on this CLIENT span would mean the upstream's.
        let mut attributes = vec![
            KeyValue::new(names::MCP_SERVER, server.to_owned()),
            KeyValue::new(
                names::NETWORK_TRANSPORT,
                self.servers.network_transport(server),
            ),
            KeyValue::new(
                names::MCP_CALLER_REQUEST_ID,
                match id {
                    Value::String(id) => id.clone(),
                    other => other.to_string(),
                },
            ),
        ];
        if let Some((id, session)) = self.session {
            attributes.push(KeyValue::new(names::MCP_CALLER_SESSION_ID, id.to_owned()));
            attributes.push(KeyValue::new(
                names::MCP_CALLER_PROTOCOL_VERSION,
                session.version,
            ));
        }
        if let Some(agent_session) = agent_session {
            attributes.push(KeyValue::new(names::SESSION, agent_session.to_owned()));
        }
        attributes
    }

    /// A tool call: sent to its server, timed, sized and recorded; its
    /// progress relayed to `progress` when the caller takes it.
    async fn call_tool(&self, id: &Value, mut params: Value, progress: Option<Progress>) -> Value {
        let name = params["name"].as_str().unwrap_or_default().to_owned();
        let Some((server, tool)) = self.servers.split(&name) else {
            return jsonrpc::error(id, INVALID_PARAMS, &format!("Unknown tool: {name}"));
        };
        if !self.allowed(server, Some(tool)) {
            return jsonrpc::error(
                id,
                INVALID_PARAMS,
                &format!("tool `{name}` is not allowed for this key"),
            );
        }
        params["name"] = json!(tool);
        let bytes_in = params.to_string().len();
        // Codex CLI sends no session header to its MCP servers; its
        // session id comes in the call's `_meta` instead.
        let agent_session = self
            .session
            .and_then(|(_, s)| s.agent_session.clone())
            .or_else(|| agent_session(self.headers))
            .or_else(|| params["_meta"]["sessionId"].as_str().map(str::to_owned));
        let span = self.trace.and_then(|trace| {
            trace.tool_call(
                &name,
                SystemTime::now(),
                self.span_attributes(id, server, agent_session.as_deref()),
            )
        });
        // The call carries its span's trace context, so a tool server's
        // own traces join the caller's.
        if let Some(context) = span.as_ref().and_then(|s| s.trace_context())
            && let Ok(traceparent) = context.traceparent.to_str()
        {
            if !params["_meta"].is_object() {
                params["_meta"] = json!({});
            }
            params["_meta"]["traceparent"] = json!(traceparent);
        }
        let recording = Recording::start(
            self.app,
            ToolCall {
                server,
                tool,
                caller: self.caller,
                session: agent_session,
                ts_ms: crate::ledger::now_ms(),
                duration: Duration::ZERO,
                outcome: "ok",
                bytes_in,
                bytes_out: 0,
            },
            span,
        );
        let call =
            self.servers
                .request_with_progress(server, "tools/call", &params, progress.as_ref());
        let answer = match self.session {
            Some((session, _)) => {
                let in_flight = self.servers.in_flight.start(session, id);
                tokio::select! {
                    answer = call => answer,
                    () = in_flight.cancelled() => Err(UpstreamError::Cancelled),
                }
            }
            None => call.await,
        };
        let (answer, outcome) = match answer {
            Ok(result) => {
                let failed = result["isError"] == json!(true);
                (
                    jsonrpc::result(id, result),
                    if failed { "tool_error" } else { "ok" },
                )
            }
            // A server that died mid-call: an error result, as a tool
            // that failed would give.
            Err(UpstreamError::Gone) => (
                jsonrpc::result(
                    id,
                    json!({"content": [{"type": "text", "text": "the tool server exited during the call"}], "isError": true}),
                ),
                "server_gone",
            ),
            // Nobody reads this answer: the caller cancelled the call.
            Err(err @ UpstreamError::Cancelled) => (
                json!({"jsonrpc": "2.0", "id": id, "error": err.to_error()}),
                "cancelled",
            ),
            Err(err @ UpstreamError::Unavailable(_)) => (
                json!({"jsonrpc": "2.0", "id": id, "error": err.to_error()}),
                "unavailable",
            ),
            Err(err) => (
                json!({"jsonrpc": "2.0", "id": id, "error": err.to_error()}),
                "error",
            ),
        };
        recording.finish(outcome, answer.to_string().len());
        answer
    }
}

fn reply(id: &Value, answer: Result<Value, UpstreamError>) -> Value {
    match answer {
        Ok(result) => jsonrpc::result(id, result),
        Err(err) => json!({"jsonrpc": "2.0", "id": id, "error": err.to_error()}),
    }
}
