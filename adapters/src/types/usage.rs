use serde::{Deserialize, Serialize};

use super::Extra;

/// Token usage as OpenAI-compatible servers report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    /// `cached_tokens` lives here (OpenAI, vLLM, llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<UsageDetails>,
    /// `reasoning_tokens` lives here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<UsageDetails>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Self {
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            ..Usage::default()
        }
    }

    /// Usage with the prompt tokens served from a prefix cache reported in
    /// `prompt_tokens_details.cached_tokens`, as vLLM and llama.cpp do.
    pub fn with_cached(prompt_tokens: u64, completion_tokens: u64, cached_tokens: u64) -> Self {
        Usage {
            prompt_tokens_details: Some(UsageDetails {
                cached_tokens: Some(cached_tokens),
                ..UsageDetails::default()
            }),
            ..Usage::new(prompt_tokens, completion_tokens)
        }
    }

    /// Prompt tokens the backend served from its prefix cache.
    pub fn cached_tokens(&self) -> u64 {
        self.prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .unwrap_or(0)
    }
}

/// The `*_tokens_details` objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageDetails {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}
