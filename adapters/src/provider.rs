//! The one interface every upstream provider implements: a non-streaming and
//! a streaming call per operation.

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use crate::error::AdapterError;
use crate::types::{
    ChatChunk, ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    EmbeddingResponse,
};

/// A stream of chat chunks from a backend. Dropping it cancels the upstream call.
pub type ChatStream = BoxStream<'static, Result<ChatChunk, AdapterError>>;
/// A stream of completion chunks from a backend.
pub type CompletionStream = BoxStream<'static, Result<CompletionResponse, AdapterError>>;

/// One upstream model endpoint. Requests arrive with `model` already set to
/// the backend's upstream name; streaming calls arrive with `stream: true`.
pub trait Provider: Send + Sync + 'static {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>>;

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>>;

    fn completion(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>>;

    fn completion_stream(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>>;

    fn embeddings(
        &self,
        req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>>;
}
