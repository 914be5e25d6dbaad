use super::*;
use crate::types::ChunkTexts;

/// A message's text is its string, or its text parts joined by newlines
/// (other parts left out); its length and appending agree with it.
#[test]
fn text_joins_text_parts_and_its_length_agrees() {
    let message = |content: serde_json::Value| -> Message {
        serde_json::from_value(serde_json::json!({"role": "user", "content": content})).unwrap()
    };
    let cases = [
        (message(serde_json::json!("héllo")), "héllo"),
        (message(serde_json::json!(null)), ""),
        (message(serde_json::json!([])), ""),
        (
            message(serde_json::json!([
                {"type": "text", "text": "one"},
                {"type": "image_url", "image_url": {"url": "data:,"}},
                {"type": "text", "text": "two"}
            ])),
            "one\ntwo",
        ),
    ];
    for (message, text) in cases {
        assert_eq!(message.text(), text);
        assert_eq!(message.text_len(), text.len());
        let mut out = String::from(">");
        message.push_text(&mut out);
        assert_eq!(out, format!(">{text}"));
    }
}

#[test]
fn unknown_fields_survive_a_round_trip() {
    let body = serde_json::json!({
        "model": "m",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}], "x_note": 1}],
        "cache_prompt": true,
        "id_slot": 2,
        "top_p": 0.5,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, "strict": true}}]
    });
    let req: ChatRequest = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(req.extra["id_slot"], 2);
    assert_eq!(serde_json::to_value(&req).unwrap(), body);
}

