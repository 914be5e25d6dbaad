use super::*;
use crate::openai::reader;
use crate::types::{ChatResponse, Content};

/// The answer alone, as serde reads it.
fn read_answer(text: &str) -> Option<ChatResponse> {
    reader::read_answer(text).map(|(answer, _)| answer)
}

/// Answers as servers send them; every one must take the fast path.
const COMMON: &[&str] = &[
    // switchyard sim
    r#"{"id":"chatcmpl-sim0000000","object":"chat.completion","created":1796522359,"model":"auto","choices":[{"index":0,"message":{"role":"assistant","content":"[sim] will answer reply by cloud fast more simulated time reply data more can","refusal":null},"finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":24,"completion_tokens":16,"total_tokens":40,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"switchyard-sim","timings":{"cache_n":0,"prompt_n":24,"prompt_ms":1.0024000000000002,"predicted_n":16,"predicted_ms":0.753}}"#,
    // OpenAI, with its usage details and annotations
    r#"{
  "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
  "object": "chat.completion",
  "created": 1741570283,
  "model": "gpt-4o-2024-08-06",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "The image shows a wooden boardwalk path.\n\"Quoted\" and / slashed",
        "refusal": null,
        "annotations": []
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 1117,
    "completion_tokens": 46,
    "total_tokens": 1163,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_fc9f1d7035"
}"#,
    // OpenAI, a tool call
    r#"{"id":"chatcmpl-abc","object":"chat.completion","created":1699896916,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}}"#,
    // vLLM, with reasoning and its own fields
    r#"{"id":"chatcmpl-9a","object":"chat.completion","created":1733000000,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"message":{"role":"assistant","reasoning_content":"Rivers run — 川.","content":"To the sea.","tool_calls":[]},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":20,"total_tokens":30,"completion_tokens":10,"prompt_tokens_details":null},"prompt_logprobs":null,"kv_transfer_params":null}"#,
    // llama.cpp's server
    r#"{"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"The sea."}}],"created":1733000000,"model":"qwen2.5-0.5b","system_fingerprint":"b4000-1","object":"chat.completion","usage":{"completion_tokens":3,"prompt_tokens":12,"total_tokens":15},"id":"chatcmpl-xy","timings":{"prompt_n":12,"prompt_ms":10.5,"prompt_per_token_ms":0.875,"prompt_per_second":1142.857142857143,"predicted_n":3,"predicted_ms":20.1,"predicted_per_token_ms":6.7,"predicted_per_second":149.2537313432836}}"#,
    // content as parts, logprobs, a name
    r#"{"id":"x","choices":[{"message":{"role":"assistant","name":"n","content":[{"type":"text","text":"hi"}]},"logprobs":{"content":[{"token":"hi","logprob":-0.1}]}}]}"#,
];

#[test]
fn common_answers_take_the_fast_path_and_read_as_serde_reads_them() {
    read_as_serde_does(read_answer, COMMON);
    let answer = read_answer(COMMON[0]).unwrap();
    assert_eq!(answer.usage.as_ref().map(|u| u.completion_tokens), Some(16));
    assert!(answer.timings.is_some());
    read_as_serde_does(
        read_answer,
        &[
            r#"{"id":"x","choices":[],"timings":{"cache_n":null,"prompt_n":"7","draft_n":{"a":[]},"x":-1.5}}"#,
        ],
    );
    let parts = read_answer(COMMON[5]).unwrap();
    assert!(matches!(
        parts.choices[0].message.content,
        Some(Content::Parts(_))
    ));
}

