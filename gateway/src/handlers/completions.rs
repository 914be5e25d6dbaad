//! `POST /v1/completions` (legacy text completions).

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use serde_json::Value;
use switchyard_adapters::types::{CompletionRequest, CompletionResponse, StreamOptions, Usage};
use switchyard_adapters::{AdapterError, Provider};

use super::endpoint::Endpoint;
use crate::error::GatewayError;

pub struct Completions;

impl Endpoint for Completions {
    const NAME: &'static str = "completions";
    type Request = CompletionRequest;
    type Response = CompletionResponse;
    type Chunk = CompletionResponse;

    fn model(req: &CompletionRequest) -> &str {
        &req.model
    }

    fn set_model(req: &mut CompletionRequest, model: &str) {
        model.clone_into(&mut req.model);
    }

    fn user(req: &CompletionRequest) -> Option<&str> {
        req.user.as_deref()
    }

    fn validate(req: &CompletionRequest) -> Result<(), GatewayError> {
        let empty = match &req.prompt {
            Value::String(_) => false,
            Value::Array(items) => items.is_empty(),
            _ => true,
        };
        if empty {
            return Err(GatewayError::InvalidField {
                param: "prompt".into(),
                message: "must be a string or a non-empty array".into(),
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

    fn is_stream(req: &CompletionRequest) -> bool {
        req.is_stream()
    }

    fn request_stream_usage(req: &mut CompletionRequest) -> bool {
        let options = req
            .stream_options
            .get_or_insert_with(StreamOptions::default);
        let wanted = options.include_usage.unwrap_or(false);
        options.include_usage = Some(true);
        wanted
    }

    fn response_usage(resp: &CompletionResponse) -> Option<&Usage> {
        resp.usage.as_ref()
    }

    fn chunk_usage(chunk: &CompletionResponse) -> Option<&Usage> {
        chunk.usage.as_ref()
    }

    fn chunk_is_usage_only(chunk: &CompletionResponse) -> bool {
        chunk.choices.is_empty() && chunk.usage.is_some()
    }

    fn chunk_has_output(chunk: &CompletionResponse) -> bool {
        chunk.choices.iter().any(|c| !c.text.is_empty())
    }

    fn call(
        provider: &dyn Provider,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        provider.completion(req)
    }

    fn call_stream(
        provider: &dyn Provider,
        req: CompletionRequest,
    ) -> BoxFuture<
        '_,
        Result<BoxStream<'static, Result<CompletionResponse, AdapterError>>, AdapterError>,
    > {
        provider.completion_stream(req)
    }
}