#[test]
fn missing_and_repeated_fields_are_refused_as_serde_would() {
    let missing = serde_json::from_str::<ChatRequest>(r#"{"messages": []}"#).unwrap_err();
    assert!(
        missing.to_string().contains("missing field `model`"),
        "{missing}"
    );
    let twice =
        serde_json::from_str::<ChatRequest>(r#"{"model": "a", "model": "b", "messages": []}"#)
            .unwrap_err();
    assert!(
        twice.to_string().contains("duplicate field `model`"),
        "{twice}"
    );
    let wrong = serde_json::from_str::<ChatRequest>(r#"{"model": 1, "messages": []}"#).unwrap_err();
    assert!(wrong.to_string().contains("invalid type"), "{wrong}");
}

#[test]
fn nulls_defaults_and_escaped_keys() {
    let req: ChatRequest = serde_json::from_str(
        r#"{"model": "m", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}]}], "max_tokens": null, "x\u0041": 1}"#,
    )
    .unwrap();
    assert_eq!(req.max_tokens, None);
    assert_eq!(req.messages[0].content, None);
    let call = &req.messages[0].tool_calls.as_ref().unwrap()[0];
    assert_eq!(call.kind, "function");
    assert_eq!(req.extra["xA"], 1);
    let chunk: ChatChunk = serde_json::from_str(r#"{"id": "c"}"#).unwrap();
    assert_eq!(chunk.object, "chat.completion.chunk");
    assert!(chunk.choices.is_empty());
}

#[test]
fn content_is_a_string_or_parts_and_nothing_else() {
    let text: Content = serde_json::from_str(r#""hi""#).unwrap();
    assert_eq!(text, Content::Text("hi".into()));
    let parts: Content = serde_json::from_str(r#"[{"type": "text", "text": "hi"}]"#).unwrap();
    assert!(matches!(parts, Content::Parts(p) if p[0].text.as_deref() == Some("hi")));
    let number = serde_json::from_str::<Content>("3").unwrap_err();
    assert!(
        number
            .to_string()
            .contains("a string or an array of content parts"),
        "{number}"
    );
}

#[test]
fn response_keeps_vendor_timings() {
    let body = serde_json::json!({
        "id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi", "refusal": null}, "finish_reason": "stop", "logprobs": null}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4, "prompt_tokens_details": {"cached_tokens": 2}},
        "timings": {"cache_n": 2, "draft_n": 4}
    });
    let resp: ChatResponse = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(resp.usage.as_ref().unwrap().cached_tokens(), 2);
    assert_eq!(resp.timings.as_ref().unwrap().drafts(), Some((4, 0)));
    assert!(resp.extra.is_empty());
    assert_eq!(serde_json::to_value(&resp).unwrap(), body);
}

#[test]
fn a_whole_answer_keeps_its_bytes() {
    let body = Bytes::from_static(
        br#"{"id": "x", "object": "chat.completion", "created": 7, "model": "m", "choices": [], "timings": {"prompt_ms": 17.785786000000001}}"#,
    );
    let resp = serde_json::from_slice::<ChatResponse>(&body)
        .unwrap()
        .with_verbatim(body.clone());
    assert_eq!(resp.verbatim, Some(body));
}

#[test]
fn an_answer_missing_top_fields_is_reencoded_with_them() {
    for body in [
        r#"{"id": "x", "created": 7, "model": "m", "choices": []}"#,
        r#"{"id": "x", "object": "chat.completion", "model": "m", "choices": []}"#,
        r#"{"id": "x", "object": "chat.completion", "created": 7, "choices": []}"#,
    ] {
        let resp = serde_json::from_str::<ChatResponse>(body)
            .unwrap()
            .with_verbatim(Bytes::from_static(body.as_bytes()));
        assert_eq!(resp.verbatim, None, "{body}");
        let written = serde_json::to_value(&resp).unwrap();
        assert_eq!(written["object"], "chat.completion", "{body}");
        assert!(
            written["created"].is_u64() && written["model"].is_string(),
            "{body}"
        );
    }
}

#[test]
fn a_roles_name_is_its_wire_name() {
    for role in [
        Role::System,
        Role::Developer,
        Role::User,
        Role::Assistant,
        Role::Tool,
        Role::Function,
    ] {
        assert_eq!(serde_json::to_value(role).unwrap(), role.as_str());
    }
}

/// A chunk as llama.cpp and the simulator send one.
const CHUNK: &str = r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"timings":{"prompt_ms":1.0024000000000002}}"#;

/// A chunk read from `data` as the OpenAI client reads one, its bytes kept
/// when they may go on as they are.
fn read_chunk(data: &str) -> ChatChunk {
    serde_json::from_str::<ChatChunk>(data)
        .unwrap()
        .with_verbatim(Bytes::from(data.to_owned()))
}

#[test]
fn a_complete_chunk_keeps_its_bytes_until_its_text_changes() {
    let mut chunk = read_chunk(CHUNK);
    assert_eq!(chunk.verbatim.as_deref(), Some(CHUNK.as_bytes()));
    // A usage-only chunk has no choices to need fields of.
    let usage = r#"{"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#;
    assert!(read_chunk(usage).verbatim.is_some());
    // Masking's restore changes the text: the bytes no longer say it.
    chunk.output_fields_mut(&mut |_, text| text.push('!'));
    assert_eq!(chunk.verbatim, None);
    let mut chunk = read_chunk(CHUNK);
    chunk.append_output(crate::types::slot(0, 0), "!");
    assert_eq!(chunk.verbatim, None);
}

#[test]
fn a_chunk_missing_what_the_spec_requires_is_reencoded_with_it() {
    // Each field left out, and where the encoding writes it.
    for (missing, replaced, top) in [
        ("object", r#""object":"chat.completion.chunk","#, true),
        ("created", r#""created":7,"#, true),
        ("model", r#""model":"m","#, true),
        ("index", r#""index":0,"#, false),
        ("delta", r#""delta":{"content":"hi"},"#, false),
        ("finish_reason", r#","finish_reason":null"#, false),
    ] {
        let data = CHUNK.replacen(replaced, "", 1);
        assert_ne!(data, CHUNK, "{missing}");
        let chunk = read_chunk(&data);
        assert_eq!(chunk.verbatim, None, "{missing}");
        let written = serde_json::to_value(&chunk).unwrap();
        let at = if top {
            &written
        } else {
            &written["choices"][0]
        };
        assert!(at.get(missing).is_some(), "{missing}: {written}");
    }
    let no_choices = CHUNK.replacen(
        r#""choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"#,
        "",
        1,
    );
    let chunk = read_chunk(&no_choices);
    assert_eq!(chunk.verbatim, None);
    assert_eq!(
        serde_json::to_value(&chunk).unwrap()["choices"],
        serde_json::json!([])
    );
    // A logprobs object is written with the `refusal` the spec requires.
    let logprobs = CHUNK.replacen(
        r#""finish_reason":null"#,
        r#""finish_reason":null,"logprobs":{"content":[]}"#,
        1,
    );
    let chunk = read_chunk(&logprobs);
    assert_eq!(chunk.verbatim, None);
    assert!(serde_json::to_value(&chunk).unwrap()["choices"][0]["logprobs"]["refusal"].is_null());
    // JSON over two lines (an event of two `data:` lines): one line out.
    let chunk = read_chunk(&CHUNK.replacen(r#","model""#, "\n,\"model\"", 1));
    assert_eq!(chunk.verbatim, None);
    let chunk = read_chunk(&CHUNK.replacen(r#","model""#, "\r,\"model\"", 1));
    assert_eq!(chunk.verbatim, None);
}

#[test]
fn a_chunks_usage_null_goes_only_to_a_caller_that_asked_for_usage() {
    use crate::types::CanonicalChunk;
    let with_null = CHUNK.replacen(r#""timings""#, r#""usage":null,"timings""#, 1);
    let chunk = read_chunk(&with_null);
    assert!(chunk.usage.is_none() && chunk.usage_sent);
    assert_eq!(chunk.verbatim(true), Some(with_null.as_bytes()));
    assert_eq!(chunk.verbatim(false), None);
    assert_eq!(read_chunk(CHUNK).verbatim(false), Some(CHUNK.as_bytes()));
}

#[test]
fn a_role_is_found_by_its_name_as_serde_finds_it() {
    for name in [
        "system",
        "developer",
        "user",
        "assistant",
        "tool",
        "function",
        "User",
        "robot",
        "",
    ] {
        let by_serde: Option<Role> = serde_json::from_value(serde_json::json!(name)).ok();
        assert_eq!(Role::from_name(name), by_serde, "{name}");
        if let Some(role) = by_serde {
            assert_eq!(role.as_str(), name);
        }
    }
}
