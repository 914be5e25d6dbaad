//! Bedrock Converse answers and ConverseStream events -> canonical chat
//! responses and chunks. Usage goes through the Anthropic adapter's
//! mapping: Converse's `inputTokens`, like Anthropic's, leaves out the
//! tokens read from and written to the prompt cache.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::eventstream::Message as Frame;
use crate::anthropic::{MessagesUsage, usage_to_chat};
use crate::error::AdapterError;
use crate::types::{
    ChatChunk, ChatResponse, Choice, Content, Delta, FunctionCall, Message, Role, ToolCall,
    ToolCallDelta, Usage, unix_now,
};

/// Converse stop reasons in OpenAI's words.
pub fn finish_reason(stop: &str) -> &'static str {
    match stop {
        "tool_use" => "tool_calls",
        "max_tokens" | "model_context_window_exceeded" => "length",
        "guardrail_intervened" | "content_filtered" => "content_filter",
        _ => "stop",
    }
}

/// Converse's usage in OpenAI's terms.
pub fn usage(usage: &Value) -> Usage {
    let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
    usage_to_chat(&MessagesUsage {
        input_tokens: count("inputTokens"),
        output_tokens: count("outputTokens"),
        cache_read_input_tokens: count("cacheReadInputTokens"),
        cache_creation_input_tokens: count("cacheWriteInputTokens"),
    })
}

/// A whole Converse answer.
pub fn chat_from_converse(answer: &Value, model: &str) -> ChatResponse {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut extra = Map::new();
    for block in answer
        .pointer("/output/message/content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(t) = block.get("text").and_then(Value::as_str) {
            text.push_str(t);
        } else if let Some(call) = block.get("toolUse") {
            calls.push(ToolCall {
                id: call["toolUseId"].as_str().unwrap_or_default().to_owned(),
                kind: "function".into(),
                function: FunctionCall {
                    name: call["name"].as_str().unwrap_or_default().to_owned(),
                    arguments: call.get("input").unwrap_or(&json!({})).to_string(),
                    extra: Default::default(),
                },
                extra: Default::default(),
            });
        } else if let Some(reasoning) = block.get("reasoningContent") {
            if let Some(r) = reasoning.get("reasoningText") {
                extra.insert("reasoning_content".into(), r["text"].clone());
                if let Some(signature) = r.get("signature") {
                    extra.insert("reasoning_signature".into(), signature.clone());
                }
            } else if let Some(data) = reasoning.get("redactedContent") {
                let all = extra
                    .entry("redacted_thinking")
                    .or_insert_with(|| json!([]));
                if let Value::Array(all) = all {
                    all.push(data.clone());
                }
            }
        }
    }
    let called = !calls.is_empty();
    ChatResponse {
        id: format!("chatcmpl-bedrock-{}", unix_now()),
        object: "chat.completion".into(),
        created: unix_now(),
        model: model.to_owned(),
        choices: vec![Choice {
            index: 0,
            message: Message {
                role: Role::Assistant,
                content: (!text.is_empty() || !called).then_some(Content::Text(text)),
                name: None,
                tool_calls: called.then_some(calls),
                tool_call_id: None,
                extra: extra.into(),
            },
            finish_reason: Some(
                finish_reason(answer["stopReason"].as_str().unwrap_or("end_turn")).to_owned(),
            ),
            logprobs: None,
            extra: Default::default(),
        }],
        usage: answer.get("usage").map(usage),
        system_fingerprint: None,
        timings: None,
        extra: Default::default(),
        verbatim: None,
    }
}

/// A Bedrock error, from its type and message, in the shape the rest of
/// the gateway reads (throttling is a 429 that says when to come back).
pub fn error_of(kind: &str, message: &str) -> AdapterError {
    let status = match kind {
        "throttlingException" | "ThrottlingException" | "ModelNotReadyException" => 429,
        "validationException" | "ValidationException" | "ServiceQuotaExceededException" => 400,
        "accessDeniedException" | "AccessDeniedException" => 403,
        "ResourceNotFoundException" => 404,
        "serviceUnavailableException" | "ServiceUnavailableException" => {
            return AdapterError::Overloaded { retry_after: None };
        }
        "modelTimeoutException" | "ModelTimeoutException" => 504,
        "internalServerException" | "InternalServerException" => 500,
        // The model failed (modelStreamErrorException, ModelErrorException):
        // the backend's fault, not the caller's.
        _ => 502,
    };
    let name = kind.trim_end_matches("Exception");
    let mut type_name = name.to_owned();
    if let Some(first) = type_name.get_mut(..1) {
        first.make_ascii_uppercase();
    }
    AdapterError::Status {
        status,
        message: message.to_owned(),
        body: Some(json!({"message": message, "type": format!("{type_name}Exception")})),
        retry_after: (status == 429).then_some(Duration::from_secs(1)),
    }
}

