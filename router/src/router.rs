//! The router: model names to routes and backends, and each route's policy
//! compiled from config, ready to decide.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use switchyard_policies::{
    Backend, BackendAdapter, CacheShare, CascadeCheck, Config, Hedge, LatencyBudget, Pricing,
    Profile, RouteStrategy, Speculative,
};

use crate::budgeted::{Candidate, DEFAULT_EXPECTED_OUTPUT, budget_for, expected_cost, rank};
use crate::conditions::CompiledCondition;
use crate::decision::{Decision, Reason};
use crate::embed::embed;
use crate::explain::{Explanation, RuleTrace};
use crate::features::{Features, RequestView};
use crate::latency::{LatencyHints, LatencyStore, LocalLatency, Prediction};
use crate::prefix::{LocalPrefixIndex, PrefixChain, PrefixIndex, ReplicaCache, Tenant};
use crate::speculation::SpeculationStats;
use crate::split::{SplitPolicy, unit_from_key};
use crate::target_share::{ShareTracker, WindowTracker};

/// What a model name stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Backend(usize),
    Route(usize),
}

/// A routing failure the caller must fix.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteError {
    UnknownModel {
        model: String,
        available: Vec<String>,
    },
    /// No backend the request could go to has a context window that holds
    /// its prompt and requested output.
    ContextTooLong {
        /// Prompt tokens (estimated) and the output asked for.
        needed: u32,
        /// The largest window among the backends it could go to.
        largest_window: u32,
    },
}

struct CompiledRoute {
    /// Shared: every request record and ledger row of the route names it.
    name: Arc<str>,
    profile: Option<Profile>,
    policy: Policy,
    fallbacks: Vec<usize>,
    budget: Option<LatencyBudget>,
    retries: u32,
    hedge: Option<Hedge>,
    speculative: Option<CompiledSpeculative>,
}

struct CompiledSpeculative {
    settings: Speculative,
    /// The draft-less backend, by index.
    instead: Option<usize>,
}

enum Policy {
    Split {
        split: SplitPolicy,
        sticky: bool,
    },
    TargetShare {
        hard: usize,
        easy: usize,
        tracker: Arc<dyn ShareTracker>,
    },
    Rules {
        rules: Vec<(CompiledCondition, usize)>,
        needs_embedding: bool,
    },
    Budgeted {
        candidates: Vec<usize>,
        cheapest: bool,
    },
    Cascade {
        order: Vec<usize>,
        checks: Vec<CascadeCheck>,
        min_mean_logprob: f64,
    },
}

impl Policy {
    /// Every backend the policy may choose, most likely first.
    fn members(&self) -> Vec<usize> {
        match self {
            Policy::Split { split, .. } => {
                let mut shares = split.shares();
                shares.sort_by(|a, b| b.1.total_cmp(&a.1));
                shares.into_iter().map(|(backend, _)| backend).collect()
            }
            Policy::TargetShare { hard, easy, .. } => vec![*easy, *hard],
            // A rule's conditions say where a request may go (say, private
            // data to a local model): another rule's target is not a
            // candidate, only the route's fallbacks are.
            Policy::Rules { .. } => Vec::new(),
            Policy::Budgeted { candidates, .. } => candidates.clone(),
            Policy::Cascade { order, .. } => order.clone(),
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Policy::Split { .. } => "split",
            Policy::TargetShare { .. } => "target_share",
            Policy::Rules { .. } => "rules",
            Policy::Cascade { .. } => "cascade",
            Policy::Budgeted { cheapest: true, .. } => "cheapest_within_budget",
            Policy::Budgeted {
                cheapest: false, ..
            } => "fastest",
        }
    }
}

