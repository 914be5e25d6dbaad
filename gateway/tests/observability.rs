//! `/metrics` and the dashboard through the running gateway: series bounded
//! by the config whatever callers send, and the dashboard's page, figures
//! and access rules.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use futures_util::StreamExt;
use rand::Rng;
use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, get, get_with, key_hash, post_with};

/// Sample lines (series) of the exposition.
async fn series(gateway: &Proc) -> Vec<String> {
    let text = String::from_utf8(get(&gateway.url("/metrics")).await.body.to_vec()).unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.rsplit_once(' ').unwrap().0.to_owned())
        .collect()
}

/// The series with a split's reason label (which of `split`,
/// `split-sticky`, `sticky-moved`, `sticky-share` a request met) blanked,
/// duplicates merged; any other reason value is kept as it is.
fn without_split_reason(series: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = series
        .into_iter()
        .map(|s| {
            ["split", "split-sticky", "sticky-moved", "sticky-share"]
                .iter()
                .fold(s, |s, reason| {
                    s.replace(&format!("reason=\"{reason}\""), "reason=\"<split>\"")
                })
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// `count` requests with random model names, sessions, users, metadata
/// and headers, 32 at a time.
async fn random_traffic(gateway: &Proc, count: usize) {
    let url = gateway.url("/v1/chat/completions");
    futures_util::stream::iter(0..count)
        .for_each_concurrent(32, |i| {
            let url = url.clone();
            async move {
                let (model, session, header, user) = {
                    let mut rng = rand::rng();
                    let n: u64 = rng.random();
                    let model = match i % 3 {
                        0 => format!("model-{n:x}"),
                        1 => "auto".to_owned(),
                        _ => "small".to_owned(),
                    };
                    (
                        model,
                        format!("s-{:x}", rng.random::<u64>()),
                        format!("x-random-{}", n % 1000),
                        format!("u-{n}"),
                    )
                };
                let body = json!({
                    "model": model, "max_tokens": 4, "user": user,
                    "metadata": {"session": session.clone()},
                    "messages": [{"role": "user", "content": format!("hello {i}")}],
                });
                let reply =
                    post_with(&url, &body, &[("x-session-id", &session), (&header, "v")]).await;
                assert!(
                    matches!(reply.status.as_u16(), 200 | 404),
                    "{}",
                    reply.status
                );
            }
        })
        .await;
}

/// A gateway over a small and a large simulated backend, `auto` splitting
/// `small_share` percent to the small one.
fn small_and_large(small_share: u32) -> Proc {
    GatewayBuilder::new()
        .in_process_sim(
            "small",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .in_process_sim(
            "large",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
        .split(
            "auto",
            &[("small", small_share), ("large", 100 - small_share)],
        )
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_series_stay_flat_whatever_callers_send() {
    let gateway = small_and_large(80);
    // Every series the traffic can make, made once (decode drift needs a
    // baseline of calls on each backend first). Which of the split's
    // reasons a run happens to meet is chance (`sticky-share` comes about
    // once in hundreds of requests), and the reason is one of the router's
    // fixed words, never the caller's, so series are compared with it
    // checked and set aside.
    random_traffic(&gateway, 3_000).await;
    let before = without_split_reason(series(&gateway).await);
    random_traffic(&gateway, 10_000).await;
    let after = without_split_reason(series(&gateway).await);
    assert_eq!(
        before.len(),
        after.len(),
        "new series: {:?}",
        after
            .iter()
            .filter(|s| !before.contains(s))
            .collect::<Vec<_>>()
    );
    assert!(
        after
            .iter()
            .all(|s| !s.contains("model-") && !s.contains("s-") && !s.contains("x-random"))
    );
}

/// Each call counts once in its backend's per-route series, whatever its
/// reason, under its route's name or `direct` (the series' handles are
/// kept per backend after their first use, so later calls count in them
/// too).
#[tokio::test]
async fn each_call_counts_once_under_its_route_and_backend() {
    let gateway = small_and_large(50);
    let url = gateway.url("/v1/chat/completions");
    let mut served = std::collections::BTreeMap::<(String, String), f64>::new();
    for (i, model) in ["auto", "small", "auto", "auto", "small", "auto", "large"]
        .iter()
        .enumerate()
    {
        let body = json!({"model": model, "max_tokens": 4,
            "messages": [{"role": "user", "content": format!("hello {i}")}]});
        let reply = post_with(&url, &body, &[]).await;
        assert_eq!(reply.status, 200);
        let route = if *model == "auto" { "auto" } else { "direct" };
        let backend = reply.header("x-switchyard-backend").unwrap().to_owned();
        *served.entry((route.to_owned(), backend)).or_default() += 1.0;
    }
    let text = String::from_utf8(get(&gateway.url("/metrics")).await.body.to_vec()).unwrap();
    let mut counted = std::collections::BTreeMap::<(String, String), f64>::new();
    for line in text.lines() {
        let Some(labels) = line.strip_prefix("switchyard_routed_requests_total{") else {
            continue;
        };
        let (labels, value) = labels.rsplit_once("} ").unwrap();
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .unwrap()
                .trim_end_matches('"')
                .to_owned()
        };
        assert_eq!(label("outcome"), "ok", "{line}");
        *counted
            .entry((label("route"), label("backend")))
            .or_default() += value.parse::<f64>().unwrap();
    }
    assert_eq!(counted, served, "{text}");
}

const ADMIN: &str = "sk-admin-obs";
const ALICE: &str = "sk-alice-obs";

fn basic(key: &str) -> String {
    use base64::Engine;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("admin:{key}"))
    )
}

#[tokio::test]
async fn the_dashboard_needs_the_admin_key_when_auth_is_on_and_draws_from_the_ledger() {
    let gateway = GatewayBuilder::new()
        .in_process_sim("small", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .in_process_sim("large", "cloud", &format!("preset: large, {FAST_SIM_FIELDS}"))
        .split("auto", &[("small", 50), ("large", 50)])
        .section(&format!(
            "auth:\n  admin_key_hash: \"{}\"\n  teams:\n    research: {{}}\n  keys:\n    - {{name: alice, hash: \"{}\", team: research}}\n",
            key_hash(ADMIN),
            key_hash(ALICE)
        ))
        .start();
    let bearer = format!("Bearer {ALICE}");
    for i in 0..10 {
        let body = json!({"model": "auto", "max_tokens": 8, "stream": i % 2 == 0, "messages": [{"role": "user", "content": "hi"}]});
        let reply = post_with(
            &gateway.url("/v1/chat/completions"),
            &body,
            &[("authorization", &bearer)],
        )
        .await;
        assert_eq!(reply.status, 200);
    }

    // The page: a browser is asked for the key; a model key is not it.
    let refused = get(&gateway.url("/dashboard")).await;
    assert_eq!(refused.status, 401);
    assert!(
        refused
            .header("www-authenticate")
            .unwrap()
            .starts_with("Basic realm=\"switchyard\"")
    );
    assert_eq!(
        get_with(
            &gateway.url("/dashboard"),
            &[("authorization", &basic(ALICE))]
        )
        .await
        .status,
        401
    );
    let page = get_with(
        &gateway.url("/dashboard"),
        &[("authorization", &basic(ADMIN))],
    )
    .await;
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("default-src 'self'")
    );
    let script = get_with(
        &gateway.url("/dashboard/vendor/uPlot.iife.min.js"),
        &[("authorization", &basic(ADMIN))],
    )
    .await;
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(
        get_with(
            &gateway.url("/dashboard/missing.js"),
            &[("authorization", &basic(ADMIN))]
        )
        .await
        .status,
        404
    );

    // The figures: the admin key only; the window checked.
    let stats_url = gateway.url("/admin/stats?window=1h");
    assert_eq!(
        get_with(&stats_url, &[("authorization", &bearer)])
            .await
            .status,
        401
    );
    let bad = get_with(
        &gateway.url("/admin/stats?window=2h"),
        &[("authorization", &format!("Bearer {ADMIN}"))],
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(bad.error()["param"], "window");
    // The rows reach the ledger in groups: wait for all ten.
    let mut stats = Value::Null;
    for _ in 0..50 {
        stats = get_with(&stats_url, &[("authorization", &basic(ADMIN))])
            .await
            .json();
        if stats["totals"]["requests"] == 10 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(stats["totals"]["requests"], 10, "{stats:#}");
    assert_eq!(stats["totals"]["errors"], 0);
    assert_eq!(
        stats["buckets"].as_array().unwrap().len(),
        61,
        "a minute each, the last holding now"
    );
    let split: u64 = stats["split"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| {
            s["calls"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
        })
        .sum();
    assert_eq!(split, 10);
    assert_eq!(stats["top_keys"][0]["name"], "alice");
    assert_eq!(stats["top_keys"][0]["team"], "research");
    assert_eq!(stats["top_keys"][0]["requests"], 10);
    let ledger_cost: f64 = gateway
        .ledger()
        .query_row("SELECT SUM(cost_usd) FROM requests", [], |r| r.get(0))
        .unwrap();
    let cost = stats["totals"]["cost_usd"].as_f64().unwrap();
    assert!(
        (cost - ledger_cost).abs() < 1e-12,
        "{cost} vs {ledger_cost}"
    );
    let cumulated: f64 = ["cloud_usd", "local_usd"]
        .iter()
        .flat_map(|k| {
            stats["spend"][k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
        })
        .sum();
    assert!((cumulated - cost).abs() < 1e-12);
    let backends = stats["backends"].as_array().unwrap();
    assert_eq!(backends.len(), 2);
    assert!(backends.iter().all(|b| b["breaker"] == "closed"));
    assert_eq!(
        backends
            .iter()
            .map(|b| b["requests"].as_u64().unwrap())
            .sum::<u64>(),
        10
    );
    // The admin API's other reports still want the admin key itself, and
    // a browser's Basic credential opens only the dashboard's reads.
    assert_eq!(
        get_with(&gateway.url("/admin/spend"), &[("authorization", &bearer)])
            .await
            .status,
        401
    );
    assert_eq!(
        get_with(
            &gateway.url("/admin/spend"),
            &[("authorization", &basic(ADMIN))]
        )
        .await
        .status,
        401
    );
    let reload = support::request(
        http::Method::POST,
        &gateway.url("/admin/reload"),
        &[("authorization", &basic(ADMIN))],
        Vec::new(),
        false,
    )
    .await;
    assert_eq!(reload.status, 401);
}

#[tokio::test]
async fn with_keys_but_no_admin_key_the_dashboard_says_why_it_stays_shut() {
    let gateway = GatewayBuilder::new()
        .in_process_sim(
            "small",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: alice, hash: \"{}\"}}\n",
            key_hash(ALICE)
        ))
        .start();
    let page = get(&gateway.url("/dashboard")).await;
    assert_eq!(page.status, 403);
    assert!(
        page.header("www-authenticate").is_none(),
        "no password would do"
    );
    assert!(
        page.error()["message"]
            .as_str()
            .unwrap()
            .contains("admin_key_hash")
    );
}

#[tokio::test]
async fn with_auth_off_the_dashboard_is_open_and_the_rest_of_the_admin_api_is_not() {
    let gateway = GatewayBuilder::new()
        .in_process_sim(
            "small",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    assert_eq!(get(&gateway.url("/dashboard")).await.status, 200);
    assert_eq!(
        get(&gateway.url("/admin/stats")).await.json()["window"],
        "1h"
    );
    assert_eq!(get(&gateway.url("/admin/spend")).await.status, 401);
}

/// `SWITCHYARD_LOG_FORMAT=json`: every log line is one JSON object, and a
/// request's line carries its route, backend, status and cost as fields,
/// inside the request's span, whole or streamed: the line is written after
/// the answer has gone out, from work queued inside the span. The span's
/// `id` is the gateway's own, which the answer's `x-request-id` carries
/// unless the caller sent a plain id of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_per_line() {
    let log = support::unique_path("json.log");
    let gateway = GatewayBuilder::new()
        .env("SWITCHYARD_LOG_FORMAT", "json")
        .in_process_sim(
            "small",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("small", 1)])
        .start_logging("info", Some(&log));
    let whole =
        json!({"model": "auto", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]});
    let mut streamed = whole.clone();
    streamed["stream"] = json!(true);
    let mut ids = Vec::new();
    for body in [&whole, &streamed] {
        let reply = post_with(&gateway.url("/v1/chat/completions"), body, &[]).await;
        assert_eq!(reply.status, 200);
        ids.push(reply.header("x-request-id").unwrap().to_owned());
    }
    let mut lines = Vec::new();
    let found = support::eventually(async || {
        lines = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        lines
            .iter()
            .filter(|l| l.contains("switchyard::request"))
            .count()
            == 2
    })
    .await;
    assert!(found, "{lines:?}");
    for line in &lines {
        let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            value["level"].is_string() && value["timestamp"].is_string(),
            "{line}"
        );
    }
    let requests: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["target"] == "switchyard::request")
        .collect();
    for request in &requests {
        let fields = &request["fields"];
        assert_eq!(
            (&fields["route"], &fields["backend"], &fields["status"]),
            (&json!("auto"), &json!("small"), &json!("ok"))
        );
        assert_eq!(request["span"]["name"], "request", "{request}");
    }
    let mut logged: Vec<&str> = requests
        .iter()
        .filter_map(|r| r["span"]["id"].as_str())
        .collect();
    logged.sort_unstable();
    ids.sort_unstable();
    assert_eq!(logged, ids);
    let _ = std::fs::remove_file(&log);
}

/// A backend's failure is told to the caller in fixed words; its own words,
/// with secrets taken out, are on the failing call's `info` log line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_calls_log_line_carries_the_upstream_error_redacted() {
    const BODY: &str = r#"{"error": {"message": "database down at db-7; key sk-proj-ABCDEF1234567890abcdefXYZ", "type": "server_error"}}"#;
    // The call and its retry.
    let (server, _seen) = support::canned_server(2, "500 Internal Server Error", BODY).await;
    let log = support::unique_path("upstream.log");
    let gateway = GatewayBuilder::new()
        .env("SWITCHYARD_LOG_FORMAT", "json")
        .backend_yaml(&format!(
            "  plain:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1'}}\n"
        ))
        .start_logging("info", Some(&log));
    let body =
        json!({"model": "plain", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]});
    let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
    assert_eq!(reply.status, 502);
    let told = String::from_utf8_lossy(&reply.body).into_owned();
    assert!(!told.contains("database down"), "{told}");
    let mut failed = Vec::new();
    let found = support::eventually(async || {
        failed = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["target"] == "switchyard::request")
            .collect();
        failed.len() == 2
    })
    .await;
    assert!(found, "{failed:?}");
    for line in &failed {
        let error = line["fields"]["error"].as_str().unwrap_or_default();
        assert_eq!(line["fields"]["status"], "upstream_error", "{line}");
        assert!(
            error.contains("500") && error.contains("database down at db-7"),
            "{line}"
        );
        assert!(
            !error.contains("ABCDEF1234567890"),
            "the key is taken out: {line}"
        );
    }
    let _ = std::fs::remove_file(&log);
}
