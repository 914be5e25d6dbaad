//! The OpenAI Responses dialect, translated to and from canonical chat for
//! backends that speak only chat completions: requests, whole responses,
//! and the `response.*` event stream.

mod echo;
mod from_chat;
mod stream;
mod to_chat;

pub use echo::Echo;
pub use from_chat::response_from_chat;
pub use stream::ResponseStream;
pub use to_chat::chat_from_responses;

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::types::ChatResponse;

    /// Codex CLI's MCP tools come in a namespace per server: a chat backend
    /// is offered each as `NAMESPACE__NAME`, and its call goes back under
    /// the namespace, in a whole answer and in a stream alike.
    #[test]
    fn a_namespaces_tools_are_offered_flat_and_called_back_under_it() {
        let add =
            json!({"type": "function", "name": "tools_add", "parameters": {"type": "object"}});
        let request = json!({
            "model": "m", "input": [
                {"type": "message", "role": "user", "content": "Use tools_add"},
                {"type": "function_call", "namespace": "mcp__gw", "name": "tools_add", "call_id": "c0", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c0", "output": "5"},
            ],
            "tools": [
                {"type": "function", "name": "exec_command", "parameters": {}},
                {"type": "namespace", "name": "mcp__gw", "description": "gw", "tools": [add]},
                {"type": "web_search"},
            ],
        });
        let chat = chat_from_responses(&request).unwrap();
        let offered: Vec<&str> = chat
            .tools
            .iter()
            .flat_map(|tools| tools.iter())
            .map(|t| t.function.name.as_str())
            .collect();
        assert_eq!(offered, ["exec_command", "mcp__gw__tools_add"]);
        let earlier = chat.messages[1].tool_calls.as_ref().unwrap();
        assert_eq!(earlier[0].function.name, "mcp__gw__tools_add");

        let echo = Echo::of(request.as_object().unwrap());
        let call = json!({"id": "c1", "type": "function", "function": {"name": "mcp__gw__tools_add", "arguments": "{\"a\":2}"}});
        let answer: ChatResponse = serde_json::from_value(json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": null, "tool_calls": [call.clone()]}}],
        }))
        .unwrap();
        let item = &response_from_chat(&answer, &echo)["output"][0];
        assert_eq!(
            (&item["namespace"], &item["name"]),
            (&json!("mcp__gw"), &json!("tools_add"))
        );

        let mut stream = ResponseStream::new("m", echo);
        let chunk = serde_json::from_value(json!({
            "id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function",
                "function": {"name": "mcp__gw__tools_add", "arguments": "{}"}}]}, "finish_reason": "tool_calls"}],
        }))
        .unwrap();
        let mut events = stream.on_chunk(&chunk);
        events.extend(stream.finish());
        let items: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| *name == "response.output_item.done")
            .map(|(_, data)| &data["item"])
            .collect();
        assert_eq!(items[0]["namespace"], "mcp__gw");
        assert_eq!(items[0]["name"], "tools_add");
        // A plain function of the same shape of name is left alone.
        assert_eq!(
            Echo::default().called("mcp__gw__tools_add"),
            (None, "mcp__gw__tools_add")
        );
    }
}
