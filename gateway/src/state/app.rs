//! The gateway's state for one config: backends with their clients, the
//! router, and the admission limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::HeaderValue;
use http::request::Parts;
use hyper::body::Incoming;
use switchyard_adapters::anthropic::AnthropicClient;
use switchyard_adapters::openai::OpenAiClient;
use switchyard_adapters::sim::SimBackend;
use switchyard_adapters::upstream::Link;
use switchyard_adapters::{AdapterError, Provider};
use switchyard_policies::{
    Backend, BackendAdapter, Balance, Config, Engine, Limits, Pricing, Reference, Tier,
};
use switchyard_router::latency::{LatencyStore, LocalLatency, Shape};
use switchyard_router::prefix::{PrefixChain, PrefixIndex, ReplicaLoad, Tenant, choose_replica};
use switchyard_router::{Decision, Router};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::admit::access::{Budgets, KeyStore, RateLimits, RedisStore};
use crate::admit::breaker::Breaker;
use crate::dispatch::hedge_spend::HedgeSpend;
use crate::dispatch::prompt_cache::PromptCache;
use crate::dispatch::response_store::ResponseCache;
use crate::error::GatewayError;
use crate::http::server::ConnectionLimits;
use crate::http::{BodyLimits, read_json_body};
use crate::ledger::Ledger;
use crate::metrics::Metrics;
use crate::route::outcomes::OutcomeLog;

/// A backend ready to call.
pub struct BackendHandle {
    pub name: String,
    /// `name` as the backend receipt's value, made once.
    pub name_receipt: Option<HeaderValue>,
    pub tier: Tier,
    pub upstream_model: String,
    /// The provider and servers, as spans name them.
    pub peer: crate::telemetry::Peer,
    /// Servers of this model (one unless the config lists replicas).
    pub replicas: Vec<ReplicaHandle>,
    balance: Balance,
    max_imbalance: u32,
    /// Round-robin position.
    turn: AtomicUsize,
    /// The server software, for its extra request fields.
    pub engine: Engine,
    /// llama.cpp's slot count, when declared.
    pub slots: Option<u32>,
    /// What the provider's prompt cache needs from us.
    pub prompt_cache: PromptCache,
    pub pricing: Pricing,
    /// The longest a request may take to start answering, and so the
    /// longest it waits in the backend's queue.
    pub first_byte_timeout: Duration,
    /// The largest whole answer (or held-back stream) read from it.
    pub max_response_bytes: usize,
    /// Requests this gateway has in flight to the backend.
    in_flight: Arc<AtomicU32>,
    /// The concurrency limit; `None` when unlimited.
    limit: Option<Arc<Semaphore>>,
    /// Requests that may wait for a slot, and those waiting now.
    max_queue: usize,
    waiting: Arc<AtomicUsize>,
    pub breaker: Arc<Breaker>,
    /// Price multipliers of the provider's service tiers.
    pub service_tiers: Vec<(String, f64)>,
    /// Request fields never sent to this backend.
    pub deny_fields: Vec<String>,
}

impl BackendHandle {
    /// A concurrency slot: at once, after waiting in the queue (no longer
    /// than the first-byte timeout), or 503 when the queue is full.
    async fn wait_for_slot(
        &self,
        limit: &Arc<Semaphore>,
    ) -> Result<OwnedSemaphorePermit, GatewayError> {
        if let Ok(permit) = limit.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let full = || GatewayError::Overloaded {
            what: format!(
                "backend `{}` is at its concurrency limit and queue",
                self.name
            ),
        };
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(full());
        }
        let permit =
            tokio::time::timeout(self.first_byte_timeout, limit.clone().acquire_owned()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        match permit {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(full()),
        }
    }

    /// Requests this gateway has running on the backend, and waiting for
    /// one of its slots.
    pub fn load(&self) -> (u32, usize) {
        (
            self.in_flight.load(Ordering::Relaxed),
            self.waiting.load(Ordering::Relaxed),
        )
    }

    /// Cloud tiers count against cloud budgets.
    pub fn is_cloud(&self) -> bool {
        !self.tier.is_local()
    }
}

