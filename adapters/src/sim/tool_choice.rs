//! Which of the offered tools the simulator calls: those the prompt names
//! first, else the first offered, as many as parallel calls allow.

use serde_json::Value;

use crate::types::{ChatRequest, Role, Tool};

/// The tools this request makes the simulator call, or none: it calls tools
/// when offered and allowed (those the prompt names first, else the first
/// offered), unless the last message is a tool result (then it answers in
/// text, closing the agent loop).
pub fn tools_to_call(req: &ChatRequest) -> Vec<&Tool> {
    let tools = req.tool_defs();
    if tools.is_empty() {
        return Vec::new();
    }
    if req.messages.last().is_some_and(|m| m.role == Role::Tool) {
        return Vec::new();
    }
    match &req.tool_choice {
        Some(Value::String(s)) if s == "none" => Vec::new(),
        Some(Value::Object(choice)) => {
            let wanted = choice
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str);
            tools
                .iter()
                .filter(|t| Some(t.function.name.as_str()) == wanted)
                .take(1)
                .collect()
        }
        _ => {
            let parallel = req.parallel_tool_calls.unwrap_or(true);
            let most = if parallel { 2 } else { 1 };
            let named: Vec<&Tool> = tools.iter().filter(|t| asked_for(req, t)).collect();
            if named.is_empty() {
                tools.iter().take(most).collect()
            } else {
                named.into_iter().take(most).collect()
            }
        }
    }
}

/// Whether the last user message names `tool` (as a word: its name, or
/// what follows a namespace's `__`), as in "use tools_add": a client that
/// offers many tools (Codex CLI lists its built-ins before its MCP tools)
/// gets the one its prompt asked for.
fn asked_for(req: &ChatRequest, tool: &Tool) -> bool {
    let Some(asked) = req.messages.iter().rev().find(|m| m.role == Role::User) else {
        return false;
    };
    let name = tool.function.name.as_str();
    let short = name.rsplit("__").next().unwrap_or(name);
    asked
        .text()
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'))
        .any(|word| word == name || word == short)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_tools_the_prompt_names_are_called_first() {
        let request = |prompt: &str| -> ChatRequest {
            serde_json::from_value(json!({"model": "m",
            "messages": [{"role": "user", "content": prompt}],
            "tools": [
                {"type": "function", "function": {"name": "exec_command", "parameters": {}}},
                {"type": "function", "function": {"name": "write_stdin", "parameters": {}}},
                {"type": "function", "function": {"name": "mcp__gw__tools_add", "parameters": {}}},
            ]}))
            .unwrap()
        };
        let called = |prompt: &str| -> Vec<String> {
            tools_to_call(&request(prompt))
                .iter()
                .map(|t| t.function.name.clone())
                .collect()
        };
        assert_eq!(
            called("Use tools_add to add 2 and 3."),
            ["mcp__gw__tools_add"]
        );
        assert_eq!(called("Add 2 and 3"), ["exec_command", "write_stdin"]);
        assert_eq!(
            called("tools_adder"),
            ["exec_command", "write_stdin"],
            "whole words only"
        );
    }
}
