//! `POST /v1/responses` (OpenAI Responses API), served through chat
//! completions: the request is translated to chat, routed like any chat
//! request, and the answer translated back, whole or as `response.*` events.

use futures_util::future::BoxFuture;
use http::{Response, StatusCode};
use serde_json::Value;
use switchyard_adapters::responses::{ResponseStream, chat_from_responses, response_from_chat};
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse, Extra, Usage};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::{AnswerSummary, RequestView};

use super::chat::Chat;
use super::chat_backed::chat_backed;
use super::endpoint::{Chunks, Endpoint};
use super::stream::ResponsesEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::routing::BodyHints;

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
        chat_from_responses(&value).map_err(|err| GatewayError::InvalidField {
            param: err.param,
            message: err.message,
        })
    }

    fn respond(resp: &ChatResponse) -> Response<Body> {
        json_response(StatusCode::OK, &response_from_chat(resp))
    }

    fn encoder(_client_wants_usage: bool, model: &str, _prompt_tokens: u32) -> ResponsesEvents {
        ResponsesEvents(ResponseStream::new(model))
    }

    chat_backed!();
}
