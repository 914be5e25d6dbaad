//! The canonical prompt of a request as segments for its prefix chain:
//! the tools, then the system messages (the stable part), then every other
//! message in order. Each part is taken from the typed request (text as it
//! is, structured fields serialised again), so the chain does not depend on
//! the client's key order or whitespace.

use switchyard_adapters::types::{ChatRequest, CompletionRequest, Content, Message, Role};
use switchyard_router::prefix::{ChainBuilder, PrefixChain};

pub fn chat_chain(req: &ChatRequest) -> PrefixChain {
    let mut builder = ChainBuilder::new();
    let mut buf = Vec::with_capacity(1024);
    for tool in req.tool_defs() {
        json_field(&mut builder, &mut buf, b"", tool).end_segment();
    }
    let stable = stable_messages(req);
    for message in &req.messages[..stable] {
        message_segment(&mut builder, &mut buf, message);
    }
    builder.mark_stable();
    for message in &req.messages[stable..] {
        message_segment(&mut builder, &mut buf, message);
    }
    builder.finish()
}

/// One message of the prompt, always three fields: its role; its content,
/// text as it is (tagged `t`), parts as JSON (`p`) or none (`n`); and the
/// rest (name, tool calls, tool call id, extra fields) as JSON, empty when
/// there is none. Serialising whole messages cost about 1,400 instructions
/// per request of a short chat, most of it escaping text that is only
/// hashed.
fn message_segment(builder: &mut ChainBuilder, buf: &mut Vec<u8>, message: &Message) {
    // Every field named, so a field added to `Message` is a compile error
    // here until the chain takes it in.
    let Message {
        role,
        content,
        name,
        tool_calls,
        tool_call_id,
        extra,
    } = message;
    builder.field(&[role.as_str().as_bytes()]);
    match content {
        Some(Content::Text(text)) => builder.field(&[b"t", text.as_bytes()]),
        Some(Content::Parts(parts)) => json_field(builder, buf, b"p", parts),
        None => builder.field(&[b"n"]),
    };
    if name.is_some() || tool_calls.is_some() || tool_call_id.is_some() || !extra.is_empty() {
        json_field(builder, buf, b"", &(name, tool_calls, tool_call_id, extra));
    } else {
        builder.field(&[]);
    }
    builder.end_segment();
}

/// A field of `tag` then `value` as JSON.
fn json_field<'b, T: serde::Serialize>(
    builder: &'b mut ChainBuilder,
    buf: &mut Vec<u8>,
    tag: &[u8],
    value: &T,
) -> &'b mut ChainBuilder {
    buf.clear();
    // Our canonical types always serialise (string keys only).
    let _ = serde_json::to_writer(&mut *buf, value);
    builder.field(&[tag, buf])
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

    #[test]
    fn each_field_of_a_message_changes_its_segment() {
        let chain = |message: serde_json::Value| {
            chat_chain(&request(json!({"model": "m", "messages": [message]})))
        };
        let plain = chain(json!({"role": "user", "content": "hi"}));
        let others = [
            json!({"role": "assistant", "content": "hi"}),
            json!({"role": "user", "content": "hi!"}),
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            json!({"role": "user", "content": "hi", "name": "ann"}),
            json!({"role": "user", "content": "hi", "cache_control": {"type": "ephemeral"}}),
            json!({"role": "assistant", "content": null}),
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ]}),
            json!({"role": "user", "content": ""}),
            // Text that reads as the parts' JSON, or as a field's end and
            // the next field, is still text.
            json!({"role": "user", "content": "[{\"type\":\"text\",\"text\":\"hi\"}]"}),
            json!({"role": "user", "content": "hi\u{1f}[\"ann\",null,null,{}]"}),
        ];
        let mut seen = vec![plain.hashes()[0]];
        for message in others {
            let hash = chain(message.clone()).hashes()[0];
            assert!(!seen.contains(&hash), "{message} shares a segment");
            seen.push(hash);
        }
        // One message whose text holds a segment's end is not two messages.
        let one = chain(json!({"role": "user", "content": "x\u{1e}y"}));
        let two = chat_chain(&request(json!({"model": "m", "messages": [
            {"role": "user", "content": "x"}, {"role": "user", "content": "y"}
        ]})));
        assert_ne!(one, two);
    }
}
