//! Latency budgets, the latency model, breakers and hedging through the
//! running gateway, against simulators of known speeds.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, chat, get, post_json};

fn long_prompt(tokens: usize) -> String {
    "route ".repeat(tokens)
}

#[tokio::test]
async fn cheapest_within_budget_moves_long_prompts_off_slow_prefill() {
    // Local: free, quick to start, slow prefill (500 tokens/s). Cloud: priced, fast prefill.
    let gateway = GatewayBuilder::new()
        .in_process_sim("local", "mid", "preset: mid, base_ttft_ms: 5, prefill_tokens_per_s: 500, decode_tokens_per_s: 2000, jitter: 0, speculative: {acceptance_rate: 0.5, draft_tokens: 1}")
        .in_process_sim("cloud", "cloud", "preset: large, base_ttft_ms: 40, prefill_tokens_per_s: 100000, decode_tokens_per_s: 2000, jitter: 0")
        .route("chat", "profile: chat\nstrategy:\n  cheapest_within_budget: {candidates: [local, cloud]}")
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut short = chat("chat", "hello");
    short["max_tokens"] = json!(8);
    let reply = post_json(&url, &short).await;
    assert_eq!(reply.header("x-switchyard-backend"), Some("local"));
    assert_eq!(reply.header("x-switchyard-reason"), Some("within-budget"));
    let predicted: f64 = reply
        .header("x-switchyard-predicted-ttft-ms")
        .unwrap()
        .parse()
        .unwrap();
    assert!(predicted < 100.0, "{predicted}");

    // ~1,200 tokens at 500 tokens/s: 2.4 s of prefill, over chat's 1 s.
    let mut long = chat("chat", &long_prompt(1200));
    long["max_tokens"] = json!(8);
    let reply = post_json(&url, &long).await;
    assert_eq!(reply.header("x-switchyard-backend"), Some("cloud"));
    assert_eq!(reply.header("x-switchyard-reason"), Some("within-budget"));
}

#[tokio::test]
async fn a_backend_with_work_queued_is_passed_over_until_it_drains() {
    // Local: free, one request at a time, 100 tokens/s. Cloud: priced, fast.
    let gateway = GatewayBuilder::new()
        .in_process_sim("local", "mid", "preset: mid, base_ttft_ms: 5, prefill_tokens_per_s: 100000, decode_tokens_per_s: 100, max_concurrency: 1, default_max_tokens: 400, jitter: 0")
        .in_process_sim("cloud", "cloud", "preset: large, base_ttft_ms: 40, prefill_tokens_per_s: 100000, decode_tokens_per_s: 2000, jitter: 0")
        .route("chat", "budget: {ttft_ms: 800}\nstrategy:\n  cheapest_within_budget: {candidates: [local, cloud]}")
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut short = chat("chat", "hello");
    short["max_tokens"] = json!(8);
    let idle = post_json(&url, &short).await;
    assert_eq!(idle.header("x-switchyard-backend"), Some("local"));

    // A long answer (300 tokens at 100 tokens/s: 3 s) holds local's slot.
    let mut long = chat("local", "tell me everything");
    long["max_tokens"] = json!(300);
    let busy = tokio::spawn({
        let url = url.clone();
        async move { post_json(&url, &long).await }
    });
    // Until the long answer has taken the slot.
    let mut explained = json!(null);
    let local_queue_ms = |explained: &serde_json::Value| {
        explained["candidates"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["backend"] == "local"))
            .and_then(|local| local["queue_ms"].as_f64())
            .unwrap_or(0.0)
    };
    let busy_seen = support::eventually(async || {
        explained = post_json(&gateway.url("/v1/route/explain"), &short)
            .await
            .json();
        local_queue_ms(&explained) > 800.0
    })
    .await;
    assert!(busy_seen, "{explained}");
    let candidates = explained["candidates"].as_array().unwrap();
    let local = candidates.iter().find(|c| c["backend"] == "local").unwrap();
    assert_eq!(local["within_budget"], false, "{explained}");
    assert!(
        local["verdict"]
            .as_str()
            .unwrap()
            .starts_with("passed over: first token p90"),
        "{explained}"
    );
    let cloud = candidates.iter().find(|c| c["backend"] == "cloud").unwrap();
    assert_eq!(
        cloud["verdict"], "picked: the cheapest within budget",
        "{explained}"
    );
    let queued = post_json(&url, &short).await;
    assert_eq!(queued.header("x-switchyard-backend"), Some("cloud"));
    assert_eq!(queued.header("x-switchyard-reason"), Some("within-budget"));

    // Once the long answer is done, local is idle and cheapest again.
    assert_eq!(busy.await.unwrap().status, 200);
    let drained = post_json(&url, &short).await;
    assert_eq!(drained.header("x-switchyard-backend"), Some("local"));
}

