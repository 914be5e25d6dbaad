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
