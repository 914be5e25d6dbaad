//! Canonical chat request -> Bedrock Converse request. Converse wants
//! turns that alternate, so consecutive turns of one role (a user turn
//! after tool results, say) are joined; tool results go back in one user
//! turn; `cache_control` markers become `cachePoint` blocks after the
//! block they mark.

use serde_json::{Map, Value, json};

use crate::anthropic::redacted_thinking;
use crate::translate::{TranslateError, refuse_unhonoured, untranslatable};
use crate::types::{ChatRequest, Content, ContentPart, Message, Role};

/// Chat fields with a Converse equivalent.
const TRANSLATED_EXTRAS: [&str; 4] = ["stop", "top_p", "top_k", "thinking"];
/// Hints another server's own cache or reasoning reads; Converse has no
/// field for them, so they are left behind.
const ADVISORY_EXTRAS: [&str; 2] = ["prompt_cache_key", "reasoning_effort"];

pub fn converse_request(req: &ChatRequest) -> Result<Value, TranslateError> {
    refuse_unhonoured(
        req,
        "a Bedrock backend",
        (true, true),
        (&TRANSLATED_EXTRAS, &ADVISORY_EXTRAS),
    )?;
    let mut system = Vec::new();
    let mut messages: Vec<Value> = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        match message.role {
            Role::System | Role::Developer => system.extend(blocks(message.content.as_ref(), &at)?),
            Role::User => push(
                &mut messages,
                "user",
                blocks(message.content.as_ref(), &at)?,
            ),
            Role::Tool | Role::Function => push(&mut messages, "user", vec![tool_result(message)]),
            Role::Assistant => push(&mut messages, "assistant", assistant_blocks(message, &at)?),
        }
    }
    let mut out = Map::new();
    out.insert("messages".into(), Value::Array(messages));
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    let mut inference = Map::new();
    if let Some(limit) = req.output_limit() {
        inference.insert("maxTokens".into(), json!(limit));
    }
    if let Some(temperature) = req.temperature {
        inference.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = req.extra.get("top_p").filter(|v| v.is_number()) {
        inference.insert("topP".into(), top_p.clone());
    }
    if let Some(stop) = req.extra.get("stop") {
        let stop = match stop {
            Value::String(one) => json!([one]),
            other => other.clone(),
        };
        inference.insert("stopSequences".into(), stop);
    }
    if !inference.is_empty() {
        out.insert("inferenceConfig".into(), Value::Object(inference));
    }
    let mut additional = Map::new();
    for field in ["top_k", "thinking"] {
        if let Some(value) = req.extra.get(field) {
            additional.insert(field.into(), value.clone());
        }
    }
    if !additional.is_empty() {
        out.insert(
            "additionalModelRequestFields".into(),
            Value::Object(additional),
        );
    }
    if let Some(config) = tool_config(req, &out) {
        out.insert("toolConfig".into(), config);
    }
    Ok(Value::Object(out))
}

/// Appends a turn, joined to the last when it has the same role.
fn push(messages: &mut Vec<Value>, role: &str, content: Vec<Value>) {
    if content.is_empty() {
        return;
    }
    if let Some(last) = messages.last_mut()
        && last["role"] == role
        && let Some(blocks) = last["content"].as_array_mut()
    {
        blocks.extend(content);
        return;
    }
    messages.push(json!({"role": role, "content": content}));
}

/// A `cachePoint` for a block marked with `cache_control`.
fn cache_point(extra: &Map<String, Value>) -> Option<Value> {
    let control = extra.get("cache_control")?;
    let mut point = json!({"type": "default"});
    if control.get("ttl").and_then(Value::as_str) == Some("1h") {
        point["ttl"] = json!("1h");
    }
    Some(json!({ "cachePoint": point }))
}

fn blocks(content: Option<&Content>, at: &str) -> Result<Vec<Value>, TranslateError> {
    match content {
        None => Ok(Vec::new()),
        Some(Content::Text(text)) if text.is_empty() => Ok(Vec::new()),
        Some(Content::Text(text)) => Ok(vec![json!({ "text": text })]),
        Some(Content::Parts(parts)) => {
            let mut out = Vec::new();
            for (i, part) in parts.iter().enumerate() {
                if let Some(block) = block(part, &format!("{at}.content[{i}]"))? {
                    out.push(block);
                }
                out.extend(cache_point(&part.extra));
            }
            Ok(out)
        }
    }
}

