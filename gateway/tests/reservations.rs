//! What budgets reserve and the ledger bills for what a request may cost:
//! every answer and input it asks for, the output it may run to without
//! `max_tokens`, hardware time, service tiers, unpriced backends, and
//! requests only a native backend can take.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, chat, post_with, priced, short};

/// `n` answers are `n` answers' worth of output: the reservation counts
/// each, and more than `limits.max_n` is a 400 naming `n` (a key with a
/// small budget once spent 28 times it by asking for `n: 100`).
#[tokio::test]
async fn every_answer_asked_for_is_reserved() {
    let gateway = priced("")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: frank, hash: '{}', budget: {{daily_usd: 0.15}}}}\nlimits: {{max_n: 8}}\n",
            support::key_hash("sk-frank")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let frank = [("authorization", "Bearer sk-frank")];
    let with_n = |n: u32| {
        let mut request = short("hello", "cloud");
        request["n"] = json!(n);
        request
    };
    let one = post_with(&url, &with_n(1), &frank).await;
    assert_eq!(one.status, 200, "{}", String::from_utf8_lossy(&one.body));
    // Eight answers of up to 20 tokens at $1,000 per million cannot fit in
    // what is left of $0.15.
    let eight = post_with(&url, &with_n(8), &frank).await;
    assert_eq!(
        eight.status,
        429,
        "{}",
        String::from_utf8_lossy(&eight.body)
    );
    assert!(
        eight.error()["message"]
            .as_str()
            .unwrap()
            .contains("may cost up to")
    );
    let hundred = post_with(&url, &with_n(100), &frank).await;
    assert_eq!(hundred.status, 400);
    assert_eq!(hundred.error()["param"], "n");
    assert!(
        hundred.error()["message"]
            .as_str()
            .unwrap()
            .contains("limits.max_n")
    );
    // Completions: best_of answers are generated for each prompt of a batch.
    let completions = gateway.url("/v1/completions");
    for body in [
        json!({"model": "local", "prompt": "a", "max_tokens": 5, "best_of": 9}),
        json!({"model": "local", "prompt": ["a", "b", "c"], "max_tokens": 5, "n": 3}),
    ] {
        let reply = post_with(&completions, &body, &frank).await;
        assert_eq!(
            reply.status,
            400,
            "{body}: {}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.error()["param"], "n");
    }
    let batch = post_with(
        &completions,
        &json!({"model": "local", "prompt": ["a", "b"], "max_tokens": 5, "n": 2}),
        &frank,
    )
    .await;
    assert_eq!(
        batch.status,
        200,
        "{}",
        String::from_utf8_lossy(&batch.body)
    );
}

/// An embeddings batch reserves for every input, not only the first.
#[tokio::test]
async fn an_embeddings_batch_reserves_every_input() {
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    sim: {{preset: large, {FAST_SIM_FIELDS}}}\n    price: {{input_per_mtok: 1000, output_per_mtok: 1000}}\n"
        ))
        .section(&format!(
            "auth:\n  keys:\n    - {{name: gina, hash: '{}', budget: {{daily_usd: 0.5}}}}\n",
            support::key_hash("sk-gina")
        ))
        .start();
    let url = gateway.url("/v1/embeddings");
    let gina = [("authorization", "Bearer sk-gina")];
    let word = "tokens ".repeat(40);
    // One input fits ($0.05 at most); two hundred of them cannot ($10).
    let one = post_with(
        &url,
        &json!({"model": "cloud", "input": [word.clone()]}),
        &gina,
    )
    .await;
    assert_eq!(one.status, 200, "{}", String::from_utf8_lossy(&one.body));
    let batch: Vec<&str> = std::iter::repeat_n(word.as_str(), 200).collect();
    let many = post_with(&url, &json!({"model": "cloud", "input": batch}), &gina).await;
    assert_eq!(many.status, 429, "{}", String::from_utf8_lossy(&many.body));
}

