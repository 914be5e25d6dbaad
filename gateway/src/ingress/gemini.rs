//! Gemini's `generateContent`, `streamGenerateContent?alt=sse` and
//! `countTokens` (under `/v1beta` and `/v1`), for Gemini CLI and the
//! google-genai SDKs. A request is translated to the canonical chat
//! request, routed and served like any chat request, and the answer
//! translated back, whole or as Gemini's SSE stream.

use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::{Value, json};
use switchyard_adapters::gemini::{
    GenerateStream, chat_request_from_generate, generate_response_from_chat,
};
use switchyard_adapters::tokens;
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse};

use crate::admit::access::Caller;
use crate::admit::admission;
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::stream::GeminiEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::ingress::gemini_paths;
use crate::state::app::App;

/// `POST /v1beta/models/{model}:generateContent`: a whole answer.
pub struct Generate;

/// `POST /v1beta/models/{model}:streamGenerateContent?alt=sse`.
pub struct StreamGenerate;

/// The request the path and body make: the model from the path, the rest
/// from the body.
fn decode(parts: &Parts, body: &[u8]) -> Result<ChatRequest, GatewayError> {
    let model =
        gemini_paths::model_of(parts.uri.path()).ok_or_else(|| GatewayError::InvalidField {
            param: "model".into(),
            message: "the path names no model: /v1beta/models/{model}:generateContent".into(),
        })?;
    let body: Value = parse_json(body)?;
    Ok(chat_request_from_generate(body, model)?)
}

impl Endpoint for Generate {
    const NAME: &'static str = "generate_content";
    const DIALECT: Dialect = Dialect::Gemini;
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = GeminiEvents;

    fn decode(_body: &[u8]) -> Result<ChatRequest, GatewayError> {
        Err(GatewayError::Internal {
            message: "a Gemini request is read with its path".into(),
        })
    }

    fn decode_request(parts: &Parts, body: &[u8]) -> Result<ChatRequest, GatewayError> {
        decode(parts, body)
    }

    fn respond(_req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        json_response(StatusCode::OK, &generate_response_from_chat(resp))
    }

    fn encoder(_req: &ChatRequest, _usage: bool, model: &str, _prompt: u32) -> GeminiEvents {
        GeminiEvents(GenerateStream::new(model))
    }
}

impl Endpoint for StreamGenerate {
    const NAME: &'static str = "stream_generate_content";
    const DIALECT: Dialect = Dialect::Gemini;
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = GeminiEvents;

    fn decode(body: &[u8]) -> Result<ChatRequest, GatewayError> {
        Generate::decode(body)
    }

    /// Streams are sent as server-sent events, as Gemini CLI and the
    /// google-genai SDKs ask (`alt=sse`); Gemini's other stream form, one
    /// JSON array written piece by piece, is refused in words that say so.
    fn decode_request(parts: &Parts, body: &[u8]) -> Result<ChatRequest, GatewayError> {
        if !gemini_paths::wants_sse(parts.uri.query()) {
            return Err(GatewayError::InvalidField {
                param: "alt".into(),
                message: "streamGenerateContent is served as server-sent events: add ?alt=sse"
                    .into(),
            });
        }
        let mut request = decode(parts, body)?;
        request.stream = Some(true);
        Ok(request)
    }

    fn respond(req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        Generate::respond(req, resp)
    }

    fn encoder(req: &ChatRequest, usage: bool, model: &str, prompt: u32) -> GeminiEvents {
        Generate::encoder(req, usage, model, prompt)
    }
}

/// `POST /v1beta/models/{model}:countTokens`: the prompt's tokens (cl100k,
/// with the chat template's overhead), for a model this gateway serves.
/// The body is `{"contents": [...]}` or `{"generateContentRequest": {...}}`.
pub async fn count_tokens(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let model = gemini_paths::model_of(parts.uri.path()).unwrap_or_default();
    let mut body: Value = parse_json(&bytes)?;
    if let Some(inner) = body.get_mut("generateContentRequest").map(Value::take) {
        body = inner;
    }
    if let Some(fields) = body.as_object_mut() {
        // The request's own model, when it names one, is the path's.
        fields.remove("model");
    }
    let chat = chat_request_from_generate(body, model)?;
    let caller = parts.extensions.get::<Caller>();
    admission::check_known_model(app, caller, &chat.model)?;
    let total = tokens::count_chat_prompt(&chat);
    Ok(json_response(
        StatusCode::OK,
        &json!({ "totalTokens": total }),
    ))
}
