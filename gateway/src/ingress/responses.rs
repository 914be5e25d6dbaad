//! `POST /v1/responses` (OpenAI Responses API), served through chat
//! completions: the request is translated to chat, routed like any chat
//! request, and the answer translated back, whole or as `response.*` events.

use std::sync::Arc;
use switchyard_adapters::upstream::with_trace_context;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::Value;
use switchyard_adapters::responses::{
    Echo, ResponseStream, chat_from_responses, response_from_chat,
};
use switchyard_adapters::sse::{data_event, named_event};
use switchyard_adapters::types::{
    ChatChunk, ChatRequest, ChatResponse, Extra, Timings, Usage, UsageDetails,
};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_adapters::{EventStream, tokens};
use switchyard_router::prefix::Tenant;
use switchyard_router::{AnswerSummary, Decision, RequestView};

use crate::admit::access::Caller;
use crate::admit::admission::{Size, admit_call, admit_request, check_direct, for_caller};
use crate::admit::capacity::Admission;
use crate::dispatch::endpoint::{Chunks, Endpoint};
use crate::dispatch::pipeline::{decide, serve_decided};
use crate::dispatch::request_context::RequestContext;
use crate::dispatch::stream::ResponsesEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json, sse_response};
use crate::ingress::chat::Chat;
use crate::ingress::chat_backed::chat_backed;
use crate::route::receipts::{self, Served};
use crate::route::view::BodyHints;
use crate::settle::billed_fields;
use crate::settle::record::RequestRecord;
use crate::state::app::App;

pub struct Responses;

impl Endpoint for Responses {
    const NAME: &'static str = "responses";
    const DIALECT: Dialect = Dialect::OpenAi;
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = ResponsesEvents;

    fn decode(body: &[u8]) -> Result<ChatRequest, GatewayError> {
        let value: Value = parse_json(body)?;
        Ok(chat_from_responses(&value)?)
    }

    fn respond(req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        json_response(StatusCode::OK, &response_from_chat(resp, &echo_of(req)))
    }

    fn encoder(
        req: &ChatRequest,
        _client_wants_usage: bool,
        model: &str,
        _prompt_tokens: u32,
    ) -> ResponsesEvents {
        ResponsesEvents(ResponseStream::new(model, echo_of(req)))
    }

    chat_backed!();
}

/// What the Responses object repeats of `req` (a request decoded here
/// always carries it; the default stands in otherwise).
fn echo_of(req: &ChatRequest) -> Echo {
    req.echo.as_deref().cloned().unwrap_or_default()
}

/// `POST /v1/responses`: untranslated to a backend that speaks Responses
/// itself (hosted tools, stored responses and all), translated through chat
/// for every other backend. A request chat cannot express can still go to a
/// native backend; for any other it is a 400 naming what stands in the way.
pub async fn serve(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let raw: Value = parse_json(&bytes)?;
    let model = raw
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let translated = Responses::decode(&bytes);
    let decision = match &translated {
        Ok(chat) => {
            Responses::validate(chat)?;
            decide::<Responses>(app, &parts, chat).await?
        }
        // Routed on its model and size alone (only a native backend can
        // take it); the size is what budgets, rate limits and context
        // windows see.
        Err(_) => {
            let prompt_tokens = tokens::estimate(&prompt_text(&raw));
            let decision = app
                .decide(&RequestView {
                    model: &model,
                    prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
                    max_tokens: raw
                        .get("max_output_tokens")
                        .and_then(Value::as_u64)
                        .map(|n| u32::try_from(n).unwrap_or(u32::MAX)),
                    turns: 1,
                    ..RequestView::default()
                })
                .map_err(|err| for_caller(err, app, parts.extensions.get::<Caller>()))?;
            check_direct(app, parts.extensions.get::<Caller>(), &decision)?;
            decision
        }
    };
    let native = app.backends[decision.primary()].replicas[0]
        .provider
        .speaks_responses();
    let mut response = match (native, translated) {
        (true, _) => passthrough(app, &parts, raw, &decision)
            .await
            .unwrap_or_else(|err| err.into_response()),
        (false, Ok(chat)) => return serve_decided::<Responses>(app, &parts, chat, decision).await,
        (false, Err(err)) => err.into_response(),
    };
    receipts::apply(
        app,
        &decision,
        Served::first_choice(&decision),
        response.headers_mut(),
    );
    Ok(response)
}

/// A Responses request's prompt as text, for counting its tokens when the
/// backend reports no usage: the instructions and every text in the input
/// (messages, their content parts, tool calls and their outputs).
fn prompt_text(raw: &Value) -> String {
    fn collect(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                out.push_str(text);
                out.push('\n');
            }
            Value::Array(items) => items.iter().for_each(|item| collect(item, out)),
            Value::Object(fields) => {
                for (name, field) in fields {
                    if matches!(
                        name.as_str(),
                        "text" | "content" | "arguments" | "output" | "name"
                    ) {
                        collect(field, out);
                    }
                }
            }
            _ => {}
        }
    }
    let mut out = String::new();
    collect(&raw["instructions"], &mut out);
    collect(&raw["input"], &mut out);
    out
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

