//! The canonical prompt of a request as segments for its prefix chain:
//! the tools, then the system messages (the stable part), then every other
//! message in order. Each part is re-serialised from the typed request, so
//! the chain does not depend on the client's key order or whitespace.

use switchyard_adapters::types::{ChatRequest, CompletionRequest, Role};
use switchyard_router::prefix::{ChainBuilder, PrefixChain};

pub fn chat_chain(req: &ChatRequest) -> PrefixChain {
    let mut builder = ChainBuilder::new();
    let mut buf = Vec::with_capacity(1024);
    for tool in req.tool_defs() {
        segment(&mut builder, &mut buf, tool);
    }
    let stable = stable_messages(req);
    for message in &req.messages[..stable] {
        segment(&mut builder, &mut buf, message);
    }
    builder.mark_stable();
    for message in &req.messages[stable..] {
        segment(&mut builder, &mut buf, message);
    }
    builder.finish()
}

/// How many messages open the conversation as system or developer
/// messages: with the tools, the stable part of the prompt.
pub fn stable_messages(req: &ChatRequest) -> usize {
    req.messages
        .iter()
        .take_while(|m| matches!(m.role, Role::System | Role::Developer))
        .count()
}

pub fn completion_chain(req: &CompletionRequest) -> PrefixChain {
    let mut builder = ChainBuilder::new();
    match req.prompt.as_str() {
        Some(text) => builder.segment(text.as_bytes()),
        None => builder.segment(req.prompt.to_string().as_bytes()),
    };
    builder.finish()
}

/// One part of the prompt, as JSON.
fn segment<T: serde::Serialize>(builder: &mut ChainBuilder, buf: &mut Vec<u8>, value: &T) {
    buf.clear();
    // Our canonical types always serialise (string keys only).
    let _ = serde_json::to_writer(&mut *buf, value);
    builder.segment(buf);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(body: serde_json::Value) -> ChatRequest {
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn the_chain_survives_reserialisation() {
        let body = json!({
            "model": "m",
            "tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
            "messages": [
                {"role": "system", "content": "You are careful. ".repeat(40)},
                {"role": "user", "content": "hi"}
            ]
        });
        // The same request with keys in another order and other spacing.
        let text = r#"{"messages":[{"content":"SYSTEM","role":"system"},{"role":"user","content":"hi"}],
            "tools":[{"function":{"parameters":{"properties":{"q":{"type":"string"}},"type":"object"},"name":"search"},"type":"function"}],
            "model":"m"}"#
            .replace("SYSTEM", &"You are careful. ".repeat(40));
        let a = chat_chain(&request(body));
        let b = chat_chain(&serde_json::from_str(&text).unwrap());
        assert_eq!(a, b);
        assert!(a.stable_blocks() >= 2);
    }

    #[test]
    fn other_tools_or_system_change_the_chain() {
        let base = |tool: &str, system: &str| {
            chat_chain(&request(json!({
                "model": "m",
                "tools": [{"type": "function", "function": {"name": tool, "parameters": {}}}],
                "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
            })))
        };
        let a = base("search", "be brief");
        assert_ne!(a.hashes()[0], base("fetch", "be brief").hashes()[0]);
        assert_ne!(a.hashes()[0], base("search", "be verbose").hashes()[0]);
        assert_eq!(a, base("search", "be brief"));
    }
}
