//! Gemini `generateContent` answers and `streamGenerateContent` events ->
//! canonical chat responses and chunks (egress from Gemini backends).

use serde_json::{Map, Value, json};

use super::to_gemini::{MINTED_ID, THOUGHT_SIGNATURE};
use crate::openai::parse_json;
use crate::sse::SseEvent;
use crate::types::{
    ChatChunk, ChatResponse, Choice, ChunkChoice, Content, Delta, FunctionCall, Message, Role,
    ToolCall, ToolCallDelta, Usage, UsageDetails, unix_now,
};
use crate::upstream::{EventDecoder, Items};

/// Gemini finish reasons in OpenAI's words; `called` says whether the
/// candidate called a function (Gemini says STOP for that too).
pub fn finish_reason(reason: &str, called: bool) -> &'static str {
    match reason {
        "MAX_TOKENS" => "length",
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT" => "content_filter",
        _ if called => "tool_calls",
        _ => "stop",
    }
}

/// `usageMetadata` in OpenAI's terms. Gemini's prompt count includes the
/// cached tokens, as OpenAI's does; thoughts are billed as output, and
/// the prompts of its own tool use as input.
pub fn usage_to_chat(meta: &Value) -> Usage {
    let count = |field: &str| meta.get(field).and_then(Value::as_u64).unwrap_or(0);
    let prompt = count("promptTokenCount") + count("toolUsePromptTokenCount");
    let thoughts = count("thoughtsTokenCount");
    Usage {
        prompt_tokens_details: Some(UsageDetails {
            cached_tokens: Some(count("cachedContentTokenCount")),
            ..UsageDetails::default()
        }),
        completion_tokens_details: (thoughts > 0).then(|| UsageDetails {
            reasoning_tokens: Some(thoughts),
            ..UsageDetails::default()
        }),
        ..Usage::new(prompt, count("candidatesTokenCount") + thoughts)
    }
}

/// An id for a call Gemini sent without one: unique across answers, as a
/// conversation may hold many, and other backends refuse repeated ids.
fn minted_id(n: u32) -> String {
    format!("{MINTED_ID}{:08x}_{n}", rand::random::<u32>())
}

/// What one candidate's parts say: its text, thoughts and calls.
#[derive(Default)]
struct Parts {
    text: String,
    thoughts: String,
    calls: Vec<ToolCall>,
}

/// Reads a candidate's parts, minting ids for calls Gemini sent without
/// one (`next_call` numbers them across a stream).
fn read_parts(content: &Value, next_call: &mut u32) -> Parts {
    let mut out = Parts::default();
    for part in content["parts"].as_array().into_iter().flatten() {
        if let Some(call) = part.get("functionCall") {
            let id = call["id"]
                .as_str()
                .map_or_else(|| minted_id(*next_call), str::to_owned);
            *next_call += 1;
            let mut extra = Map::new();
            if let Some(signature) = part.get("thoughtSignature") {
                extra.insert(THOUGHT_SIGNATURE.into(), signature.clone());
            }
            out.calls.push(ToolCall {
                id,
                kind: "function".into(),
                function: FunctionCall {
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: call.get("args").unwrap_or(&json!({})).to_string(),
                    extra: Default::default(),
                },
                extra: extra.into(),
            });
        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
            if part.get("thought") == Some(&Value::Bool(true)) {
                out.thoughts.push_str(text);
            } else {
                out.text.push_str(text);
            }
        }
    }
    out
}

