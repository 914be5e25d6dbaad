//! Streamed chat: a chunk, its choices and their deltas.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use super::Role;
use crate::types::with_extra::with_extra;
use crate::types::{Extra, Timings, Usage};

/// One streamed chat completion chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChatChunk {
    pub id: String,
    /// Nearly always `chat.completion.chunk`, which is then not allocated
    /// again for every chunk.
    pub object: Cow<'static, str>,
    pub created: u64,
    pub model: String,
    pub choices: Vec<ChunkChoice>,
    /// Boxed: only a stream's last chunk has usage, and a chunk is moved
    /// about ten times on its way through the gateway (360 bytes with the
    /// usage in place, 208 boxed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_fingerprint: Option<String>,
    /// llama.cpp's measurements, on a stream's last chunk (boxed, as above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Box<Timings>>,
    #[serde(flatten)]
    pub extra: Extra,
    /// The `data:` of the event this chunk was read from, when the backend
    /// spoke OpenAI's dialect and sent every field the spec requires: an
    /// OpenAI-dialect caller gets it as it came instead of a re-encoding
    /// (see [`Self::with_verbatim`]). Anything that changes the chunk must
    /// drop it (masking's restore does), or the caller gets the old bytes.
    #[serde(skip)]
    pub verbatim: Option<Bytes>,
    /// Whether it was read with every top field the spec requires of a
    /// chunk (`object`, `created`, `model`, `choices`): a re-encoding
    /// writes them whether it was or not.
    #[serde(skip)]
    pub spec_fields_sent: bool,
    /// Whether it was read with a `usage` key, `null` or not: OpenAI sends
    /// `"usage": null` on every chunk to a request that asks for usage, as
    /// the gateway's requests upstream do; a caller that did not ask gets
    /// chunks without it.
    #[serde(skip)]
    pub usage_sent: bool,
}

with_extra!(ChatChunk { id = "id": required, object = "object": or(chat_completion_chunk()), created = "created": optional, model = "model": optional, choices = "choices": optional, usage = "usage": optional, system_fingerprint = "system_fingerprint": optional, timings = "timings": optional } skip: verbatim; sent: spec_fields_sent = object, created, model, choices; sent: usage_sent = usage);

/// A chunk's `object`, as OpenAI sends it.
pub const CHUNK_OBJECT: &str = "chat.completion.chunk";

fn chat_completion_chunk() -> Cow<'static, str> {
    Cow::Borrowed(CHUNK_OBJECT)
}

impl ChatChunk {
    /// A chunk of one choice, made now: how translated streams write theirs.
    pub fn single(id: &str, model: &str, delta: Delta, finish: Option<&str>) -> Self {
        ChatChunk {
            id: id.to_owned(),
            object: "chat.completion.chunk".into(),
            created: crate::types::unix_now(),
            model: model.to_owned(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason: finish.map(str::to_owned),
                logprobs: None,
                extra: Extra::new(),
                spec_fields_sent: false,
            }],
            usage: None,
            system_fingerprint: None,
            timings: None,
            extra: Extra::new(),
            verbatim: None,
            spec_fields_sent: false,
            usage_sent: false,
        }
    }

    /// Keeps `data`, the OpenAI-dialect event this was read from, to be
    /// sent on as it is when it has every field the spec requires of a
    /// chunk (a re-encoding would fill them in): its choices need theirs,
    /// and none may have a logprobs object (one without its `refusal` gets
    /// it added). The data must be one line: an event whose JSON came over
    /// several `data:` lines (joined by the parser with line breaks, which
    /// JSON reads as spaces) would end the caller's event at the first.
    pub fn with_verbatim(mut self, data: Bytes) -> Self {
        let complete = self.spec_fields_sent
            && self
                .choices
                .iter()
                .all(|c| c.spec_fields_sent && c.logprobs.is_none())
            && memchr::memchr2(b'\n', b'\r', &data).is_none();
        if complete {
            self.verbatim = Some(data);
        }
        self
    }

    /// The final chunk that only carries usage (`stream_options.include_usage`).
    pub fn is_usage_only(&self) -> bool {
        self.choices.is_empty() && self.usage.is_some()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChunkChoice {
    pub index: u32,
    pub delta: Delta,
    /// Always written, as `null` until the last chunk: some clients require it.
    pub finish_reason: Option<String>,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::types::spec_fields::logprobs_with_refusal"
    )]
    pub logprobs: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
    /// Whether it was read with every field the spec requires of a chunk's
    /// choice (`index`, `delta`, `finish_reason`).
    #[serde(skip)]
    pub spec_fields_sent: bool,
}

with_extra!(ChunkChoice { index = "index": optional, delta = "delta": optional, finish_reason = "finish_reason": optional, logprobs = "logprobs": optional } ; sent: spec_fields_sent = index, delta, finish_reason);

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Delta { role = "role": optional, content = "content": optional, tool_calls = "tool_calls": optional });

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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCallDelta {
    pub index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionCallDelta>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(ToolCallDelta { index = "index": required, id = "id": optional, kind = "type": optional, function = "function": optional });

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FunctionCallDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(FunctionCallDelta { name = "name": optional, arguments = "arguments": optional });
