//! The request log: `GET /admin/requests` (filters and paging over the
//! ledger, per request) and `GET /admin/requests/{id}` (one request's
//! record, by the `x-request-id` its caller saw), and `switchyard requests`
//! reading the same ledger.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{GatewayBuilder, get_with, key_hash, post_with};

const ADMIN: &str = "sk-admin-requestlog";
const ALICE: &str = "sk-alice-requestlog";
const BOB: &str = "sk-bob-requestlog";

fn admin() -> [(&'static str, &'static str); 1] {
    [("authorization", "Bearer sk-admin-requestlog")]
}

/// A gateway with a backend that always fails (500, with a secret in its
/// words) and falls back to a simulated one, and two keys in two teams.
async fn gateway() -> (support::Proc, std::path::PathBuf) {
    const BODY: &str = r#"{"error": {"message": "shard 7 is down; key sk-proj-ABCDEF1234567890abcdefXYZ", "type": "server_error"}}"#;
    let (broken, _seen) = support::canned_server(100, "500 Internal Server Error", BODY).await;
    let dir = support::unique_path("request-log");
    std::fs::create_dir_all(&dir).unwrap();
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  broken:\n    tier: small\n    openai: {{base_url: 'http://{broken}/v1'}}\n"
        ))
        .in_process_sim("small", "small", support::FAST_SIM_FIELDS)
        .route(
            "flaky",
            "retries: 0\nstrategy:\n  split:\n    weights: {broken: 1}\nfallbacks: [small]",
        )
        .route("plain", "strategy:\n  split:\n    weights: {small: 1}")
        .route("dead", "retries: 0\nstrategy:\n  split:\n    weights: {broken: 1}")
        .section(&format!(
            "ledger: {{path: '{}', flush_ms: 50}}\nauth:\n  admin_key_hash: \"{}\"\n  teams:\n    research: {{}}\n    ops: {{}}\n  keys:\n    - {{name: alice, hash: \"{}\", team: research}}\n    - {{name: bob, hash: \"{}\", team: ops}}\n",
            dir.join("ledger.db").display(),
            key_hash(ADMIN),
            key_hash(ALICE),
            key_hash(BOB)
        ))
        .start();
    (gateway, dir)
}

