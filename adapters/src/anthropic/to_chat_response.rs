//! Anthropic Messages answers -> canonical chat responses and chunks
//! (egress from an Anthropic backend).

use serde_json::{Map, Value, json};

use super::types::{Block, MessagesResponse, Usage as MessagesUsage};
use crate::error::AdapterError;
use crate::types::{
    ChatChunk, ChatResponse, Choice, Content, Delta, FunctionCall, Message, Role, ToolCall,
    ToolCallDelta, Usage, UsageDetails, unix_now,
};

/// Anthropic stop reasons in OpenAI's words.
pub fn stop_reason_to_finish(stop: &str) -> &'static str {
    match stop {
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        _ => "stop",
    }
}

/// Usage in OpenAI's terms: prompt tokens include cache reads and writes.
pub fn usage_to_chat(usage: &MessagesUsage) -> Usage {
    let prompt =
        usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens;
    let mut out = Usage {
        prompt_tokens_details: Some(UsageDetails {
            cached_tokens: Some(usage.cache_read_input_tokens),
            ..UsageDetails::default()
        }),
        ..Usage::new(prompt, usage.output_tokens)
    };
    out.extra.insert(
        "cache_creation_input_tokens".into(),
        json!(usage.cache_creation_input_tokens),
    );
    out
}

pub fn chat_from_message(resp: MessagesResponse) -> ChatResponse {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut extra = Map::new();
    for block in resp.content {
        match block {
            Block::Text { text: t } => text.push_str(&t),
            Block::ToolUse { id, name, input } => calls.push(ToolCall {
                id,
                kind: "function".into(),
                function: FunctionCall {
                    name,
                    arguments: input.to_string(),
                    extra: Default::default(),
                },
                extra: Default::default(),
            }),
            Block::Thinking {
                thinking,
                signature,
            } => {
                extra.insert("reasoning_content".into(), json!(thinking));
                extra.insert("reasoning_signature".into(), json!(signature));
            }
            Block::RedactedThinking { data } => {
                let all = extra
                    .entry("redacted_thinking")
                    .or_insert_with(|| json!([]));
                if let Value::Array(all) = all {
                    all.push(json!(data));
                }
            }
        }
    }
    let message = Message {
        role: Role::Assistant,
        content: (!text.is_empty() || calls.is_empty()).then_some(Content::Text(text)),
        name: None,
        tool_calls: (!calls.is_empty()).then_some(calls),
        tool_call_id: None,
        extra: extra.into(),
    };
    ChatResponse {
        id: resp.id,
        object: "chat.completion".into(),
        created: unix_now(),
        model: resp.model,
        choices: vec![Choice {
            index: 0,
            message,
            finish_reason: resp
                .stop_reason
                .as_deref()
                .map(|s| stop_reason_to_finish(s).to_owned()),
            logprobs: None,
            extra: Default::default(),
        }],
        usage: Some(usage_to_chat(&resp.usage)),
        system_fingerprint: None,
        timings: None,
        extra: Default::default(),
        verbatim: None,
    }
}

/// Turns the Messages event stream back into chat chunks.
#[derive(Debug, Default)]
pub struct EventsToChunks {
    id: String,
    model: String,
    usage: MessagesUsage,
    /// Block index -> tool call index, for tool-use blocks.
    tool_blocks: Vec<(u64, u32)>,
}

impl EventsToChunks {
    fn chunk(&self, delta: Delta, finish: Option<&str>) -> ChatChunk {
        ChatChunk::single(&self.id, &self.model, delta, finish)
    }

