//! Guardrail hooks: a route's `guardrails:` are HTTP services of the
//! team's own, asked before any backend is called (`pre_call`, with the
//! prompt) or once the answer is whole (`post_call`, with the prompt and
//! the answer; a streamed answer is held back until every hook allows it).
//!
//! The gateway POSTs JSON:
//! `{"guardrail", "stage", "request_id", "route", "model", "key", "team",
//! "prompt": [texts], "answer", "tool_arguments"}` (the last two after the
//! call), and reads `{"action": "allow"}` or `{"action": "block",
//! "reason": "..."}`. A block is a 400 `guardrail_blocked` naming the hook
//! and its reason. A hook that answers anything else, fails, or is later
//! than its `timeout_ms` is a 503 `guardrail_unavailable` when it fails
//! closed, and lets the request through when it fails open. Every call is
//! timed (`switchyard_guardrail_seconds`), counted by outcome
//! (`switchyard_guardrail_calls_total`) and a span of the request's trace.

use std::time::{Instant, SystemTime};

use http::request::Parts;
use switchyard_policies::GuardrailStage;
use switchyard_router::AnswerSummary;

use crate::admit::access::Caller;
use crate::dispatch::endpoint::Call;
use crate::dispatch::guardrail_hooks::{Asked, Failure, Verdict, call};
use crate::error::GatewayError;
use crate::http::request_id::request_ids;
use crate::settle::context::RequestContext;
use crate::state::app::App;
use crate::telemetry::RequestTrace;

/// Asks the hooks of `route` (the route `request` names, from
/// [`App::route_of`]) before anything is routed or called.
pub async fn before<R: Call>(
    app: &App,
    parts: &Parts,
    route: Option<&str>,
    request: &R,
) -> Result<(), GatewayError> {
    if !app.guardrails.any(route, GuardrailStage::PreCall) {
        return Ok(());
    }
    // Boxed: the hooks' calls are kilobytes of state, which would otherwise
    // be part of every request's future (copied whole into its box as each
    // request starts), hooks or not.
    Box::pin(ask_before(app, parts, route, request)).await
}

async fn ask_before<R: Call>(
    app: &App,
    parts: &Parts,
    route: Option<&str>,
    request: &R,
) -> Result<(), GatewayError> {
    let (request_id, _) = request_ids(&parts.headers, &parts.extensions);
    let key = parts.extensions.get::<Caller>().map(|c| &c.key);
    let texts = request.prompt_texts();
    let asked = Asked {
        request_id: request_id.as_ref().and_then(|v| v.to_str().ok()),
        route,
        model: request.model(),
        key: key.map(|k| k.name.as_str()),
        team: key.and_then(|k| k.team.as_deref()),
        prompt: texts.iter().map(AsRef::as_ref).collect(),
        answer: None,
        tool_arguments: None,
    };
    let trace = parts.extensions.get::<RequestTrace>();
    ask(app, trace, GuardrailStage::PreCall, &asked).await
}

/// Whether the request `context` describes has hooks to ask once its
/// answer is whole (so a streamed answer is held back for them).
pub fn checks_after(app: &App, context: &RequestContext) -> bool {
    app.guardrails
        .any(context.route.as_deref(), GuardrailStage::PostCall)
}

/// Asks the request's hooks about its whole answer.
pub async fn after(
    app: &App,
    context: &RequestContext,
    answer: &AnswerSummary,
) -> Result<(), GatewayError> {
    let key = context.caller.as_ref().map(|c| &c.key);
    let texts = context.prompt.texts();
    let asked = Asked {
        request_id: context.request_id.as_ref().and_then(|v| v.to_str().ok()),
        route: context.route.as_deref(),
        model: &context.model,
        key: key.map(|k| k.name.as_str()),
        team: key.and_then(|k| k.team.as_deref()),
        prompt: texts.iter().map(String::as_str).collect(),
        answer: Some(&answer.text),
        tool_arguments: Some(&answer.tool_arguments),
    };
    ask(
        app,
        context.trace.as_ref(),
        GuardrailStage::PostCall,
        &asked,
    )
    .await
}

/// Asks every hook `route` has at `stage`, in order; the first block or
/// closed failure ends the request.
async fn ask(
    app: &App,
    trace: Option<&RequestTrace>,
    stage: GuardrailStage,
    asked: &Asked<'_>,
) -> Result<(), GatewayError> {
    for hook in app.guardrails.of(asked.route, stage) {
        let name = hook.settings.name.as_str();
        let started = (Instant::now(), SystemTime::now());
        let result = call(&app.guardrails.client, hook, stage, asked).await;
        let outcome = match &result {
            Ok(Verdict::Allow) => "allow",
            Ok(Verdict::Block { .. }) => "block",
            Err(Failure::Late) => "timeout",
            Err(Failure::Failed(_)) => "error",
        };
        app.metrics
            .guardrail(name, stage.as_str(), outcome, started.0.elapsed());
        if let Some(trace) = trace {
            trace.guardrail(name, stage.as_str(), started.1, outcome);
        }
        match result {
            Ok(Verdict::Allow) => {}
            Ok(Verdict::Block { reason }) => {
                return Err(GatewayError::GuardrailBlocked {
                    message: match reason {
                        Some(reason) => {
                            format!("guardrail `{name}` blocked this request: {reason}")
                        }
                        None => format!("guardrail `{name}` blocked this request"),
                    },
                });
            }
            Err(failure) => {
                let why = failure.to_string();
                if hook.settings.fail_open {
                    tracing::warn!(guardrail = name, stage = stage.as_str(), error = %why, "guardrail failed open: the request goes on");
                } else {
                    tracing::warn!(guardrail = name, stage = stage.as_str(), error = %why, "guardrail failed closed: the request is refused");
                    return Err(GatewayError::GuardrailUnavailable {
                        message: format!("guardrail `{name}` could not check this request ({why})"),
                    });
                }
            }
        }
    }
    Ok(())
}