pub struct Router {
    backends: Vec<String>,
    models: HashMap<String, Target>,
    model_names: Vec<String>,
    routes: Vec<CompiledRoute>,
    header_names: Vec<String>,
    pricing: Vec<Pricing>,
    latency: Arc<LocalLatency>,
    speculation: Arc<SpeculationStats>,
    prefix: Arc<LocalPrefixIndex>,
    /// Each backend's replicas (or their slots) in the prefix index.
    replica_ranges: Vec<std::ops::Range<usize>>,
    slots_per_replica: Vec<usize>,
    /// Whose prefixes each backend's cache is shared by.
    prefix_share: Vec<CacheShare>,
    /// Each backend's context window in tokens; 0 while unknown (then every
    /// request is taken to fit). Atomics: a window read from the server
    /// after start-up is set in place.
    context_windows: Vec<AtomicU32>,
}

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
        let mut models: HashMap<String, Target> = backends
            .iter()
            .enumerate()
            .map(|(i, b)| (b.clone(), Target::Backend(i)))
            .collect();
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
                } => Policy::TargetShare {
                    hard: at(hard),
                    easy: at(easy),
                    tracker: previous
                        .and_then(|(router, config)| {
                            router.same_share_tracker(config, &route.name, *share, *window)
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
                    Policy::Rules {
                        rules,
                        needs_embedding,
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
                },
            };
            let number = routes.len();
            for name in std::iter::once(&route.name).chain(&route.aliases) {
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
        let mut latency = LocalLatency::new(config.backends.values().map(hints_of));
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
            model_names: config.model_names(),
            routes,
            header_names,
            pricing: config.backends.values().map(|b| b.pricing).collect(),
            latency: Arc::new(latency),
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
        }
    }

    /// Route `name`'s target-share window, when `config` (this router's)
    /// gave that route the same share and window size.
    fn same_share_tracker(
        &self,
        config: &Config,
        name: &str,
        share: f64,
        window: usize,
    ) -> Option<Arc<dyn ShareTracker>> {
        let number = config.routes.keys().position(|r| r == name)?;
        let unchanged = matches!(
            config.routes.get(name).map(|r| &r.strategy),
            Some(RouteStrategy::TargetShare { share: s, window: w, .. }) if *s == share && *w == window
        );
        match &self.routes.get(number)?.policy {
            Policy::TargetShare { tracker, .. } if unchanged => Some(tracker.clone()),
            _ => None,
        }
    }

    /// A backend's context window, when known.
    pub fn context_window(&self, backend: usize) -> Option<u32> {
        self.context_windows
            .get(backend)
            .map(|w| w.load(Ordering::Relaxed))
            .filter(|&w| w > 0)
    }

    /// Sets a backend's context window as its server reported it.
    pub fn set_context_window(&self, backend: usize, tokens: u32) {
        if let Some(window) = self.context_windows.get(backend) {
            window.store(tokens, Ordering::Relaxed);
        }
    }

    /// Tokens a request needs in a context window: its prompt and the
    /// output it asks for (at least one token).
    fn context_needed(features: &Features) -> u32 {
        features
            .sequence_tokens
            .saturating_add(features.max_tokens.unwrap_or(0).max(1))
    }

    /// Whether a backend's context window holds the request (an unknown
    /// window is taken to).
    pub fn fits(&self, backend: usize, features: &Features) -> bool {
        self.context_window(backend)
            .is_none_or(|window| Self::context_needed(features) <= window)
    }

    /// The targets that can hold the request, in order; when the policy's
    /// own choice cannot, the other backends the policy could have chosen
    /// come before the fallbacks (`moved` says the first choice changed).
    fn fitting(
        &self,
        chosen: Vec<usize>,
        members: &[usize],
        fallbacks: &[usize],
        features: &Features,
    ) -> Result<(Vec<usize>, bool), RouteError> {
        let first = chosen.first().copied();
        let mut targets = chosen;
        if first.is_some_and(|b| !self.fits(b, features)) {
            targets.extend(members.iter().copied());
        }
        targets.extend(fallbacks.iter().copied());
        let mut seen = Vec::with_capacity(targets.len());
        for backend in targets {
            if !seen.contains(&backend) {
                seen.push(backend);
            }
        }
        let considered = seen.clone();
        seen.retain(|&b| self.fits(b, features));
        if seen.is_empty() {
            return Err(RouteError::ContextTooLong {
                needed: Self::context_needed(features),
                largest_window: considered
                    .iter()
                    .filter_map(|&b| self.context_window(b))
                    .max()
                    .unwrap_or(0),
            });
        }
        let moved = seen.first().copied() != first;
        Ok((seen, moved))
    }

    /// A prompt's prefix chain as `backend`'s cache keys it for `tenant`:
    /// salted unless the backend shares prefixes with everyone.
    pub fn chain_for<'c>(
        &self,
        backend: usize,
        chain: &'c PrefixChain,
        tenant: Tenant,
    ) -> Cow<'c, PrefixChain> {
        chain.salted(self.prefix_salt(backend, tenant))
    }

    /// The salt of `tenant`'s prefixes on `backend` (0: shared by all).
    pub fn prefix_salt(&self, backend: usize, tenant: Tenant) -> u64 {
        let share = self.prefix_share.get(backend).copied().unwrap_or_default();
        tenant.salt(share)
    }

    /// The latency models, for the gateway to report each call to.
    pub fn latency(&self) -> &Arc<LocalLatency> {
        &self.latency
    }

    /// Tokens of this prompt the backend's best replica is thought to hold.
    pub fn expected_cached_tokens(&self, backend: usize, features: &Features) -> u32 {
        let Some(chain) = &features.prefix else {
            return 0;
        };
        let chain = self.chain_for(backend, chain, features.tenant);
        let blocks = self
            .replicas(backend)
            .map(|replica| self.prefix.cached_blocks(replica, &chain))
            .max()
            .unwrap_or(0);
        chain.tokens_in(blocks, features.prompt_tokens)
    }

    /// The prefix index: what each replica holds.
    pub fn prefix_index(&self) -> &Arc<LocalPrefixIndex> {
        &self.prefix
    }

    /// A backend's entries in the prefix index: its replicas, each as
    /// [`Router::slots_per_replica`] consecutive slots.
    pub fn replicas(&self, backend: usize) -> std::ops::Range<usize> {
        self.replica_ranges.get(backend).cloned().unwrap_or(0..0)
    }

    /// Slots per replica of a backend in the prefix index (1 unless it is a
    /// llama.cpp backend that declares `slots`).
    pub fn slots_per_replica(&self, backend: usize) -> usize {
        self.slots_per_replica.get(backend).copied().unwrap_or(1)
    }

    /// Speculative-decoding acceptance, per backend and prompt class.
    pub fn speculation(&self) -> &Arc<SpeculationStats> {
        &self.speculation
    }

    /// The route's speculative-decoding settings, if it has any.
    pub fn speculative(&self, route: usize) -> Option<&Speculative> {
        self.routes[route].speculative.as_ref().map(|s| &s.settings)
    }

    /// Retries of a failed backend on this route (1 for backends named directly).
    pub fn retries(&self, route: Option<usize>) -> u32 {
        route.map_or(1, |r| self.routes[r].retries)
    }

    /// The route's hedging, if on.
    pub fn hedge(&self, route: usize) -> Option<Hedge> {
        self.routes[route].hedge
    }

    /// Backend names, by index.
    pub fn backends(&self) -> &[String] {
        &self.backends
    }

    pub fn route_name(&self, route: usize) -> &str {
        &self.routes[route].name
    }

    /// The route's name as a shared string, for records that keep it.
    pub fn shared_route_name(&self, route: usize) -> Arc<str> {
        self.routes[route].name.clone()
    }

    /// Every model name a caller may use, routes first.
    pub fn model_names(&self) -> &[String] {
        &self.model_names
    }

    pub fn target(&self, model: &str) -> Option<Target> {
        self.models.get(model).copied()
    }

    /// Request headers some rule reads; the gateway copies only these into
    /// the request view.
    pub fn header_names(&self) -> &[String] {
        &self.header_names
    }

    /// Rule conditions of the route `model` names, if it is a rules route.
    fn rule_conditions(&self, model: &str) -> &[(CompiledCondition, usize)] {
        match self.target(model) {
            Some(Target::Route(r)) => match &self.routes[r].policy {
                Policy::Rules { rules, .. } => rules,
                _ => &[],
            },
            _ => &[],
        }
    }

    /// Encoder backends whose embedding of the request the route `model`
    /// names needs (for `similar_to` with an `encoder`), without repeats.
    pub fn encoders_for(&self, model: &str) -> Vec<usize> {
        let mut encoders: Vec<usize> = self
            .rule_conditions(model)
            .iter()
            .filter_map(|(c, _)| c.encoder())
            .collect();
        encoders.sort_unstable();
        encoders.dedup();
        encoders
    }

    /// Example prompts of that route still to be embedded by an encoder:
    /// `(rule, encoder backend, examples)`.
    pub fn missing_examples(&self, model: &str) -> Vec<(usize, usize, &[String])> {
        self.rule_conditions(model)
            .iter()
            .enumerate()
            .filter_map(|(i, (c, _))| Some((i, c.encoder()?, c.missing_examples()?)))
            .collect()
    }

    /// Stores an encoder's vectors for a rule's examples (see `missing_examples`).
    pub fn provide_examples(&self, model: &str, rule: usize, vectors: Vec<Vec<f32>>) {
        if let Some((condition, _)) = self.rule_conditions(model).get(rule) {
            condition.provide_examples(vectors);
        }
    }

    /// The cascade checks of a route, when it is a cascade.
    pub fn cascade(&self, route: usize) -> Option<(&[CascadeCheck], f64)> {
        match &self.routes[route].policy {
            Policy::Cascade {
                checks,
                min_mean_logprob,
                ..
            } => Some((checks, *min_mean_logprob)),
            _ => None,
        }
    }

    /// Decides where a request goes. `unit`, uniform in [0, 1), drives the
    /// random choices (a split without a session, target-share ties).
    pub fn decide(&self, view: &RequestView<'_>, unit: f64) -> Result<Decision, RouteError> {
        let mut decision = self.decide_inner(view, unit, None)?;
        self.decide_drafting(&mut decision);
        Ok(decision)
    }

    /// On routes with speculative settings: whether this request drafts
    /// (not for a class the route excludes, nor, apart from re-probes, for
    /// one whose acceptance on the chosen backend fell below the floor),
    /// and when it does not, the route's draft-less backend instead.
    fn decide_drafting(&self, decision: &mut Decision) {
        let Some(route) = decision.route else { return };
        let Some(spec) = &self.routes[route].speculative else {
            return;
        };
        let class = decision.features.prompt_class();
        let primary = decision.primary();
        let drafting = !spec.settings.disable_for.contains(&class)
            && spec
                .settings
                .min_acceptance
                .is_none_or(|floor| self.speculation.should_draft(primary, class, floor));
        decision.drafting = Some(drafting);
        if let Some(instead) = spec.instead.filter(|&b| !drafting && b != primary) {
            decision.targets.retain(|&b| b != instead);
            decision.targets.insert(0, instead);
            decision.reason = Reason::DraftingOff;
            decision.predicted_ttft_ms = self.predict(instead, &decision.features).ttft_p50_ms;
        }
    }

    fn decide_inner(
        &self,
        view: &RequestView<'_>,
        unit: f64,
        mut trace: Option<&mut Vec<RuleTrace>>,
    ) -> Result<Decision, RouteError> {
        let number = match self.target(view.model) {
            Some(Target::Route(number)) => number,
            Some(Target::Backend(backend)) => {
                let features = Features::of(view, None);
                // Named directly: nothing else to go to.
                self.fitting(vec![backend], &[], &[], &features)?;
                return Ok(Decision {
                    route: None,
                    targets: vec![backend],
                    reason: Reason::Direct,
                    rule: None,
                    predicted_ttft_ms: self.predict(backend, &features).ttft_p50_ms,
                    features,
                    drafting: None,
                });
            }
            None => {
                return Err(RouteError::UnknownModel {
                    model: view.model.to_owned(),
                    available: self.model_names.clone(),
                });
            }
        };
        let route = &self.routes[number];
        let features = Features::of(view, route.profile);
        let mut rule = None;
        let (targets, reason) = match &route.policy {
            Policy::Split { split, sticky } => match view.session.filter(|_| *sticky) {
                Some(session) => (
                    vec![split.pick(unit_from_key(session))],
                    Reason::SplitSticky,
                ),
                None => (vec![split.pick(unit)], Reason::Split),
            },
            Policy::TargetShare {
                hard,
                easy,
                tracker,
            } => {
                let is_hard = match trace {
                    // Explaining must not move the threshold.
                    Some(_) => features.score > tracker.threshold(),
                    None => tracker.is_hard(features.score, unit),
                };
                if is_hard {
                    (vec![*hard], Reason::TargetShareHard)
                } else {
                    (vec![*easy], Reason::TargetShareEasy)
                }
            }
            Policy::Rules {
                rules,
                needs_embedding,
            } => {
                let embedding = needs_embedding.then(|| embed(view.last_user_text));
                let mut chosen = None;
                for (i, (condition, to)) in rules.iter().enumerate() {
                    let matched = condition.matches(view, &features, embedding.as_deref());
                    if let Some(trace) = trace.as_deref_mut() {
                        let similarity = condition
                            .condition
                            .similar_to
                            .is_some()
                            .then(|| condition.best_similarity(view, embedding.as_deref()));
                        trace.push(RuleTrace {
                            index: i,
                            to: self.backends[*to].clone(),
                            matched,
                            similarity,
                        });
                    }
                    if matched && chosen.is_none() {
                        chosen = Some((i, *to));
                        if trace.is_none() {
                            break;
                        }
                    }
                }
                // Validation makes the last rule match everything.
                let (i, to) = chosen.unwrap_or((rules.len() - 1, rules[rules.len() - 1].1));
                rule = Some(i);
                let reason = if rules[i].0.condition.is_empty() {
                    Reason::RuleDefault
                } else {
                    Reason::Rule
                };
                (vec![to], reason)
            }
            Policy::Cascade { order, .. } => (order.clone(), Reason::Cascade),
            Policy::Budgeted {
                candidates,
                cheapest,
            } => {
                let budget = budget_for(route.budget, features.profile, features.prompt_tokens);
                let output = expected_output(&features);
                let candidates = candidates
                    .iter()
                    .map(|&backend| {
                        let cached = self.expected_cached_tokens(backend, &features);
                        let prediction = self.predict_with_cached(backend, &features, cached);
                        let cost_usd = expected_cost(
                            &self.pricing[backend],
                            (features.prompt_tokens, cached),
                            output,
                            &prediction,
                        );
                        Candidate {
                            backend,
                            prediction,
                            cost_usd,
                        }
                    })
                    .collect();
                rank(candidates, budget, *cheapest)
            }
        };
        let (targets, moved) = self.fitting(
            targets,
            &route.policy.members(),
            &route.fallbacks,
            &features,
        )?;
        let reason = if moved { Reason::ContextFit } else { reason };
        Ok(Decision {
            route: Some(number),
            predicted_ttft_ms: self.predict(targets[0], &features).ttft_p50_ms,
            targets,
            reason,
            rule,
            features,
            drafting: None,
        })
    }

    fn predict(&self, backend: usize, features: &Features) -> Prediction {
        let cached = self.expected_cached_tokens(backend, features);
        self.predict_with_cached(backend, features, cached)
    }

    /// The prediction when `cached` prompt tokens are expected cached
    /// (for callers that already looked them up in the prefix index).
    fn predict_with_cached(&self, backend: usize, features: &Features, cached: u32) -> Prediction {
        self.latency.predict(
            backend,
            features.prompt_tokens,
            cached,
            expected_output(features),
            features.prompt_class(),
        )
    }

    /// The decision with its workings, without side effects on live state.
    pub fn explain(&self, view: &RequestView<'_>, unit: f64) -> Result<Explanation, RouteError> {
        let mut rules = Vec::new();
        let decision = self.decide_inner(view, unit, Some(&mut rules))?;
        let route = decision.route.map(|r| &self.routes[r]);
        let threshold = route.and_then(|r| match &r.policy {
            Policy::TargetShare { tracker, .. } => Some(tracker.threshold()),
            _ => None,
        });
        Ok(Explanation {
            model: view.model.to_owned(),
            route: route.map(|r| r.name.to_string()),
            strategy: route.map_or("direct", |r| r.policy.name()),
            backend: self.backends[decision.primary()].clone(),
            targets: decision
                .targets
                .iter()
                .map(|t| self.backends[*t].clone())
                .collect(),
            reason: decision.reason,
            rule: decision.rule,
            rules,
            share_threshold: threshold,
            features: decision.features,
        })
    }
}

/// Output tokens a request is expected to produce: its limit, or a typical
/// reply's length.
fn expected_output(features: &Features) -> u32 {
    features
        .max_tokens
        .unwrap_or(DEFAULT_EXPECTED_OUTPUT)
        .min(4 * DEFAULT_EXPECTED_OUTPUT)
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
        concurrency: config.concurrency.unwrap_or(hints.concurrency),
    }
}
