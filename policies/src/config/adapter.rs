//! How the gateway reaches each backend: the adapter a backend names and
//! that adapter's settings, secrets held as the names of the environment
//! variables that hold them.

use std::time::Duration;

use super::{Engine, SimParams};

/// How the gateway talks to a backend.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendAdapter {
    /// Any OpenAI-compatible server.
    OpenAi(OpenAiBackend),
    /// The built-in model-server simulator, in process.
    Sim(SimParams),
    /// An Anthropic Messages API (Anthropic itself, or another gateway's
    /// `/v1/messages`).
    Anthropic(AnthropicBackend),
    /// The Gemini API's own generateContent surface.
    Gemini(GeminiBackend),
    /// An Azure OpenAI deployment.
    Azure(AzureBackend),
    /// Google Cloud's Vertex AI: Gemini and Claude models.
    Vertex(VertexBackend),
    /// Amazon Bedrock's Converse API.
    Bedrock(BedrockBackend),
}

/// An Anthropic Messages upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicBackend {
    /// Base URL up to and including the version segment, e.g.
    /// `https://api.anthropic.com/v1`; never ends with `/`.
    pub base_url: String,
    /// From `api_key: env:NAME`.
    pub api_key_env: Option<String>,
    /// The `anthropic-version` header; 2023-06-01 when unset.
    pub version: Option<String>,
    /// Mark long stable prefixes (tools and system) with `cache_control`
    /// once the prefix index has seen them within the cache lifetime, when
    /// the client set no markers itself.
    pub prompt_caching: bool,
}

/// An OpenAI-compatible upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiBackend {
    /// Base URL up to and including the version segment, e.g.
    /// `http://127.0.0.1:8081/v1`; never ends with `/`.
    pub base_url: String,
    /// Name of the environment variable holding the API key, from
    /// `api_key: env:NAME`. The key itself is never part of the config.
    pub api_key_env: Option<String>,
    /// The server speaks the Responses API itself: `/v1/responses` requests
    /// go to it untranslated (OpenAI's hosted tools included).
    pub native_responses: bool,
    pub engine: Engine,
    /// llama.cpp's slot count (`--parallel`): a session is pinned to one
    /// slot (`id_slot`) so its prefix stays cached there.
    pub slots: Option<u32>,
    /// The engine's Prometheus endpoint, read for speculative acceptance
    /// (vLLM, SGLang, llama.cpp started with `--metrics`).
    pub metrics_url: Option<String>,
    pub metrics_interval: Duration,
    /// Base URLs of every server of this model: `base_url` first, then
    /// `replicas`.
    pub replicas: Vec<String>,
    /// Send `prompt_cache_key` when the client did not.
    pub prompt_cache_key: bool,
}

impl OpenAiBackend {
    /// `scheme://host:port` of the server, where engines keep their own
    /// pages (`/metrics`, llama.cpp's `/props`).
    pub fn origin(&self) -> &str {
        origin(&self.base_url)
    }
}

/// `scheme://host:port` of a URL.
pub(super) fn origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(i) => &url[..after_scheme + i],
        None => url,
    }
}

/// The Gemini API (generativelanguage.googleapis.com), spoken natively.
#[derive(Debug, Clone, PartialEq)]
pub struct GeminiBackend {
    /// The server's root, without the API version (the adapter adds
    /// `/v1beta/models/{model}:...`); never ends with `/`.
    pub base_url: String,
    /// From `api_key: env:NAME`; sent as `x-goog-api-key`.
    pub api_key_env: String,
}

/// Azure OpenAI: one deployment of a resource.
#[derive(Debug, Clone, PartialEq)]
pub struct AzureBackend {
    /// `https://RESOURCE.openai.azure.com`; never ends with `/`.
    pub endpoint: String,
    pub deployment: String,
    /// A dated version (`2024-10-21`) for the deployments surface, or `v1`
    /// for the newer `/openai/v1/` one.
    pub api_version: String,
    pub auth: AzureAuth,
}

