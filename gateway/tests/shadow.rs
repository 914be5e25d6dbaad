//! Shadow traffic through the running gateway: the caller is always
//! answered by the route's own backend, every sampled copy leaves one
//! priced shadow row beside the served one, and the comparison (admin API
//! and CLI) counts them, with the answers' agreement, the candidate's
//! failures, its queue and its budget.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{
    FAST_SIM_FIELDS, GatewayBuilder, Proc, eventually, get_with, key_hash, ledger_rows, metric,
    post_with,
};

const ADMIN: &str = "sk-admin-shadow";
const ALICE: &str = "sk-alice-shadow";

fn auth() -> String {
    format!(
        "auth:\n  admin_key_hash: \"{}\"\n  keys:\n    - {{name: alice, hash: \"{}\"}}\n",
        key_hash(ADMIN),
        key_hash(ALICE)
    )
}

/// A route that splits everything to `mid`, with `shadow` (YAML flow map).
fn shadowed(shadow: &str) -> String {
    format!("strategy:\n  split:\n    weights: {{mid: 1}}\nshadow: {shadow}")
}

async fn ask(gateway: &Proc, model: &str, i: usize, stream: bool) -> support::Reply {
    let body = json!({
        "model": model, "max_tokens": 12, "stream": stream,
        "messages": [{"role": "user", "content": format!("question number {i}")}],
    });
    post_with(
        &gateway.url("/v1/chat/completions"),
        &body,
        &[("authorization", &format!("Bearer {ALICE}"))],
    )
    .await
}

/// How many shadow rows the ledger holds for `backend` now.
fn shadow_rows(gateway: &Proc, backend: &str) -> usize {
    let rows: i64 = gateway
        .ledger()
        .query_row(
            "SELECT count(*) FROM requests WHERE reason = 'shadow' AND backend = ?1",
            [backend],
            |r| r.get(0),
        )
        .expect("the ledger answers");
    usize::try_from(rows).unwrap_or_default()
}