/// Turns ConverseStream's events into chat chunks; `metadata` (the usage)
/// is the last.
#[derive(Debug)]
pub struct EventsToChunks {
    id: String,
    model: String,
    /// Content block index -> tool call index.
    tool_blocks: Vec<(u64, u32)>,
}

impl EventsToChunks {
    pub fn new(model: &str) -> Self {
        EventsToChunks {
            id: format!("chatcmpl-bedrock-{}", unix_now()),
            model: model.to_owned(),
            tool_blocks: Vec::new(),
        }
    }

    fn chunk(&self, delta: Delta, finish: Option<&str>) -> ChatChunk {
        ChatChunk::single(&self.id, &self.model, delta, finish)
    }

    /// The chunks one event-stream message stands for, and whether it
    /// ends the stream.
    pub fn on_frame(&mut self, frame: &Frame) -> Result<(Vec<ChatChunk>, bool), AdapterError> {
        match frame.header(":message-type") {
            Some("event") => {}
            Some("exception") => {
                let kind = frame
                    .header(":exception-type")
                    .unwrap_or("internalServerException");
                let data: Value = serde_json::from_slice(&frame.payload).unwrap_or_default();
                let message = data["message"]
                    .as_str()
                    .or_else(|| data["Message"].as_str());
                return Err(error_of(
                    kind,
                    message.unwrap_or("the backend reported an error"),
                ));
            }
            // An `error` message says it all in its headers.
            _ => {
                let kind = frame
                    .header(":error-code")
                    .unwrap_or("InternalServerException");
                let message = frame
                    .header(":error-message")
                    .unwrap_or("the backend reported an error");
                return Err(error_of(kind, message));
            }
        }
        let data: Value =
            serde_json::from_slice(&frame.payload).map_err(|err| AdapterError::Protocol {
                message: format!("{err} in a ConverseStream event"),
            })?;
        let mut out = Vec::new();
        let block = data["contentBlockIndex"].as_u64().unwrap_or(0);
        match frame.header(":event-type").unwrap_or_default() {
            "messageStart" => out.push(self.chunk(
                Delta {
                    role: Some(Role::Assistant),
                    content: Some(String::new()),
                    ..Delta::default()
                },
                None,
            )),
            "contentBlockStart" => {
                if let Some(call) = data.pointer("/start/toolUse") {
                    let index = u32::try_from(self.tool_blocks.len()).unwrap_or(u32::MAX);
                    self.tool_blocks.push((block, index));
                    let opening = ToolCallDelta::opening(
                        index,
                        call["toolUseId"].as_str().unwrap_or_default(),
                        call["name"].as_str().unwrap_or_default(),
                    );
                    out.push(self.chunk(Delta::tool_call(opening), None));
                }
            }
            "contentBlockDelta" => {
                let delta = &data["delta"];
                if let Some(text) = delta.get("text").and_then(Value::as_str) {
                    out.push(self.chunk(
                        Delta {
                            content: Some(text.to_owned()),
                            ..Delta::default()
                        },
                        None,
                    ));
                } else if let Some(input) = delta.pointer("/toolUse/input").and_then(Value::as_str)
                {
                    if let Some((_, index)) = self.tool_blocks.iter().find(|(b, _)| *b == block) {
                        let fragment = ToolCallDelta::arguments(*index, input);
                        out.push(self.chunk(Delta::tool_call(fragment), None));
                    }
                } else if let Some(reasoning) = delta.get("reasoningContent") {
                    let mut d = Delta::default();
                    for (theirs, ours) in [
                        ("text", "reasoning_content"),
                        ("signature", "reasoning_signature"),
                    ] {
                        if let Some(value) = reasoning.get(theirs) {
                            d.extra.insert(ours.into(), value.clone());
                        }
                    }
                    if let Some(data) = reasoning.get("redactedContent") {
                        d.extra.insert("redacted_thinking".into(), json!([data]));
                    }
                    out.push(self.chunk(d, None));
                }
            }
            "messageStop" => {
                let finish = finish_reason(data["stopReason"].as_str().unwrap_or("end_turn"));
                out.push(self.chunk(Delta::default(), Some(finish)));
            }
            "metadata" => {
                out.push(ChatChunk {
                    choices: Vec::new(),
                    usage: Some(Box::new(usage(&data["usage"]))),
                    ..self.chunk(Delta::default(), None)
                });
                return Ok((out, true));
            }
            _ => {}
        }
        Ok((out, false))
    }
}
