//! The guardrail hooks a running config holds (`guardrails:`, and which
//! each route asks), and one call to a hook: the JSON sent and the verdict
//! read back. Asking a request's hooks is `dispatch::guardrails`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full, Limited};
use serde::{Deserialize, Serialize};
use switchyard_adapters::upstream::{HttpClient, http_client};
use switchyard_policies::{Config, Guardrail, GuardrailStage};

/// The most of a hook's answer read: a verdict, not a document.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The running config's hooks, with the client that calls them.
pub struct Guardrails {
    pub(crate) client: HttpClient,
    hooks: BTreeMap<String, Hook>,
    /// Each route's hooks, by route name, in the order it lists them.
    by_route: HashMap<String, Vec<String>>,
}

pub(crate) struct Hook {
    pub(crate) settings: Guardrail,
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
        let by_route = config
            .routes
            .values()
            .filter(|route| !route.guardrails.is_empty())
            .map(|route| (route.name.clone(), route.guardrails.clone()))
            .collect();
        let client = http_client(Duration::from_secs(2))?;
        Ok(Guardrails {
            client,
            hooks,
            by_route,
        })
    }

    /// Whether `route` asks any hook at `stage`.
    pub fn any(&self, route: Option<&str>, stage: GuardrailStage) -> bool {
        !self.of(route, stage).is_empty()
    }

    /// The hooks `route` asks at `stage`, in its order.
    pub(crate) fn of(&self, route: Option<&str>, stage: GuardrailStage) -> Vec<&Hook> {
        let Some(names) = route.and_then(|r| self.by_route.get(r)) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|name| self.hooks.get(name))
            .filter(|hook| hook.settings.stage == stage)
            .collect()
    }
}

/// What a hook is told of the request.
#[derive(Serialize)]
pub(crate) struct Asked<'a> {
    pub(crate) request_id: Option<&'a str>,
    pub(crate) route: Option<&'a str>,
    pub(crate) model: &'a str,
    pub(crate) key: Option<&'a str>,
    pub(crate) team: Option<&'a str>,
    pub(crate) prompt: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) answer: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_arguments: Option<&'a [String]>,
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
pub(crate) enum Verdict {
    Allow,
    Block {
        #[serde(default)]
        reason: Option<String>,
    },
}

pub(crate) enum Failure {
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

pub(crate) async fn call(
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
