//! Every parser that reads outside input, fed arbitrary bytes and arbitrary
//! JSON: request bodies in each dialect and their translations, the
//! upstream SSE parser, Anthropic stream events, llama.cpp timings. None
//! may panic, whatever it is given (an error is a fine answer). A stable
//! stand-in for a fuzzer: proptest, a few hundred cases a run in CI.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use proptest::prelude::*;
use serde_json::{Map, Value};
use switchyard_adapters::anthropic::{
    EventsToChunks, MessagesRequest, chat_from_messages, messages_from_chat,
};
use switchyard_adapters::json::from_bytes;
use switchyard_adapters::responses::chat_from_responses;
use switchyard_adapters::sse::SseParser;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{ChatRequest, CompletionRequest, EmbeddingRequest, Timings};

/// Any JSON value, nested a few levels, with the field names the dialects
/// use among random ones, so parsers get past their first checks.
fn json() -> impl Strategy<Value = Value> {
    let names = prop_oneof![
        Just("model".to_owned()),
        Just("messages".to_owned()),
        Just("role".to_owned()),
        Just("content".to_owned()),
        Just("type".to_owned()),
        Just("text".to_owned()),
        Just("tools".to_owned()),
        Just("input".to_owned()),
        Just("tool_calls".to_owned()),
        Just("max_tokens".to_owned()),
        Just("system".to_owned()),
        Just("thinking".to_owned()),
        "[a-z_]{1,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop_oneof![
            Just("user".to_owned()),
            Just("assistant".to_owned()),
            Just("tool_use".to_owned()),
            Just("tool_result".to_owned()),
            ".{0,12}"
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((names.clone(), inner), 0..6)
                .prop_map(|fields| Value::Object(fields.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn request_bodies_of_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(chat) = from_bytes::<ChatRequest>(&bytes) {
            let _ = tokens::estimate_chat_prompt(&chat);
            let _ = messages_from_chat(chat);
        }
        let _ = from_bytes::<CompletionRequest>(&bytes);
        let _ = from_bytes::<EmbeddingRequest>(&bytes).map(|e| e.texts());
        if let Ok(messages) = from_bytes::<MessagesRequest>(&bytes) {
            let _ = chat_from_messages(messages);
        }
        if let Ok(value) = from_bytes::<Value>(&bytes) {
            let _ = chat_from_responses(&value);
        }
    }

    #[test]
    fn request_bodies_of_any_json(value in json()) {
        if let Ok(chat) = serde_json::from_value::<ChatRequest>(value.clone()) {
            let _ = tokens::estimate_chat_prompt(&chat);
            let _ = tokens::count_chat_prompt(&chat);
            let _ = messages_from_chat(chat);
        }
        if let Ok(messages) = serde_json::from_value::<MessagesRequest>(value.clone())
            && let Ok(chat) = chat_from_messages(messages)
        {
            let _ = messages_from_chat(chat);
        }
        if let Ok(chat) = chat_from_responses(&value) {
            let _ = tokens::estimate_chat_prompt(&chat);
        }
        if let Ok(timings) = serde_json::from_value::<Timings>(value) {
            let _ = (timings.prompt_rate(), timings.predicted_rate(), timings.drafts());
        }
    }

    #[test]
    fn upstream_streams_of_any_bytes(chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..64), 0..16)) {
        let mut parser = SseParser::new();
        let mut fed = 0;
        for chunk in &chunks {
            fed += chunk.len();
            let _ = parser.feed(chunk);
            prop_assert!(parser.pending_bytes() <= fed);
        }
    }

    #[test]
    fn anthropic_events_of_any_json(events in prop::collection::vec((prop_oneof![
        Just("message_start"), Just("content_block_start"), Just("content_block_delta"),
        Just("content_block_stop"), Just("message_delta"), Just("message_stop"), Just("error"), Just("ping"),
    ], json()), 0..12)) {
        let mut decoder = EventsToChunks::default();
        for (name, data) in &events {
            let _ = decoder.on_event(Some(name), data);
        }
    }
}
