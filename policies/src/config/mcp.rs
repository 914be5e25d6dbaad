//! `mcp:`: the upstream MCP servers whose tools, prompts and resources the
//! gateway's `/mcp` endpoint serves as one, each name prefixed with its
//! server's (`tools_slow_add` is the tool `slow_add` of the server `tools`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcp {
    #[serde(default)]
    pub servers: BTreeMap<String, RawMcpServer>,
    /// How long a tool call may take (60 s when unset).
    pub timeout_ms: Option<u64>,
    /// The largest answer read from a server (4 MiB when unset).
    pub max_result_bytes: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpServer {
    /// A streamable-HTTP (or, with `transport: sse`, an HTTP+SSE) server.
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub transport: Option<String>,
    /// A stdio server: the program and its arguments.
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// The MCP servers, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct McpSettings {
    pub servers: BTreeMap<String, McpServer>,
    pub timeout: Duration,
    pub max_result_bytes: usize,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            servers: BTreeMap::new(),
            timeout: Duration::from_secs(60),
            max_result_bytes: 4 << 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct McpServer {
    pub name: String,
    pub transport: McpTransport,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// Streamable HTTP (2025-03-26 onward), or the older HTTP+SSE
    /// transport when `sse`. Header values may be `env:NAME` references.
    Http {
        url: String,
        headers: Vec<(String, HeaderValueSource)>,
        sse: bool,
    },
    /// A child process the gateway starts and restarts, speaking
    /// newline-delimited JSON-RPC on its standard input and output.
    Stdio {
        program: String,
        args: Vec<String>,
        env: Vec<(String, String)>,
    },
}

/// A header value written in config, or read from the environment.
#[derive(Debug, Clone, PartialEq)]
pub enum HeaderValueSource {
    Literal(String),
    Env(String),
}

pub(super) fn validate_mcp(ck: &Checker<'_>, raw: RawMcp) -> Result<McpSettings, ConfigError> {
    let defaults = McpSettings::default();
    if raw.timeout_ms == Some(0) {
        return Err(ck.error(&["mcp", "timeout_ms"], "must be positive"));
    }
    if raw.max_result_bytes == Some(0) {
        return Err(ck.error(&["mcp", "max_result_bytes"], "must be positive"));
    }
    let mut servers = BTreeMap::new();
    for (name, server) in raw.servers {
        let path = ["mcp", "servers", name.as_str()];
        // Names prefix tools with `_` between: a name holding one would
        // make `a_b_c` ambiguous.
        let plain = !name.is_empty()
            && name.len() <= 32
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !plain {
            return Err(ck.error(
                &path,
                "server names use letters, digits and - only (tools are named SERVER_TOOL)",
            ));
        }
        let transport = match (server.url, server.command) {
            (Some(url), None) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ck.error(
                        &[&path[..], &["url"]].concat(),
                        format!("`{url}` is not an http:// or https:// URL"),
                    ));
                }
                let sse = match server.transport.as_deref() {
                    None | Some("streamable_http") => false,
                    Some("sse") => true,
                    Some(other) => {
                        return Err(ck.error(
                            &[&path[..], &["transport"]].concat(),
                            format!("`{other}` is not `streamable_http` or `sse`"),
                        ));
                    }
                };
                let headers = server
                    .headers
                    .into_iter()
                    .map(|(k, v)| {
                        let value = match v.strip_prefix("env:") {
                            Some(var) => HeaderValueSource::Env(var.to_owned()),
                            None => HeaderValueSource::Literal(v),
                        };
                        (k, value)
                    })
                    .collect();
                McpTransport::Http { url, headers, sse }
            }
            (None, Some(command)) => {
                let mut command = command.into_iter();
                let Some(program) = command.next().filter(|p| !p.is_empty()) else {
                    return Err(ck.error(
                        &[&path[..], &["command"]].concat(),
                        "name the program to run",
                    ));
                };
                if server.transport.is_some() || !server.headers.is_empty() {
                    return Err(ck.error(&path, "`transport` and `headers` are for `url` servers"));
                }
                McpTransport::Stdio {
                    program,
                    args: command.collect(),
                    env: server.env.into_iter().collect(),
                }
            }
            _ => return Err(ck.error(&path, "set one of `url` or `command`")),
        };
        servers.insert(name.clone(), McpServer { name, transport });
    }
    Ok(McpSettings {
        servers,
        timeout: raw
            .timeout_ms
            .map_or(defaults.timeout, Duration::from_millis),
        max_result_bytes: raw.max_result_bytes.unwrap_or(defaults.max_result_bytes),
    })
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    fn mcp(section: &str) -> Result<super::McpSettings, crate::config::ConfigError> {
        let text = format!(
            "backends:\n  s:\n    tier: small\n    sim: {{preset: small}}\nmcp:\n{section}\n"
        );
        Config::from_yaml(&text, "t.yaml").map(|c| c.mcp)
    }

    #[test]
    fn servers_are_urls_or_commands_named_for_their_tools() {
        let settings = mcp("  servers:\n    tools: {command: [python, t.py]}\n    web: {url: 'http://127.0.0.1:9/mcp', headers: {authorization: 'env:TOKEN'}}").unwrap();
        assert_eq!(settings.servers.len(), 2);
        assert!(matches!(
            &settings.servers["web"].transport,
            super::McpTransport::Http { headers, sse: false, .. }
                if headers[0].1 == super::HeaderValueSource::Env("TOKEN".into())
        ));
        for (section, path) in [
            (
                "  servers:\n    my_tools: {command: [x]}",
                "mcp.servers.my_tools",
            ),
            ("  servers:\n    t: {url: 'ftp://x'}", "mcp.servers.t.url"),
            (
                "  servers:\n    t: {url: 'http://x', command: [y]}",
                "mcp.servers.t",
            ),
            ("  servers:\n    t: {command: []}", "mcp.servers.t.command"),
            (
                "  servers:\n    t: {url: 'http://x', transport: websocket}",
                "mcp.servers.t.transport",
            ),
            ("  timeout_ms: 0", "mcp.timeout_ms"),
        ] {
            assert_eq!(mcp(section).unwrap_err().path, path, "{section}");
        }
    }
}
