//! Anthropic Messages request -> canonical chat request.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::types::{MessagesRequest, Role as AnthropicRole, Tool as AnthropicTool};
pub use crate::translate::TranslateError;
pub(crate) use crate::translate::untranslatable;
use crate::types::{
    ChatRequest, Content, ContentPart, Extra, FunctionCall, FunctionDef, Message, Role, Tool,
    ToolCall,
};

/// Fields that ask the server for optional help (editing old context,
/// a service tier) and that a chat backend can leave undone without changing
/// what the answer means. They are left behind, and logged; every other
/// unknown field is refused. Claude Code sends `context_management`.
pub const ADVISORY_FIELDS: [&str; 2] = ["context_management", "service_tier"];

/// Translates a Messages request; `stream` carries over as is.
pub fn chat_from_messages(req: MessagesRequest) -> Result<ChatRequest, TranslateError> {
    for field in req
        .extra
        .keys()
        .filter(|k| ADVISORY_FIELDS.contains(&k.as_str()))
    {
        tracing::debug!(field = %field, "advisory Messages field left behind for a chat backend");
    }
    if let Some(field) = req
        .extra
        .keys()
        .find(|k| !ADVISORY_FIELDS.contains(&k.as_str()))
    {
        return Err(untranslatable(
            field.clone(),
            "this field has no equivalent for the backend serving this model",
        ));
    }
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system {
        messages.push(Message::new(Role::System, content_from(&system, "system")?));
    }
    for (i, message) in req.messages.into_iter().enumerate() {
        let at = format!("messages[{i}]");
        match message.role {
            AnthropicRole::User => user_turn(&message.content, &at, &mut messages)?,
            AnthropicRole::Assistant => messages.push(assistant_turn(&message.content, &at)?),
        }
    }
    let mut extra = Map::new();
    if let Some(top_k) = req.top_k {
        extra.insert("top_k".into(), json!(top_k));
    }
    if let Some(effort) = req.output_config.as_ref().and_then(|c| c.get("effort")) {
        // OpenAI's name for the same request.
        extra.insert("reasoning_effort".into(), effort.clone());
    }
    if let Some(thinking) = req.thinking {
        // Servers that support reasoning budgets read it; it is not dropped.
        extra.insert("thinking".into(), thinking);
    }
    let (tool_choice, parallel_tool_calls) = tool_choice(req.tool_choice.as_ref())?;
    let user = req
        .metadata
        .as_ref()
        .and_then(|m| m.get("user_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(ChatRequest {
        model: req.model,
        messages,
        stream: req.stream,
        stream_options: None,
        max_tokens: Some(req.max_tokens),
        max_completion_tokens: None,
        temperature: req.temperature,
        n: None,
        seed: None,
        tools: req
            .tools
            .map(|tools| {
                tools
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| tool(t, i))
                    .collect::<Result<Vec<_>, _>>()
                    .map(Arc::new)
            })
            .transpose()?,
        tool_choice,
        parallel_tool_calls,
        response_format: None,
        logprobs: None,
        top_logprobs: None,
        user,
        metadata: req.metadata,
        extra: {
            if let Some(stop) = req.stop_sequences {
                extra.insert("stop".into(), json!(stop));
            }
            if let Some(top_p) = req.top_p {
                extra.insert("top_p".into(), json!(top_p));
            }
            extra.into()
        },
        forward_headers: Vec::new(),
        echo: None,
    })
}

fn tool(tool: AnthropicTool, i: usize) -> Result<Tool, TranslateError> {
    if let Some(kind) = tool
        .extra
        .get("type")
        .and_then(Value::as_str)
        .filter(|k| *k != "custom")
    {
        return Err(untranslatable(
            format!("tools[{i}].type"),
            format!("server tool `{kind}` runs only on Anthropic's servers"),
        ));
    }
    let mut extra = tool.extra;
    extra.remove("type");
    Ok(Tool {
        kind: "function".into(),
        function: FunctionDef {
            name: tool.name,
            description: tool.description,
            parameters: Some(tool.input_schema),
            extra: Default::default(),
        },
        // `cache_control` stays with the tool for backends that use it.
        extra,
    })
}

