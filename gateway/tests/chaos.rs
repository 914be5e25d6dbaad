//! Chaos: two simulated backends (real `switchyard sim` servers over HTTP)
//! that answer 20% of requests with a 500, cut 20% mid-answer (a reset) and
//! stall 20% past the gateway's first-byte timeout. 2,000 requests at
//! concurrency 64 over every dialect, streamed and whole. Every client must
//! get a whole answer or an error in its dialect (a stream that breaks ends
//! with an error event, never a silent cut), the ledger must have one row
//! per request, the breakers must open and close again, and nothing may
//! panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::collections::HashSet;

use futures_util::StreamExt;
use serde_json::{Value, json};
use support::{GatewayBuilder, Proc, Reply, get, post_with};

const REQUESTS: usize = 2_000;
const CONCURRENCY: usize = 64;

fn chaotic_sim() -> Proc {
    support::fast_sim(&[
        "seed=7",
        "max_concurrency=256",
        "decode_tokens_per_s=2000",
        "faults.error_rate=0.2",
        "faults.reset_rate=0.2",
        "faults.stall_rate=0.2",
        "faults.stall_ms=1500",
    ])
}

#[derive(Clone, Copy, Debug)]
enum Dialect {
    Chat,
    Completions,
    Messages,
    Responses,
}

const DIALECTS: [Dialect; 4] = [
    Dialect::Chat,
    Dialect::Completions,
    Dialect::Messages,
    Dialect::Responses,
];

impl Dialect {
    fn path(self) -> &'static str {
        match self {
            Dialect::Chat => "/v1/chat/completions",
            Dialect::Completions => "/v1/completions",
            Dialect::Messages => "/v1/messages",
            Dialect::Responses => "/v1/responses",
        }
    }

    fn body(self, stream: bool) -> Value {
        let text = "tell me about trains";
        match self {
            Dialect::Chat => json!({"model": "auto", "stream": stream, "max_tokens": 24,
                "messages": [{"role": "user", "content": text}]}),
            Dialect::Completions => {
                json!({"model": "auto", "stream": stream, "max_tokens": 24, "prompt": text})
            }
            Dialect::Messages => json!({"model": "auto", "stream": stream, "max_tokens": 24,
                "messages": [{"role": "user", "content": text}]}),
            Dialect::Responses => json!({"model": "auto", "stream": stream,
                "max_output_tokens": 24, "input": text}),
        }
    }

    /// Whether a 200's whole body is a complete answer of this dialect.
    fn is_whole_answer(self, body: &Value) -> bool {
        match self {
            Dialect::Chat => body["choices"][0]["message"].is_object(),
            Dialect::Completions => body["choices"][0]["text"].is_string(),
            Dialect::Messages => body["type"] == "message" && body["content"].is_array(),
            Dialect::Responses => body["object"] == "response" && body["output"].is_array(),
        }
    }

    /// Whether a stream's last event ends it: complete, or an error event.
    fn ends_properly(self, last: &str) -> bool {
        if last == "[DONE]" {
            return matches!(self, Dialect::Chat | Dialect::Completions);
        }
        let Ok(event) = serde_json::from_str::<Value>(last) else {
            return false;
        };
        match self {
            Dialect::Chat | Dialect::Completions => event["error"]["message"].is_string(),
            Dialect::Messages => {
                event["type"] == "message_stop"
                    || (event["type"] == "error" && event["error"]["message"].is_string())
            }
            Dialect::Responses => matches!(
                event["type"].as_str(),
                Some("response.completed" | "response.failed" | "response.incomplete" | "error")
            ),
        }
    }

    /// Whether an error body is in this dialect's shape.
    fn is_error(self, body: &Value) -> bool {
        match self {
            Dialect::Messages => body["type"] == "error" && body["error"]["message"].is_string(),
            _ => body["error"]["message"].is_string() && body["error"]["type"].is_string(),
        }
    }
}

/// The `data:` payloads of an SSE body, named events (`event: ...` first)
/// included.
fn payloads(reply: &Reply) -> Vec<String> {
    String::from_utf8_lossy(&reply.body)
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|line| line.strip_prefix("data: ")))
        .map(str::to_owned)
        .collect()
}

