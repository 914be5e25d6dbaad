//! The client for the Gemini API: chat requests go out as
//! `generateContent` (or `streamGenerateContent?alt=sse`) at
//! `/v1beta/models/{model}:...`, with the key in `x-goog-api-key`.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use serde_json::Value;
use switchyard_policies::GeminiBackend;

use super::from_gemini::{EventsToChunks, chat_from_generate};
use super::to_gemini::generate_request;
use crate::error::AdapterError;
use crate::openai::parse_json;
use crate::provider::{ChatStream, Provider};
use crate::types::{ChatRequest, ChatResponse};
use crate::upstream::{Link, Upstream};

/// The Gemini API version the adapter speaks.
pub const API_VERSION: &str = "v1beta";

pub struct GeminiClient {
    upstream: Upstream,
}

impl GeminiClient {
    /// `api_key` is the key itself, already read from the environment.
    pub fn new(
        config: &GeminiBackend,
        link: Link<'_>,
        api_key: &str,
    ) -> Result<Self, AdapterError> {
        let mut key = HeaderValue::from_str(api_key).map_err(|_| AdapterError::Internal {
            message: "the Gemini API key holds characters a header cannot".into(),
        })?;
        key.set_sensitive(true);
        let headers = vec![(HeaderName::from_static("x-goog-api-key"), key)];
        Ok(GeminiClient {
            upstream: Upstream::new(&config.base_url, headers, link)?,
        })
    }

    /// `/v1beta/models/{model}:{method}`, the model's name escaped as one
    /// path segment.
    fn path(model: &str, method: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        format!("/{API_VERSION}/models/{}:{method}", segment(model))
    }

    fn translate(req: &ChatRequest) -> Result<Value, AdapterError> {
        generate_request(req).map_err(|err| AdapterError::InvalidRequest {
            message: err.to_string(),
            param: Some(err.param),
        })
    }
}

/// A model name escaped for one path segment: unreserved characters and
/// `@` (Vertex's snapshots, `claude-...@20250929`, as Google's SDKs send
/// them) stay, every other byte is percent-encoded.
pub(crate) fn segment(name: &str) -> String {
    crate::percent::encode(name, |b| crate::percent::unreserved(b) || b == b'@')
}

impl Provider for GeminiClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        async move {
            let body = Self::translate(&req)?;
            let path = Self::path(&req.model, "generateContent");
            let answer = self.upstream.call_path(&path, &body, &[]).await?;
            let answer: Value = parse_json(&answer)?;
            Ok(chat_from_generate(&answer, &req.model))
        }
        .boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        async move {
            let body = Self::translate(&req)?;
            let path = Self::path(&req.model, "streamGenerateContent?alt=sse");
            self.upstream
                .stream_path(&path, &body, &[], EventsToChunks::new(&req.model))
                .await
        }
        .boxed()
    }

    fn api(&self) -> &'static str {
        "the Gemini API"
    }
}
