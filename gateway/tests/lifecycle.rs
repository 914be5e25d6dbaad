//! Connections and process life: h2c, client disconnects, graceful shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;
use support::{GatewayBuilder, chat, fast_sim, get, post_json, send};

#[tokio::test]
async fn serves_http2_without_tls() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let body = serde_json::to_vec(&chat("local", "over h2c")).unwrap();
    let reply = send(
        Method::POST,
        &gateway.url("/v1/chat/completions"),
        Some("application/json"),
        body,
        true,
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(reply.json()["choices"][0]["message"]["content"].is_string());
}

#[tokio::test]
async fn a_client_that_leaves_cancels_the_upstream_call() {
    // 5 tokens/s: the full reply would take many seconds.
    let slow = support::sim(
        "small",
        &["base_ttft_ms=1", "decode_tokens_per_s=5", "jitter=0"],
    );
    let gateway = GatewayBuilder::new()
        .openai("slow", "small", &slow.base_url(), &[])
        .start();
    let mut body = chat("slow", "tell me a long story");
    body["stream"] = json!(true);
    let request = Request::builder()
        .method(Method::POST)
        .uri(gateway.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&body).unwrap())))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client.request(request).await.unwrap();
    let mut body = response.into_body();
    let first = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .unwrap();
    assert!(first.is_some(), "the stream started");
    let stats = get(&slow.url("/sim/stats")).await.json();
    assert_eq!(stats["active"], 1, "the simulator is decoding: {stats}");
    drop(body);
    drop(client);
    let stopped =
        support::eventually(async || get(&slow.url("/sim/stats")).await.json()["active"] == 0)
            .await;
    assert!(stopped, "the upstream call was not cancelled");
}

#[tokio::test]
async fn sigterm_drains_in_flight_streams_then_exits() {
    // About 1.5 s per reply.
    let slow = support::sim(
        "small",
        &[
            "base_ttft_ms=1",
            "decode_tokens_per_s=40",
            "default_max_tokens=60",
            "jitter=0",
        ],
    );
    let mut gateway = GatewayBuilder::new()
        .openai("slow", "small", &slow.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("slow", "finish this please");
    body["stream"] = json!(true);
    let in_flight = tokio::spawn(async move { post_json(&url, &body).await });
    assert!(
        support::eventually(async || get(&slow.url("/sim/stats")).await.json()["active"] == 1)
            .await
    );

    let addr = gateway.addr;
    let status = tokio::task::spawn_blocking(move || gateway.terminate())
        .await
        .unwrap();
    assert!(status.success(), "clean exit after draining: {status:?}");

    let reply = in_flight.await.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.events().last().map(String::as_str),
        Some("[DONE]"),
        "the stream was allowed to finish"
    );
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "no longer accepting"
    );
}
