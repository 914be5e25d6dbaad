//! `POST /v1/responses` untranslated, for backends that speak the Responses
//! API themselves (hosted tools, stored responses and all): the request,
//! the answer and the stream's events pass through as the backend wrote
//! them. It is one more endpoint of the one pipeline: admitted, routed
//! with the caller's key and team, dispatched with fallbacks and hedging
//! (among backends that speak Responses: `Call::served_by`) and settled
//! like every other call.

use bytes::{Bytes, BytesMut};
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use http::{Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use switchyard_adapters::sse::{SseEvent, data_event, named_event};
use switchyard_adapters::tokens;
use switchyard_adapters::types::{
    CanonicalChunk, CanonicalRequest, CanonicalResponse, Fields, Usage, UsageDetails,
};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::{AnswerSummary, RequestView};

use crate::admit::access::Caller;
use crate::dispatch::endpoint::{Call, Chunks, Endpoint, StreamEncoder};
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response};
use crate::route::view::BodyHints;

/// The Responses endpoint, untranslated.
pub struct NativeResponses;

/// A Responses request as the caller wrote it.
#[derive(Debug, Clone, Deserialize)]
#[serde(transparent)]
pub struct RawRequest(pub Value);

/// A Responses object as the backend wrote it, with its usage in chat terms.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct RawAnswer {
    pub value: Value,
    #[serde(skip)]
    usage: Option<Usage>,
}

impl RawAnswer {
    fn new(value: Value) -> Self {
        RawAnswer {
            usage: usage_of(&value),
            value,
        }
    }
}

/// One event of a Responses stream, with what accounting reads off it.
#[derive(Debug, Serialize)]
pub struct RawEvent {
    pub name: String,
    pub data: String,
    #[serde(skip)]
    delta: Option<String>,
    #[serde(skip)]
    usage: Option<Usage>,
    /// `response.completed` or `response.incomplete`: the stream's last.
    #[serde(skip)]
    terminal: bool,
}

impl RawEvent {
    /// The event, or the backend's own failure (`error`, `response.failed`)
    /// as the upstream error it is: told in our words, its text logged.
    fn from_sse(event: SseEvent) -> Result<RawEvent, AdapterError> {
        let name = event.event.unwrap_or_default();
        if matches!(name.as_str(), "error" | "response.failed") {
            return Err(AdapterError::Status {
                status: 502,
                message: event.data,
                body: None,
                retry_after: None,
            });
        }
        let terminal = matches!(name.as_str(), "response.completed" | "response.incomplete");
        let parsed = (terminal || event.data.contains("\"delta\""))
            .then(|| serde_json::from_str::<Value>(&event.data).ok())
            .flatten();
        let delta = parsed
            .as_ref()
            .and_then(|data| data["delta"].as_str())
            .map(str::to_owned);
        let usage = parsed
            .as_ref()
            .filter(|_| terminal)
            .and_then(|data| usage_of(&data["response"]));
        Ok(RawEvent {
            name,
            data: event.data,
            delta,
            usage,
            terminal,
        })
    }

    fn bytes(&self) -> Bytes {
        if self.name.is_empty() {
            data_event(self.data.as_bytes())
        } else {
            named_event(&self.name, self.data.as_bytes())
        }
    }
}

impl CanonicalRequest for RawRequest {
    fn model(&self) -> &str {
        self.0
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    fn set_model(&mut self, model: &str) {
        if let Some(fields) = self.0.as_object_mut() {
            fields.insert("model".into(), Value::String(model.to_owned()));
        }
    }

    fn is_stream(&self) -> bool {
        self.0
            .get("stream")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// A Responses stream carries its usage in its last event anyway.
    fn request_stream_usage(&mut self) -> bool {
        false
    }

    fn prompt_for_count(&self) -> (String, usize) {
        (prompt_text(&self.0), 0)
    }

    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        let number = |name| self.0.get(name).and_then(Value::as_f64);
        (number("temperature"), number("top_p"))
    }

    /// The caller's fields, where billed fields are priced or removed.
    fn caller_fields(&mut self) -> Option<&mut Fields> {
        self.0.as_object_mut()
    }
}

impl CanonicalResponse for RawAnswer {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn output_text(&self) -> String {
        let mut out = String::new();
        push_texts(&self.value["output"], &mut out);
        out
    }
}

impl CanonicalChunk for RawEvent {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn is_usage_only(&self) -> bool {
        false
    }