async fn passthrough(
    app: &App,
    parts: &Parts,
    mut raw: Value,
    decision: &Decision,
) -> Result<Response<Body>, GatewayError> {
    let backend_index = decision.primary();
    let backend = &app.backends[backend_index];
    let size = Size::of(&decision.features);
    let model = decision.route.map_or_else(
        || backend.name.clone(),
        |r| app.router.route_name(r).to_owned(),
    );
    let context = RequestContext::new(
        app,
        parts,
        (Responses::NAME, Dialect::OpenAi),
        model,
        decision,
        Arc::new((prompt_text(&raw), 0)),
    );
    let caller = parts.extensions.get::<Caller>();
    admit_request(app, caller, size)?;
    let (reservation, admission) = admit_call(
        app,
        caller,
        backend_index,
        (size, &context.shape(app, backend_index)),
        None,
        Tenant::default(),
    )
    .await?;
    raw["model"] = Value::String(backend.upstream_model.clone());
    let tier = billed_fields::apply_to_json(&mut raw, backend);
    let streaming = raw.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let mut record = RequestRecord::new(
        app,
        context,
        backend_index,
        decision.reason,
        reservation,
        &admission,
        Some(decision.predicted_ttft_ms),
    );
    record.sent_tier(tier);
    if !streaming {
        let answer =
            with_trace_context(record.trace_context(), admission.provider.responses(raw)).await;
        let response = record.settle_whole(answer, usage_of).await?;
        return Ok(json_response(StatusCode::OK, &response));
    }
    let events = match with_trace_context(
        record.trace_context(),
        admission.provider.responses_stream(raw),
    )
    .await
    {
        Ok(events) => events,
        Err(err) => {
            let err = GatewayError::from(err);
            record.finish(err.kind());
            // The call failed either way; the writer logs a lost row.
            let _ = record.write().await;
            return Err(err);
        }
    };
    Ok(sse_response(relay(events, record, admission)))
}

/// Relays a native Responses stream event by event, noting output and the
/// final usage for the ledger.
fn relay(
    events: EventStream,
    record: RequestRecord,
    admission: Admission,
) -> impl futures_util::Stream<Item = Bytes> + Send + 'static {
    futures_util::stream::unfold(
        (events, record, admission, 0, false),
        |(mut events, mut record, admission, relayed, done)| async move {
            if done {
                return None;
            }
            match events.next().await {
                Some(Ok(event)) => {
                    // Output deltas (text, tool-call arguments): the first
                    // token, and the text counted if no usage comes.
                    if event.data.contains("\"delta\"")
                        && let Ok(data) = serde_json::from_str::<Value>(&event.data)
                        && let Some(delta) = data["delta"].as_str()
                    {
                        record.first_output();
                        record.output().push_str(delta);
                    }
                    let name = event.event.clone().unwrap_or_default();
                    // The backend's own failure, told in our words (its
                    // text goes to the log) and recorded as the failure it is.
                    if matches!(name.as_str(), "error" | "response.failed") {
                        let err = GatewayError::Upstream(AdapterError::Status {
                            status: 502,
                            message: event.data,
                            body: None,
                        });
                        record.finish(err.kind());
                        let _ = record.write().await;
                        err.log_detail();
                        return Some((
                            error_event(&err, relayed),
                            (events, record, admission, relayed, true),
                        ));
                    }
                    if matches!(name.as_str(), "response.completed" | "response.incomplete") {
                        if let Ok(data) = serde_json::from_str::<Value>(&event.data) {
                            record.usage(usage_of(&data["response"]).as_ref());
                        }
                        // The row before the final event: in strict mode it
                        // is committed first, and if it cannot be, the
                        // stream ends with an error instead.
                        record.finish("ok");
                        if let Err(err) = record.write().await {
                            return Some((
                                error_event(&err, relayed),
                                (events, record, admission, relayed, true),
                            ));
                        }
                    }
                    let bytes = if name.is_empty() {
                        data_event(event.data.as_bytes())
                    } else {
                        named_event(&name, event.data.as_bytes())
                    };
                    Some((bytes, (events, record, admission, relayed + 1, false)))
                }
                Some(Err(err)) => {
                    let err = GatewayError::from(err);
                    record.finish(err.kind());
                    // The stream ends with the backend's error either way.
                    let _ = record.write().await;
                    err.log_detail();
                    Some((
                        error_event(&err, relayed),
                        (events, record, admission, relayed, true),
                    ))
                }
                None => {
                    // A stream that ended without its final event (the row
                    // is usually written by now, and is not written twice).
                    record.finish("ok");
                    let _ = record.write().await;
                    None
                }
            }
        },
    )
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
}