#[tokio::test]
async fn a_backend_that_slows_down_is_reported_as_drift() {
    let speed = |tokens_per_s: u32| {
        [
            "base_ttft_ms=2".to_owned(),
            "prefill_tokens_per_s=1000000".to_owned(),
            format!("decode_tokens_per_s={tokens_per_s}"),
            "jitter=0".to_owned(),
        ]
    };
    let settings = speed(1000);
    let fast = support::sim(
        "small",
        &settings.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let listen = fast.addr.to_string();
    let log = support::unique_path("drift.log");
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &fast.base_url(), &[])
        .start_logging("info", Some(&log));
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("local", "tell me about rivers");
    body["max_tokens"] = json!(64);
    body["stream"] = json!(true);
    for _ in 0..40 {
        assert_eq!(post_json(&url, &body).await.status, 200);
    }
    // The same server, restarted at under a third of the speed.
    drop(fast);
    let settings = speed(300);
    let _slow = support::sim_on(
        &listen,
        "small",
        &settings.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for _ in 0..15 {
        assert_eq!(post_json(&url, &body).await.status, 200);
    }
    let metrics = String::from_utf8(get(&gateway.url("/metrics")).await.body.to_vec()).unwrap();
    let ratio: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_decode_drift_ratio{backend=\"local\"} "))
        .expect("the drift gauge")
        .parse()
        .unwrap();
    assert!(ratio < 0.7, "recent over baseline: {ratio}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.contains("backend drifted from its baseline") && logged.contains("decode speed -"),
        "{logged}"
    );
}