/// One server of a backend.
#[derive(Clone)]
pub struct ReplicaHandle {
    pub provider: Arc<dyn Provider>,
    in_flight: Arc<AtomicU32>,
}

/// A request's place in its backend's latency model: work ahead of later
/// requests from when it starts waiting for a slot until it is dropped.
struct WorkTicket {
    latency: Arc<LocalLatency>,
    backend: usize,
    id: u64,
}

impl Drop for WorkTicket {
    fn drop(&mut self) {
        self.latency.finished(self.backend, self.id);
    }
}

/// Slots a request holds while it runs (its whole stream, when streaming).
pub struct Admission {
    _gateway: OwnedSemaphorePermit,
    _backend: Option<OwnedSemaphorePermit>,
    _work: WorkTicket,
    in_flight: Arc<AtomicU32>,
    replica_in_flight: Arc<AtomicU32>,
    /// Requests the backend was serving when this one started, itself
    /// included: how many share its hourly cost.
    pub sharing: u32,
    /// How long it waited in the gateway for the backend's slot.
    pub waited: Duration,
    /// Requests running on the backend's hardware when it got its slot,
    /// itself included: the load its speeds are measured under.
    pub load: u32,
    /// The replica chosen, and its client.
    pub provider: Arc<dyn Provider>,
    /// The replica's (or its slot's) number in the prefix index.
    pub replica: usize,
    /// The llama.cpp slot to send the request to (`id_slot`), for backends
    /// that declare their slots.
    pub slot: Option<u32>,
    /// Leading blocks of the prompt's prefix chain the replica is thought
    /// to hold.
    pub cached_blocks: usize,
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.replica_in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

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
    /// The cloud model every request is also priced on.
    pub reference: Option<Reference>,
    pub hedges: Arc<HedgeSpend>,
    pub metrics: Arc<Metrics>,
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
    in_flight: Arc<Semaphore>,
    /// Request bodies being read at once: as many as requests may be in
    /// flight, so slow uploaders cannot make the gateway hold more bodies.
    reading: Arc<Semaphore>,
    /// Shared by every config's `App`: a reload does not undo a shutdown.
    shutting_down: Arc<AtomicBool>,
    /// Limits shared with the previous config whose size this one
    /// changes; applied by [`App::apply_limit_changes`] when it goes live.
    limit_changes: std::sync::Mutex<Vec<LimitChange>>,
}

impl App {
    /// Builds clients for every backend and compiles the routes. Fails when
    /// a backend's API key variable is unset or its client cannot be built.
    pub fn build(config: &Config) -> anyhow::Result<Self> {
        Self::carrying(config, None)
    }

