use serde_json::json;

use super::*;

fn chat(body: serde_json::Value) -> ChatRequest {
    serde_json::from_value(body).unwrap()
}

#[test]
fn a_chat_request_names_its_model_and_streaming_and_asks_for_usage() {
    let mut req = chat(json!({
        "model": "auto", "stream": true, "temperature": 0.2, "top_p": 0.9,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    }));
    assert_eq!(req.model(), "auto");
    req.set_model("small");
    assert_eq!(req.model(), "small");
    assert!(CanonicalRequest::is_stream(&req));
    // The client did not ask for usage: the backend is asked, the client
    // is told it did not.
    assert!(!req.request_stream_usage());
    assert_eq!(
        req.stream_options.as_ref().unwrap().include_usage,
        Some(true)
    );
    assert_eq!(req.sampling(), (Some(0.2), Some(0.9)));
    let (text, overhead) = req.prompt_for_count();
    assert!(text.contains("Be brief.") && text.contains("Hi"), "{text}");
    assert!(overhead > 0);
    assert!(req.engine_fields().unwrap().contains_key("top_p"));

    let mut asked = chat(json!({
        "model": "m", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "Hi"}]
    }));
    assert!(asked.request_stream_usage());
}

#[test]
fn a_chat_answer_counts_text_and_tool_calls_and_carries_usage() {
    let resp: ChatResponse = serde_json::from_value(json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "find", "arguments": "{\"q\":1}"}}]
        }}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    }))
    .unwrap();
    assert_eq!(resp.output_text(), "Let me look.find{\"q\":1}");
    assert_eq!(
        CanonicalResponse::usage(&resp).unwrap().completion_tokens,
        3
    );
    assert!(CanonicalResponse::timings(&resp).is_none());
}

#[test]
fn chat_chunks_tell_output_from_usage() {
    let chunk = |body: serde_json::Value| -> ChatChunk { serde_json::from_value(body).unwrap() };
    let empty = chunk(
        json!({"id": "c", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
    );
    assert!(!empty.has_output());
    assert!(!CanonicalChunk::is_usage_only(&empty));
    let text = chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}));
    assert!(text.has_output());
    let call = chunk(
        json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"name": "find", "arguments": "{\"q\""}}]}}]}),
    );
    assert!(call.has_output());
    let mut out = String::new();
    text.push_output(&mut out);
    call.push_output(&mut out);
    assert_eq!(out, "Helfind{\"q\"");
    let usage = chunk(json!({"id": "c", "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}));
    assert!(CanonicalChunk::is_usage_only(&usage));
    assert!(!usage.has_output());
    assert_eq!(CanonicalChunk::usage(&usage).unwrap().prompt_tokens, 7);
}

#[test]
fn completions_read_the_same_as_whole_answers_and_chunks() {
    let mut req: CompletionRequest =
        serde_json::from_value(json!({"model": "m", "prompt": ["a", "b"], "temperature": 0.5}))
            .unwrap();
    assert!(!CanonicalRequest::is_stream(&req));
    assert!(!req.request_stream_usage());
    assert_eq!(req.sampling(), (Some(0.5), None));
    assert_eq!(req.prompt_for_count().1, 0);
    let resp: CompletionResponse = serde_json::from_value(json!({
        "id": "x", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "text": "one", "finish_reason": null}, {"index": 1, "text": "two", "finish_reason": "stop"}]
    }))
    .unwrap();
    assert_eq!(resp.output_text(), "onetwo");
    assert!(resp.has_output());
    let mut out = String::new();
    resp.push_output(&mut out);
    assert_eq!(out, "onetwo");
    assert!(!CanonicalChunk::is_usage_only(&resp));
}

#[test]
fn embeddings_never_stream_and_keep_the_callers_fields() {
    let mut req: EmbeddingRequest =
        serde_json::from_value(json!({"model": "e", "input": ["a", "b"], "dimensions": 8}))
            .unwrap();
    assert!(!CanonicalRequest::is_stream(&req));
    assert!(!req.request_stream_usage());
    assert_eq!(req.prompt_for_count(), ("a\nb".to_owned(), 0));
    assert!(req.engine_fields().is_none());
    // No fields beyond the modelled ones: none to price or remove.
    assert!(req.caller_fields().is_none());
    assert_eq!(req.sampling(), (None, None));
    let mut req: EmbeddingRequest =
        serde_json::from_value(json!({"model": "e", "input": "a", "service_tier": "flex"}))
            .unwrap();
    let fields = req.caller_fields().unwrap();
    assert_eq!(fields["service_tier"], "flex");
}
