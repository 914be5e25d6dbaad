//! Active health checks (`backends.NAME.health_check`): every `interval`,
//! each such backend is asked something cheap (its model list; llama.cpp's
//! `/health`, which answers 503 while a model loads; or the configured
//! `url`), with its own key, and the answer goes to its breaker: failures in
//! a row open it, so routes fall back before any request pays for finding
//! the server down, and answers in a row close it again.

use std::sync::Arc;

use http::{HeaderName, HeaderValue};
use switchyard_adapters::engine_metrics::fetch_with;
use switchyard_adapters::upstream::{HttpClient, http_client_trusting};
use switchyard_policies::{AzureAuth, Backend, BackendAdapter, Config, Engine, HealthCheck};

use crate::state::app::App;

/// A backend to check, and how.
struct Checked {
    index: usize,
    name: String,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    settings: HealthCheck,
    client: HttpClient,
}

/// Starts one watcher per backend with health checks.
pub fn spawn(config: &Config, app: &Arc<App>) -> Vec<tokio::task::AbortHandle> {
    config
        .backends
        .values()
        .enumerate()
        .filter_map(|(index, backend)| {
            let settings = backend.health_check.clone()?;
            let (url, headers) = target(backend, &settings)?;
            let client = http_client_trusting(settings.timeout, &backend.tls)
                .inspect_err(|err| tracing::warn!(backend = %backend.name, %err, "health check: no HTTP client"))
                .ok()?;
            let checked = Checked {
                index,
                name: backend.name.clone(),
                url,
                headers,
                settings,
                client,
            };
            Some(tokio::spawn(watch(checked, app.clone())).abort_handle())
        })
        .collect()
}

/// What to ask a backend, with its key: `None` for the in-process
/// simulator, which has no server to lose.
fn target(
    backend: &Backend,
    settings: &HealthCheck,
) -> Option<(String, Vec<(HeaderName, HeaderValue)>)> {
    let key = |var: &Option<String>| var.as_ref().and_then(|v| std::env::var(v).ok());
    let (default, headers) = match &backend.adapter {
        BackendAdapter::OpenAi(openai) => {
            let url = match openai.engine {
                Engine::Llamacpp => format!("{}/health", openai.origin()),
                _ => format!("{}/models", openai.base_url),
            };
            let headers = key(&openai.api_key_env)
                .and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok())
                .map(|v| (http::header::AUTHORIZATION, v))
                .into_iter()
                .collect();
            (url, headers)
        }
        BackendAdapter::Anthropic(anthropic) => {
            let mut headers: Vec<(HeaderName, HeaderValue)> = key(&anthropic.api_key_env)
                .and_then(|k| HeaderValue::from_str(&k).ok())
                .map(|v| (HeaderName::from_static("x-api-key"), v))
                .into_iter()
                .collect();
            let version = anthropic
                .version
                .as_deref()
                .unwrap_or(switchyard_adapters::anthropic::DEFAULT_VERSION);
            if let Ok(version) = HeaderValue::from_str(version) {
                headers.push((HeaderName::from_static("anthropic-version"), version));
            }
            (format!("{}/models", anthropic.base_url), headers)
        }
        BackendAdapter::Gemini(gemini) => {
            let headers = key(&Some(gemini.api_key_env.clone()))
                .and_then(|k| HeaderValue::from_str(&k).ok())
                .map(|v| (HeaderName::from_static("x-goog-api-key"), v))
                .into_iter()
                .collect();
            (format!("{}/v1beta/models", gemini.base_url), headers)
        }
        BackendAdapter::Azure(azure) => {
            let (name, value) = match &azure.auth {
                AzureAuth::ApiKey(var) => {
                    (HeaderName::from_static("api-key"), key(&Some(var.clone())))
                }
                AzureAuth::EntraToken(var) => (
                    http::header::AUTHORIZATION,
                    key(&Some(var.clone())).map(|t| format!("Bearer {t}")),
                ),
            };
            let headers = value
                .and_then(|v| HeaderValue::from_str(&v).ok())
                .map(|v| (name, v))
                .into_iter()
                .collect();
            let url = if azure.v1() {
                format!("{}/openai/v1/models", azure.endpoint)
            } else {
                format!(
                    "{}/openai/models?api-version={}",
                    azure.endpoint, azure.api_version
                )
            };
            (url, headers)
        }
        // Their calls are signed or carry tokens fetched per backend:
        // failures open the breaker; there is no cheap check to send.
        BackendAdapter::Vertex(_) | BackendAdapter::Bedrock(_) | BackendAdapter::Sim(_) => {
            return None;
        }
    };
    Some((settings.url.clone().unwrap_or(default), headers))
}

async fn watch(checked: Checked, app: Arc<App>) {
    let settings = &checked.settings;
    let mut ticks = tokio::time::interval(settings.interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Held open for two intervals past each failed check: if checks stop
    // (a reload ended this watcher), the breaker's own probing takes over.
    let hold = settings.interval * 2;
    loop {
        ticks.tick().await;
        let outcome = fetch_with(
            &checked.client,
            &checked.url,
            &checked.headers,
            settings.timeout,
        )
        .await
        .map(drop)
        .map_err(|err| crate::http::redact::redact(&err.to_string()));
        if let Err(err) = &outcome {
            tracing::debug!(backend = %checked.name, url = %checked.url, error = %err, "health check failed");
        }
        let breaker = &app.backends[checked.index].breaker;
        let was = breaker.health().state;
        breaker.checked(
            outcome,
            (settings.unhealthy_after, settings.healthy_after),
            hold,
            crate::ledger::now_ms(),
        );
        let now = breaker.health();
        // Logged on a change, and not for the first answer of a healthy one.
        if now.state != was && (was, now.state) != ("unchecked", "healthy") {
            tracing::warn!(backend = %checked.name, state = now.state, error = now.last_error.as_deref(), "backend health changed");
        }
    }
}
