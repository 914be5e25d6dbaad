//! Backends of other dialects: an Anthropic-dialect upstream (another
//! gateway's `/v1/messages`, or a recording server) reached by OpenAI and
//! Anthropic callers through translation both ways, and Responses requests
//! passed untranslated to a backend that speaks Responses itself.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, chat, post_json};

/// Front gateway -> `anthropic` backend -> upstream gateway's /v1/messages -> simulator.
fn chain() -> (Proc, Proc) {
    let upstream = GatewayBuilder::new()
        .in_process_sim("sim", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .start();
    let front = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  claude:\n    tier: small\n    model: sim\n    anthropic: {{base_url: '{}'}}\n",
            upstream.base_url()
        ))
        .start();
    (upstream, front)
}

const WEATHER: &str = r#"{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}"#;

#[tokio::test]
async fn openai_callers_reach_an_anthropic_backend() {
    let (_upstream, front) = chain();
    let url = front.url("/v1/chat/completions");
    let reply = post_json(&url, &chat("claude", "hello")).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let body = reply.json();
    assert!(
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .starts_with("[sim]")
    );
    assert!(body["usage"]["prompt_tokens"].as_u64().unwrap() > 0);

    let mut with_tools = chat("claude", "weather in Oslo?");
    with_tools["tools"] = json!([serde_json::from_str::<Value>(WEATHER).unwrap()]);
    let whole = post_json(&url, &with_tools).await.json();
    assert_eq!(whole["choices"][0]["finish_reason"], "tool_calls");
    let call = &whole["choices"][0]["message"]["tool_calls"][0];
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert!(args["city"].is_string());

    with_tools["stream"] = json!(true);
    with_tools["stream_options"] = json!({"include_usage": true});
    let streamed = post_json(&url, &with_tools).await;
    let events = streamed.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    let arguments: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&arguments).unwrap(),
        args,
        "streamed arguments reassemble exactly"
    );
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(
        usage["completion_tokens"],
        whole["usage"]["completion_tokens"]
    );
    assert_eq!(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
}

#[tokio::test]
async fn anthropic_callers_reach_an_anthropic_backend_and_bad_requests_are_refused() {
    let (_upstream, front) = chain();
    let url = front.url("/v1/messages");
    let reply = post_json(&url, &json!({"model": "claude", "max_tokens": 50, "system": "be brief", "messages": [{"role": "user", "content": "hi"}]})).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let message = reply.json();
    assert_eq!(message["type"], "message");
    assert!(
        message["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("[sim]")
    );

    // n > 1 has no Messages equivalent: a clear 400, not a different request.
    let mut many = chat("claude", "hi");
    many["n"] = json!(2);
    let refused = post_json(&front.url("/v1/chat/completions"), &many).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.error()["param"], "n");
    let embeddings = post_json(
        &front.url("/v1/embeddings"),
        &json!({"model": "claude", "input": "x"}),
    )
    .await;
    assert_eq!(embeddings.status, 400);
}

#[tokio::test]
async fn anthropic_version_and_beta_headers_reach_an_anthropic_backend_unchanged() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A bare Anthropic-shaped server that records the request head it gets.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut buf).await.unwrap();
            head.extend_from_slice(&buf[..n]);
        }
        let body = r#"{"id":"m1","type":"message","role":"assistant","model":"x","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}"#;
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(reply.as_bytes()).await.unwrap();
        String::from_utf8_lossy(&head).to_lowercase()
    });
    let front = GatewayBuilder::new()
        .backend_yaml(&format!("  claude:\n    tier: small\n    anthropic: {{base_url: 'http://{addr}/v1', version: '2023-01-01'}}\n"))
        .start();
    let reply = support::post_with(
        &front.url("/v1/messages"),
        &json!({"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}),
        &[("anthropic-version", "2023-06-01"), ("anthropic-beta", "context-management-2025-06-27")],
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.json()["content"][0]["text"], "ok");
    let head = seen.await.unwrap();
    assert!(
        head.contains("anthropic-version: 2023-06-01"),
        "the caller's version wins over the config's: {head}"
    );
    assert!(
        head.contains("anthropic-beta: context-management-2025-06-27"),
        "{head}"
    );
}

#[tokio::test]
async fn responses_reach_a_native_backend_untranslated() {
    let (addr, seen) = support::recording_server(
        1,
        r#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"native","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10,"input_tokens_details":{"cached_tokens":0}}}"#,
    )
    .await;
    let front = GatewayBuilder::new()
        .backend_yaml(&format!("  native:\n    tier: small\n    model: gpt-x\n    openai: {{base_url: 'http://{addr}/v1', responses: true}}\n"))
        .start();
    // Hosted tools and stored-response references: chat cannot express them, a native backend can.
    let request = json!({
        "model": "native", "input": "news today?", "previous_response_id": "resp_0",
        "tools": [{"type": "web_search"}], "include": ["reasoning.encrypted_content"]
    });
    let reply = post_json(&front.url("/v1/responses"), &request).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.json()["output"][0]["content"][0]["text"], "native");
    assert_eq!(reply.header("x-switchyard-backend"), Some("native"));
    let seen = seen.await.unwrap().remove(0);
    let body: Value = serde_json::from_str(seen.split_once("\r\n\r\n").unwrap().1).unwrap();
    let mut expected = request.clone();
    expected["model"] = json!("gpt-x");
    assert_eq!(body, expected, "forwarded as sent, the model rewritten");
    assert!(seen.starts_with("POST /v1/responses "), "{seen}");
}

