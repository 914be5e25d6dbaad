//! `GET /v1/models`: every route (and alias) and backend a caller may name.

use http::{Response, StatusCode};
use serde_json::json;
use switchyard_router::Target;

use crate::app::App;
use crate::http::{Body, json_response};

pub fn list(app: &App) -> Response<Body> {
    let data: Vec<_> = app
        .router
        .model_names()
        .iter()
        .filter_map(|name| {
            let detail = match app.router.target(name)? {
                Target::Route(r) => json!({"kind": "route", "route": app.router.route_name(r)}),
                Target::Backend(i) => json!({"kind": "backend", "tier": app.backends[i].tier.as_str()}),
            };
            Some(json!({"id": name, "object": "model", "created": 0, "owned_by": "switchyard", "switchyard": detail}))
        })
        .collect();
    json_response(StatusCode::OK, &json!({"object": "list", "data": data}))
}