#[test]
fn it_says_whether_every_choice_had_a_logprobs_key() {
    let keys = |text: &str| reader::read_answer(text).map(|(_, keys)| keys);
    assert_eq!(keys(COMMON[0]), Some(true));
    assert_eq!(keys(COMMON[4]), Some(false));
    assert_eq!(keys(COMMON[5]), Some(true));
    let one_of_two = r#"{"id":"x","choices":[{"message":{"role":"assistant"},"logprobs":null},{"message":{"role":"assistant","content":"logprobs","logprobs":null}}]}"#;
    assert_eq!(keys(one_of_two), Some(false));
    assert_eq!(keys(r#"{"id":"x","choices":[]}"#), Some(true));
}

#[test]
fn what_it_cannot_read_as_serde_does_it_declines() {
    let declined = [
        r#"{"id":"x","choices":[{"message":{"role":"assistant","content":"\ud800"}}]}"#,
        r#"{"id":"x","choices":[{"message":{"content":"no role"}}]}"#,
        r#"{"id":"x","choices":[{"index":0}]}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":null}}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1.0}}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1,"prompt_tokens":2}}"#,
        r#"{"id":"x","choices":[],"timings":{"prompt_ms":"#,
        r#"{"id":"x","choices":[],"timings":{"cache_n":null,"cache_n":1}}"#,
        // a field twice, at each level, the first time null where it may be
        r#"{"id":"x","model":"a","choices":[],"model":"a"}"#,
        r#"{"id":"x","choices":[{"message":{"role":"assistant"},"finish_reason":null,"finish_reason":"stop"}]}"#,
        r#"{"id":"x","choices":[{"message":{"role":"assistant","content":null,"content":"a"}}]}"#,
        r#"{"id":"x","choices":[{"message":{"role":"assistant","tool_calls":null,"tool_calls":[]}}]}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":null,"cached_tokens":1}}}"#,
        r#"{"id":"x","choices":[],"usage":{"prompt_tokens_details":null,"prompt_tokens_details":{}}}"#,
        r#"{"id":"x","choices":[],"usage":null,"usage":null}"#,
        r#"{"id":"x"}"#,
        r#"{"error":{"message":"overloaded","code":529}}"#,
    ];
    for text in declined {
        assert!(read_answer(text).is_none(), "{text}");
    }
}

#[test]
fn every_one_byte_change_of_a_common_answer_is_declined_or_read_as_serde_reads_it() {
    one_byte_changes_agree::<ChatResponse>(read_answer, COMMON);
}

#[test]
fn generated_answers_are_declined_or_read_as_serde_reads_them() {
    generated_agree(read_answer, answer());
}

fn answer() -> impl Strategy<Value = String> {
    let role = prop_oneof![
        6 => Just("\"assistant\"".to_string()),
        1 => Just("\"robot\"".to_string()),
        1 => Just("null".to_string())
    ]
    .boxed();
    let parts = Just(r#"[{"type":"text","text":"a"}]"#.to_string()).boxed();
    let calls = Just(
        r#"[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]"#.to_string(),
    )
    .boxed();
    let message = object(vec![
        member("role", role),
        member(
            "content",
            prop_oneof![3 => text(), 1 => null(), 1 => parts].boxed(),
        ),
        member("refusal", null()),
        member("tool_calls", calls),
        member("name", text()),
    ]);
    let choice = object(vec![
        member("index", unsigned()),
        member("message", message),
        member("finish_reason", text()),
        member(
            "logprobs",
            prop_oneof![3 => null(), 1 => Just(r#"{"content":[]}"#.to_string()).boxed()].boxed(),
        ),
    ]);
    let choices = prop::collection::vec(choice, 0..3)
        .prop_map(|c| format!("[{}]", c.join(",")))
        .boxed();
    let details = object(vec![
        member("cached_tokens", prop_oneof![unsigned(), null()].boxed()),
        member("audio_tokens", unsigned()),
    ]);
    let usage = object(vec![
        member("prompt_tokens", unsigned()),
        member("completion_tokens", unsigned()),
        member("total_tokens", unsigned()),
        member("prompt_tokens_details", details.clone()),
        member("completion_tokens_details", details),
    ]);
    let timings = object(vec![
        member("cache_n", prop_oneof![null(), unsigned()].boxed()),
        member(
            "draft_n",
            prop_oneof![text(), Just("{}".to_string()).boxed()].boxed(),
        ),
        member("prompt_n", unsigned()),
        member("prompt_ms", Just("1.0024000000000002".to_string()).boxed()),
        member("predicted_per_second", Just("-2.5e-3".to_string()).boxed()),
    ]);
    let rest = object(vec![
        member("object", text()),
        member("created", unsigned()),
        member("model", text()),
        member("choices", choices),
        member("usage", prop_oneof![3 => usage, 1 => null()].boxed()),
        member("system_fingerprint", text()),
        member("timings", timings),
        member("service_tier", text()),
        member("kv", Just(r#"{"a":[1,"]"]}"#.to_string()).boxed()),
    ]);
    body(member("id", text()), rest)
}
