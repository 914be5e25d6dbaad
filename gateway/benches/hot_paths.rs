//! The per-chunk and per-request pure functions behind a call: one streamed
//! chunk re-encoded for each caller dialect (OpenAI `data:` events, Anthropic
//! Messages events, Responses events), a chat request and answer decoded and
//! encoded, the prompt's prefix chain, the
//! cost of a finished call (token prices and a local hourly price), and an
//! agent's request (twenty tools) decoded and copied for a try.
//! Run: `cargo bench -p switchyard --bench hot_paths`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark set-up

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use switchyard::dispatch::endpoint::Endpoint;
use switchyard::ingress::chat::Chat;
use switchyard_adapters::anthropic::MessageStream;
use switchyard_adapters::json::from_bytes;
use switchyard_adapters::responses::{Echo, ResponseStream};
use switchyard_adapters::sse::{data_event, named_event};
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse};
use switchyard_policies::{Pricing, TokenCounts, TokenPrice};

fn chunk(text: &str) -> ChatChunk {
    serde_json::from_value(serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]
    }))
    .unwrap()
}

fn reencoding(c: &mut Criterion) {
    let first = chunk("");
    let delta = chunk(" the river");
    c.bench_function("sse: chat chunk -> OpenAI data event", |b| {
        b.iter(|| data_event(&serde_json::to_vec(black_box(&delta)).unwrap()))
    });
    c.bench_function("sse: chat chunk -> Anthropic events", |b| {
        let mut stream = MessageStream::new("m", 100);
        stream.on_chunk(&first);
        b.iter(|| {
            for (name, event) in stream.on_chunk(black_box(&delta)) {
                black_box(named_event(name, &serde_json::to_vec(&event).unwrap()));
            }
        })
    });
    c.bench_function("sse: chat chunk -> Responses events", |b| {
        let mut stream = ResponseStream::new("m", Echo::default());
        stream.on_chunk(&first);
        b.iter(|| {
            for (name, event) in stream.on_chunk(black_box(&delta)) {
                black_box(named_event(name, &serde_json::to_vec(&event).unwrap()));
            }
        })
    });
}

fn prefix_chain(c: &mut Criterion) {
    let request: ChatRequest = serde_json::from_value(serde_json::json!({
        "model": "auto",
        "messages": [
            {"role": "system", "content": "You are a careful coding agent. ".repeat(60)},
            {"role": "user", "content": "Fix the failing test in the parser module."}
        ]
    }))
    .unwrap();
    c.bench_function("prefix chain of a 2 KB chat request", |b| {
        b.iter(|| switchyard::route::prefix::chat_chain(black_box(&request)))
    });
}

fn cost(c: &mut Criterion) {
    let tokens = TokenCounts {
        input: 1800,
        cached_input: 1200,
        cache_write: 0,
        output: 240,
        reasoning: 0,
    };
    let cloud = Pricing::Tokens(TokenPrice {
        input: 2.5,
        cached_input: 1.25,
        cache_write: 3.75,
        output: 10.0,
        reasoning: 10.0,
    });
    let local = Pricing::Hourly { usd_per_hour: 0.1 };
    c.bench_function("cost: cloud token prices", |b| {
        b.iter(|| black_box(&cloud).cost(black_box(&tokens), 1.2, 1))
    });
    c.bench_function("cost: local hourly price shared by 4", |b| {
        b.iter(|| black_box(&local).cost(black_box(&tokens), 1.2, 4))
    });
}

/// A short chat request and a model server's answer to it, as the overhead
/// benchmark sends and gets them: decoded on the way in, encoded on the way out.
fn json(c: &mut Criterion) {
    let request = br#"{"model":"auto","stream":false,"max_tokens":16,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say something short about rivers and the sea."}]}"#;
    let answer = br#"{"id":"chatcmpl-sim0000000","object":"chat.completion","created":1796015271,"model":"sim","choices":[{"index":0,"message":{"role":"assistant","content":"[sim] prompt on fast slow and it with and queue first when answer it"},"finish_reason":"length"}],"usage":{"prompt_tokens":15,"completion_tokens":16,"total_tokens":31,"prompt_tokens_details":{"cached_tokens":0}},"system_fingerprint":"switchyard-sim","timings":{"cache_n":0,"predicted_ms":0.786921,"predicted_n":16,"prompt_ms":11.50845,"prompt_n":15}}"#;
    c.bench_function("json: decode a chat request", |b| {
        b.iter(|| from_bytes::<ChatRequest>(black_box(request)).unwrap())
    });
    c.bench_function(
        "json: decode a chat request, the chat endpoint's way",
        |b| b.iter(|| Chat::decode(black_box(request)).unwrap()),
    );
    c.bench_function("json: decode a chat answer", |b| {
        b.iter(|| from_bytes::<ChatResponse>(black_box(answer)).unwrap())
    });
    c.bench_function(
        "json: decode a chat answer, UTF-8 checked per string",
        |b| b.iter(|| serde_json::from_slice::<ChatResponse>(black_box(answer)).unwrap()),
    );
    let decoded: ChatResponse = serde_json::from_slice(answer).unwrap();
    c.bench_function("json: encode a chat answer", |b| {
        b.iter(|| serde_json::to_vec(black_box(&decoded)).unwrap())
    });
}

/// An agent's request: twenty tools with JSON Schema parameters (about
/// 30 KB of definitions, as coding agents send on every turn) and a
/// conversation of thirty messages.
fn agent_request() -> Vec<u8> {
    let property = |i: usize| {
        serde_json::json!({
            "type": if i.is_multiple_of(3) { "integer" } else { "string" },
            "description": format!("Parameter {i}: what the tool does with it, in a sentence or two of plain prose."),
        })
    };
    let tools: Vec<_> = (0..20)
        .map(|t| {
            let properties: serde_json::Map<String, serde_json::Value> =
                (0..12).map(|i| (format!("arg_{i}"), property(i))).collect();
            serde_json::json!({"type": "function", "function": {
                "name": format!("tool_{t}"),
                "description": "A tool an agent calls: reads, edits or searches files. ".repeat(6),
                "parameters": {"type": "object", "properties": properties, "required": ["arg_0", "arg_1"]},
            }})
        })
        .collect();
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are a coding agent. ".repeat(200)}),
    ];
    for turn in 0..30_u32 {
        let role = if turn.is_multiple_of(2) {
            "user"
        } else {
            "assistant"
        };
        messages.push(serde_json::json!({"role": role, "content": format!("Turn {turn}: ") + &"some code and prose ".repeat(60)}));
    }
    serde_json::to_vec(&serde_json::json!({"model": "auto", "tools": tools, "messages": messages}))
        .unwrap()
}

/// What every try of an agent's request costs before it is sent: its copy
/// (each try sends its own; the original stays for the next try), beside
/// decoding it once.
fn agent(c: &mut Criterion) {
    let body = agent_request();
    let request: ChatRequest = from_bytes(&body).unwrap();
    c.bench_function("agent request (20 tools, 31 messages): decode", |b| {
        b.iter(|| from_bytes::<ChatRequest>(black_box(&body)).unwrap())
    });
    c.bench_function(
        "agent request (20 tools, 31 messages): decode, the chat endpoint's way",
        |b| b.iter(|| Chat::decode(black_box(&body)).unwrap()),
    );
    c.bench_function(
        "agent request (20 tools, 31 messages): copy for a try",
        |b| b.iter(|| black_box(&request).clone()),
    );
}

criterion_group!(benches, json, reencoding, prefix_chain, cost, agent);
criterion_main!(benches);