    /// Output deltas (text, tool-call arguments): the first is the first
    /// token.
    fn has_output(&self) -> bool {
        self.delta.is_some()
    }

    fn push_output(&self, out: &mut String) {
        out.push_str(self.delta.as_deref().unwrap_or_default());
    }
}

impl Call for RawRequest {
    type Response = RawAnswer;
    type Chunk = RawEvent;

    /// Routed on its model and size alone; the size is what budgets, rate
    /// limits and context windows see.
    fn view(&self) -> RequestView<'_> {
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let prompt_tokens = tokens::estimate(&prompt_text(&self.0));
        RequestView {
            model: self.model(),
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            max_tokens: self
                .0
                .get("max_output_tokens")
                .and_then(Value::as_u64)
                .map(count),
            streaming: self.is_stream(),
            turns: 1,
            last_user_text: last_user_text(&self.0),
            ..RequestView::default()
        }
    }

    fn hints(&self) -> BodyHints<'_> {
        BodyHints {
            user: self.0.get("user").and_then(Value::as_str),
            profile: self.0["metadata"]["profile"].as_str(),
        }
    }

    fn validate(&self) -> Result<(), GatewayError> {
        Ok(())
    }

    /// Keys share the backend's account, where stored responses and
    /// conversations live: the account cannot tell one key's from
    /// another's, so a key could continue (and read) another key's by its
    /// id. A background response is billed after the gateway has settled,
    /// and hosted tools bill per call at prices the gateway does not know.
    /// So, with keys, these are refused; without keys (one user) they pass.
    fn check_caller(&self, caller: &Caller) -> Result<(), GatewayError> {
        let refuse = |param: &str, message: &str| {
            Err(GatewayError::InvalidField {
                param: param.to_owned(),
                message: message.to_owned(),
            })
        };
        for field in ["previous_response_id", "conversation"] {
            if self.0.get(field).is_some_and(|v| !v.is_null()) {
                return refuse(
                    field,
                    "stored responses and conversations live in the backend account every key of this gateway shares, so they cannot be continued by id here; send the conversation as `input`",
                );
            }
        }
        if self.0.get("background").and_then(Value::as_bool) == Some(true) {
            return refuse(
                "background",
                "background responses are billed after the call, where this gateway cannot account for them; send the request without `background`",
            );
        }
        if caller.key.budget.is_some()
            && let Some(tool) = self.0["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["type"].as_str())
                .find(|kind| !matches!(*kind, "function" | "custom"))
        {
            return refuse(
                "tools",
                &format!(
                    "hosted tool `{tool}` is billed per call at a price this gateway does not know, so a key with a budget may not use it"
                ),
            );
        }
        Ok(())
    }

    fn summarize(_resp: &RawAnswer) -> AnswerSummary {
        AnswerSummary::default()
    }

    fn summarize_chunks(_chunks: &[RawEvent]) -> AnswerSummary {
        AnswerSummary::default()
    }

    /// Only a backend that speaks Responses takes the request untranslated.
    fn served_by(provider: &dyn Provider) -> bool {
        provider.speaks_responses()
    }

    fn call(self, provider: &dyn Provider) -> BoxFuture<'_, Result<RawAnswer, AdapterError>> {
        provider
            .responses(self.0)
            .map(|answer| answer.map(RawAnswer::new))
            .boxed()
    }

    fn call_stream(
        self,
        provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<Chunks<RawEvent>, AdapterError>> {
        provider
            .responses_stream(self.0)
            .map(|events| {
                events.map(|events| {
                    events
                        .map(|event| event.and_then(RawEvent::from_sse))
                        .boxed()
                })
            })
            .boxed()
    }
}

