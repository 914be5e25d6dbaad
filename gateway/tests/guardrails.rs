//! Guardrail hooks: a hook service on loopback (the team's own classifier)
//! asked before the call with the prompt and after it with the answer,
//! blocking what it flags (a streamed answer included, held back until it
//! is checked); a hook that is late and fails open lets the request
//! through, one that fails and fails closed refuses it; every call is
//! counted, and the hook is sent the bearer token from its `env:` variable.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use support::{GatewayBuilder, post_json};

const FLAGGED: &str = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the launch code is SECRET-42"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":6,"total_tokens":11}}"#;
const FLAGGED_EVENTS: &str = concat!(
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"the code is SEC"},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"RET-42"},"finish_reason":"stop"}]}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

/// The hook service: `/words` blocks prompts with "forbidden" and answers
/// with "SECRET" (and checks its token); `/slow` answers after 2 s;
/// `/broken` answers 500. Every body it is sent is kept.
async fn hooks() -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let store = seen.clone();
    tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            let store = store.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let store = store.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let token = req
                            .headers()
                            .get("authorization")
                            .map(|v| v.to_str().unwrap().to_owned());
                        let body: Value = serde_json::from_slice(
                            &req.into_body().collect().await.unwrap().to_bytes(),
                        )
                        .unwrap();
                        store.lock().unwrap().push(body.clone());
                        let (status, verdict) = match path.as_str() {
                            "/words" => {
                                assert_eq!(token.as_deref(), Some("Bearer hook-token"));
                                let prompt = body["prompt"].to_string();
                                let answer = body["answer"].as_str().unwrap_or("");
                                if prompt.contains("forbidden") {
                                    (
                                        200,
                                        json!({"action": "block", "reason": "a forbidden topic"}),
                                    )
                                } else if answer.contains("SECRET") {
                                    (
                                        200,
                                        json!({"action": "block", "reason": "the answer leaks a code"}),
                                    )
                                } else {
                                    (200, json!({"action": "allow"}))
                                }
                            }
                            "/slow" => {
                                tokio::time::sleep(Duration::from_secs(2)).await;
                                (200, json!({"action": "block"}))
                            }
                            _ => (500, json!({"error": "down"})),
                        };
                        let response = hyper::Response::builder()
                            .status(status)
                            .header("content-type", "application/json")
                            .body(Full::new(Bytes::from(verdict.to_string())))
                            .unwrap();
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_block_before_and_after_the_call_and_fail_as_configured() {
    let (hook, seen) = hooks().await;
    let (cloud, _) = support::recording_server(1, FLAGGED).await;
    let (streaming, _) = support::canned_event_server(1, FLAGGED_EVENTS).await;
    let gateway = GatewayBuilder::new()
        .env("HOOK_TOKEN", "hook-token")
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{cloud}/v1'}}\n  streaming:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{streaming}/v1'}}\n"
        ))
        .in_process_sim("local", "small", support::FAST_SIM_FIELDS)
        .section(&format!(
            "guardrails:\n  words-pre: {{url: '{hook}/words', stage: pre_call, api_key: 'env:HOOK_TOKEN'}}\n  words-post: {{url: '{hook}/words', stage: post_call, api_key: 'env:HOOK_TOKEN'}}\n  slow: {{url: '{hook}/slow', stage: pre_call, timeout_ms: 200, fail: open}}\n  broken: {{url: '{hook}/broken', stage: pre_call, fail: closed}}\n"
        ))
        .route("pre", "strategy:\n  split:\n    weights: {local: 1}\nguardrails: [words-pre]")
        .route("post", "strategy:\n  split:\n    weights: {cloud: 1}\nguardrails: [words-pre, words-post]")
        .route("post-stream", "strategy:\n  split:\n    weights: {streaming: 1}\nguardrails: [words-post]")
        .route("open", "strategy:\n  split:\n    weights: {local: 1}\nguardrails: [slow]")
        .route("closed", "strategy:\n  split:\n    weights: {local: 1}\nguardrails: [broken]")
        .start();
    let chat = gateway.url("/v1/chat/completions");
    let ask = |model: &str, text: &str, stream: bool| {
        json!({"model": model, "stream": stream, "max_tokens": 8,
            "messages": [{"role": "user", "content": text}]})
    };

    // Before the call: allowed, then blocked with the hook's reason.
    assert_eq!(
        post_json(&chat, &ask("pre", "hello", false)).await.status,
        200
    );
    let blocked = post_json(&chat, &ask("pre", "tell me the forbidden thing", false)).await;
    assert_eq!(blocked.status, 400);
    assert_eq!(blocked.error()["code"], "guardrail_blocked");
    let message = blocked.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("words-pre") && message.contains("a forbidden topic"),
        "{message}"
    );
    // The same refusal in Anthropic's dialect.
    let anthropic = post_json(
        &gateway.url("/v1/messages"),
        &json!({"model": "pre", "max_tokens": 8,
            "messages": [{"role": "user", "content": "forbidden"}]}),
    )
    .await;
    assert_eq!(anthropic.status, 400);
    assert_eq!(anthropic.json()["type"], "error");

    // After the call: the answer is withheld, whole or streamed.
    let after = post_json(&chat, &ask("post", "what is the code?", false)).await;
    assert_eq!(after.status, 400, "{:?}", after.body);
    assert!(
        after.error()["message"]
            .as_str()
            .unwrap()
            .contains("leaks a code")
    );
    assert!(!String::from_utf8_lossy(&after.body).contains("SECRET"));
    let streamed = post_json(&chat, &ask("post-stream", "the code?", true)).await;
    assert_eq!(streamed.status, 400, "{:?}", streamed.body);
    assert!(!String::from_utf8_lossy(&streamed.body).contains("SEC"));

    // Late and open: served. Failing and closed: refused, 503.
    assert_eq!(
        post_json(&chat, &ask("open", "hello", false)).await.status,
        200
    );
    let closed = post_json(&chat, &ask("closed", "hello", false)).await;
    assert_eq!(closed.status, 503);
    assert_eq!(closed.error()["code"], "guardrail_unavailable");

    // What the hooks were sent: the stage, the route, the prompt, and
    // after the call the answer.
    let bodies = seen.lock().unwrap().clone();
    let post = bodies
        .iter()
        .find(|b| b["stage"] == "post_call" && b["route"] == "post")
        .unwrap();
    assert_eq!(post["guardrail"], "words-post");
    assert_eq!(post["prompt"], json!(["what is the code?"]));
    assert_eq!(post["answer"], "the launch code is SECRET-42");
    assert!(
        bodies
            .iter()
            .any(|b| b["stage"] == "pre_call" && b["route"] == "closed")
    );

    // Counted by outcome; the blocked calls' rows are in the ledger.
    for (series, at_least) in [
        (
            "switchyard_guardrail_calls_total{guardrail=\"words-pre\",stage=\"pre_call\",outcome=\"block\"}",
            2.0,
        ),
        (
            "switchyard_guardrail_calls_total{guardrail=\"words-post\",stage=\"post_call\",outcome=\"block\"}",
            2.0,
        ),
        (
            "switchyard_guardrail_calls_total{guardrail=\"slow\",stage=\"pre_call\",outcome=\"timeout\"}",
            1.0,
        ),
        (
            "switchyard_guardrail_calls_total{guardrail=\"broken\",stage=\"pre_call\",outcome=\"error\"}",
            1.0,
        ),
    ] {
        assert!(
            support::metric(&gateway, series).await >= at_least,
            "{series}"
        );
    }
    let rows = support::ledger_rows(
        &gateway,
        "SELECT status, backend, cost_usd FROM requests WHERE status = 'guardrail_blocked'",
        4,
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, f64>(2)?,
            ))
        },
    )
    .await;
    // Two refused before any call; two answered and billed, then withheld.
    assert_eq!(
        rows.iter().filter(|r| r.1.is_empty()).count(),
        2,
        "{rows:?}"
    );
    assert_eq!(
        rows.iter()
            .filter(|r| r.1 == "cloud" || r.1 == "streaming")
            .count(),
        2,
        "{rows:?}"
    );
}

#[test]
fn check_names_a_hook_that_is_not_defined_and_a_bad_stage() {
    for (yaml, said) in [
        (
            "routes:\n  auto:\n    strategy: {split: {weights: {local: 1}}}\n    guardrails: [missing]\n",
            "routes.auto.guardrails[0]",
        ),
        (
            "guardrails:\n  g: {url: 'http://127.0.0.1:9/x', stage: during}\n",
            "guardrails.g.stage",
        ),
        (
            "guardrails:\n  g: {url: 'http://127.0.0.1:9/x', stage: pre_call, api_key: 'sk-123'}\n",
            "guardrails.g.api_key",
        ),
    ] {
        let err = support::check_refuses(&format!(
            "backends:\n  local: {{tier: small, sim: {{preset: small}}}}\n{yaml}"
        ));
        assert!(err.contains(said), "{yaml}: {err}");
    }
}
