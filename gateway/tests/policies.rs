//! Every policy against every endpoint: the model endpoints share one
//! admission path, so keys, backend naming, budgets and rate limits refuse
//! the same way on chat, completions, embeddings, Messages, Responses
//! translated through chat and Responses passed through to a native backend,
//! and each refusal leaves its ledger row.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, post_with};

/// An endpoint: its path and a request to `model` on it.
struct Endpoint {
    name: &'static str,
    path: &'static str,
    body: fn(&str) -> Value,
    /// The model that reaches this endpoint's backend directly, and a route to it.
    backend: &'static str,
    route: &'static str,
}

const ENDPOINTS: [Endpoint; 6] = [
    Endpoint {
        name: "chat",
        path: "/v1/chat/completions",
        body: |m| json!({"model": m, "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}),
        backend: "cloud",
        route: "auto",
    },
    Endpoint {
        name: "completions",
        path: "/v1/completions",
        body: |m| json!({"model": m, "max_tokens": 20, "prompt": "hello"}),
        backend: "cloud",
        route: "auto",
    },
    Endpoint {
        name: "embeddings",
        path: "/v1/embeddings",
        body: |m| json!({"model": m, "input": ["hello", "world"]}),
        backend: "cloud",
        route: "auto",
    },
    Endpoint {
        name: "messages",
        path: "/v1/messages",
        body: |m| json!({"model": m, "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}),
        backend: "cloud",
        route: "auto",
    },
    Endpoint {
        name: "responses",
        path: "/v1/responses",
        body: |m| json!({"model": m, "max_output_tokens": 20, "input": "hello"}),
        backend: "cloud",
        route: "auto",
    },
    Endpoint {
        name: "responses passed through",
        path: "/v1/responses",
        body: |m| json!({"model": m, "max_output_tokens": 20, "input": "hello"}),
        backend: "native",
        route: "auto-native",
    },
];

/// A key line of the auth section.
fn key(name: &str, extra: &str) -> String {
    format!(
        "    - {{name: {name}, hash: '{}'{extra}}}\n",
        support::key_hash(&format!("sk-{name}"))
    )
}

/// The upstream (a gateway that speaks Responses, on a simulator) and the
/// gateway under test: `cloud` (in-process, priced) and `native` (the
/// upstream, taking Responses untranslated), a route to each, and keys for
/// each policy; one requests-per-minute key per endpoint.
fn gateways() -> (Proc, Proc) {
    let upstream = GatewayBuilder::new()
        .in_process_sim("sim", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .start();
    let price = "price: {input_per_mtok: 1000, output_per_mtok: 1000}";
    let mut keys = key("alice", "") + &key("bob", ", may_name_backends: false");
    keys += &key("poor", ", budget: {daily_usd: 0.000001}");
    keys += &key("hasty", ", tokens_per_minute: 1");
    keys += &key("narrow", ", models: ['auto*']");
    keys += &key("member", ", team: research");
    for i in 0..ENDPOINTS.len() {
        keys += &key(&format!("rpm{i}"), ", requests_per_minute: 1");
    }
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    sim: {{preset: large, {FAST_SIM_FIELDS}}}\n    {price}\n  native:\n    tier: cloud\n    model: sim\n    openai: {{base_url: '{}', responses: true}}\n    {price}\n",
            upstream.base_url()
        ))
        .split("auto", &[("cloud", 1)])
        .split("auto-native", &[("native", 1)])
        .section(&format!(
            "auth:\n  teams:\n    research: {{models: [auto]}}\n  keys:\n{keys}"
        ))
        .start();
    (upstream, gateway)
}

async fn send(gateway: &Proc, endpoint: &Endpoint, model: &str, key: Option<&str>) -> u16 {
    let auth = key.map(|k| format!("Bearer sk-{k}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| ("authorization", a))
        .into_iter()
        .collect();
    let reply = post_with(
        &gateway.url(endpoint.path),
        &(endpoint.body)(model),
        &headers,
    )
    .await;
    reply.status.as_u16()
}

#[tokio::test]
async fn every_policy_holds_on_every_endpoint() {
    let (_upstream, gateway) = gateways();
    let mut failures = Vec::new();
    for (i, endpoint) in ENDPOINTS.iter().enumerate() {
        let rpm = format!("rpm{i}");
        // (policy, model, key, expected status)
        let cases: [(&str, &str, Option<&str>, u16); 9] = [
            (
                "a key's request is served",
                endpoint.route,
                Some("alice"),
                200,
            ),
            ("no key is refused", endpoint.route, None, 401),
            (
                "a backend named directly by a route-only key",
                endpoint.backend,
                Some("bob"),
                403,
            ),
            (
                "a route-only key through its route",
                endpoint.route,
                Some("bob"),
                200,
            ),
            (
                "a budget that cannot hold the worst case",
                endpoint.route,
                Some("poor"),
                429,
            ),
            ("tokens per minute", endpoint.route, Some("hasty"), 429),
            (
                "a model outside the key's models",
                endpoint.backend,
                Some("narrow"),
                403,
            ),
            (
                "a model the key's pattern lets through",
                endpoint.route,
                Some("narrow"),
                200,
            ),
            (
                "the first request of the minute",
                endpoint.route,
                Some(rpm.as_str()),
                200,
            ),
        ];
        for (policy, model, key, expected) in cases {
            let status = send(&gateway, endpoint, model, key).await;
            if status != expected {
                failures.push(format!(
                    "{}: {policy}: {status}, not {expected}",
                    endpoint.name
                ));
            }
        }
        let status = send(&gateway, endpoint, endpoint.route, Some(&rpm)).await;
        if status != 429 {
            failures.push(format!(
                "{}: requests per minute: {status}, not 429",
                endpoint.name
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Every refusal after authentication is a row: five per endpoint
    // (backend named, model not allowed, budget, tokens per minute,
    // requests per minute).
    let refusals: Vec<(String, String)> = support::ledger_rows(
        &gateway,
        "SELECT endpoint, status FROM requests WHERE refusal IS NOT NULL",
        5 * ENDPOINTS.len(),
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .await;
    for status in [
        "backend_not_allowed",
        "model_not_allowed",
        "budget_exhausted",
        "rate_limited",
    ] {
        for endpoint in ["chat", "completions", "embeddings", "messages", "responses"] {
            assert!(
                refusals.iter().any(|(e, s)| e == endpoint && s == status),
                "no {status} row for {endpoint}: {refusals:#?}"
            );
        }
    }
}

/// `models:` on a key and on its team: a request for a model outside them
/// is 403 naming the model (and what the key may use), in the endpoint's
/// dialect; `/v1/models` lists only what the key may use.
#[tokio::test]
async fn a_keys_and_its_teams_models_bound_what_it_may_ask_for() {
    let (_upstream, gateway) = gateways();
    let narrow = support::post_with(
        &gateway.url("/v1/chat/completions"),
        &(ENDPOINTS[0].body)("cloud"),
        &[("authorization", "Bearer sk-narrow")],
    )
    .await;
    assert_eq!(narrow.status, 403);
    let error = narrow.error();
    assert_eq!(error["code"], "model_not_allowed");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("`cloud`") && message.contains("auto, auto-native"),
        "{message}"
    );
    // Anthropic's dialect for the Messages endpoint.
    let messages = support::post_with(
        &gateway.url("/v1/messages"),
        &(ENDPOINTS[3].body)("auto-native"),
        &[("authorization", "Bearer sk-member")],
    )
    .await;
    assert_eq!(messages.status, 403);
    assert_eq!(messages.json()["type"], "error");
    assert_eq!(messages.json()["error"]["type"], "permission_error");
    let listed = |key: &'static str| {
        let gateway = &gateway;
        async move {
            let reply = support::get_with(
                &gateway.url("/v1/models"),
                &[("authorization", &format!("Bearer sk-{key}"))],
            )
            .await;
            let mut ids: Vec<String> = reply.json()["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["id"].as_str().unwrap().to_owned())
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(listed("narrow").await, ["auto", "auto-native"]);
    assert_eq!(listed("member").await, ["auto"]);
    assert_eq!(listed("alice").await.len(), 4, "no models: everything");
}
