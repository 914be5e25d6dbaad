use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::with_extra::with_extra;

use super::{Extra, Timings, Usage};

/// `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Shared, not copied, by the copies of a request each try sends: an
    /// agent's tool definitions run to tens of kilobytes of JSON Schema, and
    /// copying their trees cost more than half as much as decoding them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools: Option<Arc<Vec<Tool>>>,
    /// `"none"`, `"auto"`, `"required"` or `{"type":"function","function":{"name":..}}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logprobs: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Extra>,
    /// Everything else: `top_p`, `stop`, `presence_penalty`, vendor extensions.
    #[serde(flatten)]
    pub extra: Extra,
    /// Protocol headers of the caller's dialect that a backend of the same
    /// dialect receives unchanged (`anthropic-version`, `anthropic-beta`).
    /// Never part of the JSON body.
    #[serde(skip)]
    pub forward_headers: Vec<(String, String)>,
    /// What the answer repeats back from the caller's own request, when the
    /// caller's dialect echoes its request (a Responses object carries its
    /// instructions, tools and settings). Never part of the JSON body.
    #[serde(skip)]
    pub echo: Option<Arc<crate::responses::Echo>>,
}

with_extra!(ChatRequest { model = "model": required, messages = "messages": required, stream = "stream": optional, stream_options = "stream_options": optional, max_tokens = "max_tokens": optional, max_completion_tokens = "max_completion_tokens": optional, temperature = "temperature": optional, n = "n": optional, seed = "seed": optional, tools = "tools": optional, tool_choice = "tool_choice": optional, parallel_tool_calls = "parallel_tool_calls": optional, response_format = "response_format": optional, logprobs = "logprobs": optional, top_logprobs = "top_logprobs": optional, user = "user": optional, metadata = "metadata": optional } skip: forward_headers, echo);

impl ChatRequest {
    /// The tool definitions, none when the request has no `tools`.
    pub fn tool_defs(&self) -> &[Tool] {
        self.tools.as_deref().map_or(&[], Vec::as_slice)
    }

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
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StreamOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(StreamOptions { include_usage = "include_usage": optional });

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

impl Role {
    /// The name it has on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Function => "function",
        }
    }

    /// The role named `name` on the wire, as serde reads it, without
    /// serde's enum machinery (about a hundred instructions a role).
    pub fn from_name(name: &str) -> Option<Role> {
        Some(match name {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            "function" => Role::Function,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Message {
    pub role: Role,
    /// Absent (or null) on assistant messages that only call tools.
    pub content: Option<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Message { role = "role": required, content = "content": optional, name = "name": optional, tool_calls = "tool_calls": optional, tool_call_id = "tool_call_id": optional });

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
        let mut text = String::new();
        self.push_text(&mut text);
        text
    }

    /// The length of [`Self::text`] in bytes, without making it.
    pub fn text_len(&self) -> usize {
        match &self.content {
            None => 0,
            Some(Content::Text(text)) => text.len(),
            Some(Content::Parts(parts)) => {
                let texts = parts.iter().filter_map(|p| p.text.as_deref());
                let (count, bytes) = texts.fold((0usize, 0), |(n, len), t| (n + 1, len + t.len()));
                bytes + count.saturating_sub(1)
            }
        }
    }

    /// Appends [`Self::text`] to `out`, without a string of its own.
    pub fn push_text(&self, out: &mut String) {
        match &self.content {
            None => {}
            Some(Content::Text(text)) => out.push_str(text),
            Some(Content::Parts(parts)) => {
                let texts = parts.iter().filter_map(|p| p.text.as_deref());
                for (i, text) in texts.enumerate() {
                    if i > 0 {
                        out.push('\n');
                    }
                    out.push_str(text);
                }
            }
        }
    }
}

/// Message content: a string or a list of typed parts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<ContentPart>),
}

