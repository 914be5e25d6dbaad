//! Decision receipts: `x-switchyard-*` response headers that tell the caller
//! (and dashboards) how a request was routed. The names are a contract.

use http::{HeaderMap, HeaderValue};
use switchyard_router::{Decision, Reason};

use crate::app::App;

pub const ROUTE: &str = "x-switchyard-route";
pub const BACKEND: &str = "x-switchyard-backend";
pub const TIER: &str = "x-switchyard-tier";
pub const REASON: &str = "x-switchyard-reason";
pub const PREDICTED_TTFT: &str = "x-switchyard-predicted-ttft-ms";

/// Which backend served (or last failed) and why it was that one.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub backend: usize,
    pub reason: Reason,
}

impl Served {
    pub fn first_choice(decision: &Decision) -> Self {
        Served {
            backend: decision.primary(),
            reason: decision.reason,
        }
    }
}

pub fn apply(app: &App, decision: &Decision, served: Served, headers: &mut HeaderMap) {
    let backend = &app.backends[served.backend];
    // Config validation keeps names to a header-safe alphabet.
    let value = |s: &str| HeaderValue::from_str(s).ok();
    if let Some(route) = decision.route.and_then(|r| value(app.router.route_name(r))) {
        headers.insert(ROUTE, route);
    }
    if let Some(name) = value(&backend.name) {
        headers.insert(BACKEND, name);
    }
    headers.insert(TIER, HeaderValue::from_static(backend.tier.as_str()));
    headers.insert(REASON, HeaderValue::from_static(served.reason.as_str()));
    if decision.predicted_ttft_ms.is_finite() {
        headers.insert(
            PREDICTED_TTFT,
            HeaderValue::from(decision.predicted_ttft_ms.round() as u64),
        );
    }
}