    /// Builds the state for `config`, carrying over from `previous` (the
    /// running config's) what belongs to backends, keys, budgets and routes
    /// that are still there: latency models, breakers, in-flight counts and
    /// queues, spend, rate limiters, the prefix index, response caches and
    /// metrics. The ledger and the listener's limits are the running
    /// ones: they change only at restart.
    pub fn carrying(config: &Config, previous: Option<&App>) -> anyhow::Result<Self> {
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
                limit(p),
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
            reference: config.reference.clone(),
            hedges: previous.map(|p| p.hedges.clone()).unwrap_or_default(),
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
                &config.auth.keys,
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

    /// Takes a slot in the gateway and in the backend (waiting in the
    /// backend's bounded queue), or says it is full; then picks the
    /// backend's replica, by the prompt's prefix chain when there is one.
    pub async fn admit(
        &self,
        backend_index: usize,
        shape: &Shape,
        prefix: Option<&PrefixChain>,
        tenant: Tenant,
    ) -> Result<Admission, GatewayError> {
        // The chain as this backend's cache keys it for this caller.
        let prefix = prefix.map(|chain| self.router.chain_for(backend_index, chain, tenant));
        let prefix = prefix.as_deref();
        let gateway =
            self.in_flight
                .clone()
                .try_acquire_owned()
                .map_err(|_| GatewayError::Overloaded {
                    what: "the gateway is at its concurrent request limit".into(),
                })?;
        let backend = &self.backends[backend_index];
        // The latency model counts it as work ahead of later requests from
        // now: while it waits for a slot, the wait it causes is as real.
        let latency = self.router.latency();
        let work = WorkTicket {
            latency: latency.clone(),
            backend: backend_index,
            id: latency.started(backend_index, shape),
        };
        let arrived = Instant::now();
        let backend_permit = match &backend.limit {
            None => None,
            Some(limit) => Some(backend.wait_for_slot(limit).await?),
        };
        let waited = arrived.elapsed();
        let load = latency.running(backend_index, work.id);
        let sharing = backend.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        let (replica, slot, cached_blocks) = self.choose_replica(backend_index, prefix);
        let chosen = &backend.replicas[replica];
        chosen.in_flight.fetch_add(1, Ordering::AcqRel);
        let per = self.router.slots_per_replica(backend_index);
        Ok(Admission {
            _gateway: gateway,
            _backend: backend_permit,
            _work: work,
            in_flight: backend.in_flight.clone(),
            replica_in_flight: chosen.in_flight.clone(),
            sharing,
            waited,
            load,
            provider: chosen.provider.clone(),
            replica: self.router.replicas(backend_index).start + replica * per + slot,
            slot: backend.slots.map(|_| slot as u32),
            cached_blocks,
        })
    }

    /// The replica (and, for llama.cpp backends with slots, the slot) for
    /// a prompt: by the backend's balance over what each is thought to
    /// hold. Returns the replica, the slot and the blocks cached there.
    fn choose_replica(
        &self,
        backend_index: usize,
        prefix: Option<&PrefixChain>,
    ) -> (usize, usize, usize) {
        let backend = &self.backends[backend_index];
        let index = self.router.prefix_index();
        let per = self.router.slots_per_replica(backend_index);
        // Per slot (or per replica when it has no slots): cached and held blocks.
        let slots: Vec<ReplicaLoad> = self
            .router
            .replicas(backend_index)
            .map(|id| ReplicaLoad {
                cached_blocks: prefix.map_or(0, |chain| index.cached_blocks(id, chain)),
                in_flight: 0,
                held_blocks: index.held_blocks(id),
            })
            .collect();
        // Spread by the prompt's first block: a new prompt lands where
        // others that start like it went.
        let spread = prefix.and_then(|c| c.hash_at(1)).unwrap_or(0);
        let replica = if backend.replicas.len() == 1 {
            0
        } else {
            let loads: Vec<ReplicaLoad> = backend
                .replicas
                .iter()
                .zip(slots.chunks(per))
                .map(|(replica, slots)| ReplicaLoad {
                    cached_blocks: slots.iter().map(|s| s.cached_blocks).max().unwrap_or(0),
                    in_flight: replica.in_flight.load(Ordering::Acquire),
                    held_blocks: slots.iter().map(|s| s.held_blocks).sum(),
                })
                .collect();
            choose_replica(
                &loads,
                backend.balance,
                backend.max_imbalance,
                spread,
                &backend.turn,
            )
        };
        let own = &slots[replica * per..(replica + 1) * per];
        let slot = if per == 1 {
            0
        } else {
            choose_replica(own, Balance::CacheAffinity, 0, spread, &backend.turn)
        };
        (replica, slot, own[slot].cached_blocks)
    }

    /// Reads a request's JSON body within the configured size and time,
    /// holding a place among `max_concurrent_requests` while it does: past
    /// that many bodies arriving at once, a request is a 503 before its
    /// body is read (admission before work).
    pub async fn read_body(&self, parts: &Parts, body: Incoming) -> Result<Bytes, GatewayError> {
        let _reading = self
            .reading
            .try_acquire()
            .map_err(|_| GatewayError::Overloaded {
                what: "the gateway is reading as many request bodies as it may".into(),
            })?;
        let limits = BodyLimits {
            max_bytes: self.max_body_bytes,
            read_timeout: self.body_read_timeout,
            idle_timeout: self.body_idle_timeout,
        };
        read_json_body(parts, body, limits).await
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

    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

/// A backend's handle; with `old` (its handle and config before a
/// reload), it keeps the old clients when its config is unchanged (and
/// names no certificate files, which may have been renewed), its in-flight
/// counts and concurrency limit (resized when the new config goes live),
/// and, when it still reaches the same servers, its breaker (unless its
/// settings changed) and per-replica counts.
fn build_backend(
    backend: &Backend,
    old: Option<(&BackendHandle, &Backend)>,
    limit_changes: &mut Vec<LimitChange>,
) -> anyhow::Result<BackendHandle> {
    let openai = match &backend.adapter {
        BackendAdapter::OpenAi(openai) => Some(openai),
        _ => None,
    };
    let unchanged = old
        .filter(|(_, config)| *config == backend && backend.tls == Default::default())
        .map(|(h, _)| h);
    let same_server = old.filter(|(_, config)| config.same_server(backend));
    let replicas = match unchanged {
        Some(handle) => handle.replicas.clone(),
        None => new_replicas(backend, openai, same_server.map(|(h, _)| &h.replicas[..]))?,
    };
    let limit = match (old, backend.max_concurrency) {
        (Some((handle, config)), Some(now)) => match (&handle.limit, config.max_concurrency) {
            (Some(limit), Some(was)) => Some(LimitChange::keep(limit, was, now, limit_changes)),
            _ => Some(Arc::new(Semaphore::new(now))),
        },
        (_, now) => now.map(|n| Arc::new(Semaphore::new(n))),
    };
    let breaker = match same_server {
        Some((handle, config)) if config.breaker == backend.breaker => handle.breaker.clone(),
        _ => Arc::new(match old {
            Some((handle, _)) => Breaker::continuing(backend.breaker, &handle.breaker),
            None => Breaker::new(backend.breaker),
        }),
    };
    Ok(BackendHandle {
        name: backend.name.clone(),
        // Config validation keeps names to a header-safe alphabet.
        name_receipt: HeaderValue::from_str(&backend.name).ok(),
        tier: backend.tier,
        upstream_model: backend.upstream_model.clone(),
        peer: crate::telemetry::Peer::of(backend),
        replicas,
        balance: backend.prefix_cache.balance,
        max_imbalance: backend.prefix_cache.max_imbalance,
        turn: AtomicUsize::new(0),
        engine: openai.map_or(Engine::Generic, |o| o.engine),
        slots: openai.and_then(|o| o.slots),
        prompt_cache: match &backend.adapter {
            BackendAdapter::OpenAi(o) if o.prompt_cache_key => PromptCache::OpenAiKey,
            BackendAdapter::Anthropic(a) if a.prompt_caching => PromptCache::AnthropicMarkers,
            _ => PromptCache::None,
        },
        pricing: backend.pricing,
        first_byte_timeout: backend.timeouts.first_byte,
        max_response_bytes: backend.max_response_bytes,
        in_flight: old.map_or_else(Arc::default, |(h, _)| h.in_flight.clone()),
        limit,
        max_queue: backend.max_queue,
        waiting: old.map_or_else(Arc::default, |(h, _)| h.waiting.clone()),
        breaker,
        service_tiers: backend.service_tiers.clone(),
        deny_fields: backend.deny_fields.clone(),
    })
}

/// A semaphore the previous config's requests hold, to be resized from
/// `was` permits to `now` when the new config goes live: permits are added
/// at once, or taken out as they come free (a task waits for them), so the
/// requests in flight count against the new limit. (Requests already
/// waiting in a backend's queue are served before the permits owed.)
struct LimitChange {
    limit: Arc<Semaphore>,
    was: usize,
    now: usize,
}

impl LimitChange {
    /// `limit`, kept for the new config, with its resize noted in `changes`.
    fn keep(
        limit: &Arc<Semaphore>,
        was: usize,
        now: usize,
        changes: &mut Vec<LimitChange>,
    ) -> Arc<Semaphore> {
        if was != now {
            changes.push(LimitChange {
                limit: limit.clone(),
                was,
                now,
            });
        }
        limit.clone()
    }

    fn apply(self) {
        let LimitChange { limit, was, now } = self;
        if now > was {
            limit.add_permits(now - was);
        } else {
            let owed = (was - now) - limit.forget_permits(was - now);
            if owed > 0 {
                tokio::spawn(async move {
                    let owed = u32::try_from(owed).unwrap_or(u32::MAX);
                    if let Ok(permits) = limit.acquire_many_owned(owed).await {
                        permits.forget();
                    }
                });
            }
        }
    }
}

/// New clients for a backend's servers (one per replica URL). With `old`
/// (the replicas before a reload), each keeps its predecessor's in-flight
/// count when the number of replicas is unchanged.
fn new_replicas(
    backend: &Backend,
    openai: Option<&switchyard_policies::OpenAiBackend>,
    old: Option<&[ReplicaHandle]>,
) -> anyhow::Result<Vec<ReplicaHandle>> {
    let providers = match openai {
        Some(openai) if openai.replicas.len() > 1 => openai
            .replicas
            .iter()
            .map(|url| {
                let mut one = backend.clone();
                if let BackendAdapter::OpenAi(o) = &mut one.adapter {
                    o.base_url.clone_from(url);
                }
                build_provider(&one)
            })
            .collect::<anyhow::Result<Vec<_>>>()?,
        _ => vec![build_provider(backend)?],
    };
    let old = old.filter(|r| r.len() == providers.len());
    Ok(providers
        .into_iter()
        .enumerate()
        .map(|(i, provider)| ReplicaHandle {
            provider,
            in_flight: old.map_or_else(Arc::default, |r| r[i].in_flight.clone()),
        })
        .collect())
}

/// The client for a backend: its adapter with the API key from the
/// environment.
pub fn build_provider(backend: &Backend) -> anyhow::Result<Arc<dyn Provider>> {
    // Keys come from the environment at start-up; a missing one stops the start.
    let key = |env: &Option<String>| -> anyhow::Result<Option<String>> {
        env.as_ref()
            .map(|var| {
                std::env::var(var).map_err(|_| {
                    anyhow::anyhow!(
                        "backend `{}`: environment variable {var} (its api_key) is not set",
                        backend.name
                    )
                })
            })
            .transpose()
    };
    let failed = |err: AdapterError| anyhow::anyhow!("backend `{}`: {err}", backend.name);
    let link = Link {
        timeouts: backend.timeouts,
        max_response_bytes: backend.max_response_bytes,
        tls: &backend.tls,
    };
    let provider: Arc<dyn Provider> = match &backend.adapter {
        BackendAdapter::Sim(params) => Arc::new(SimBackend::new(params.clone())),
        BackendAdapter::OpenAi(openai) => Arc::new(
            OpenAiClient::new(openai, link, key(&openai.api_key_env)?.as_deref())
                .map_err(failed)?,
        ),
        BackendAdapter::Anthropic(anthropic) => Arc::new(
            AnthropicClient::new(anthropic, link, key(&anthropic.api_key_env)?.as_deref())
                .map_err(failed)?,
        ),
    };
    Ok(provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_limit_resized_by_a_reload_counts_what_is_in_flight() {
        let limit = Arc::new(Semaphore::new(4));
        let held: Vec<_> = (0..3)
            .map(|_| limit.clone().try_acquire_owned().unwrap())
            .collect();
        // Down to 2 with 3 in flight: nothing more may start until two end.
        let mut changes = Vec::new();
        let limit = LimitChange::keep(&limit, 4, 2, &mut changes);
        assert_eq!(
            limit.available_permits(),
            1,
            "nothing changes before the config goes live"
        );
        changes.into_iter().for_each(LimitChange::apply);
        assert_eq!(limit.available_permits(), 0);
        let mut held = held.into_iter();
        drop(held.next());
        tokio::task::yield_now().await;
        assert_eq!(limit.available_permits(), 0, "the freed permit was owed");
        drop(held.next());
        drop(held.next());
        tokio::task::yield_now().await;
        assert_eq!(limit.available_permits(), 2);
        // Up again: added at once.
        let mut changes = Vec::new();
        let limit = LimitChange::keep(&limit, 2, 5, &mut changes);
        changes.into_iter().for_each(LimitChange::apply);
        assert_eq!(limit.available_permits(), 5);
    }
}