/// Read by the JSON type it has (serde's `untagged` would first copy every
/// message's content into its generic `Content` tree, then try each form).
impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> serde::de::Visitor<'de> for ContentVisitor {
            type Value = Content;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string or an array of content parts")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Content, E> {
                Ok(Content::Text(text.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, text: String) -> Result<Content, E> {
                Ok(Content::Text(text))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Content, A::Error> {
                Vec::deserialize(serde::de::value::SeqAccessDeserializer::new(seq))
                    .map(Content::Parts)
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

/// One part of multi-part content (`text`, `image_url`, `input_audio`, `file`, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(ContentPart { kind = "type": required, text = "text": optional });

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Tool {
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDef,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Tool { kind = "type": required, function = "function": required });

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionDef {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(FunctionDef { name = "name": required, description = "description": optional, parameters = "parameters": optional });

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(ToolCall { id = "id": required, kind = "type": or(function_kind()), function = "function": required });

fn function_kind() -> String {
    "function".to_owned()
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    /// JSON text, exactly as the model wrote it.
    pub arguments: String,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(FunctionCall { name = "name": required, arguments = "arguments": required });

/// A non-streamed chat completion.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatResponse {
    pub id: String,
    /// Empty when the backend left it out; written as `chat.completion`.
    /// Nearly always `chat.completion`, which is then not allocated again
    /// for every answer.
    #[serde(serialize_with = "object_or_chat_completion")]
    pub object: Cow<'static, str>,
    pub created: u64,
    pub model: String,
    pub choices: Vec<Choice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
    /// llama.cpp's measurements of this answer (boxed: most answers and
    /// chunks have none, and chunks are held by the thousand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Box<Timings>>,
    #[serde(flatten)]
    pub extra: Extra,
    /// The backend's body this answer was read from, when the backend spoke
    /// OpenAI's dialect and left out none of the fields written above the
    /// choices: an OpenAI-dialect caller gets these bytes as they came
    /// instead of a re-encoding of the same answer (see [`Self::with_verbatim`]).
    #[serde(skip)]
    pub verbatim: Option<Bytes>,
}

with_extra!(ChatResponse { id = "id": required, object = "object": optional, created = "created": optional, model = "model": optional, choices = "choices": required, usage = "usage": optional, system_fingerprint = "system_fingerprint": optional, timings = "timings": optional } skip: verbatim);

/// A whole answer's `object`, as OpenAI sends it.
pub const ANSWER_OBJECT: &str = "chat.completion";

fn object_or_chat_completion<S: Serializer>(object: &str, out: S) -> Result<S::Ok, S::Error> {
    out.serialize_str(if object.is_empty() {
        ANSWER_OBJECT
    } else {
        object
    })
}

impl ChatResponse {
    /// Keeps `body`, the OpenAI-dialect answer this was read from, to be sent
    /// on as it is; unless the backend left out `object`, `created` or
    /// `model`, which a re-encoding fills in (async-openai and other strict
    /// clients reject an answer without them).
    ///
    /// Fields the spec requires that the backend left out below the top
    /// (`logprobs`, `refusal`) are spliced into those bytes as `null`.
    pub fn with_verbatim(self, body: Bytes) -> Self {
        self.keep_verbatim(body, None)
    }

    /// [`Self::with_verbatim`] for an answer whose reader saw whether every
    /// choice had a `logprobs` key, null or not (`logprobs_keys`): the body
    /// is then not searched for them.
    pub fn with_verbatim_read(self, body: Bytes, logprobs_keys: bool) -> Self {
        self.keep_verbatim(body, Some(logprobs_keys))
    }

    fn keep_verbatim(mut self, body: Bytes, logprobs_keys: Option<bool>) -> Self {
        // Built once: building memchr's searcher costs more than a search.
        static LOGPROBS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
            std::sync::LazyLock::new(|| memchr::memmem::Finder::new(br#""logprobs""#));
        if !self.object.is_empty() && self.created != 0 && !self.model.is_empty() {
            // Most servers that send these fields send every one (null or
            // not), and then the body need not be read again: every
            // message has its `refusal`, no choice has a logprobs object,
            // and every choice has its `logprobs` key (as many as there
            // are choices, when the body is searched for them).
            let complete = self
                .choices
                .iter()
                .all(|c| c.message.extra.contains_key("refusal") && c.logprobs.is_none())
                && logprobs_keys.unwrap_or_else(|| {
                    super::spec_fields::keys_found(&body, &LOGPROBS) == self.choices.len()
                });
            let filled = if complete {
                None
            } else {
                super::fill_chat_answer(&body).map(Bytes::from)
            };
            self.verbatim = Some(filled.unwrap_or(body));
        }
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub index: u32,
    /// Written with `refusal` (`null` when it has none), as the spec has it.
    #[serde(serialize_with = "super::spec_fields::message_with_refusal")]
    pub message: Message,
    pub finish_reason: Option<String>,
    /// Always written, `null` when there are none, as the spec has it.
    #[serde(serialize_with = "super::spec_fields::logprobs_with_refusal")]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Choice { index = "index": optional, message = "message": required, finish_reason = "finish_reason": optional, logprobs = "logprobs": optional });

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

    /// An `image_url` part's URL (empty when it has none).
    pub fn url(&self) -> &str {
        self.extra
            .get("image_url")
            .and_then(|u| u.get("url"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
    }

    /// An inline image's media type and base64 data, from its `data:` URL.
    pub fn inline_image(&self) -> Option<(&str, &str)> {
        self.url().strip_prefix("data:")?.split_once(";base64,")
    }
}

mod chunk;

pub use chunk::{CHUNK_OBJECT, ChatChunk, ChunkChoice, Delta, FunctionCallDelta, ToolCallDelta};

#[cfg(test)]
mod tests;
