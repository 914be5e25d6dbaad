//! Property tests: chat requests, responses and streams survive OpenAI ->
//! Anthropic -> OpenAI with nothing lost. Failures found are pinned below as
//! regression cases.

use std::sync::Arc;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;
use crate::types::{
    ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice, Content, Delta, FunctionCall,
    FunctionCallDelta, FunctionDef, Message, Role, Tool, ToolCall, ToolCallDelta, Usage,
    UsageDetails,
};

fn text_message(role: Role, text: &str) -> Message {
    Message::new(role, Content::Text(text.into()))
}

fn call(id: &str, name: &str, args: &Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        kind: "function".into(),
        function: FunctionCall {
            name: name.into(),
            arguments: args.to_string(),
            extra: Default::default(),
        },
        extra: Default::default(),
    }
}

/// Printable text without the empty string (an empty text block has no meaning).
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 ,.!?'\"{}\\[\\]:\\\\é中]{1,40}"
}

fn args() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            text().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from)
        ],
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// A conversation: system, then turns of user text, assistant text or
/// tool calls, and tool results answering those calls.
fn chat_request() -> impl Strategy<Value = ChatRequest> {
    let turn = prop_oneof![
        text().prop_map(|t| vec![text_message(Role::User, &t)]),
        (text(), "[a-z_]{1,10}", args()).prop_map(|(t, name, a)| {
            let mut assistant = text_message(Role::Assistant, &t);
            assistant.tool_calls = Some(vec![call("call_1", &name, &a)]);
            let mut result = text_message(Role::Tool, "done");
            result.tool_call_id = Some("call_1".into());
            vec![assistant, result, text_message(Role::User, "and then?")]
        }),
    ];
    (
        text(),
        prop::collection::vec(turn, 1..4),
        1u32..4096,
        prop::option::of(0.0f64..2.0),
        prop::bool::ANY,
    )
        .prop_map(
            |(system, turns, max_tokens, temperature, with_tools)| ChatRequest {
                model: "m".into(),
                messages: std::iter::once(text_message(Role::System, &system))
                    .chain(turns.into_iter().flatten())
                    .collect(),
                stream: None,
                stream_options: None,
                max_tokens: Some(max_tokens),
                max_completion_tokens: None,
                temperature,
                n: None,
                seed: None,
                tools: with_tools.then(|| {
                    Arc::new(vec![Tool {
                        kind: "function".into(),
                        function: FunctionDef {
                            name: "lookup".into(),
                            description: Some("look it up".into()),
                            parameters: Some(
                                json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                            ),
                            extra: Default::default(),
                        },
                        extra: Default::default(),
                    }])
                }),
                tool_choice: None,
                parallel_tool_calls: None,
                response_format: None,
                logprobs: None,
                top_logprobs: None,
                user: None,
                metadata: None,
                extra: Default::default(),
                forward_headers: Vec::new(),
                echo: None,
            },
        )
}

/// What a request means, independent of how either dialect writes it.
fn meaning(req: &ChatRequest) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            let calls: Vec<Value> = m
                .tool_calls
                .iter()
                .flatten()
                .map(|c| {
                    json!([
                        c.id,
                        c.function.name,
                        serde_json::from_str::<Value>(&c.function.arguments).unwrap()
                    ])
                })
                .collect();
            json!({"role": m.role, "text": m.text(), "calls": calls, "answers": m.tool_call_id})
        })
        .collect();
    let tools: Vec<Value> = req
        .tool_defs()
        .iter()
        .map(|t| {
            json!([
                t.function.name,
                t.function.description,
                t.function.parameters
            ])
        })
        .collect();
    json!({"messages": messages, "tools": tools, "max_tokens": req.max_tokens, "temperature": req.temperature})
}

