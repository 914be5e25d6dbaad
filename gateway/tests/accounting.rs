//! Keys, rate limits, budgets and the ledger, through the running gateway.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, get, get_with, post_with, priced, short};

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

fn ledger_sum(gateway: &Proc, sql: &str) -> f64 {
    gateway
        .ledger()
        .query_row(sql, [], |row| row.get::<_, Option<f64>>(0))
        .unwrap()
        .unwrap_or(0.0)
}

#[tokio::test]
async fn keys_are_required_checked_and_rate_limited() {
    let gateway = priced("")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: alice, hash: '{}', requests_per_minute: 3}}\n",
            support::key_hash("sk-alice")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let anonymous = post_with(&url, &short("hi", "local"), &[]).await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.error()["code"], "invalid_api_key");
    let wrong = post_with(
        &url,
        &short("hi", "local"),
        &[("authorization", "Bearer sk-mallory")],
    )
    .await;
    assert_eq!(wrong.status, 401);
    for _ in 0..3 {
        let ok = post_with(&url, &short("hi", "local"), &[("x-api-key", "sk-alice")]).await;
        assert_eq!(ok.status, 200);
    }
    let fourth = post_with(
        &url,
        &short("hi", "local"),
        &[("authorization", &bearer("sk-alice"))],
    )
    .await;
    assert_eq!(fourth.status, 429);
    assert_eq!(fourth.error()["code"], "rate_limit_exceeded");
    assert!(
        fourth
            .header("retry-after")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(
        get(&gateway.url("/healthz")).await.status,
        200,
        "probes need no key"
    );
}