fn tool_choice(choice: Option<&Value>) -> Result<(Option<Value>, Option<bool>), TranslateError> {
    let Some(choice) = choice else {
        return Ok((None, None));
    };
    let parallel = choice
        .get("disable_parallel_tool_use")
        .and_then(Value::as_bool)
        .map(|d| !d);
    let chat = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = choice
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| untranslatable("tool_choice.name", "name the tool"))?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => {
            return Err(untranslatable(
                "tool_choice.type",
                "one of auto, any, tool, none",
            ));
        }
    };
    Ok((Some(chat), parallel))
}

/// Text (or text blocks) of a system prompt or tool result.
fn content_from(value: &Value, at: &str) -> Result<Content, TranslateError> {
    match value {
        Value::String(text) => Ok(Content::Text(text.clone())),
        Value::Array(blocks) => Ok(Content::Parts(
            blocks
                .iter()
                .enumerate()
                .map(|(i, b)| part(b, &format!("{at}[{i}]")))
                .collect::<Result<_, _>>()?,
        )),
        _ => Err(untranslatable(at, "a string or a list of content blocks")),
    }
}

/// A user-side block (text, image) as a chat content part.
fn part(block: &Value, at: &str) -> Result<ContentPart, TranslateError> {
    let mut extra: Extra = block.as_object().cloned().unwrap_or_default().into();
    let kind = extra
        .remove("type")
        .and_then(|t| t.as_str().map(str::to_owned))
        .unwrap_or_default();
    match kind.as_str() {
        "text" => {
            let text = extra
                .remove("text")
                .and_then(|t| t.as_str().map(str::to_owned));
            Ok(ContentPart {
                kind: "text".into(),
                text,
                extra,
            })
        }
        "image" => {
            let source = extra.remove("source").unwrap_or(Value::Null);
            let url = match source.get("type").and_then(Value::as_str) {
                Some("base64") => format!(
                    "data:{};base64,{}",
                    source
                        .get("media_type")
                        .and_then(Value::as_str)
                        .unwrap_or("image/png"),
                    source.get("data").and_then(Value::as_str).unwrap_or("")
                ),
                Some("url") => source
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                _ => {
                    return Err(untranslatable(
                        format!("{at}.source"),
                        "an image source is base64 or url",
                    ));
                }
            };
            // Other fields of the block (`cache_control`) stay with the part.
            let mut part = ContentPart::image_url(&url);
            part.extra.extend(extra);
            Ok(part)
        }
        other => Err(untranslatable(
            format!("{at}.type"),
            format!("content block `{other}` cannot be translated for this backend"),
        )),
    }
}

/// A user turn: tool results become `tool` messages (first, as the chat
/// format wants them right after the assistant's calls), the rest one user
/// message.
fn user_turn(content: &Value, at: &str, out: &mut Vec<Message>) -> Result<(), TranslateError> {
    let blocks = match content {
        Value::String(text) => {
            out.push(Message::new(Role::User, Content::Text(text.clone())));
            return Ok(());
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(untranslatable(
                format!("{at}.content"),
                "a string or a list of content blocks",
            ));
        }
    };
    let mut parts = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let here = format!("{at}.content[{i}]");
        if block.get("type").and_then(Value::as_str) == Some("tool_result") {
            let id = block
                .get("tool_use_id")
                .and_then(Value::as_str)
                .ok_or_else(|| untranslatable(format!("{here}.tool_use_id"), "required"))?;
            let text = match block.get("content") {
                None | Some(Value::Null) => String::new(),
                Some(value) => match content_from(value, &format!("{here}.content"))? {
                    Content::Text(text) => text,
                    Content::Parts(parts) => parts
                        .iter()
                        .filter_map(|p| p.text.as_deref())
                        .collect::<Vec<_>>()
                        .join("\n"),
                },
            };
            let mut message = Message::new(Role::Tool, Content::Text(text));
            message.tool_call_id = Some(id.to_owned());
            if let Some(is_error) = block.get("is_error") {
                message.extra.insert("is_error".into(), is_error.clone());
            }
            out.push(message);
        } else {
            parts.push(part(block, &here)?);
        }
    }
    if !parts.is_empty() {
        out.push(Message::new(Role::User, Content::Parts(parts)));
    }
    Ok(())
}

