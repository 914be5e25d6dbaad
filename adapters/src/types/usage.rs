use serde::Serialize;
use switchyard_policies::TokenCounts;

use super::with_extra::with_extra;

use super::Extra;

/// Token usage as OpenAI-compatible servers report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub total_tokens: u64,
    /// `cached_tokens` lives here (OpenAI, vLLM, llama.cpp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<UsageDetails>,
    /// `reasoning_tokens` lives here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<UsageDetails>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Usage { prompt_tokens = "prompt_tokens": optional, completion_tokens = "completion_tokens": optional, total_tokens = "total_tokens": optional, prompt_tokens_details = "prompt_tokens_details": optional, completion_tokens_details = "completion_tokens_details": optional });

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

    /// Prompt tokens written to the provider's cache (Anthropic's
    /// `cache_creation_input_tokens`, kept beside OpenAI's fields).
    pub fn cache_write_tokens(&self) -> u64 {
        self.extra
            .get("cache_creation_input_tokens")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
    }

    /// Output tokens spent on reasoning (part of `completion_tokens`).
    pub fn reasoning_tokens(&self) -> u64 {
        self.completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens)
            .unwrap_or(0)
    }

    /// The tokens by the kind each is billed as, each token in exactly one
    /// kind. `prompt_tokens` counts every prompt token (OpenAI's meaning,
    /// which Anthropic usage is translated to), so cache reads and cache
    /// writes come out of it rather than on top of it. Reasoning stays part
    /// of `output`, as `TokenCounts` keeps it.
    pub fn token_counts(&self) -> TokenCounts {
        let cached = self.cached_tokens().min(self.prompt_tokens);
        let cache_write = self.cache_write_tokens().min(self.prompt_tokens - cached);
        TokenCounts {
            input: self.prompt_tokens - cached - cache_write,
            cached_input: cached,
            cache_write,
            output: self.completion_tokens,
            reasoning: self.reasoning_tokens().min(self.completion_tokens),
        }
    }
}

/// The `*_tokens_details` objects.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct UsageDetails {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(UsageDetails { cached_tokens = "cached_tokens": optional, reasoning_tokens = "reasoning_tokens": optional });