fn response(
    text: String,
    calls: Vec<(String, Value)>,
    finish: &str,
    prompt: u64,
    completion: u64,
    cached: u64,
) -> ChatResponse {
    ChatResponse {
        id: "r".into(),
        object: "chat.completion".into(),
        created: 0,
        model: "m".into(),
        choices: vec![Choice {
            index: 0,
            message: Message {
                content: Some(Content::Text(text)),
                tool_calls: (!calls.is_empty()).then(|| {
                    calls
                        .iter()
                        .enumerate()
                        .map(|(i, (n, a))| call(&format!("call_{i}"), n, a))
                        .collect()
                }),
                ..text_message(Role::Assistant, "")
            },
            finish_reason: Some(finish.into()),
            logprobs: None,
            extra: Default::default(),
        }],
        usage: Some(Usage {
            prompt_tokens_details: Some(UsageDetails {
                cached_tokens: Some(cached),
                ..UsageDetails::default()
            }),
            ..Usage::new(prompt, completion)
        }),
        system_fingerprint: None,
        timings: None,
        extra: Default::default(),
        verbatim: None,
    }
}

/// A response as the chunks a server would stream: text in pieces, each
/// tool call's arguments in fragments of `step` characters, then finish and usage.
fn chunks_of(resp: &ChatResponse, step: usize) -> Vec<ChatChunk> {
    let choice = &resp.choices[0];
    let chunk = |delta: Delta, finish: Option<String>| ChatChunk {
        id: "c".into(),
        object: "chat.completion.chunk".into(),
        created: 0,
        model: "m".into(),
        choices: vec![ChunkChoice {
            index: 0,
            delta,
            finish_reason: finish,
            logprobs: None,
            extra: Default::default(),
            spec_fields_sent: false,
        }],
        usage: None,
        system_fingerprint: None,
        timings: None,
        extra: Default::default(),
        verbatim: None,
        spec_fields_sent: false,
        usage_sent: false,
    };
    let mut out = vec![chunk(
        Delta {
            role: Some(Role::Assistant),
            content: Some(String::new()),
            ..Delta::default()
        },
        None,
    )];
    let text: Vec<char> = choice.message.text().chars().collect();
    for piece in text.chunks(step) {
        out.push(chunk(
            Delta {
                content: Some(piece.iter().collect()),
                ..Delta::default()
            },
            None,
        ));
    }
    for (i, c) in choice.message.tool_calls.iter().flatten().enumerate() {
        let index = u32::try_from(i).unwrap();
        let open = ToolCallDelta {
            index,
            id: Some(c.id.clone()),
            kind: Some("function".into()),
            function: Some(FunctionCallDelta {
                name: Some(c.function.name.clone()),
                arguments: Some(String::new()),
                ..FunctionCallDelta::default()
            }),
            extra: Default::default(),
        };
        out.push(chunk(
            Delta {
                tool_calls: Some(vec![open]),
                ..Delta::default()
            },
            None,
        ));
        let args: Vec<char> = c.function.arguments.chars().collect();
        for piece in args.chunks(step) {
            let part = ToolCallDelta {
                index,
                id: None,
                kind: None,
                function: Some(FunctionCallDelta {
                    arguments: Some(piece.iter().collect()),
                    ..FunctionCallDelta::default()
                }),
                extra: Default::default(),
            };
            out.push(chunk(
                Delta {
                    tool_calls: Some(vec![part]),
                    ..Delta::default()
                },
                None,
            ));
        }
    }
    out.push(chunk(Delta::default(), choice.finish_reason.clone()));
    out.push(ChatChunk {
        choices: Vec::new(),
        usage: resp.usage.clone().map(Box::new),
        ..chunk(Delta::default(), None)
    });
    out
}

/// Streams `chunks` through the Anthropic event encoder and back.
fn round_trip_stream(chunks: &[ChatChunk]) -> Vec<ChatChunk> {
    let mut encoder = MessageStream::new("m", 0);
    let mut events = Vec::new();
    for chunk in chunks {
        events.extend(encoder.on_chunk(chunk));
    }
    events.extend(encoder.finish());
    let mut decoder = EventsToChunks::default();
    events
        .iter()
        .flat_map(|(name, data)| decoder.on_event(Some(name), data).unwrap())
        .collect()
}

