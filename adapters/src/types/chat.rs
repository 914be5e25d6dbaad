use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Extra, Usage};

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Tool>>,
    /// `"none"`, `"auto"`, `"required"` or `{"type":"function","function":{"name":..}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Extra>,
    /// Everything else: `top_p`, `stop`, `presence_penalty`, vendor extensions.
    #[serde(flatten)]
    pub extra: Extra,
    /// Protocol headers of the caller's dialect that a backend of the same
    /// dialect receives unchanged (`anthropic-version`, `anthropic-beta`).
    /// Never part of the JSON body.
    #[serde(skip)]
    pub forward_headers: Vec<(String, String)>,
}

impl ChatRequest {
    pub fn is_stream(&self) -> bool {
        self.stream.unwrap_or(false)
    }

    /// The caller's output limit, whichever field it used.
    pub fn output_limit(&self) -> Option<u32> {
        self.max_completion_tokens.or(self.max_tokens)
    }

    /// Whether the client asked for a final usage chunk on a stream.
    pub fn wants_stream_usage(&self) -> bool {
        self.stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false)
    }
}

/// `stream_options`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    /// Absent (or null) on assistant messages that only call tools.
    #[serde(default)]
    pub content: Option<Content>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Message {
    /// A message with content and nothing else.
    pub fn new(role: Role, content: Content) -> Self {
        Message {
            role,
            content: Some(content),
            name: None,
            tool_calls: None,
            tool_call_id: None,
            extra: Extra::new(),
        }
    }

    /// The text of the message: its string content, or its text parts joined.
    pub fn text(&self) -> String {
        match &self.content {
            None => String::new(),
            Some(Content::Text(text)) => text.clone(),
            Some(Content::Parts(parts)) => parts
                .iter()
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// Message content: a string or a list of typed parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// One part of multi-part content (`text`, `image_url`, `input_audio`, `file`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDef {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    pub function: FunctionCall,
    #[serde(flatten)]
    pub extra: Extra,
}

fn function() -> String {
    "function".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, exactly as the model wrote it.
    pub arguments: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A non-streamed chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    pub id: String,
    #[serde(default = "chat_completion")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    pub choices: Vec<Choice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

fn chat_completion() -> String {
    "chat.completion".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Choice {
    #[serde(default)]
    pub index: u32,
    pub message: Message,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One streamed chat completion chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChunk {
    pub id: String,
    #[serde(default = "chat_completion_chunk")]
    pub object: String,
    #[serde(default)]
    pub created: u64,
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

fn chat_completion_chunk() -> String {
    "chat.completion.chunk".to_owned()
}

impl ChatChunk {
    /// The final chunk that only carries usage (`stream_options.include_usage`).
    pub fn is_usage_only(&self) -> bool {
        self.choices.is_empty() && self.usage.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Delta,
    /// Always written, as `null` until the last chunk: some clients require it.
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ContentPart {
    /// An `image_url` part (a URL, or a `data:` URL with the image inline).
    pub fn image_url(url: &str) -> Self {
        let mut extra = Extra::new();
        extra.insert("image_url".into(), serde_json::json!({ "url": url }));
        ContentPart {
            kind: "image_url".into(),
            text: None,
            extra,
        }
    }
}

impl Delta {
    /// A delta carrying one tool-call fragment.
    pub fn tool_call(call: ToolCallDelta) -> Self {
        Delta {
            tool_calls: Some(vec![call]),
            ..Delta::default()
        }
    }
}

impl ToolCallDelta {
    /// The first fragment of a call: its id and name, arguments to follow.
    pub fn opening(index: u32, id: &str, name: &str) -> Self {
        ToolCallDelta {
            index,
            id: Some(id.to_owned()),
            kind: Some("function".into()),
            function: Some(FunctionCallDelta {
                name: Some(name.to_owned()),
                arguments: Some(String::new()),
                ..FunctionCallDelta::default()
            }),
            extra: Extra::new(),
        }
    }

    /// A later fragment: more of the call's arguments.
    pub fn arguments(index: u32, fragment: &str) -> Self {
        ToolCallDelta {
            index,
            id: None,
            kind: None,
            function: Some(FunctionCallDelta {
                arguments: Some(fragment.to_owned()),
                ..FunctionCallDelta::default()
            }),
            extra: Extra::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionCallDelta>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FunctionCallDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let body = serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}], "x_note": 1}],
            "cache_prompt": true,
            "id_slot": 2,
            "top_p": 0.5,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}]
        });
        let req: ChatRequest = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(req.extra["id_slot"], 2);
        assert_eq!(serde_json::to_value(&req).unwrap(), body);
    }

    #[test]
    fn response_keeps_vendor_timings() {
        let body = serde_json::json!({
            "id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}},
            "timings": {"cache_n": 2, "draft_n": 4}
        });
        let resp: ChatResponse = serde_json::from_value(body.clone()).unwrap();
        assert_eq!(resp.usage.as_ref().unwrap().cached_tokens(), 2);
        assert_eq!(serde_json::to_value(&resp).unwrap(), body);
    }
}
