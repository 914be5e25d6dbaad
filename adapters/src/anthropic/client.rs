//! The client for Anthropic Messages backends: chat requests go out as
//! Messages requests, answers and event streams come back as chat.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use serde_json::Value;
use switchyard_policies::AnthropicBackend;

use super::to_chat_response::{EventsToChunks, chat_from_message};
use super::to_messages::messages_from_chat;
use super::types::MessagesResponse;
use crate::error::AdapterError;
use crate::openai::parse_json;
use crate::provider::{ChatStream, Provider};
use crate::sse::SseEvent;
use crate::types::{ChatChunk, ChatRequest, ChatResponse};
use crate::upstream::{EventDecoder, Items, Link, Upstream};

/// The Messages API version sent when the config names none.
pub const DEFAULT_VERSION: &str = "2023-06-01";

pub struct AnthropicClient {
    upstream: Upstream,
}

impl AnthropicClient {
    /// `api_key` is the key itself, already read from the environment.
    pub fn new(
        config: &AnthropicBackend,
        link: Link<'_>,
        api_key: Option<&str>,
    ) -> Result<Self, AdapterError> {
        let header = |value: &str| {
            HeaderValue::from_str(value).map_err(|_| AdapterError::Internal {
                message: "a header holds characters it cannot".into(),
            })
        };
        let mut headers = vec![(
            HeaderName::from_static("anthropic-version"),
            header(config.version.as_deref().unwrap_or(DEFAULT_VERSION))?,
        )];
        if let Some(key) = api_key {
            let mut value = header(key)?;
            value.set_sensitive(true);
            headers.push((HeaderName::from_static("x-api-key"), value));
        }
        Ok(AnthropicClient {
            upstream: Upstream::new(&config.base_url, headers, link)?,
        })
    }

    /// The caller's `anthropic-version` and `anthropic-beta`, unchanged.
    fn forwarded(req: &ChatRequest) -> Vec<(HeaderName, HeaderValue)> {
        req.forward_headers
            .iter()
            .filter_map(|(name, value)| {
                Some((
                    HeaderName::from_bytes(name.as_bytes()).ok()?,
                    HeaderValue::from_str(value).ok()?,
                ))
            })
            .collect()
    }

    fn translate(req: ChatRequest) -> Result<super::MessagesRequest, AdapterError> {
        messages_from_chat(req).map_err(|err| AdapterError::InvalidRequest {
            message: err.to_string(),
            param: Some(err.param),
        })
    }
}

impl EventDecoder<ChatChunk> for EventsToChunks {
    fn decode(&mut self, event: SseEvent, out: &mut Items<ChatChunk>) -> bool {
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(data) => data,
            Err(err) => {
                out.push_back(Err(AdapterError::Protocol {
                    message: format!("{err} in an Anthropic event"),
                }));
                return true;
            }
        };
        let end = event.event.as_deref() == Some("message_stop") || data["type"] == "message_stop";
        match self.on_event(event.event.as_deref(), &data) {
            Ok(chunks) => {
                out.extend(chunks.into_iter().map(Ok));
                end
            }
            Err(err) => {
                out.push_back(Err(err));
                true
            }
        }
    }
}

impl Provider for AnthropicClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        async move {
            let headers = Self::forwarded(&req);
            let mut request = Self::translate(req)?;
            request.stream = None;
            let body = self.upstream.call("/messages", &request, &headers).await?;
            let message: MessagesResponse = parse_json(&body)?;
            Ok(chat_from_message(message))
        }
        .boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        async move {
            let headers = Self::forwarded(&req);
            let mut request = Self::translate(req)?;
            request.stream = Some(true);
            self.upstream
                .stream("/messages", &request, &headers, EventsToChunks::default())
                .await
        }
        .boxed()
    }

    fn api(&self) -> &'static str {
        "Anthropic Messages"
    }
}
