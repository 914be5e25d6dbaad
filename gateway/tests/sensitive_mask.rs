//! `sensitive: {action: mask}`: cloud stand-ins that record every body they
//! receive show placeholders where the caller's values were (system
//! prompt, messages, tool results, tool-call arguments, a card number
//! split across two messages), and their answers, which use the
//! placeholders as a model would, reach the caller with the values back,
//! whole and streamed (placeholders cut across chunks). A backend marked
//! `local: true` is sent the values as they are.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{GatewayBuilder, body_of, post_json};

const CARD: &str = "4111 1111 1111 1111";
const EMAIL: &str = "jane.doe@example.com";
const ANSWER: &str = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Charged [CARD_1], receipt to [EMAIL_1].","tool_calls":[{"id":"t1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"[CARD_1]\"}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}"#;

/// Placeholders cut across chunks, a tool call's arguments cut too, and a
/// `[` at the end that turns out to be no placeholder.
const EVENTS: &str = concat!(
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"Charged [CA"},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"RD_1] to [EMAIL"},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"_1]. See ["},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"pay","arguments":"{\"card\":\"[CAR"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"D_1]\"}"}}]},"finish_reason":null}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    "\n\n",
    r#"data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}"#,
    "\n\n",
    "data: [DONE]\n\n",
);

