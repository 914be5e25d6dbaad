//! The Vertex AI client: one project and location, the publisher chosen
//! by model (`claude-*` is Anthropic's, anything else Google's).

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::HeaderValue;
use http::header::AUTHORIZATION;
use serde_json::Value;
use switchyard_policies::VertexBackend;

use super::oauth::Tokens;
use crate::anthropic::{
    EventsToChunks as MessagesToChunks, MessagesResponse, chat_from_message, messages_from_chat,
};
use crate::credentials::CredentialStatus;
use crate::error::AdapterError;
use crate::gemini::{EventsToChunks as GenerateToChunks, chat_from_generate, generate_request};
use crate::openai::parse_json;
use crate::provider::{ChatStream, Provider};
use crate::types::{ChatRequest, ChatResponse};
use crate::upstream::{Link, Upstream};

/// The `anthropic_version` Vertex AI's Claude models take, unless the
/// config names another.
pub const DEFAULT_ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Vertex AI's host for a location: the global endpoint, a multi-region's
/// (`us`, `eu`), or a region's own.
pub fn host_for(location: &str) -> String {
    match location {
        "global" => "https://aiplatform.googleapis.com".to_owned(),
        "us" | "eu" => format!("https://aiplatform.{location}.rep.googleapis.com"),
        region => format!("https://{region}-aiplatform.googleapis.com"),
    }
}

pub struct VertexClient {
    upstream: Upstream,
    tokens: Arc<Tokens>,
    /// `/v1/projects/{project}/locations/{location}/publishers`.
    publishers: String,
    anthropic_version: String,
}

/// Which publisher serves a model.
fn is_anthropic(model: &str) -> bool {
    model.starts_with("claude")
}

impl VertexClient {
    pub fn new(
        config: &VertexBackend,
        link: Link<'_>,
        tokens: Arc<Tokens>,
    ) -> Result<Self, AdapterError> {
        let host = config
            .endpoint
            .clone()
            .unwrap_or_else(|| host_for(&config.location));
        Ok(VertexClient {
            upstream: Upstream::new(&host, Vec::new(), link)?,
            tokens,
            publishers: format!(
                "/v1/projects/{}/locations/{}/publishers",
                config.project, config.location
            ),
            anthropic_version: config
                .anthropic_version
                .clone()
                .unwrap_or_else(|| DEFAULT_ANTHROPIC_VERSION.to_owned()),
        })
    }

    fn path(&self, model: &str, method: &str) -> String {
        let publisher = if is_anthropic(model) {
            "anthropic"
        } else {
            "google"
        };
        let model = crate::gemini::segment_for_path(model);
        format!("{}/{publisher}/models/{model}:{method}", self.publishers)
    }

    async fn authorization(&self) -> Result<[(http::HeaderName, HeaderValue); 1], AdapterError> {
        Ok([(AUTHORIZATION, self.tokens.get().await?)])
    }

    /// A Messages body as Vertex takes it: no `model` (it is in the path),
    /// `anthropic_version` in the body instead of a header.
    fn raw_predict_body(&self, req: ChatRequest, stream: bool) -> Result<Value, AdapterError> {
        let mut request = messages_from_chat(req).map_err(invalid)?;
        request.stream = stream.then_some(true);
        let mut body = serde_json::to_value(&request).map_err(|e| AdapterError::Internal {
            message: e.to_string(),
        })?;
        if let Some(fields) = body.as_object_mut() {
            fields.remove("model");
            fields.insert(
                "anthropic_version".into(),
                Value::String(self.anthropic_version.clone()),
            );
        }
        Ok(body)
    }
}

fn invalid(err: crate::anthropic::TranslateError) -> AdapterError {
    AdapterError::InvalidRequest {
        message: err.to_string(),
        param: Some(err.param),
    }
}

impl Provider for VertexClient {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        async move {
            let auth = self.authorization().await?;
            let model = req.model.clone();
            if is_anthropic(&model) {
                let body = self.raw_predict_body(req, false)?;
                let path = self.path(&model, "rawPredict");
                let answer = self.upstream.call_path(&path, &body, &auth).await?;
                let message: MessagesResponse = parse_json(&answer)?;
                return Ok(chat_from_message(message));
            }
            let body = generate_request(&req).map_err(invalid)?;
            let path = self.path(&model, "generateContent");
            let answer: Value = parse_json(&self.upstream.call_path(&path, &body, &auth).await?)?;
            Ok(chat_from_generate(&answer, &model))
        }
        .boxed()
    }

    fn chat_stream(&self, req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        async move {
            let auth = self.authorization().await?;
            let model = req.model.clone();
            if is_anthropic(&model) {
                let body = self.raw_predict_body(req, true)?;
                let path = self.path(&model, "streamRawPredict");
                return self
                    .upstream
                    .stream_path(&path, &body, &auth, MessagesToChunks::default())
                    .await;
            }
            let body = generate_request(&req).map_err(invalid)?;
            let path = self.path(&model, "streamGenerateContent?alt=sse");
            self.upstream
                .stream_path(&path, &body, &auth, GenerateToChunks::new(&model))
                .await
        }
        .boxed()
    }

    fn api(&self) -> &'static str {
        "Vertex AI's generateContent and rawPredict"
    }

    fn credentials(&self) -> Option<CredentialStatus> {
        Some(self.tokens.status())
    }
}
