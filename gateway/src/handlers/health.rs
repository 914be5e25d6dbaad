//! Liveness and readiness for load balancers and Kubernetes probes, and
//! the Prometheus scrape.

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::json;

use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::metrics::{Scrape, content_type};

/// The process is up and answering.
pub fn live() -> Response<Body> {
    json_response(StatusCode::OK, &json!({"status": "ok"}))
}

/// The gateway takes new requests: not when it is draining for shutdown,
/// so a load balancer stops sending before the listener closes.
pub fn ready(app: &App) -> Response<Body> {
    if app.is_shutting_down() {
        return GatewayError::ShuttingDown.into_response();
    }
    // Ready even while the ledger's database is away: rows spool, and a
    // full spool refuses requests in the caller's dialect, which a pod
    // taken out of its Service could not do.
    let ledger = &app.ledger;
    json_response(
        StatusCode::OK,
        &json!({
            "status": "ready",
            "backends": app.backends.len(),
            "ledger": {
                "store": ledger.store_name(),
                "pending_rows": ledger.pending(),
                "refusing": ledger.refusing(),
            },
        }),
    )
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
