//! Gemini `generateContent` request -> canonical chat request (ingress:
//! Gemini CLI and the google-genai SDKs served by any backend).

use std::collections::VecDeque;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::to_gemini::{MINTED_ID, THOUGHT_SIGNATURE};
use crate::translate::{TranslateError, untranslatable};
use crate::types::{
    ChatRequest, Content, ContentPart, FunctionCall, FunctionDef, Message, Role, Tool, ToolCall,
};

/// Top-level fields a request may carry. Safety settings are Google's own
/// filters' thresholds: other backends apply their own, so they are read
/// and left behind.
const KNOWN: [&str; 6] = [
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "generationConfig",
    "safetySettings",
];

/// `generationConfig` fields that change nothing another backend can be
/// asked for, so they are read and left behind.
const ADVISORY_CONFIG: [&str; 4] = [
    "responseModalities",
    "mediaResolution",
    "audioTimestamp",
    "routingConfig",
];

/// A generateContent body for `model` (from the path) as a chat request.
pub fn chat_request_from_generate(body: Value, model: &str) -> Result<ChatRequest, TranslateError> {
    let Value::Object(body) = body else {
        return Err(untranslatable("", "the request body is a JSON object"));
    };
    if body.contains_key("cachedContent") {
        // Part of the prompt kept on Google's servers: without it, the
        // request would silently be a different one.
        return Err(untranslatable(
            "cachedContent",
            "a cached content lives on Google's servers, out of this gateway's reach; send its contents instead",
        ));
    }
    if let Some(field) = body.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(untranslatable(
            field.clone(),
            format!("unknown field `{field}` in a generateContent request"),
        ));
    }
    let mut messages = Vec::new();
    if let Some(system) = body.get("systemInstruction") {
        let text = texts(system, "systemInstruction")?;
        if !text.is_empty() {
            messages.push(Message::new(Role::System, Content::Text(text)));
        }
    }
    let contents = body
        .get("contents")
        .and_then(Value::as_array)
        .ok_or_else(|| untranslatable("contents", "`contents` is a list of turns"))?;
    let mut calls = Calls::default();
    for (i, turn) in contents.iter().enumerate() {
        let at = format!("contents[{i}]");
        match turn.get("role").and_then(Value::as_str).unwrap_or("user") {
            "user" => user_turn(turn, &at, &mut calls, &mut messages)?,
            "model" => messages.push(model_turn(turn, &at, &mut calls)?),
            other => {
                return Err(untranslatable(
                    format!("{at}.role"),
                    format!("role `{other}` is not `user` or `model`"),
                ));
            }
        }
    }
    let mut req = ChatRequest {
        model: model.strip_prefix("models/").unwrap_or(model).to_owned(),
        messages,
        stream: None,
        stream_options: None,
        max_tokens: None,
        max_completion_tokens: None,
        temperature: None,
        n: None,
        seed: None,
        tools: tools(body.get("tools"))?,
        tool_choice: tool_choice(body.get("toolConfig")),
        parallel_tool_calls: None,
        response_format: None,
        logprobs: None,
        top_logprobs: None,
        user: None,
        metadata: None,
        extra: Default::default(),
        forward_headers: Vec::new(),
        echo: None,
    };
    if let Some(config) = body.get("generationConfig") {
        generation_config(config, &mut req)?;
    }
    Ok(req)
}

/// The calls the model made, in order, so results that name only their
/// function find the call they answer.
#[derive(Default)]
struct Calls {
    unanswered: VecDeque<(String, String)>,
    minted: u32,
}

impl Calls {
    fn call(&mut self, id: Option<&str>, name: &str) -> String {
        let id = id.map_or_else(
            || {
                self.minted += 1;
                format!("{MINTED_ID}{}", self.minted - 1)
            },
            str::to_owned,
        );
        self.unanswered.push_back((id.clone(), name.to_owned()));
        id
    }

    fn answer(&mut self, id: Option<&str>, name: &str) -> String {
        let at = self
            .unanswered
            .iter()
            .position(|(i, n)| id.map_or(n == name, |id| i == id));
        match (at, id) {
            (Some(at), _) => self
                .unanswered
                .remove(at)
                .map(|(id, _)| id)
                .unwrap_or_default(),
            (None, Some(id)) => id.to_owned(),
            (None, None) => format!("{MINTED_ID}{name}"),
        }
    }
}

/// The texts of a `{parts: [{text}]}` content, joined.
fn texts(content: &Value, at: &str) -> Result<String, TranslateError> {
    let mut out = Vec::new();
    for (i, part) in parts_of(content, at)?.iter().enumerate() {
        match part.get("text").and_then(Value::as_str) {
            Some(text) => out.push(text),
            None => {
                return Err(untranslatable(
                    format!("{at}.parts[{i}]"),
                    "only text parts are taken here",
                ));
            }
        }
    }
    Ok(out.join("\n"))
}

