//! Rows for model requests that no backend call recorded: refused before
//! any backend was called (rate limit, budget, open breaker, full queue,
//! a request the gateway cannot take) or dropped because the client left
//! first. Every model request then has a row, whatever path refused it,
//! without each refusal remembering to write one: the guard is made as the
//! request comes in, and a request record made for it stands it down.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use http::{HeaderValue, Request, Response};
use switchyard_policies::SensitiveAction;
use switchyard_router::Decision;

use crate::admit::access::Caller;
use crate::error::{Dialect, ErrorNote};
use crate::http::Body;
use crate::http::request_id::{header_text, request_ids};
use crate::ledger::{LedgerRow, now_ms};
use crate::state::app::App;

/// Shared by a request's guard and its records: whether a record has
/// taken over its row, and where routing sent it (for the refusal's row).
pub struct Accounted {
    recorded: AtomicBool,
    decided: std::sync::OnceLock<(Option<Arc<str>>, usize)>,
    /// When the handler took the request, and whether its first call has
    /// measured the gateway's time before it.
    arrived: Instant,
    overhead_measured: AtomicBool,
    /// The request's ids (ours, the caller's), read from it once for the
    /// guard's row and its records' rows.
    ids: (Option<HeaderValue>, Option<HeaderValue>),
}

impl Accounted {
    fn new(ids: (Option<HeaderValue>, Option<HeaderValue>)) -> Self {
        Accounted {
            recorded: AtomicBool::new(false),
            decided: std::sync::OnceLock::new(),
            arrived: Instant::now(),
            overhead_measured: AtomicBool::new(false),
            ids,
        }
    }

    /// The request's own id and the caller's, as its rows keep them.
    pub fn request_ids(&self) -> (Option<HeaderValue>, Option<HeaderValue>) {
        self.ids.clone()
    }

    /// The time since the request arrived, for its first backend call only
    /// (a retry's or fallback's would count the calls before it).
    pub fn first_call_overhead(&self) -> Option<std::time::Duration> {
        (!self.overhead_measured.swap(true, Ordering::Relaxed)).then(|| self.arrived.elapsed())
    }

    /// A backend call of the request has a record, which writes a row
    /// however the call ends.
    pub fn recorded(&self) {
        self.recorded.store(true, Ordering::Release);
    }

    /// The request was routed: its route and first-choice backend.
    pub fn decided(&self, app: &App, decision: &Decision) {
        let route = decision.route.map(|r| app.router.shared_route_name(r));
        let _ = self.decided.set((route, decision.primary()));
    }
}

/// Writes a model request's row if nothing else does: when it is answered
/// with an error no record covers, or dropped unanswered (the client left).
pub struct RefusalGuard {
    app: Arc<App>,
    accounted: Arc<Accounted>,
    endpoint: &'static str,
    dialect: Dialect,
    caller: Option<Caller>,
    ts_ms: i64,
    answered: bool,
}

impl RefusalGuard {
    /// A guard for a model request, whose records find its `Accounted` in
    /// the request's extensions.
    pub fn new<B>(
        app: &Arc<App>,
        req: &mut Request<B>,
        endpoint: &'static str,
        dialect: Dialect,
    ) -> Self {
        let accounted = Arc::new(Accounted::new(request_ids(req.headers(), req.extensions())));
        req.extensions_mut().insert(accounted.clone());
        RefusalGuard {
            app: app.clone(),
            accounted,
            endpoint,
            dialect,
            caller: req.extensions().get::<Caller>().cloned(),
            ts_ms: now_ms(),
            answered: false,
        }
    }

    /// The request is answered with `response`: an error answer no record
    /// covers becomes a refusal row.
    pub fn answered(mut self, response: &Response<Body>) {
        self.answered = true;
        if let Some(note) = response.extensions().get::<ErrorNote>() {
            self.write(note.kind, &note.message, note.sensitive.clone());
        }
    }

    fn write(&self, status: &'static str, why: &str, sensitive: Option<(String, SensitiveAction)>) {
        if self.accounted.recorded.load(Ordering::Acquire) {
            return;
        }
        let (route, backend) = match self.accounted.decided.get() {
            Some((route, index)) => {
                let backend = &self.app.backends[*index];
                (route.clone(), Some(backend))
            }
            None => (None, None),
        };
        let key = self.caller.as_ref().map(|c| &c.key);
        let (request_id, client_request_id) = &self.accounted.ids;
        let row = LedgerRow {
            request_id: header_text(request_id.as_ref()),
            client_request_id: header_text(client_request_id.as_ref()),
            key: key.map(|k| k.name.clone()),
            team: key.and_then(|k| k.team.clone()),
            route,
            backend: backend.map(|b| b.name.clone()).unwrap_or_default(),
            tier: backend.map_or("", |b| b.tier.as_str()),
            provider: backend.map(|b| b.peer.provider),
            refusal: Some(why.to_owned()),
            sensitive: sensitive.map(|(kinds, action)| {
                std::sync::Arc::new(switchyard_router::sensitive::Handling {
                    kinds,
                    action,
                    masker: None,
                })
            }),
            ..LedgerRow::unbilled(
                self.ts_ms,
                (self.dialect.name(), self.endpoint),
                (status, "refused"),
                self.accounted.arrived.elapsed().as_secs_f64() * 1000.0,
            )
        };
        self.app.metrics.refused(status);
        self.app.ledger.write_detached(row);
    }
}

impl Drop for RefusalGuard {
    fn drop(&mut self) {
        if !self.answered {
            self.write("cancelled", "the client left before an answer", None);
        }
    }
}
