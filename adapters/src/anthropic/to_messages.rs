//! Canonical chat request -> Anthropic Messages request (egress to an
//! Anthropic backend).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::from_chat::redacted_thinking;
use super::types::{
    Message as AnthropicMessage, MessagesRequest, Role as AnthropicRole, Tool as AnthropicTool,
};
use crate::translate::{TranslateError, refuse_unhonoured, untranslatable};
use crate::types::{ChatRequest, Content, ContentPart, Message, Role};

/// Anthropic requires an output limit; this one applies when the caller set none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Chat fields with a Messages equivalent, or harmless to leave behind
/// (stream options are the gateway's own).
const TRANSLATED_EXTRAS: [&str; 5] = ["stop", "top_p", "top_k", "reasoning_effort", "thinking"];

/// Hints for an OpenAI server's own prompt cache (Codex sends one); an
/// Anthropic backend caches by `cache_control` markers instead, so the hint
/// is left behind.
const ADVISORY_EXTRAS: [&str; 1] = ["prompt_cache_key"];

pub fn messages_from_chat(req: ChatRequest) -> Result<MessagesRequest, TranslateError> {
    refuse_unhonoured(
        &req,
        "an Anthropic backend",
        (true, true),
        (&TRANSLATED_EXTRAS, &ADVISORY_EXTRAS),
    )?;
    let mut system_parts: Vec<Value> = Vec::new();
    let mut messages: Vec<AnthropicMessage> = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        match message.role {
            Role::System | Role::Developer => {
                system_parts.extend(blocks(message.content.as_ref(), &at)?)
            }
            Role::User => push(
                &mut messages,
                AnthropicRole::User,
                blocks(message.content.as_ref(), &at)?,
            ),
            Role::Tool | Role::Function => {
                let text = message.text();
                let mut result = json!({"type": "tool_result", "tool_use_id": message.tool_call_id.clone().unwrap_or_default(), "content": text});
                if let Some(is_error) = message.extra.get("is_error") {
                    result["is_error"] = is_error.clone();
                }
                push(&mut messages, AnthropicRole::User, vec![result]);
            }
            Role::Assistant => push(
                &mut messages,
                AnthropicRole::Assistant,
                assistant_blocks(message, &at)?,
            ),
        }
    }
    let system = match system_parts.as_slice() {
        [] => None,
        [only] if only.as_object().is_some_and(|o| o.len() == 2) => only.get("text").cloned(),
        _ => Some(Value::Array(system_parts)),
    };
    let metadata = req.user.as_ref().map(|u| {
        let mut m = Map::new();
        m.insert("user_id".into(), json!(u));
        m.into()
    });
    Ok(MessagesRequest {
        model: req.model,
        max_tokens: req
            .max_completion_tokens
            .or(req.max_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        messages,
        system,
        stop_sequences: req.extra.get("stop").map(|s| match s {
            Value::String(one) => vec![one.clone()],
            other => other
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        }),
        stream: req.stream,
        temperature: req.temperature,
        top_p: req.extra.get("top_p").and_then(Value::as_f64),
        top_k: req
            .extra
            .get("top_k")
            .and_then(Value::as_u64)
            .and_then(|k| u32::try_from(k).ok()),
        tools: req.tools.map(|tools| {
            Arc::unwrap_or_clone(tools)
                .into_iter()
                .map(|t| AnthropicTool {
                    name: t.function.name,
                    description: t.function.description,
                    input_schema: t
                        .function
                        .parameters
                        .unwrap_or_else(|| json!({"type": "object"})),
                    extra: t.extra,
                })
                .collect()
        }),
        tool_choice: tool_choice(req.tool_choice.as_ref(), req.parallel_tool_calls),
        metadata,
        // An Anthropic client's thinking settings, carried through chat.
        thinking: req.extra.get("thinking").cloned(),
        output_config: req
            .extra
            .get("reasoning_effort")
            .map(|effort| json!({ "effort": effort })),
        extra: Default::default(),
    })
}

/// Appends a turn. Consecutive turns of one role stay separate, as the
/// caller wrote them: the Messages API joins them itself, so nothing is
/// merged here that would not come back apart.
fn push(messages: &mut Vec<AnthropicMessage>, role: AnthropicRole, blocks: Vec<Value>) {
    messages.push(AnthropicMessage {
        role,
        content: Value::Array(blocks),
    });
}

fn tool_choice(choice: Option<&Value>, parallel: Option<bool>) -> Option<Value> {
    let mut out = match choice? {
        Value::String(s) if s == "required" => json!({"type": "any"}),
        Value::String(s) if s == "none" => json!({"type": "none"}),
        Value::Object(o) => {
            json!({"type": "tool", "name": o.get("function").and_then(|f| f.get("name")).cloned().unwrap_or(Value::Null)})
        }
        _ => json!({"type": "auto"}),
    };
    if parallel == Some(false) {
        out["disable_parallel_tool_use"] = json!(true);
    }
    Some(out)
}

/// Chat content as Anthropic blocks (text, images).
fn blocks(content: Option<&Content>, at: &str) -> Result<Vec<Value>, TranslateError> {
    match content {
        None => Ok(Vec::new()),
        Some(Content::Text(text)) => Ok(vec![json!({"type": "text", "text": text})]),
        Some(Content::Parts(parts)) => parts
            .iter()
            .enumerate()
            .map(|(i, p)| block(p, &format!("{at}.content[{i}]")))
            .collect(),
    }
}

fn block(part: &ContentPart, at: &str) -> Result<Value, TranslateError> {
    let mut out = Value::from(part.extra.clone());
    match part.kind.as_str() {
        "text" => {
            out["type"] = json!("text");
            out["text"] = json!(part.text.clone().unwrap_or_default());
        }
        "image_url" => {
            let source = match part.inline_image() {
                Some((media_type, data)) => {
                    json!({"type": "base64", "media_type": media_type, "data": data})
                }
                None => json!({"type": "url", "url": part.url()}),
            };
            if let Some(o) = out.as_object_mut() {
                o.remove("image_url");
            }
            out["type"] = json!("image");
            out["source"] = source;
        }
        other => {
            return Err(untranslatable(
                format!("{at}.type"),
                format!("content part `{other}` cannot be sent to an Anthropic backend"),
            ));
        }
    }
    Ok(out)
}

fn assistant_blocks(message: &Message, at: &str) -> Result<Vec<Value>, TranslateError> {
    let mut out = Vec::new();
    if let Some(thinking) = message
        .extra
        .get("reasoning_content")
        .and_then(Value::as_str)
    {
        let signature = message
            .extra
            .get("reasoning_signature")
            .cloned()
            .unwrap_or(json!(""));
        out.push(json!({"type": "thinking", "thinking": thinking, "signature": signature}));
    }
    for data in redacted_thinking(&message.extra) {
        out.push(json!({"type": "redacted_thinking", "data": data}));
    }
    out.extend(
        blocks(message.content.as_ref(), at)?
            .into_iter()
            .filter(|b| b.get("text").and_then(Value::as_str) != Some("")),
    );
    for call in message.tool_calls.iter().flatten() {
        let input: Value =
            serde_json::from_str(&call.function.arguments).unwrap_or_else(|_| json!({}));
        out.push(
            json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}),
        );
    }
    Ok(out)
}