#[tokio::test]
async fn spent_budgets_refuse_or_downgrade_and_never_block_local() {
    let budget = |name: &str, on: &str| {
        format!(
            "    - {{name: {name}, hash: '{}', budget: {{daily_usd: 0.25, on_exhausted: {on}}}}}\n",
            support::key_hash(&format!("sk-{name}"))
        )
    };
    let gateway = priced("")
        .section(&format!(
            "auth:\n  keys:\n{}{}",
            budget("bob", "refuse"),
            budget("carol", "downgrade")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let reply = post_with(
            &url,
            &short("hello there", "auto"),
            &[("authorization", &bearer("sk-bob"))],
        )
        .await;
        statuses.push(reply.status.as_u16());
        if reply.status == 429 {
            assert_eq!(reply.error()["type"], "insufficient_quota");
            assert_eq!(reply.error()["code"], "insufficient_quota");
            break;
        }
    }
    assert_eq!(
        statuses.last(),
        Some(&429),
        "the budget ran out: {statuses:?}"
    );
    assert!(
        statuses.iter().filter(|s| **s == 200).count() >= 2,
        "{statuses:?}"
    );
    // A cloud-only budget never blocks the local tier.
    let local = post_with(
        &url,
        &short("hello there", "local"),
        &[("authorization", &bearer("sk-bob"))],
    )
    .await;
    assert_eq!(local.status, 200);

    let mut reasons = Vec::new();
    for _ in 0..12 {
        let reply = post_with(
            &url,
            &short("hello there", "auto"),
            &[("authorization", &bearer("sk-carol"))],
        )
        .await;
        assert_eq!(reply.status, 200, "downgrade instead of refusing");
        reasons.push((
            reply.header("x-switchyard-backend").unwrap().to_owned(),
            reply.header("x-switchyard-reason").unwrap().to_owned(),
        ));
    }
    assert_eq!(
        reasons.last().unwrap(),
        &("local".to_owned(), "budget-downgrade".to_owned()),
        "{reasons:?}"
    );
    assert_eq!(reasons.first().unwrap().0, "cloud");
}

#[tokio::test]
async fn a_thousand_concurrent_requests_cannot_overshoot_a_budget() {
    let mut gateway = priced(", max_concurrency: 1000, max_queue: 1000")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: dave, hash: '{}', budget: {{daily_usd: 0.5}}}}\n",
            support::key_hash("sk-dave")
        ))
        .start();
    let url = Arc::new(gateway.url("/v1/chat/completions"));
    let mut tasks = Vec::new();
    for i in 0..1000 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let body = short(&format!("request {i}"), "auto");
            post_with(&url, &body, &[("authorization", "Bearer sk-dave")])
                .await
                .status
                .as_u16()
        }));
    }
    let mut ok = 0;
    let mut refused = 0;
    for task in tasks {
        match task.await.unwrap() {
            200 => ok += 1,
            429 => refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(ok > 0 && refused > 0, "{ok} served, {refused} refused");
    let status = tokio::task::spawn_blocking(move || {
        let status = gateway.terminate(); // flushes the ledger
        (status, gateway)
    })
    .await
    .unwrap();
    assert!(status.0.success());
    let gateway = status.1;
    let spent = ledger_sum(
        &gateway,
        "SELECT SUM(cost_usd) FROM requests WHERE key = 'dave'",
    );
    // One reservation: the most one request could cost (prompt estimate
    // with margin plus max_tokens, at $1,000 per million).
    let one_reservation = (20.0 * 1.25 + 64.0 + 20.0) * 1000.0 / 1e6;
    assert!(spent <= 0.5 + one_reservation, "spent {spent}");
    let served = ledger_sum(
        &gateway,
        "SELECT COUNT(*) FROM requests WHERE key = 'dave' AND refusal IS NULL",
    );
    assert_eq!(served as u32, ok, "one row per served request");
    let rows = ledger_sum(&gateway, "SELECT COUNT(*) FROM requests WHERE key = 'dave'");
    assert_eq!(rows as u32, 1000, "and one per refused request");
}

#[tokio::test]
async fn streamed_and_whole_requests_cost_the_same() {
    let mut gateway = priced("").start();
    let url = gateway.url("/v1/chat/completions");
    let mut request = short("the same question", "cloud");
    request["seed"] = json!(7);
    post_with(&url, &request, &[("x-request-id", "whole")]).await;
    request["stream"] = json!(true);
    let streamed = post_with(&url, &request, &[("x-request-id", "streamed")]).await;
    assert!(
        streamed.events().iter().all(|e| !e.contains("\"usage\"")),
        "usage not forwarded unasked"
    );
    gateway.terminate();
    let row = |id: &str| {
        gateway
            .ledger()
            .query_row(
                "SELECT input_tokens, output_tokens, cost_usd, counterfactual_usd, estimated FROM requests WHERE client_request_id = ?1",
                [id],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, f64>(2)?, r.get::<_, f64>(3)?, r.get::<_, bool>(4)?)),
            )
            .unwrap()
    };
    let (whole, streamed) = (row("whole"), row("streamed"));
    assert_eq!(whole, streamed);
    assert!(
        whole.2 > 0.0 && !whole.4,
        "priced from reported usage: {whole:?}"
    );
}

