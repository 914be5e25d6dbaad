//! Managed clouds and native provider APIs as written in YAML.

use serde::Deserialize;

/// `gemini:` on a backend.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGemini {
    /// `https://generativelanguage.googleapis.com` when unset.
    pub base_url: Option<String>,
    /// `env:NAME`.
    pub api_key: String,
}

/// `azure:` on a backend.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAzure {
    pub endpoint: String,
    pub deployment: String,
    pub api_version: String,
    /// `env:NAME`; this or `entra_token`.
    pub api_key: Option<String>,
    /// `env:NAME`; this or `api_key`.
    pub entra_token: Option<String>,
}

/// `vertex:` on a backend.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVertex {
    pub project: String,
    pub location: String,
    pub endpoint: Option<String>,
    /// A service account's key file; `GOOGLE_APPLICATION_CREDENTIALS`,
    /// then the metadata server, when unset.
    pub credentials_file: Option<String>,
    pub anthropic_version: Option<String>,
    #[serde(default)]
    pub prompt_caching: bool,
}

/// `bedrock:` on a backend.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBedrock {
    pub region: String,
    pub endpoint: Option<String>,
    /// `env:NAME`, with `secret_access_key`; AWS's own environment
    /// variables and web identity when unset.
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    #[serde(default)]
    pub prompt_caching: bool,
}
