use super::*;
use crate::openai::reader::read_chat_request;
use crate::types::ChatRequest;

/// Requests as clients send them; every one must take the fast path.
pub(crate) const COMMON: &[&str] = &[
    // the overhead benchmark's
    r#"{"model": "auto", "stream": false, "max_tokens": 16, "temperature": 0.7, "messages": [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Say something short about rivers and the sea."}]}"#,
    // the OpenAI SDK's, streamed, with usage asked for and a tool round trip
    r#"{"messages":[{"role":"user","content":"Weather in Boston?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Boston\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"22 C"}],"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"tool_choice":"auto","parallel_tool_calls":false}"#,
    // content parts, settings left to `extra`, nulls
    r#"{"model":"local","messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}],"name":"ann"}],"top_p":0.9,"stop":["\n\n"],"max_completion_tokens":64,"seed":-7,"n":1,"user":"u-1","metadata":{"run":"a"},"response_format":{"type":"json_object"},"logprobs":true,"top_logprobs":2,"max_tokens":null,"stream":null}"#,
];

#[test]
fn common_requests_take_the_fast_path_and_read_as_serde_reads_them() {
    read_as_serde_does(read_chat_request, COMMON);
    let request = read_chat_request(COMMON[0]).unwrap();
    assert_eq!(
        (request.max_tokens, request.temperature),
        (Some(16), Some(0.7))
    );
    assert!(read_chat_request(COMMON[1]).unwrap().wants_stream_usage());
}

#[test]
fn what_serde_refuses_it_declines() {
    let refused = [
        r#"{"messages":[]}"#,
        r#"{"model":"m"}"#,
        r#"{"model":null,"messages":[]}"#,
        // a field twice, the first time null where it may be
        r#"{"model":"m","messages":[],"model":"m"}"#,
        r#"{"model":"m","messages":[],"stream":null,"stream":true}"#,
        r#"{"model":"m","messages":[],"temperature":null,"temperature":1}"#,
        r#"{"model":"m","messages":[],"tools":null,"tools":[]}"#,
        r#"{"model":"m","messages":[{"role":"user","name":null,"name":"a"}]}"#,
        r#"{"model":"m","messages":[],"max_tokens":-1}"#,
        r#"{"model":"m","messages":[],"max_tokens":4294967296}"#,
        r#"{"model":"m","messages":[],"max_tokens":16.0}"#,
        r#"{"model":"m","messages":[],"stream":"yes"}"#,
        r#"{"model":"m","messages":[],"temperature":"hot"}"#,
        r#"{"model":"m","messages":[{"role":"user","content":"a"},]}"#,
        r#"{"model":"m","messages":[{"content":"no role"}]}"#,
        r#"{"model":"m","messages":[{"role":"user","content":{}}]}"#,
        "",
        " ",
        "[]",
    ];
    for text in refused {
        assert!(serde_json::from_str::<ChatRequest>(text).is_err(), "{text}");
        assert!(read_chat_request(text).is_none(), "{text}");
    }
    // serde reads a key with an escape (here, a second `model`), the
    // reader leaves it to serde.
    let escaped = r#"{"mod\u0065l":"a","messages":[]}"#;
    assert!(serde_json::from_str::<ChatRequest>(escaped).is_ok());
    assert!(read_chat_request(escaped).is_none());
}

#[test]
fn a_long_request_with_tools_is_left_to_serde() {
    let schema = r#"{"type":"object","properties":{"city":{"type":"string"}}}"#;
    let tools: Vec<String> = (0..40)
        .map(|i| {
            format!(r#"{{"type":"function","function":{{"name":"f{i}","parameters":{schema}}}}}"#)
        })
        .collect();
    let long = format!(
        r#"{{"model":"m","messages":[],"tools":[{}]}}"#,
        tools.join(",")
    );
    assert!(long.len() > 2048);
    assert!(serde_json::from_str::<ChatRequest>(&long).is_ok());
    assert!(crate::json::chat_request(long.as_bytes()).is_none());
    let short = format!(r#"{{"model":"m","messages":[],"tools":[{}]}}"#, tools[0]);
    assert!(crate::json::chat_request(short.as_bytes()).is_some());
}

#[test]
fn every_one_byte_change_of_a_common_request_is_declined_or_read_as_serde_reads_it() {
    one_byte_changes_agree::<ChatRequest>(read_chat_request, COMMON);
}

#[test]
fn generated_requests_are_declined_or_read_as_serde_reads_them() {
    generated_agree(read_chat_request, request());
}

pub(crate) fn request() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        6 => Just("\"user\"".to_string()),
        2 => Just("\"system\"".to_string()),
        1 => Just("\"robot\"".to_string()),
        1 => Just("null".to_string())
    ]
    .boxed();
    let parts = Just(r#"[{"type":"text","text":"a"}]"#.to_string()).boxed();
    let message = object(vec![
        member("role", role),
        member(
            "content",
            prop_oneof![4 => text(), 1 => null(), 1 => parts].boxed(),
        ),
        member("name", text()),
    ]);
    let messages = prop::collection::vec(message, 0..3)
        .prop_map(|m| format!("[{}]", m.join(",")))
        .boxed();
    let boolean = prop_oneof![Just("true".to_string()), Just("false".to_string()), null()].boxed();
    let number = prop_oneof![
        unsigned(),
        Just("0.7".to_string()),
        Just("1e400".to_string()),
        Just("-1".to_string()),
        null()
    ]
    .boxed();
    // Mostly what the field takes, now and then any number.
    let or_number =
        |usual: BoxedStrategy<String>| prop_oneof![6 => usual, 1 => number.clone()].boxed();
    let limit = (0u32..5000).prop_map(|n| n.to_string()).boxed();
    let rest = object(vec![
        member("stream", boolean.clone()),
        member("max_tokens", or_number(limit.clone())),
        member("max_completion_tokens", or_number(limit)),
        member("temperature", or_number(Just("0.7".to_string()).boxed())),
        member(
            "seed",
            or_number((-5i64..5).prop_map(|n| n.to_string()).boxed()),
        ),
        member("n", or_number(Just("1".to_string()).boxed())),
        member("logprobs", boolean.clone()),
        member(
            "stream_options",
            Just(r#"{"include_usage":true}"#.to_string()).boxed(),
        ),
        member("tool_choice", text()),
        member("top_p", Just("0.95".to_string()).boxed()),
        member("user", text()),
        member(
            "tools",
            Just(
                r#"[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]"#
                    .to_string(),
            )
            .boxed(),
        ),
        member(
            "response_format",
            Just(r#"{"type":"json_object"}"#.to_string()).boxed(),
        ),
        member(
            "metadata",
            prop_oneof![Just(r#"{"a":"b"}"#.to_string()), null()].boxed(),
        ),
        member("parallel_tool_calls", boolean.clone()),
        member("top_logprobs", or_number(Just("2".to_string()).boxed())),
    ]);
    let required = (member("model", text()), member("messages", messages))
        .prop_map(|(model, messages)| format!("{model},{messages}"))
        .boxed();
    body(required, rest)
}