async fn ask(
    gateway: &support::Proc,
    key: &str,
    model: &str,
    headers: &[(&str, &str)],
) -> support::Reply {
    let auth = format!("Bearer {key}");
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(headers);
    let body = json!({"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "hello there"}]});
    post_with(&gateway.url("/v1/chat/completions"), &body, &all).await
}

async fn log(gateway: &support::Proc, query: &str) -> Value {
    let reply = get_with(&gateway.url(&format!("/admin/requests?{query}")), &admin()).await;
    assert_eq!(
        reply.status,
        200,
        "{query}: {}",
        String::from_utf8_lossy(&reply.body)
    );
    reply.json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_log_finds_what_failed_for_whom_and_why() {
    let (gateway, dir) = gateway().await;
    // Alice: two on the fallback route (each tries broken, then small), one
    // on the dead route (fails), one refused (an unknown model). Bob: three
    // plain ones, one with his own request id.
    let saved = ask(&gateway, ALICE, "flaky", &[]).await;
    assert_eq!(saved.status, 200);
    assert_eq!(ask(&gateway, ALICE, "flaky", &[]).await.status, 200);
    let failed = ask(&gateway, ALICE, "dead", &[]).await;
    assert_eq!(failed.status, 502);
    assert_eq!(ask(&gateway, ALICE, "nope", &[]).await.status, 404);
    for _ in 0..2 {
        assert_eq!(ask(&gateway, BOB, "plain", &[]).await.status, 200);
    }
    let own = ask(&gateway, BOB, "plain", &[("x-request-id", "bob-own-id-1")]).await;
    assert_eq!(own.header("x-request-id"), Some("bob-own-id-1"));

    // The failed request is findable by the id its caller saw, at once:
    // the ledger flushes every 50 ms here, and the lookup uses its index.
    let failed_id = failed.header("x-request-id").unwrap().to_owned();
    let mut record = Value::Null;
    let found = support::eventually(async || {
        let reply = get_with(
            &gateway.url(&format!("/admin/requests/{failed_id}")),
            &admin(),
        )
        .await;
        record = if reply.status == 200 {
            reply.json()
        } else {
            Value::Null
        };
        reply.status == 200
    })
    .await;
    assert!(found, "request {failed_id} never showed");
    assert_eq!(record["request_id"], failed_id.as_str());
    assert_eq!(
        (&record["key"], &record["team"]),
        (&json!("alice"), &json!("research"))
    );
    assert_eq!(
        (&record["route"], &record["backend"]),
        (&json!("dead"), &json!("broken"))
    );
    assert_eq!(
        (&record["status"], &record["outcome"]),
        (&json!("error"), &json!("upstream_error"))
    );
    let error = record["error"].as_str().unwrap();
    assert!(error.contains("shard 7 is down"), "{record}");
    assert!(
        !error.contains("ABCDEF1234567890"),
        "the secret is taken out: {record}"
    );
    let calls = record["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{record}");
    assert_eq!(calls[0]["status"], "upstream_error");
    assert!(calls[0]["duration_ms"].as_f64().unwrap() >= 0.0);

    // Every row written before any of the others is looked up: nine, as
    // each fallback request leaves two.
    let ledger = rusqlite::Connection::open(dir.join("ledger.db")).unwrap();
    support::rows_once_written(&ledger, "SELECT id FROM requests", 9, |r| {
        r.get::<_, i64>(0)
    })
    .await;
    let all = log(&gateway, "since=1h").await;
    assert_eq!(all["requests"].as_array().unwrap().len(), 7, "{all}");

    // The fallback: both calls in the record, the request served by small.
    let saved_id = saved.header("x-request-id").unwrap();
    let saved = get_with(
        &gateway.url(&format!("/v1/admin/requests/{saved_id}")),
        &admin(),
    )
    .await;
    assert_eq!(
        saved.status,
        200,
        "{}",
        String::from_utf8_lossy(&saved.body)
    );
    let saved = saved.json();
    assert_eq!(
        (&saved["status"], &saved["backend"]),
        (&json!("ok"), &json!("small"))
    );
    let backends: Vec<&Value> = saved["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["backend"])
        .collect();
    assert_eq!(backends, [&json!("broken"), &json!("small")], "{saved}");
    assert_eq!(saved["calls"][1]["reason"], "fallback");
    // A caller's own id finds its request too.
    let mine = get_with(&gateway.url("/admin/requests/bob-own-id-1"), &admin()).await;
    assert_eq!(mine.status, 200);
    assert_eq!(mine.json()["client_request_id"], "bob-own-id-1");

    // The list: all seven requests (read first, as a row a whole answer
    // leaves is written after the answer), newest first, and each filter
    // narrows it.
    let times: Vec<i64> = all["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ts_ms"].as_i64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {times:?}"
    );
    let count = |v: &Value| v["requests"].as_array().unwrap().len();
    for (query, want) in [
        ("key=alice", 4),
        ("team=ops", 3),
        ("route=flaky", 2),
        ("backend=broken", 3),
        ("status=error", 2),
        ("status=ok", 5),
        ("outcome=upstream_error", 1),
        ("key=alice&status=ok", 2),
        ("outcome=unknown_model", 1),
        ("min_ms=3600000", 0),
        ("since=1h&until=30m", 0),
    ] {
        assert_eq!(count(&log(&gateway, query).await), want, "{query}");
    }
    let refused = log(&gateway, "outcome=unknown_model").await;
    assert!(
        refused["requests"][0]["refusal"]
            .as_str()
            .unwrap()
            .contains("nope"),
        "{refused}"
    );
    // Pages: three, three, one, with the offset to go on from.
    let first = log(&gateway, "limit=3").await;
    assert_eq!((count(&first), &first["next_offset"]), (3, &json!(3)));
    let last = log(&gateway, "limit=3&offset=6").await;
    assert_eq!((count(&last), &last["next_offset"]), (1, &Value::Null));

    // Bad input: a 400 naming the parameter; only the admin key gets in;
    // an id nobody saw is a 404.
    for query in ["status=broken", "limit=0", "since=yesterday", "min_ms=-5"] {
        let reply = get_with(&gateway.url(&format!("/admin/requests?{query}")), &admin()).await;
        assert_eq!(reply.status, 400, "{query}");
        let param = query.split('=').next().unwrap();
        assert_eq!(reply.error()["param"], param, "{query}");
    }
    let alice = [("authorization", "Bearer sk-alice-requestlog")];
    assert_eq!(
        get_with(&gateway.url("/admin/requests"), &alice)
            .await
            .status,
        401
    );
    assert_eq!(
        get_with(
            &gateway.url(&format!("/admin/requests/{failed_id}")),
            &alice
        )
        .await
        .status,
        401
    );
    assert_eq!(
        get_with(&gateway.url("/admin/requests/no-such-request"), &admin())
            .await
            .status,
        404
    );
    let post = support::post_with(&gateway.url("/admin/requests"), &json!({}), &admin()).await;
    assert_eq!(post.status, 405);

    // `switchyard requests` reads the same ledger.
    let config = gateway.config_path();
    let table = support::report(
        Some(&dir),
        config,
        &["requests", "--since", "1h", "--status", "error"],
    );
    assert!(
        table.contains("upstream_error") && table.contains("unknown_model"),
        "{table}"
    );
    assert_eq!(
        table.lines().count(),
        3,
        "a header and two requests: {table}"
    );
    let json: Value = serde_json::from_str(&support::report(
        Some(&dir),
        config,
        &["requests", "--key", "bob", "--format", "json"],
    ))
    .unwrap();
    assert_eq!(count(&json), 3);
    let one: Value = serde_json::from_str(&support::report(
        Some(&dir),
        config,
        &["requests", &failed_id],
    ))
    .unwrap();
    assert_eq!(one["outcome"], "upstream_error");
    let _ = std::fs::remove_dir_all(&dir);
}
