use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Extra;

/// `POST /v1/embeddings`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingRequest {
    pub model: String,
    /// A string, an array of strings, or token arrays.
    pub input: Value,
    /// `float` or `base64` (the openai SDK asks for base64 by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding_format: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dimensions: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl EmbeddingRequest {
    /// The inputs as texts; token-array inputs are rendered as their numbers
    /// (only the simulator looks at them, to derive a vector).
    pub fn texts(&self) -> Vec<String> {
        match &self.input {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) if items.iter().all(Value::is_number) => {
                vec![self.input.to_string()]
            }
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
            other => vec![other.to_string()],
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingResponse {
    #[serde(default = "list")]
    pub object: String,
    pub data: Vec<Embedding>,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<EmbeddingUsage>,
    #[serde(flatten)]
    pub extra: Extra,
}

fn list() -> String {
    "list".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Embedding {
    #[serde(default = "embedding")]
    pub object: String,
    pub index: u32,
    /// An array of floats, or a base64 string of little-endian f32s.
    pub embedding: Value,
    #[serde(flatten)]
    pub extra: Extra,
}

fn embedding() -> String {
    "embedding".to_owned()
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmbeddingUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    #[serde(flatten)]
    pub extra: Extra,
}
