//! Security cases, each named for the attack it stops, run against the real
//! gateway with a valid key of a tenant's own (see SECURITY.md).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::os::unix::fs::PermissionsExt;

use serde_json::json;
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, chat, get_with, post_with};

/// What a leaky provider might say: a key fragment and an internal URL.
const LEAKY_400: &str = r#"{"error":{"message":"Incorrect request; your key sk-proj-ABCDEFGH12345 was sent to http://10.9.8.7:8000/internal","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#;
const LEAKY_401: &str = r#"{"error":{"message":"Incorrect API key provided: sk-proj-ABCDEFGH12345","type":"invalid_request_error","code":"invalid_api_key"}}"#;

fn leaks(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    text.contains("sk-proj") || text.contains("10.9.8.7")
}

/// Three keys: `alice` and `carol` may name backends, `bob` may not.
fn keys() -> String {
    format!(
        "auth:\n  admin_key_hash: '{}'\n  keys:\n    - {{name: alice, hash: '{}'}}\n    - {{name: bob, hash: '{}', may_name_backends: false}}\n    - {{name: carol, hash: '{}'}}\n",
        support::key_hash("sk-admin"),
        support::key_hash("sk-alice"),
        support::key_hash("sk-bob"),
        support::key_hash("sk-carol"),
    )
}

fn local_gateway() -> Proc {
    GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("local", 1)])
        .section(&keys())
        .start()
}

