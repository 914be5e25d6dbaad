//! Canonical chat response -> Anthropic Messages response.

use serde_json::{Value, json};

use super::types::{Block, MessagesResponse, Usage};
use crate::types::{ChatResponse, Usage as ChatUsage};

/// OpenAI finish reasons in Anthropic's words.
pub fn finish_to_stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ => "end_turn",
    }
}

/// Usage in Anthropic's terms: input excludes cache reads and writes.
pub fn usage_from_chat(usage: &ChatUsage) -> Usage {
    let counts = usage.token_counts();
    Usage {
        input_tokens: counts.input,
        output_tokens: counts.output,
        cache_read_input_tokens: counts.cached_input,
        cache_creation_input_tokens: counts.cache_write,
    }
}

/// The data of each redacted thinking block kept in a message's extras.
pub(crate) fn redacted_thinking(
    extra: &serde_json::Map<String, Value>,
) -> impl Iterator<Item = &str> {
    extra
        .get("redacted_thinking")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// A tool call's arguments as the `input` object Anthropic clients expect.
/// Arguments that are not a JSON object are kept as text under `_raw`,
/// so nothing the model wrote is lost.
pub(super) fn tool_input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(value @ Value::Object(_)) => value,
        _ if arguments.trim().is_empty() => json!({}),
        _ => json!({ "_raw": arguments }),
    }
}

pub fn message_from_chat(resp: &ChatResponse) -> MessagesResponse {
    let mut content = Vec::new();
    let mut stop_reason = None;
    if let Some(choice) = resp.choices.first() {
        if let Some(thinking) = choice
            .message
            .extra
            .get("reasoning_content")
            .and_then(Value::as_str)
        {
            let signature = choice
                .message
                .extra
                .get("reasoning_signature")
                .and_then(Value::as_str)
                .unwrap_or("");
            content.push(Block::Thinking {
                thinking: thinking.to_owned(),
                signature: signature.to_owned(),
            });
        }
        content.extend(redacted_thinking(&choice.message.extra).map(|data| {
            Block::RedactedThinking {
                data: data.to_owned(),
            }
        }));
        let text = choice.message.text();
        if !text.is_empty() {
            content.push(Block::Text { text });
        }
        for call in choice.message.tool_calls.iter().flatten() {
            content.push(Block::ToolUse {
                id: call.id.clone(),
                name: call.function.name.clone(),
                input: tool_input(&call.function.arguments),
            });
        }
        stop_reason = choice
            .finish_reason
            .as_deref()
            .map(|f| finish_to_stop_reason(f).to_owned());
    }
    MessagesResponse {
        id: format!("msg_{}", resp.id),
        kind: "message".into(),
        role: "assistant".into(),
        model: resp.model.clone(),
        content,
        stop_reason,
        stop_sequence: None,
        usage: resp.usage.as_ref().map(usage_from_chat).unwrap_or_default(),
    }
}