fn conversation(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "max_tokens": 20, "user": EMAIL,
        "tools": [{"type": "function", "function": {"name": "lookup",
            "description": format!("Looks up a customer; ours is {EMAIL}"), "parameters": {"type": "object"}}}],
        "messages": [
        {"role": "system", "content": format!("The customer's address is {EMAIL}.")},
        {"role": "user", "content": [{"type": "text", "text": format!("Pay with {CARD}.")}]},
        {"role": "assistant", "content": null, "reasoning_content": format!("They wrote from {EMAIL}."),
            "tool_calls": [{"id": "t0", "type": "function",
            "function": {"name": "lookup", "arguments": format!("{{\"email\":\"{EMAIL}\"}}")}}]},
        {"role": "tool", "tool_call_id": "t0", "content": format!("card on file: {CARD}")},
        {"role": "user", "content": "go ahead"}]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masked_values_never_reach_the_cloud_and_come_back_to_the_caller() {
    // Whole answers: the conversation, a card split across messages, the
    // same through Anthropic's Messages and the Responses API.
    let (cloud, seen) = support::recording_server(4, ANSWER).await;
    let (streaming, seen_streaming) = support::canned_event_server(1, EVENTS).await;
    let (onprem, seen_onprem) = support::recording_server(1, ANSWER).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{cloud}/v1'}}\n  streaming:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{streaming}/v1'}}\n  onprem:\n    tier: large\n    local: true\n    model: big\n    openai: {{base_url: 'http://{onprem}/v1'}}\n"
        ))
        .route("masked", "strategy:\n  split:\n    weights: {cloud: 1}\nsensitive: {action: mask}")
        .route("masked-stream", "strategy:\n  split:\n    weights: {streaming: 1}\nsensitive: {action: mask}")
        .route("masked-onprem", "strategy:\n  split:\n    weights: {onprem: 1}\nsensitive: {action: mask}")
        .start();
    let chat = gateway.url("/v1/chat/completions");

    let whole = post_json(&chat, &conversation("masked", false)).await;
    assert_eq!(whole.status, 200, "{:?}", whole.body);
    assert_eq!(whole.header("x-switchyard-sensitive"), Some("card,email"));
    let message = &whole.json()["choices"][0]["message"];
    assert_eq!(
        message["content"],
        format!("Charged {CARD}, receipt to {EMAIL}.")
    );
    assert_eq!(
        message["tool_calls"][0]["function"]["arguments"],
        format!("{{\"card\":\"{CARD}\"}}")
    );

    // Split across two messages: each piece is masked.
    let split = json!({"model": "masked", "max_tokens": 5, "messages": [
        {"role": "user", "content": "my card number is 4111 1111"},
        {"role": "user", "content": "1111 1111, charge it"}]});
    assert_eq!(post_json(&chat, &split).await.status, 200);

    let messages = json!({"model": "masked", "max_tokens": 20,
        "system": format!("Mail {EMAIL}"),
        "messages": [{"role": "user", "content": format!("card {CARD}")}]});
    let anthropic = post_json(&gateway.url("/v1/messages"), &messages).await;
    assert_eq!(anthropic.status, 200, "{:?}", anthropic.body);
    assert_eq!(
        anthropic.json()["content"][0]["text"],
        format!("Charged {CARD}, receipt to {EMAIL}.")
    );
    let responses = json!({"model": "masked", "input": format!("card {CARD}, mail {EMAIL}")});
    let responses = post_json(&gateway.url("/v1/responses"), &responses).await;
    assert_eq!(responses.status, 200, "{:?}", responses.body);
    assert!(
        responses.json()["output"].to_string().contains(CARD),
        "{:?}",
        responses.body
    );

    let bodies = seen.await.unwrap();
    assert_eq!(bodies.len(), 4);
    for body in &bodies {
        assert!(
            !body.contains("4111") && !body.contains("jane.doe"),
            "a value reached the cloud: {body}"
        );
    }
    let first = body_of(&bodies[0]);
    let sent = first["messages"].to_string();
    for masked in [
        "The customer's address is [EMAIL_1].",
        "Pay with [CARD_1].",
        r#"{\"email\":\"[EMAIL_1]\"}"#,
        "card on file: [CARD_1]",
        "They wrote from [EMAIL_1].",
    ] {
        assert!(sent.contains(masked), "{masked} not in {sent}");
    }
    let split_sent = body_of(&bodies[1])["messages"].to_string();
    assert!(
        split_sent.contains("my card number is [CARD_1]")
            && split_sent.contains("[CARD_2], charge it"),
        "{split_sent}"
    );

    // Streamed: restored as it streams, cut placeholders whole again.
    let streamed = post_json(&chat, &conversation("masked-stream", true)).await;
    assert_eq!(streamed.status, 200);
    let mut content = String::new();
    let mut arguments = String::new();
    for event in streamed.events() {
        if event == "[DONE]" {
            continue;
        }
        let chunk: Value = serde_json::from_str(&event).unwrap();
        let delta = &chunk["choices"][0]["delta"];
        content += delta["content"].as_str().unwrap_or("");
        arguments += delta["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap_or("");
    }
    assert_eq!(content, format!("Charged {CARD} to {EMAIL}. See ["));
    assert_eq!(arguments, format!("{{\"card\":\"{CARD}\"}}"));
    let streamed_bodies = seen_streaming.await.unwrap();
    assert!(!streamed_bodies[0].contains("4111") && !streamed_bodies[0].contains("jane.doe"));

    // A backend marked local is trusted with the values.
    let local = post_json(&chat, &conversation("masked-onprem", false)).await;
    assert_eq!(local.status, 200);
    let onprem_bodies = seen_onprem.await.unwrap();
    assert!(onprem_bodies[0].contains(CARD), "{}", onprem_bodies[0]);

    // The ledger keeps the kinds and the action, never a value.
    let rows = support::ledger_rows(
        &gateway,
        "SELECT sensitive, sensitive_action FROM requests WHERE sensitive IS NOT NULL",
        6,
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )
    .await;
    assert!(
        rows.iter()
            .all(|(kinds, action)| action == "mask" && (kinds == "card,email" || kinds == "card")),
        "{rows:?}"
    );
    // The request log finds them by kind; a kind it does not know is a 400.
    let by_kind = |kind: &str| {
        let url = gateway.url(&format!("/admin/requests?since=1h&sensitive={kind}"));
        async move { support::get(&url).await }
    };
    let cards = by_kind("card").await.json();
    assert_eq!(cards["requests"].as_array().unwrap().len(), 6, "{cards:#}");
    assert!(
        cards["requests"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["sensitive_action"] == "mask")
    );
    let emails = by_kind("email").await.json();
    assert_eq!(
        emails["requests"].as_array().unwrap().len(),
        5,
        "{emails:#}"
    );
    assert_eq!(by_kind("iban").await.json()["requests"], json!([]));
    assert_eq!(by_kind("cards").await.status, 400);
    assert!(
        support::metric(
            &gateway,
            "switchyard_sensitive_requests_total{kind=\"card\",action=\"mask\"}"
        )
        .await
            >= 6.0
    );
}

