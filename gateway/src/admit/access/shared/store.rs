//! The connections to Redis, and whether it is reachable now.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use switchyard_policies::{OnUnavailable, RedisState, Secretive};

use crate::admit::access::shared::settler::{Settlement, Settler};

/// Why a shared check did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateError {
    /// Redis is away (or was, moments ago, and the probe has not seen it
    /// back yet), or did not answer in time.
    Unavailable,
    /// Redis answered with an error (a script error, out of memory, a
    /// read-only replica): this call failed, the connection did not.
    Rejected,
}

/// Unanswered calls in a row after which Redis counts as away.
const SLOW_CALLS_FOR_AWAY: u64 = 3;

pub struct RedisStore {
    connections: Vec<ConnectionManager>,
    next: AtomicUsize,
    up: Arc<AtomicBool>,
    probing: Arc<AtomicBool>,
    /// Calls in a row that got no answer in time: a few slow answers on a
    /// busy machine are not an outage, a refused connection is.
    slow_in_a_row: AtomicU64,
    pub timeout: Duration,
    pub on_unavailable: OnUnavailable,
    pub replicas: u32,
    pub hold_ttl: Duration,
    /// `{prefix}`: every key starts with it, one hash tag, so the scripts
    /// that touch several keys stay legal on Redis Cluster.
    tag: String,
    /// Names this process's reservations: unique per start.
    pub writer_id: String,
    seq: AtomicU64,
    /// Checks that went to the local fallback (or were refused) because
    /// Redis was away.
    pub fallbacks: AtomicU64,
    settler: Settler,
}

impl RedisStore {
    /// Connects lazily: the first call (or the probe) opens the
    /// connections, so a Redis that is away at start is handled like one
    /// that goes away later.
    pub fn open(settings: &RedisState) -> anyhow::Result<Arc<RedisStore>> {
        let url = match &settings.url {
            Secretive::Literal(url) => url.clone(),
            Secretive::Env(var) => std::env::var(var).map_err(|_| {
                anyhow::anyhow!("state.redis.url: environment variable `{var}` is not set")
            })?,
        };
        let client = redis::Client::open(url.as_str()).map_err(|err| {
            anyhow::anyhow!(
                "state.redis: `{}` is not a Redis URL: {err}",
                crate::http::redact::redact(&url)
            )
        })?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(settings.timeout))
            .set_response_timeout(Some(settings.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let connections = (0..settings.pool_size)
            .map(|_| ConnectionManager::new_lazy_with_config(client.clone(), config.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| anyhow::anyhow!("state.redis: {err}"))?;
        let store = Arc::new_cyclic(|weak| RedisStore {
            connections,
            next: AtomicUsize::new(0),
            up: Arc::new(AtomicBool::new(true)),
            probing: Arc::new(AtomicBool::new(false)),
            slow_in_a_row: AtomicU64::new(0),
            timeout: settings.timeout,
            on_unavailable: settings.on_unavailable,
            replicas: settings.replicas,
            hold_ttl: settings.hold_ttl,
            tag: format!("{{{}}}", settings.key_prefix),
            writer_id: format!("{:016x}", rand::random::<u64>()),
            seq: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            settler: Settler::start(weak.clone(), settings.hold_ttl),
        });
        Ok(store)
    }

    /// Whether the last call reached Redis.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// A key under this deployment's prefix.
    pub fn key(&self, rest: &str) -> String {
        format!("{}{rest}", self.tag)
    }

    /// A name no other reservation of any replica has.
    pub fn next_id(&self) -> String {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed);
        format!("{}:{seq}", self.writer_id)
    }

    pub fn connection(&self) -> ConnectionManager {
        let at = self.next.fetch_add(1, Ordering::Relaxed) % self.connections.len();
        self.connections[at].clone()
    }

    /// Runs `script` unless Redis is known to be away; a failure marks it
    /// away and starts the probe that notices its return.
    pub async fn run<T: redis::FromRedisValue>(
        self: &Arc<Self>,
        script: &redis::ScriptInvocation<'_>,
    ) -> Result<T, StateError> {
        if !self.is_up() {
            return Err(StateError::Unavailable);
        }
        let mut connection = self.connection();
        // The connection's own response timeout (`timeout_ms`) bounds the
        // call: no second timer per call.
        match script.invoke_async(&mut connection).await {
            Ok(value) => {
                self.slow_in_a_row.store(0, Ordering::Relaxed);
                Ok(value)
            }
            // Checked first: a timeout is an I/O error too.
            Err(err) if err.is_timeout() => {
                // This call falls back; Redis counts as away after three
                // with no answered call between them.
                if self.slow_in_a_row.fetch_add(1, Ordering::Relaxed) + 1 >= SLOW_CALLS_FOR_AWAY {
                    self.went_away("no answer within state.redis.timeout_ms, three calls running");
                }
                Err(StateError::Unavailable)
            }
            Err(err)
                if err.is_io_error()
                    || err.is_connection_refusal()
                    || err.is_connection_dropped() =>
            {
                self.went_away(&crate::http::redact::redact(&err.to_string()));
                Err(StateError::Unavailable)
            }
            Err(err) => {
                tracing::error!(
                    error = %crate::http::redact::redact(&err.to_string()),
                    "Redis refused a shared-state script"
                );
                Err(StateError::Rejected)
            }
        }
    }

    /// Marks Redis away and probes every second until it answers.
    pub fn went_away(self: &Arc<Self>, why: &str) {
        if self.up.swap(false, Ordering::AcqRel) {
            tracing::warn!(
                error = why,
                on_unavailable = self.on_unavailable.as_str(),
                "Redis is unavailable: shared budgets and rate limits fall back"
            );
        }
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let store = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Some(store) = store.upgrade() else { return };
                // Every connection: one that has not reconnected yet would
                // fail the next call and mark Redis away again.
                if store.answers_on_every_connection().await {
                    store.probing.store(false, Ordering::Release);
                    store.slow_in_a_row.store(0, Ordering::Relaxed);
                    store.up.store(true, Ordering::Release);
                    tracing::info!(
                        "Redis is reachable again: shared budgets and rate limits resume"
                    );
                    return;
                }
            }
        });
    }

    async fn answers_on_every_connection(&self) -> bool {
        for connection in &self.connections {
            let mut connection = connection.clone();
            let ping = redis::cmd("PING");
            let answer = ping.query_async::<String>(&mut connection);
            if !matches!(tokio::time::timeout(self.timeout, answer).await, Ok(Ok(_))) {
                return false;
            }
        }
        true
    }

    pub fn fallbacks(&self) -> u64 {
        self.fallbacks.load(Ordering::Relaxed)
    }

    pub fn dropped_settlements(&self) -> u64 {
        self.settler.dropped.load(Ordering::Relaxed)
    }

    /// Counts a check that Redis could not serve.
    pub fn fell_back(&self) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
    }

    /// Hands a settlement to the settler (never waits).
    pub fn settle(&self, settlement: Settlement) {
        self.settler.send(settlement);
    }

    pub fn settler(&self) -> &Settler {
        &self.settler
    }
}
