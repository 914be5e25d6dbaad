//! Canonical chat answers and chunks -> Gemini `GenerateContentResponse`s
//! (ingress: what Gemini CLI and the google-genai SDKs read back).

use serde_json::{Map, Value, json};

use super::to_gemini::THOUGHT_SIGNATURE;
use crate::types::{ChatChunk, ChatResponse, Message, Usage};

/// OpenAI finish reasons in Gemini's words.
pub fn finish_to_gemini(finish: &str) -> &'static str {
    match finish {
        "length" => "MAX_TOKENS",
        "content_filter" => "SAFETY",
        _ => "STOP",
    }
}

/// Usage as `usageMetadata`: thoughts apart from the answer's tokens.
pub fn usage_metadata(usage: &Usage) -> Value {
    let counts = usage.token_counts();
    let thoughts = counts.reasoning.min(usage.completion_tokens);
    let mut meta = json!({
        "promptTokenCount": usage.prompt_tokens,
        "candidatesTokenCount": usage.completion_tokens - thoughts,
        "totalTokenCount": usage.prompt_tokens + usage.completion_tokens,
    });
    if counts.cached_input > 0 {
        meta["cachedContentTokenCount"] = json!(counts.cached_input);
    }
    if thoughts > 0 {
        meta["thoughtsTokenCount"] = json!(thoughts);
    }
    meta
}

fn call_part(id: &str, name: &str, arguments: &str, extra: &Map<String, Value>) -> Value {
    let args: Value = serde_json::from_str(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    let mut part = json!({"functionCall": {"name": name, "args": args, "id": id}});
    if let Some(signature) = extra.get(THOUGHT_SIGNATURE) {
        part["thoughtSignature"] = signature.clone();
    }
    part
}

fn message_parts(message: &Message) -> Vec<Value> {
    let mut parts = Vec::new();
    if let Some(thoughts) = message
        .extra
        .get("reasoning_content")
        .and_then(Value::as_str)
        && !thoughts.is_empty()
    {
        parts.push(json!({"text": thoughts, "thought": true}));
    }
    let text = message.text();
    if !text.is_empty() {
        parts.push(json!({ "text": text }));
    }
    for call in message.tool_calls.iter().flatten() {
        parts.push(call_part(
            &call.id,
            &call.function.name,
            &call.function.arguments,
            &call.extra,
        ));
    }
    parts
}

/// A whole answer.
pub fn generate_response_from_chat(resp: &ChatResponse) -> Value {
    let candidates: Vec<Value> = resp
        .choices
        .iter()
        .map(|choice| {
            json!({
                "content": {"role": "model", "parts": message_parts(&choice.message)},
                "finishReason": finish_to_gemini(choice.finish_reason.as_deref().unwrap_or("stop")),
                "index": choice.index,
            })
        })
        .collect();
    let mut out = json!({
        "candidates": candidates,
        "modelVersion": resp.model,
        "responseId": resp.id,
    });
    if let Some(usage) = &resp.usage {
        out["usageMetadata"] = usage_metadata(usage);
    }
    out
}

/// A call being streamed: Gemini sends each whole, so its arguments are
/// gathered until the answer finishes.
#[derive(Debug, Default)]
struct PendingCall {
    id: String,
    name: String,
    arguments: String,
    extra: Map<String, Value>,
}

/// Translates one streamed answer into Gemini's stream: each chunk's text
/// as it comes, then one last response with the calls, the finish reason
/// and the usage.
#[derive(Debug)]
pub struct GenerateStream {
    model: String,
    id: String,
    /// By the backend's call index (any number it sends).
    calls: std::collections::BTreeMap<u32, PendingCall>,
    finish: Option<&'static str>,
    usage: Option<Value>,
    ended: bool,
}

impl GenerateStream {
    pub fn new(model: &str) -> Self {
        GenerateStream {
            model: model.to_owned(),
            id: String::new(),
            calls: std::collections::BTreeMap::new(),
            finish: None,
            usage: None,
            ended: false,
        }
    }

    fn response(&self, parts: Vec<Value>) -> Value {
        json!({
            "candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": self.model,
            "responseId": self.id,
        })
    }

    /// The responses one chunk stands for (often none).
    pub fn on_chunk(&mut self, chunk: &ChatChunk) -> Vec<Value> {
        if self.id.is_empty() {
            self.id.clone_from(&chunk.id);
        }
        if !chunk.model.is_empty() {
            self.model.clone_from(&chunk.model);
        }
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage_metadata(usage));
        }
        let mut out = Vec::new();
        for choice in chunk.choices.iter().filter(|c| c.index == 0) {
            let delta = &choice.delta;
            if let Some(thoughts) = delta.extra.get("reasoning_content").and_then(Value::as_str)
                && !thoughts.is_empty()
            {
                out.push(self.response(vec![json!({"text": thoughts, "thought": true})]));
            }
            if let Some(text) = delta.content.as_deref().filter(|t| !t.is_empty()) {
                out.push(self.response(vec![json!({ "text": text })]));
            }
            for call in delta.tool_calls.iter().flatten() {
                let pending = self.calls.entry(call.index).or_default();
                if let Some(id) = &call.id {
                    pending.id.clone_from(id);
                }
                pending.extra.extend(call.extra.clone());
                if let Some(function) = &call.function {
                    if let Some(name) = &function.name {
                        pending.name.clone_from(name);
                    }
                    if let Some(arguments) = &function.arguments {
                        pending.arguments.push_str(arguments);
                    }
                }
            }
            if let Some(finish) = &choice.finish_reason {
                self.finish = Some(finish_to_gemini(finish));
            }
        }
        out
    }

    /// The last response: the calls, the finish reason (`STOP` when the
    /// backend gave none) and the usage; once.
    pub fn finish(&mut self) -> Option<Value> {
        if self.ended {
            return None;
        }
        self.ended = true;
        let parts: Vec<Value> = self
            .calls
            .values()
            .map(|c| call_part(&c.id, &c.name, &c.arguments, &c.extra))
            .collect();
        let mut last = self.response(parts);
        last["candidates"][0]["finishReason"] = json!(self.finish.unwrap_or("STOP"));
        if let Some(usage) = &self.usage {
            last["usageMetadata"] = usage.clone();
        }
        Some(last)
    }
}
