//! The configured MCP servers as one: their lists merged, each name
//! prefixed with its server's, and each call sent to the server its name
//! says, within the configured time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use http::{HeaderName, HeaderValue};
use serde_json::{Value, json};
use switchyard_policies::{HeaderValueSource, McpSettings, McpTransport};

use crate::mcp::http::HttpServer;
use crate::mcp::jsonrpc::UpstreamError;
use crate::mcp::progress::Progress;
use crate::mcp::sse::SseServer;
use crate::mcp::stdio::StdioServer;

enum Upstream {
    Http(Box<HttpServer>),
    Sse(Box<SseServer>),
    Stdio(Arc<StdioServer>),
}

impl Upstream {
    async fn request(
        &self,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, UpstreamError> {
        match self {
            Upstream::Http(server) => server.request(method, params, progress).await,
            Upstream::Sse(server) => server.request(method, params, progress).await,
            Upstream::Stdio(server) => server.request(method, params, progress).await,
        }
    }
}

/// What the gateway serves at `/mcp`.
pub struct McpServers {
    servers: BTreeMap<String, Upstream>,
    pub timeout: Duration,
    pub max_result_bytes: usize,
    /// Callers' sessions, dropped after an idle hour (and the oldest past
    /// ten thousand): a caller that comes back after is told to
    /// initialize again.
    pub sessions: moka::sync::Cache<String, crate::mcp::session::McpSession>,
    /// Callers' tool calls in flight, which they may cancel.
    pub in_flight: crate::mcp::session::InFlight,
    /// The settings these were made from: a reload that keeps them keeps
    /// the servers (and stdio servers' processes).
    pub settings: McpSettings,
}

/// The kinds of things servers list, with the field that names each.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl Kind {
    fn method(self) -> &'static str {
        match self {
            Kind::Tools => "tools/list",
            Kind::Prompts => "prompts/list",
            Kind::Resources => "resources/list",
            Kind::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The field its list comes in (`tools`, `resourceTemplates`).
    pub fn field(self) -> &'static str {
        match self {
            Kind::Tools => "tools",
            Kind::Prompts => "prompts",
            Kind::Resources => "resources",
            Kind::ResourceTemplates => "resourceTemplates",
        }
    }
}

/// `params` without the caller's `_meta.progressToken`.
fn without_progress_token(params: &Value) -> Value {
    let mut params = params.clone();
    if let Some(meta) = params["_meta"].as_object_mut() {
        meta.remove("progressToken");
    }
    params
}

/// The most pages read of one server's list.
const MAX_PAGES: usize = 20;

