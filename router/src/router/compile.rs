//! Building a router from a config: every route's policy compiled, and
//! what a previous router learned carried over on a reload.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use switchyard_policies::{Backend, BackendAdapter, Config, RouteStrategy};

use super::{CompiledRoute, CompiledSpeculative, LearnedPolicy, Policy, Router, Target};
use crate::conditions::CompiledCondition;
use crate::latency::{LatencyHints, LocalLatency};
use crate::learned::{Predictor, Weights};
use crate::output_length::OutputLengths;
use crate::prefix::{LocalPrefixIndex, ReplicaCache};
use crate::speculation::SpeculationStats;
use crate::split::SplitPolicy;
use crate::target_share::{ShareTracker, WindowTracker};

impl Router {
    /// Compiles every route of a validated config. Backends are numbered in
    /// the config's order (by name), which the gateway follows too.
    pub fn new(config: &Config) -> Self {
        Self::carrying(config, None)
    }

    /// Compiles `config`, keeping what `previous` (the router of the config
    /// it replaces, and that config) learned of every backend and route
    /// that is still there: latency models, speculative acceptance, the
    /// prefix index of replicas whose cache is unchanged, context windows
    /// read from servers, and target-share windows whose share and size
    /// are unchanged. Requests still running on `previous` keep feeding the
    /// same state.
    pub fn carrying(config: &Config, previous: Option<(&Router, &Config)>) -> Self {
        let backends: Vec<String> = config.backends.keys().cloned().collect();
        let index: HashMap<&str, usize> = backends
            .iter()
            .enumerate()
            .map(|(i, b)| (b.as_str(), i))
            .collect();
        // Validation guarantees every name a route uses is a backend.
        let at = |name: &str| index.get(name).copied().unwrap_or(0);
        let mut models: crate::NameMap<String, Target> = backends
            .iter()
            .enumerate()
            .map(|(i, b)| (b.clone(), Target::Backend(i)))
            .collect();
        let mut wildcards: Vec<(String, usize)> = Vec::new();
        let predictors = compile_predictors(config, &at, previous.map(|(router, _)| router));
        // Validation guarantees every predictor a route names exists.
        let predictor_at = |name: &str| predictors.iter().position(|p| p.name == name).unwrap_or(0);
        // The predictors that learn from a route's first answers.
        let learners_of = |route: &str, own: Option<usize>| -> Vec<usize> {
            let mut learners: Vec<usize> = own.into_iter().collect();
            for (i, p) in config.predictors.values().enumerate() {
                if p.learn_from.iter().any(|r| r == route) && !learners.contains(&i) {
                    learners.push(i);
                }
            }
            learners
        };
        let mut routes = Vec::with_capacity(config.routes.len());
        let mut header_names = Vec::new();
        for route in config.routes.values() {
            let policy = match &route.strategy {
                RouteStrategy::Split { weights, sticky } => Policy::Split {
                    split: SplitPolicy::new(weights.iter().map(|(b, w)| (at(b), *w)))
                        .unwrap_or_else(|| SplitPolicy::single(at(&weights[0].0))),
                    sticky: *sticky,
                },
                RouteStrategy::TargetShare {
                    hard,
                    easy,
                    share,
                    window,
                    by,
                } => Policy::TargetShare {
                    by: by.as_deref().map(predictor_at),
                    hard: at(hard),
                    easy: SplitPolicy::new(easy.iter().map(|(b, w)| (at(b), *w)))
                        .unwrap_or_else(|| SplitPolicy::single(at(&easy[0].0))),
                    tracker: previous
                        .and_then(|(router, config)| {
                            router.same_share_tracker(config, &route.name, *share, *window, by)
                        })
                        .unwrap_or_else(|| Arc::new(WindowTracker::new(*share, *window))),
                },
                RouteStrategy::Rules { rules } => {
                    let rules: Vec<(CompiledCondition, usize)> = rules
                        .iter()
                        .map(|r| {
                            let encoder = r
                                .when
                                .similar_to
                                .as_ref()
                                .and_then(|s| s.encoder.as_deref())
                                .map(at);
                            (CompiledCondition::new(r.when.clone(), encoder), at(&r.to))
                        })
                        .collect();
                    header_names.extend(
                        rules
                            .iter()
                            .filter_map(|(c, _)| c.condition.header.as_ref())
                            .map(|h| h.name.clone()),
                    );
                    let needs_embedding = rules.iter().any(|(c, _)| c.needs_embedding());
                    let predictor = rules
                        .iter()
                        .find_map(|(c, _)| c.condition.predicted_fail.as_ref())
                        .map(|p| predictor_at(&p.predictor));
                    Policy::Rules {
                        rules,
                        needs_embedding,
                        predictor,
                    }
                }
                RouteStrategy::CheapestWithinBudget { candidates } => Policy::Budgeted {
                    candidates: candidates.iter().map(|b| at(b)).collect(),
                    cheapest: true,
                },
                RouteStrategy::Fastest { candidates } => Policy::Budgeted {
                    candidates: candidates.iter().map(|b| at(b)).collect(),
                    cheapest: false,
                },
                RouteStrategy::Cascade {
                    order,
                    checks,
                    min_mean_logprob,
                } => Policy::Cascade {
                    order: order.iter().map(|b| at(b)).collect(),
                    checks: checks.clone(),
                    min_mean_logprob: *min_mean_logprob,
                    learners: learners_of(&route.name, None),
                },
                RouteStrategy::Learned {
                    predictor,
                    threshold,
                    easy,
                    hard,
                    checks,
                    min_mean_logprob,
                    explore,
                } => Policy::Learned(LearnedPolicy {
                    predictor: predictor_at(predictor),
                    threshold: *threshold,
                    easy: at(easy),
                    hard: at(hard),
                    checks: checks.clone(),
                    min_mean_logprob: *min_mean_logprob,
                    explore: *explore,
                    learners: learners_of(&route.name, Some(predictor_at(predictor))),
                }),
            };
            let number = routes.len();
            match route.name.strip_suffix('*') {
                // `openai/*`: every name under `openai/`, longest prefix first.
                Some(prefix) => wildcards.push((prefix.to_owned(), number)),
                None => {
                    models.insert(route.name.clone(), Target::Route(number));
                }
            }
            for name in &route.aliases {
                models.insert(name.clone(), Target::Route(number));
            }
            routes.push(CompiledRoute {
                name: Arc::from(route.name.as_str()),
                profile: route.profile,
                policy,
                fallbacks: route.fallbacks.iter().map(|b| at(b)).collect(),
                budget: route.budget,
                retries: route.retries,
                hedge: route.hedge,
                speculative: route.speculative.as_ref().map(|s| CompiledSpeculative {
                    settings: s.clone(),
                    instead: s.instead.as_deref().map(at),
                }),
            });
        }
        header_names.sort();
        header_names.dedup();
        let mut latency = LocalLatency::new(
            config
                .backends
                .values()
                .map(|b| (hints_of(b), b.hardware.clone())),
        );
        let mut speculation = SpeculationStats::new(config.backends.len());
        // One index entry per replica, or per slot of each replica where
        // a llama.cpp backend declares its slots (each slot holds its own
        // prompt, and the gateway picks the slot).
        let mut replica_ranges = Vec::new();
        let mut slots_per_replica = Vec::new();
        let mut caches = Vec::new();
        for backend in config.backends.values() {
            let (replicas, slots) = match &backend.adapter {
                BackendAdapter::OpenAi(openai) => (
                    openai.replicas.len().max(1),
                    openai.slots.map_or(1, |s| s.max(1) as usize),
                ),
                _ => (1, 1),
            };
            let cache = ReplicaCache {
                kv_tokens: backend.prefix_cache.kv_tokens / slots as u64,
                ttl: backend.prefix_cache.ttl,
            };
            let count = replicas * slots;
            replica_ranges.push(caches.len()..caches.len() + count);
            slots_per_replica.push(slots);
            caches.extend(std::iter::repeat_n(cache, count));
        }
        let mut prefix = LocalPrefixIndex::new(caches);
        let context_windows: Vec<AtomicU32> = config
            .backends
            .values()
            .map(|b| AtomicU32::new(b.context_window.unwrap_or(0)))
            .collect();
        let output_lengths = OutputLengths::new(routes.len(), backends.len());
        if let Some((old, _)) = previous {
            // Answer lengths are the route's traffic's: kept by route name,
            // and each backend's own while the backends are the same.
            let same_backends = old.backends == backends;
            for (mine, route) in routes.iter().enumerate() {
                if let Some(theirs) = old.routes.iter().position(|r| r.name == route.name) {
                    output_lengths.adopt(
                        Some(mine),
                        &old.output_lengths,
                        Some(theirs),
                        same_backends,
                    );
                }
            }
            output_lengths.adopt(None, &old.output_lengths, None, same_backends);
        }
        if let Some((old, old_config)) = previous {
            for (mine, backend) in config.backends.values().enumerate() {
                let Some(theirs) = old.backends.iter().position(|b| *b == backend.name) else {
                    continue;
                };
                // What was learned of other servers, or of another model,
                // says nothing of these.
                let Some(was) = old_config
                    .backends
                    .get(&backend.name)
                    .filter(|was| was.same_server(backend))
                else {
                    continue;
                };
                // New hints are the operator's word on the backend: its
                // model starts from them afresh.
                if hints_of(was) == hints_of(backend) {
                    latency.adopt(mine, &old.latency, theirs);
                }
                speculation.adopt(mine, &old.speculation, theirs);
                // A window read from the server (not one the old config
                // set) stays until it is read again.
                if backend.context_window.is_none() && was.context_window.is_none() {
                    context_windows[mine]
                        .store(old.context_window(theirs).unwrap_or(0), Ordering::Relaxed);
                }
                let (range, old_range) = (&replica_ranges[mine], &old.replica_ranges[theirs]);
                if range.len() == old_range.len() {
                    for (id, old_id) in range.clone().zip(old_range.clone()) {
                        prefix.adopt(id, &old.prefix, old_id);
                    }
                }
            }
        }
        Router {
            backends,
            models,
            wildcards: {
                wildcards.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
                wildcards
            },
            model_names: config.model_names(),
            routes,
            header_names,
            pricing: config.backends.values().map(|b| b.pricing).collect(),
            latency: Arc::new(latency),
            output_lengths: Arc::new(output_lengths),
            speculation: Arc::new(speculation),
            prefix: Arc::new(prefix),
            replica_ranges,
            slots_per_replica,
            prefix_share: config
                .backends
                .values()
                .map(|b| b.prefix_cache.share)
                .collect(),
            context_windows,
            sticky_shares: Default::default(),
            interleave: previous.map_or_else(Default::default, |(old, _)| old.interleave.clone()),
            budget_decisions: previous
                .map_or_else(Default::default, |(old, _)| old.budget_decisions.clone()),
            predictors,
        }
    }

