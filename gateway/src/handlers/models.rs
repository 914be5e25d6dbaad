//! `GET /v1/models`: every route and backend a caller may name.

use http::{Response, StatusCode};
use serde_json::json;

use crate::app::{App, ModelTarget};
use crate::http::{Body, json_response};

pub fn list(app: &App) -> Response<Body> {
    let data: Vec<_> = app
        .model_names
        .iter()
        .filter_map(|name| {
            let detail = match app.models.get(name)? {
                ModelTarget::Route { .. } => json!({"kind": "route"}),
                ModelTarget::Backend(i) => json!({"kind": "backend", "tier": app.backends[*i].tier.as_str()}),
            };
            Some(json!({"id": name, "object": "model", "created": 0, "owned_by": "switchyard", "switchyard": detail}))
        })
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}