fn parts_of<'a>(content: &'a Value, at: &str) -> Result<&'a [Value], TranslateError> {
    match content.get("parts") {
        Some(Value::Array(parts)) => Ok(parts),
        None => Ok(&[]),
        Some(_) => Err(untranslatable(format!("{at}.parts"), "`parts` is a list")),
    }
}

/// A user turn: its function results become tool messages (first, as they
/// answer the model's last turn), the rest one user message.
fn user_turn(
    turn: &Value,
    at: &str,
    calls: &mut Calls,
    messages: &mut Vec<Message>,
) -> Result<(), TranslateError> {
    let mut content = Vec::new();
    for (i, part) in parts_of(turn, at)?.iter().enumerate() {
        let at = format!("{at}.parts[{i}]");
        if let Some(result) = part.get("functionResponse") {
            let name = result["name"].as_str().unwrap_or_default();
            let id = calls.answer(result["id"].as_str(), name);
            let response = result.get("response").cloned().unwrap_or(Value::Null);
            let (text, failed) = match &response {
                Value::Object(o) if o.len() == 1 && o.contains_key("error") => (&o["error"], true),
                Value::Object(o) if o.len() == 1 && o.contains_key("output") => {
                    (&o["output"], false)
                }
                other => (other, false),
            };
            let text = match text {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut message = Message::new(Role::Tool, Content::Text(text));
            message.tool_call_id = Some(id);
            message.name = Some(name.to_owned());
            if failed {
                message.extra.insert("is_error".into(), json!(true));
            }
            messages.push(message);
        } else {
            content.push(content_part(part, &at)?);
        }
    }
    if !content.is_empty() {
        let content = match content.as_slice() {
            [only] if only.kind == "text" => Content::Text(only.text.clone().unwrap_or_default()),
            _ => Content::Parts(content),
        };
        messages.push(Message::new(Role::User, content));
    }
    Ok(())
}

fn content_part(part: &Value, at: &str) -> Result<ContentPart, TranslateError> {
    if let Some(text) = part.get("text").and_then(Value::as_str) {
        return Ok(ContentPart {
            kind: "text".into(),
            text: Some(text.to_owned()),
            extra: Default::default(),
        });
    }
    if let Some(blob) = part.get("inlineData") {
        let mime = blob["mimeType"].as_str().unwrap_or_default();
        let data = blob["data"].as_str().unwrap_or_default();
        if mime.starts_with("image/") {
            return Ok(ContentPart::image_url(&format!(
                "data:{mime};base64,{data}"
            )));
        }
        return Err(untranslatable(
            format!("{at}.inlineData.mimeType"),
            format!("inline `{mime}` data has no equivalent here; images are taken"),
        ));
    }
    let kind = part
        .as_object()
        .and_then(|o| o.keys().find(|k| *k != "thoughtSignature"))
        .cloned()
        .unwrap_or_default();
    Err(untranslatable(
        format!("{at}.{kind}"),
        format!("a `{kind}` part has no equivalent here"),
    ))
}

/// A model turn: its text, its thoughts, and its function calls.
fn model_turn(turn: &Value, at: &str, calls: &mut Calls) -> Result<Message, TranslateError> {
    let mut text = String::new();
    let mut thoughts = String::new();
    let mut tool_calls = Vec::new();
    for (i, part) in parts_of(turn, at)?.iter().enumerate() {
        if let Some(call) = part.get("functionCall") {
            let name = call["name"].as_str().unwrap_or_default();
            let mut extra = Map::new();
            if let Some(signature) = part.get("thoughtSignature") {
                extra.insert(THOUGHT_SIGNATURE.into(), signature.clone());
            }
            tool_calls.push(ToolCall {
                id: calls.call(call["id"].as_str(), name),
                kind: "function".into(),
                function: FunctionCall {
                    name: name.to_owned(),
                    arguments: call.get("args").unwrap_or(&json!({})).to_string(),
                    extra: Default::default(),
                },
                extra: extra.into(),
            });
        } else if let Some(t) = part.get("text").and_then(Value::as_str) {
            if part.get("thought") == Some(&Value::Bool(true)) {
                thoughts.push_str(t);
            } else {
                text.push_str(t);
            }
        } else {
            return Err(untranslatable(
                format!("{at}.parts[{i}]"),
                "a model turn holds text and function calls",
            ));
        }
    }
    let mut message = Message::new(Role::Assistant, Content::Text(text));
    if message.text().is_empty() && !tool_calls.is_empty() {
        message.content = None;
    }
    if !thoughts.is_empty() {
        message
            .extra
            .insert("reasoning_content".into(), json!(thoughts));
    }
    message.tool_calls = (!tool_calls.is_empty()).then_some(tool_calls);
    Ok(message)
}

fn tools(tools: Option<&Value>) -> Result<Option<Arc<Vec<Tool>>>, TranslateError> {
    let Some(tools) = tools else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (i, tool) in tools.as_array().into_iter().flatten().enumerate() {
        let Some(declarations) = tool.get("functionDeclarations").and_then(Value::as_array) else {
            let kind = tool
                .as_object()
                .and_then(|o| o.keys().next())
                .cloned()
                .unwrap_or_default();
            return Err(untranslatable(
                format!("tools[{i}].{kind}"),
                format!("Google's `{kind}` tool runs only on Gemini; declare functions instead"),
            ));
        };
        for d in declarations {
            let parameters = d
                .get("parametersJsonSchema")
                .cloned()
                .or_else(|| d.get("parameters").map(json_schema));
            out.push(Tool {
                kind: "function".into(),
                function: FunctionDef {
                    name: d["name"].as_str().unwrap_or_default().to_owned(),
                    description: d["description"].as_str().map(str::to_owned),
                    parameters,
                    extra: Default::default(),
                },
                extra: Default::default(),
            });
        }
    }
    Ok((!out.is_empty()).then(|| Arc::new(out)))
}

/// Gemini's OpenAPI-style schema (`"type": "OBJECT"`) as JSON Schema.
fn json_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("type", Value::String(t)) => json!(t.to_ascii_lowercase()),
                        _ => json_schema(v),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(json_schema).collect()),
        other => other.clone(),
    }
}