async fn compare(gateway: &Proc, query: &str) -> Value {
    let reply = get_with(
        &gateway.url(&format!("/admin/compare?{query}")),
        &[("authorization", &format!("Bearer {ADMIN}"))],
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.json()
}

fn line<'a>(report: &'a Value, route: &str) -> &'a Value {
    report["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["route"] == route)
        .unwrap_or_else(|| panic!("no line for {route}: {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_answered_by_its_route_and_the_comparison_counts_every_copy() {
    let gateway = GatewayBuilder::new()
        .in_process_sim("mid", "mid", &format!("preset: small, {FAST_SIM_FIELDS}"))
        // The same model (same seed: the same answers), slower to start.
        .in_process_sim(
            "twin",
            "mid",
            "preset: small, base_ttft_ms: 150, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0",
        )
        // Another model: other answers.
        .in_process_sim("other", "mid", &format!("preset: small, seed: 7, {FAST_SIM_FIELDS}"))
        .route("auto", &shadowed("{backend: twin, sample: 1.0}"))
        .route("code", &shadowed("{backend: other, sample: 1.0}"))
        .section(&auth())
        .start();
    for i in 0..30 {
        let reply = ask(&gateway, "auto", i, i % 2 == 0).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
        assert_eq!(reply.header("x-switchyard-reason"), Some("split"));
    }
    for i in 0..10 {
        let reply = ask(&gateway, "code", i, false).await;
        assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
    }
    // Each copy is a row of its own under the request's id, priced and
    // billed to nobody; the served row stays the only one with the key.
    let copies = ledger_rows(
        &gateway,
        "SELECT s.backend, s.key IS NULL, s.status, p.backend, p.key
         FROM requests s JOIN requests p ON p.request_id = s.request_id AND p.reason != 'shadow'
         WHERE s.reason = 'shadow' AND s.shadow = 1",
        40,
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, bool>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        },
    )
    .await;
    for (candidate, keyless, status, served, key) in &copies {
        assert!(candidate == "twin" || candidate == "other");
        assert!(*keyless, "a copy is not the caller's");
        assert_eq!(
            (status.as_str(), served.as_str(), key.as_str()),
            ("ok", "mid", "alice")
        );
    }
    let report = compare(&gateway, "since=1h").await;
    let twin = line(&report, "auto");
    assert_eq!(
        (&twin["candidate"], &twin["served_by"], &twin["requests"]),
        (&json!("twin"), &json!("mid"), &json!(30))
    );
    // The same seed gives the same answers.
    assert_eq!(twin["agreement_exact"], 1.0);
    assert_eq!(twin["agreement"], 1.0);
    // Half the requests streamed: first tokens measured on both sides.
    let (candidate_p50, served_p50) = (
        twin["ttft_p50_ms"].as_f64().unwrap(),
        twin["served"]["ttft_p50_ms"].as_f64().unwrap(),
    );
    assert!(candidate_p50 > served_p50, "{twin}");
    assert!(twin["decode_tokens_per_s"].as_f64().is_some());
    let other = line(&report, "code");
    assert_eq!(other["requests"], 10);
    assert!(other["agreement_exact"].as_f64().unwrap() < 1.0, "{other}");
    assert!(other["agreement"].as_f64().unwrap() < 1.0, "{other}");
    let only = compare(&gateway, "since=1h&route=code").await;
    assert_eq!(only["lines"].as_array().unwrap().len(), 1);
    assert_eq!(
        metric(
            &gateway,
            "switchyard_shadow_copies_total{route=\"auto\",candidate=\"twin\",outcome=\"sent\"}"
        )
        .await,
        30.0
    );
    // Reports of what served leave the copies out: the spend per key is
    // the caller's own calls.
    let spend = get_with(
        &gateway.url("/admin/spend?since=1h&by=key"),
        &[("authorization", &format!("Bearer {ADMIN}"))],
    )
    .await
    .json();
    let alice = spend["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["group"] == "alice")
        .unwrap();
    assert_eq!(alice["requests"], 40);

    let mut gateway = gateway;
    let config = gateway.config_path().to_owned();
    let dir = gateway.dir.clone();
    gateway.terminate();
    let run = |format: &str| {
        support::report(
            Some(&dir),
            &config,
            &["compare", "--since", "1d", "--format", format],
        )
    };
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(line(&json, "auto")["requests"], 30);
    let table = run("table");
    assert!(
        table.contains("candidate") && table.contains("twin") && table.contains("served"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_full_candidate_never_touches_the_caller() {
    let gateway = GatewayBuilder::new()
        .in_process_sim("mid", "mid", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .in_process_sim(
            "broken",
            "mid",
            &format!("preset: small, {FAST_SIM_FIELDS}, faults: {{error_rate: 1.0}}"),
        )
        .in_process_sim(
            "slow",
            "mid",
            "preset: small, base_ttft_ms: 1500, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0",
        )
        .route("auto", &shadowed("{backend: broken, sample: 1.0}"))
        .route("busy", &shadowed("{backend: slow, sample: 1.0, max_concurrency: 1, queue: 1}"))
        .section(&auth())
        .start();
    let auto_copies = |outcome: &'static str| {
        let gateway = &gateway;
        async move {
            let series = format!(
                "switchyard_shadow_copies_total{{route=\"auto\",candidate=\"broken\",outcome=\"{outcome}\"}}"
            );
            metric(gateway, &series).await
        }
    };
    for i in 0..10 {
        let reply = ask(&gateway, "auto", i, i % 2 == 0).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
        // Each copy is done (counted, and its row written after its call
        // told the breaker) before the next request is offered one: the
        // caller never waits for copies, so without this the ten requests
        // could all be offered before the first copy had failed.
        let settled = eventually(async || {
            let sent = auto_copies("sent").await;
            let taken = sent + auto_copies("breaker_open").await;
            taken == (i + 1) as f64 && shadow_rows(&gateway, "broken") == sent as usize
        })
        .await;
        assert!(settled, "copy {i} did not settle");
    }
    // Eight at once on a lane that runs one copy and holds one waiting;
    // each copy takes 1.5 s there, so the eight overlap on a loaded machine.
    let replies =
        futures_util::future::join_all((0..8).map(|i| ask(&gateway, "busy", i, true))).await;
    for reply in &replies {
        assert_eq!(reply.status, 200);
        assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
    }
    // The failing candidate's breaker opens after a few failed copies:
    // from then on its copies are dropped and counted, not sent.
    let sent = auto_copies("sent").await;
    let held_off = auto_copies("breaker_open").await;
    assert_eq!(sent + held_off, 10.0);
    assert!(held_off >= 1.0, "{held_off}");
    let failed = ledger_rows(
        &gateway,
        "SELECT status FROM requests WHERE reason = 'shadow' AND backend = 'broken'",
        sent as usize,
        |r| r.get::<_, String>(0),
    )
    .await;
    assert!(failed.iter().all(|s| s != "ok"), "{failed:?}");
    let report = compare(&gateway, "since=1h&route=auto").await;
    let broken = line(&report, "auto");
    assert_eq!(broken["requests"], json!(sent as u64));
    assert_eq!(broken["candidate_failed"], json!(sent as u64));
    // Advise reads the same comparison: a candidate that fails is kept out.
    let advice = get_with(
        &gateway.url("/admin/advice?since=1h"),
        &[("authorization", &format!("Bearer {ADMIN}"))],
    )
    .await
    .json();
    let trial = advice["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["candidate"] == "broken")
        .unwrap();
    assert_eq!(trial["replace"], false);
    assert!(
        trial["verdict"]
            .as_str()
            .unwrap()
            .starts_with("keep mid over broken (it failed"),
        "{trial}"
    );
    // Copies past the lane's two places were dropped and counted.
    let dropped = metric(
        &gateway,
        "switchyard_shadow_copies_total{route=\"busy\",candidate=\"slow\",outcome=\"queue_full\"}",
    )
    .await;
    assert!(dropped >= 1.0, "{dropped}");
    // Every copy taken is a row: those sent and none else.
    let sent = 8.0 - dropped;
    let rows = ledger_rows(
        &gateway,
        "SELECT backend FROM requests WHERE reason = 'shadow' AND backend = 'slow'",
        sent as usize,
        |r| r.get::<_, String>(0),
    )
    .await;
    assert_eq!(rows.len() as f64, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shadow_budget_holds_the_copies_spend_and_a_shutdown_lets_them_finish() {
    // The candidate is a priced cloud model; the route's copies may spend
    // $0.002 a day. Each copy reserves its worst case, as a caller's budget
    // would (about $0.0002 here), so some copies go and the rest are
    // refused.
    let mut gateway = GatewayBuilder::new()
        .server("shutdown_grace_ms: 10000")
        .in_process_sim("mid", "mid", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .in_process_sim(
            "cloudy",
            "cloud",
            "preset: large, base_ttft_ms: 300, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0",
        )
        .route("auto", &shadowed("{backend: cloudy, sample: 1.0, daily_usd: 0.002}"))
        .section(&auth())
        .start();
    for i in 0..30 {
        let reply = ask(&gateway, "auto", i, false).await;
        assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
    }
    let refused = metric(
        &gateway,
        "switchyard_shadow_copies_total{route=\"auto\",candidate=\"cloudy\",outcome=\"over_budget\"}",
    )
    .await;
    assert!(refused >= 1.0, "{refused}");
    // Stopped while copies are still running (each takes 300 ms to start):
    // they finish within the grace and are written.
    let dir = gateway.dir.clone();
    gateway.terminate();
    let ledger = rusqlite::Connection::open(dir.join("switchyard-ledger.db")).unwrap();
    let (copies, spent, unfinished): (i64, f64, i64) = ledger
        .query_row(
            "SELECT COUNT(*), SUM(cost_usd), SUM(status != 'ok') FROM requests WHERE reason = 'shadow'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    assert_eq!(copies as f64, 30.0 - refused);
    assert!(spent > 0.0 && spent <= 0.002, "{spent}");
    assert_eq!(unfinished, 0);
}
