use super::*;
use crate::openai::reader::read_chunk;
use crate::types::Role;

/// Chunks as servers send them; every one must take the fast path.
const COMMON: &[&str] = &[
    // switchyard sim
    r#"{"id":"chatcmpl-sim0000000","object":"chat.completion.chunk","created":1796522359,"model":"auto","choices":[{"index":0,"delta":{"content":" river"},"finish_reason":null,"logprobs":null}],"usage":null}"#,
    // OpenAI: role first, with refusal, service tier and obfuscation
    r#"{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727106000,"model":"gpt-4o-mini-2024-07-18","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"a1B2"}"#,
    // OpenAI: the last choice chunk
    r#"{"id":"chatcmpl-B9","object":"chat.completion.chunk","created":1727106000,"model":"gpt-4o-mini","system_fingerprint":null,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
    // vLLM, with reasoning, escapes and multi-byte text
    r#"{"id":"chatcmpl-7f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning_content":"Let me think: \"sea\"\n"},"logprobs":null,"finish_reason":null}]}"#,
    r#"{"id":"chatcmpl-7f","object":"chat.completion.chunk","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Fluss — río, 川\t\\ /"},"logprobs":null,"finish_reason":null,"stop_reason":null}]}"#,
    // llama.cpp's server
    r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" sea"}}],"created":1733000000,"id":"chatcmpl-ab","model":"qwen2.5-0.5b","system_fingerprint":"b4000-1","object":"chat.completion.chunk"}"#,
    // spaces between tokens, no choices
    "{ \"id\" : \"x\" ,\n \"choices\" : [ ] , \"usage\" : null }",
];

#[test]
fn common_chunks_take_the_fast_path_and_read_as_serde_reads_them() {
    read_as_serde_does(read_chunk, COMMON);
    let chunk = read_chunk(COMMON[1]).unwrap();
    assert!(chunk.spec_fields_sent && chunk.usage_sent && chunk.choices[0].spec_fields_sent);
    assert_eq!(chunk.extra.len(), 2);
    assert_eq!(chunk.choices[0].delta.role, Some(Role::Assistant));
    let spaced = read_chunk(COMMON[6]).unwrap();
    assert!(!spaced.spec_fields_sent);
    assert_eq!(spaced.object, "chat.completion.chunk");
}

#[test]
fn values_it_does_not_model_are_read_by_serde_alone() {
    read_as_serde_does(
        read_chunk,
        &[
            r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
            r#"{"id":"x","choices":[],"timings":{"prompt_n":1,"prompt_ms":1.0024000000000002}}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\": [1, \"]\"]}"}}]}}]}"#,
            r#"{"id":"x","choices":[{"index":0,"delta":{},"logprobs":{"content":[]}}]}"#,
            r#"{"id":"x","choices":[],"extra":{"a":[1,{"b":"}"}]},"n":-1,"f":1.5e3,"s":"\u00e9"}"#,
            r#"{"id":"\u00e9\ud83d\ude00","choices":[]}"#,
        ],
    );
}

#[test]
fn what_it_cannot_read_as_serde_does_it_declines() {
    let declined = [
        // a key with an escape
        r#"{"i\u0064":"x","choices":[]}"#,
        r#"{"\"":"x","id":"x"}"#,
        // malformed, or not what serde reads
        r#"{"id":"x","id":"y"}"#,
        r#"{"id":"x","choices":[{"delta":{"content":null,"content":"a"}}]}"#,
        r#"{"id":"x","choices":[{"logprobs":null,"logprobs":null}]}"#,
        r#"{"id":"x","choices":[{"delta":{"role":null,"role":"assistant"}}]}"#,
        r#"{"id":"x","usage":null,"usage":null}"#,
        r#"{"id":"x","created":01}"#,
        r#"{"id":"x","created":null}"#,
        r#"{"id":"x","choices":[{"index":4294967296}]}"#,
        r#"{"id":"x","choices":[{"delta":{"role":"robot"}}]}"#,
        r#"{"id":"x","extra":{"a":1]}"#,
        r#"{"id":"x","extra":[1,2}"#,
        r#"{"id":"x","extra":"a\"#,
        r#"{"id":"x",}"#,
        r#"{"id":"x"} x"#,
        "{\"id\":\"a\u{1}b\"}",
        r#"{"choices":[]}"#,
        "",
    ];
    for text in declined {
        assert!(read_chunk(text).is_none(), "{text}");
    }
}

#[test]
fn values_nested_near_serdes_limit_are_declined_or_read_as_serde_reads_them() {
    for depth in [99, 100, 101, 120, 122, 123, 124, 125, 126, 127, 128] {
        let text = format!(
            r#"{{"id":"x","choices":[{{"delta":{{"x":{}1{}}}}}]}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        agrees(read_chunk, &text).unwrap();
        assert_eq!(read_chunk(&text).is_some(), depth <= 100, "{depth}");
    }
}

#[test]
fn every_one_byte_change_of_a_common_chunk_is_declined_or_read_as_serde_reads_it() {
    one_byte_changes_agree(read_chunk, COMMON);
}

#[test]
fn generated_chunks_are_declined_or_read_as_serde_reads_them() {
    generated_agree(read_chunk, chunk());
}

fn chunk() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        Just("\"assistant\"".to_string()),
        Just("\"tool\"".to_string()),
        Just("null".to_string())
    ]
    .boxed();
    let delta = object(vec![
        member("role", role),
        member("content", prop_oneof![3 => text(), 1 => null()].boxed()),
        member(
            "tool_calls",
            prop_oneof![3 => null(), 1 => Just(r#"[{"index":0,"function":{"arguments":"{"}}]"#.to_string())].boxed(),
        ),
        member("refusal", null()),
        member("reasoning_content", text()),
    ]);
    let choice = object(vec![
        member("index", unsigned()),
        member("delta", delta),
        member("finish_reason", prop_oneof![text(), null()].boxed()),
        member("logprobs", null()),
        member("stop_reason", null()),
    ]);
    let choices = prop::collection::vec(choice, 0..3)
        .prop_map(|c| format!("[{}]", c.join(",")))
        .boxed();
    let rest = object(vec![
        member("object", text()),
        member("created", unsigned()),
        member("model", text()),
        member("choices", choices.clone()),
        member("choices", choices),
        member(
            "usage",
            prop_oneof![3 => null(), 1 => Just(r#"{"prompt_tokens":1,"completion_tokens":2}"#.to_string())].boxed(),
        ),
        member("system_fingerprint", text()),
        member("timings", prop_oneof![null(), Just(r#"{"prompt_ms":0.1}"#.to_string())].boxed()),
        member("obfuscation", text()),
        member("seq", unsigned()),
    ]);
    body(member("id", text()), rest)
}