/// How the gateway proves itself to Azure, each from `env:NAME`.
#[derive(Debug, Clone, PartialEq)]
pub enum AzureAuth {
    /// Sent as `api-key`.
    ApiKey(String),
    /// A Microsoft Entra ID token, sent as `Authorization: Bearer`.
    EntraToken(String),
}

/// Vertex AI at one project and location.
#[derive(Debug, Clone, PartialEq)]
pub struct VertexBackend {
    pub project: String,
    /// A region (`us-east5`), `global`, or a multi-region (`us`, `eu`).
    pub location: String,
    /// The host, when not the location's own; never ends with `/`.
    pub endpoint: Option<String>,
    /// A service account's key file.
    pub credentials_file: Option<String>,
    /// The `anthropic_version` Claude models are sent.
    pub anthropic_version: Option<String>,
    /// Mark long stable prefixes of Claude requests with `cache_control`.
    pub prompt_caching: bool,
}

/// Amazon Bedrock in one region.
#[derive(Debug, Clone, PartialEq)]
pub struct BedrockBackend {
    pub region: String,
    /// The runtime endpoint, when not the region's own; never ends with `/`.
    pub endpoint: Option<String>,
    /// Keys from the config's `env:` references; AWS's own environment
    /// variables, then a web identity, when `None`.
    pub keys: Option<BedrockKeys>,
    /// Mark long stable prefixes with cache points.
    pub prompt_caching: bool,
}

/// The environment variables that hold a backend's AWS keys.
#[derive(Debug, Clone, PartialEq)]
pub struct BedrockKeys {
    pub access_key_id_env: String,
    pub secret_access_key_env: String,
    pub session_token_env: Option<String>,
}

impl AzureBackend {
    /// Whether this is the `/openai/v1/` surface, where the deployment is
    /// sent as the model and no `api-version` is added.
    pub fn v1(&self) -> bool {
        self.api_version == "v1"
    }

    /// The base URL requests' paths (`/chat/completions`, ...) follow.
    pub fn base_url(&self) -> String {
        if self.v1() {
            format!("{}/openai/v1", self.endpoint)
        } else {
            format!("{}/openai/deployments/{}", self.endpoint, self.deployment)
        }
    }
}

impl BackendAdapter {
    /// The `env:NAME` references this adapter reads at start, as
    /// `(field path under the backend, NAME)`.
    pub fn env_references(&self) -> Vec<(&'static str, &str)> {
        fn optional<'a>(
            field: &'static str,
            var: &'a Option<String>,
        ) -> Vec<(&'static str, &'a str)> {
            var.as_deref().map(|var| (field, var)).into_iter().collect()
        }
        match self {
            BackendAdapter::OpenAi(openai) => optional("openai.api_key", &openai.api_key_env),
            BackendAdapter::Anthropic(anthropic) => {
                optional("anthropic.api_key", &anthropic.api_key_env)
            }
            BackendAdapter::Gemini(gemini) => vec![("gemini.api_key", gemini.api_key_env.as_str())],
            BackendAdapter::Azure(azure) => vec![match &azure.auth {
                AzureAuth::ApiKey(var) => ("azure.api_key", var.as_str()),
                AzureAuth::EntraToken(var) => ("azure.entra_token", var.as_str()),
            }],
            BackendAdapter::Bedrock(bedrock) => bedrock
                .keys
                .iter()
                .flat_map(|keys| {
                    let mut refs = vec![
                        ("bedrock.access_key_id", keys.access_key_id_env.as_str()),
                        (
                            "bedrock.secret_access_key",
                            keys.secret_access_key_env.as_str(),
                        ),
                    ];
                    refs.extend(optional("bedrock.session_token", &keys.session_token_env));
                    refs
                })
                .collect(),
            BackendAdapter::Vertex(_) | BackendAdapter::Sim(_) => Vec::new(),
        }
    }
}
