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

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use serde::{Deserialize, Serialize};
use switchyard_adapters::upstream::{HttpClient, http_client};
use switchyard_policies::{Config, Guardrail, GuardrailStage};

use http::request::Parts;
use switchyard_router::AnswerSummary;

use crate::admit::access::Caller;
use crate::dispatch::endpoint::Call;
use crate::error::GatewayError;
use crate::settle::context::{RequestContext, request_ids};
use crate::state::app::App;
use crate::telemetry::RequestTrace;

/// The most of a hook's answer read: a verdict, not a document.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The running config's hooks, with the client that calls them.
pub struct Guardrails {
    client: HttpClient,
    hooks: BTreeMap<String, Hook>,
}

struct Hook {
    settings: Guardrail,
    /// `Authorization: Bearer` with the variable `api_key` names.
    authorization: Option<HeaderValue>,
}

impl Guardrails {
    /// Fails when a hook's token variable is unset.
    pub fn new(config: &Config) -> anyhow::Result<Guardrails> {
        let mut hooks = BTreeMap::new();
        for (name, settings) in &config.guardrails {
            let authorization = match &settings.api_key_env {
                None => None,
                Some(var) => {
                    let token = std::env::var(var).map_err(|_| {
                        anyhow::anyhow!(
                            "guardrails.{name}.api_key: environment variable {var} is not set"
                        )
                    })?;
                    let mut value =
                        HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                            anyhow::anyhow!(
                                "guardrails.{name}.api_key: {var} is not a valid header value"
                            )
                        })?;
                    value.set_sensitive(true);
                    Some(value)
                }
            };
            hooks.insert(
                name.clone(),
                Hook {
                    settings: settings.clone(),
                    authorization,
                },
            );
        }
        let client = http_client(Duration::from_secs(2))?;
        Ok(Guardrails { client, hooks })
    }

    /// Whether `route` asks any hook at `stage`.
    pub fn any(&self, app: &App, route: Option<&str>, stage: GuardrailStage) -> bool {
        !self.of(app, route, stage).is_empty()
    }

    fn of<'a>(&'a self, app: &App, route: Option<&str>, stage: GuardrailStage) -> Vec<&'a Hook> {
        let Some(route) = route.and_then(|r| app.config.routes.get(r)) else {
            return Vec::new();
        };
        route
            .guardrails
            .iter()
            .filter_map(|name| self.hooks.get(name))
            .filter(|hook| hook.settings.stage == stage)
            .collect()
    }
}

/// What a hook is told of the request.
#[derive(Serialize)]
struct Asked<'a> {
    request_id: Option<&'a str>,
    route: Option<&'a str>,
    model: &'a str,
    key: Option<&'a str>,
    team: Option<&'a str>,
    prompt: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    answer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_arguments: Option<&'a [String]>,
}

#[derive(Serialize)]
struct Body<'a> {
    guardrail: &'a str,
    stage: &'static str,
    #[serde(flatten)]
    asked: &'a Asked<'a>,
}

#[derive(Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum Verdict {
    Allow,
    Block {
        #[serde(default)]
        reason: Option<String>,
    },
}

/// Asks the hooks of the route `request` names before anything is
/// routed or called.
pub async fn before<R: Call>(app: &App, parts: &Parts, request: &R) -> Result<(), GatewayError> {
    let route = app.route_of(request.model());
    if !app
        .guardrails
        .any(app, route.as_deref(), GuardrailStage::PreCall)
    {
        return Ok(());
    }
    let (request_id, _) = request_ids(&parts.headers, &parts.extensions);
    let key = parts.extensions.get::<Caller>().map(|c| &c.key);
    let texts = request.prompt_texts();
    let asked = Asked {
        request_id: request_id.as_ref().and_then(|v| v.to_str().ok()),
        route: route.as_deref(),
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
        .any(app, context.route.as_deref(), GuardrailStage::PostCall)
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
    for hook in app.guardrails.of(app, asked.route, stage) {
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

enum Failure {
    Late,
    Failed(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Late => f.write_str("no answer in time"),
            Failure::Failed(why) => f.write_str(why),
        }
    }
}

async fn call(
    client: &HttpClient,
    hook: &Hook,
    stage: GuardrailStage,
    asked: &Asked<'_>,
) -> Result<Verdict, Failure> {
    let body = serde_json::to_vec(&Body {
        guardrail: &hook.settings.name,
        stage: stage.as_str(),
        asked,
    })
    .map_err(|err| Failure::Failed(err.to_string()))?;
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(&hook.settings.url)
        .header(http::header::CONTENT_TYPE, "application/json");
    if let Some(authorization) = &hook.authorization {
        request = request.header(http::header::AUTHORIZATION, authorization);
    }
    let request = request
        .body(Full::new(Bytes::from(body)))
        .map_err(|err| Failure::Failed(err.to_string()))?;
    let answered = async {
        let response = client
            .request(request)
            .await
            .map_err(|err| Failure::Failed(format!("unreachable: {err}")))?;
        let status = response.status();
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|err| Failure::Failed(format!("reading its answer: {err}")))?
            .to_bytes();
        if !status.is_success() {
            return Err(Failure::Failed(format!("it answered {status}")));
        }
        serde_json::from_slice::<Verdict>(&body).map_err(|err| {
            Failure::Failed(format!(
                "its answer is not {{\"action\": \"allow\" | \"block\"}}: {err}"
            ))
        })
    };
    tokio::time::timeout(hook.settings.timeout, answered)
        .await
        .unwrap_or(Err(Failure::Late))
}