impl Endpoint for NativeResponses {
    const NAME: &'static str = "responses";
    const DIALECT: Dialect = Dialect::OpenAi;
    /// Nothing here reads a Responses answer's text for a cascade's checks.
    const CHECKED_BY_CASCADES: bool = false;
    type Request = RawRequest;
    type Response = RawAnswer;
    type Chunk = RawEvent;
    type Encoder = NativeEvents;

    fn respond(_req: &RawRequest, resp: &RawAnswer) -> Response<Body> {
        json_response(StatusCode::OK, &resp.value)
    }

    fn encoder(_req: &RawRequest, _usage: bool, _model: &str, _prompt: u32) -> NativeEvents {
        NativeEvents::default()
    }
}

/// Relays the backend's events as they came, holding back the last one
/// (`response.completed`) until the row is written: in strict mode it is
/// committed before the client sees the stream end, and a row that was not
/// ends the stream with an error instead.
#[derive(Default)]
pub struct NativeEvents {
    relayed: u64,
    last: Option<Bytes>,
}

impl StreamEncoder<RawEvent> for NativeEvents {
    fn chunk(&mut self, event: &RawEvent) -> Option<Bytes> {
        if event.terminal {
            self.last = Some(event.bytes());
            return None;
        }
        self.relayed += 1;
        Some(event.bytes())
    }

    fn error(&mut self, err: &GatewayError) -> Bytes {
        error_event(err, self.relayed)
    }

    fn done(&mut self) -> Bytes {
        self.last.take().unwrap_or_else(|| BytesMut::new().freeze())
    }
}

/// A Responses request's prompt as text, for counting its tokens when the
/// backend reports no usage: the instructions and every text in the input
/// (messages, their content parts, tool calls and their outputs).
fn prompt_text(raw: &Value) -> String {
    let mut out = String::new();
    push_texts(&raw["instructions"], &mut out);
    push_texts(&raw["input"], &mut out);
    out
}

/// Appends every text in a Responses value (input items, output items),
/// a line each: strings, and the fields that hold text, arguments or names.
fn push_texts(value: &Value, out: &mut String) {
    match value {
        Value::String(text) => {
            out.push_str(text);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|item| push_texts(item, out)),
        Value::Object(fields) => {
            for (name, field) in fields {
                if matches!(
                    name.as_str(),
                    "text" | "content" | "arguments" | "output" | "name"
                ) {
                    push_texts(field, out);
                }
            }
        }
        _ => {}
    }
}

