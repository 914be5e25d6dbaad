//! `POST /v1/messages` (Anthropic Messages) and `/v1/messages/count_tokens`.
//! A Messages request is translated to the canonical chat request, routed
//! and served like any chat request, and the answer translated back, whole
//! or as the Messages event stream.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;
use switchyard_adapters::anthropic::{
    CountTokensRequest, MessageStream, MessagesRequest, chat_from_messages, message_from_chat,
};
use switchyard_adapters::tokens;
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse};

use crate::admit::access::Caller;
use crate::admit::admission;
use crate::dispatch::endpoint::Endpoint;
use crate::dispatch::stream::AnthropicEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::state::app::App;

pub struct Messages;

/// Everything but the dialect is the chat endpoint's.
impl Endpoint for Messages {
    const NAME: &'static str = "messages";
    const DIALECT: Dialect = Dialect::Anthropic;
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = AnthropicEvents;

    fn decode(body: &[u8]) -> Result<ChatRequest, GatewayError> {
        let request: MessagesRequest = parse_json(body)?;
        Ok(chat_from_messages(request)?)
    }

    /// `anthropic-version` and `anthropic-beta` go on to Anthropic backends
    /// unchanged (Claude Code sends betas it relies on).
    fn forward_headers(req: &mut ChatRequest, headers: &http::HeaderMap) {
        for name in ["anthropic-version", "anthropic-beta"] {
            for value in headers.get_all(name).iter().filter_map(|v| v.to_str().ok()) {
                req.forward_headers
                    .push((name.to_owned(), value.to_owned()));
            }
        }
    }

    fn respond(_req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        json_response(StatusCode::OK, &message_from_chat(resp))
    }

    fn encoder(
        _req: &ChatRequest,
        _client_wants_usage: bool,
        model: &str,
        prompt_tokens: u32,
    ) -> AnthropicEvents {
        AnthropicEvents(MessageStream::new(model, u64::from(prompt_tokens)))
    }
}

/// `POST /v1/messages/count_tokens`: the prompt's tokens (cl100k, with the
/// chat template's overhead), for a model this gateway serves.
pub async fn count_tokens(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let request: CountTokensRequest = parse_json(&bytes)?;
    let caller = parts.extensions.get::<Caller>();
    admission::check_known_model(app, caller, &request.model)?;
    let chat = chat_from_messages(request.into_messages())?;
    let input_tokens = tokens::count_chat_prompt(&chat);
    Ok(json_response(
        StatusCode::OK,
        &json!({ "input_tokens": input_tokens }),
    ))
}
