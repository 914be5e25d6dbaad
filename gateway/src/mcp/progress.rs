//! A tool call's progress, relayed: a caller that sends a `progressToken`
//! (and takes an SSE answer) gets the server's `notifications/progress`
//! for its call as they come. Upstream, the token is the gateway's own id
//! of the call, so two callers' tokens never meet at a shared server;
//! each notification goes back under the caller's token.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::mpsc;

/// Where one call's progress goes.
#[derive(Clone)]
pub struct Progress {
    /// The caller's own token.
    pub token: Value,
    pub sink: mpsc::Sender<Value>,
}

impl Progress {
    /// Passes a server's progress on under the caller's token. Progress
    /// is advisory: when the caller's stream is behind, it is dropped.
    pub fn forward(&self, mut params: Value) {
        if !params.is_object() {
            return;
        }
        params["progressToken"] = self.token.clone();
        let _ = self.sink.try_send(
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}),
        );
    }
}

/// `params` asking the server for progress under the token `id` when
/// progress is `wanted`; as they are otherwise.
pub fn ask_for_progress(params: &Value, id: u64, wanted: bool) -> Cow<'_, Value> {
    if !wanted {
        return Cow::Borrowed(params);
    }
    let mut params = match params {
        Value::Object(_) => params.clone(),
        _ => json!({}),
    };
    if !params["_meta"].is_object() {
        params["_meta"] = json!({});
    }
    params["_meta"]["progressToken"] = json!(id);
    Cow::Owned(params)
}

/// The progress notification's token, when `message` is one.
pub fn token_of(message: &Value) -> Option<u64> {
    (message.get("method")?.as_str()? == "notifications/progress")
        .then(|| message["params"]["progressToken"].as_u64())
        .flatten()
}

/// The calls awaiting progress on one channel (a child's stdout, an
/// HTTP+SSE stream), by the gateway's id of each.
#[derive(Default)]
pub struct Listeners(Mutex<HashMap<u64, Progress>>);

impl Listeners {
    pub fn listen(&self, id: u64, progress: Progress) {
        self.lock().insert(id, progress);
    }

    pub fn forget(&self, id: u64) {
        self.lock().remove(&id);
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Passes a progress notification read from the channel to its call.
    pub fn relay(&self, message: &Value) {
        if let Some(id) = token_of(message)
            && let Some(progress) = self.lock().get(&id)
        {
            progress.forward(message["params"].clone());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Progress>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_goes_back_under_the_callers_token() {
        let (sink, mut got) = mpsc::channel(4);
        let listeners = Listeners::default();
        listeners.listen(
            7,
            Progress {
                token: json!("caller-token"),
                sink,
            },
        );
        let sent = json!({"name": "t", "_meta": {"progressToken": 1}});
        assert_eq!(
            ask_for_progress(&sent, 7, true)["_meta"]["progressToken"],
            7
        );
        assert_eq!(
            *ask_for_progress(&sent, 7, false),
            sent,
            "not asked, as sent"
        );
        listeners.relay(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 7, "progress": 1, "total": 2}}),
        );
        // Another call's, and not progress at all: neither is relayed.
        listeners.relay(
            &json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 8, "progress": 1}}),
        );
        listeners.relay(&json!({"jsonrpc": "2.0", "method": "notifications/message",
            "params": {"progressToken": 7}}));
        let relayed = got.try_recv().unwrap();
        assert_eq!(relayed["params"]["progressToken"], "caller-token");
        assert_eq!(relayed["params"]["total"], 2);
        assert!(got.try_recv().is_err());
    }
}
