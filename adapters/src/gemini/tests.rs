//! The Gemini translation against answers in the shapes Google documents
//! (generateContent with a function call, a stream of partial answers, a
//! blocked prompt) and requests built the way callers write them.

use serde_json::{Value, json};

use super::*;
use crate::sse::SseEvent;
use crate::types::{ChatChunk, ChatRequest};
use crate::upstream::{EventDecoder, Items};

fn request(body: Value) -> ChatRequest {
    serde_json::from_value(body).unwrap()
}

#[test]
fn a_conversation_with_tools_becomes_contents_and_declarations() {
    let req = request(json!({
        "model": "gemini-2.5-flash",
        "max_tokens": 300,
        "temperature": 0.2,
        "stop": "END",
        "top_p": 0.9,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "Weather in Paris and Rome?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
            ]},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Paris\"}"}, "thought_signature": "c2lnMQ=="},
                {"id": "call_gemini_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\":\"Rome\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
            {"role": "tool", "tool_call_id": "call_gemini_1", "content": "sunny"}
        ],
        "tools": [{"type": "function", "function": {"name": "weather", "description": "Weather now",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
        "tool_choice": "required"
    }));
    let body = generate_request(&req).unwrap();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    let contents = body["contents"].as_array().unwrap();
    assert_eq!(contents.len(), 3, "{contents:#?}");
    assert_eq!(contents[0]["role"], "user");
    assert_eq!(
        contents[0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    );
    let calls = &contents[1];
    assert_eq!(calls["role"], "model");
    assert_eq!(
        calls["parts"][0],
        json!({"functionCall": {"name": "weather", "args": {"city": "Paris"}, "id": "c1"}, "thoughtSignature": "c2lnMQ=="})
    );
    // An id the adapter made up is not sent back.
    assert_eq!(
        calls["parts"][1],
        json!({"functionCall": {"name": "weather", "args": {"city": "Rome"}}})
    );
    // Both results answer one model turn: one user turn, named by function.
    let results = &contents[2];
    assert_eq!(results["role"], "user");
    assert_eq!(
        results["parts"],
        json!([
            {"functionResponse": {"name": "weather", "response": {"temp": 21}, "id": "c1"}},
            {"functionResponse": {"name": "weather", "response": {"output": "sunny"}}}
        ])
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"]["required"],
        json!(["city"])
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY"}})
    );
    assert_eq!(
        body["generationConfig"],
        json!({"maxOutputTokens": 300, "temperature": 0.2, "topP": 0.9, "stopSequences": ["END"]})
    );
}

#[test]
fn what_gemini_cannot_take_is_refused_by_name() {
    let link = request(
        json!({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]}),
    );
    assert_eq!(
        generate_request(&link).unwrap_err().param,
        "messages[0].content[0].image_url"
    );
    let unknown = request(json!({"model": "m", "messages": [], "logit_bias": {"1": 2}}));
    assert_eq!(generate_request(&unknown).unwrap_err().param, "logit_bias");
    let schema = request(
        json!({"model": "m", "messages": [], "response_format": {"type": "json_schema",
        "json_schema": {"name": "x", "schema": {"type": "object"}}}}),
    );
    let body = generate_request(&schema).unwrap();
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
    assert_eq!(
        body["generationConfig"]["responseJsonSchema"],
        json!({"type": "object"})
    );
}

#[test]
fn a_function_call_answer_comes_back_as_tool_calls_with_its_usage() {
    // The function-calling answer of Google's documentation, with thoughts
    // and a cache hit in its usage.
    let answer = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "Checking the weather.", "thought": true},
                {"functionCall": {"name": "get_current_temperature", "args": {"location": "London"}},
                 "thoughtSignature": "CiQBVKhc7r"}
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 120, "candidatesTokenCount": 20, "totalTokenCount": 182,
            "cachedContentTokenCount": 100, "thoughtsTokenCount": 42
        },
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mJ0wafmHGJGzqtsP"
    });
    let chat = chat_from_generate(&answer, "gemini-2.5-flash");
    let choice = &chat.choices[0];
    assert_eq!(choice.finish_reason.as_deref(), Some("tool_calls"));
    let call = &choice.message.tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.function.name, "get_current_temperature");
    assert_eq!(call.function.arguments, r#"{"location":"London"}"#);
    assert!(call.id.starts_with("call_gemini_"));
    assert_eq!(call.extra["thought_signature"], "CiQBVKhc7r");
    assert_eq!(
        choice.message.extra["reasoning_content"],
        "Checking the weather."
    );
    let usage = chat.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (120, 62));
    let counts = usage.token_counts();
    assert_eq!(counts.cached_input, 100);
    assert_eq!(counts.reasoning, 42);
    assert_eq!(counts.input, 20, "uncached input");
    assert_eq!(chat.id, "chatcmpl-mJ0wafmHGJGzqtsP");
}

