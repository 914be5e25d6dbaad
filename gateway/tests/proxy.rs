//! The gateway in front of real `switchyard sim` processes: what a caller
//! gets back for each OpenAI endpoint.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::{Value, json};
use support::{GatewayBuilder, chat, fast_sim, get, post_json};

#[tokio::test]
async fn chat_is_proxied_with_receipts_and_model_rewrite() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .split("auto", &[("local", 1)])
        .start();

    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("auto", "hello")).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(reply.header("x-switchyard-route"), Some("auto"));
    assert_eq!(reply.header("x-switchyard-backend"), Some("local"));
    assert_eq!(reply.header("x-switchyard-reason"), Some("split"));
    assert!(reply.header("x-request-id").is_some());
    let body = reply.json();
    // The simulator echoes the model it was asked for: the backend's upstream name.
    assert_eq!(body["model"], "upstream-local");
    assert!(
        body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .starts_with("[sim]")
    );
    assert!(body["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    // Vendor fields the upstream adds (llama.cpp-style timings) come through.
    assert!(body["timings"]["predicted_n"].is_u64());

    let direct = post_json(
        &gateway.url("/v1/chat/completions"),
        &chat("local", "hello"),
    )
    .await;
    assert_eq!(direct.header("x-switchyard-reason"), Some("direct"));
    assert_eq!(direct.header("x-switchyard-route"), None);
}

/// An answer as llama-server writes it: spaces after colons, a float with
/// all its digits, a vendor field.
const LLAMA_ANSWER: &str = r#"{"id": "chatcmpl-1", "object": "chat.completion", "created": 1764480000, "model": "qwen", "choices": [{"index": 0, "message": {"role": "assistant", "content": "Rivers run."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}, "timings": {"prompt_ms": 17.785786000000001}}"#;

/// The same answer as the caller gets it: every byte the server sent, and
/// the fields OpenAI's spec requires that it left out, `null`.
const LLAMA_ANSWER_FILLED: &str = r#"{"id": "chatcmpl-1", "object": "chat.completion", "created": 1764480000, "model": "qwen", "choices": [{"logprobs":null,"index": 0, "message": {"refusal":null,"role": "assistant", "content": "Rivers run."}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}, "timings": {"prompt_ms": 17.785786000000001}}"#;

#[tokio::test]
async fn an_openai_answer_reaches_an_openai_caller_byte_for_byte() {
    let (addr, _seen) = support::recording_server(1, LLAMA_ANSWER).await;
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &format!("http://{addr}/v1"), &[])
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("local", "hi")).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    assert_eq!(String::from_utf8_lossy(&reply.body), LLAMA_ANSWER_FILLED);
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let usage = support::eventually(async || {
        gateway
            .ledger()
            .query_row(
                "SELECT input_tokens, output_tokens FROM requests",
                [],
                |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
            )
            .is_ok_and(|tokens| tokens == (9, 3))
    })
    .await;
    assert!(usage, "the ledger has the answer's usage");
}

#[tokio::test]
async fn an_answer_without_its_object_field_is_completed() {
    let (addr, _seen) = support::recording_server(
        1,
        r#"{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}"#,
    )
    .await;
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &format!("http://{addr}/v1"), &[])
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("local", "hi")).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let body = reply.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], "ok");
}

#[tokio::test]
async fn a_success_status_that_is_no_chat_answer_is_a_bad_gateway() {
    // Well-formed JSON with the top fields, but no choices: not passed on.
    let (addr, _seen) = support::recording_server(
        1,
        r#"{"id":"c","object":"chat.completion","created":7,"model":"m","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
    )
    .await;
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &format!("http://{addr}/v1"), &[])
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("local", "hi")).await;
    assert_eq!(reply.status, 502, "{:?}", reply.body);
    // Said in fixed words: what the backend sent (and what a parser makes
    // of it) stays in the gateway's log.
    assert_eq!(reply.error()["code"], "upstream_bad_response");
    assert_eq!(
        reply.error()["message"],
        "the backend sent an answer that could not be read"
    );
}

