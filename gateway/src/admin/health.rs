//! Liveness and readiness for load balancers and Kubernetes probes, and
//! the Prometheus scrape.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;

use crate::admin::scrape::{Scrape, content_type};
use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::state::app::App;

/// The process is up and answering.
pub fn live() -> Response<Body> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// The gateway takes new requests: not when it is draining for shutdown,
/// so a load balancer stops sending before the listener closes.
/// Each backend's breaker and health checks are shown to the admin key
/// (or to anyone when the config sets no keys): probes need only the
/// status, and backend names and errors are the operator's.
pub fn ready(app: &App, headers: &http::HeaderMap) -> Response<Body> {
    if app.is_shutting_down() {
        return GatewayError::ShuttingDown.into_response();
    }
    // Ready while Redis or the ledger's database is away: each request is
    // still answered in its caller's dialect (refused, spooled or enforced
    // locally), which a pod taken out of its Service could not do, and
    // every replica would go unready at once.
    let ledger = &app.ledger;
    // Each backend's breaker, and what its health checks found (none
    // without `health_check`): ready either way, as routes fall back.
    let detailed = app.keys.is_open() || app.keys.is_admin(headers);
    let backends: Vec<serde_json::Value> = app
        .backends
        .iter()
        .zip(app.config.backends.values())
        .map(|(handle, config)| {
            // Credentials the gateway fetches itself (Vertex's tokens, a
            // web identity's AWS keys); none for keys given in config.
            let credentials = handle
                .replicas
                .first()
                .and_then(|r| r.provider.credentials())
                .map(|c| {
                    json!({
                        "source": c.source,
                        "state": c.state.as_str(),
                        "expires_in_s": c.expires_in.map(|d| d.as_secs()),
                        "last_error": c.last_error,
                    })
                });
            json!({
                "name": handle.name,
                "tier": handle.tier.as_str(),
                "breaker": handle.breaker.state(),
                "in_flight": handle.in_flight.load(std::sync::atomic::Ordering::Relaxed),
                "health": config.health_check.as_ref().map(|_| handle.breaker.health()),
                "credentials": credentials,
            })
        })
        .collect();
    let backends = if detailed {
        json!(backends)
    } else {
        let open = backends.iter().filter(|b| b["breaker"] != "closed").count();
        let unavailable = backends
            .iter()
            .filter(|b| {
                matches!(
                    b["credentials"]["state"].as_str(),
                    Some("stale" | "expired")
                )
            })
            .count();
        json!({"total": backends.len(), "not_closed": open, "credentials_failing": unavailable})
    };
    let mut body = json!({
        "status": "ready",
        "backends": backends,
        "ledger": {
            "store": ledger.store_name(),
            "pending_rows": ledger.pending(),
            "refusing": ledger.refusing(),
            // Rows that could not be queued or committed, logged whole.
            "lost_rows": ledger.health().lost.get(),
        },
    });
    if let Some(store) = &app.shared_state {
        body["state"] = json!({
            "redis": if store.is_up() { "up" } else { "unavailable" },
            "on_unavailable": store.on_unavailable.as_str(),
        });
    }
    json_response(StatusCode::OK, &body)
}

/// The metrics exposition: OpenMetrics when the scraper's `Accept` asks
/// for it (Prometheus does), else the Prometheus text format.
pub fn metrics(app: &App, headers: &http::HeaderMap) -> Response<Body> {
    let openmetrics = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let text = Scrape::render(app, openmetrics);
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(content_type(openmetrics)),
    );
    response
}