/// The untranslated Responses call takes the one pipeline too: it is routed
/// with the caller's key (a rule on `keys` matches it), and a native backend
/// that cannot be reached falls back to the next one that speaks Responses,
/// skipping a chat-only backend on the way.
#[tokio::test]
async fn an_untranslatable_responses_request_is_routed_by_key_and_falls_back_among_native_backends()
{
    let (addr, seen) = support::recording_server(
        1,
        r#"{"id":"resp_1","object":"response","status":"completed","model":"gpt-x","output":[{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"native","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":1,"total_tokens":10,"input_tokens_details":{"cached_tokens":0}}}"#,
    )
    .await;
    // A port nothing listens on: connections to it are refused.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = |name: &str| {
        format!(
            "    - {{name: {name}, hash: '{}'}}\n",
            support::key_hash(&format!("sk-{name}"))
        )
    };
    let front = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  gone:\n    tier: small\n    model: gpt-x\n    openai: {{base_url: 'http://{closed}/v1', responses: true}}\n  chatty:\n    tier: small\n    sim: {{preset: small, {FAST_SIM_FIELDS}}}\n  native:\n    tier: small\n    model: gpt-x\n    openai: {{base_url: 'http://{addr}/v1', responses: true}}\n"
        ))
        .route(
            "auto",
            "retries: 0\nstrategy:\n  rules:\n    - when: {keys: [alice]}\n      to: gone\n    - to: chatty\nfallbacks: [chatty, native]",
        )
        .section(&format!("auth:\n  keys:\n{}{}", key("alice"), key("bob")))
        .start();
    // A field chat cannot express (`truncation`), so only a native backend
    // can take the request. (A stored response's id would be, too, but with
    // keys it is refused before routing: see SECURITY.md.)
    let request = json!({"model": "auto", "input": "news today?", "truncation": "auto"});
    let alice = support::post_with(
        &front.url("/v1/responses"),
        &request,
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(
        alice.status,
        200,
        "{}",
        String::from_utf8_lossy(&alice.body)
    );
    assert_eq!(alice.json()["output"][0]["content"][0]["text"], "native");
    assert_eq!(alice.header("x-switchyard-backend"), Some("native"));
    assert_eq!(alice.header("x-switchyard-reason"), Some("fallback"));
    let seen = seen.await.unwrap().remove(0);
    assert!(seen.starts_with("POST /v1/responses "), "{seen}");
    // Bob's key matches no rule: his request goes to the chat-only backend,
    // which cannot take it untranslated.
    let bob = support::post_with(
        &front.url("/v1/responses"),
        &request,
        &[("authorization", "Bearer sk-bob")],
    )
    .await;
    assert_eq!(bob.status, 400, "{}", String::from_utf8_lossy(&bob.body));
    assert_eq!(bob.header("x-switchyard-backend"), Some("chatty"));
}

#[tokio::test]
async fn native_responses_streams_are_relayed_event_by_event() {
    // The upstream gateway translates Responses through chat; the front one
    // treats it as a native Responses server and relays its events.
    let upstream = GatewayBuilder::new()
        .in_process_sim("sim", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .start();
    let front = GatewayBuilder::new()
        .backend_yaml(&format!("  native:\n    tier: small\n    model: sim\n    openai: {{base_url: '{}', responses: true}}\n", upstream.base_url()))
        .start();
    let reply = post_json(
        &front.url("/v1/responses"),
        &json!({"model": "native", "input": "hi", "stream": true, "max_output_tokens": 8}),
    )
    .await;
    assert_eq!(reply.status, 200);
    let text = String::from_utf8_lossy(&reply.body).to_string();
    assert!(text.starts_with("event: response.created\n"), "{text}");
    let deltas: String = text
        .split("\n\n")
        .filter(|e| e.starts_with("event: response.output_text.delta"))
        .map(|e| {
            serde_json::from_str::<Value>(e.split_once("data: ").unwrap().1).unwrap()["delta"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(deltas.starts_with("[sim]"), "{deltas}");
    assert!(
        text.contains("event: response.incomplete") || text.contains("event: response.completed")
    );
}

/// Claude Code sends an answer's thinking blocks back on its next turn; an
/// Anthropic backend checks their signatures: they travel both ways intact.
#[tokio::test]
async fn thinking_blocks_survive_a_multi_turn_conversation_with_an_anthropic_backend() {
    let answer = r#"{"id":"m1","type":"message","role":"assistant","model":"claude","content":[{"type":"thinking","thinking":"Let me look.","signature":"EqQBsig"},{"type":"redacted_thinking","data":"EmwKencrypted"},{"type":"tool_use","id":"t1","name":"look","input":{"q":1}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9}}"#;
    let (addr, seen) = support::recording_server(2, answer).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  claude:\n    tier: small\n    anthropic: {{base_url: 'http://{addr}/v1'}}\n"
        ))
        .start();
    let url = gateway.url("/v1/messages");
    let mut turn = json!({"model": "claude", "max_tokens": 100,
        "thinking": {"type": "enabled", "budget_tokens": 50},
        "messages": [{"role": "user", "content": "look it up"}]});
    let first = support::post_with(&url, &turn, &[]).await;
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    let blocks = first.json()["content"].clone();
    assert_eq!(blocks[0]["signature"], "EqQBsig");
    assert_eq!(
        blocks[1],
        json!({"type": "redacted_thinking", "data": "EmwKencrypted"})
    );
    turn["messages"] = json!([
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}]);
    let second = support::post_with(&url, &turn, &[]).await;
    assert_eq!(
        second.status,
        200,
        "{}",
        String::from_utf8_lossy(&second.body)
    );
    let body = support::body_of(&seen.await.unwrap()[1]);
    let assistant = &body["messages"][1]["content"];
    assert_eq!(
        assistant[0],
        json!({"type": "thinking", "thinking": "Let me look.", "signature": "EqQBsig"})
    );
    assert_eq!(
        assistant[1],
        json!({"type": "redacted_thinking", "data": "EmwKencrypted"})
    );
}
