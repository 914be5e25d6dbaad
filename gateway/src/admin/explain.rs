//! `POST /v1/route/explain`: the features, scores and decision for a chat
//! request, without calling a model. `switchyard explain` prints the same.

use http::{HeaderMap, Request, Response, StatusCode};
use hyper::body::Incoming;
use switchyard_adapters::types::{ChatRequest, ChatResponse};
use switchyard_router::learned::Sample;
use switchyard_router::{AnswerSummary, Decision, Explanation, RequestView, Router};

use crate::dispatch::endpoint::{Call, Endpoint};
use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::ingress::chat::Chat;
use crate::route::encoder::encode_for_routing;
use crate::route::view::{complete_view, route_error};
use crate::state::app::App;

pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let request = Chat::decode(&bytes)?;
    request.validate()?;
    let view = complete_view(request.view(), &parts.headers, request.hints(), &app.router)?;
    // The caller's sensitive-data policies hold here too: a refusal is
    // explained as the error it is, and encoders read only what they may.
    let caller = parts.extensions.get::<crate::admit::access::Caller>();
    let route = app.route_of(&request.model);
    let assessment = crate::route::sensitive::assess(app, caller, route.as_deref(), &request)?;
    let handling = assessment.as_ref().map(|a| &a.handling);
    let (encoded, called) = encode_for_routing(app, &parts, &view, handling).await;
    let view = RequestView {
        encoded: &encoded,
        ..view
    };
    let explanation = app
        .router
        .explain(&view, rand::random::<f64>())
        .map_err(route_error)?;
    // Whether explaining cost anything: the encoders it called are billed
    // to the caller like any routing call.
    let mut answer = serde_json::to_value(&explanation).map_err(|err| GatewayError::Internal {
        message: err.to_string(),
    })?;
    answer["encoders_called"] = called
        .iter()
        .map(|&b| serde_json::Value::from(app.backends[b].name.as_str()))
        .collect();
    if let Some(handling) = handling {
        answer["sensitive"] = serde_json::json!({
            "kinds": handling.kinds,
            "action": handling.action.as_str(),
        });
    }
    Ok(json_response(StatusCode::OK, &answer))
}

/// Decides where a parsed chat request goes: the whole routing path a
/// request takes (view, features, policy), without I/O. Benchmarks use it.
pub fn decide_chat(
    router: &Router,
    request: &ChatRequest,
    headers: &HeaderMap,
) -> Result<Decision, GatewayError> {
    decide_chat_with(router, request, headers, rand::random::<f64>())
}

/// [`decide_chat`] with the random draw given (`switchyard replay` draws
/// it from the request's id, so a replay decides the same twice).
pub fn decide_chat_with(
    router: &Router,
    request: &ChatRequest,
    headers: &HeaderMap,
    unit: f64,
) -> Result<Decision, GatewayError> {
    let view = complete_view(request.view(), headers, request.hints(), router)?;
    router.decide(&view, unit).map_err(route_error)
}

/// What a learned predictor sees of a chat request sent to `request.model`
/// (that route's profile included): `switchyard train-router` trains on
/// exactly what a live decision computes.
pub fn sample_chat(router: &Router, request: &ChatRequest) -> Result<Sample, GatewayError> {
    let headers = HeaderMap::new();
    let view = complete_view(request.view(), &headers, request.hints(), router)?;
    let features = router.decide(&view, 0.0).map_err(route_error)?.features;
    Ok(Sample::of(&view, &features, None))
}

/// What a cascade's checks see of a whole chat answer.
pub fn summarize_chat(response: &ChatResponse) -> AnswerSummary {
    ChatRequest::summarize(response)
}

/// Explains how `router` would route the chat request in `body`, offline:
/// semantic rules with an encoder backend do not match (nothing is called).
pub fn explain_chat(
    router: &Router,
    body: &[u8],
    headers: &HeaderMap,
) -> Result<Explanation, GatewayError> {
    let request = Chat::decode(body)?;
    request.validate()?;
    let view = complete_view(request.view(), headers, request.hints(), router)?;
    router
        .explain(&view, rand::random::<f64>())
        .map_err(route_error)
}
