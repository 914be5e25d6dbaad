//! Decision receipts: `x-switchyard-*` response headers that tell the caller
//! (and dashboards) how a request was routed. The names are a contract.

use http::{HeaderMap, HeaderValue};

use crate::app::App;
use crate::routing::Decision;

pub const ROUTE: &str = "x-switchyard-route";
pub const BACKEND: &str = "x-switchyard-backend";
pub const TIER: &str = "x-switchyard-tier";
pub const REASON: &str = "x-switchyard-reason";

pub fn apply(app: &App, decision: &Decision, headers: &mut HeaderMap) {
    let backend = &app.backends[decision.backend];
    // Config validation keeps names to a header-safe alphabet.
    let value = |s: &str| HeaderValue::from_str(s).ok();
    if let Some(route) = decision.route.as_deref().and_then(value) {
        headers.insert(ROUTE, route);
    }
    if let Some(name) = value(&backend.name) {
        headers.insert(BACKEND, name);
    }
    headers.insert(TIER, HeaderValue::from_static(backend.tier.as_str()));
    headers.insert(REASON, HeaderValue::from_static(decision.reason.as_str()));
}
