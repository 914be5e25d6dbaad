//! The per-chunk and per-request pure functions behind a call: one streamed
//! chunk re-encoded for each caller dialect (OpenAI `data:` events, Anthropic
//! Messages events, Responses events), the prompt's prefix chain, and the
//! cost of a finished call (token prices and a local hourly price).
//! Run: `cargo bench -p switchyard --bench hot_paths`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark set-up

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use switchyard_adapters::anthropic::MessageStream;
use switchyard_adapters::responses::ResponseStream;
use switchyard_adapters::sse::{data_event, named_event};
use switchyard_adapters::types::{ChatChunk, ChatRequest};
use switchyard_policies::{Pricing, TokenCounts, TokenPrice};
use switchyard_router::prefix::ChainBuilder;

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
        let mut stream = ResponseStream::new("m");
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
        b.iter(|| {
            let mut builder = ChainBuilder::new();
            let mut buf = Vec::with_capacity(2048);
            for message in &black_box(&request).messages {
                buf.clear();
                serde_json::to_writer(&mut buf, message).unwrap();
                builder.segment(&buf);
            }
            builder.finish()
        })
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

criterion_group!(benches, reencoding, prefix_chain, cost);
criterion_main!(benches);
