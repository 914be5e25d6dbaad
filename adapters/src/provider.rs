//! The one interface every upstream provider implements: a non-streaming and
//! a streaming call per operation.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;

use serde_json::Value;

use crate::error::AdapterError;
use crate::sse::SseEvent;
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

    /// What the backend's API is called, for refusals of what it lacks.
    fn api(&self) -> &'static str {
        "this backend's API"
    }

    /// Text completions; chat-only APIs (Anthropic's, Gemini's, the
    /// managed clouds') have none.
    fn completion(
        &self,
        _req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        let err = lacks(self.api(), "text completions");
        async move { Err(err) }.boxed()
    }

    fn completion_stream(
        &self,
        _req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>> {
        let err = lacks(self.api(), "text completions");
        async move { Err(err) }.boxed()
    }

    fn embeddings(
        &self,
        _req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>> {
        let err = lacks(self.api(), "embeddings");
        async move { Err(err) }.boxed()
    }

    /// Whether the backend speaks the OpenAI Responses API itself, so
    /// Responses requests reach it untranslated.
    fn speaks_responses(&self) -> bool {
        false
    }

    /// A Responses request, as the caller wrote it (model rewritten).
    fn responses(&self, _body: Value) -> BoxFuture<'_, Result<Value, AdapterError>> {
        async { Err(not_native()) }.boxed()
    }

    /// The same, streamed: the backend's events as they come.
    fn responses_stream(&self, _body: Value) -> BoxFuture<'_, Result<EventStream, AdapterError>> {
        async { Err(not_native()) }.boxed()
    }

    /// How the credentials the gateway fetches for this backend stand
    /// (none for keys given in config).
    fn credentials(&self) -> Option<crate::credentials::CredentialStatus> {
        None
    }
}

/// Server-sent events from a backend, relayed as they are.
pub type EventStream = BoxStream<'static, Result<SseEvent, AdapterError>>;

/// The refusal of a request the backend's API has no endpoint for.
fn lacks(api: &str, what: &str) -> AdapterError {
    AdapterError::InvalidRequest {
        message: format!("this backend speaks {api}; it has no {what}"),
        param: Some("model".into()),
    }
}

fn not_native() -> AdapterError {
    AdapterError::InvalidRequest {
        message: "this backend does not speak the Responses API".into(),
        param: None,
    }
}
