//! The gateway's state for one config: backends with their clients, the
//! router, and the admission limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http::request::Parts;
use hyper::body::Incoming;
use switchyard_policies::{Config, Limits, Reference};
use switchyard_router::{Decision, Router};
use tokio::sync::Semaphore;

use crate::admit::access::{Budgets, KeyStore, RateLimits, RedisStore};
use crate::dispatch::daily_spend::DailySpend;
use crate::dispatch::response_store::ResponseCache;
use crate::dispatch::shadow_lanes::ShadowLanes;
use crate::error::GatewayError;
use crate::http::connection::ConnectionLimits;
use crate::http::{BodyLimits, read_json_body};
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::route::outcomes::OutcomeLog;
use crate::state::backends::{BackendHandle, LimitChange, build_backend};
use crate::state::stored_keys::Unreadable;

/// Everything a config sets up. A reload builds a new one with
/// [`App::carrying`], which keeps what the old one learned and counted;
/// requests hold the `App` they started with until they end.
pub struct App {
    /// The config this was built from.
    pub config: Arc<Config>,
    /// Indexed like the router's backends (config order).
    pub backends: Vec<BackendHandle>,
    pub router: Router,
    pub max_body_bytes: usize,
    /// How long a client has to send a request's body, and may pause
    /// while sending it.
    pub body_read_timeout: Duration,
    pub body_idle_timeout: Duration,
    /// Limits on every connection (head size and time, connections open).
    pub connection_limits: ConnectionLimits,
    pub limits: Limits,
    /// Output budgets reserve for a request without `max_tokens` where the
    /// backend's window is unknown.
    pub default_max_tokens: u32,
    pub keys: Arc<KeyStore>,
    pub rates: Arc<RateLimits>,
    pub budgets: Arc<Budgets>,
    /// Redis, where budgets and rate limits are shared between replicas
    /// (`state.redis`); kept across reloads, like the ledger.
    pub shared_state: Option<Arc<RedisStore>>,
    pub ledger: Arc<Ledger>,
    /// The stored keys' fingerprint when this config was built (`None`:
    /// unreadable then): the watcher rebuilds when the store's moves on.
    pub keys_fingerprint: Option<i64>,
    /// The cloud model every request is also priced on.
    pub reference: Option<Reference>,
    /// Hedged spend per key today.
    pub hedges: Arc<DailySpend>,
    /// Each route's shadow lane, and the copies every config shares.
    pub shadows: ShadowLanes,
    /// This `App` as the running config shares it (set when it goes live),
    /// for work that outlives the request it came with (a shadow copy).
    pub(crate) shared: std::sync::OnceLock<std::sync::Weak<App>>,
    pub metrics: Arc<Metrics>,
    /// The routes' guardrail hooks and their client.
    pub guardrails: Arc<crate::dispatch::guardrail_hooks::Guardrails>,
    /// The MCP servers `/mcp` serves; none when the config names none.
    pub mcp: Option<Arc<crate::mcp::McpServers>>,
    /// The Files and Batches API's store, kept across reloads.
    pub batches: Option<Arc<crate::batch::Batches>>,
    /// Each route's response cache, where it has one (by route index).
    pub response_caches: Vec<Option<Arc<ResponseCache>>>,
    /// Each route's name as the route receipt's value (by route index).
    pub route_receipts: Vec<Option<HeaderValue>>,
    /// The dashboard's figures per window, kept two seconds: each open
    /// page asks every ten, and a week's are many rows to read.
    pub stats_cache: moka::sync::Cache<&'static str, Bytes>,
    /// Where each predictor's outcomes are recorded, if anywhere (by the
    /// router's predictor index).
    pub outcome_logs: Vec<Option<Arc<OutcomeLog>>>,
    pub(crate) in_flight: Arc<Semaphore>,
    /// Request bodies being read at once: as many as requests may be in
    /// flight, so slow uploaders cannot make the gateway hold more bodies.
    pub(crate) reading: Arc<Semaphore>,
    /// Shared by every config's `App`: a reload does not undo a shutdown.
    pub(crate) shutting_down: Arc<AtomicBool>,
    /// Limits shared with the previous config whose size this one
    /// changes; applied by [`App::apply_limit_changes`] when it goes live.
    pub(crate) limit_changes: std::sync::Mutex<Vec<LimitChange>>,
}

impl App {
    /// The name of the route a request for `model` takes, if a route (not
    /// a backend named directly) serves it.
    pub fn route_of(&self, model: &str) -> Option<Arc<str>> {
        match self.router.target(model)? {
            switchyard_router::Target::Route(route) => Some(self.router.shared_route_name(route)),
            switchyard_router::Target::Backend(_) => None,
        }
    }

    /// Builds clients for every backend and compiles the routes. Fails when
    /// a backend's API key variable is unset or its client cannot be built.
    pub fn build(config: &Config) -> anyhow::Result<Self> {
        Self::carrying(config, None, Unreadable::Fail)
    }