    /// Route `name`'s target-share window, when `config` (this router's)
    /// gave that route the same share, window size and ranking (a window
    /// of complexity scores says nothing of predicted failures).
    fn same_share_tracker(
        &self,
        config: &Config,
        name: &str,
        share: f64,
        window: usize,
        by: &Option<String>,
    ) -> Option<Arc<dyn ShareTracker>> {
        let number = config.routes.keys().position(|r| r == name)?;
        let unchanged = matches!(
            config.routes.get(name).map(|r| &r.strategy),
            Some(RouteStrategy::TargetShare { share: s, window: w, by: b, .. })
                if *s == share && *w == window && b == by
        );
        match &self.routes.get(number)?.policy {
            Policy::TargetShare { tracker, .. } if unchanged => Some(tracker.clone()),
            _ => None,
        }
    }
}

/// Every predictor of the config, from its weights file (zeros without
/// one). One whose starting weights and settings are unchanged since
/// `previous` is kept, with what it learned online.
fn compile_predictors(
    config: &Config,
    at: &dyn Fn(&str) -> usize,
    previous: Option<&Router>,
) -> Vec<Arc<Predictor>> {
    config
        .predictors
        .values()
        .map(|p| {
            // The caller checked the file when it read it.
            let weights = p
                .weights_text
                .as_deref()
                .and_then(|text| Weights::from_json(text).ok())
                .unwrap_or_default();
            let backend = at(&p.backend);
            previous
                .and_then(|old| old.predictors.iter().find(|o| o.name == p.name))
                .filter(|old| old.same_start(backend, &weights, p.learning_rate))
                .cloned()
                .unwrap_or_else(|| {
                    Arc::new(Predictor::new(&p.name, backend, weights, p.learning_rate))
                })
        })
        .collect()
}

