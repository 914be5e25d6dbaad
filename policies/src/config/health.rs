//! `backends.NAME.health_check`: the gateway asks a backend something cheap
//! every `interval_ms`, and `unhealthy_after` failures in a row open its
//! breaker (the route falls back) until `healthy_after` answers in a row
//! close it again.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHealthCheck {
    pub interval_ms: Option<u64>,
    pub timeout_ms: Option<u64>,
    pub unhealthy_after: Option<u32>,
    pub healthy_after: Option<u32>,
    /// What to ask; by default the server's model list, or llama.cpp's
    /// `/health`.
    pub url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    pub interval: Duration,
    pub timeout: Duration,
    pub unhealthy_after: u32,
    pub healthy_after: u32,
    /// `None`: the adapter's own cheap request.
    pub url: Option<String>,
}

pub(super) fn health_check(
    ck: &Checker<'_>,
    backend: &str,
    raw: RawHealthCheck,
) -> Result<HealthCheck, ConfigError> {
    let at = |field: &'static str| ["backends", backend, "health_check", field];
    let interval = Duration::from_millis(raw.interval_ms.unwrap_or(10_000));
    if interval < Duration::from_millis(100) {
        return Err(ck.error(&at("interval_ms"), "at least 100 ms"));
    }
    let timeout = Duration::from_millis(raw.timeout_ms.unwrap_or(2_000)).min(interval);
    if timeout.is_zero() {
        return Err(ck.error(&at("timeout_ms"), "must be positive"));
    }
    for (field, value) in [
        ("unhealthy_after", raw.unhealthy_after),
        ("healthy_after", raw.healthy_after),
    ] {
        if value == Some(0) {
            return Err(ck.error(&at(field), "at least 1"));
        }
    }
    if let Some(url) = &raw.url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(ck.error(&at("url"), "an http:// or https:// URL"));
    }
    Ok(HealthCheck {
        interval,
        timeout,
        unhealthy_after: raw.unhealthy_after.unwrap_or(2),
        healthy_after: raw.healthy_after.unwrap_or(2),
        url: raw.url,
    })
}
