//! `guardrails:` hooks a route calls (`routes.NAME.guardrails: [names]`):
//! an HTTP service of the team's own (a classifier, a hosted moderation
//! API behind a small shim) asked before the call (`pre_call`, with the
//! prompt) or after it (`post_call`, with the prompt and the answer),
//! which allows or blocks the request. Each hook has its own timeout and
//! says what a hook that fails or is late means: `fail: closed` (refused)
//! or `fail: open` (served, the failure counted and logged).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuardrail {
    pub url: String,
    pub stage: String,
    pub timeout_ms: Option<u64>,
    pub fail: Option<String>,
    /// `env:NAME`: sent as `Authorization: Bearer` with the variable's value.
    pub api_key: Option<String>,
}

/// When a hook is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardrailStage {
    /// Before any backend is called, with the prompt.
    PreCall,
    /// Once the answer is whole (a streamed one is held back until the
    /// hook allows it), with the prompt and the answer.
    PostCall,
}

impl GuardrailStage {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardrailStage::PreCall => "pre_call",
            GuardrailStage::PostCall => "post_call",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guardrail {
    pub name: String,
    pub url: String,
    pub stage: GuardrailStage,
    pub timeout: Duration,
    /// A hook that fails or is late lets the request through.
    pub fail_open: bool,
    /// The environment variable holding the hook's bearer token.
    pub api_key_env: Option<String>,
}

pub(super) fn validate(
    ck: &Checker<'_>,
    raw: BTreeMap<String, RawGuardrail>,
) -> Result<BTreeMap<String, Guardrail>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, raw) in raw {
        let at = |field: &'static str| ["guardrails", name.as_str(), field];
        if !(raw.url.starts_with("http://") || raw.url.starts_with("https://")) {
            return Err(ck.error(&at("url"), "an http:// or https:// URL"));
        }
        let stage = match raw.stage.as_str() {
            "pre_call" => GuardrailStage::PreCall,
            "post_call" => GuardrailStage::PostCall,
            other => {
                return Err(ck.error(
                    &at("stage"),
                    format!("`{other}` is not one of pre_call, post_call"),
                ));
            }
        };
        let timeout = Duration::from_millis(raw.timeout_ms.unwrap_or(1_000));
        if timeout.is_zero() || timeout > Duration::from_secs(60) {
            return Err(ck.error(&at("timeout_ms"), "between 1 and 60000"));
        }
        let fail_open = match raw.fail.as_deref() {
            None | Some("closed") => false,
            Some("open") => true,
            Some(other) => {
                return Err(ck.error(&at("fail"), format!("`{other}` is not one of open, closed")));
            }
        };
        let api_key_env = match raw.api_key {
            None => None,
            Some(key) => match key.strip_prefix("env:") {
                Some(var) if !var.is_empty() => Some(var.to_owned()),
                _ => {
                    return Err(ck.error(
                        &at("api_key"),
                        "must be `env:NAME`, naming the environment variable that holds the token; secrets are never written in config",
                    ));
                }
            },
        };
        out.insert(
            name.clone(),
            Guardrail {
                name,
                url: raw.url,
                stage,
                timeout,
                fail_open,
                api_key_env,
            },
        );
    }
    Ok(out)
}

/// Every route's `guardrails:` names a hook `guardrails:` defines.
pub(super) fn check_routes(
    ck: &Checker<'_>,
    routes: &BTreeMap<String, super::Route>,
    defined: &BTreeMap<String, Guardrail>,
) -> Result<(), ConfigError> {
    for route in routes.values() {
        for (i, name) in route.guardrails.iter().enumerate() {
            if !defined.contains_key(name) {
                return Err(ck.error(
                    &["routes", &route.name, "guardrails", i.to_string().as_str()],
                    format!("`{name}` is not a guardrail (define it under `guardrails:`)"),
                ));
            }
        }
    }
    Ok(())
}
