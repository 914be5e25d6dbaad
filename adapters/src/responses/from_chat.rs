//! Canonical chat response -> Responses API response.

use serde_json::{Value, json};

use super::Echo;
use crate::types::{ChatResponse, Usage};

/// Responses' usage object. `cache_write_tokens` is not in OpenAI's own
/// usage; it is here for answers from backends that bill writing a prompt
/// cache (Anthropic's), as other OpenAI-compatible gateways report it.
pub(super) fn usage(usage: Option<&Usage>) -> Value {
    let usage = usage.cloned().unwrap_or_default();
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cached_tokens(),
            "cache_write_tokens": usage.cache_write_tokens(),
        },
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens()},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// The response envelope around `output`, with what it echoes of its
/// request. `usage` is left out while there is none (a stream's opening
/// events): the spec has no `null` for it.
pub(super) fn envelope(
    id: &str,
    model: &str,
    created_at: u64,
    status: &str,
    output: Vec<Value>,
    usage: Option<Value>,
    echo: &Echo,
) -> Value {
    let mut response = json!({
        "id": id, "object": "response", "created_at": created_at, "status": status, "model": model,
        "output": output, "error": null, "incomplete_details": null,
    });
    if let Some(usage) = usage {
        response["usage"] = usage;
    }
    echo.apply(&mut response);
    response
}

/// An `output_text` content part (no logprobs: chat backends give none
/// through this translation).
pub(super) fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// The assistant's message item; `incomplete` when the answer was cut off
/// by its output limit.
pub(super) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [output_text(text)],
    })
}

/// A function call item; `flat` is the name the chat backend called,
/// given back under its namespace when it is a namespace's tool.
pub(super) fn call_item(
    echo: &Echo,
    (id, call_id): (&str, &str),
    flat: &str,
    arguments: &str,
    status: &str,
) -> Value {
    let (namespace, name) = echo.called(flat);
    let mut item = json!({"type": "function_call", "id": id, "call_id": call_id, "name": name, "arguments": arguments, "status": status});
    if let Some(namespace) = namespace {
        item["namespace"] = json!(namespace);
    }
    item
}

/// A whole chat answer as the Responses object for the request `echo`
/// describes.
pub fn response_from_chat(resp: &ChatResponse, echo: &Echo) -> Value {
    let mut output = Vec::new();
    let choice = resp.choices.first();
    let incomplete = choice.is_some_and(|c| c.finish_reason.as_deref() == Some("length"));
    let status = if incomplete {
        "incomplete"
    } else {
        "completed"
    };
    if let Some(choice) = choice {
        let text = choice.message.text();
        if !text.is_empty() || choice.message.tool_calls.is_none() {
            output.push(message_item(&format!("msg_{}", resp.id), &text, status));
        }
        for call in choice.message.tool_calls.iter().flatten() {
            output.push(call_item(
                echo,
                (&format!("fc_{}", call.id), &call.id),
                &call.function.name,
                &call.function.arguments,
                "completed",
            ));
        }
    }
    let mut response = envelope(
        &format!("resp_{}", resp.id),
        &resp.model,
        resp.created,
        status,
        output,
        Some(usage(resp.usage.as_ref())),
        echo,
    );
    if incomplete {
        response["incomplete_details"] = json!({"reason": "max_output_tokens"});
    }
    response
}