#[tokio::test]
async fn unknown_request_fields_reach_the_backend() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let mut body = chat("local", "hello");
    body["cache_prompt"] = json!(true);
    body["id_slot"] = json!(1);
    body["prompt_cache_key"] = json!("k");
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    let fields = reply.json()["switchyard_sim"]["unmodeled_fields"].clone();
    assert_eq!(
        fields,
        json!(["cache_prompt", "id_slot", "prompt_cache_key"])
    );
}

#[tokio::test]
async fn streaming_relays_chunks_and_usage_only_when_asked() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");

    let mut body = chat("local", "stream please");
    body["stream"] = json!(true);
    let plain = post_json(&url, &body).await;
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("content-type"), Some("text/event-stream"));
    let events = plain.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    // The gateway asked upstream for usage (for accounting) but the client did not.
    assert!(
        chunks.iter().all(|c| c.get("usage").is_none()),
        "{chunks:?}"
    );
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(text.starts_with("[sim]"));

    body["stream_options"] = json!({"include_usage": true});
    let with_usage = post_json(&url, &body).await;
    let events = with_usage.events();
    let usage_chunk: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(usage_chunk["choices"], json!([]));
    assert!(usage_chunk["usage"]["total_tokens"].as_u64().unwrap() > 0);

    // Same request, not streamed: same usage.
    body["stream"] = json!(false);
    body.as_object_mut().unwrap().remove("stream_options");
    let whole = post_json(&url, &body).await.json();
    assert_eq!(
        whole["usage"]["prompt_tokens"],
        usage_chunk["usage"]["prompt_tokens"]
    );
    assert_eq!(
        whole["usage"]["completion_tokens"],
        usage_chunk["usage"]["completion_tokens"]
    );
}

/// A llama.cpp stream: its chunks in its own order and number formats; the
/// last leaves out `object`, which a caller then gets filled in.
const LLAMA_EVENTS: &str = concat!(
    "data: {\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"Rivers\"}}],\"created\":1764480000,\"id\":\"chatcmpl-1\",\"model\":\"qwen\",\"object\":\"chat.completion.chunk\"}\n\n",
    "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\"created\":1764480000,\"id\":\"chatcmpl-1\",\"model\":\"qwen\",\"timings\":{\"prompt_ms\":17.785786000000001}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn an_openai_stream_reaches_an_openai_caller_byte_for_byte() {
    let (addr, _seen) = support::canned_event_server(1, LLAMA_EVENTS).await;
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &format!("http://{addr}/v1"), &[])
        .start();
    let mut body = chat("local", "hi");
    body["stream"] = json!(true);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    let events = reply.events();
    let sent: Vec<&str> = LLAMA_EVENTS
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .collect();
    assert_eq!(events.len(), 3, "{events:?}");
    assert_eq!(events[0], sent[0]);
    assert_eq!(events[2], "[DONE]");
    // Re-encoded with the field the spec requires; the rest as sent.
    let last: Value = serde_json::from_str(&events[1]).unwrap();
    let sent_last: Value = serde_json::from_str(sent[1]).unwrap();
    assert_eq!(last["object"], "chat.completion.chunk");
    assert_eq!(last["choices"], sent_last["choices"]);
    assert_eq!(last["timings"], sent_last["timings"]);
}

/// OpenAI's own stream to a request that asks for usage (as the gateway's
/// requests upstream do): `"usage": null` on each chunk, then a chunk of
/// usage alone. Its second event's JSON comes over two `data:` lines.
const OPENAI_EVENTS: &str = concat!(
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\n",
    "data: \"model\":\"gpt\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
    "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\n",
    "data: [DONE]\n\n",
);