/// Streams `sent` to `url` with `x-request-id: id`, reads `frames` frames
/// of the answer, then leaves; returns once the gateway had time to notice.
async fn leave_after_frames(url: &str, sent: &Value, id: &str, frames: usize) {
    let request = http::Request::builder()
        .method("POST")
        .uri(url)
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(http_body_util::Full::new(bytes::Bytes::from(
            serde_json::to_vec(sent).unwrap(),
        )))
        .unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http();
    let response = client.request(request).await.unwrap();
    let mut body = response.into_body();
    for _ in 0..frames {
        http_body_util::BodyExt::frame(&mut body)
            .await
            .unwrap()
            .unwrap();
    }
    drop(body);
    drop(client);
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn a_client_that_leaves_mid_stream_leaves_an_estimated_row() {
    let mut gateway = GatewayBuilder::new()
        .in_process_sim(
            "slow",
            "small",
            "preset: small, base_ttft_ms: 1, decode_tokens_per_s: 5, jitter: 0",
        )
        .start();
    let sent = json!({"model": "slow", "stream": true, "messages": [{"role": "user", "content": "a long story"}]});
    leave_after_frames(&gateway.url("/v1/chat/completions"), &sent, "leaver", 4).await;
    gateway.terminate();
    let (status, input, output, estimated): (String, i64, i64, bool) = gateway
        .ledger()
        .query_row(
            "SELECT status, input_tokens, output_tokens, estimated FROM requests WHERE client_request_id = 'leaver'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(status, "cancelled");
    assert!(estimated);
    // The prompt is counted from the request the record still shares.
    let prompt =
        switchyard_adapters::tokens::count_chat_prompt(&serde_json::from_value(sent).unwrap());
    assert_eq!(input, i64::try_from(prompt).unwrap());
    assert!(output > 0, "the tokens that were streamed are counted");
}

#[tokio::test]
async fn strict_durability_survives_kill_9() {
    let mut gateway = priced(", max_concurrency: 64")
        .section("ledger: {durability: strict}")
        .start();
    let load = support::kill_load::KillLoad::start(&gateway.url("/v1/chat/completions"), 8, "w");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    gateway.kill(); // SIGKILL: no shutdown, no flush
    let completed = load.stop();
    assert!(completed.len() > 20, "load ran: {}", completed.len());
    let conn = gateway.ledger();
    for id in &completed {
        let found: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM requests WHERE client_request_id = ?1",
                [id],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            found, 1,
            "request {id} completed for the client but has no row"
        );
    }
}

#[tokio::test]
async fn spend_reports_split_cloud_local_and_savings() {
    let ledger = support::unique_path("ledger.db");
    let admin = support::key_hash("sk-admin");
    let builder = priced("").section(&format!(
        "ledger: {{path: '{}'}}\naccounting: {{reference_model: gpt-4o}}\nauth:\n  admin_key_hash: '{admin}'\n",
        ledger.display()
    ));
    let config = support::write_temp_config(&builder.yaml());
    let mut gateway = builder.start();
    let url = gateway.url("/v1/chat/completions");
    for model in ["cloud", "local", "local"] {
        assert_eq!(post_with(&url, &short("hi", model), &[]).await.status, 200);
    }
    // Refused before routing: counted apart, under no backend.
    assert_eq!(post_with(&url, &short("hi", "nope"), &[]).await.status, 404);
    let denied = get(&gateway.url("/admin/spend")).await;
    assert_eq!(denied.status, 401);
    // Until the four rows are committed (a whole answer's row is written
    // after the answer, and rows are committed in groups).
    let mut report = Value::Null;
    let complete = support::eventually(async || {
        let reply = get_with(
            &gateway.url("/admin/spend?by=tier&since=1d"),
            &[("authorization", "Bearer sk-admin")],
        )
        .await;
        assert_eq!(reply.status, 200);
        report = reply.json();
        report["total"]["requests"] == 3 && report["total"]["refused"] == 1
    })
    .await;
    assert!(complete, "{report}");
    assert_eq!(report["total"]["requests"], 3);
    assert_eq!(report["total"]["refused"], 1);
    assert!(report["total"]["cloud_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(report["total"]["local_usd"], 0.0);
    let bad = get_with(
        &gateway.url("/admin/spend?by=planet"),
        &[("authorization", "Bearer sk-admin")],
    )
    .await;
    assert_eq!(
        (bad.status.as_u16(), bad.error()["param"].as_str()),
        (400, Some("by"))
    );
    gateway.terminate();

    let run_by = |by: &str, format: &str| {
        support::report(
            None,
            &config,
            &["spend", "--by", by, "--since", "1d", "--format", format],
        )
    };
    let run = |format: &str| run_by("backend", format);
    let json: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(
        json["counterfactual"],
        json!({"model": "gpt-4o", "provider": "openai"})
    );
    let providers: Value = serde_json::from_str(&run_by("provider", "json")).unwrap();
    let groups: Vec<&str> = providers["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["switchyard.sim", "-"], "served, then refused");
    let lines = json["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 3);
    let unrouted = lines.iter().find(|l| l["group"] == "-").unwrap();
    assert_eq!(
        (&unrouted["requests"], &unrouted["refused"]),
        (&json!(0), &json!(1))
    );
    let local = lines.iter().find(|l| l["group"] == "local").unwrap();
    assert_eq!(local["requests"], 2);
    // Savings: the local requests would have cost gpt-4o's price.
    assert!(local["savings_usd"].as_f64().unwrap() > 0.0);
    assert!(run("csv").starts_with("backend,requests,"));
    let table = run("table");
    let mut last = table.lines().rev();
    assert_eq!(
        last.next(),
        Some("counterfactual_usd: the same tokens priced on gpt-4o (openai)")
    );
    assert!(last.next().unwrap().starts_with("total"));
    let _ = std::fs::remove_file(config);
    let _ = std::fs::remove_file(ledger);
}

#[tokio::test]
async fn tokens_per_minute_count_the_estimated_request() {
    let gateway = priced("")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: erin, hash: '{}', tokens_per_minute: 200}}\n",
            support::key_hash("sk-erin")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let key = [("authorization", "Bearer sk-erin")];
    let mut huge = short("hi", "local");
    huge["max_tokens"] = json!(500);
    let refused = post_with(&url, &huge, &key).await;
    assert_eq!(refused.status, 429, "alone over the minute's allowance");
    assert!(
        refused.error()["message"]
            .as_str()
            .unwrap()
            .contains("tokens-per-minute")
    );
    let mut statuses = Vec::new();
    for _ in 0..10 {
        let mut body = short("hi", "local");
        body["max_tokens"] = json!(40);
        statuses.push(post_with(&url, &body, &key).await.status.as_u16());
    }
    assert_eq!(statuses[0], 200);
    assert!(
        statuses.contains(&429),
        "about 50 tokens a request: the minute's 200 run out: {statuses:?}"
    );
}

/// An Anthropic backend's cache write is billed once, as cache write, not
/// also as input: through the chat endpoint and the Messages endpoint.
#[tokio::test]
async fn anthropic_cache_writes_are_billed_once() {
    let message = r#"{"id":"m1","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":50,"cache_read_input_tokens":400,"cache_creation_input_tokens":2000}}"#;
    let (server, _seen) = support::recording_server(2, message).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  claude:\n    tier: cloud\n    anthropic: {{base_url: 'http://{server}/v1'}}\n    price: {{input_per_mtok: 3, output_per_mtok: 15, cached_input_per_mtok: 0.3, cache_write_per_mtok: 3.75}}\n"
        ))
        .start();
    let chat = post_with(
        &gateway.url("/v1/chat/completions"),
        &short("hello", "claude"),
        &[],
    )
    .await;
    assert_eq!(chat.status, 200, "{}", String::from_utf8_lossy(&chat.body));
    assert_eq!(
        chat.json()["usage"]["prompt_tokens"],
        2500,
        "OpenAI's prompt_tokens is every prompt token"
    );
    let messages = post_with(
        &gateway.url("/v1/messages"),
        &json!({"model": "claude", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}),
        &[],
    )
    .await;
    assert_eq!(
        messages.status,
        200,
        "{}",
        String::from_utf8_lossy(&messages.body)
    );
    assert_eq!(messages.json()["usage"]["input_tokens"], 100);
    assert_eq!(
        messages.json()["usage"]["cache_creation_input_tokens"],
        2000
    );
    let by_hand = (100.0 * 3.0 + 400.0 * 0.3 + 2000.0 * 3.75 + 50.0 * 15.0) / 1e6;
    let rows: Vec<(i64, i64, i64, i64, f64)> = support::ledger_rows(
        &gateway,
        "SELECT input_tokens, cached_tokens, cache_write_tokens, output_tokens, cost_usd FROM requests",
        2,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
    .await;
    for (input, cached, write, output, cost) in rows {
        assert_eq!((input, cached, write, output), (100, 400, 2000, 50));
        assert!((cost - by_hand).abs() < 1e-12, "{cost} vs {by_hand}");
    }
}

/// Every model request that passed authentication has a row, refused ones
/// too: each says why and costs nothing. A request without a valid key has
/// none (it is counted in the metrics).
#[tokio::test]
async fn every_refused_request_has_a_row() {
    let gateway = priced("")
        .backend_yaml(
            "  slow:\n    tier: small\n    sim: {preset: small, base_ttft_ms: 1500, jitter: 0}\n    max_concurrency: 1\n    max_queue: 1\n",
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: erin, hash: '{}', requests_per_minute: 7, budget: {{daily_usd: 0.002}}}}\n",
            support::key_hash("sk-erin")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let erin = [("authorization", "Bearer sk-erin")];
    // 1: the budget cannot hold a 1,000-token answer at $1,000 per million.
    let mut big = short("hello", "cloud");
    big["max_tokens"] = json!(1000);
    let reply = post_with(&url, &big, &erin).await;
    assert_eq!(reply.status, 429);
    let message = reply.error()["message"].as_str().unwrap().to_owned();
    assert!(message.contains("may cost up to $1.0"), "{message}");
    assert!(
        message.contains("$0.002 of its $0.002 daily limit remains"),
        "{message}"
    );
    // 2: a model that does not exist.
    assert_eq!(
        post_with(&url, &short("hi", "nope"), &erin).await.status,
        404
    );
    // 3: a body that is not JSON, on the Anthropic endpoint.
    let reply = support::request(
        http::Method::POST,
        &gateway.url("/v1/messages"),
        &[
            ("content-type", "application/json"),
            ("x-api-key", "sk-erin"),
        ],
        b"{not json".to_vec(),
        false,
    )
    .await;
    assert_eq!(reply.status, 400);
    // 4 and 5: the slow backend's one slot is taken, its one queue place
    // too; the next is refused, and a client that gives up while queued
    // leaves a row of its own.
    let holder = tokio::spawn({
        let url = url.clone();
        async move {
            post_with(
                &url,
                &short("hold", "slow"),
                &[("authorization", "Bearer sk-erin")],
            )
            .await
            .status
        }
    });
    let slow_has = async |gauge: &str| {
        let series = format!("switchyard_backend_{gauge}{{backend=\"slow\"}}");
        support::eventually(async || support::metric(&gateway, &series).await == 1.0).await
    };
    assert!(slow_has("in_flight").await, "the holder holds the slot");
    let queued = tokio::spawn({
        let url = url.clone();
        async move {
            post_with(
                &url,
                &short("queued", "slow"),
                &[("authorization", "Bearer sk-erin")],
            )
            .await
            .status
        }
    });
    assert!(slow_has("queued").await, "the next waits in the queue");
    assert_eq!(
        post_with(&url, &short("full", "slow"), &erin).await.status,
        503
    );
    queued.abort();
    assert_eq!(holder.await.unwrap(), 200);
    // 6, 7: the per-minute limit of 7 is reached; the 8th is refused.
    assert_eq!(
        post_with(&url, &short("hi", "local"), &erin).await.status,
        200
    );
    assert_eq!(
        post_with(&url, &short("hi", "local"), &erin).await.status,
        429
    );
    // Without a valid key: no row, but a count.
    assert_eq!(
        post_with(
            &url,
            &short("hi", "local"),
            &[("authorization", "Bearer sk-nobody")]
        )
        .await
        .status,
        401
    );

    // `(status, refusal, key, backend, cost)` of each refusal.
    let rows: Vec<(String, String, Option<String>, String, f64)> = support::ledger_rows(
        &gateway,
        "SELECT status, refusal, key, backend, cost_usd FROM requests WHERE refusal IS NOT NULL",
        6,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
    )
    .await;
    // Rows of refusals are written by tasks of their own: in any order.
    let row = |status: &str| {
        rows.iter()
            .find(|r| r.0 == status)
            .unwrap_or_else(|| panic!("no {status} row: {rows:#?}"))
    };
    let mut statuses: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        [
            "budget_exhausted",
            "cancelled",
            "malformed_json",
            "overloaded",
            "rate_limited",
            "unknown_model"
        ]
    );
    assert!(
        rows.iter()
            .all(|r| r.2.as_deref() == Some("erin") && r.4 == 0.0),
        "{rows:#?}"
    );
    assert_eq!(
        row("budget_exhausted").3,
        "cloud",
        "a refusal after routing names the backend"
    );
    assert!(
        row("budget_exhausted").1.contains("may cost up to"),
        "{rows:#?}"
    );
    assert_eq!(row("overloaded").3, "slow");
    assert!(row("cancelled").1.contains("client left"), "{rows:#?}");
    // Six refusals and the two answered requests (whose rows are written
    // after their answers).
    support::ledger_rows(&gateway, "SELECT id FROM requests", 8, |r| {
        r.get::<_, i64>(0)
    })
    .await;
    let metrics = String::from_utf8_lossy(&get(&gateway.url("/metrics")).await.body).to_string();
    assert!(
        metrics.contains("switchyard_unauthenticated_requests_total 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("switchyard_refused_requests_total{kind=\"rate_limited\"} 1"),
        "{metrics}"
    );
}

/// A Responses stream passed through untranslated and dropped by its client
/// still counts its prompt and what was streamed (no usage ever came).
#[tokio::test]
async fn a_dropped_native_responses_stream_counts_prompt_and_output() {
    // The upstream gateway speaks Responses (translating to its simulator);
    // the front one passes Responses through to it untranslated.
    let upstream = GatewayBuilder::new()
        .in_process_sim(
            "sim",
            "small",
            "preset: small, base_ttft_ms: 1, decode_tokens_per_s: 5, jitter: 0",
        )
        .start();
    let mut front = GatewayBuilder::new()
        .backend_yaml(&format!("  native:\n    tier: small\n    model: sim\n    openai: {{base_url: '{}', responses: true}}\n", upstream.base_url()))
        .start();
    let sent = json!({"model": "native", "stream": true, "instructions": "Answer at length.", "input": "Tell me a long story about the sea"});
    leave_after_frames(&front.url("/v1/responses"), &sent, "responses-leaver", 4).await;
    front.terminate();
    let (status, input, output, estimated): (String, i64, i64, bool) = front
        .ledger()
        .query_row(
            "SELECT status, input_tokens, output_tokens, estimated FROM requests WHERE client_request_id = 'responses-leaver'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(status, "cancelled");
    assert!(estimated);
    assert!(input >= 8, "instructions and input counted: {input}");
    assert!(output > 0, "the streamed text is counted");
}

/// Strict durability with a ledger that cannot commit (another process
/// holds its write lock, as a backup tool might): no answer goes out as a
/// success, whole or streamed; once the lock is gone, answers flow again.
#[tokio::test]
async fn strict_durability_never_answers_what_the_ledger_lacks() {
    let gateway = priced("").section("ledger: {durability: strict}").start();
    let url = gateway.url("/v1/chat/completions");
    assert_eq!(
        post_with(&url, &short("warm up", "local"), &[])
            .await
            .status,
        200
    );
    let blocker = gateway.ledger();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let mut streamed = short("streamed", "local");
    streamed["stream"] = json!(true);
    let whole = short("whole", "local");
    // Both wait out the writer's lock timeout and its one retry together.
    let (whole, stream) = tokio::join!(
        post_with(&url, &whole, &[]),
        post_with(&url, &streamed, &[])
    );
    assert_eq!(
        whole.status,
        500,
        "{}",
        String::from_utf8_lossy(&whole.body)
    );
    assert_eq!(whole.error()["code"], "ledger_not_committed");
    let last: Value = serde_json::from_str(
        stream
            .events()
            .iter()
            .rev()
            .find(|e| e.as_str() != "[DONE]")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(last["error"]["code"], "ledger_not_committed", "{last}");
    assert!(
        !stream.events().iter().any(|e| e == "[DONE]"),
        "the stream did not end as a success"
    );
    blocker.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        post_with(&url, &short("after", "local"), &[]).await.status,
        200
    );
}

/// A stream whose backend reports no usage is counted from its text, which
/// the record counts in pieces as it passes rather than holding it whole:
/// counted across those pieces, 12,000 one-token words (72 KB, past the
/// 64 KB a piece holds) are still 12,000 output tokens.
#[tokio::test]
async fn a_long_stream_without_usage_is_counted_whole() {
    const WORDS: usize = 12_000;
    let mut events = String::new();
    for _ in 0..WORDS {
        events.push_str("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" river\"},\"finish_reason\":null}]}\n\n");
    }
    events.push_str("data: [DONE]\n\n");
    let (server, _seen) = support::canned_event_server(1, Box::leak(events.into_boxed_str())).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  plain:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1'}}\n    context_window: 100000\n"
        ))
        .start();
    let mut body = support::chat("plain", "hi");
    body["stream"] = json!(true);
    let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
    assert_eq!(reply.status, 200);
    let output: Vec<i64> =
        support::ledger_rows(&gateway, "SELECT output_tokens FROM requests", 1, |r| {
            r.get(0)
        })
        .await;
    assert_eq!(output, [WORDS as i64]);
}

