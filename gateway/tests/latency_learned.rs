//! A server whose concurrency nobody wrote down, learned from its own
//! first-token times, through the running gateway. In a file of its own:
//! the figure it checks is made of timings, and the other latency tests
//! running beside it on a 2-core machine moved them enough to fail it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::json;
use support::{GatewayBuilder, chat, post_json};

/// A cheap server that decodes one request at a time, with no limit in the
/// gateway's config and no engine metrics: the first request that waits
/// behind another teaches the gateway its concurrency, and from then on a
/// request that would queue there goes to the cloud. Eight streamed
/// requests at a time, four waves, after five alone.
///
/// This failed two of five CI runs while two decisions made at the same
/// moment could both read the one-slot server as free before either
/// reserved its place there: a second request then queued behind the
/// first in a later wave, its first token at 1.44 s against the 1 s budget
/// (29 of 32). Decisions by a budget strategy now reserve one at a time
/// (`decisions_made_at_once_do_not_share_one_free_slot` in the router).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_serves_one_at_a_time_is_learned_and_not_queued_on() {
    if let Err(why) = one_run().await {
        panic!("{why}");
    }
}

/// One run of the waves; what fell short, if anything.
async fn one_run() -> Result<(), String> {
    let small = support::sim(
        "small",
        &[
            "max_concurrency=1",
            "max_queue=64",
            "base_ttft_ms=40",
            "prefill_tokens_per_s=100000",
            "decode_tokens_per_s=50",
            "jitter=0",
        ],
    );
    let gateway = GatewayBuilder::new()
        .openai("small", "small", &small.base_url(), &[])
        .in_process_sim(
            "cloud",
            "cloud",
            "preset: large, base_ttft_ms: 150, prefill_tokens_per_s: 100000, decode_tokens_per_s: 500, jitter: 0",
        )
        .route(
            "chat",
            "budget: {ttft_ms: 1000}\nstrategy:\n  cheapest_within_budget: {candidates: [small, cloud]}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("chat", "hello there, how are you today?");
    body["max_tokens"] = json!(64);
    body["stream"] = json!(true);
    for _ in 0..5 {
        assert_eq!(post_json(&url, &body).await.status, 200);
    }
    let waves_from = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    for _ in 0..4 {
        let wave: Vec<_> = (0..8)
            .map(|_| {
                let (url, body) = (url.clone(), body.clone());
                tokio::spawn(async move { post_json(&url, &body).await.status })
            })
            .collect();
        for request in wave {
            assert_eq!(request.await.unwrap(), 200);
        }
    }
    let rows = support::ledger_rows(
        &gateway,
        &format!("SELECT backend, ttft_ms, output_tokens FROM requests WHERE ts_ms >= {waves_from} ORDER BY ts_ms"),
        32,
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<f64>>(1)?,
                r.get::<_, Option<i64>>(2)?,
            ))
        },
    )
    .await;
    let within = rows
        .iter()
        .filter(|(_, ttft, _)| ttft.is_some_and(|t| t <= 1000.0))
        .count();
    let on_small = rows.iter().filter(|(b, _, _)| b == "small").count();
    eprintln!("{within} of 32 within 1 s; {on_small} served by the one-slot server");
    // 27 of 32 before the model learned concurrency; #45 asks 29. Runs
    // here measure 31: only the first wave's probe of a second slot
    // misses. (Before each backend's answers had their own length, the
    // cloud tier's short answers made the one-slot server's queue look
    // shorter than it was: 28 to 30.) One short of 31 is left for a
    // machine slow enough to start a wave's requests apart.
    if within < 30 {
        return Err(format!("{within} of 32 within budget: {rows:?}"));
    }
    if on_small < 4 {
        return Err(format!("the cheap server served {on_small}: {rows:?}"));
    }
    let explained = post_json(&gateway.url("/v1/route/explain"), &body)
        .await
        .json();
    let small_verdict = explained["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["backend"] == "small")
        .unwrap()
        .clone();
    let verdict = small_verdict["verdict"].as_str().unwrap_or_default();
    if small_verdict["learned_concurrency"] != 1 || !verdict.ends_with("(learned concurrency 1)") {
        return Err(format!(
            "explain does not say concurrency 1 was learned: {explained}"
        ));
    }
    Ok(())
}