/// Text, tool calls (name and parsed arguments), finish reason and usage of
/// a stream, reassembled.
fn reassemble(chunks: &[ChatChunk]) -> Value {
    let mut text = String::new();
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut finish = None;
    let mut usage = None;
    for chunk in chunks {
        usage = chunk
            .usage
            .clone()
            .map(|u| json!([u.prompt_tokens, u.completion_tokens, u.cached_tokens()]))
            .or(usage);
        for choice in &chunk.choices {
            text.push_str(choice.delta.content.as_deref().unwrap_or(""));
            finish = choice.finish_reason.clone().or(finish);
            for call in choice.delta.tool_calls.iter().flatten() {
                let f = call.function.clone().unwrap_or_default();
                let i = call.index as usize;
                if calls.len() <= i {
                    calls.resize(i + 1, (String::new(), String::new()));
                }
                calls[i].0.push_str(f.name.as_deref().unwrap_or(""));
                calls[i].1.push_str(f.arguments.as_deref().unwrap_or(""));
            }
        }
    }
    let calls: Vec<Value> = calls
        .iter()
        .map(|(n, a)| json!([n, serde_json::from_str::<Value>(a).unwrap()]))
        .collect();
    json!({"text": text, "calls": calls, "finish": finish, "usage": usage})
}

fn finish() -> impl Strategy<Value = &'static str> {
    prop_oneof![Just("stop"), Just("length"), Just("tool_calls")]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn requests_survive_openai_to_anthropic_and_back(req in chat_request()) {
        let there = messages_from_chat(req.clone()).unwrap();
        let back = chat_from_messages(serde_json::from_value(serde_json::to_value(&there).unwrap()).unwrap()).unwrap();
        prop_assert_eq!(meaning(&back), meaning(&req));
    }

    #[test]
    fn responses_survive(text in text(), calls in prop::collection::vec(("[a-z_]{1,8}", args()), 0..3), finish in finish(),
                         prompt in 0u64..100_000, completion in 0u64..10_000, cached_share in 0.0f64..1.0) {
        let cached = (prompt as f64 * cached_share) as u64;
        let resp = response(text, calls, finish, prompt, completion, cached);
        let there: MessagesResponse = serde_json::from_value(serde_json::to_value(message_from_chat(&resp)).unwrap()).unwrap();
        let back = chat_from_message(there);
        prop_assert_eq!(reassemble(&chunks_of(&back, 1000)), reassemble(&chunks_of(&resp, 1000)));
    }

    #[test]
    fn streams_reencode_losslessly(text in text(), calls in prop::collection::vec(("[a-z_]{1,8}", args()), 0..3),
                                   finish in finish(), step in 1usize..7, prompt in 0u64..5000, completion in 0u64..500) {
        let resp = response(text, calls, finish, prompt, completion, prompt / 3);
        let original = chunks_of(&resp, step);
        prop_assert_eq!(reassemble(&round_trip_stream(&original)), reassemble(&original));
    }
}

/// Found by `requests_survive_openai_to_anthropic_and_back`: consecutive
/// user turns were merged going out and came back as one message.
#[test]
fn consecutive_user_turns_stay_apart() {
    let req = ChatRequest {
        messages: vec![
            text_message(Role::System, "A"),
            text_message(Role::User, "}"),
            text_message(Role::User, "."),
        ],
        ..chat_request_for_regression()
    };
    let there = messages_from_chat(req.clone()).unwrap();
    assert_eq!(there.messages.len(), 2);
    let back = chat_from_messages(there).unwrap();
    assert_eq!(meaning(&back), meaning(&req));
}

