use proptest::prelude::*;
use proptest::strategy::ValueTree;
use serde_json::{Value, json};

use super::chat_request_json;
use crate::openai::reader::tests::request::{COMMON, request};
use crate::types::{ChatRequest, Content, Message, Role};

/// The writer's bytes against serde_json's, for one request.
fn writes_as_serde_does(request: &ChatRequest) {
    let ours = chat_request_json(request).unwrap();
    let serde = serde_json::to_vec(request).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&ours),
        String::from_utf8_lossy(&serde)
    );
}

#[test]
fn common_requests_are_written_as_serde_writes_them() {
    for text in COMMON {
        writes_as_serde_does(&serde_json::from_str(text).unwrap());
    }
}

#[test]
fn every_field_set_is_written_as_serde_writes_it() {
    let text = json!({
        "model": "m\"\\\u{1}\u{7f}é川😀",
        "messages": [
            {"role": "system", "content": "a\nb\tc\rd\u{8}e\u{c}f\u{0}g\u{1f}"},
            {"role": "developer", "content": null, "name": "n\n", "x-vendor": [1, {"k": "v\n"}]},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "c\"", "content": [{"type": "text", "text": "t\n"}]},
            {"role": "function", "content": ""},
            {"role": "user", "content": "plain"}
        ],
        "stream": true,
        "stream_options": {"include_usage": true, "other": 1},
        "max_tokens": 4294967295u32,
        "max_completion_tokens": 0,
        "temperature": 0.30000000000000004,
        "n": 2,
        "seed": i64::MIN,
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "tool_choice": {"type": "function", "function": {"name": "f"}},
        "parallel_tool_calls": false,
        "response_format": {"type": "json_schema"},
        "logprobs": false,
        "top_logprobs": 5,
        "user": "u\u{2028}",
        "metadata": {"a": "b"},
        "top_p": 1e-7,
        "stop\n": ["\n\n"],
        "logit_bias": {"50256": -100}
    });
    let mut request: ChatRequest = serde_json::from_value(text).unwrap();
    writes_as_serde_does(&request);
    request.seed = Some(i64::MAX);
    request.temperature = Some(f64::NAN);
    writes_as_serde_does(&request);
    request.seed = Some(0);
    request.temperature = Some(-0.0);
    writes_as_serde_does(&request);
}

#[test]
fn every_ascii_character_is_escaped_as_serde_escapes_it() {
    for byte in 0u8..0x80 {
        let text = format!("a{}b{}", char::from(byte), char::from(byte));
        let mut request = ChatRequest {
            model: text.clone(),
            ..serde_json::from_str(COMMON[0]).unwrap()
        };
        request.messages = vec![Message::new(Role::User, Content::Text(text.clone()))];
        request.extra.insert(text.clone(), Value::String(text));
        writes_as_serde_does(&request);
    }
}

proptest! {
    #[test]
    fn any_text_is_written_as_serde_writes_it(
        model in "\\PC{0,20}|[\u{0}-\u{1f}\"\\\\a]{0,20}",
        content in "\\PC{0,40}|[\u{0}-\u{1f}\"\\\\a]{0,40}",
        name in prop::option::of("\\PC{0,9}|[\u{0}-\u{1f}\"\\\\]{0,9}"),
    ) {
        let mut request: ChatRequest = serde_json::from_str(COMMON[0]).unwrap();
        request.model = model;
        request.messages[1].content = Some(Content::Text(content));
        request.messages[1].name = name;
        writes_as_serde_does(&request);
    }
}

/// The reader tests' generated requests, those serde reads, written back.
#[test]
fn generated_requests_are_written_as_serde_writes_them() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let bodies = request();
    let mut written = 0;
    for _ in 0..4000 {
        let text = bodies.new_tree(&mut runner).unwrap().current();
        if let Ok(request) = serde_json::from_str::<ChatRequest>(&text) {
            writes_as_serde_does(&request);
            written += 1;
        }
    }
    assert!(written > 200, "{written} of 4,000 were requests");
}