/// A cascade's first step is read whole for its checks, then replayed to
/// the client: an answer without usage is counted once, as it was read,
/// not again as it is replayed.
#[tokio::test]
async fn a_cascade_answer_without_usage_is_counted_once() {
    const EVENTS: &str = concat!(
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\" river river river river\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" river river river river\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let (server, _seen) = support::canned_event_server(1, EVENTS).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  plain:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1'}}\n    context_window: 100000\n"
        ))
        .in_process_sim("large", "cloud", &format!("preset: large, {FAST_SIM_FIELDS}"))
        .route("auto", "strategy:\n  cascade: {order: [plain, large], escalate_on: [empty]}")
        .start();
    let mut body = support::chat("auto", "hi");
    body["stream"] = json!(true);
    let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("plain"));
    let output: Vec<(i64, bool)> = support::ledger_rows(
        &gateway,
        "SELECT output_tokens, estimated FROM requests",
        1,
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .await;
    // Eight one-token words.
    assert_eq!(output, [(8, true)]);
}

/// Thirty reasoning deltas (`reasoning_content`, as reasoning servers and
/// Anthropic thinking through the adapter send them), then the upstream
/// connection is reset before any content: the provider bills those tokens, so
/// the row counts them as output (and as reasoning), not "failed before any
/// output" with nothing billed.
#[tokio::test]
async fn reasoning_before_a_reset_is_counted_and_billed() {
    const EVENTS: &str = concat!(
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"r1\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":null,\"reasoning_content\":\"Let me think about the question carefully \"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"r1\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"and weigh each option in turn. \"},\"finish_reason\":null}]}\n\n",
    );
    // A server that streams the events, chunked, then resets the
    // connection (SO_LINGER 0) instead of ending the stream.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = vec![0u8; 65536];
            let n = socket.read(&mut request).await.unwrap();
            if request[..n].starts_with(b"GET ") {
                let _ = socket
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            socket.write_all(head.as_bytes()).await.unwrap();
            for _ in 0..15 {
                let chunk = format!("{:x}\r\n{EVENTS}\r\n", EVENTS.len());
                socket.write_all(chunk.as_bytes()).await.unwrap();
            }
            socket.flush().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            // Zero linger sends a reset at once; nothing is left to block on.
            #[allow(deprecated)]
            socket.set_linger(Some(std::time::Duration::ZERO)).unwrap();
            drop(socket);
        }
    });
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  thinker:\n    tier: cloud\n    openai: {{base_url: 'http://{server}/v1'}}\n    price: {{input_per_mtok: 1000, output_per_mtok: 1000}}\n"
        ))
        .start();
    let mut body = support::chat("thinker", "why?");
    body["stream"] = json!(true);
    let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
    assert_eq!(reply.status, 200, "the stream began");
    let rows: Vec<(i64, i64, f64, String)> = support::ledger_rows(
        &gateway,
        "SELECT output_tokens, reasoning_tokens, cost_usd, status FROM requests",
        1,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .await;
    let (output, reasoning, cost, status) = rows[0].clone();
    assert_eq!(status, "upstream_reset", "{rows:?}");
    assert!(
        reasoning >= 150,
        "thirty reasoning deltas counted: {rows:?}"
    );
    assert!(output >= reasoning, "reasoning is output: {rows:?}");
    assert!(cost > 0.0, "billed as the provider bills it: {rows:?}");
}