#[tokio::test]
async fn upstream_error_text_never_reaches_the_caller() {
    let (server, _seen) = support::canned_server(2, "400 Bad Request", LEAKY_400).await;
    let gateway = GatewayBuilder::new()
        .openai("leaky", "small", &format!("http://{server}/v1"), &[])
        .start();
    let openai = post_with(
        &gateway.url("/v1/chat/completions"),
        &chat("leaky", "hi"),
        &[],
    )
    .await;
    assert_eq!(openai.status, 400);
    assert!(
        !leaks(&openai.body),
        "{}",
        String::from_utf8_lossy(&openai.body)
    );
    // What the caller can act on survives: the type and code.
    assert_eq!(openai.error()["code"], "context_length_exceeded");
    assert_eq!(openai.error()["type"], "invalid_request_error");
    let anthropic = post_with(
        &gateway.url("/v1/messages"),
        &json!({"model": "leaky", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
        &[],
    )
    .await;
    assert_eq!(anthropic.status, 400);
    assert!(
        !leaks(&anthropic.body),
        "{}",
        String::from_utf8_lossy(&anthropic.body)
    );
    assert_eq!(anthropic.json()["type"], "error");
}

#[tokio::test]
async fn refused_gateway_credentials_are_the_gateways_502_and_fall_back() {
    let (server, _seen) = support::canned_server(2, "401 Unauthorized", LEAKY_401).await;
    let gateway = GatewayBuilder::new()
        .openai("keyless", "small", &format!("http://{server}/v1"), &[])
        .in_process_sim(
            "backup",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .route(
            "auto",
            "retries: 2\nstrategy:\n  split:\n    weights: {keyless: 1}\nfallbacks: [backup]",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let direct = post_with(&url, &chat("keyless", "hi"), &[]).await;
    assert_eq!(direct.status, 502);
    assert!(
        !leaks(&direct.body),
        "{}",
        String::from_utf8_lossy(&direct.body)
    );
    assert_eq!(direct.error()["code"], "upstream_credentials_refused");
    let routed = post_with(&url, &chat("auto", "hi"), &[]).await;
    assert_eq!(
        routed.status,
        200,
        "{}",
        String::from_utf8_lossy(&routed.body)
    );
    assert_eq!(routed.header("x-switchyard-backend"), Some("backup"));
    // Not retried on the backend that refused: one call each, two in all.
    let statuses: Vec<String> = support::ledger_rows(
        &gateway,
        "SELECT status FROM requests WHERE backend = 'keyless' ORDER BY id",
        2,
        |r| r.get(0),
    )
    .await;
    assert_eq!(statuses, ["upstream_auth", "upstream_auth"]);
}

#[tokio::test]
async fn any_case_of_bearer_authenticates_and_nothing_else_does() {
    let gateway = local_gateway();
    let url = gateway.url("/v1/chat/completions");
    for value in [
        "Bearer sk-alice",
        "bearer sk-alice",
        "BEARER sk-alice",
        "Bearer \t sk-alice",
    ] {
        let reply = post_with(&url, &chat("auto", "hi"), &[("authorization", value)]).await;
        assert_eq!(reply.status, 200, "{value}");
    }
    for value in ["Basic sk-alice", "Bearer", "sk-alice", "Bearer sk-alicex"] {
        let reply = post_with(&url, &chat("auto", "hi"), &[("authorization", value)]).await;
        assert_eq!(reply.status, 401, "{value}");
    }
}

#[tokio::test]
async fn admin_paths_are_not_probed_without_the_admin_key() {
    let gateway = local_gateway();
    for path in [
        "/admin/spend",
        "/admin/keys",
        "/admin/nothing-here",
        "/admin/",
        "/v1/admin/anything",
    ] {
        let tenant = get_with(&gateway.url(path), &[("authorization", "Bearer sk-alice")]).await;
        assert_eq!(tenant.status, 401, "{path} answered a tenant");
    }
    // Nor which methods they take.
    let post = post_with(
        &gateway.url("/admin/spend"),
        &json!({}),
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(post.status, 401);
    let admin = [("authorization", "Bearer sk-admin")];
    assert_eq!(
        get_with(&gateway.url("/admin/nothing-here"), &admin)
            .await
            .status,
        404
    );
    assert_eq!(
        get_with(&gateway.url("/admin/spend"), &admin).await.status,
        200
    );
}

#[tokio::test]
async fn the_model_list_hides_backends_from_keys_that_may_not_name_them() {
    let gateway = local_gateway();
    let ids = |reply: &support::Reply| -> Vec<String> {
        reply.json()["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let alice = get_with(
        &gateway.url("/v1/models"),
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(ids(&alice), ["auto", "local"]);
    let bob = get_with(
        &gateway.url("/v1/models"),
        &[("authorization", "Bearer sk-bob")],
    )
    .await;
    assert_eq!(ids(&bob), ["auto"]);
    // Nor does the answer to a model that does not exist list them.
    let unknown = post_with(
        &gateway.url("/v1/chat/completions"),
        &chat("nope", "hi"),
        &[("authorization", "Bearer sk-bob")],
    )
    .await;
    assert_eq!(unknown.status, 404);
    let message = unknown.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("auto") && !message.contains("local"),
        "{message}"
    );
}

#[tokio::test]
async fn a_callers_request_id_cannot_forge_or_flood_the_ledger() {
    let gateway = local_gateway();
    let url = gateway.url("/v1/chat/completions");
    let key = ("authorization", "Bearer sk-alice");
    let plain = post_with(
        &url,
        &chat("auto", "hi"),
        &[key, ("x-request-id", "trace-1.a_b")],
    )
    .await;
    assert_eq!(plain.header("x-request-id"), Some("trace-1.a_b"));
    let long = "x".repeat(4000);
    for odd in [
        long.as_str(),
        "a b",
        "<script>",
        "id\"; DROP TABLE requests",
    ] {
        let reply = post_with(&url, &chat("auto", "hi"), &[key, ("x-request-id", odd)]).await;
        assert_eq!(reply.status, 200);
        assert_ne!(reply.header("x-request-id"), Some(odd), "{odd} was kept");
    }
    let rows: Vec<(String, Option<String>)> = support::ledger_rows(
        &gateway,
        "SELECT request_id, client_request_id FROM requests",
        5,
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .await;
    let clients: Vec<&str> = rows.iter().filter_map(|r| r.1.as_deref()).collect();
    assert_eq!(clients, ["trace-1.a_b"], "only the plain id is kept");
    let mut own: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    own.sort_unstable();
    own.dedup();
    assert_eq!(own.len(), 5, "every request has an id of the gateway's own");
}

#[tokio::test]
async fn the_ledger_is_readable_by_its_owner_only() {
    let gateway = local_gateway();
    let reply = post_with(
        &gateway.url("/v1/chat/completions"),
        &chat("auto", "hi"),
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(reply.status, 200);
    let mode = std::fs::metadata(gateway.dir.join("switchyard-ledger.db"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "mode {mode:o}");
}

#[tokio::test]
async fn one_tenants_failing_requests_cannot_open_the_breaker_for_all() {
    const FAILED: &str = r#"{"error":{"message":"model crashed","type":"server_error"}}"#;
    // Mallory's six requests fail (the breaker opens after 5 failures);
    // Alice's request after them still reaches the backend.
    let (server, seen) = support::canned_server(7, "500 Internal Server Error", FAILED).await;
    let gateway = GatewayBuilder::new()
        .openai("shared", "small", &format!("http://{server}/v1"), &[])
        .route("auto", "retries: 0\nstrategy:\n  split:\n    weights: {shared: 1}")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: mallory, hash: '{}'}}\n    - {{name: alice, hash: '{}'}}\n",
            support::key_hash("sk-mallory"),
            support::key_hash("sk-alice"),
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    for _ in 0..6 {
        let reply = post_with(
            &url,
            &chat("auto", "crash"),
            &[("authorization", "Bearer sk-mallory")],
        )
        .await;
        assert_eq!(reply.status, 502);
    }
    let alice = post_with(
        &url,
        &chat("auto", "hi"),
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(alice.status, 502, "the backend answered alice itself");
    let reached = tokio::time::timeout(std::time::Duration::from_secs(10), seen).await;
    assert!(reached.is_ok(), "all seven requests reached the backend");
}

/// The same long prompt, asked under a key.
async fn ask_long(gateway: &Proc, model: &str, key: &str) -> support::Reply {
    let system = "You are the support assistant of a company with many rules. ".repeat(40);
    let body = json!({"model": model, "max_tokens": 4, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": "What are the opening hours?"}]});
    let auth = format!("Bearer {key}");
    post_with(
        &gateway.url("/v1/chat/completions"),
        &body,
        &[("authorization", auth.as_str())],
    )
    .await
}

#[tokio::test]
async fn a_tenant_cannot_learn_what_another_sent_from_the_cache_receipt() {
    let sim = format!("preset: small, {FAST_SIM_FIELDS}");
    let gateway = GatewayBuilder::new()
        .in_process_sim("private", "small", &sim)
        .backend_yaml(&format!(
            "  public:\n    tier: small\n    sim: {{{sim}}}\n    prefix_cache: {{share: everyone}}\n"
        ))
        .section(&keys())
        .start();
    for backend in ["private", "public"] {
        assert_eq!(
            ask_long(&gateway, backend, "sk-alice")
                .await
                .header("x-switchyard-cache"),
            Some("miss")
        );
        let again = ask_long(&gateway, backend, "sk-alice").await;
        assert!(
            again
                .header("x-switchyard-cache")
                .unwrap()
                .starts_with("prefix="),
            "{backend}: alice's own prefix"
        );
    }
    // Carol sends the very prompt alice sent: on the default (per key)
    // backend nothing says alice sent it; where the operator shares
    // prefixes with everyone, the receipt does.
    let private = ask_long(&gateway, "private", "sk-carol").await;
    assert_eq!(private.status, 200);
    assert_eq!(private.header("x-switchyard-cache"), Some("miss"));
    let public = ask_long(&gateway, "public", "sk-carol").await;
    assert!(
        public
            .header("x-switchyard-cache")
            .unwrap()
            .starts_with("prefix=")
    );
}

#[tokio::test]
async fn a_tenant_cannot_choose_whose_vllm_cache_it_reads() {
    let completion = r#"{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
    // Three chats; the engine's metrics page is elsewhere (nothing listens).
    let (server, seen) = support::recording_server(3, completion).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  vllm:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1', engine: vllm, metrics_url: 'http://127.0.0.1:9/metrics'}}\n"
        ))
        .section(&keys())
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut forged = chat("vllm", "hi");
    forged["cache_salt"] = json!("someone-elses-salt");
    for (key, body) in [
        ("Bearer sk-alice", chat("vllm", "hi")),
        ("Bearer sk-alice", forged),
        ("Bearer sk-carol", chat("vllm", "hi")),
    ] {
        let reply = post_with(&url, &body, &[("authorization", key)]).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let salts: Vec<String> = seen
        .await
        .unwrap()
        .iter()
        .map(|r| {
            support::body_of(r)["cache_salt"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        salts[0], salts[1],
        "the gateway's salt, not the one the caller sent"
    );
    assert_ne!(
        salts[0], salts[2],
        "alice and carol have salts of their own"
    );
}

#[tokio::test]
async fn a_backend_cannot_make_the_gateway_hold_an_unbounded_answer() {
    // A 4 KB answer from a backend allowed 1 KB.
    static BIG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
            r#"{{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{{"index":0,"message":{{"role":"assistant","content":"{}"}},"finish_reason":"stop"}}]}}"#,
            "a".repeat(4096)
        )
    });
    let (server, _seen) = support::canned_server(1, "200 OK", BIG.as_str()).await;
    let upstream = support::fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai(
            "flood",
            "small",
            &format!("http://{server}/v1"),
            &["max_response_bytes: 1024"],
        )
        .openai(
            "streamy",
            "small",
            &upstream.base_url(),
            &["max_response_bytes: 100"],
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let whole = post_with(&url, &chat("flood", "hi"), &[]).await;
    assert_eq!(whole.status, 502);
    assert_eq!(whole.error()["code"], "upstream_bad_response");
    // Streamed, every event past the limit: the stream is cut with an error.
    let mut streamed = chat("streamy", "hi");
    streamed["stream"] = json!(true);
    let reply = post_with(&url, &streamed, &[]).await;
    let last: serde_json::Value = serde_json::from_str(reply.events().last().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "upstream_bad_response", "{last}");
}

/// Sends raw bytes to the gateway and returns the status line it answers
/// with (empty when it just closes the connection).
async fn raw_status(gateway: &Proc, request: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    socket.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        socket.read_to_end(&mut answer),
    )
    .await;
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or("")
        .to_owned()
}

#[tokio::test]
async fn every_model_path_and_path_form_needs_a_key() {
    let gateway = local_gateway();
    let forms = [
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/chat/completions?key=sk-alice",
        "/v1/completions",
        "/v1/embeddings",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/route/explain",
        "/v1/models",
        "/v1/../v1/chat/completions",
        "//v1/chat/completions",
        "/v1/chat/completions/",
        "/V1/CHAT/COMPLETIONS",
        "/unknown",
    ];
    for path in forms {
        let reply = support::post_json(&gateway.url(path), &chat("auto", "hi")).await;
        assert_eq!(reply.status, 401, "{path} answered without a key");
    }
}

#[tokio::test]
async fn request_smuggling_shapes_are_refused() {
    let gateway = local_gateway();
    let body = r#"{"model":"auto","messages":[{"role":"user","content":"hi"}]}"#;
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-alice\r\ncontent-type: application/json\r\n";
    let cases = [
        // Both framings: the receiver cannot know where the body ends.
        format!(
            "{head}content-length: {}\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
            body.len()
        ),
        // Two different lengths.
        format!(
            "{head}content-length: {}\r\ncontent-length: 5\r\n\r\n{body}",
            body.len()
        ),
        // An encoding other than chunked.
        format!("{head}transfer-encoding: gzip, identity\r\n\r\n{body}"),
        // A malformed chunk size.
        format!("{head}transfer-encoding: chunked\r\n\r\nzz\r\n{body}\r\n0\r\n\r\n"),
    ];
    for request in cases {
        let status = raw_status(&gateway, request.as_bytes()).await;
        assert!(
            status.is_empty() || status.starts_with("HTTP/1.1 400"),
            "{request:?} answered {status:?}"
        );
    }
    // The same request, framed once, is served.
    let plain = format!(
        "{head}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    assert!(
        raw_status(&gateway, plain.as_bytes())
            .await
            .starts_with("HTTP/1.1 200")
    );
}

#[tokio::test]
async fn oversized_and_countless_headers_are_refused() {
    let gateway = local_gateway();
    let huge = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
        "a".repeat(1 << 20)
    );
    let status = raw_status(&gateway, huge.as_bytes()).await;
    assert!(
        !status.contains(" 200 "),
        "a 1 MiB header was accepted: {status}"
    );
    let many: String = (0..500).map(|i| format!("x-h{i}: v\r\n")).collect();
    let request = format!("GET /healthz HTTP/1.1\r\nhost: x\r\n{many}\r\n");
    let status = raw_status(&gateway, request.as_bytes()).await;
    assert!(
        !status.contains(" 200 "),
        "500 headers were accepted: {status}"
    );
    // The gateway still serves.
    assert_eq!(support::get(&gateway.url("/healthz")).await.status, 200);
}

#[tokio::test]
async fn secrets_stay_out_of_the_logs_even_at_trace() {
    const LEAKY_500: &str = r#"{"error":{"message":"upstream proxy rejected Bearer sk-proj-UPSTREAMSECRET1 for https://admin:hunter2@10.9.8.7/v1","type":"server_error"}}"#;
    let (server, _seen) = support::canned_server(1, "500 Internal Server Error", LEAKY_500).await;
    let log = support::unique_path("trace.log");
    let gateway = GatewayBuilder::new()
        .openai("leaky", "small", &format!("http://{server}/v1"), &[])
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("local", 1)])
        .route(
            "broken",
            "retries: 0\nstrategy:\n  split:\n    weights: {leaky: 1}",
        )
        .section(&keys())
        .start_logging("trace", Some(&log));
    let url = gateway.url("/v1/chat/completions");
    let alice = [("authorization", "Bearer sk-alice")];
    assert_eq!(
        post_with(&url, &chat("auto", "hi"), &alice).await.status,
        200
    );
    assert_eq!(
        post_with(&url, &chat("broken", "hi"), &[("x-api-key", "sk-alice")])
            .await
            .status,
        502
    );
    let _ = get_with(
        &gateway.url("/admin/spend"),
        &[("authorization", "Bearer sk-admin")],
    )
    .await;
    drop(gateway);
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(
        text.contains("upstream error"),
        "the upstream failure is logged: {text}"
    );
    for secret in ["sk-alice", "sk-admin", "UPSTREAMSECRET1", "hunter2"] {
        assert!(!text.contains(secret), "{secret} is in the trace log");
    }
}

#[tokio::test]
async fn a_native_responses_stream_error_is_told_in_our_words_and_recorded() {
    const EVENTS: &str = "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"r1\"}}\n\nevent: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"internal failure at http://10.9.8.7 with sk-proj-ABCDEFGH12345\"}\n\n";
    let (server, _seen) = support::canned_event_server(1, EVENTS).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  native:\n    tier: small\n    openai: {{base_url: 'http://{server}/v1', responses: true}}\n    context_window: 100000\n"
        ))
        .start();
    let reply = post_with(
        &gateway.url("/v1/responses"),
        &json!({"model": "native", "input": "hi", "stream": true}),
        &[],
    )
    .await;
    assert!(
        !leaks(&reply.body),
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    assert!(String::from_utf8_lossy(&reply.body).contains("event: error"));
    let statuses: Vec<String> =
        support::ledger_rows(&gateway, "SELECT status FROM requests", 1, |r| r.get(0)).await;
    assert_eq!(
        statuses,
        ["upstream_error"],
        "a failed stream is not a success"
    );
}

#[tokio::test]
async fn a_head_past_max_header_bytes_is_a_431() {
    let gateway = local_gateway();
    let big = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: {}\r\n\r\n",
        "a".repeat(100 * 1024)
    );
    let status = raw_status(&gateway, big.as_bytes()).await;
    assert!(status.starts_with("HTTP/1.1 431"), "{status}");
}

#[tokio::test]
async fn connections_past_the_limit_wait_their_turn() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gateway = GatewayBuilder::new()
        .server("max_connections: 2")
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .start();
    // Two idle connections take both places.
    let first = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    let _second = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let mut third = tokio::net::TcpStream::connect(gateway.addr).await.unwrap();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let waited = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        third.read_to_end(&mut answer),
    )
    .await;
    assert!(
        waited.is_err(),
        "served past the limit: {}",
        String::from_utf8_lossy(&answer)
    );
    // A place frees up: the waiting connection is served.
    drop(first);
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        third.read_to_end(&mut answer),
    )
    .await
    .expect("served once a place was free")
    .unwrap();
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn one_model_is_retrieved_only_by_keys_that_may_name_it() {
    let gateway = local_gateway();
    let get = async |path: &str, key: &str| {
        let auth = format!("Bearer {key}");
        get_with(&gateway.url(path), &[("authorization", auth.as_str())]).await
    };
    let auto = get("/v1/models/auto", "sk-alice").await;
    assert_eq!(auto.status, 200);
    assert_eq!(auto.json()["id"], "auto");
    assert_eq!(get("/v1/models/local", "sk-alice").await.status, 200);
    let hidden = get("/v1/models/local", "sk-bob").await;
    assert_eq!(
        hidden.status, 404,
        "a backend, to a key that may not name it"
    );
    assert_eq!(hidden.error()["code"], "model_not_found");
    assert_eq!(get("/models/nope", "sk-alice").await.status, 404);
}

/// API keys never reach a log, even at trace level: the callers' keys in
/// `authorization` and `x-api-key` (valid and not, HTTP/1 and HTTP/2,
/// whole and streamed) and the gateway's own key for its backend.
#[tokio::test]
async fn keys_never_reach_the_log_even_at_trace() {
    const CALLER: &str = "sk-caller-TRACEPROBE-4f9a2c71";
    const INTRUDER: &str = "sk-intruder-TRACEPROBE-88d1e0";
    const UPSTREAM: &str = "sk-upstream-TRACEPROBE-c3b5aa";
    let upstream = support::fast_sim(&[]);
    let log = support::unique_path("trace.log");
    let gateway = GatewayBuilder::new()
        .env("RUST_LOG", "trace")
        .env("TRACEPROBE_UPSTREAM_KEY", UPSTREAM)
        .backend_yaml(&format!(
            "  local:\n    tier: small\n    openai: {{base_url: '{}', api_key: 'env:TRACEPROBE_UPSTREAM_KEY'}}\n",
            upstream.base_url()
        ))
        .section(&format!(
            "auth:\n  keys:\n    - {{name: caller, hash: '{}'}}\n",
            support::key_hash(CALLER)
        ))
        .start_logging("", Some(&log));
    let bearer = format!("Bearer {CALLER}");
    let intruder = format!("Bearer {INTRUDER}");
    let streamed = {
        let mut body = chat("local", "hi");
        body["stream"] = json!(true);
        body
    };
    let chat_url = gateway.url("/v1/chat/completions");
    let messages =
        json!({"model": "local", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    for http2 in [false, true] {
        for (url, body, headers) in [
            (
                &chat_url,
                &chat("local", "hi"),
                vec![("authorization", bearer.as_str())],
            ),
            (
                &chat_url,
                &streamed,
                vec![("authorization", bearer.as_str())],
            ),
            (
                &gateway.url("/v1/messages"),
                &messages,
                vec![("x-api-key", CALLER), ("anthropic-version", "2023-06-01")],
            ),
            (
                &chat_url,
                &chat("local", "hi"),
                vec![("authorization", intruder.as_str())],
            ),
            (
                &gateway.url("/v1/messages"),
                &messages,
                vec![("x-api-key", INTRUDER)],
            ),
        ] {
            let mut all = vec![("content-type", "application/json")];
            all.extend(headers);
            let reply = support::request(
                http::Method::POST,
                url,
                &all,
                serde_json::to_vec(body).unwrap(),
                http2,
            )
            .await;
            assert!(matches!(reply.status.as_u16(), 200 | 401), "{reply:?}");
        }
    }
    drop(gateway);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(
        logged.lines().filter(|l| l.contains("TRACE")).count() > 100,
        "the log is at trace level"
    );
    for secret in [CALLER, INTRUDER, UPSTREAM, "TRACEPROBE"] {
        assert!(!logged.contains(secret), "`{secret}` is in the log");
    }
    let _ = std::fs::remove_file(&log);
}

/// `/v1/messages/count_tokens` tells a key that may only use routes of
/// routes, never of the backends behind them.
#[tokio::test]
async fn count_tokens_names_no_backend_to_a_key_that_may_not_name_them() {
    let gateway = local_gateway();
    let count = async |model: &str, key: &str| {
        post_with(
            &gateway.url("/v1/messages/count_tokens"),
            &json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}),
            &[("x-api-key", key), ("anthropic-version", "2023-06-01")],
        )
        .await
    };
    let unknown = count("nope", "sk-bob").await;
    assert_eq!(unknown.status, 404);
    let text = String::from_utf8_lossy(&unknown.body);
    assert!(text.contains("auto") && !text.contains("local"), "{text}");
    let backend = count("local", "sk-bob").await;
    assert!(
        backend.status == 403 || backend.status == 404,
        "{}",
        backend.status
    );
    assert!(!backend.body.is_empty() && backend.json().get("input_tokens").is_none());
    // A key that may name backends counts against one, and sees them listed.
    assert_eq!(count("local", "sk-alice").await.status, 200);
    let listed = count("nope", "sk-alice").await;
    assert!(String::from_utf8_lossy(&listed.body).contains("local"));
    assert_eq!(count("auto", "sk-bob").await.status, 200);
}

/// Issue #38, bug 7: a `since` holding a character of more than one byte
/// was cut inside it, a panic and a 500. Now it is a 400 that names the
/// parameter, percent-encoded or sent raw, and so is any other bad value.
#[tokio::test]
async fn a_since_that_is_not_a_duration_is_a_400_never_a_500() {
    let gateway = local_gateway();
    let admin = [("authorization", "Bearer sk-admin")];
    for (path, param) in [
        ("/admin/spend?since=7%C3%A9", "since"),
        ("/admin/spend?since=7é", "since"),
        ("/admin/spend?since=%C3%A9", "since"),
        ("/admin/spend?since=", "since"),
        ("/admin/spend?since=99999999999999999999d", "since"),
        ("/admin/budgets?since=7%C3%A9", "since"),
        ("/admin/sessions?since=7%C3%A9", "since"),
        ("/admin/advice?since=7%C3%A9", "since"),
        ("/admin/advice?target=%C3%A9", "target"),
        ("/admin/spend?by=%C3%A9", "by"),
    ] {
        let reply = get_with(&gateway.url(path), &admin).await;
        assert_eq!(reply.status, 400, "{path}: {reply:?}");
        assert_eq!(reply.error()["param"], param, "{path}");
    }
    let fine = get_with(&gateway.url("/admin/spend?since=7d"), &admin).await;
    assert_eq!(fine.status, 200);
}

/// `/metrics` can require a key (a scraper's own, or the admin key), and
/// keys' and teams' names can be kept off it.
#[tokio::test]
async fn metrics_can_require_a_key_and_leave_key_names_out() {
    let guarded = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("local", 1)])
        .section(&format!(
            "{}  metrics_key_hash: '{}'\n",
            keys(),
            support::key_hash("sk-scraper")
        ))
        .start();
    let scrape = async |gateway: &Proc, key: &str| {
        let auth = format!("Bearer {key}");
        get_with(
            &gateway.url("/metrics"),
            &[("authorization", auth.as_str())],
        )
        .await
    };
    assert_eq!(support::get(&guarded.url("/metrics")).await.status, 401);
    assert_eq!(
        scrape(&guarded, "sk-alice").await.status,
        401,
        "a tenant's key is not a scraper's"
    );
    assert_eq!(scrape(&guarded, "sk-admin").await.status, 200);
    let seen = scrape(&guarded, "sk-scraper").await;
    assert_eq!(seen.status, 200);
    assert!(String::from_utf8_lossy(&seen.body).contains("key=\"alice\""));

    let unlabelled = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("local", 1)])
        .section(&format!("{}  metrics_key_labels: false\n", keys()))
        .start();
    let auth = [("authorization", "Bearer sk-alice")];
    assert_eq!(
        post_with(
            &unlabelled.url("/v1/chat/completions"),
            &chat("auto", "hi"),
            &auth
        )
        .await
        .status,
        200
    );
    let text = support::get(&unlabelled.url("/metrics")).await;
    assert_eq!(text.status, 200, "open when no scraper key is set");
    let text = String::from_utf8_lossy(&text.body);
    assert!(text.contains("switchyard_requests"), "{text}");
    for name in ["alice", "bob", "carol"] {
        assert!(!text.contains(&format!("\"{name}\"")), "{name} on /metrics");
    }
}