/// A backend's starting latency figures: its config hints, else (for a
/// simulated backend) its simulator parameters, else defaults.
fn hints_of(backend: &Backend) -> LatencyHints {
    let mut hints = LatencyHints::default();
    if let BackendAdapter::Sim(sim) = &backend.adapter {
        hints = LatencyHints {
            base_ttft: sim.base_ttft,
            prefill_tokens_per_s: sim.prefill_tokens_per_s,
            decode_tokens_per_s: sim.decode_tokens_per_s,
            concurrency: u32::try_from(sim.max_concurrency).unwrap_or(u32::MAX),
            concurrency_known: true,
        };
    }
    let config = &backend.latency;
    LatencyHints {
        base_ttft: config.ttft.unwrap_or(hints.base_ttft),
        prefill_tokens_per_s: config
            .prefill_tokens_per_s
            .unwrap_or(hints.prefill_tokens_per_s),
        decode_tokens_per_s: config
            .decode_tokens_per_s
            .unwrap_or(hints.decode_tokens_per_s),
        // The gateway's own limit on the backend caps what it serves at
        // once for this gateway's requests.
        concurrency: config.concurrency.unwrap_or(hints.concurrency).min(
            backend
                .max_concurrency
                .map_or(u32::MAX, |n| u32::try_from(n).unwrap_or(u32::MAX)),
        ),
        // A cloud API serves as many as it is sent: only a server of the
        // operator's own is held to what it has shown it serves.
        concurrency_known: hints.concurrency_known
            || config.concurrency.is_some()
            || backend.max_concurrency.is_some()
            || !backend.local,
    }
}
