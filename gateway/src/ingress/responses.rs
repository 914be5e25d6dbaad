//! `POST /v1/responses` (OpenAI Responses API), served through chat
//! completions: the request is translated to chat, routed like any chat
//! request, and the answer translated back, whole or as `response.*` events.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;
use switchyard_adapters::responses::{
    Echo, ResponseStream, chat_from_responses, response_from_chat,
};
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse};
use switchyard_router::Decision;

use crate::admit::access::Caller;
use crate::dispatch::endpoint::Call;
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::pipeline::{decide, serve_decided};
use crate::dispatch::stream::ResponsesEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::ingress::responses_native::{NativeResponses, RawRequest};
use crate::route::receipts::{self, Served};
use crate::route::sensitive;
use crate::state::app::App;

pub struct Responses;

impl Endpoint for Responses {
    const NAME: &'static str = "responses";
    const DIALECT: Dialect = Dialect::OpenAi;
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = ResponsesEvents;

    fn decode(body: &[u8]) -> Result<ChatRequest, GatewayError> {
        let value: Value = parse_json(body)?;
        Ok(chat_from_responses(&value)?)
    }

    fn respond(req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        json_response(StatusCode::OK, &response_from_chat(resp, &echo_of(req)))
    }

    fn encoder(
        req: &ChatRequest,
        _client_wants_usage: bool,
        model: &str,
        _prompt_tokens: u32,
    ) -> ResponsesEvents {
        ResponsesEvents(ResponseStream::new(model, echo_of(req)))
    }
}

/// What the Responses object repeats of `req` (a request decoded here
/// always carries it; the default stands in otherwise).
fn echo_of(req: &ChatRequest) -> Echo {
    req.echo.as_deref().cloned().unwrap_or_default()
}

/// `POST /v1/responses`: untranslated to a backend that speaks Responses
/// itself (`responses_native`), translated through chat for every other
/// backend. A request chat cannot express can still go to a native backend;
/// for any other it is a 400 naming what stands in the way. Both are
/// served by the one pipeline; only the decision picks which.
pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    serve_body(app, parts, &bytes).await
}

/// Serves a Responses request whose body is read: a caller's, or a batch
/// line's.
pub async fn serve_body(
    app: &App,
    parts: http::request::Parts,
    bytes: &[u8],
) -> Result<Response<Body>, GatewayError> {
    let raw = NativeResponses::decode(bytes)?;
    let translated = Responses::decode(bytes);
    let caller = parts.extensions.get::<Caller>();
    // Both forms name the same model: the route's name, once.
    let route = app.route_of(switchyard_adapters::types::CanonicalRequest::model(&raw));
    let route = route.as_deref();
    let (assessment, mut decision) = match &translated {
        Ok(chat) => {
            chat.validate()?;
            let assessment = sensitive::assess_request(app, caller, route, chat)?;
            crate::dispatch::guardrails::before(app, &parts, route, chat).await?;
            let decision = decide::<Responses>(app, &parts, chat, assessment.as_ref()).await?;
            (assessment, decision)
        }
        Err(_) => {
            let assessment = sensitive::assess_request(app, caller, route, &raw)?;
            crate::dispatch::guardrails::before(app, &parts, route, &raw).await?;
            let decision =
                decide::<NativeResponses>(app, &parts, &raw, assessment.as_ref()).await?;
            (assessment, decision)
        }
    };
    let native_primary = |decision: &Decision| {
        RawRequest::served_by(&*app.backends[decision.primary()].replicas[0].provider)
    };
    let assessment = match assessment {
        // A body sent on untranslated cannot be masked: it stays local.
        Some(assessment) if native_primary(&decision) => Some(assessment.kept_local()),
        other => other,
    };
    if let Some(assessment) = &assessment {
        sensitive::enforce(app, assessment, &mut decision)?;
    }
    let native = native_primary(&decision);
    let mut response = match (native, translated) {
        (true, _) => {
            if let Some(caller) = parts.extensions.get::<Caller>() {
                raw.check_caller(caller)?;
            }
            // A chain made from the translated prompt says nothing of what
            // a native backend holds: the call is admitted without one.
            let mut decision = decision;
            decision.features.prefix = None;
            serve_decided::<NativeResponses>(app, &parts, raw, decision).await?
        }
        (false, Ok(chat)) => serve_decided::<Responses>(app, &parts, chat, decision).await?,
        (false, Err(err)) => {
            let mut response = err.into_response();
            receipts::apply(
                app,
                &decision,
                Served::first_choice(&decision),
                response.headers_mut(),
            );
            response
        }
    };
    if let Some(receipt) = assessment.and_then(|a| a.receipt) {
        response
            .headers_mut()
            .insert(sensitive::SENSITIVE_HEADER, receipt);
    }
    Ok(response)
}
