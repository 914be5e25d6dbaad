//! What the gateway says of itself in MCP's handshake, both ways: as the
//! server its callers initialize, and as the client of its upstream
//! servers.

use serde_json::{Value, json};

/// The revision the gateway speaks to its upstream servers, and offers
/// callers that ask for one it does not know.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// The revisions callers may speak: the current one, and the earlier one
/// clients still send (it allows batches).
pub const SUPPORTED_VERSIONS: [&str; 2] = ["2025-06-18", "2025-03-26"];

/// `initialize`'s parameters as the gateway's upstream client sends them:
/// no client capabilities (it answers no server requests).
pub fn initialize_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The revision a caller is answered in: its own when supported, else the
/// gateway's.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    SUPPORTED_VERSIONS
        .into_iter()
        .find(|v| Some(*v) == requested)
        .unwrap_or(PROTOCOL_VERSION)
}

/// `initialize`'s result for a caller.
pub fn initialize_result(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
        "serverInfo": {"name": "switchyard", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Tools, prompts and resources of the gateway's MCP servers, each named SERVER_NAME.",
    })
}

/// A caller's session: the revision agreed, and the agent session its
/// tool calls belong to.
#[derive(Debug, Clone)]
pub struct McpSession {
    pub version: &'static str,
    pub agent_session: Option<String>,
}
