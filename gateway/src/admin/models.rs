//! `GET /v1/models`: every route (and alias) and backend a caller may name,
//! in OpenAI's shapes, Anthropic's when the caller sends
//! `anthropic-version` as the anthropic SDKs do, or Gemini's under
//! `/v1beta/models` (or with `x-goog-api-key`, as the google-genai SDKs
//! send it); `GET /v1/models/{model}` one of them (the SDKs' `models.retrieve`). A key that
//! may not name backends is shown routes only.

use http::{Response, StatusCode};
use serde_json::{Value, json};
use switchyard_router::Target;

use crate::admit::access::Caller;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response};
use crate::state::app::App;

pub fn list(app: &App, caller: Option<&Caller>, dialect: Dialect) -> Response<Body> {
    let data: Vec<_> = app
        .router
        .model_names()
        .iter()
        .filter_map(|name| model(app, caller, name, dialect))
        .collect();
    let page = match dialect {
        Dialect::OpenAi => json!({"object": "list", "data": data}),
        Dialect::Anthropic => {
            let first = data.first().map(|m| m["id"].clone());
            let last = data.last().map(|m| m["id"].clone());
            json!({"data": data, "has_more": false, "first_id": first, "last_id": last})
        }
        Dialect::Gemini => json!({ "models": data }),
    };
    json_response(StatusCode::OK, &page)
}

/// One model the caller may name, or a 404 in the caller's dialect.
pub fn retrieve(
    app: &App,
    caller: Option<&Caller>,
    name: &str,
    dialect: Dialect,
) -> Result<Response<Body>, GatewayError> {
    match model(app, caller, name, dialect) {
        Some(found) => Ok(json_response(StatusCode::OK, &found)),
        None => Err(GatewayError::UnknownModel {
            model: name.to_owned(),
            available: app
                .router
                .model_names()
                .iter()
                .filter(|m| model(app, caller, m, dialect).is_some())
                .cloned()
                .collect(),
        }),
    }
}

/// The model object of `name` in `dialect`, when it exists and the caller
/// may name it. OpenAI's carries what the name reaches (`switchyard`: a
/// route, or a backend and its tier); Anthropic's has only the fields its
/// SDK's type declares.
fn model(app: &App, caller: Option<&Caller>, name: &str, dialect: Dialect) -> Option<Value> {
    if caller.is_some_and(|c| !app.keys.may_use(c, name)) {
        return None;
    }
    let may_name_backends = caller.is_none_or(|c| c.key.may_name_backends);
    let detail = match app.router.target(name)? {
        Target::Route(r) => json!({"kind": "route", "route": app.router.route_name(r)}),
        Target::Backend(i) if may_name_backends => {
            json!({"kind": "backend", "tier": app.backends[i].tier.as_str()})
        }
        Target::Backend(_) => return None,
    };
    Some(match dialect {
        Dialect::OpenAi => json!({
            "id": name, "object": "model", "created": 0, "owned_by": "switchyard", "switchyard": detail,
        }),
        Dialect::Anthropic => json!({
            "type": "model", "id": name, "display_name": name,
            "created_at": "1970-01-01T00:00:00Z", "lifecycle": "active",
        }),
        Dialect::Gemini => json!({
            "name": format!("models/{name}"), "displayName": name, "version": "switchyard",
            "supportedGenerationMethods": ["generateContent", "streamGenerateContent", "countTokens"],
        }),
    })
}