/// A whole (not streamed) answer the client stops waiting for: the backend
/// was generating all along and the provider bills that output, though none
/// of it reached the gateway. The row counts the output the latency model
/// says was made by then (estimated, within `max_tokens`), not the prompt
/// alone.
#[tokio::test]
async fn a_whole_answer_cut_short_bills_the_output_made_so_far() {
    let gateway = GatewayBuilder::new()
        .backend_yaml(
            "  slow:\n    tier: cloud\n    sim: {preset: large, base_ttft_ms: 50, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 100, default_max_tokens: 100000, jitter: 0}\n    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
        )
        .start();
    let body = json!({"model": "slow", "max_tokens": 1000, "messages": [{"role": "user", "content": "a long essay please"}]});
    let cut = tokio::time::timeout(
        Duration::from_millis(2000),
        post_with(&gateway.url("/v1/chat/completions"), &body, &[]),
    )
    .await;
    assert!(cut.is_err(), "the answer takes ten seconds");
    let rows: Vec<(i64, i64, String)> = support::ledger_rows(
        &gateway,
        "SELECT output_tokens, estimated, status FROM requests",
        1,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .await;
    let (output, estimated, status) = rows[0].clone();
    assert_eq!(status, "cancelled", "{rows:?}");
    assert_eq!(estimated, 1, "{rows:?}");
    // At least the two seconds the client waited at 100 tokens a second,
    // less the first token's 50 ms (more when the machine is slow to see
    // the client go), and never past `max_tokens`.
    assert!((150..=1000).contains(&output), "{rows:?}");
}

/// A cascade step is read whole before anything is sent; one that times out
/// half-way is billed for the output its backend streamed by then, not 0.
#[tokio::test]
async fn a_cascade_step_cut_short_bills_what_it_streamed() {
    let gateway = GatewayBuilder::new()
        .backend_yaml(
            "  slow:\n    tier: small\n    sim: {preset: small, base_ttft_ms: 10, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 40, default_max_tokens: 100000, jitter: 0}\n    timeouts: {first_byte_ms: 1500}\n    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
        )
        .in_process_sim("large", "cloud", &format!("preset: large, {FAST_SIM_FIELDS}"))
        .route("auto", "strategy:\n  cascade: {order: [slow, large]}")
        .start();
    let body = json!({"model": "auto", "stream": true, "max_tokens": 400, "messages": [{"role": "user", "content": "write at length"}]});
    let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("large"));
    let rows: Vec<(String, i64, String)> = support::ledger_rows(
        &gateway,
        "SELECT backend, output_tokens, status FROM requests ORDER BY id",
        // The slow step, its retry after the timeout, and the large step.
        3,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .await;
    let slow = rows
        .iter()
        .find(|r| r.0 == "slow")
        .expect("the cut step's row");
    assert_ne!(slow.2, "ok", "{rows:?}");
    // 1.5 s at 40 tokens a second: tens of tokens streamed and billed.
    assert!(slow.1 >= 20, "{rows:?}");
}
