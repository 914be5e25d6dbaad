//! The exact response cache: hits for deterministic repeats, isolation
//! between keys, `cache-control` from the client, streams replayed as an SSE
//! client expects them, and ledger rows for hits.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, post_with};

fn gateway() -> Proc {
    GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .route(
            "cached",
            "strategy: {split: {weights: {local: 1}}}\nresponse_cache: {ttl_s: 60, share: key}",
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: alice, hash: '{}'}}\n    - {{name: bob, hash: '{}'}}\n",
            support::key_hash("sk-alice"),
            support::key_hash("sk-bob")
        ))
        .start()
}

fn ask(temperature: f64, stream: bool) -> Value {
    json!({
        "model": "cached",
        "temperature": temperature,
        "stream": stream,
        "max_tokens": 24,
        "messages": [{"role": "user", "content": "Name three rivers."}]
    })
}

async fn send(gateway: &Proc, key: &str, body: &Value, extra: &[(&str, &str)]) -> support::Reply {
    let auth = format!("Bearer {key}");
    let mut headers = vec![("authorization", auth.as_str())];
    headers.extend_from_slice(extra);
    let reply = post_with(&gateway.url("/v1/chat/completions"), body, &headers).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    reply
}

#[tokio::test]
async fn deterministic_repeats_hit_per_key_and_sampled_ones_never_do() {
    let mut gateway = gateway();
    let first = send(&gateway, "sk-alice", &ask(0.0, false), &[]).await;
    assert_eq!(first.header("x-switchyard-cache"), Some("miss"));
    let again = send(&gateway, "sk-alice", &ask(0.0, false), &[]).await;
    assert_eq!(again.header("x-switchyard-cache"), Some("hit"));
    assert_eq!(again.json()["choices"], first.json()["choices"]);
    assert_eq!(again.header("x-switchyard-backend"), Some("local"));

    // Another key never sees alice's answer (a miss for the response
    // cache, though the backend holds the prompt's prefix: `prefix=N`).
    let bob = send(&gateway, "sk-bob", &ask(0.0, false), &[]).await;
    assert_ne!(bob.header("x-switchyard-cache"), Some("hit"));
    // The client can ask for a fresh answer.
    let fresh = send(
        &gateway,
        "sk-alice",
        &ask(0.0, false),
        &[("cache-control", "no-cache")],
    )
    .await;
    assert_ne!(fresh.header("x-switchyard-cache"), Some("hit"));
    // Sampled requests are not cached.
    for _ in 0..2 {
        let sampled = send(&gateway, "sk-alice", &ask(0.7, false), &[]).await;
        assert_ne!(sampled.header("x-switchyard-cache"), Some("hit"));
    }

    gateway.terminate();
    let rows: Vec<(String, bool, f64, i64)> = gateway
        .ledger()
        .prepare("SELECT key, cache_hit, cost_usd, output_tokens FROM requests ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 6, "{rows:?}");
    // Found by its flag, not its place: a row may be written after the
    // next request's.
    let hit = rows.iter().find(|r| r.1).expect("the hit's row");
    assert_eq!(hit.0, "alice", "{rows:?}");
    assert!(
        hit.1 && hit.2 == 0.0 && hit.3 > 0,
        "a free row with the tokens served: {rows:?}"
    );
    assert_eq!(rows.iter().filter(|r| r.1).count(), 1);
}

#[tokio::test]
async fn a_cached_stream_replays_byte_for_byte() {
    let gateway = gateway();
    let body = ask(0.0, true);
    let first = send(&gateway, "sk-alice", &body, &[]).await;
    assert_eq!(first.header("x-switchyard-cache"), Some("miss"));
    let replayed = send(&gateway, "sk-alice", &body, &[]).await;
    assert_eq!(replayed.header("x-switchyard-cache"), Some("hit"));
    assert_eq!(
        replayed.header("content-type"),
        Some("text/event-stream"),
        "a stream answers a stream"
    );
    assert_eq!(replayed.body, first.body, "the same events, byte for byte");
    let text = String::from_utf8_lossy(&replayed.body);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // A whole request does not get the stream, nor the other way round.
    let whole = send(&gateway, "sk-alice", &ask(0.0, false), &[]).await;
    assert_ne!(whole.header("x-switchyard-cache"), Some("hit"));

    // The same cached stream in the Anthropic dialect.
    let messages = json!({
        "model": "cached", "temperature": 0, "max_tokens": 24, "stream": true,
        "messages": [{"role": "user", "content": "Name three rivers."}]
    });
    let auth = [
        ("x-api-key", "sk-alice"),
        ("anthropic-version", "2023-06-01"),
    ];
    let url = gateway.url("/v1/messages");
    let _ = post_with(&url, &messages, &auth).await;
    let anthropic = post_with(&url, &messages, &auth).await;
    assert_eq!(anthropic.header("x-switchyard-cache"), Some("hit"));
    let events = String::from_utf8_lossy(&anthropic.body);
    assert!(events.starts_with("event: message_start"), "{events}");
    assert!(events.contains("event: message_stop"), "{events}");
}