/// An assistant turn: text, tool calls, and thinking (kept as
/// `reasoning_content`, the field reasoning servers use).
fn assistant_turn(content: &Value, at: &str) -> Result<Message, TranslateError> {
    let blocks = match content {
        Value::String(text) => {
            return Ok(Message::new(Role::Assistant, Content::Text(text.clone())));
        }
        Value::Array(blocks) => blocks,
        _ => {
            return Err(untranslatable(
                format!("{at}.content"),
                "a string or a list of content blocks",
            ));
        }
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut message = Message::new(Role::Assistant, Content::Text(String::new()));
    for (i, block) in blocks.iter().enumerate() {
        let here = format!("{at}.content[{i}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => calls.push(ToolCall {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                kind: "function".into(),
                function: FunctionCall {
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: block.get("input").cloned().unwrap_or(json!({})).to_string(),
                    extra: Default::default(),
                },
                extra: Default::default(),
            }),
            Some("thinking") => {
                let thinking = block.get("thinking").and_then(Value::as_str).unwrap_or("");
                let entry = message
                    .extra
                    .entry("reasoning_content")
                    .or_insert_with(|| json!(""));
                if let Value::String(all) = entry {
                    all.push_str(thinking);
                }
                if let Some(signature) = block.get("signature") {
                    message
                        .extra
                        .insert("reasoning_signature".into(), signature.clone());
                }
            }
            Some("redacted_thinking") => {
                let entry = message
                    .extra
                    .entry("redacted_thinking")
                    .or_insert_with(|| json!([]));
                if let Value::Array(all) = entry {
                    all.push(block.get("data").cloned().unwrap_or(Value::Null));
                }
            }
            other => {
                return Err(untranslatable(
                    format!("{here}.type"),
                    format!(
                        "content block `{}` cannot be translated for this backend",
                        other.unwrap_or("?")
                    ),
                ));
            }
        }
    }
    message.content = (!text.is_empty() || calls.is_empty()).then_some(Content::Text(text));
    message.tool_calls = (!calls.is_empty()).then_some(calls);
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> MessagesRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn system_tools_and_a_tool_round_trip_translate() {
        let chat = chat_from_messages(request(json!({
            "model": "m", "max_tokens": 100,
            "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
            "metadata": {"user_id": "u1"},
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": [{"type": "text", "text": "checking"}, {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "12 C"}, {"type": "text", "text": "thanks"}]}
            ]
        })))
        .unwrap();
        assert_eq!(chat.messages[0].role, Role::System);
        let Some(Content::Parts(parts)) = &chat.messages[0].content else {
            panic!("parts")
        };
        assert_eq!(parts[0].extra["cache_control"]["type"], "ephemeral");
        let call = &chat.messages[2].tool_calls.as_ref().unwrap()[0];
        assert_eq!(
            serde_json::from_str::<Value>(&call.function.arguments).unwrap(),
            json!({"city": "Oslo"})
        );
        assert_eq!(chat.messages[3].role, Role::Tool);
        assert_eq!(chat.messages[3].tool_call_id.as_deref(), Some("t1"));
        assert_eq!(chat.messages[4].role, Role::User);
        assert_eq!(chat.tool_choice, Some(json!("required")));
        assert_eq!(chat.parallel_tool_calls, Some(false));
        assert_eq!(chat.user.as_deref(), Some("u1"));
        assert_eq!(chat.max_tokens, Some(100));
    }

    #[test]
    fn what_cannot_be_translated_is_named() {
        let err = chat_from_messages(request(
            json!({"model": "m", "max_tokens": 5, "container": "x", "messages": []}),
        ))
        .unwrap_err();
        assert_eq!(err.param, "container");
        let err = chat_from_messages(request(json!({"model": "m", "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "document", "source": {}}]}]})))
        .unwrap_err();
        assert_eq!(err.param, "messages[0].content[0].type");
        let err = chat_from_messages(request(
            json!({"model": "m", "max_tokens": 5, "messages": [],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
        ))
        .unwrap_err();
        assert_eq!(err.param, "tools[0].type");
    }

    #[test]
    fn images_become_data_urls() {
        let chat = chat_from_messages(request(json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "AAAA"}}]}]}))).unwrap();
        let Some(Content::Parts(parts)) = &chat.messages[0].content else {
            panic!("parts")
        };
        assert_eq!(parts[0].kind, "image_url");
        assert_eq!(
            parts[0].extra["image_url"]["url"],
            "data:image/jpeg;base64,AAAA"
        );
    }
}
