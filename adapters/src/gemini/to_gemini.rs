//! Canonical chat request -> Gemini `generateContent` request (egress to
//! the Gemini API and to Vertex AI's Gemini models).

use serde_json::{Map, Value, json};

use crate::translate::{TranslateError, refuse_unhonoured, untranslatable};
use crate::types::{ChatRequest, Content, ContentPart, Message, Role};

/// Chat fields with a generateContent equivalent.
const TRANSLATED_EXTRAS: [&str; 6] = [
    "stop",
    "top_p",
    "top_k",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
];

/// Hints another server's own prompt cache reads (Codex sends one); Gemini
/// caches prefixes by itself, so the hint is left behind.
const ADVISORY_EXTRAS: [&str; 1] = ["prompt_cache_key"];

/// Where a tool call's thought signature travels through the canonical
/// types (Gemini 3 refuses a turn that drops it).
pub(crate) const THOUGHT_SIGNATURE: &str = "thought_signature";

pub fn generate_request(req: &ChatRequest) -> Result<Value, TranslateError> {
    refuse_unhonoured(
        req,
        "a Gemini backend",
        (false, false),
        (&TRANSLATED_EXTRAS, &ADVISORY_EXTRAS),
    )?;
    let mut system = Vec::new();
    let mut contents: Vec<Value> = Vec::new();
    for (i, message) in req.messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        match message.role {
            Role::System | Role::Developer => system.extend(parts(message.content.as_ref(), &at)?),
            Role::User => push(&mut contents, "user", parts(message.content.as_ref(), &at)?),
            Role::Assistant => push(&mut contents, "model", model_parts(message, &at)?),
            Role::Tool | Role::Function => {
                let name = tool_name(&req.messages[..i], message);
                let text = message.text();
                // `response` is an object: the output, or the error a
                // failed call reported.
                let value: Value = serde_json::from_str(&text)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or(Value::String(text));
                let failed = message.extra.get("is_error") == Some(&Value::Bool(true));
                let response = if failed {
                    json!({"error": value})
                } else if value.is_object() {
                    value
                } else {
                    json!({"output": value})
                };
                let mut call = json!({"name": name, "response": response});
                // Ids minted here (Gemini often sends none) are not Gemini's to see.
                if let Some(id) = message
                    .tool_call_id
                    .as_ref()
                    .filter(|id| !id.starts_with(MINTED_ID))
                {
                    call["id"] = json!(id);
                }
                push(
                    &mut contents,
                    "user",
                    vec![json!({"functionResponse": call})],
                );
            }
        }
    }
    let mut out = Map::new();
    out.insert("contents".into(), Value::Array(contents));
    if !system.is_empty() {
        out.insert("systemInstruction".into(), json!({ "parts": system }));
    }
    if let Some(tools) = &req.tools {
        let declarations: Vec<Value> = tools
            .iter()
            .map(|t| {
                let mut d = json!({"name": t.function.name});
                if let Some(description) = &t.function.description {
                    d["description"] = json!(description);
                }
                if let Some(parameters) = &t.function.parameters {
                    d["parametersJsonSchema"] = parameters.clone();
                }
                d
            })
            .collect();
        out.insert(
            "tools".into(),
            json!([{ "functionDeclarations": declarations }]),
        );
    }
    if let Some(config) = tool_config(req.tool_choice.as_ref()) {
        out.insert("toolConfig".into(), config);
    }
    let generation = generation_config(req)?;
    if !generation.is_empty() {
        out.insert("generationConfig".into(), Value::Object(generation));
    }
    Ok(Value::Object(out))
}

fn generation_config(req: &ChatRequest) -> Result<Map<String, Value>, TranslateError> {
    let mut config = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            config.insert(key.into(), value);
        }
    };
    set("maxOutputTokens", req.output_limit().map(|n| json!(n)));
    set("temperature", req.temperature.map(|t| json!(t)));
    set("candidateCount", req.n.filter(|n| *n > 1).map(|n| json!(n)));
    set("seed", req.seed.map(|s| json!(s)));
    for (ours, theirs) in [
        ("top_p", "topP"),
        ("top_k", "topK"),
        ("presence_penalty", "presencePenalty"),
        ("frequency_penalty", "frequencyPenalty"),
    ] {
        set(
            theirs,
            req.extra.get(ours).filter(|v| v.is_number()).cloned(),
        );
    }
    set(
        "stopSequences",
        req.extra.get("stop").map(|stop| match stop {
            Value::String(one) => json!([one]),
            other => other.clone(),
        }),
    );
    if let Some(format) = &req.response_format {
        match format.get("type").and_then(Value::as_str) {
            Some("json_object") => set("responseMimeType", Some(json!("application/json"))),
            Some("json_schema") => {
                set("responseMimeType", Some(json!("application/json")));
                set(
                    "responseJsonSchema",
                    format.pointer("/json_schema/schema").cloned(),
                );
            }
            Some("text") | None => {}
            Some(other) => {
                return Err(untranslatable(
                    "response_format",
                    format!("response_format `{other}` has no Gemini equivalent"),
                ));
            }
        }
    }
    let mut thinking = Map::new();
    if let Some(effort) = req.extra.get("reasoning_effort").and_then(Value::as_str) {
        if req.model.contains("gemini-3") {
            // Gemini 3 thinks in levels and cannot be told not to: the
            // lowest level stands for none. OpenAI's middle rounds up.
            let level = if matches!(effort, "none" | "minimal" | "low") {
                "low"
            } else {
                "high"
            };
            thinking.insert("thinkingLevel".into(), json!(level));
        } else {
            // Earlier models take a budget, as Google's OpenAI layer maps
            // efforts; 0 turns thinking off.
            let budget = match effort {
                "none" => 0,
                "minimal" | "low" => 1024,
                "medium" => 8192,
                _ => 24576,
            };
            thinking.insert("thinkingBudget".into(), json!(budget));
        }
    }
    if !thinking.is_empty() {
        set("thinkingConfig", Some(Value::Object(thinking)));
    }
    Ok(config)
}

