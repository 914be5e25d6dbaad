//! Why the upstream SSE parser is our own: it against eventsource-stream
//! (0.2, the maintained crate the issue names), on the same bytes in the
//! same run.
//!
//! - A chat stream as model servers send it (512 chunks of about 200
//!   bytes), read one event per socket read and in 16 KiB reads.
//! - One 1 MiB event arriving in 1 KiB reads (a backend that never ends its
//!   line). eventsource-stream parses its whole buffer again on each read,
//!   so this costs it time in the square of the line; ours searches each
//!   byte once. It also keeps the whole line in memory, however long: it
//!   has no bound, where our reader (`upstream::events`) cuts an event past
//!   `max_response_bytes` by asking the parser how much it holds.
//!
//! Run: `cargo bench -p switchyard-adapters --bench sse`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmark set-up

use std::hint::black_box;

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use switchyard_adapters::sse::SseParser;

/// A chat completion stream: `events` content chunks, then `[DONE]`.
fn chat_stream(events: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..events {
        out.extend_from_slice(
            format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen2.5-coder\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" token{i}\"}},\"finish_reason\":null}}]}}\n\n"
            )
            .as_bytes(),
        );
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

/// Cuts `bytes` into reads: at each event's end, or every `size` bytes.
fn reads(bytes: &[u8], size: Option<usize>) -> Vec<Bytes> {
    match size {
        Some(size) => bytes.chunks(size).map(Bytes::copy_from_slice).collect(),
        None => bytes
            .split_inclusive(|&b| b == b'\n')
            .collect::<Vec<_>>()
            .chunks(2)
            .map(|lines| Bytes::from(lines.concat()))
            .collect(),
    }
}

fn ours(reads: &[Bytes]) -> usize {
    let mut parser = SseParser::new();
    reads.iter().map(|read| parser.feed(read).len()).sum()
}

fn theirs(runtime: &tokio::runtime::Runtime, reads: &[Bytes]) -> usize {
    let stream = futures_util::stream::iter(reads.iter().cloned().map(Ok::<_, std::io::Error>));
    runtime.block_on(
        stream
            .eventsource()
            .filter(|e| std::future::ready(e.is_ok()))
            .count(),
    )
}

fn parsers(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let stream = chat_stream(512);
    let mut long = b"data: ".to_vec();
    long.resize(1 << 20, b'x');
    long.extend_from_slice(b"\n\n");
    let cases = [
        ("chat stream, an event per read", reads(&stream, None), 513),
        (
            "chat stream, 16 KiB reads",
            reads(&stream, Some(16 << 10)),
            513,
        ),
        ("1 MiB line, 1 KiB reads", reads(&long, Some(1 << 10)), 1),
    ];
    let mut group = c.benchmark_group("sse");
    group.sample_size(20);
    for (name, reads, events) in &cases {
        assert_eq!(ours(reads), *events, "{name}: ours");
        assert_eq!(theirs(&runtime, reads), *events, "{name}: theirs");
        group.bench_with_input(BenchmarkId::new("switchyard", name), reads, |b, reads| {
            b.iter(|| ours(black_box(reads)))
        });
        group.bench_with_input(
            BenchmarkId::new("eventsource-stream", name),
            reads,
            |b, reads| b.iter(|| theirs(&runtime, black_box(reads))),
        );
    }
    group.finish();
}

criterion_group!(benches, parsers);
criterion_main!(benches);
