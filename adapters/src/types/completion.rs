use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Extra, StreamOptions, Timings, Usage};

/// `POST /v1/completions` (the legacy text completion API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    pub model: String,
    /// A string, an array of strings, or token arrays.
    pub prompt: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl CompletionRequest {
    pub fn is_stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// Completions the backend generates, each billed: `best_of` (or `n`,
    /// when larger) for every prompt of a batch.
    pub fn choices(&self) -> u32 {
        let best_of = self
            .extra
            .get("best_of")
            .and_then(Value::as_u64)
            .map_or(1, |b| u32::try_from(b).unwrap_or(u32::MAX));
        let per_prompt = self.n.unwrap_or(1).max(best_of);
        per_prompt.saturating_mul(self.prompt_count())
    }

    /// Prompts in the request: an array of strings (or of token arrays) is
    /// a batch; a string or one token array is one prompt.
    pub fn prompt_count(&self) -> u32 {
        match &self.prompt {
            Value::Array(items) if items.iter().all(|i| i.is_string() || i.is_array()) => {
                u32::try_from(items.len()).unwrap_or(u32::MAX).max(1)
            }
            _ => 1,
        }
    }

    /// The prompt as one text (array prompts joined by newlines).
    pub fn prompt_text(&self) -> String {
        match &self.prompt {
            Value::String(s) => s.clone(),
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect::<Vec<_>>()
                .join("\n"),
            other => other.to_string(),
        }
    }
}

/// A completion response, and (with the same shape) each streamed chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionResponse {
    pub id: String,
    #[serde(default = "text_completion")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub choices: Vec<CompletionChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama.cpp's measurements (of a whole answer, or on a stream's last chunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Box<Timings>>,
    #[serde(flatten)]
    pub extra: Extra,
}

fn text_completion() -> String {
    "text_completion".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub logprobs: Option<Value>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}