/// A backend's error that quotes the prompt: under a policy, the ledger's
/// row and the log line keep the placeholders, never the values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_words_about_the_prompt_are_masked_in_the_ledger_and_the_log() {
    const DECLINED: &str = r#"{"error": {"message": "card 4111 1111 1111 1111 of jane.doe@example.com was declined", "type": "invalid_request_error"}}"#;
    let (onprem, _) = support::canned_server(1, "400 Bad Request", DECLINED).await;
    let log = support::unique_path("sensitive-log");
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  onprem:\n    tier: large\n    local: true\n    model: big\n    openai: {{base_url: 'http://{onprem}/v1'}}\n"
        ))
        .route("kept", "strategy:\n  split:\n    weights: {onprem: 1}\nsensitive: {action: local_only}")
        .start_logging("info", Some(&log));
    let body = json!({"model": "kept", "max_tokens": 5, "messages": [
        {"role": "user", "content": format!("charge {CARD} for {EMAIL}")}]});
    let answer = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(answer.status, 400, "{:?}", answer.body);
    let errors = support::ledger_rows(
        &gateway,
        "SELECT error FROM requests WHERE error IS NOT NULL",
        1,
        |r| r.get::<_, String>(0),
    )
    .await;
    assert!(
        errors[0].contains("[CARD_1]")
            && !errors[0].contains("4111")
            && !errors[0].contains("jane.doe"),
        "{errors:?}"
    );
    let written = std::fs::read_to_string(&log).unwrap();
    assert!(written.contains("[CARD_1]"), "{written}");
    assert!(
        !written.contains("4111") && !written.contains("jane.doe"),
        "{written}"
    );
}

/// A semantic rule's encoder that is not local is sent the request's text
/// masked, and its call's row carries the kinds like the request's others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routing_encoder_in_the_cloud_reads_the_masked_text() {
    const EMBEDDING: &str = r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}}"#;
    // Two calls: the rule's example, then the request's text.
    let (encoder, seen) = support::recording_server(2, EMBEDDING).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  emb:\n    tier: cloud\n    model: text-embedding-3-small\n    openai: {{base_url: 'http://{encoder}/v1'}}\n"
        ))
        .in_process_sim("local", "small", support::FAST_SIM_FIELDS)
        .route(
            "semantic",
            "strategy:\n  rules:\n    - when: {similar_to: {examples: [refund my order], threshold: 0.5, encoder: emb}}\n      to: local\n    - to: local\nsensitive: {action: mask}",
        )
        .start();
    let body = json!({"model": "semantic", "max_tokens": 5, "messages": [
        {"role": "user", "content": format!("refund card {CARD} for {EMAIL}")}]});
    let answer = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let bodies = seen.await.unwrap();
    let sent = bodies
        .iter()
        .find(|b| b.contains("refund card"))
        .expect("the request's text embedded");
    assert!(
        sent.contains("[CARD_1]")
            && sent.contains("[EMAIL_1]")
            && !sent.contains("4111")
            && !sent.contains("jane.doe"),
        "{sent}"
    );
    let rows = support::ledger_rows(
        &gateway,
        "SELECT endpoint, sensitive FROM requests WHERE endpoint = 'encoder' AND sensitive IS NOT NULL",
        1,
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )
    .await;
    assert_eq!(rows[0].1, "card,email");
}
