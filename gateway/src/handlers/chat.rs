//! `POST /v1/chat/completions`.

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::Value;
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse, StreamOptions, Usage};
use switchyard_adapters::{AdapterError, Provider};

use super::endpoint::Endpoint;
use crate::error::GatewayError;

pub struct Chat;

impl Endpoint for Chat {
    const NAME: &'static str = "chat";
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;

    fn model(req: &ChatRequest) -> &str {
        &req.model
    }

    fn set_model(req: &mut ChatRequest, model: &str) {
        model.clone_into(&mut req.model);
    }

    fn user(req: &ChatRequest) -> Option<&str> {
        let metadata_user = req
            .metadata
            .as_ref()
            .and_then(|m| m.get("user_id"))
            .and_then(Value::as_str);
        req.user.as_deref().or(metadata_user)
    }

    fn validate(req: &ChatRequest) -> Result<(), GatewayError> {
        if req.messages.is_empty() {
            return Err(GatewayError::InvalidField {
                param: "messages".into(),
                message: "must hold at least one message".into(),
            });
        }
        if req.n == Some(0) {
            return Err(GatewayError::InvalidField {
                param: "n".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    fn is_stream(req: &ChatRequest) -> bool {
        req.is_stream()
    }

    fn request_stream_usage(req: &mut ChatRequest) -> bool {
        let wanted = req.wants_stream_usage();
        req.stream_options
            .get_or_insert_with(StreamOptions::default)
            .include_usage = Some(true);
        wanted
    }

    fn response_usage(resp: &ChatResponse) -> Option<&Usage> {
        resp.usage.as_ref()
    }

    fn chunk_usage(chunk: &ChatChunk) -> Option<&Usage> {
        chunk.usage.as_ref()
    }

    fn chunk_is_usage_only(chunk: &ChatChunk) -> bool {
        chunk.is_usage_only()
    }

    fn chunk_has_output(chunk: &ChatChunk) -> bool {
        chunk.choices.iter().any(|c| {
            c.delta.content.as_deref().is_some_and(|s| !s.is_empty())
                || c.delta.tool_calls.is_some()
        })
    }

    fn call(
        provider: &dyn Provider,
        req: ChatRequest,
    ) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        provider.chat(req)
    }

    fn call_stream(
        provider: &dyn Provider,
        req: ChatRequest,
    ) -> BoxFuture<'_, Result<BoxStream<'static, Result<ChatChunk, AdapterError>>, AdapterError>>
    {
        provider.chat_stream(req)
    }
}
