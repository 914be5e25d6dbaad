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

/// Prometheus text exposition of the gateway's metrics.
pub fn metrics(app: &App) -> Response<Body> {
    let mut text = app.metrics.render(app.router.speculation());
    crate::metrics::render_breakers(
        &mut text,
        app.backends.iter().map(|b| (b.name.as_str(), &*b.breaker)),
    );
    if let Some(telemetry) = crate::telemetry::get() {
        telemetry.render(&mut text);
    }
    let mut response = Response::new(Full::new(Bytes::from(text)).boxed_unsync());
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}
