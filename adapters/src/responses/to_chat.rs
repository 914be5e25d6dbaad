//! Responses request -> canonical chat request.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::Echo;
use super::echo::flat_name;
use crate::anthropic::TranslateError;
use crate::anthropic::untranslatable;
use crate::types::{
    ChatRequest, Content, ContentPart, Extra, FunctionCall, FunctionDef, Message, Role,
    StreamOptions, Tool, ToolCall,
};

/// Request fields with a chat equivalent (translated below), or that only
/// concern the client and leave the answer's meaning alone: `store`
/// (nothing is stored), `include` (extra output a chat backend does not
/// produce), `client_metadata` (the client's bookkeeping; Codex sends it).
const KNOWN: [&str; 19] = [
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "stream",
    "max_output_tokens",
    "temperature",
    "top_p",
    "parallel_tool_calls",
    "user",
    "metadata",
    "store",
    "text",
    "reasoning",
    "stream_options",
    "prompt_cache_key",
    "include",
    "client_metadata",
];

pub fn chat_from_responses(body: &Value) -> Result<ChatRequest, TranslateError> {
    let object = body
        .as_object()
        .ok_or_else(|| untranslatable("", "the request body is a JSON object"))?;
    if let Some(field) = object.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        let why = if field == "previous_response_id" || field == "conversation" {
            "responses are not stored here; send the whole conversation as `input`"
        } else {
            "this field has no equivalent for the backend serving this model"
        };
        return Err(untranslatable(field.clone(), why));
    }
    let model = object
        .get("model")
        .and_then(Value::as_str)
        .ok_or_else(|| untranslatable("model", "missing field `model`"))?;
    let mut messages = Vec::new();
    if let Some(instructions) = object.get("instructions").and_then(Value::as_str) {
        messages.push(Message::new(
            Role::System,
            Content::Text(instructions.to_owned()),
        ));
    }
    match object.get("input") {
        Some(Value::String(text)) => {
            messages.push(Message::new(Role::User, Content::Text(text.clone())))
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                input_item(item, &format!("input[{i}]"), &mut messages)?;
            }
        }
        _ => return Err(untranslatable("input", "a string or a list of input items")),
    }
    let tools = match object.get("tools") {
        None => None,
        Some(Value::Array(tools)) => Some(function_tools(tools)?),
        Some(_) => return Err(untranslatable("tools", "a list of tools")),
    };
    let mut extra = Map::new();
    for field in ["top_p", "prompt_cache_key"] {
        if let Some(value) = object.get(field) {
            extra.insert(field.into(), value.clone());
        }
    }
    let response_format = match object.get("text").and_then(|t| t.get("format")) {
        None => None,
        Some(format) if format.get("type") == Some(&json!("text")) => None,
        Some(format) if format.get("type") == Some(&json!("json_schema")) => {
            let mut schema = format.clone();
            if let Some(o) = schema.as_object_mut() {
                o.remove("type");
            }
            Some(json!({"type": "json_schema", "json_schema": schema}))
        }
        Some(format) => Some(format.clone()),
    };
    if let Some(effort) = object.get("reasoning").and_then(|r| r.get("effort")) {
        extra.insert("reasoning_effort".into(), effort.clone());
    }
    let tool_choice = match object.get("tool_choice") {
        Some(Value::Object(choice)) if choice.get("type") == Some(&json!("function")) => Some(
            json!({"type": "function", "function": {"name": choice.get("name").cloned().unwrap_or(Value::Null)}}),
        ),
        other => other.cloned(),
    };
    let stream = object.get("stream").and_then(Value::as_bool);
    Ok(ChatRequest {
        model: model.to_owned(),
        messages,
        stream,
        stream_options: stream.filter(|s| *s).map(|_| StreamOptions {
            include_usage: Some(true),
            extra: Default::default(),
        }),
        max_tokens: object
            .get("max_output_tokens")
            .and_then(Value::as_u64)
            .and_then(|v| u32::try_from(v).ok()),
        max_completion_tokens: None,
        temperature: object.get("temperature").and_then(Value::as_f64),
        n: None,
        seed: None,
        tools: tools.map(Arc::new),
        tool_choice,
        parallel_tool_calls: object.get("parallel_tool_calls").and_then(Value::as_bool),
        response_format,
        logprobs: None,
        top_logprobs: None,
        user: object
            .get("user")
            .and_then(Value::as_str)
            .map(str::to_owned),
        metadata: object
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .map(Extra::from),
        extra: extra.into(),
        forward_headers: Vec::new(),
        echo: Some(Arc::new(Echo::of(object))),
    })
}