    /// The chunks one event stands for (often none).
    pub fn on_event(
        &mut self,
        name: Option<&str>,
        data: &Value,
    ) -> Result<Vec<ChatChunk>, AdapterError> {
        let kind = name
            .or_else(|| data.get("type").and_then(Value::as_str))
            .unwrap_or("");
        let mut out = Vec::new();
        match kind {
            "message_start" => {
                let message = &data["message"];
                self.id = message["id"].as_str().unwrap_or_default().to_owned();
                self.model = message["model"].as_str().unwrap_or_default().to_owned();
                if let Ok(usage) = serde_json::from_value::<MessagesUsage>(message["usage"].clone())
                {
                    self.usage = usage;
                }
                out.push(self.chunk(
                    Delta {
                        role: Some(Role::Assistant),
                        content: Some(String::new()),
                        ..Delta::default()
                    },
                    None,
                ));
            }
            // Redacted thinking arrives whole in its start event; its data
            // must go back upstream unchanged on the next turn.
            "content_block_start" if data["content_block"]["type"] == "redacted_thinking" => {
                let mut d = Delta::default();
                d.extra.insert(
                    "redacted_thinking".into(),
                    json!([data["content_block"]["data"].clone()]),
                );
                out.push(self.chunk(d, None));
            }
            "content_block_start" if data["content_block"]["type"] == "tool_use" => {
                let block_index = data["index"].as_u64().unwrap_or(0);
                let call_index = u32::try_from(self.tool_blocks.len()).unwrap_or(u32::MAX);
                self.tool_blocks.push((block_index, call_index));
                let block = &data["content_block"];
                let call = ToolCallDelta::opening(
                    call_index,
                    block["id"].as_str().unwrap_or_default(),
                    block["name"].as_str().unwrap_or_default(),
                );
                out.push(self.chunk(Delta::tool_call(call), None));
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => out.push(self.chunk(
                        Delta {
                            content: delta["text"].as_str().map(str::to_owned),
                            ..Delta::default()
                        },
                        None,
                    )),
                    Some("input_json_delta") => {
                        let block_index = data["index"].as_u64().unwrap_or(0);
                        if let Some((_, call_index)) =
                            self.tool_blocks.iter().find(|(b, _)| *b == block_index)
                        {
                            let fragment = delta["partial_json"].as_str().unwrap_or_default();
                            let call = ToolCallDelta::arguments(*call_index, fragment);
                            out.push(self.chunk(Delta::tool_call(call), None));
                        }
                    }
                    Some("thinking_delta") => {
                        let mut d = Delta::default();
                        d.extra
                            .insert("reasoning_content".into(), delta["thinking"].clone());
                        out.push(self.chunk(d, None));
                    }
                    // The thinking block's signature, which a client sends
                    // back with the block on its next turn.
                    Some("signature_delta") => {
                        let mut d = Delta::default();
                        d.extra
                            .insert("reasoning_signature".into(), delta["signature"].clone());
                        out.push(self.chunk(d, None));
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                let usage = &data["usage"];
                for (field, slot) in [
                    ("input_tokens", &mut self.usage.input_tokens),
                    ("output_tokens", &mut self.usage.output_tokens),
                    (
                        "cache_read_input_tokens",
                        &mut self.usage.cache_read_input_tokens,
                    ),
                    (
                        "cache_creation_input_tokens",
                        &mut self.usage.cache_creation_input_tokens,
                    ),
                ] {
                    if let Some(v) = usage.get(field).and_then(Value::as_u64) {
                        *slot = v;
                    }
                }
                let finish = data["delta"]["stop_reason"]
                    .as_str()
                    .map(stop_reason_to_finish)
                    .unwrap_or("stop");
                out.push(self.chunk(Delta::default(), Some(finish)));
                out.push(ChatChunk {
                    choices: Vec::new(),
                    usage: Some(Box::new(usage_to_chat(&self.usage))),
                    ..self.chunk(Delta::default(), None)
                });
            }
            "error" => {
                let message = data["error"]["message"]
                    .as_str()
                    .unwrap_or("the backend reported an error")
                    .to_owned();
                let status = match data["error"]["type"].as_str() {
                    Some("overloaded_error") => 529,
                    Some("rate_limit_error") => 429,
                    Some("invalid_request_error") => 400,
                    _ => 500,
                };
                return Err(AdapterError::Status {
                    status,
                    message,
                    body: None,
                    retry_after: None,
                });
            }
            _ => {}
        }
        Ok(out)
    }
}