/// Appends a turn; function results that follow each other answer one
/// model turn together, so they share one `user` turn.
fn push(contents: &mut Vec<Value>, role: &str, parts: Vec<Value>) {
    // Gemini refuses a turn without parts (an assistant turn that said
    // nothing, say).
    if parts.is_empty() {
        return;
    }
    let answers = |parts: &[Value]| parts.iter().all(|p| p.get("functionResponse").is_some());
    if let Some(last) = contents.last_mut()
        && role == "user"
        && last["role"] == "user"
        && answers(&parts)
        && last["parts"].as_array().is_some_and(|p| answers(p))
        && let Some(existing) = last["parts"].as_array_mut()
    {
        existing.extend(parts);
        return;
    }
    contents.push(json!({"role": role, "parts": parts}));
}

/// The function a tool result answers: Gemini names results by function,
/// not by call id.
fn tool_name(before: &[Message], result: &Message) -> String {
    if let Some(name) = &result.name {
        return name.clone();
    }
    before
        .iter()
        .rev()
        .flat_map(|m| m.tool_calls.iter().flatten())
        .find(|call| Some(&call.id) == result.tool_call_id.as_ref())
        .map(|call| call.function.name.clone())
        .unwrap_or_default()
}

fn tool_config(choice: Option<&Value>) -> Option<Value> {
    let (mode, only) = match choice? {
        Value::String(s) if s == "none" => ("NONE", None),
        Value::String(s) if s == "required" => ("ANY", None),
        Value::Object(o) => (
            "ANY",
            o.get("function").and_then(|f| f.get("name")).cloned(),
        ),
        _ => ("AUTO", None),
    };
    let mut config = json!({"mode": mode});
    if let Some(name) = only {
        config["allowedFunctionNames"] = json!([name]);
    }
    Some(json!({ "functionCallingConfig": config }))
}

fn parts(content: Option<&Content>, at: &str) -> Result<Vec<Value>, TranslateError> {
    match content {
        None => Ok(Vec::new()),
        Some(Content::Text(text)) => Ok(vec![json!({ "text": text })]),
        Some(Content::Parts(parts)) => parts
            .iter()
            .enumerate()
            .map(|(i, p)| part(p, &format!("{at}.content[{i}]")))
            .collect(),
    }
}

/// One content part. `cache_control` markers are left behind: Gemini
/// caches prefixes implicitly.
fn part(part: &ContentPart, at: &str) -> Result<Value, TranslateError> {
    match part.kind.as_str() {
        "text" => Ok(json!({ "text": part.text.clone().unwrap_or_default() })),
        "image_url" => match part.inline_image() {
            Some((mime, data)) => Ok(json!({"inlineData": {"mimeType": mime, "data": data}})),
            None => Err(untranslatable(
                format!("{at}.image_url"),
                "a Gemini backend takes images inline (data: URLs), not by link",
            )),
        },
        other => Err(untranslatable(
            format!("{at}.type"),
            format!("content part `{other}` cannot be sent to a Gemini backend"),
        )),
    }
}

fn model_parts(message: &Message, at: &str) -> Result<Vec<Value>, TranslateError> {
    let mut out: Vec<Value> = parts(message.content.as_ref(), at)?
        .into_iter()
        .filter(|p| p.get("text").and_then(Value::as_str) != Some(""))
        .collect();
    for call in message.tool_calls.iter().flatten() {
        let args: Value =
            serde_json::from_str(&call.function.arguments).unwrap_or_else(|_| json!({}));
        let mut part = json!({"functionCall": {"name": call.function.name, "args": args}});
        // Ids minted here (Gemini often sends none) are not Gemini's to see.
        if !call.id.starts_with(MINTED_ID) {
            part["functionCall"]["id"] = json!(call.id);
        }
        if let Some(signature) = call.extra.get(THOUGHT_SIGNATURE) {
            part["thoughtSignature"] = signature.clone();
        }
        out.push(part);
    }
    Ok(out)
}

/// The prefix of the tool-call ids the adapter makes up for calls Gemini
/// sent without one.
pub(crate) const MINTED_ID: &str = "call_gemini_";
