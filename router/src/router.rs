//! The router: model names to routes and backends, and each route's policy
//! compiled from config, ready to decide.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use switchyard_policies::{
    CacheShare, CascadeCheck, Hedge, LatencyBudget, Pricing, Profile, Speculative,
};

use crate::conditions::CompiledCondition;
use crate::decision::{Decision, Reason};
use crate::explain::{Explanation, Workings};
use crate::features::{Features, RequestView};
use crate::latency::{LocalLatency, Shape};
use crate::learned::Predictor;
use crate::output_length::OutputLengths;
use crate::prefix::{LocalPrefixIndex, PrefixChain, PrefixIndex, Tenant};
use crate::speculation::SpeculationStats;
use crate::split::SplitPolicy;
use crate::target_share::ShareTracker;

mod compile;
mod decide;
mod learning;

use learning::LearnedPolicy;

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
        /// Where the rest go: one backend, or dealt by weight.
        easy: SplitPolicy,
        tracker: Arc<dyn ShareTracker>,
        /// Ranks by this predictor's P(fail) instead of the score.
        by: Option<usize>,
    },
    Rules {
        rules: Vec<(CompiledCondition, usize)>,
        needs_embedding: bool,
        /// The predictor `predicted_fail` conditions read.
        predictor: Option<usize>,
    },
    Learned(LearnedPolicy),
    Budgeted {
        candidates: Vec<usize>,
        cheapest: bool,
    },
    Cascade {
        order: Vec<usize>,
        checks: Vec<CascadeCheck>,
        min_mean_logprob: f64,
        /// Predictors its first backend's outcomes train (`learn_from`).
        learners: Vec<usize>,
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
            Policy::TargetShare { hard, easy, .. } => {
                let mut shares = easy.shares();
                shares.sort_by(|a, b| b.1.total_cmp(&a.1));
                shares.into_iter().map(|(b, _)| b).chain([*hard]).collect()
            }
            Policy::Learned(LearnedPolicy { hard, easy, .. }) => vec![*easy, *hard],
            // A rule's conditions say where a request may go (say, private
            // data to a local model): another rule's target is not a
            // candidate, only the route's fallbacks are.
            Policy::Rules { .. } => Vec::new(),
            Policy::Budgeted { candidates, .. } => candidates.clone(),
            Policy::Cascade { order, .. } => order.clone(),
        }
    }

    /// The predictor the policy consults, if any.
    fn predictor(&self) -> Option<usize> {
        match self {
            Policy::TargetShare { by, .. } => *by,
            Policy::Rules { predictor, .. } => *predictor,
            Policy::Learned(learned) => Some(learned.predictor),
            Policy::Cascade { learners, .. } => learners.first().copied(),
            Policy::Split { .. } | Policy::Budgeted { .. } => None,
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Policy::Split { .. } => "split",
            Policy::TargetShare { .. } => "target_share",
            Policy::Rules { .. } => "rules",
            Policy::Cascade { .. } => "cascade",
            Policy::Learned(_) => "learned",
            Policy::Budgeted { cheapest: true, .. } => "cheapest_within_budget",
            Policy::Budgeted {
                cheapest: false, ..
            } => "fastest",
        }
    }
}

pub struct Router {
    backends: Vec<String>,
    models: crate::NameMap<String, Target>,
    /// Wildcard routes (`openai/*`) by prefix (`openai/`), longest first.
    wildcards: Vec<(String, usize)>,
    model_names: Vec<String>,
    routes: Vec<CompiledRoute>,
    header_names: Vec<String>,
    pricing: Vec<Pricing>,
    latency: Arc<LocalLatency>,
    /// How long answers run, per route and profile.
    output_lengths: Arc<OutputLengths>,
    speculation: Arc<SpeculationStats>,
    prefix: Arc<LocalPrefixIndex>,
    /// Each backend's replicas (or their slots) in the prefix index.
    replica_ranges: Vec<std::ops::Range<usize>>,
    slots_per_replica: Vec<usize>,
    /// Whose prefixes each backend's cache is shared by.
    prefix_share: Vec<CacheShare>,
    /// Learned predictors, in the config's order (by name).
    predictors: Vec<Arc<Predictor>>,
    /// Each backend's context window in tokens; 0 while unknown (then every
    /// request is taken to fit). Atomics: a window read from the server
    /// after start-up is set in place.
    context_windows: Vec<AtomicU32>,
    /// Sticky splits' shares per caller, so a session id never picks a tier.
    sticky_shares: crate::sticky_share::StickyShares,
    /// Each split route's requests dealt to its weights.
    interleave: Arc<crate::interleave::Interleave>,
    /// Held by a budget strategy's decision from reading the backends'
    /// queues to reserving its place in one: two requests deciding at
    /// once otherwise both find the same free slot and both take it.
    /// Shared with the next config's router, like the queues it guards.
    budget_decisions: Arc<Mutex<()>>,
}

