//! `GET /v1/models`: every route (and alias) and backend a caller may name,
//! readable by the openai and the anthropic SDKs alike.

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
                Target::Backend(i) => {
                    json!({"kind": "backend", "tier": app.backends[i].tier.as_str()})
                }
            };
            // OpenAI's fields and Anthropic's side by side: each SDK reads
            // its own and ignores the others.
            Some(json!({
                "id": name, "object": "model", "created": 0, "owned_by": "switchyard",
                "type": "model", "display_name": name, "created_at": "1970-01-01T00:00:00Z",
                "switchyard": detail
            }))
        })
        .collect();
    let first = data.first().map(|m| m["id"].clone());
    let last = data.last().map(|m| m["id"].clone());
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "has_more": false, "first_id": first, "last_id": last}),
    )
}
