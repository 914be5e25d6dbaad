use proptest::prelude::*;
use proptest::strategy::ValueTree;

use super::*;

/// What serde reads from `text`, the reference this reader must match.
fn by_serde(text: &str) -> Result<ChatChunk, serde_json::Error> {
    serde_json::from_str(text)
}

/// The reader either declines `text` or reads exactly what serde reads.
fn agrees(text: &str) -> Result<(), String> {
    match (read(text), by_serde(text)) {
        (None, _) => Ok(()),
        (Some(fast), Ok(slow)) if fast == slow => Ok(()),
        (Some(fast), Ok(slow)) => Err(format!("{text}\nread {fast:?}\nserde {slow:?}")),
        (Some(fast), Err(err)) => Err(format!("{text}\nread {fast:?}\nserde refused: {err}")),
    }
}

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
    for text in COMMON {
        let fast = read(text).unwrap_or_else(|| panic!("declined: {text}"));
        assert_eq!(fast, by_serde(text).unwrap(), "{text}");
    }
    let chunk = read(COMMON[1]).unwrap();
    assert!(chunk.spec_fields_sent && chunk.usage_sent && chunk.choices[0].spec_fields_sent);
    assert_eq!(chunk.extra.len(), 2);
    assert_eq!(chunk.choices[0].delta.role, Some(Role::Assistant));
    let spaced = read(COMMON[6]).unwrap();
    assert!(!spaced.spec_fields_sent);
    assert_eq!(spaced.object, "chat.completion.chunk");
}

#[test]
fn what_it_does_not_take_it_declines() {
    let declined = [
        // usage, timings, tool calls and log-probabilities as objects
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
        r#"{"id":"x","choices":[],"timings":{"prompt_n":1}}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}"#,
        r#"{"id":"x","choices":[{"index":0,"delta":{},"logprobs":{"content":[]}}]}"#,
        // \u escapes, in a value or a key
        r#"{"id":"\u00e9","choices":[]}"#,
        r#"{"i\u0064":"x","choices":[]}"#,
        // unknown fields that are not plain values
        r#"{"id":"x","choices":[],"extra":{"a":1}}"#,
        r#"{"id":"x","choices":[],"extra":-1}"#,
        r#"{"id":"x","choices":[],"extra":1.5}"#,
        // malformed, or not what serde reads
        r#"{"id":"x","id":"y"}"#,
        r#"{"id":"x","created":01}"#,
        r#"{"id":"x","created":null}"#,
        r#"{"id":"x","choices":[{"index":4294967296}]}"#,
        r#"{"id":"x","choices":[{"delta":{"role":"robot"}}]}"#,
        r#"{"id":"x",}"#,
        r#"{"id":"x"} x"#,
        "{\"id\":\"a\u{1}b\"}",
        r#"{"choices":[]}"#,
        "",
    ];
    for text in declined {
        assert!(read(text).is_none(), "{text}");
    }
}

#[test]
fn every_one_byte_change_of_a_common_chunk_is_declined_or_read_as_serde_reads_it() {
    for text in COMMON {
        for at in 0..text.len() {
            if !text.is_char_boundary(at) {
                continue;
            }
            let mut cut = text.to_string();
            cut.remove(at);
            agrees(&cut).unwrap();
            for put in [
                '"', '\\', ',', '}', ']', '0', '9', ' ', 'n', '\u{1}', '-', '.',
            ] {
                let mut changed = text.to_string();
                changed.insert(at, put);
                agrees(&changed).unwrap();
            }
        }
    }
}

/// JSON values of every kind, some of them not JSON.
fn any_value() -> BoxedStrategy<String> {
    prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        Just("nul".to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        Just("18446744073709551616".to_string()),
        Just("4294967296".to_string()),
        Just("-3".to_string()),
        Just("007".to_string()),
        Just("2.5".to_string()),
        Just("1e3".to_string()),
        text(),
        "[a-z\\\\\"nrtbfu0-9]{0,6}".prop_map(|s| format!("\"{s}\"")),
        Just("\"robot\"".to_string()),
        Just("{}".to_string()),
        Just("[]".to_string()),
        Just("{\"a\":1}".to_string()),
    ]
    .boxed()
}