/// The text of the request's last user input, for rules that read it: the
/// `input` itself when it is a string, else the last user message's text.
fn last_user_text(raw: &Value) -> &str {
    if let Some(text) = raw["input"].as_str() {
        return text;
    }
    let items = raw["input"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let Some(last_user) = items.iter().rev().find(|item| item["role"] == "user") else {
        return "";
    };
    match &last_user["content"] {
        Value::String(text) => text,
        Value::Array(parts) => parts
            .iter()
            .rev()
            .find_map(|part| part["text"].as_str())
            .unwrap_or_default(),
        _ => "",
    }
}

/// Usage in a Responses object, in chat terms for the ledger.
fn usage_of(response: &Value) -> Option<Usage> {
    let usage = response.get("usage")?;
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let mut usage_in_chat_terms = Usage::with_cached(
        count(&usage["input_tokens"]),
        count(&usage["output_tokens"]),
        count(&usage["input_tokens_details"]["cached_tokens"]),
    );
    // Reasoning is part of the output, billed at its own rate where priced.
    let reasoning = count(&usage["output_tokens_details"]["reasoning_tokens"]);
    if reasoning > 0 {
        usage_in_chat_terms.completion_tokens_details = Some(UsageDetails {
            reasoning_tokens: Some(reasoning),
            ..UsageDetails::default()
        });
    }
    Some(usage_in_chat_terms)
}

/// The Responses stream's `error` event, numbered after the `relayed`
/// events before it (a backend numbers its events from 0).
fn error_event(err: &GatewayError, relayed: u64) -> Bytes {
    let object = err.error_object();
    let data = serde_json::json!({
        "type": "error", "code": object["code"], "message": object["message"],
        "param": object["param"], "sequence_number": relayed,
    });
    named_event("error", data.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use switchyard_policies::TokenCounts;

    use super::*;

    #[test]
    fn responses_usage_keeps_cached_and_reasoning_tokens_apart() {
        let response = json!({"usage": {
            "input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
            "output_tokens": 7, "output_tokens_details": {"reasoning_tokens": 5}}});
        let counts = usage_of(&response).unwrap().token_counts();
        assert_eq!(
            counts,
            TokenCounts {
                input: 6,
                cached_input: 4,
                cache_write: 0,
                output: 7,
                reasoning: 5,
            }
        );
    }

    #[test]
    fn a_responses_prompt_is_every_text_of_its_input() {
        let raw = json!({"instructions": "Be brief.", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "What is the tide?"}]},
            {"type": "function_call", "name": "tides", "arguments": "{\"port\":\"Brest\"}"},
            {"type": "function_call_output", "output": "high at 14:02"}]});
        let text = prompt_text(&raw);
        for part in [
            "Be brief.",
            "What is the tide?",
            "tides",
            "Brest",
            "high at 14:02",
        ] {
            assert!(text.contains(part), "{part} missing from {text:?}");
        }
        assert!(!text.contains("input_text"), "types are not prompt text");
    }

    fn event(name: &str, data: Value) -> SseEvent {
        SseEvent {
            event: Some(name.to_owned()),
            data: data.to_string(),
        }
    }

    #[test]
    fn events_carry_their_output_and_the_last_one_its_usage() {
        let delta = RawEvent::from_sse(event(
            "response.output_text.delta",
            json!({"type": "response.output_text.delta", "delta": "Hel", "sequence_number": 3}),
        ))
        .unwrap();
        assert!(delta.has_output() && !delta.terminal);
        let mut out = String::new();
        delta.push_output(&mut out);
        assert_eq!(out, "Hel");
        let created =
            RawEvent::from_sse(event("response.created", json!({"response": {}}))).unwrap();
        assert!(!created.has_output() && CanonicalChunk::usage(&created).is_none());
        let completed = RawEvent::from_sse(event(
            "response.completed",
            json!({"response": {"usage": {"input_tokens": 4, "output_tokens": 2}}}),
        ))
        .unwrap();
        assert!(completed.terminal);
        assert_eq!(CanonicalChunk::usage(&completed).unwrap().prompt_tokens, 4);
    }

    #[test]
    fn a_backends_failure_event_is_an_upstream_error() {
        for name in ["error", "response.failed"] {
            let err = RawEvent::from_sse(event(name, json!({"message": "boom"}))).unwrap_err();
            assert!(
                matches!(err, AdapterError::Status { status: 502, .. }),
                "{name}"
            );
        }
    }

    #[test]
    fn the_last_event_waits_for_the_end_and_errors_are_numbered_after_what_was_sent() {
        let mut encoder = NativeEvents::default();
        let created = RawEvent::from_sse(event("response.created", json!({}))).unwrap();
        let completed =
            RawEvent::from_sse(event("response.completed", json!({"response": {}}))).unwrap();
        assert!(encoder.chunk(&created).is_some());
        assert!(
            encoder.chunk(&completed).is_none(),
            "held until the row is written"
        );
        let end = encoder.done();
        assert!(String::from_utf8_lossy(&end).starts_with("event: response.completed\n"));
        let err = GatewayError::Internal {
            message: "x".into(),
        };
        let text = String::from_utf8_lossy(&encoder.error(&err)).to_string();
        let data: Value =
            serde_json::from_str(text.split_once("data: ").unwrap().1.trim()).unwrap();
        assert_eq!(data["sequence_number"], 1);
    }

    #[test]
    fn rules_read_the_last_user_input() {
        assert_eq!(last_user_text(&json!({"input": "hi there"})), "hi there");
        let items = json!({"input": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
            {"type": "function_call_output", "output": "42"}]});
        assert_eq!(last_user_text(&items), "second");
        assert_eq!(last_user_text(&json!({"input": []})), "");
    }
}
