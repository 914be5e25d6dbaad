//! Answers awaited from a server that speaks over one long-lived channel
//! (a child's stdout, an HTTP+SSE stream): each request's id, and where its
//! answer goes when the channel's reader finds it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::mcp::jsonrpc::UpstreamError;
use crate::mcp::progress::{Listeners, Progress, ask_for_progress};

/// Where one request's answer goes.
type Answer = oneshot::Sender<Result<Value, UpstreamError>>;

#[derive(Default)]
pub struct Pending {
    next: AtomicU64,
    /// `None` once the channel is closed.
    waiting: Mutex<Option<HashMap<u64, Answer>>>,
    /// The calls that asked for progress.
    listeners: Listeners,
}

impl Pending {
    pub fn new() -> Self {
        Pending {
            next: AtomicU64::new(1),
            waiting: Mutex::new(Some(HashMap::new())),
            listeners: Listeners::default(),
        }
    }

    /// `params` for request `id`: asking for its progress, and relaying it
    /// to `progress` until it is answered, when there is one.
    pub fn with_progress<'a>(
        &self,
        id: u64,
        params: &'a Value,
        progress: Option<&Progress>,
    ) -> std::borrow::Cow<'a, Value> {
        if let Some(progress) = progress {
            self.listen(id, progress.clone());
        }
        ask_for_progress(params, id, progress.is_some())
    }

    /// Relays request `id`'s progress to `progress` until it is answered.
    pub fn listen(&self, id: u64, progress: Progress) {
        self.listeners.listen(id, progress);
        // Closed meanwhile: nothing will forget it.
        if self.is_closed() {
            self.listeners.forget(id);
        }
    }

    /// Hands a notification read from the channel to the call it is the
    /// progress of, if any.
    pub fn relay(&self, notification: &Value) {
        self.listeners.relay(notification);
    }

    /// A new id, and the answer to the request sent with it. `None` once
    /// the channel is closed.
    pub fn expect(&self) -> Option<(u64, oneshot::Receiver<Result<Value, UpstreamError>>)> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.as_mut()?.insert(id, tx);
        Some((id, rx))
    }

    /// Gives up on an answer (its caller stopped waiting).
    pub fn forget(&self, id: u64) {
        self.listeners.forget(id);
        if let Some(waiting) = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
        {
            waiting.remove(&id);
        }
    }

    /// Whether the channel is closed: its reader has ended.
    pub fn is_closed(&self) -> bool {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_none()
    }

    /// Hands a response read from the channel to whoever awaits it.
    pub fn answer(&self, response: Value) {
        let Some(id) = response.get("id").and_then(Value::as_u64) else {
            return;
        };
        self.listeners.forget(id);
        let sender = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_mut()
            .and_then(|w| w.remove(&id));
        if let Some(sender) = sender {
            let _ = sender.send(UpstreamError::from_response(response));
        }
    }

    /// The channel is gone: every request awaiting an answer fails, and
    /// no new one is taken.
    pub fn close(&self) {
        let waiting = self
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.listeners.clear();
        for (_, sender) in waiting.into_iter().flatten() {
            let _ = sender.send(Err(UpstreamError::Gone));
        }
    }
}

/// What to do for a request whose caller stopped waiting for it (it was
/// cancelled, timed out, or its caller went away): forget its entry and
/// tell its server, run when the guard is dropped before being disarmed.
pub struct IfAbandoned(Option<Box<dyn FnOnce() + Send>>);

impl IfAbandoned {
    pub fn new(then: impl FnOnce() + Send + 'static) -> Self {
        IfAbandoned(Some(Box::new(then)))
    }

    /// The answer came: nothing to do.
    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for IfAbandoned {
    fn drop(&mut self) {
        if let Some(then) = self.0.take() {
            then();
        }
    }
}

/// Runs `work` on the runtime when there is one (a guard dropped while the
/// process shuts down has none, and nothing left to tell).
pub fn spawn_if_running(work: impl std::future::Future<Output = ()> + Send + 'static) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(work);
    }
}