/// A JSON string, with escapes now and then.
fn text() -> BoxedStrategy<String> {
    prop_oneof![
        4 => "[a-z é川—/]{0,8}",
        1 => "[a-z\\\\\"/\n\t\u{1}]{0,6}".prop_map(|s| s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n").replace('\t', "\\t")),
        1 => "[a-z\\\\\"]{0,6}",
    ]
    .prop_map(|s| format!("\"{s}\""))
    .boxed()
}

fn null() -> BoxedStrategy<String> {
    Just("null".to_string()).boxed()
}

fn unsigned() -> BoxedStrategy<String> {
    prop_oneof![
        (0u64..5).prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| n.to_string())
    ]
    .boxed()
}

/// A member `"key": value`, whose value is mostly of the key's kind and
/// now and then anything.
fn member(key: &'static str, value: BoxedStrategy<String>) -> BoxedStrategy<String> {
    (prop_oneof![8 => value, 1 => any_value()], space(), space())
        .prop_map(move |(value, before, after)| {
            format!("{before}\"{key}\"{after}:{before}{value}{after}")
        })
        .boxed()
}

fn space() -> impl Strategy<Value = &'static str> {
    prop_oneof![8 => Just(""), 2 => Just(" "), 1 => Just("\n\t\r"), 1 => Just("\u{b}")]
}

/// An object of some of `members`, in any order, a member sometimes twice.
fn object(members: Vec<BoxedStrategy<String>>) -> BoxedStrategy<String> {
    let count = members.len();
    (
        prop::collection::vec(prop::strategy::Union::new(members), 0..count + 1),
        prop_oneof![20 => Just(","), 1 => Just(",,")],
    )
        .prop_map(|(members, comma)| format!("{{{}}}", members.join(comma)))
        .boxed()
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
        member("content", text()),
        member("content", null()),
        member("tool_calls", null()),
        member("refusal", null()),
        member("reasoning_content", text()),
    ]);
    let choice = object(vec![
        member("index", unsigned()),
        member("delta", delta.clone()),
        member("delta", delta),
        member("finish_reason", text()),
        member("finish_reason", null()),
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
        member("usage", null()),
        member("system_fingerprint", text()),
        member("timings", null()),
        member("obfuscation", text()),
        member("seq", unsigned()),
    ]);
    (
        member("id", text()),
        rest,
        prop_oneof![8 => Just(""), 1 => Just(" \n"), 1 => Just("}"), 1 => Just(" x")],
    )
        .prop_map(|(id, rest, tail)| {
            // The id first, or last when the rest has members.
            let inner = &rest[1..rest.len() - 1];
            if inner.is_empty() {
                format!("{{{id}}}{tail}")
            } else if id.len() % 2 == 0 {
                format!("{{{id},{inner}}}{tail}")
            } else {
                format!("{{{inner},{id}}}{tail}")
            }
        })
}

#[test]
fn generated_chunks_are_declined_or_read_as_serde_reads_them() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let (mut read_fast, mut valid) = (0, 0);
    for _ in 0..4000 {
        let text = chunk().new_tree(&mut runner).unwrap().current();
        agrees(&text).unwrap();
        read_fast += usize::from(read(&text).is_some());
        valid += usize::from(by_serde(&text).is_ok());
    }
    // Generated often enough both ways for the comparison to mean something.
    assert!(
        read_fast > 200 && valid > read_fast,
        "{read_fast} read, {valid} valid"
    );
    println!("{read_fast} read fast of {valid} valid");
}

proptest! {
    #[test]
    fn a_string_stops_where_a_byte_by_byte_search_stops(
        bytes in prop::collection::vec(prop_oneof![Just(b'"'), Just(b'\\'), 0u8..0x22, 0x1fu8..=0xff, 0x7eu8..=0x81], 0..40)
    ) {
        let slow = bytes.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20);
        prop_assert_eq!(string_stop(&bytes), slow);
    }
}
