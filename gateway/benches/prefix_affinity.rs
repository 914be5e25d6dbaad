//! Cache-affinity routing against round robin, on real model servers: two
//! llama-server replicas of SmolLM2-135M behind one backend, and ten agent
//! sessions that each resend their own ~2k-token system prompt, turn after
//! turn, in a shuffled order. Prints median and p90 time to first token for
//! both and the replicas' reported cached tokens.
//!
//! Each replica's KV cache is its slots alone (`--cache-ram 0`): llama-server
//! otherwise keeps up to 8 GiB of evicted prompts in host memory, which on a
//! small workload like this one hides what a replica with bounded KV (a GPU
//! server) loses to round robin. `PREFIX_BENCH_CACHE_RAM_MIB` sets it.
//!
//! Needs llama.cpp's llama-server and SmolLM2 (scripts/test.sh installs
//! both under ~/.cache/switchyard/venv-llama and exports these):
//!   LLAMA_SERVER=... SMOLLM2_GGUF=... cargo bench -p switchyard --bench prefix_affinity

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark's job is to print

mod common;

use std::process::Command;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde_json::{Value, json};

use common::{Proc, free_port, quantile, serve, start};

const SESSIONS: usize = 10;
const TURNS: usize = 4;
/// Slots per replica: room for five sessions' prompts, so one replica
/// cannot hold all ten, but half of them fit.
const SLOTS: usize = 5;
const CONTEXT_PER_SLOT: usize = 2560;

async fn llama_server(binary: &str, model: &str, cache_ram_mib: &str) -> Proc {
    let port = free_port().to_string();
    let context = (SLOTS * CONTEXT_PER_SLOT).to_string();
    let slots = SLOTS.to_string();
    let mut command = Command::new(binary);
    command
        .args([
            "-m",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "-t",
            "2",
            "--no-webui",
        ])
        .args(["-c", &context, "-np", &slots, "--cache-ram", cache_ram_mib]);
    start(command, format!("http://127.0.0.1:{port}"), "/health", None).await
}

fn gateway(replicas: &[Proc], balance: &str) -> Proc {
    let kv_tokens = SLOTS * CONTEXT_PER_SLOT;
    let config = format!(
        "backends:\n  smollm2:\n    tier: small\n    openai:\n      base_url: '{}/v1'\n      replicas: ['{}/v1']\n      engine: llamacpp\n      slots: {SLOTS}\n    prefix_cache: {{kv_tokens: {kv_tokens}, balance: {balance}}}\n    timeouts: {{first_byte_ms: 300000}}\n",
        replicas[0].url, replicas[1].url
    );
    serve(&config, &format!("prefix-{balance}"))
}

/// Session `s`'s system prompt: its own ~2k tokens of tools and rules.
fn system_prompt(session: usize) -> String {
    let mut text = format!("You are agent {session} of the maintenance crew. Rules follow.\n");
    for rule in 0..110 {
        text.push_str(&format!(
            "Rule {session}.{rule}: check valve {} before opening line {}.\n",
            (rule * 7 + session) % 97,
            (rule * 13 + session) % 89
        ));
    }
    text
}

/// One streamed turn: time to the first output chunk, and cached tokens.
async fn turn(url: &str, session: usize, n: usize) -> (f64, u64) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let body = json!({
        "model": "smollm2",
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": 8,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": system_prompt(session)},
            {"role": "user", "content": format!("Step {n}: which valve first?")}
        ]
    });
    let request = http::Request::post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let start = Instant::now();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut ttft = None;
    let mut text = String::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.unwrap().into_data() {
            let chunk = String::from_utf8_lossy(&data).to_string();
            if ttft.is_none()
                && chunk.contains("\"content\":\"")
                && !chunk.contains("\"content\":\"\"")
            {
                ttft = Some(start.elapsed());
            }
            text.push_str(&chunk);
        }
    }
    let cached = text
        .split("data: ")
        .filter_map(|e| serde_json::from_str::<Value>(e.trim()).ok())
        .filter_map(|c| c["usage"]["prompt_tokens_details"]["cached_tokens"].as_u64())
        .last()
        .unwrap_or(0);
    let ttft = ttft.unwrap_or_else(|| start.elapsed());
    (ttft.as_secs_f64() * 1000.0, cached)
}

/// Every session's turns, in an order shuffled per round (the same for both
/// systems), one request at a time.
async fn workload(url: &str) -> (Vec<f64>, u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (mut ttfts, mut cached) = (Vec::new(), 0);
    for n in 0..TURNS {
        let mut order: Vec<usize> = (0..SESSIONS).collect();
        order.shuffle(&mut rng);
        for session in order {
            let (ttft, c) = turn(url, session, n).await;
            ttfts.push(ttft);
            cached += c;
        }
    }
    (ttfts, cached)
}

#[tokio::main]
async fn main() {
    let (Ok(binary), Ok(model)) = (std::env::var("LLAMA_SERVER"), std::env::var("SMOLLM2_GGUF"))
    else {
        println!(
            "LLAMA_SERVER and SMOLLM2_GGUF are not set; see the top of benches/prefix_affinity.rs"
        );
        return;
    };
    let cache_ram = std::env::var("PREFIX_BENCH_CACHE_RAM_MIB").unwrap_or_else(|_| "0".into());
    let mut results = Vec::new();
    for balance in ["cache_affinity", "round_robin"] {
        // Fresh replicas for each system, so neither inherits a warm cache.
        let replicas = [
            llama_server(&binary, &model, &cache_ram).await,
            llama_server(&binary, &model, &cache_ram).await,
        ];
        let gateway = gateway(&replicas, balance);
        let started = Instant::now();
        let (mut ttfts, cached) = workload(&gateway.url).await;
        let p50 = quantile(&mut ttfts, 0.5);
        let p90 = quantile(&mut ttfts, 0.9);
        println!(
            "{balance:>14}: TTFT p50 {p50:.0} ms, p90 {p90:.0} ms; {cached} prompt tokens reported cached; {:.0} s",
            started.elapsed().as_secs_f64()
        );
        results.push(p50);
    }
    println!(
        "{SESSIONS} sessions x {TURNS} turns, 2 replicas x {SLOTS} slots, host prompt cache {cache_ram} MiB: median TTFT {:.1}x lower with cache affinity",
        results[1] / results[0]
    );
}