#[tokio::test]
async fn a_relayed_stream_keeps_usage_to_callers_that_asked_and_one_line_events() {
    let (addr, _seen) = support::canned_event_server(2, OPENAI_EVENTS).await;
    let gateway = GatewayBuilder::new()
        .openai("openai", "cloud", &format!("http://{addr}/v1"), &[])
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("openai", "hi");
    body["stream"] = json!(true);
    let unasked = post_json(&url, &body).await.events();
    assert_eq!(unasked.len(), 3, "{unasked:?}");
    assert_eq!(unasked[2], "[DONE]");
    for event in &unasked[..2] {
        let chunk: Value = serde_json::from_str(event).unwrap();
        assert!(chunk.get("usage").is_none(), "{event}");
    }
    body["stream_options"] = json!({"include_usage": true});
    let asked = post_json(&url, &body).await.events();
    assert_eq!(asked.len(), 4, "{asked:?}");
    // The two-line event goes out as one line.
    assert!(asked.iter().all(|e| !e.contains('\n')), "{asked:?}");
    let sent_first = OPENAI_EVENTS.split("\n\n").next().unwrap();
    assert_eq!(Some(asked[0].as_str()), sent_first.strip_prefix("data: "));
    let second: Value = serde_json::from_str(&asked[1]).unwrap();
    assert_eq!(second["choices"][0]["finish_reason"], "stop");
    let usage: Value = serde_json::from_str(&asked[2]).unwrap();
    assert_eq!(usage["usage"]["total_tokens"], 2);
}

#[tokio::test]
async fn streamed_tool_calls_arrive_as_deltas() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .start();
    let body = json!({
        "model": "local", "stream": true,
        "messages": [{"role": "user", "content": "weather in Oslo?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "required"
    });
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    let events = reply.events();
    let mut name = String::new();
    let mut args = String::new();
    for event in &events[..events.len() - 1] {
        let chunk: Value = serde_json::from_str(event).unwrap();
        for call in chunk["choices"][0]["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            name.push_str(call["function"]["name"].as_str().unwrap_or(""));
            args.push_str(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    assert_eq!(name, "get_weather");
    let args: Value = serde_json::from_str(&args).unwrap();
    assert!(args["city"].is_string());
}

#[tokio::test]
async fn completions_embeddings_and_models() {
    let upstream = fast_sim(&[]);
    let gateway = GatewayBuilder::new()
        .openai("local", "small", &upstream.base_url(), &[])
        .split("auto", &[("local", 1)])
        .start();

    let completion = post_json(
        &gateway.url("/v1/completions"),
        &json!({"model": "auto", "prompt": "Once", "max_tokens": 4}),
    )
    .await;
    assert_eq!(completion.status, 200);
    let completion = completion.json();
    assert_eq!(completion["choices"][0]["finish_reason"], "length");
    assert_eq!(completion["usage"]["completion_tokens"], 4);

    let floats = post_json(
        &gateway.url("/v1/embeddings"),
        &json!({"model": "local", "input": ["a", "b"], "encoding_format": "float"}),
    )
    .await
    .json();
    assert_eq!(floats["data"].as_array().unwrap().len(), 2);
    assert_eq!(
        floats["data"][0]["embedding"].as_array().unwrap().len(),
        256
    );
    let b64 = post_json(
        &gateway.url("/v1/embeddings"),
        &json!({"model": "local", "input": "a", "encoding_format": "base64"}),
    )
    .await
    .json();
    assert_eq!(
        b64["data"][0]["embedding"].as_str().unwrap().len(),
        256 * 4 * 4 / 3 + 4 - (256 * 4 * 4 / 3) % 4
    );

    // The query string plays no part in routing.
    let models = get(&gateway.url("/v1/models?limit=1")).await.json();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["auto", "local"]);
    assert_eq!(get(&gateway.url("/healthz")).await.status, 200);
    assert_eq!(get(&gateway.url("/readyz")).await.status, 200);
}

#[tokio::test]
async fn embedded_default_serves_auto() {
    let gateway = support::default_gateway();
    let mut body = chat("auto", "hi");
    body["max_tokens"] = json!(3);
    let reply = post_json(&gateway.url("/v1/chat/completions"), &body).await;
    assert_eq!(reply.status, 200);
    let backend = reply.header("x-switchyard-backend").unwrap();
    assert!(["small", "mid", "large"].contains(&backend));
    assert_eq!(reply.json()["usage"]["completion_tokens"], 3);
}
