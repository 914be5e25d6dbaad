//! Azure OpenAI: an OpenAI-shaped API at a resource's own URL. Dated API
//! versions serve each deployment under
//! `/openai/deployments/{deployment}/...?api-version=...`; `v1` serves the
//! newer `/openai/v1/...` surface, the deployment named as the model.
//! Credentials go as `api-key` or as an Entra ID bearer token.

use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use http::header::AUTHORIZATION;
use http::{HeaderName, HeaderValue};
use switchyard_policies::{AzureAuth, AzureBackend};

use crate::error::AdapterError;
use crate::openai::OpenAiClient;
use crate::provider::{ChatStream, CompletionStream, Provider};
use crate::types::{
    ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    EmbeddingResponse,
};
use crate::upstream::{Link, Upstream};

const API_KEY: HeaderName = HeaderName::from_static("api-key");

/// One Azure OpenAI deployment.
pub struct AzureClient {
    inner: OpenAiClient,
    deployment: String,
}

impl AzureClient {
    /// `secret` is the API key or the Entra token (as `config.auth` says),
    /// already read from the environment.
    pub fn new(config: &AzureBackend, link: Link<'_>, secret: &str) -> Result<Self, AdapterError> {
        let (name, value) = match config.auth {
            AzureAuth::ApiKey(_) => (API_KEY, secret.to_owned()),
            AzureAuth::EntraToken(_) => (AUTHORIZATION, format!("Bearer {secret}")),
        };
        let mut value = HeaderValue::from_str(&value).map_err(|_| AdapterError::Internal {
            message: "the Azure credential holds characters a header cannot".into(),
        })?;
        value.set_sensitive(true);
        let upstream = Upstream::new(&config.base_url(), vec![(name, value)], link)?;
        let upstream = if config.v1() {
            upstream
        } else {
            upstream.with_query(&format!("api-version={}", config.api_version))
        };
        Ok(AzureClient {
            inner: OpenAiClient::on(upstream, false),
            deployment: config.deployment.clone(),
        })
    }
}

impl Provider for AzureClient {
    fn chat(&self, mut req: ChatRequest) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        req.model.clone_from(&self.deployment);
        self.inner.chat(req)
    }

    fn chat_stream(&self, mut req: ChatRequest) -> BoxFuture<'_, Result<ChatStream, AdapterError>> {
        req.model.clone_from(&self.deployment);
        async move {
            let stream = self.inner.chat_stream(req).await?;
            // Azure opens a stream with a chunk holding only its prompt
            // filter's verdicts: no choices, no usage, nothing to relay.
            let relayed = stream.filter(|chunk| {
                let empty = chunk
                    .as_ref()
                    .is_ok_and(|c| c.choices.is_empty() && c.usage.is_none());
                std::future::ready(!empty)
            });
            Ok(relayed.boxed())
        }
        .boxed()
    }

    fn completion(
        &self,
        mut req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        req.model.clone_from(&self.deployment);
        self.inner.completion(req)
    }

    fn completion_stream(
        &self,
        mut req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionStream, AdapterError>> {
        req.model.clone_from(&self.deployment);
        self.inner.completion_stream(req)
    }

    fn embeddings(
        &self,
        mut req: EmbeddingRequest,
    ) -> BoxFuture<'_, Result<EmbeddingResponse, AdapterError>> {
        req.model.clone_from(&self.deployment);
        self.inner.embeddings(req)
    }
}
