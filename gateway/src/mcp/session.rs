//! What the gateway says of itself in MCP's handshake, both ways: as the
//! server its callers initialize, and as the client of its upstream
//! servers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::Notify;

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
    /// The key that began it: only that key may use it (or cancel its
    /// calls); to another, it does not exist.
    pub key: Option<String>,
}

/// Callers' calls in flight, by session and request id, so that the
/// caller's `notifications/cancelled` (sent in a request of its own) can
/// stop one.
#[derive(Default)]
pub struct InFlight(Mutex<HashMap<(String, String), Arc<Notify>>>);

impl InFlight {
    /// Notes a call; it is forgotten when the returned guard drops.
    pub fn start(&self, session: &str, id: &Value) -> InFlightCall<'_> {
        let key = (session.to_owned(), id.to_string());
        let notify = Arc::new(Notify::new());
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), Arc::clone(&notify));
        InFlightCall {
            calls: self,
            key,
            notify,
        }
    }

    /// Stops the session's call `id`, if it is in flight.
    pub fn cancel(&self, session: &str, id: &Value) {
        let key = (session.to_owned(), id.to_string());
        if let Some(notify) = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            // A permit is kept should the call not be waiting yet.
            notify.notify_one();
        }
    }
}

/// One call in flight.
pub struct InFlightCall<'a> {
    calls: &'a InFlight,
    key: (String, String),
    notify: Arc<Notify>,
}

impl InFlightCall<'_> {
    /// Resolves when the caller cancels the call.
    pub async fn cancelled(&self) {
        self.notify.notified().await;
    }
}

impl Drop for InFlightCall<'_> {
    fn drop(&mut self) {
        let mut calls = self.calls.0.lock().unwrap_or_else(PoisonError::into_inner);
        // A later call under the same id (a caller reusing ids) keeps its
        // own entry.
        if calls
            .get(&self.key)
            .is_some_and(|n| Arc::ptr_eq(n, &self.notify))
        {
            calls.remove(&self.key);
        }
    }
}
