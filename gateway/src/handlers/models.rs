//! `GET /v1/models`: every route (and alias) and backend a caller may name,
//! readable by the openai and the anthropic SDKs alike; `GET
//! /v1/models/{model}` one of them (the SDKs' `models.retrieve`). A key that
//! may not name backends is shown routes only.

use http::{Response, StatusCode};
use serde_json::{Value, json};
use switchyard_router::Target;

use crate::access::Caller;
use crate::app::App;
use crate::error::GatewayError;
use crate::http::{Body, json_response};

pub fn list(app: &App, caller: Option<&Caller>) -> Response<Body> {
    let data: Vec<_> = app
        .router
        .model_names()
        .iter()
        .filter_map(|name| model(app, caller, name))
        .collect();
    let first = data.first().map(|m| m["id"].clone());
    let last = data.last().map(|m| m["id"].clone());
    json_response(
        StatusCode::OK,
        &json!({"object": "list", "data": data, "has_more": false, "first_id": first, "last_id": last}),
    )
}

/// One model the caller may name, or a 404 in the caller's dialect.
pub fn retrieve(
    app: &App,
    caller: Option<&Caller>,
    name: &str,
) -> Result<Response<Body>, GatewayError> {
    match model(app, caller, name) {
        Some(found) => Ok(json_response(StatusCode::OK, &found)),
        None => Err(GatewayError::UnknownModel {
            model: name.to_owned(),
            available: app
                .router
                .model_names()
                .iter()
                .filter(|m| model(app, caller, m).is_some())
                .cloned()
                .collect(),
        }),
    }
}

/// The model object of `name`, when it exists and the caller may name it.
fn model(app: &App, caller: Option<&Caller>, name: &str) -> Option<Value> {
    let may_name_backends = caller.is_none_or(|c| c.key.may_name_backends);
    let detail = match app.router.target(name)? {
        Target::Route(r) => json!({"kind": "route", "route": app.router.route_name(r)}),
        Target::Backend(i) if may_name_backends => {
            json!({"kind": "backend", "tier": app.backends[i].tier.as_str()})
        }
        Target::Backend(_) => return None,
    };
    // OpenAI's fields and Anthropic's side by side: each SDK reads its own
    // and ignores the others.
    Some(json!({
        "id": name, "object": "model", "created": 0, "owned_by": "switchyard",
        "type": "model", "display_name": name, "created_at": "1970-01-01T00:00:00Z",
        "switchyard": detail
    }))
}
