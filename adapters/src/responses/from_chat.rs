//! Canonical chat response -> Responses API response.

use serde_json::{Value, json};

use crate::types::{ChatResponse, Usage};

/// Responses' usage object.
pub(super) fn usage(usage: Option<&Usage>) -> Value {
    let usage = usage.cloned().unwrap_or_default();
    let reasoning = usage
        .completion_tokens_details
        .as_ref()
        .and_then(|d| d.reasoning_tokens)
        .unwrap_or(0);
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens()},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

/// The response envelope around `output`.
pub(super) fn envelope(
    id: &str,
    model: &str,
    created_at: u64,
    status: &str,
    output: Vec<Value>,
    usage: Value,
) -> Value {
    json!({
        "id": id, "object": "response", "created_at": created_at, "status": status, "model": model,
        "output": output, "usage": usage, "error": null, "incomplete_details": null,
        "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "text": {"format": {"type": "text"}},
    })
}

pub(super) fn message_item(id: &str, text: &str, status: &str) -> Value {
    json!({
        "type": "message", "id": id, "status": status, "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

pub(super) fn call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({"type": "function_call", "id": id, "call_id": call_id, "name": name, "arguments": arguments, "status": status})
}

pub fn response_from_chat(resp: &ChatResponse) -> Value {
    let mut output = Vec::new();
    let mut incomplete = false;
    if let Some(choice) = resp.choices.first() {
        let text = choice.message.text();
        if !text.is_empty() || choice.message.tool_calls.is_none() {
            output.push(message_item(
                &format!("msg_{}", resp.id),
                &text,
                "completed",
            ));
        }
        for call in choice.message.tool_calls.iter().flatten() {
            output.push(call_item(
                &format!("fc_{}", call.id),
                &call.id,
                &call.function.name,
                &call.function.arguments,
                "completed",
            ));
        }
        incomplete = choice.finish_reason.as_deref() == Some("length");
    }
    let mut response = envelope(
        &format!("resp_{}", resp.id),
        &resp.model,
        resp.created,
        if incomplete {
            "incomplete"
        } else {
            "completed"
        },
        output,
        usage(resp.usage.as_ref()),
    );
    if incomplete {
        response["incomplete_details"] = json!({"reason": "max_output_tokens"});
    }
    response
}