/// A whole answer. A prompt Gemini blocked has no candidates: it comes
/// back as an empty answer stopped by the content filter.
pub fn chat_from_generate(resp: &Value, model: &str) -> ChatResponse {
    let mut next_call = 0;
    let mut choices = Vec::new();
    for (i, candidate) in resp["candidates"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let parts = read_parts(&candidate["content"], &mut next_call);
        let called = !parts.calls.is_empty();
        let mut extra = Map::new();
        if !parts.thoughts.is_empty() {
            extra.insert("reasoning_content".into(), json!(parts.thoughts));
        }
        choices.push(Choice {
            index: candidate["index"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(u32::try_from(i).unwrap_or(0)),
            message: Message {
                role: Role::Assistant,
                content: (!parts.text.is_empty() || !called).then_some(Content::Text(parts.text)),
                name: None,
                tool_calls: called.then_some(parts.calls),
                tool_call_id: None,
                extra: extra.into(),
            },
            finish_reason: Some(
                finish_reason(candidate["finishReason"].as_str().unwrap_or("STOP"), called)
                    .to_owned(),
            ),
            logprobs: None,
            extra: Default::default(),
        });
    }
    if choices.is_empty() {
        choices.push(Choice {
            index: 0,
            message: Message::new(Role::Assistant, Content::Text(String::new())),
            finish_reason: Some("content_filter".into()),
            logprobs: None,
            extra: Default::default(),
        });
    }
    ChatResponse {
        id: response_id(resp),
        object: "chat.completion".into(),
        created: unix_now(),
        model: resp["modelVersion"].as_str().unwrap_or(model).to_owned(),
        choices,
        usage: resp.get("usageMetadata").map(usage_to_chat),
        system_fingerprint: None,
        timings: None,
        extra: Default::default(),
        verbatim: None,
    }
}

fn response_id(resp: &Value) -> String {
    match resp["responseId"].as_str() {
        Some(id) => format!("chatcmpl-{id}"),
        None => format!("chatcmpl-gemini-{}", unix_now()),
    }
}

/// Turns a `streamGenerateContent?alt=sse` stream into chat chunks. The
/// stream has no end event: each event may repeat the running usage, and
/// the last one seen is sent when the body ends.
#[derive(Debug)]
pub struct EventsToChunks {
    model: String,
    id: Option<String>,
    started: bool,
    next_call: u32,
    usage: Option<Value>,
}

impl EventsToChunks {
    pub fn new(model: &str) -> Self {
        EventsToChunks {
            model: model.to_owned(),
            id: None,
            started: false,
            next_call: 0,
            usage: None,
        }
    }

    fn chunk(&self, choices: Vec<ChunkChoice>) -> ChatChunk {
        ChatChunk {
            id: self.id.clone().unwrap_or_default(),
            object: "chat.completion.chunk".into(),
            created: unix_now(),
            model: self.model.clone(),
            choices,
            usage: None,
            system_fingerprint: None,
            timings: None,
            extra: Default::default(),
            verbatim: None,
            spec_fields_sent: false,
            usage_sent: false,
        }
    }

    fn choice(index: u32, delta: Delta, finish: Option<&str>) -> ChunkChoice {
        ChunkChoice {
            index,
            delta,
            finish_reason: finish.map(str::to_owned),
            logprobs: None,
            extra: Default::default(),
            spec_fields_sent: false,
        }
    }

    /// The chunks one streamed response stands for.
    pub fn on_response(&mut self, resp: &Value) -> Vec<ChatChunk> {
        if self.id.is_none() {
            self.id = Some(response_id(resp));
            if let Some(version) = resp["modelVersion"].as_str() {
                self.model = version.to_owned();
            }
        }
        if let Some(usage) = resp.get("usageMetadata") {
            self.usage = Some(usage.clone());
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            let delta = Delta {
                role: Some(Role::Assistant),
                content: Some(String::new()),
                ..Delta::default()
            };
            out.push(self.chunk(vec![Self::choice(0, delta, None)]));
        }
        let candidates = resp["candidates"].as_array().map_or(&[][..], Vec::as_slice);
        if candidates.is_empty() && resp.pointer("/promptFeedback/blockReason").is_some() {
            out.push(self.chunk(vec![Self::choice(
                0,
                Delta::default(),
                Some("content_filter"),
            )]));
        }
        for candidate in candidates {
            let index = candidate["index"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0);
            let first_call = self.next_call;
            let parts = read_parts(&candidate["content"], &mut self.next_call);
            if !parts.thoughts.is_empty() {
                let mut delta = Delta::default();
                delta
                    .extra
                    .insert("reasoning_content".into(), json!(parts.thoughts));
                out.push(self.chunk(vec![Self::choice(index, delta, None)]));
            }
            if !parts.text.is_empty() {
                let delta = Delta {
                    content: Some(parts.text),
                    ..Delta::default()
                };
                out.push(self.chunk(vec![Self::choice(index, delta, None)]));
            }
            // A call arrives whole: its opening and all of its arguments.
            for (n, call) in parts.calls.iter().enumerate() {
                let at = first_call + u32::try_from(n).unwrap_or(0);
                let mut whole = ToolCallDelta::opening(at, &call.id, &call.function.name);
                whole.extra.clone_from(&call.extra);
                if let Some(function) = whole.function.as_mut() {
                    function.arguments = Some(call.function.arguments.clone());
                }
                out.push(self.chunk(vec![Self::choice(index, Delta::tool_call(whole), None)]));
            }
            if let Some(reason) = candidate["finishReason"].as_str() {
                let called = self.next_call > 0;
                let finish = finish_reason(reason, called);
                out.push(self.chunk(vec![Self::choice(index, Delta::default(), Some(finish))]));
            }
        }
        out
    }

    /// The usage chunk owed at the end of the stream.
    pub fn usage_chunk(&mut self) -> Option<ChatChunk> {
        let usage = self.usage.take()?;
        Some(ChatChunk {
            usage: Some(Box::new(usage_to_chat(&usage))),
            ..self.chunk(Vec::new())
        })
    }
}

impl EventDecoder<ChatChunk> for EventsToChunks {
    fn decode(&mut self, event: SseEvent, out: &mut Items<ChatChunk>) -> bool {
        // `{"error": ...}` mid-stream becomes the error it reports.
        match parse_json::<Value>(event.data.as_bytes()) {
            Ok(resp) if resp.get("error").is_some() => {
                let status = resp["error"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .filter(|c| (400..600).contains(c))
                    .unwrap_or(502);
                let body = event.data.as_bytes();
                out.push_back(Err(crate::upstream::status_error(
                    status,
                    &http::HeaderMap::new(),
                    body,
                )));
                true
            }
            Ok(resp) => {
                out.extend(self.on_response(&resp).into_iter().map(Ok));
                false
            }
            Err(err) => {
                out.push_back(Err(err));
                true
            }
        }
    }

    fn finish(&mut self, out: &mut Items<ChatChunk>) {
        out.extend(self.usage_chunk().map(Ok));
    }
}