/// What went wrong with one answer, if anything.
fn check(dialect: Dialect, stream: bool, reply: &Reply) -> Result<(), String> {
    let text = String::from_utf8_lossy(&reply.body);
    if reply.status != 200 {
        let body: Value = serde_json::from_slice(&reply.body)
            .map_err(|_| format!("{} with a body that is not JSON: {text}", reply.status))?;
        return if dialect.is_error(&body) {
            Ok(())
        } else {
            Err(format!(
                "{} not in the {dialect:?} error shape: {text}",
                reply.status
            ))
        };
    }
    if stream {
        let events = payloads(reply);
        let last = events
            .last()
            .ok_or_else(|| format!("empty stream: {text}"))?;
        return if dialect.ends_properly(last) {
            Ok(())
        } else {
            Err(format!("stream cut without an end or error event: {text}"))
        };
    }
    let body: Value =
        serde_json::from_slice(&reply.body).map_err(|_| format!("200 that is not JSON: {text}"))?;
    if dialect.is_whole_answer(&body) {
        Ok(())
    } else {
        Err(format!("200 that is not a whole answer: {text}"))
    }
}

async fn metric_sum(gateway: &Proc, name: &str) -> f64 {
    let text = String::from_utf8_lossy(&get(&gateway.url("/metrics")).await.body).into_owned();
    text.lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with('{'))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_gets_an_answer_or_an_error_in_its_dialect_under_chaos() {
    let (a, b) = (chaotic_sim(), chaotic_sim());
    let log = support::unique_path("chaos.log");
    let extra = [
        "timeouts: {first_byte_ms: 500}",
        "breaker: {failures: 5, cooldown_ms: 200}",
    ];
    let gateway = GatewayBuilder::new()
        .server("max_concurrent_requests: 256")
        .openai("a", "small", &a.base_url(), &extra)
        .openai("b", "mid", &b.base_url(), &extra)
        // No retries or fallbacks: each request is exactly one backend call
        // (or one refusal), so one ledger row.
        .route(
            "auto",
            "strategy:\n  split:\n    weights: {a: 50, b: 50}\nretries: 0",
        )
        .start_logging("warn", Some(&log));
    let gateway = &gateway;
    let outcomes: Vec<(usize, Dialect, bool, Reply)> = futures_util::stream::iter(0..REQUESTS)
        .map(|i| async move {
            let dialect = DIALECTS[i % DIALECTS.len()];
            let stream = (i / DIALECTS.len()) % 2 == 1;
            let reply = post_with(
                &gateway.url(dialect.path()),
                &dialect.body(stream),
                &[("anthropic-version", "2023-06-01")],
            )
            .await;
            (i, dialect, stream, reply)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;

    let problems: Vec<String> = outcomes
        .iter()
        .filter_map(|(i, dialect, stream, reply)| {
            check(*dialect, *stream, reply)
                .err()
                .map(|e| format!("#{i} {dialect:?} stream={stream}: {e}"))
        })
        .collect();
    assert!(
        problems.is_empty(),
        "{} of {REQUESTS} answers were wrong, first ones:\n{}",
        problems.len(),
        problems[..problems.len().min(5)].join("\n")
    );
    let ok = outcomes.iter().filter(|(.., r)| r.status == 200).count();
    let cut = outcomes
        .iter()
        .filter(|(_, _, stream, r)| *stream && r.status == 200)
        .filter(|(.., r)| {
            payloads(r)
                .last()
                .is_some_and(|last| last.contains("error"))
        })
        .count();
    // What happened, for the CI log: status and the error's first words.
    let mut kinds = std::collections::BTreeMap::new();
    for (.., r) in &outcomes {
        let body: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
        let message: String = body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        *kinds.entry((r.status.as_u16(), message)).or_insert(0) += 1;
    }
    eprintln!("{REQUESTS} requests, {cut} streams cut mid-way; by status and error: {kinds:?}");
    // The faults really happened, and so did answers.
    assert!(ok > REQUESTS / 5, "only {ok} whole answers");
    assert!(
        ok < REQUESTS * 9 / 10,
        "{ok} answers: the faults did not bite"
    );
    assert!(cut > 0, "no stream was cut mid-way");

    // One ledger row per request, each under the id its answer carried.
    let ids: HashSet<String> = outcomes
        .iter()
        .map(|(.., r)| {
            r.header("x-request-id")
                .expect("every answer has an id")
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), REQUESTS);
    let rows = support::ledger_rows(
        gateway,
        "SELECT request_id FROM requests",
        REQUESTS,
        |row| row.get::<_, String>(0),
    )
    .await;
    let logged: HashSet<String> = rows.into_iter().collect();
    assert_eq!(logged, ids, "the ledger's request ids are the answers' ids");

    // The breakers opened, and closed again after a successful probe.
    assert!(metric_sum(gateway, "switchyard_breaker_opened_total").await >= 2.0);
    assert!(metric_sum(gateway, "switchyard_breaker_closed_total").await >= 2.0);

    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        !logged.contains("panicked"),
        "a panic was logged:\n{logged}"
    );
    let _ = std::fs::remove_file(&log);
}

/// Active health checks: a backend server that goes away is found down by
/// its checks, its breaker opens and the route falls back before any
/// request pays for finding out; `/readyz` says so per backend; when the
/// server is back, the checks close the breaker and it serves again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_checks_take_a_dead_backend_out_and_bring_it_back() {
    let server = support::sim("small", &["base_ttft_ms=1", "jitter=0"]);
    let listen = server.addr.to_string();
    let gateway = GatewayBuilder::new()
        .openai(
            "flaky",
            "small",
            &server.base_url(),
            &["health_check: {interval_ms: 150, unhealthy_after: 2, healthy_after: 1}"],
        )
        .in_process_sim("steady", "small", support::FAST_SIM_FIELDS)
        .route(
            "auto",
            "retries: 0\nstrategy:\n  split:\n    weights: {flaky: 1}\nfallbacks: [steady]",
        )
        .start();
    // A backend's entry in `/readyz` (no keys configured: every detail shown).
    let backend = |name: &'static str| {
        let url = gateway.url("/readyz");
        async move {
            let body = get(&url).await.json();
            body["backends"]
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["name"] == name)
                .cloned()
                .unwrap()
        }
    };
    let ready = || async {
        let flaky = backend("flaky").await;
        (
            flaky["breaker"].as_str().unwrap().to_owned(),
            flaky["health"]["state"].as_str().unwrap_or("-").to_owned(),
        )
    };
    let served_by = || async {
        let reply = support::post_json(
            &gateway.url("/v1/chat/completions"),
            &support::chat("auto", "hi"),
        )
        .await;
        assert_eq!(reply.status, 200);
        reply.header("x-switchyard-backend").unwrap().to_owned()
    };
    assert!(
        support::eventually(async || ready().await == ("closed".into(), "healthy".into())).await
    );
    assert_eq!(served_by().await, "flaky");
    // Without health checks the steady backend has none to show.
    let steady = backend("steady").await;
    assert_eq!(
        (&steady["breaker"], &steady["health"]),
        (&json!("closed"), &Value::Null)
    );

    drop(server);
    assert!(
        support::eventually(async || ready().await == ("open".into(), "unhealthy".into())).await,
        "{:?}",
        ready().await
    );
    let flaky = backend("flaky").await;
    assert!(flaky["health"]["last_error"].as_str().is_some(), "{flaky}");
    let body = get(&gateway.url("/readyz")).await.json();
    assert_eq!(body["status"], "ready");
    // Requests go to the fallback without trying the dead server first.
    for _ in 0..3 {
        assert_eq!(served_by().await, "steady");
    }
    let tried: i64 = {
        let mut count = 0;
        let ledger = gateway.ledger();
        support::eventually(async || {
            count = ledger
                .query_row(
                    "SELECT COUNT(*) FROM requests WHERE backend = 'steady'",
                    [],
                    |r| r.get(0),
                )
                .unwrap_or(0);
            count == 3
        })
        .await;
        ledger
            .query_row(
                "SELECT COUNT(*) FROM requests WHERE backend = 'flaky' AND status != 'ok'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert_eq!(tried, 0, "no request paid for finding the server down");

    let _back = support::sim_on(&listen, "small", &["base_ttft_ms=1", "jitter=0"]);
    assert!(
        support::eventually(async || ready().await == ("closed".into(), "healthy".into())).await,
        "{:?}",
        ready().await
    );
    assert_eq!(served_by().await, "flaky");
}