fn chat_request_for_regression() -> ChatRequest {
    serde_json::from_value(json!({"model": "m", "messages": [], "max_tokens": 1})).unwrap()
}

/// Thinking comes back to the client as the provider sent it, whole or
/// streamed, and goes back upstream unchanged on the next turn: Anthropic
/// checks a thinking block's signature, and a redacted block is opaque.
mod thinking {
    use serde_json::{Value, json};

    use super::super::{
        EventsToChunks, MessageStream, MessagesRequest, MessagesResponse, chat_from_message,
        chat_from_messages, message_from_chat, messages_from_chat,
    };

    const SIGNATURE: &str = "EqQBCkYIARgCIkDsig";
    const REDACTED: &str = "EmwKAhgBEgy3va3pzix/encrypted";

    #[test]
    fn a_streamed_signature_and_redacted_block_reach_the_client() {
        let upstream = [
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "m", "model": "claude", "usage": {"input_tokens": 5, "output_tokens": 1}}}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think."}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": SIGNATURE}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": REDACTED}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 1}),
            ),
            (
                "content_block_start",
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
            ),
            (
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Done."}}),
            ),
            (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 2}),
            ),
            (
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
            ),
        ];
        let mut decoder = EventsToChunks::default();
        let mut encoder = MessageStream::new("claude", 5);
        let mut events: Vec<(&str, Value)> = Vec::new();
        for (name, data) in &upstream {
            for chunk in decoder.on_event(Some(name), data).unwrap() {
                events.extend(encoder.on_chunk(&chunk));
            }
        }
        events.extend(encoder.finish());
        let deltas: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| *name == "content_block_delta")
            .map(|(_, data)| &data["delta"])
            .collect();
        assert!(
            deltas.contains(&&json!({"type": "signature_delta", "signature": SIGNATURE})),
            "{events:#?}"
        );
        let starts: Vec<&Value> = events
            .iter()
            .filter(|(name, _)| *name == "content_block_start")
            .map(|(_, data)| &data["content_block"]["type"])
            .collect();
        assert_eq!(
            starts,
            [
                &json!("thinking"),
                &json!("redacted_thinking"),
                &json!("text")
            ],
            "{events:#?}"
        );
        assert!(
            events
                .iter()
                .any(|(_, data)| data["content_block"]["data"] == REDACTED)
        );
    }

    #[test]
    fn whole_answers_and_the_next_turn_keep_thinking_intact() {
        let answer: MessagesResponse = serde_json::from_value(json!({
            "id": "m", "type": "message", "role": "assistant", "model": "claude",
            "content": [
                {"type": "thinking", "thinking": "Let me think.", "signature": SIGNATURE},
                {"type": "redacted_thinking", "data": REDACTED},
                {"type": "tool_use", "id": "t1", "name": "look", "input": {"q": 1}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 9}}))
        .unwrap();
        let blocks = serde_json::to_value(&answer.content).unwrap();
        let back = message_from_chat(&chat_from_message(answer));
        assert_eq!(serde_json::to_value(&back.content).unwrap(), blocks);
        // The client's next turn carries the blocks; the backend gets them.
        let next: MessagesRequest = serde_json::from_value(json!({
            "model": "claude", "max_tokens": 100,
            "messages": [
                {"role": "user", "content": "look it up"},
                {"role": "assistant", "content": blocks},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}]}))
        .unwrap();
        let upstream = messages_from_chat(chat_from_messages(next).unwrap()).unwrap();
        let sent = serde_json::to_value(&upstream).unwrap();
        let assistant = &sent["messages"][1]["content"];
        assert_eq!(
            assistant[0],
            json!({"type": "thinking", "thinking": "Let me think.", "signature": SIGNATURE})
        );
        assert_eq!(
            assistant[1],
            json!({"type": "redacted_thinking", "data": REDACTED})
        );
        assert_eq!(assistant[2]["type"], "tool_use");
    }
}
