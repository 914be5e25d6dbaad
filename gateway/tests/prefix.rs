//! The shared prefix index: cache-affinity among replicas of one backend
//! (two `switchyard sim` processes, each with its own LRU prefix cache)
//! against round robin, the `x-switchyard-cache` receipt, and the ledger's
//! expected and reported cached tokens.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{GatewayBuilder, Proc, fast_sim, post_json};

/// Room for four sessions' prompts per replica (16-token blocks); five
/// sessions run.
const SIM_CACHE: &str = "prefix_cache_blocks=180";
const SESSIONS: usize = 5;

fn gateway(balance: &str, replicas: &[&Proc]) -> Proc {
    let urls: Vec<String> = replicas.iter().map(|r| r.base_url()).collect();
    GatewayBuilder::new()
        .backend_yaml(&format!(
            "  local:\n    tier: small\n    openai:\n      base_url: {}\n      replicas: [{}]\n    price: {{free: true}}\n    prefix_cache: {{kv_tokens: 3800, balance: {balance}}}\n",
            urls[0],
            urls[1..].join(", ")
        ))
        .start()
}

/// A session's turn: its own long system prompt, then a new question.
fn turn(session: usize, n: usize) -> Value {
    let system =
        format!("Session {session}. ") + &"You are a careful agent with tools. ".repeat(90);
    json!({
        "model": "local",
        "max_tokens": 4,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": format!("question {n}")}
        ]
    })
}

/// Five sessions, interleaved, four turns each; returns the receipts and
/// the cached tokens the replicas reported.
async fn run(gateway: &Proc) -> (Vec<String>, u64) {
    let url = gateway.url("/v1/chat/completions");
    let mut receipts = Vec::new();
    let mut cached = 0;
    for n in 0..4 {
        for session in 0..SESSIONS {
            let reply = post_json(&url, &turn(session, n)).await;
            assert_eq!(
                reply.status,
                200,
                "{}",
                String::from_utf8_lossy(&reply.body)
            );
            receipts.push(reply.header("x-switchyard-cache").unwrap().to_owned());
            cached += reply.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0);
        }
    }
    (receipts, cached)
}