fn tool_choice(config: Option<&Value>) -> Option<Value> {
    let calling = config?.get("functionCallingConfig")?;
    let only = calling["allowedFunctionNames"]
        .as_array()
        .filter(|n| n.len() == 1);
    Some(match calling["mode"].as_str().unwrap_or("AUTO") {
        "NONE" => json!("none"),
        "ANY" => match only {
            Some(name) => json!({"type": "function", "function": {"name": name[0]}}),
            None => json!("required"),
        },
        _ => json!("auto"),
    })
}

fn generation_config(config: &Value, req: &mut ChatRequest) -> Result<(), TranslateError> {
    let Value::Object(config) = config else {
        return Err(untranslatable(
            "generationConfig",
            "`generationConfig` is an object",
        ));
    };
    for (key, value) in config {
        let at = || format!("generationConfig.{key}");
        let number = || value.as_u64().and_then(|n| u32::try_from(n).ok());
        match key.as_str() {
            "maxOutputTokens" => req.max_tokens = number(),
            "temperature" => req.temperature = value.as_f64(),
            "candidateCount" => req.n = number(),
            "seed" => req.seed = value.as_i64(),
            "topP" => _ = req.extra.insert("top_p".into(), value.clone()),
            "topK" => _ = req.extra.insert("top_k".into(), value.clone()),
            "presencePenalty" => _ = req.extra.insert("presence_penalty".into(), value.clone()),
            "frequencyPenalty" => _ = req.extra.insert("frequency_penalty".into(), value.clone()),
            "stopSequences" => _ = req.extra.insert("stop".into(), value.clone()),
            "responseMimeType" => match value.as_str() {
                Some("application/json") if req.response_format.is_none() => {
                    req.response_format = Some(json!({"type": "json_object"}));
                }
                Some("application/json" | "text/plain") => {}
                _ => {
                    return Err(untranslatable(
                        at(),
                        "JSON and plain text are the types taken",
                    ));
                }
            },
            "responseJsonSchema" | "responseSchema" => {
                let schema = if key == "responseSchema" {
                    json_schema(value)
                } else {
                    value.clone()
                };
                req.response_format = Some(json!({"type": "json_schema",
                    "json_schema": {"name": "response", "schema": schema}}));
            }
            "thinkingConfig" => {
                if let Some(effort) = effort(value) {
                    req.extra.insert("reasoning_effort".into(), json!(effort));
                }
            }
            known if ADVISORY_CONFIG.contains(&known) => {}
            _ => {
                return Err(untranslatable(
                    at(),
                    format!("`{key}` has no equivalent on this gateway's backends"),
                ));
            }
        }
    }
    Ok(())
}

/// OpenAI's reasoning effort for Gemini's thinking settings: the level
/// itself, or the budget's size; no effort for a budget of 0 or the
/// default (-1, the model decides).
fn effort(thinking: &Value) -> Option<&'static str> {
    if let Some(level) = thinking.get("thinkingLevel").and_then(Value::as_str) {
        return Some(match level.to_ascii_lowercase().as_str() {
            "minimal" => "minimal",
            "low" => "low",
            "medium" => "medium",
            _ => "high",
        });
    }
    match thinking.get("thinkingBudget").and_then(Value::as_i64)? {
        ..=0 => None,
        1..=1024 => Some("low"),
        1025..=8192 => Some("medium"),
        _ => Some("high"),
    }
}
