//! Liveness and readiness for load balancers and Kubernetes probes.

use http::{Response, StatusCode};
use serde_json::json;

use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response};

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
    json_response(
        StatusCode::OK,
        &json!({"status": "ready", "backends": app.backends.len()}),
    )
}