/// The function tools a chat backend is offered. A namespace groups
/// function tools the client runs (Codex CLI puts each MCP server's tools
/// in one): each is offered as `NAMESPACE__NAME`, and a call to it goes
/// back under its namespace. Hosted tools (web search, file search) run
/// on OpenAI's servers only: a chat backend cannot offer them, so they are
/// left out.
fn function_tools(tools: &[Value]) -> Result<Vec<Tool>, TranslateError> {
    let mut out = Vec::new();
    for (i, t) in tools.iter().enumerate() {
        match t.get("type").and_then(Value::as_str) {
            Some("function") => out.push(tool(t, &format!("tools[{i}]"), None)?),
            Some("namespace") => {
                let namespace = t
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| untranslatable(format!("tools[{i}].name"), "required"))?;
                let inner = t.get("tools").and_then(Value::as_array);
                for (j, inner) in inner.into_iter().flatten().enumerate() {
                    if inner.get("type").and_then(Value::as_str) == Some("function") {
                        let at = format!("tools[{i}].tools[{j}]");
                        out.push(tool(inner, &at, Some(namespace))?);
                    }
                }
            }
            kind => tracing::debug!(tool = ?kind, "hosted tool left out for a chat backend"),
        }
    }
    Ok(out)
}

fn tool(tool: &Value, at: &str, namespace: Option<&str>) -> Result<Tool, TranslateError> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| untranslatable(format!("{at}.name"), "required"))?;
    let mut extra = Map::new();
    if let Some(strict) = tool.get("strict") {
        extra.insert("strict".into(), strict.clone());
    }
    Ok(Tool {
        kind: "function".into(),
        function: FunctionDef {
            name: flat_name(namespace, name),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_owned),
            parameters: tool.get("parameters").cloned(),
            extra: extra.into(),
        },
        extra: Default::default(),
    })
}

fn input_item(item: &Value, at: &str, out: &mut Vec<Message>) -> Result<(), TranslateError> {
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => {
            let role = match item.get("role").and_then(Value::as_str) {
                Some("user") => Role::User,
                Some("assistant") => Role::Assistant,
                Some("system") => Role::System,
                Some("developer") => Role::Developer,
                _ => {
                    return Err(untranslatable(
                        format!("{at}.role"),
                        "one of user, assistant, system, developer",
                    ));
                }
            };
            let content = match item.get("content") {
                Some(Value::String(text)) => Content::Text(text.clone()),
                Some(Value::Array(parts)) => Content::Parts(
                    parts
                        .iter()
                        .enumerate()
                        .map(|(i, p)| part(p, &format!("{at}.content[{i}]")))
                        .collect::<Result<_, _>>()?,
                ),
                _ => {
                    return Err(untranslatable(
                        format!("{at}.content"),
                        "a string or a list of content parts",
                    ));
                }
            };
            out.push(Message::new(role, content));
        }
        "function_call" => {
            let call = ToolCall {
                id: item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                kind: "function".into(),
                function: FunctionCall {
                    name: flat_name(
                        item.get("namespace").and_then(Value::as_str),
                        item.get("name").and_then(Value::as_str).unwrap_or_default(),
                    ),
                    arguments: item
                        .get("arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("{}")
                        .to_owned(),
                    extra: Default::default(),
                },
                extra: Default::default(),
            };
            // Consecutive calls belong to one assistant turn.
            match out.last_mut() {
                Some(last) if last.role == Role::Assistant && last.tool_calls.is_some() => {
                    last.tool_calls.get_or_insert_with(Vec::new).push(call);
                }
                _ => out.push(Message {
                    content: None,
                    tool_calls: Some(vec![call]),
                    ..Message::new(Role::Assistant, Content::Text(String::new()))
                }),
            }
        }
        "function_call_output" => {
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            let mut result = Message::new(Role::Tool, Content::Text(output));
            result.tool_call_id = item
                .get("call_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            out.push(result);
        }
        other => {
            return Err(untranslatable(
                format!("{at}.type"),
                format!("input item `{other}` cannot be translated for this backend"),
            ));
        }
    }
    Ok(())
}

fn part(part: &Value, at: &str) -> Result<ContentPart, TranslateError> {
    match part.get("type").and_then(Value::as_str) {
        Some("input_text" | "output_text" | "text") => Ok(ContentPart {
            kind: "text".into(),
            text: part.get("text").and_then(Value::as_str).map(str::to_owned),
            extra: Default::default(),
        }),
        Some("input_image") => {
            let url = part
                .get("image_url")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Ok(ContentPart::image_url(url))
        }
        other => Err(untranslatable(
            format!("{at}.type"),
            format!(
                "content part `{}` cannot be translated for this backend",
                other.unwrap_or("?")
            ),
        )),
    }
}
