//! The sensitive-data scan per kilobyte of prompt: prose with a value here
//! and there (what most prompts are), code, and base64 (an inlined file),
//! at 1, 16 and 256 KiB. Criterion reports time and bytes per second; the
//! docs page quotes the 1 KiB and 256 KiB prose figures.
//!
//! Run: `cargo bench -p switchyard-router --bench sensitive`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use switchyard_router::sensitive::scan;

const PROSE: &str = "Hi team, the customer Jane Doe wrote in about order 88213 placed on 2026-11-30. \
She asks us to refund the card ending 1111 and to write to jane.doe@example.com; her phone is +44 20 7946 0958. \
The logs from 10.2.14.7 show three retries at 09:41:07 before the payment went through. ";
const CODE: &str = "fn total(items: &[Item]) -> u64 {\n    items.iter().map(|i| i.price * u64::from(i.count)).sum()\n}\n// version 1.42.0, see https://example.com/docs/items?id=42\n";
const BLOB: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg";

fn sized(unit: &str, bytes: usize) -> String {
    let mut text = unit.repeat(bytes / unit.len() + 1);
    text.truncate(bytes);
    while !text.is_char_boundary(text.len()) {
        text.pop();
    }
    text
}

fn scans(c: &mut Criterion) {
    let mut group = c.benchmark_group("scan");
    for (name, unit) in [("prose", PROSE), ("code", CODE), ("base64", BLOB)] {
        for kib in [1, 16, 256] {
            let text = sized(unit, kib * 1024);
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_function(format!("{name}/{kib}KiB"), |b| {
                b.iter(|| scan(black_box(&text)))
            });
        }
    }
    group.finish();
}

criterion_group!(benches, scans);
criterion_main!(benches);