    /// Builds the state for `config`, carrying over from `previous` (the
    /// running config's) what belongs to backends, keys, budgets and routes
    /// that are still there: latency models, breakers, in-flight counts and
    /// queues, spend, rate limiters, the prefix index, response caches and
    /// metrics. The ledger and the listener's limits are the running
    /// ones: they change only at restart.
    /// `unreadable`: what to do when the stored keys cannot be read.
    pub fn carrying(
        config: &Config,
        previous: Option<&App>,
        unreadable: Unreadable,
    ) -> anyhow::Result<Self> {
        let router = Router::carrying(config, previous.map(|p| (&p.router, &*p.config)));
        // Limits to resize once this config is live (not before: a reload
        // that fails half-way must leave the running limits as they are).
        let mut limit_changes = Vec::new();
        let backends = config
            .backends
            .values()
            .map(|backend| {
                let old = previous.and_then(|p| {
                    let at = p.backends.iter().position(|b| b.name == backend.name)?;
                    Some((&p.backends[at], p.config.backends.get(&backend.name)?))
                });
                build_backend(backend, old, &mut limit_changes)
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        debug_assert!(
            backends
                .iter()
                .map(|b| &b.name)
                .eq(router.backends().iter())
        );
        let (ledger, connection_limits) = match previous {
            Some(p) => (p.ledger.clone(), p.connection_limits),
            None => (
                Ledger::open(&config.ledger)?,
                ConnectionLimits::of(&config.server),
            ),
        };
        // The keys made through the admin API join the file's here, so
        // every config built (at start, on reload) has them. The store's
        // fingerprint is read first: a change after it is seen as one by
        // the watcher, even when the keys read below already hold it.
        let keys_fingerprint = ledger.keys_fingerprint(&mut Default::default()).ok();
        let merged = crate::state::stored_keys::merged(
            config,
            ledger.stored_keys(),
            previous.map(|p| &*p.config),
            unreadable,
        )?;
        let config = &merged;
        let access = crate::admit::access::assemble(
            config,
            previous.map(|p| crate::admit::access::Previous {
                budgets: &p.budgets,
                rates: &p.rates,
                shared_state: p.shared_state.as_ref(),
            }),
            &ledger,
        )?;
        let max_concurrent = config.server.max_concurrent_requests;
        // In-flight requests keep their places in the limits: the same
        // semaphores, resized to the new config's.
        let mut gateway_limit = |limit: fn(&App) -> &Arc<Semaphore>| match previous {
            Some(p) => LimitChange::keep(
                (limit(p), None),
                p.config.server.max_concurrent_requests,
                max_concurrent,
                &mut limit_changes,
            ),
            None => Arc::new(Semaphore::new(max_concurrent)),
        };
        let (in_flight, reading) = (
            gateway_limit(|app| &app.in_flight),
            gateway_limit(|app| &app.reading),
        );
        let outcome_logs = crate::route::outcomes::logs_for(
            config,
            previous.map_or(&[][..], |p| &p.outcome_logs[..]),
        )?;
        let batches = match previous.and_then(|p| p.batches.clone()) {
            Some(kept) => kept,
            None => Arc::new(crate::batch::Batches::open(config, &ledger)?),
        };
        Ok(App {
            outcome_logs,
            config: Arc::new(config.clone()),
            backends,
            router,
            max_body_bytes: config.server.max_body_bytes,
            body_read_timeout: config.server.body_read_timeout,
            body_idle_timeout: config.server.body_idle_timeout,
            connection_limits,
            limits: config.limits,
            default_max_tokens: config.default_max_tokens,
            keys: Arc::new(KeyStore::new(&config.auth)),
            rates: access.rates,
            budgets: access.budgets,
            shared_state: access.shared_state,
            ledger,
            keys_fingerprint,
            reference: config.reference.clone(),
            hedges: previous.map(|p| p.hedges.clone()).unwrap_or_default(),
            shadows: ShadowLanes::new(config, previous.map(|p| &p.shadows)),
            shared: std::sync::OnceLock::new(),
            guardrails: Arc::new(crate::dispatch::guardrail_hooks::Guardrails::new(config)?),
            mcp: mcp_servers(config, previous.and_then(|p| p.mcp.as_ref()))?,
            batches: Some(batches),
            metrics: Arc::new(Metrics::carrying(
                &config
                    .backends
                    .values()
                    .map(|b| crate::metrics::BackendLabels {
                        name: b.name.clone(),
                        provider: crate::telemetry::Peer::of(b).provider,
                        model: b.upstream_model.clone(),
                    })
                    .collect::<Vec<_>>(),
                // `auth.metrics_key_labels: false`: no per-key series at all.
                if config.auth.metrics_key_labels {
                    &config.auth.keys
                } else {
                    &[]
                },
                previous.map(|p| &*p.metrics),
            )),
            stats_cache: moka::sync::Cache::builder()
                .max_capacity(4)
                .time_to_live(Duration::from_secs(2))
                .build(),
            response_caches: config
                .routes
                .values()
                .map(|route| {
                    let settings = route.response_cache?;
                    let kept = previous.and_then(|p| {
                        let at = p
                            .config
                            .routes
                            .keys()
                            .position(|name| *name == route.name)?;
                        let old = p.config.routes.get(&route.name)?;
                        // Kept answers came from backends as they were: a
                        // backend that now reaches other servers or
                        // another model makes them stale.
                        let same_servers = config.backends.values().all(|b| {
                            p.config
                                .backends
                                .get(&b.name)
                                .is_none_or(|was| was.same_server(b))
                        });
                        (old.response_cache == Some(settings) && same_servers)
                            .then(|| p.response_caches.get(at).cloned().flatten())
                            .flatten()
                    });
                    Some(kept.unwrap_or_else(|| Arc::new(ResponseCache::new(settings))))
                })
                .collect(),
            route_receipts: config
                .routes
                .keys()
                .map(|name| HeaderValue::from_str(name).ok())
                .collect(),
            in_flight,
            reading,
            limit_changes: std::sync::Mutex::new(limit_changes),
            shutting_down: previous
                .map(|p| p.shutting_down.clone())
                .unwrap_or_default(),
        })
    }

    /// Reads a request's JSON body within the configured size and time,
    /// holding a place among `max_concurrent_requests` while it does: past
    /// that many bodies arriving at once, a request is a 503 before its
    /// body is read (admission before work).
    pub async fn read_body(&self, parts: &Parts, body: Incoming) -> Result<Bytes, GatewayError> {
        let (_reading, limits) = self.reading_within(self.max_body_bytes)?;
        read_json_body(parts, body, limits).await
    }

    /// Reads an upload's multipart body, of at most `max_bytes` (413
    /// past it), in the time any body has.
    pub async fn read_upload(
        &self,
        parts: &Parts,
        body: Incoming,
        max_bytes: usize,
    ) -> Result<Bytes, GatewayError> {
        let (_reading, limits) = self.reading_within(max_bytes)?;
        crate::http::read_upload_body(parts, body, limits).await
    }

    /// A place among the bodies being read (503 when every one is taken),
    /// and the limits a body of at most `max_bytes` is read within.
    fn reading_within(
        &self,
        max_bytes: usize,
    ) -> Result<(tokio::sync::SemaphorePermit<'_>, BodyLimits), GatewayError> {
        let reading = self
            .reading
            .try_acquire()
            .map_err(|_| GatewayError::Overloaded {
                what: "the gateway is reading as many request bodies as it may".into(),
            })?;
        let limits = BodyLimits {
            max_bytes,
            read_timeout: self.body_read_timeout,
            idle_timeout: self.body_idle_timeout,
        };
        Ok((reading, limits))
    }

    /// Appends a first answer's outcome to the record of every predictor
    /// that learns from it and keeps one.
    pub fn record_outcome(&self, decision: &Decision, backend: usize, failed: bool) {
        let (Some(learning), Some(route)) = (decision.lesson(backend), decision.route) else {
            return;
        };
        let route = self.router.route_name(route);
        for &p in &learning.predictors {
            if let Some(Some(log)) = self.outcome_logs.get(p) {
                log.record(route, &learning.sample, failed);
            }
        }
    }

    /// Refuses a request for more answers (`n`, `best_of`) than
    /// `limits.max_n` allows: each is generated and billed.
    pub fn check_choices(&self, choices: u32) -> Result<(), GatewayError> {
        if choices <= self.limits.max_n {
            return Ok(());
        }
        Err(GatewayError::InvalidField {
            param: "n".into(),
            message: format!(
                "asks for {choices} answers (n, best_of, for each prompt); this gateway allows at most {} (limits.max_n)",
                self.limits.max_n
            ),
        })
    }

    /// Resizes the concurrency limits this config shares with the one it
    /// replaces; called once, as it goes live (after that, its config is
    /// the one a later reload measures from).
    pub fn apply_limit_changes(&self) {
        let changes =
            std::mem::take(&mut *self.limit_changes.lock().unwrap_or_else(|p| p.into_inner()));
        for change in changes {
            change.apply();
        }
    }

    /// Shares the `App` as the running config, so work that outlives a
    /// request can hold it ([`App::shared`]).
    pub fn into_shared(self) -> Arc<App> {
        let app = Arc::new(self);
        let _ = app.shared.set(Arc::downgrade(&app));
        app
    }

    /// This `App`, shared, once it went live.
    pub fn shared(&self) -> Option<Arc<App>> {
        self.shared.get()?.upgrade()
    }

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

/// The MCP servers of `config`: the previous config's when unchanged (its
/// stdio servers keep running), new ones otherwise.
fn mcp_servers(
    config: &Config,
    previous: Option<&Arc<crate::mcp::McpServers>>,
) -> anyhow::Result<Option<Arc<crate::mcp::McpServers>>> {
    if config.mcp.servers.is_empty() {
        return Ok(None);
    }
    if let Some(previous) = previous.filter(|p| p.settings == config.mcp) {
        return Ok(Some(Arc::clone(previous)));
    }
    let http = switchyard_adapters::upstream::http_client(std::time::Duration::from_secs(10))
        .map_err(|e| anyhow::anyhow!("mcp: {e}"))?;
    let servers =
        crate::mcp::McpServers::new(&config.mcp, &http).map_err(|e| anyhow::anyhow!(e))?;
    Ok(Some(Arc::new(servers)))
}