/// What a budget holds for a request without `max_tokens`: the backend's
/// context window less the prompt, else `accounting.default_max_tokens`;
/// for hardware priced by the hour, the time the latency model expects
/// (p90) for the output it may run to.
#[tokio::test]
async fn reservations_without_max_tokens_follow_the_window_and_the_clock() {
    let upstream = support::fast_sim(&[]);
    let price = "price: {input_per_mtok: 1000, output_per_mtok: 1000}";
    let gateway = GatewayBuilder::new()
        // A 300-token window: at most about 300 tokens of output ($0.3).
        .backend_yaml(&format!(
            "  narrow:\n    tier: cloud\n    sim: {{preset: large, {FAST_SIM_FIELDS}}}\n    context_window: 300\n    {price}\n"
        ))
        // A cloud API whose window nobody says: the configured default.
        .backend_yaml(&format!(
            "  unknown:\n    tier: cloud\n    openai: {{base_url: '{}'}}\n    {price}\n",
            upstream.base_url()
        ))
        // $1 a second of hardware, expected to answer in milliseconds.
        .backend_yaml(&format!(
            "  hourly:\n    tier: small\n    sim: {{preset: small, {FAST_SIM_FIELDS}}}\n    latency: {{ttft_ms: 2, decode_tokens_per_s: 5000}}\n    price: {{usd_per_hour: 3600}}\n"
        ))
        .section(&format!(
            "accounting: {{default_max_tokens: 100}}\nauth:\n  keys:\n    - {{name: hana, hash: '{}', budget: {{daily_usd: 0.5, scope: total}}}}\n",
            support::key_hash("sk-hana")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let hana = [("authorization", "Bearer sk-hana")];
    for model in ["narrow", "unknown"] {
        // No max_tokens: 4,096 tokens ($4.10) would not have fit in $0.50.
        let reply = post_with(&url, &chat(model, "hello"), &hana).await;
        assert_eq!(
            reply.status,
            200,
            "{model}: {}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    // A minute's first-byte timeout of hardware ($60) would not have fit.
    let reply = post_with(&url, &short("hello", "hourly"), &hana).await;
    assert_eq!(
        reply.status,
        200,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
    // Without max_tokens the hourly backend may run to the end of its
    // 8,192-token window: seconds of hardware, more than is left.
    let reply = post_with(&url, &chat("hourly", "hello"), &hana).await;
    assert_eq!(
        reply.status,
        429,
        "{}",
        String::from_utf8_lossy(&reply.body)
    );
}

/// A field that changes the provider's bill is priced or not sent: a
/// service tier the price names is sent and multiplies the cost; any other
/// is stripped; `passthrough.deny` strips what the operator names. The
/// ledger keeps the tier that was sent.
#[tokio::test]
async fn service_tiers_are_priced_or_not_sent() {
    let completion = r#"{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100}}"#;
    let (server, seen) = support::recording_server(3, completion).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  gpt:\n    tier: cloud\n    openai: {{base_url: 'http://{server}/v1'}}\n    price: {{input_per_mtok: 2, output_per_mtok: 8, service_tiers: {{flex: 0.5}}}}\n    passthrough: {{deny: [store]}}\n"
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    for (id, tier) in [
        ("flex", "flex"),
        ("priority", "priority"),
        ("standard", "default"),
    ] {
        let mut body = chat("gpt", "hi");
        body["service_tier"] = json!(tier);
        body["store"] = json!(true);
        let reply = post_with(&url, &body, &[("x-request-id", id)]).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let sent: Vec<Value> = seen
        .await
        .unwrap()
        .iter()
        .map(|r| support::body_of(r))
        .collect();
    assert_eq!(sent[0]["service_tier"], "flex");
    assert!(
        sent[1].get("service_tier").is_none(),
        "an unpriced tier is not sent"
    );
    assert_eq!(
        sent[2]["service_tier"], "default",
        "the standard price's own name is sent"
    );
    assert!(
        sent.iter().all(|b| b.get("store").is_none()),
        "passthrough.deny"
    );
    let standard = (1000.0 * 2.0 + 100.0 * 8.0) / 1e6;
    let row = |id: &str| -> (f64, Option<String>) {
        gateway
            .ledger()
            .query_row(
                "SELECT cost_usd, service_tier FROM requests WHERE client_request_id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap()
    };
    assert!(
        support::eventually(async || gateway
            .ledger()
            .query_row("SELECT COUNT(*) FROM requests", [], |r| r.get::<_, i64>(0))
            .unwrap()
            == 3)
        .await
    );
    let (flex, tier) = row("flex");
    assert!((flex - standard * 0.5).abs() < 1e-12, "{flex}");
    assert_eq!(tier.as_deref(), Some("flex"));
    for (id, sent) in [("priority", None), ("standard", Some("default"))] {
        let (cost, tier) = row(id);
        assert!((cost - standard).abs() < 1e-12, "{id}: {cost}");
        assert_eq!(tier.as_deref(), sent, "{id}: what was sent");
    }
}

/// A cloud backend without a price is served, its rows say `unpriced`
/// (cost 0 because unknown), and a key with a budget is kept off it: the
/// route falls back to a priced backend, or named directly it is a 403.
#[tokio::test]
async fn an_unpriced_backend_is_marked_and_kept_from_budgets() {
    let upstream = support::fast_sim(&[]);
    let gateway = priced("")
        .backend_yaml(&format!(
            "  mine:\n    tier: cloud\n    model: my-own-model\n    openai: {{base_url: '{}'}}\n",
            upstream.base_url()
        ))
        .route("mine-first", "strategy:\n  split:\n    weights: {mine: 1}\nfallbacks: [cloud]")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: kim, hash: '{}'}}\n    - {{name: lee, hash: '{}', budget: {{daily_usd: 5}}}}\n",
            support::key_hash("sk-kim"),
            support::key_hash("sk-lee")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let kim = post_with(
        &url,
        &short("hi", "mine"),
        &[("authorization", "Bearer sk-kim")],
    )
    .await;
    assert_eq!(kim.status, 200);
    let lee = [("authorization", "Bearer sk-lee")];
    let direct = post_with(&url, &short("hi", "mine"), &lee).await;
    assert_eq!(direct.status, 403);
    assert_eq!(direct.error()["code"], "unpriced_backend");
    let routed = post_with(&url, &short("hi", "mine-first"), &lee).await;
    assert_eq!(routed.status, 200);
    assert_eq!(routed.header("x-switchyard-backend"), Some("cloud"));
    let unpriced: Vec<(String, f64)> = support::ledger_rows(
        &gateway,
        "SELECT key, cost_usd FROM requests WHERE unpriced = 1",
        1,
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .await;
    assert_eq!(unpriced, [("kim".to_owned(), 0.0)]);
}

/// A Responses request chat cannot express (`truncation`) goes to a
/// native backend by its model alone, but its size still counts: a long
/// prompt is reserved for in full.
#[tokio::test]
async fn an_untranslatable_responses_request_is_reserved_by_its_size() {
    let upstream = GatewayBuilder::new()
        .in_process_sim("sim", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .start();
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  native:\n    tier: cloud\n    model: sim\n    openai: {{base_url: '{}', responses: true}}\n    price: {{input_per_mtok: 1000, output_per_mtok: 1000}}\n",
            upstream.base_url()
        ))
        .section(&format!(
            "auth:\n  keys:\n    - {{name: max, hash: '{}', budget: {{daily_usd: 0.5}}}}\n",
            support::key_hash("sk-max")
        ))
        .start();
    let request = |input: String| {
        json!({"model": "native", "input": input, "max_output_tokens": 10,
               "truncation": "auto"})
    };
    let url = gateway.url("/v1/responses");
    let max = [("authorization", "Bearer sk-max")];
    // 2,000 words: some $2.50 of prompt at $1,000 per million.
    let long = post_with(&url, &request("word ".repeat(2000)), &max).await;
    assert_eq!(long.status, 429, "{}", String::from_utf8_lossy(&long.body));
    assert!(
        long.error()["message"]
            .as_str()
            .unwrap()
            .contains("may cost up to $2.")
    );
}

/// A 1024x1024 PNG's first bytes (its header is all the estimate reads),
/// as a data URL.
fn png_data_url(width: u32, height: u32) -> String {
    use base64::Engine as _;
    let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
    png.extend(width.to_be_bytes());
    png.extend(height.to_be_bytes());
    png.extend([8, 6, 0, 0, 0, 0, 0, 0, 0]);
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(png)
    )
}

fn with_image(url: &str) -> serde_json::Value {
    json!({
        "model": "cloud", "max_tokens": 10,
        "messages": [{"role": "user", "content": [
            {"type": "text", "text": "what is in it?"},
            {"type": "image_url", "image_url": {"url": url}},
        ]}],
    })
}

/// Images count in the prompt estimate budgets reserve: a 1024x1024 image
/// is about 1,400 prompt tokens ($1.40 at this price), so of ten concurrent
/// image requests a $3 budget admits two, not ten. An image that cannot be
/// sized before the call (by URL) reserves the backend's whole window.
#[tokio::test]
async fn images_are_reserved_for_by_the_published_rules() {
    let gateway = GatewayBuilder::new()
        .backend_yaml(
            "  cloud:\n    tier: cloud\n    sim: {preset: large, base_ttft_ms: 300, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0}\n    context_window: 100000\n    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: ivy, hash: '{}', budget: {{daily_usd: 3}}}}\n",
            support::key_hash("sk-ivy")
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    let ivy = [("authorization", "Bearer sk-ivy")];
    let image = png_data_url(1024, 1024);
    let body = with_image(&image);
    let replies =
        futures_util::future::join_all((0..10).map(|_| post_with(&url, &body, &ivy))).await;
    let admitted = replies.iter().filter(|r| r.status == 200).count();
    assert!(
        (1..=2).contains(&admitted),
        "{admitted} of 10 admitted: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert!(replies.iter().all(|r| r.status == 200 || r.status == 429));
    // By URL: nothing to size it by, so the window ($100) is reserved.
    let remote = post_with(&url, &with_image("https://example.com/cat.png"), &ivy).await;
    assert_eq!(
        remote.status,
        429,
        "{}",
        String::from_utf8_lossy(&remote.body)
    );
}
