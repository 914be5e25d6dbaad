//! The client for OpenAI-compatible backends.

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::HeaderValue;
use http::header::AUTHORIZATION;
use serde::de::DeserializeOwned;
use switchyard_policies::OpenAiBackend;

use super::convert::{parse_json, parse_json_text};
use super::reader::read_answer;
use super::writer::chat_request_json;
use crate::error::AdapterError;
use crate::provider::{ChatStream, CompletionStream, EventStream, Provider};
use crate::sse::SseEvent;
use crate::types::{
    ChatChunk, ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    EmbeddingResponse,
};
use crate::upstream::{EventDecoder, Items, Link, Upstream};

/// One OpenAI-compatible backend.
pub struct OpenAiClient {
    upstream: Upstream,
    native_responses: bool,
}

/// Responses streams relayed as they are, ended by the final response event.
struct RawEvents;

impl EventDecoder<SseEvent> for RawEvents {
    fn decode(&mut self, event: SseEvent, out: &mut Items<SseEvent>) -> bool {
        let end = event.data == "[DONE]"
            || matches!(
                event.event.as_deref(),
                Some("response.completed" | "response.failed" | "response.incomplete" | "error")
            );
        out.push_back(Ok(event));
        end
    }
}

/// OpenAI streams: one JSON document per `data:` event, ended by `[DONE]`,
/// each read by `read` from the event's data.
struct JsonChunks<T>(fn(String) -> Result<T, AdapterError>);

impl<T: Send + 'static> EventDecoder<T> for JsonChunks<T> {
    fn decode(&mut self, event: SseEvent, out: &mut Items<T>) -> bool {
        if event.data == "[DONE]" {
            return true;
        }
        out.push_back((self.0)(event.data));
        false
    }
}

/// A chat chunk, keeping its event's bytes to be relayed as they came
/// (`ChatChunk::with_verbatim`).
fn chat_chunk(data: String) -> Result<ChatChunk, AdapterError> {
    let chunk = match super::reader::read_chunk(&data) {
        Some(chunk) => chunk,
        None => parse_json_text::<ChatChunk>(&data)?,
    };
    Ok(chunk.with_verbatim(Bytes::from(data)))
}

/// A chunk of any other kind.
fn json_chunk<T: DeserializeOwned>(data: String) -> Result<T, AdapterError> {
    parse_json_text(&data)
}

impl OpenAiClient {
    /// `api_key` is the key itself, already read from the environment.
    pub fn new(
        config: &OpenAiBackend,
        link: Link<'_>,
        api_key: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let mut headers = Vec::new();
        if let Some(key) = api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                AdapterError::Internal {
                    message: "the API key holds characters a header cannot".into(),
                }
            })?;
            value.set_sensitive(true);
            headers.push((AUTHORIZATION, value));
        }
        Ok(OpenAiClient {
            upstream: Upstream::new(&config.base_url, headers, link)?,
            native_responses: config.native_responses,
        })
    }

    /// A client for an OpenAI-shaped API reached through `upstream`, whose
    /// URL, query and credentials its provider set (Azure's, for one).
    pub(crate) fn on(upstream: Upstream, native_responses: bool) -> Self {
        OpenAiClient {
            upstream,
            native_responses,
        }
    }

    async fn call<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        path: &'static str,
        body: &B,
    ) -> Result<T, AdapterError> {
        parse_json(&self.upstream.call(path, body, &[]).await?)
    }
}

impl Provider for OpenAiClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        crate::boxed::pinned_in_place(|| async move {
            let json = chat_request_json(&req)?;
            let body = self
                .upstream
                .call_json("/chat/completions", json, &[])
                .await?;
            let read = std::str::from_utf8(&body).ok().and_then(read_answer);
            Ok(match read {
                Some((answer, logprobs_keys)) => answer.with_verbatim_read(body, logprobs_keys),
                None => parse_json::<ChatResponse>(&body)?.with_verbatim(body),
            })
        })
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        crate::boxed::pinned_in_place(|| async move {
            let json = chat_request_json(&req)?;
            self.upstream
                .stream_json("/chat/completions", json, &[], JsonChunks(chat_chunk))
                .await
        })
    }

    fn completion(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        async move { self.call("/completions", &req).await }.boxed()
    }

    fn completion_stream(
        &self,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>> {
        async move {
            self.upstream
                .stream("/completions", &req, &[], JsonChunks(json_chunk))
                .await
        }
        .boxed()
    }

    fn embeddings(
        &self,
        req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>> {
        async move { self.call("/embeddings", &req).await }.boxed()
    }

    fn speaks_responses(&self) -> bool {
        self.native_responses
    }

    fn responses(
        &self,
        body: serde_json::Value,
    ) -> BoxFuture<'_, Result<serde_json::Value, AdapterError>> {
        async move { self.call("/responses", &body).await }.boxed()
    }

    fn responses_stream(
        &self,
        body: serde_json::Value,
    ) -> BoxFuture<'_, Result<EventStream, AdapterError>> {
        async move {
            self.upstream
                .stream("/responses", &body, &[], RawEvents)
                .await
        }
        .boxed()
    }
}