/// The value of one series on `/metrics`.
async fn gauge(gateway: &support::Proc, series: &str) -> Option<f64> {
    let metrics = String::from_utf8(get(&gateway.url("/metrics")).await.body.to_vec()).unwrap();
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn slower_prefill_and_more_failures_are_reported_as_drift() {
    let server = |prefill: u32, error_rate: &str| {
        [
            "base_ttft_ms=2".to_owned(),
            format!("prefill_tokens_per_s={prefill}"),
            "decode_tokens_per_s=5000".to_owned(),
            "jitter=0".to_owned(),
            format!("faults.error_rate={error_rate}"),
        ]
    };
    let settings = server(40_000, "0");
    let fast = support::sim(
        "small",
        &settings.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let listen = fast.addr.to_string();
    let log = support::unique_path("prefill-drift.log");
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &fast.base_url(), &[])
        .start_logging("info", Some(&log));
    let url = gateway.url("/v1/chat/completions");
    // Long prompts, each its own (no simulated prefix cache helps).
    let body = |i: usize| {
        let mut body = chat("local", &format!("{i} {}", "route ".repeat(1500)));
        body["max_tokens"] = json!(8);
        body["stream"] = json!(true);
        body
    };
    for i in 0..40 {
        assert_eq!(post_json(&url, &body(i)).await.status, 200);
    }
    assert_eq!(
        gauge(
            &gateway,
            "switchyard_upstream_error_share{backend=\"local\",window=\"recent\"}"
        )
        .await,
        Some(0.0)
    );
    // The same server, restarted with a fifth of the prefill speed.
    drop(fast);
    let settings = server(8_000, "0");
    let slow = support::sim_on(
        &listen,
        "small",
        &settings.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for i in 40..60 {
        assert_eq!(post_json(&url, &body(i)).await.status, 200);
    }
    let prefill = gauge(
        &gateway,
        "switchyard_prefill_drift_ratio{backend=\"local\"}",
    )
    .await
    .unwrap();
    assert!(prefill < 0.7, "recent prefill over baseline: {prefill}");
    // And again, now failing every call.
    drop(slow);
    let settings = server(8_000, "1");
    let _failing = support::sim_on(
        &listen,
        "small",
        &settings.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for i in 60..70 {
        post_json(&url, &body(i)).await;
    }
    let recent = gauge(
        &gateway,
        "switchyard_upstream_error_share{backend=\"local\",window=\"recent\"}",
    )
    .await
    .unwrap();
    let baseline = gauge(
        &gateway,
        "switchyard_upstream_error_share{backend=\"local\",window=\"baseline\"}",
    )
    .await
    .unwrap();
    assert!(
        recent - baseline >= 0.1,
        "recent {recent} against baseline {baseline}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("prefill speed -"), "{logged}");
    assert!(logged.contains("failed calls"), "{logged}");
}

#[tokio::test]
async fn a_backend_slower_than_its_hints_loses_traffic() {
    // Claims 10 ms to first token; every request stalls 600 ms.
    let stalling = support::fast_sim(&["faults.stall_rate=1", "faults.stall_ms=600"]);
    let gateway = GatewayBuilder::new()
        .openai("local", "mid", &stalling.base_url(), &["latency: {ttft_ms: 10, prefill_tokens_per_s: 100000, decode_tokens_per_s: 1000}"])
        .in_process_sim("cloud", "cloud", "preset: large, base_ttft_ms: 200, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0")
        .route("chat", "budget: {ttft_ms: 400}\nstrategy:\n  cheapest_within_budget: {candidates: [local, cloud]}")
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut backends = Vec::new();
    for _ in 0..12 {
        // Streamed: only a stream's first token is seen, and so measured.
        let mut body = chat("chat", "hi");
        body["max_tokens"] = json!(4);
        body["stream"] = json!(true);
        backends.push(
            post_json(&url, &body)
                .await
                .header("x-switchyard-backend")
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(
        backends[0], "local",
        "the hints made it look cheapest and fast enough"
    );
    let moved = backends
        .iter()
        .position(|b| b == "cloud")
        .expect("traffic moved");
    assert!(
        moved <= 8,
        "moved after {moved} slow requests: {backends:?}"
    );
    assert!(
        backends[moved..].iter().all(|b| b == "cloud"),
        "{backends:?}"
    );
}

#[tokio::test]
async fn a_failing_backend_trips_its_breaker_and_recovers_through_a_probe() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gateway = GatewayBuilder::new()
        .openai(
            "flaky",
            "small",
            &format!("http://127.0.0.1:{port}/v1"),
            &["breaker: {failures: 3, cooldown_ms: 2000}"],
        )
        .in_process_sim(
            "backup",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .route(
            "auto",
            "retries: 0\nstrategy:\n  split:\n    weights: {flaky: 1}\nfallbacks: [backup]",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    for _ in 0..3 {
        let reply = post_json(&url, &chat("auto", "hi")).await;
        assert_eq!(
            (reply.status.as_u16(), reply.header("x-switchyard-reason")),
            (200, Some("fallback"))
        );
    }
    // Open: the flaky backend is not even tried. Bring it back to life; the
    // open breaker still routes around it until the cooldown ends.
    let revived = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args([
            "sim",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--set",
            "base_ttft_ms=1",
            "--set",
            "decode_tokens_per_s=5000",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut revived = KillOnDrop(revived);
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(revived.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let during = post_json(&url, &chat("auto", "hi")).await;
    assert_eq!(
        during.header("x-switchyard-backend"),
        Some("backup"),
        "open breaker: skipped"
    );
    let stats = get(&format!("http://127.0.0.1:{port}/sim/stats"))
        .await
        .json();
    assert_eq!(stats["requests"], 0, "nothing reached it while open");
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let probe = post_json(&url, &chat("auto", "hi")).await;
    assert_eq!(
        probe.header("x-switchyard-backend"),
        Some("flaky"),
        "half-open: the probe went through and succeeded"
    );
    let after = post_json(&url, &chat("auto", "hi")).await;
    assert_eq!(
        after.header("x-switchyard-backend"),
        Some("flaky"),
        "closed again"
    );
}

struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn hedging_rescues_stalled_requests_and_bills_both_legs() {
    // Every request to `stally` stalls 1.5 s; `steady` answers at once.
    let stally = support::fast_sim(&["faults.stall_rate=1", "faults.stall_ms=1500"]);
    let steady = support::fast_sim(&[]);
    let mut gateway = GatewayBuilder::new()
        .openai("stally", "small", &stally.base_url(), &["latency: {ttft_ms: 20, decode_tokens_per_s: 5000}"])
        .openai("steady", "small", &steady.base_url(), &["latency: {ttft_ms: 20, decode_tokens_per_s: 5000}"])
        .route("auto", "hedge: {enabled: true}\nstrategy:\n  split:\n    weights: {stally: 1}\nfallbacks: [steady]")
        .start();
    let url = gateway.url("/v1/chat/completions");
    for stream in [false, true] {
        // A whole answer is hedged once the whole of it is late: here
        // 16 tokens at 5,000/s after 20 ms.
        let mut body = chat("auto", "hi");
        body["stream"] = json!(stream);
        body["max_tokens"] = json!(16);
        let reply = post_json(&url, &body).await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("x-switchyard-backend"),
            Some("steady"),
            "stream={stream}"
        );
        assert_eq!(reply.header("x-switchyard-reason"), Some("hedge"));
        if stream {
            assert_eq!(reply.events().last().map(String::as_str), Some("[DONE]"));
        }
    }
    // The loser was cancelled: the stalled simulator stops working on it.
    assert!(
        support::eventually(async || get(&stally.url("/sim/stats")).await.json()["active"] == 0)
            .await
    );
    gateway.terminate();
    let rows: Vec<(String, String, bool)> = gateway
        .ledger()
        .prepare("SELECT backend, status, hedge FROM requests ORDER BY id")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(rows.len(), 4, "both legs of both requests: {rows:?}");
    assert!(rows.iter().all(|(_, _, hedge)| *hedge));
    assert_eq!(
        rows.iter()
            .filter(|(b, s, _)| b == "stally" && s == "hedge-lost")
            .count(),
        2,
        "{rows:?}"
    );
}

#[tokio::test]
async fn the_ledger_compares_predicted_and_measured_and_keeps_partial_usage() {
    let resetting = support::fast_sim(&["faults.reset_rate=1"]);
    let mut gateway = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .openai("flaky", "small", &resetting.base_url(), &[])
        .route(
            "strict",
            "retries: 0\nstrategy:\n  split:\n    weights: {flaky: 1}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut measured = chat("local", "measure me");
    measured["stream"] = json!(true);
    post_json(&url, &measured).await;
    let mut body = chat("strict", "cut me off");
    body["stream"] = json!(true);
    let cut = post_json(&url, &body).await;
    let last: Value = serde_json::from_str(cut.events().last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_reset");
    // The streamed answer's prediction error is in the histogram.
    let metrics = String::from_utf8(get(&gateway.url("/metrics")).await.body.to_vec()).unwrap();
    assert!(
        metrics.contains("switchyard_ttft_prediction_error_seconds_count{backend=\"local\"} 1\n"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "switchyard_ttft_prediction_error_seconds_bucket{backend=\"local\",le=\"+Inf\"} 1\n"
    ));
    gateway.terminate();
    let conn = gateway.ledger();
    let (predicted, measured, rate): (Option<f64>, Option<f64>, Option<f64>) = conn
        .query_row("SELECT predicted_ttft_ms, ttft_ms, decode_tokens_per_s FROM requests WHERE backend = 'local'", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert!(predicted.unwrap() > 0.0 && measured.unwrap() > 0.0 && rate.unwrap() > 0.0);
    let (status, output, estimated): (String, i64, bool) = conn
        .query_row(
            "SELECT status, output_tokens, estimated FROM requests WHERE backend = 'flaky'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(status, "upstream_reset");
    assert!(
        estimated && output > 0,
        "the partial answer is counted: {output}"
    );
}

#[tokio::test]
async fn a_bounded_queue_holds_requests_then_refuses() {
    // One slot, one place in the queue; each request takes about a second,
    // so the three (sent 50 ms apart) overlap even on a loaded machine.
    let slow = support::sim(
        "small",
        &["base_ttft_ms=1000", "jitter=0", "decode_tokens_per_s=5000"],
    );
    let gateway = GatewayBuilder::new()
        .openai(
            "one",
            "small",
            &slow.base_url(),
            &["max_concurrency: 1", "max_queue: 1"],
        )
        .start();
    let url = std::sync::Arc::new(gateway.url("/v1/chat/completions"));
    let tasks: Vec<_> = (0..3)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(50 * i)).await;
                let reply = post_json(&url, &chat("one", "hi")).await;
                (
                    reply.status.as_u16(),
                    reply.header("retry-after").map(str::to_owned),
                )
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap());
    }
    // Which of the three came first is the scheduler's: one served, one
    // queued then served, one refused.
    results.sort();
    assert_eq!(
        results,
        [(200, None), (200, None), (503, Some("1".to_owned()))],
        "one slot, one queue place, then full"
    );
}

#[tokio::test]
async fn retryable_failures_are_retried_before_the_first_byte() {
    // A seeded simulator failing half its requests: with five retries, every
    // request gets through (the failures are deterministic per seed).
    let flaky = support::fast_sim(&["faults.error_rate=0.5", "seed=0"]);
    let gateway = GatewayBuilder::new()
        .openai(
            "flaky",
            "small",
            &flaky.base_url(),
            &["breaker: {failures: 100}"],
        )
        .route(
            "auto",
            "retries: 5\nstrategy:\n  split:\n    weights: {flaky: 1}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    for _ in 0..10 {
        let reply = post_json(&url, &chat("auto", "hi")).await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            reply.header("x-switchyard-reason"),
            Some("split"),
            "a retry keeps the reason"
        );
    }
    let served = get(&flaky.url("/sim/stats")).await.json()["requests"]
        .as_u64()
        .unwrap();
    assert!(
        served > 10,
        "some requests needed retries: {served} calls for 10 requests"
    );
}

#[tokio::test]
async fn a_slow_but_normal_whole_answer_is_not_hedged() {
    // About 300 ms of decoding: far past the first-token p90 (20 ms), well
    // inside the whole answer's predicted p90. A whole answer's first token
    // is not seen, so only the whole answer's lateness may start a hedge.
    let slowish = support::fast_sim(&["decode_tokens_per_s=100"]);
    let steady = support::fast_sim(&[]);
    let mut gateway = GatewayBuilder::new()
        .openai(
            "slowish",
            "small",
            &slowish.base_url(),
            &["latency: {ttft_ms: 20, decode_tokens_per_s: 100}"],
        )
        .openai("steady", "small", &steady.base_url(), &["latency: {ttft_ms: 20}"])
        .route("auto", "hedge: {enabled: true}\nstrategy:\n  split:\n    weights: {slowish: 1}\nfallbacks: [steady]")
        .start();
    let mut body = chat("auto", "write a while");
    body["max_tokens"] = json!(30);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("slowish"));
    assert_eq!(reply.header("x-switchyard-reason"), Some("split"));
    gateway.terminate();
    let (rows, hedged, ttft): (i64, i64, Option<f64>) = gateway
        .ledger()
        .query_row(
            "SELECT COUNT(*), SUM(hedge), MAX(ttft_ms) FROM requests",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!((rows, hedged), (1, 0), "one call, not hedged");
    assert_eq!(ttft, None, "a whole answer records no first-token time");
}
