//! The CLIENT span of one upstream attempt: what it was sent as at the
//! start, what came of it at the end (from its ledger row, so the trace
//! and the ledger never disagree).

use std::time::{Duration, SystemTime};

use opentelemetry::KeyValue;
use switchyard_router::{Decision, Reason};

use crate::ledger::LedgerRow;
use crate::settle::context::RequestContext;
use crate::state::app::App;
use crate::telemetry::names::*;
use crate::telemetry::{AttemptSpan, RequestTrace, strings};

/// An attempt as it starts.
pub struct Attempt<'a> {
    pub context: &'a RequestContext,
    pub backend_index: usize,
    pub replica: usize,
    pub reason: Reason,
    /// The wait for the backend's slot: the span starts before it.
    pub waited: Duration,
    pub predicted_ttft_ms: Option<f64>,
    pub expected_cached_tokens: u32,
}

/// What the routing span says of a decision.
pub fn routing(app: &App, decision: &Decision) -> Vec<KeyValue> {
    let names = app.router.backends();
    let mut attributes = vec![
        KeyValue::new(REASON, decision.reason.as_str()),
        KeyValue::new(
            CANDIDATES,
            strings(
                decision
                    .targets
                    .iter()
                    .filter_map(|&b| names.get(b).cloned()),
            ),
        ),
        KeyValue::new(
            EXPECTED_CACHED_TOKENS,
            i64::from(decision.expected_cached_tokens),
        ),
    ];
    if let Some(route) = decision.route {
        attributes.push(KeyValue::new(
            ROUTE,
            app.router.route_name(route).to_owned(),
        ));
        attributes.push(KeyValue::new(STRATEGY, app.router.strategy_name(route)));
    }
    if decision.predicted_ttft_ms.is_finite() {
        attributes.push(KeyValue::new(PREDICTED_TTFT_MS, decision.predicted_ttft_ms));
    }
    if let Some(profile) = decision.features.profile {
        attributes.push(KeyValue::new(PROFILE, profile.name()));
    }
    attributes
}

/// The GenAI operation of an endpoint (its ledger name).
pub fn operation(endpoint: &str) -> &'static str {
    match endpoint {
        "completions" => "text_completion",
        "embeddings" | "encoder" => "embeddings",
        _ => "chat",
    }
}

/// What the attempt was to the request: the first choice, a hedge leg, a
/// fallback or a cascade step.
pub fn role(reason: Reason) -> &'static str {
    match reason {
        Reason::Hedge => "hedge",
        Reason::Fallback => "fallback",
        Reason::Cascade | Reason::CascadeEscalated => "cascade_step",
        Reason::Shadow => "shadow",
        _ => "primary",
    }
}

pub fn start(app: &App, attempt: &Attempt<'_>, trace: &RequestTrace) -> Option<AttemptSpan> {
    let backend = app.backends.get(attempt.backend_index)?;
    let context = attempt.context;
    let operation = operation(context.endpoint);
    let mut attributes = vec![
        KeyValue::new(OPERATION_NAME, operation),
        KeyValue::new(PROVIDER_NAME, backend.peer.provider),
        KeyValue::new(REQUEST_MODEL, backend.upstream_model.clone()),
        KeyValue::new(BACKEND, backend.name.clone()),
        KeyValue::new(TIER, backend.tier.as_str()),
        KeyValue::new(REASON, attempt.reason.as_str()),
        KeyValue::new(ROLE, role(attempt.reason)),
        KeyValue::new(QUEUE_WAIT_MS, attempt.waited.as_secs_f64() * 1000.0),
        KeyValue::new(
            EXPECTED_CACHED_TOKENS,
            i64::from(attempt.expected_cached_tokens),
        ),
    ];
    if let Some((host, port)) = backend.peer.server(attempt.replica) {
        attributes.push(KeyValue::new(SERVER_ADDRESS, host.clone()));
        attributes.push(KeyValue::new(SERVER_PORT, i64::from(*port)));
    }
    if context.streaming {
        attributes.push(KeyValue::new(REQUEST_STREAM, true));
    }
    let (temperature, top_p) = context.prompt.sampling();
    if let Some(t) = temperature {
        attributes.push(KeyValue::new(REQUEST_TEMPERATURE, t));
    }
    if let Some(p) = top_p {
        attributes.push(KeyValue::new(REQUEST_TOP_P, p));
    }
    if let Some(max) = context.max_tokens {
        attributes.push(KeyValue::new(REQUEST_MAX_TOKENS, i64::from(max)));
    }
    if let Some(route) = &context.route {
        attributes.push(KeyValue::new(ROUTE, route.to_string()));
    }
    if let Some(profile) = context.profile {
        attributes.push(KeyValue::new(PROFILE, profile));
    }
    if let Some(ms) = attempt.predicted_ttft_ms.filter(|ms| ms.is_finite()) {
        attributes.push(KeyValue::new(PREDICTED_TTFT_MS, ms));
    }
    let started = SystemTime::now()
        .checked_sub(attempt.waited)
        .unwrap_or_else(SystemTime::now);
    trace.attempt(operation, &backend.upstream_model, started, attributes)
}

/// Ends the span with what the ledger row says of the attempt; `content`
/// is the prompt and the completion when content is captured.
pub fn end(
    span: AttemptSpan,
    row: &LedgerRow,
    ttft: Option<Duration>,
    content: Option<(String, Option<String>)>,
) {
    let tokens = &row.tokens;
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let mut attributes = vec![
        KeyValue::new(USAGE_INPUT_TOKENS, count(tokens.prompt())),
        KeyValue::new(USAGE_OUTPUT_TOKENS, count(tokens.output)),
        KeyValue::new(USAGE_CACHE_READ_INPUT_TOKENS, count(tokens.cached_input)),
        KeyValue::new(USAGE_CACHE_WRITE_INPUT_TOKENS, count(tokens.cache_write)),
        KeyValue::new(USAGE_REASONING_OUTPUT_TOKENS, count(tokens.reasoning)),
        KeyValue::new(COST_USD, row.cost_usd),
        KeyValue::new(COUNTERFACTUAL_USD, row.counterfactual_usd),
        KeyValue::new(STATUS, row.status),
    ];
    if row.estimated {
        attributes.push(KeyValue::new(ESTIMATED_USAGE, true));
    }
    if let Some(ttft) = ttft {
        attributes.push(KeyValue::new(
            RESPONSE_TIME_TO_FIRST_CHUNK,
            ttft.as_secs_f64(),
        ));
    }
    if let Some(drafts) = row.drafts.filter(|d| d.drafted > 0) {
        attributes.push(KeyValue::new(
            DRAFT_ACCEPTANCE,
            drafts.accepted as f64 / drafts.drafted as f64,
        ));
    }
    if let Some((prompt, completion)) = content {
        attributes.push(KeyValue::new(
            INPUT_MESSAGES,
            text_messages("user", &prompt),
        ));
        if let Some(completion) = completion {
            attributes.push(KeyValue::new(
                OUTPUT_MESSAGES,
                text_messages("assistant", &completion),
            ));
        }
    }
    span.end(SystemTime::now(), row.status, attributes);
}

/// Text as the conventions' message list: one message of one text part.
fn text_messages(role: &str, text: &str) -> String {
    serde_json::json!([{"role": role, "parts": [{"type": "text", "content": text}]}]).to_string()
}