/// A caller-chosen session id (or body `user`) does not pin a key that may
/// only use routes to the large tier of a sticky 80/20 split: the key's
/// requests keep to the weights, whatever id it sends.
#[tokio::test]
async fn a_session_id_never_lets_a_key_pick_its_tier() {
    let gateway = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .in_process_sim(
            "cloud",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
        .route(
            "auto",
            "strategy:\n  split: {weights: {local: 80, cloud: 20}, sticky: true}",
        )
        .section(&keys())
        .start();
    // A session id that the split's hash sends to `cloud`.
    let mut pinned = None;
    for i in 0..200 {
        let session = format!("s-{i}");
        let reply = post_with(
            &gateway.url("/v1/chat/completions"),
            &chat("auto", "hi"),
            &[
                ("authorization", "Bearer sk-carol"),
                ("x-session-id", session.as_str()),
            ],
        )
        .await;
        if reply.header("x-switchyard-backend") == Some("cloud") {
            pinned = Some(session);
            break;
        }
    }
    let pinned = pinned.expect("some session id hashes to cloud");
    let mut on_cloud = 0;
    let mut reasons = std::collections::BTreeSet::new();
    for (header, body) in [
        ("x-session-id", chat("auto", "hi")),
        ("x-unused", {
            let mut body = chat("auto", "hi");
            body["user"] = json!(pinned);
            body
        }),
    ] {
        for _ in 0..20 {
            let reply = post_with(
                &gateway.url("/v1/chat/completions"),
                &body,
                &[
                    ("authorization", "Bearer sk-bob"),
                    (header, pinned.as_str()),
                ],
            )
            .await;
            assert_eq!(reply.status, 200);
            on_cloud += usize::from(reply.header("x-switchyard-backend") == Some("cloud"));
            reasons.insert(reply.header("x-switchyard-reason").unwrap_or("").to_owned());
        }
    }
    // 20% of 40 is 8; the slack allows a few more, never most of them.
    assert!(on_cloud <= 14, "{on_cloud} of 40 on cloud: {reasons:?}");
    assert!(reasons.contains("sticky-share"), "{reasons:?}");
}

/// Keys share the native Responses backend's account, where stored
/// responses live: a key may not continue a response (or conversation) by
/// id, which could be another key's, nor start a background response or,
/// with a budget, a hosted tool, neither of which the gateway can price.
/// Nothing refused reaches the backend; a plain request does.
#[tokio::test]
async fn a_key_cannot_reach_stored_responses_or_unpriced_hosted_tools() {
    let (addr, seen) = support::recording_server(
        1,
        r#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"native","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10,"input_tokens_details":{"cached_tokens":0}}}"#,
    )
    .await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  native:\n    tier: cloud\n    model: gpt-x\n    openai: {{base_url: 'http://{addr}/v1', responses: true}}\n    price: {{input_per_mtok: 1, output_per_mtok: 1}}\n"
        ))
        .section(&format!(
            "auth:\n  keys:\n    - {{name: dora, hash: '{}', budget: {{daily_usd: 5}}}}\n",
            support::key_hash("sk-dora")
        ))
        .start();
    let url = gateway.url("/v1/responses");
    let dora = [("authorization", "Bearer sk-dora")];
    for (param, extra) in [
        (
            "previous_response_id",
            json!({"previous_response_id": "resp_someone_elses"}),
        ),
        ("conversation", json!({"conversation": "conv_123"})),
        ("background", json!({"background": true})),
        ("tools", json!({"tools": [{"type": "web_search"}]})),
    ] {
        let mut body = json!({"model": "native", "input": "hi"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let reply = post_with(&url, &body, &dora).await;
        assert_eq!(
            reply.status,
            400,
            "{param}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.error()["param"], param);
    }
    let function = json!({"model": "native", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {}}]});
    assert_eq!(post_with(&url, &function, &dora).await.status, 200);
    assert_eq!(
        seen.await.unwrap().len(),
        1,
        "only the plain request was sent"
    );
}