#[tokio::test]
async fn cache_affinity_keeps_sessions_on_the_replica_that_holds_their_prefix() {
    let (a, b) = (fast_sim(&[SIM_CACHE]), fast_sim(&[SIM_CACHE]));
    let affine = gateway("cache_affinity", &[&a, &b]);
    let (receipts, affine_cached) = run(&affine).await;
    // First turns miss; every later turn is expected to hit its prefix.
    assert!(
        receipts[..SESSIONS].iter().all(|r| r == "miss"),
        "{receipts:?}"
    );
    for r in &receipts[SESSIONS..] {
        let n: u32 = r.strip_prefix("prefix=").unwrap().parse().unwrap();
        assert!(n > 500, "{receipts:?}");
    }
    // Both replicas served: new prompts spread by their first block.
    for sim in [&a, &b] {
        let stats = support::get(&sim.url("/sim/stats")).await.json();
        assert!(stats["requests"].as_u64().unwrap() >= 4, "{stats}");
    }

    let (c, d) = (fast_sim(&[SIM_CACHE]), fast_sim(&[SIM_CACHE]));
    let round_robin = gateway("round_robin", &[&c, &d]);
    let (_, rr_cached) = run(&round_robin).await;
    // Round robin spreads each session over both replicas, whose caches
    // hold four sessions each: fewer prompt tokens come from cache.
    let later_turns = (3 * SESSIONS) as u64;
    assert!(
        affine_cached >= later_turns * 600,
        "every later turn hit: {affine_cached}"
    );
    assert!(
        (rr_cached as f64) < 0.7 * affine_cached as f64,
        "affinity {affine_cached} vs round robin {rr_cached}"
    );

    // The ledger has what was expected and what the replicas reported.
    let mut affine = affine;
    affine.terminate();
    let (expected, reported): (i64, i64) = affine
        .ledger()
        .query_row(
            "SELECT SUM(expected_cached_tokens), SUM(cached_tokens) FROM requests",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(expected > 0 && reported > 0, "{expected} {reported}");
    let ratio = expected as f64 / reported as f64;
    assert!(
        (0.7..1.3).contains(&ratio),
        "expected {expected} vs reported {reported}"
    );
}

/// Provider prompt caching on the wire: an Anthropic backend gets a
/// `cache_control` breakpoint on the long system prompt once it has been
/// sent that prefix; an OpenAI backend gets one `prompt_cache_key` for every
/// request that starts the same.
#[tokio::test]
async fn provider_prompt_caching_reaches_the_wire() {
    let message = r#"{"id":"m1","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}"#;
    let completion = r#"{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    let (anthropic, anthropic_seen) = support::recording_server(2, message).await;
    let (openai, openai_seen) = support::recording_server(2, completion).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  claude:\n    tier: cloud\n    anthropic: {{base_url: 'http://{anthropic}/v1', prompt_caching: true}}\n    price: {{input_per_mtok: 3, output_per_mtok: 15, cached_input_per_mtok: 0.3, cache_write_per_mtok: 3.75}}\n  gpt:\n    tier: cloud\n    openai: {{base_url: 'http://{openai}/v1', prompt_cache_key: true}}\n    price: {{input_per_mtok: 2.5, output_per_mtok: 10}}\n"
        ))
        .start();
    let system = "Follow the house rules carefully and cite them. ".repeat(160);
    let ask = |model: &str, question: &str| {
        json!({
            "model": model,
            "max_tokens": 5,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}]
        })
    };
    let url = gateway.url("/v1/chat/completions");
    for question in ["first", "second"] {
        for model in ["claude", "gpt"] {
            let reply = post_json(&url, &ask(model, question)).await;
            assert_eq!(
                reply.status,
                200,
                "{}",
                String::from_utf8_lossy(&reply.body)
            );
        }
    }
    let bodies = |seen: Vec<String>| -> Vec<Value> {
        seen.iter()
            .map(|r| serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap())
            .collect()
    };
    let sent = bodies(anthropic_seen.await.unwrap());
    assert!(
        !sent[0].to_string().contains("cache_control"),
        "first sight: no marker"
    );
    assert_eq!(
        sent[1]["system"][0]["cache_control"],
        json!({"type": "ephemeral"}),
        "{}",
        sent[1]["system"]
    );
    let sent = bodies(openai_seen.await.unwrap());
    let key = sent[0]["prompt_cache_key"].as_str().unwrap();
    assert!(key.starts_with("sy-"), "{key}");
    assert_eq!(sent[1]["prompt_cache_key"], sent[0]["prompt_cache_key"]);
}

/// llama.cpp slots: each prompt goes to the slot that holds its prefix
/// (`id_slot` on the wire); a new prompt to the emptiest slot.
#[tokio::test]
async fn llama_cpp_slots_are_chosen_from_the_index() {
    let completion = r#"{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    // The recording server answers four chats; the engine's metrics page is
    // elsewhere (nothing listens there), so the watcher takes none of them.
    let (server, seen) = support::recording_server(4, completion).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  local:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1', engine: llamacpp, slots: 2, metrics_url: 'http://127.0.0.1:9/metrics'}}\n    price: {{free: true}}\n"
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    for (session, question) in [(0, "a"), (1, "b"), (0, "c"), (1, "d")] {
        let reply = post_json(&url, &turn(session, question.len())).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let slots: Vec<i64> = seen
        .await
        .unwrap()
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap();
            body["id_slot"].as_i64().unwrap()
        })
        .collect();
    assert_ne!(slots[0], slots[1], "two new sessions, two slots: {slots:?}");
    assert_eq!(
        (slots[2], slots[3]),
        (slots[0], slots[1]),
        "each back to its slot: {slots:?}"
    );
}