fn block(part: &ContentPart, at: &str) -> Result<Option<Value>, TranslateError> {
    match part.kind.as_str() {
        "text" => Ok(part
            .text
            .as_deref()
            .filter(|t| !t.is_empty())
            .map(|text| json!({ "text": text }))),
        "image_url" => {
            let (media, data) = part.inline_image().ok_or_else(|| {
                untranslatable(
                    format!("{at}.image_url"),
                    "a Bedrock backend takes images inline (data: URLs), not by link",
                )
            })?;
            let format = match media {
                "image/png" => "png",
                "image/jpeg" | "image/jpg" => "jpeg",
                "image/gif" => "gif",
                "image/webp" => "webp",
                other => {
                    return Err(untranslatable(
                        format!("{at}.image_url"),
                        format!("Bedrock takes png, jpeg, gif and webp images, not {other}"),
                    ));
                }
            };
            Ok(Some(
                json!({"image": {"format": format, "source": {"bytes": data}}}),
            ))
        }
        other => Err(untranslatable(
            format!("{at}.type"),
            format!("content part `{other}` cannot be sent to a Bedrock backend"),
        )),
    }
}

fn tool_result(message: &Message) -> Value {
    let text = message.text();
    let content = match serde_json::from_str::<Value>(&text) {
        Ok(value @ Value::Object(_)) => json!([{ "json": value }]),
        _ => json!([{ "text": text }]),
    };
    let mut result = json!({
        "toolUseId": message.tool_call_id.clone().unwrap_or_default(),
        "content": content,
    });
    if message.extra.get("is_error") == Some(&Value::Bool(true)) {
        result["status"] = json!("error");
    }
    json!({ "toolResult": result })
}

fn assistant_blocks(message: &Message, at: &str) -> Result<Vec<Value>, TranslateError> {
    let mut out = Vec::new();
    if let Some(thinking) = message
        .extra
        .get("reasoning_content")
        .and_then(Value::as_str)
    {
        let mut text = json!({ "text": thinking });
        if let Some(signature) = message
            .extra
            .get("reasoning_signature")
            .and_then(Value::as_str)
        {
            text["signature"] = json!(signature);
        }
        out.push(json!({"reasoningContent": {"reasoningText": text}}));
    }
    for data in redacted_thinking(&message.extra) {
        out.push(json!({"reasoningContent": {"redactedContent": data}}));
    }
    out.extend(blocks(message.content.as_ref(), at)?);
    for call in message.tool_calls.iter().flatten() {
        let input: Value = serde_json::from_str(&call.function.arguments)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        out.push(
            json!({"toolUse": {"toolUseId": call.id, "name": call.function.name, "input": input}}),
        );
    }
    Ok(out)
}

/// Tools and the choice among them. Converse has no "none": with
/// `tool_choice: none` the tools are not sent, unless the conversation
/// already holds tool calls (Converse then needs them declared), when the
/// model is left to choose.
fn tool_config(req: &ChatRequest, request: &Map<String, Value>) -> Option<Value> {
    let tools = req.tools.as_ref().filter(|t| !t.is_empty())?;
    let history_uses_tools = request["messages"].as_array().is_some_and(|turns| {
        turns.iter().any(|turn| {
            turn["content"].as_array().is_some_and(|blocks| {
                blocks
                    .iter()
                    .any(|b| b.get("toolUse").is_some() || b.get("toolResult").is_some())
            })
        })
    });
    let choice = match req.tool_choice.as_ref() {
        Some(Value::String(s)) if s == "none" && !history_uses_tools => return None,
        Some(Value::String(s)) if s == "required" => Some(json!({"any": {}})),
        Some(Value::Object(o)) => o
            .get("function")
            .and_then(|f| f.get("name"))
            .map(|name| json!({"tool": {"name": name}})),
        _ => None,
    };
    let mut specs = Vec::new();
    for tool in tools.iter() {
        let mut spec = json!({
            "name": tool.function.name,
            "inputSchema": {"json": tool.function.parameters.clone().unwrap_or_else(|| json!({"type": "object"}))},
        });
        if let Some(description) = &tool.function.description {
            spec["description"] = json!(description);
        }
        specs.push(json!({ "toolSpec": spec }));
        specs.extend(cache_point(&tool.extra));
    }
    let mut config = json!({ "tools": specs });
    if let Some(choice) = choice {
        config["toolChoice"] = choice;
    }
    Some(config)
}
