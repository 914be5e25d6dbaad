//! What a Responses object repeats back from the request that asked for it.
//! The spec requires these fields on every response (`instructions`,
//! `metadata`, `temperature`, `top_p`, `tools`, `tool_choice`, ...), and
//! strict clients generated from it reject an answer without them; clients
//! also read them to know what the answer was made under.

use serde_json::{Map, Value, json};

/// The request's values of the echoed fields, with the spec's value for
/// "not given" where it sent none.
#[derive(Debug, Clone, PartialEq)]
pub struct Echo(Map<String, Value>);

/// Echoed as sent, or as `null` when not sent.
const AS_SENT_OR_NULL: [&str; 5] = [
    "instructions",
    "temperature",
    "top_p",
    "max_output_tokens",
    "reasoning",
];

/// Echoed as sent when sent, and left out otherwise.
const AS_SENT: [&str; 2] = ["user", "prompt_cache_key"];

impl Echo {
    /// The echo of a Responses request body.
    pub fn of(request: &Map<String, Value>) -> Echo {
        let sent = |field: &str| request.get(field).filter(|v| !v.is_null()).cloned();
        let mut echo = Map::new();
        for field in AS_SENT_OR_NULL {
            echo.insert(field.into(), sent(field).unwrap_or(Value::Null));
        }
        for field in AS_SENT {
            if let Some(value) = sent(field) {
                echo.insert(field.into(), value);
            }
        }
        echo.insert("metadata".into(), sent("metadata").unwrap_or(json!({})));
        // Every tool as the caller declared it, hosted ones too: the answer
        // says what it was made under, even where a chat backend was only
        // given the function tools.
        let mut tools = sent("tools").unwrap_or(json!([]));
        for tool in tools.as_array_mut().into_iter().flatten() {
            fill_function_tool(tool);
        }
        echo.insert("tools".into(), tools);
        echo.insert(
            "tool_choice".into(),
            sent("tool_choice").unwrap_or(json!("auto")),
        );
        echo.insert(
            "parallel_tool_calls".into(),
            sent("parallel_tool_calls").unwrap_or(json!(true)),
        );
        let mut text = sent("text").unwrap_or(json!({}));
        if let Some(text) = text.as_object_mut() {
            text.entry("format").or_insert(json!({"type": "text"}));
        }
        echo.insert("text".into(), text);
        // Whatever `store` asked for: nothing is kept here, and the answer
        // says so rather than echo a `true` it did not honour.
        echo.insert("store".into(), json!(false));
        Echo(echo)
    }

    /// The namespace and name of the function a chat backend called as
    /// `flat` (see [`flat_name`]): a tool of one of the request's
    /// namespaces, or a plain function (no namespace).
    pub(super) fn called<'a>(&'a self, flat: &'a str) -> (Option<&'a str>, &'a str) {
        let namespaces = self.0["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| t["type"] == "namespace");
        for namespace in namespaces {
            let Some(prefix) = namespace["name"].as_str() else {
                continue;
            };
            let Some(name) = flat
                .strip_prefix(prefix)
                .and_then(|rest| rest.strip_prefix(NAMESPACE_SEPARATOR))
            else {
                continue;
            };
            let listed = namespace["tools"].as_array().into_iter().flatten();
            if listed.clone().any(|t| t["name"] == name) {
                return (Some(prefix), name);
            }
        }
        (None, flat)
    }

    /// Writes the echoed fields into a response object.
    pub(super) fn apply(&self, response: &mut Value) {
        if let Some(response) = response.as_object_mut() {
            for (field, value) in &self.0 {
                response.insert(field.clone(), value.clone());
            }
        }
    }
}

/// Between a namespace and its tool's name in the function a chat backend
/// is offered.
const NAMESPACE_SEPARATOR: &str = "__";

/// The one name a chat backend knows a namespace's tool by:
/// `NAMESPACE__NAME` (Codex CLI's MCP tool `tools_add` of the namespace
/// `mcp__gw` is `mcp__gw__tools_add`), or the bare name without one.
pub(super) fn flat_name(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{namespace}{NAMESPACE_SEPARATOR}{name}"),
        None => name.to_owned(),
    }
}

/// A function tool as the spec writes it in a response: `parameters` and
/// `strict` are required there, `null` when the request left them out.
fn fill_function_tool(tool: &mut Value) {
    if let Some(fields) = tool.as_object_mut()
        && fields.get("type") == Some(&json!("function"))
    {
        for required in ["parameters", "strict"] {
            fields.entry(required).or_insert(Value::Null);
        }
    }
}

impl Default for Echo {
    /// The echo of a request that set none of the echoed fields.
    fn default() -> Self {
        Echo::of(&Map::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_sent_comes_back_and_what_was_not_has_the_specs_value() {
        let request = json!({
            "instructions": "Be brief", "temperature": 0.2, "metadata": {"ticket": "42"},
            "tools": [{"type": "web_search"}, {"type": "function", "name": "f", "parameters": {}}],
            "tool_choice": "required", "store": true, "text": {"verbosity": "low"}, "user": "u1",
        });
        let mut response = json!({"id": "resp_1"});
        Echo::of(request.as_object().unwrap()).apply(&mut response);
        assert_eq!(response["instructions"], "Be brief");
        assert_eq!(response["temperature"], 0.2);
        assert_eq!(response["top_p"], Value::Null);
        assert_eq!(response["max_output_tokens"], Value::Null);
        assert_eq!(response["metadata"], json!({"ticket": "42"}));
        assert_eq!(response["tools"][0], request["tools"][0]);
        let function = json!({"type": "function", "name": "f", "parameters": {}, "strict": null});
        assert_eq!(response["tools"][1], function, "required fields filled");
        assert_eq!(response["tool_choice"], "required");
        assert_eq!(response["parallel_tool_calls"], true);
        assert_eq!(
            response["text"],
            json!({"verbosity": "low", "format": {"type": "text"}})
        );
        assert_eq!(response["store"], false, "nothing is stored");
        assert_eq!(response["user"], "u1");
        assert!(response.get("prompt_cache_key").is_none());
        assert_eq!(response["id"], "resp_1");
    }
}