#[test]
fn a_blocked_prompt_is_an_empty_answer_stopped_by_the_filter() {
    let answer = json!({"promptFeedback": {"blockReason": "SAFETY"},
        "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8}});
    let chat = chat_from_generate(&answer, "gemini-2.5-flash");
    assert_eq!(
        chat.choices[0].finish_reason.as_deref(),
        Some("content_filter")
    );
    assert_eq!(chat.usage.unwrap().prompt_tokens, 8);
}

fn event(data: &Value) -> SseEvent {
    SseEvent {
        event: None,
        data: data.to_string(),
    }
}

/// The items one event decodes to, and whether it ends the stream.
fn decode(decoder: &mut EventsToChunks, data: &Value) -> (Items<ChatChunk>, bool) {
    let mut items = Items::new();
    let end = decoder.decode(event(data), &mut items);
    (items, end)
}

#[test]
fn a_stream_of_partial_answers_ends_with_its_last_usage() {
    let mut decoder = EventsToChunks::new("gemini-2.5-flash");
    let mut chunks: Vec<ChatChunk> = Vec::new();
    for data in [
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "The "}]}, "index": 0}],
               "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}, "modelVersion": "gemini-2.5-flash", "responseId": "r1"}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": "answer."}]}, "index": 0}]}),
        json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP", "index": 0}],
               "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "totalTokenCount": 12}}),
    ] {
        let (items, end) = decode(&mut decoder, &data);
        assert!(!end, "Gemini streams end with the body, not an event");
        chunks.extend(items.into_iter().map(Result::unwrap));
    }
    let mut owed = Items::new();
    decoder.finish(&mut owed);
    chunks.extend(owed.into_iter().map(Result::unwrap));
    let text: String = chunks
        .iter()
        .flat_map(|c| &c.choices)
        .filter_map(|c| c.delta.content.clone())
        .collect();
    assert_eq!(text, "The answer.");
    let finish: Vec<_> = chunks
        .iter()
        .flat_map(|c| &c.choices)
        .filter_map(|c| c.finish_reason.clone())
        .collect();
    assert_eq!(finish, ["stop"]);
    let last = chunks.last().unwrap();
    assert!(last.is_usage_only());
    assert_eq!(last.usage.as_ref().unwrap().completion_tokens, 3);
    assert!(chunks.iter().all(|c| c.id == "chatcmpl-r1"));
}

#[test]
fn a_streamed_call_arrives_whole_and_an_error_event_ends_the_stream() {
    let mut decoder = EventsToChunks::new("gemini-2.5-flash");
    let (items, _) = decode(
        &mut decoder,
        &json!({"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"name": "f", "args": {"a": 1}, "id": "x1"}}]}, "finishReason": "STOP", "index": 0}]}),
    );
    let chunks: Vec<ChatChunk> = items.into_iter().map(Result::unwrap).collect();
    let call = chunks
        .iter()
        .flat_map(|c| &c.choices)
        .find_map(|c| c.delta.tool_calls.clone())
        .unwrap();
    let function = call[0].function.as_ref().unwrap();
    assert_eq!(call[0].id.as_deref(), Some("x1"));
    assert_eq!(function.arguments.as_deref(), Some(r#"{"a":1}"#));
    assert_eq!(
        chunks.last().unwrap().choices[0].finish_reason.as_deref(),
        Some("tool_calls")
    );
    let (items, end) = decode(
        &mut decoder,
        &json!({"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}),
    );
    assert!(end);
    assert!(matches!(
        items[0],
        Err(crate::AdapterError::Status { status: 429, .. })
    ));
}

#[test]
fn efforts_map_to_each_generations_thinking_and_empty_turns_are_left_out() {
    let ask = |model: &str, effort: &str| {
        let req = request(
            json!({"model": model, "reasoning_effort": effort, "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": ""},
                {"role": "user", "content": "again"}
            ]}),
        );
        generate_request(&req).unwrap()
    };
    let off = ask("gemini-2.5-flash", "none");
    assert_eq!(
        off["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 0})
    );
    assert_eq!(
        off["contents"].as_array().unwrap().len(),
        2,
        "no empty model turn"
    );
    let flash_latest = ask("gemini-flash-latest", "medium");
    assert_eq!(
        flash_latest["generationConfig"]["thinkingConfig"],
        json!({"thinkingBudget": 8192})
    );
    let three = ask("gemini-3-pro-preview", "medium");
    assert_eq!(
        three["generationConfig"]["thinkingConfig"],
        json!({"thinkingLevel": "high"})
    );
}

#[test]
fn a_streamed_call_index_is_a_key_not_a_size() {
    use crate::types::{Delta, ToolCallDelta};
    let mut stream = GenerateStream::new("m");
    let mut chunk: ChatChunk =
        serde_json::from_value(json!({"id": "c", "object": "chat.completion.chunk",
        "created": 0, "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": null}]}))
        .unwrap();
    chunk.choices[0].delta = Delta::tool_call(ToolCallDelta::opening(u32::MAX, "x", "f"));
    assert!(stream.on_chunk(&chunk).is_empty());
    let last = stream.finish().unwrap();
    assert_eq!(
        last["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "f"
    );
    assert!(stream.finish().is_none(), "once");
}