impl McpServers {
    /// Connects to (or starts) every configured server.
    pub fn new(
        settings: &McpSettings,
        http: &switchyard_adapters::upstream::HttpClient,
    ) -> Result<Self, String> {
        let mut servers = BTreeMap::new();
        for server in settings.servers.values() {
            let upstream = match &server.transport {
                McpTransport::Http { url, headers, sse } => {
                    let mut values = Vec::new();
                    for (name, value) in headers {
                        let value = match value {
                            HeaderValueSource::Literal(v) => v.clone(),
                            HeaderValueSource::Env(var) => std::env::var(var).map_err(|_| {
                                format!("mcp.servers.{}.headers.{name}: environment variable {var} is not set", server.name)
                            })?,
                        };
                        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                            format!("mcp.servers.{}: `{name}` is not a header name", server.name)
                        })?;
                        let mut value = HeaderValue::from_str(&value).map_err(|_| {
                            format!(
                                "mcp.servers.{}.headers.{name}: not a header value",
                                server.name
                            )
                        })?;
                        value.set_sensitive(true);
                        values.push((name, value));
                    }
                    let (http, max) = (http.clone(), settings.max_result_bytes);
                    if *sse {
                        Upstream::Sse(Box::new(SseServer::new(url, values, http, max)?))
                    } else {
                        Upstream::Http(Box::new(HttpServer::new(url, values, http, max)?))
                    }
                }
                McpTransport::Stdio { program, args, env } => Upstream::Stdio(StdioServer::start(
                    &server.name,
                    program,
                    args,
                    env,
                    settings.max_result_bytes,
                )),
            };
            servers.insert(server.name.clone(), upstream);
        }
        Ok(McpServers {
            servers,
            timeout: settings.timeout,
            max_result_bytes: settings.max_result_bytes,
            sessions: moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_idle(Duration::from_secs(3600))
                .build(),
            in_flight: Default::default(),
            settings: settings.clone(),
        })
    }

    /// How `server` is reached, in OpenTelemetry's `network.transport`
    /// words: `pipe` for a child's stdio, `tcp` for HTTP.
    pub fn network_transport(&self, server: &str) -> &'static str {
        match self.servers.get(server) {
            Some(Upstream::Stdio(_)) => "pipe",
            _ => "tcp",
        }
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// One server's answer within the configured time.
    pub async fn request(
        &self,
        server: &str,
        method: &str,
        params: &Value,
    ) -> Result<Value, UpstreamError> {
        self.request_with_progress(server, method, params, None)
            .await
    }

    /// The same, relaying the progress the server reports to `progress`.
    pub async fn request_with_progress(
        &self,
        server: &str,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, UpstreamError> {
        let upstream = self
            .servers
            .get(server)
            .ok_or_else(|| UpstreamError::Unavailable(format!("no MCP server `{server}`")))?;
        // A caller's own token never reaches a server: there it could
        // name another caller's call (the gateway asks under its own ids).
        let stripped;
        let params = match params["_meta"].get("progressToken") {
            Some(_) if progress.is_none() => {
                stripped = without_progress_token(params);
                &stripped
            }
            _ => params,
        };
        match tokio::time::timeout(self.timeout, upstream.request(method, params, progress)).await {
            Ok(answer) => answer,
            Err(_) => Err(UpstreamError::Unavailable(format!(
                "the tool server did not answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Every server's list of `kind` that `allowed` lets through, names
    /// prefixed with the server's; a server that fails is left out (and
    /// logged), so one down server does not take the others' tools away.
    pub async fn list(&self, kind: Kind, allowed: impl Fn(&str) -> bool) -> Vec<Value> {
        let lists = self
            .servers
            .keys()
            .filter(|name| allowed(name))
            .map(|name| async move { (name, self.list_one(name, kind).await) });
        let mut out = Vec::new();
        for (server, listed) in join_all(lists).await {
            match listed {
                Ok(items) => out.extend(items.into_iter().map(|mut item| {
                    if let Some(name) = item.get("name").and_then(Value::as_str) {
                        item["name"] = json!(format!("{server}_{name}"));
                    }
                    item
                })),
                Err(err) => tracing::warn!(server, ?err, "MCP server's list not read"),
            }
        }
        out
    }

    async fn list_one(&self, server: &str, kind: Kind) -> Result<Vec<Value>, UpstreamError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(cursor) => json!({ "cursor": cursor }),
                None => Value::Null,
            };
            let mut page = self.request(server, kind.method(), &params).await?;
            if let Some(Value::Array(listed)) = page.get_mut(kind.field()).map(Value::take) {
                items.extend(listed);
            }
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
                _ => break,
            }
        }
        Ok(items)
    }

    /// The server and its own name for a prefixed name (`tools_slow_add`
    /// is `slow_add` of `tools`).
    pub fn split<'a>(&self, prefixed: &'a str) -> Option<(&'a str, &'a str)> {
        let (server, name) = prefixed.split_once('_')?;
        (self.servers.contains_key(server) && !name.is_empty()).then_some((server, name))
    }

    /// The server that lists a resource `uri`, asking each in turn.
    pub async fn server_of_resource(
        &self,
        uri: &str,
        allowed: impl Fn(&str) -> bool,
    ) -> Option<String> {
        for server in self.servers.keys().filter(|s| allowed(s)) {
            for kind in [Kind::Resources] {
                if let Ok(items) = self.list_one(server, kind).await
                    && items.iter().any(|r| r["uri"] == uri)
                {
                    return Some(server.clone());
                }
            }
        }
        // A templated resource is the server's own to resolve: the first
        // whose URI scheme matches a template of its.
        for server in self.servers.keys().filter(|s| allowed(s)) {
            if let Ok(items) = self.list_one(server, Kind::ResourceTemplates).await {
                let scheme = uri.split_once(':').map(|(s, _)| s);
                if items.iter().any(|t| {
                    t["uriTemplate"]
                        .as_str()
                        .and_then(|u| u.split_once(':'))
                        .map(|(s, _)| s)
                        == scheme
                }) {
                    return Some(server.clone());
                }
            }
        }
        None
    }
}
