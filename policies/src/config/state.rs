//! The `state:` section: where replicas share budgets and rate limits.
//! Without it each process keeps its own counters in memory, which is
//! right for one process and wrong for several behind one Service.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

/// Validated `state:` settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SharedState {
    pub redis: Option<RedisState>,
}

/// Budgets and rate limits kept in Redis, shared by every replica.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisState {
    /// Where the server is: `redis://` or `rediss://` (TLS), a user and
    /// password in the URL.
    pub url: Secretive,
    /// Starts every key, so several deployments can share one Redis.
    pub key_prefix: String,
    /// Multiplexed connections, used in turn.
    pub pool_size: usize,
    /// How long one Redis call may take: a slower one falls back, and
    /// three timing out with no answered call between them mark Redis
    /// away until a probe gets an answer.
    pub timeout: Duration,
    pub on_unavailable: OnUnavailable,
    /// Replicas sharing the limits: with Redis away and `local`, each
    /// process enforces its share of every limit (the limit divided by it).
    pub replicas: u32,
    /// How long a reservation holds budget without word from its replica
    /// (which renews it while the request runs): a replica that dies
    /// releases its holds within this.
    pub hold_ttl: Duration,
}

/// A URL that may carry a password: written in the file, or `env:NAME`,
/// an environment variable (filled from a Kubernetes Secret) read at start.
#[derive(Debug, Clone, PartialEq)]
pub enum Secretive {
    Literal(String),
    Env(String),
}

/// What the gateway does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnavailable {
    /// Refuse requests a shared limit or budget applies to (503).
    FailClosed,
    /// Enforce each limit divided by `replicas` in this process alone.
    Local,
}

impl OnUnavailable {
    pub fn as_str(self) -> &'static str {
        match self {
            OnUnavailable::FailClosed => "fail_closed",
            OnUnavailable::Local => "local",
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawState {
    redis: Option<RawRedis>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRedis {
    url: String,
    key_prefix: Option<String>,
    pool_size: Option<usize>,
    timeout_ms: Option<u64>,
    on_unavailable: Option<String>,
    replicas: Option<u32>,
    hold_ttl_ms: Option<u64>,
}

pub(super) fn validate(ck: &Checker<'_>, raw: RawState) -> Result<SharedState, ConfigError> {
    let Some(redis) = raw.redis else {
        return Ok(SharedState::default());
    };
    let at = |field: &'static str| ["state", "redis", field];
    let url = match redis.url.strip_prefix("env:") {
        Some(var) if !var.is_empty() => Secretive::Env(var.to_owned()),
        None if redis.url.starts_with("redis://") || redis.url.starts_with("rediss://") => {
            Secretive::Literal(redis.url)
        }
        // Never echo the value: it may hold a password.
        _ => {
            return Err(ck.error(
                &at("url"),
                "a redis:// or rediss:// (TLS) URL, or `env:NAME` naming the environment variable that holds it (a password belongs there)",
            ));
        }
    };
    let on_unavailable = match redis.on_unavailable.as_deref() {
        None | Some("fail_closed") => OnUnavailable::FailClosed,
        Some("local") => OnUnavailable::Local,
        Some(other) => {
            return Err(ck.error(
                &at("on_unavailable"),
                format!("`{other}`: use fail_closed or local"),
            ));
        }
    };
    let key_prefix = redis.key_prefix.unwrap_or_else(|| "switchyard".into());
    if key_prefix.is_empty() || key_prefix.contains(['{', '}']) {
        return Err(ck.error(
            &at("key_prefix"),
            "a non-empty name without braces (it becomes the keys' hash tag)",
        ));
    }
    let pool_size = redis.pool_size.unwrap_or(2);
    if !(1..=64).contains(&pool_size) {
        return Err(ck.error(&at("pool_size"), "between 1 and 64"));
    }
    let timeout_ms = redis.timeout_ms.unwrap_or(250);
    if timeout_ms == 0 {
        return Err(ck.error(&at("timeout_ms"), "must be positive"));
    }
    let replicas = redis.replicas.unwrap_or(1);
    if replicas == 0 {
        return Err(ck.error(&at("replicas"), "at least 1"));
    }
    let hold_ttl_ms = redis.hold_ttl_ms.unwrap_or(30_000);
    if hold_ttl_ms < 1000 {
        return Err(ck.error(
            &at("hold_ttl_ms"),
            "at least 1000 (holds are renewed every third of it)",
        ));
    }
    Ok(SharedState {
        redis: Some(RedisState {
            url,
            key_prefix,
            pool_size,
            timeout: Duration::from_millis(timeout_ms),
            on_unavailable,
            replicas,
            hold_ttl: Duration::from_millis(hold_ttl_ms),
        }),
    })
}
