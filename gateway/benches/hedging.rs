//! Hedging under stragglers: two simulated backends that each stall 5% of
//! requests for 2 s; the same streamed load through a gateway without and
//! with hedging, interleaved. Prints p50 and p99 time to first token for
//! both and the p99 ratio.
//!
//! Run: `cargo bench -p switchyard --bench hedging`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark's job is to print

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use common::{Proc, quantile, serve, spawn};

const REQUESTS: usize = 400;
const CONCURRENCY: usize = 8;
const ROUNDS: usize = 2;

fn straggling_sim(seed: u32) -> Proc {
    let seed = format!("seed={seed}");
    spawn(
        &[
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--profile",
            "small",
            "--set",
            &seed,
            "--set",
            "base_ttft_ms=20",
            "--set",
            "jitter=0.1",
            "--set",
            "decode_tokens_per_s=2000",
            "--set",
            "max_concurrency=64",
            "--set",
            "faults.stall_rate=0.05",
            "--set",
            "faults.stall_ms=2000",
        ],
        None,
    )
}

fn gateway(a: &str, b: &str, hedge: bool) -> Proc {
    let hedge_yaml = if hedge {
        "    hedge: {enabled: true}\n"
    } else {
        ""
    };
    let config = format!(
        "backends:\n  a:\n    tier: small\n    openai: {{base_url: '{a}/v1'}}\n    latency: {{ttft_ms: 20}}\n  b:\n    tier: small\n    openai: {{base_url: '{b}/v1'}}\n    latency: {{ttft_ms: 20}}\nroutes:\n  auto:\n{hedge_yaml}    retries: 0\n    strategy:\n      split:\n        weights: {{a: 1}}\n    fallbacks: [b]\n"
    );
    serve(&config, &format!("hedge-{hedge}"))
}

/// Time to the first streamed byte of each request, in ms.
async fn load(url: &str) -> Vec<f64> {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let url = format!("{url}/v1/chat/completions");
    let body = Bytes::from(
        r#"{"model":"auto","stream":true,"max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    let mut ttfts = Vec::with_capacity(REQUESTS);
    let mut pending = Vec::new();
    for i in 0..REQUESTS {
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        pending.push(tokio::spawn(async move {
            let request = http::Request::post(url)
                .header("content-type", "application/json")
                .body(Full::new(body))
                .unwrap();
            let start = Instant::now();
            let response = client.request(request).await.unwrap();
            let mut body = response.into_body();
            body.frame().await.unwrap().unwrap();
            let ttft = start.elapsed();
            while body.frame().await.is_some() {}
            ttft.as_secs_f64() * 1000.0
        }));
        if pending.len() == CONCURRENCY || i + 1 == REQUESTS {
            for task in pending.drain(..) {
                ttfts.push(task.await.unwrap());
            }
        }
    }
    ttfts
}

#[tokio::main]
async fn main() {
    let (a, b) = (straggling_sim(1), straggling_sim(2));
    let plain = gateway(&a.url, &b.url, false);
    let hedged = gateway(&a.url, &b.url, true);
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        // Interleaved, so drift on the machine hits both alike.
        without.extend(load(&plain.url).await);
        with.extend(load(&hedged.url).await);
        println!("round {}/{ROUNDS} done", round + 1);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (p50_without, p99_without) = (quantile(&mut without, 0.5), quantile(&mut without, 0.99));
    let (p50_with, p99_with) = (quantile(&mut with, 0.5), quantile(&mut with, 0.99));
    println!(
        "stragglers: 5% of requests stall 2 s; {} streamed requests per system, concurrency {CONCURRENCY}",
        REQUESTS * ROUNDS
    );
    println!("no hedging: TTFT p50 {p50_without:.1} ms, p99 {p99_without:.1} ms");
    println!("hedging:    TTFT p50 {p50_with:.1} ms, p99 {p99_with:.1} ms");
    println!("p99 improvement: {:.1}x", p99_without / p99_with);
}