impl Router {
    /// Waits for the other budget decisions to have reserved their places
    /// (see `budget_decisions`).
    fn wait_for_budget_decisions(&self) -> std::sync::MutexGuard<'_, ()> {
        // The lock guards no data: a panic while it was held left nothing
        // half-changed.
        self.budget_decisions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
        // The largest window among those left out: when none fits, the
        // largest of all (without copying the list for that rare case).
        let mut largest_window = 0;
        seen.retain(|&b| {
            let fits = self.fits(b, features);
            if !fits {
                largest_window = largest_window.max(self.context_window(b).unwrap_or(0));
            }
            fits
        });
        if seen.is_empty() {
            return Err(RouteError::ContextTooLong {
                needed: Self::context_needed(features),
                largest_window,
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

    /// Answer lengths per route and profile, for the gateway to report
    /// each answer's to.
    pub fn output_lengths(&self) -> &Arc<OutputLengths> {
        &self.output_lengths
    }

    fn shape_of(&self, backend: usize, route: Option<usize>, features: &Features) -> Shape {
        self.shape_with_cached(
            route,
            backend,
            features,
            self.expected_cached_tokens(backend, features),
        )
    }

    fn shape_with_cached(
        &self,
        route: Option<usize>,
        backend: usize,
        features: &Features,
        cached: u32,
    ) -> Shape {
        Shape {
            prompt_tokens: features.prompt_tokens,
            cached_tokens: cached,
            output_tokens: self.output_lengths.expect(
                route,
                Some(backend),
                features.profile,
                features.max_tokens,
            ),
            class: features.prompt_class(),
        }
    }

    /// Tokens of this prompt the backend's best replica is thought to hold.
    pub fn expected_cached_tokens(&self, backend: usize, features: &Features) -> u32 {
        features.prefix.as_ref().map_or(0, |chain| {
            self.cached_tokens(backend, chain, features.tenant, features.prompt_tokens)
        })
    }

    /// Tokens of a prompt of `prompt_tokens` with prefix chain `chain` (as
    /// `tenant` sends it) the backend's best replica is thought to hold.
    pub fn cached_tokens(
        &self,
        backend: usize,
        chain: &PrefixChain,
        tenant: Tenant,
        prompt_tokens: u32,
    ) -> u32 {
        let chain = self.chain_for(backend, chain, tenant);
        let blocks = self
            .replicas(backend)
            .map(|replica| self.prefix.cached_blocks(replica, &chain))
            .max()
            .unwrap_or(0);
        chain.tokens_in(blocks, prompt_tokens)
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

    /// The route's strategy, as the config names it.
    pub fn strategy_name(&self, route: usize) -> &'static str {
        self.routes[route].policy.name()
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
        match self.models.get(model) {
            Some(target) => Some(*target),
            None => self.wildcard(model).map(|(route, _)| Target::Route(route)),
        }
    }

    /// The wildcard route a model name no route or backend has falls
    /// under, and the part of the name its `*` stands for
    /// (`openai/gpt-4o-mini` under `openai/*`: `gpt-4o-mini`).
    pub fn wildcard<'m>(&self, model: &'m str) -> Option<(usize, &'m str)> {
        if self.wildcards.is_empty() || self.models.contains_key(model) {
            return None;
        }
        self.wildcards.iter().find_map(|(prefix, route)| {
            let rest = model.strip_prefix(prefix.as_str())?;
            (!rest.is_empty()).then_some((*route, rest))
        })
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

    /// The checks each answer but the last one of a decision must pass: a
    /// cascade's, or a learned route's when it tried the easy backend first.
    pub fn cascade(&self, decision: &Decision) -> Option<(&[CascadeCheck], f64)> {
        match &self.routes[decision.route?].policy {
            Policy::Cascade {
                checks,
                min_mean_logprob,
                ..
            } => Some((checks, *min_mean_logprob)),
            Policy::Learned(learned)
                if !learned.checks.is_empty()
                    && matches!(
                        decision.reason,
                        Reason::LearnedEasy | Reason::LearnedExplore
                    ) =>
            {
                Some((&learned.checks, learned.min_mean_logprob))
            }
            _ => None,
        }
    }

    /// Decides where a request goes. `unit`, uniform in [0, 1), drives the
    /// random choices (a split without a session, target-share ties).
    pub fn decide(&self, view: &RequestView<'_>, unit: f64) -> Result<Decision, RouteError> {
        let mut deciding = None;
        let mut decision = self.decide_inner(view, unit, None, &mut deciding)?;
        self.decide_drafting(&mut decision);
        // Requests a budget strategy decides at the same moment see each
        // other: the choice counts as work ahead on the backend it will be
        // sent to (after a move for its context, or off drafting) from
        // now, not only once admitted, and the next such decision reads
        // the queues only once it is counted (`deciding` holds them till
        // then). Other strategies do not choose by the queue and are
        // spared the cost (a sticky split's move off a slow backend reads
        // it, but reserves nothing).
        if deciding.is_some() {
            let primary = decision.primary();
            crate::latency::LatencyStore::reserve(
                &*self.latency,
                primary,
                &self.shape_of(primary, decision.route, &decision.features),
            );
        }
        drop(deciding);
        decision.upstream_model = self.wildcard(view.model).map(|(_, model)| model.to_owned());
        Ok(decision)
    }

    /// The decision with its workings, without side effects on live state.
    pub fn explain(&self, view: &RequestView<'_>, unit: f64) -> Result<Explanation, RouteError> {
        let mut workings = Workings::default();
        let decision = self.decide_inner(view, unit, Some(&mut workings), &mut None)?;
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
            rules: workings.rules,
            candidates: workings.candidates,
            share_threshold: threshold,
            predictor: route.and_then(|r| r.policy.predictor()).map(|p| {
                format!(
                    "{}@{}",
                    self.predictors[p].name,
                    self.predictors[p].version()
                )
            }),
            features: decision.features,
        })
    }
}
