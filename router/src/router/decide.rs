//! Deciding: a route's policy applied to one request's features, within
//! the backends that fit its context and budget, then speculative drafting
//! and stickiness.

use switchyard_policies::LatencyBudget;

use super::{Policy, RouteError, Router, Target};
use crate::budgeted::{Candidate, budget_for, candidate_traces, expected_cost, meets, rank};
use crate::decision::{Decision, Reason};
use crate::embed::embed;
use crate::explain::{CandidateTrace, RuleTrace, Workings};
use crate::features::{Features, RequestView};
use crate::latency::{LatencyStore, Prediction};
use crate::split::unit_from_key;

impl Router {
    /// On routes with speculative settings: whether this request drafts
    /// (not for a class the route excludes, nor, apart from re-probes, for
    /// one whose acceptance on the chosen backend fell below the floor),
    /// and when it does not, the route's draft-less backend instead.
    pub(super) fn decide_drafting(&self, decision: &mut Decision) {
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
            (decision.predicted_ttft_ms, decision.expected_cached_tokens) =
                self.first_prediction(instead, decision.route, &decision.features);
        }
    }

    /// The decision; a budget strategy's (not an explanation's) leaves
    /// the lock on budget decisions in `deciding`, for the caller to hold
    /// until its choice is reserved.
    pub(super) fn decide_inner<'s>(
        &'s self,
        view: &RequestView<'_>,
        unit: f64,
        mut trace: Option<&mut Workings>,
        deciding: &mut Option<std::sync::MutexGuard<'s, ()>>,
    ) -> Result<Decision, RouteError> {
        let number = match self.target(view.model) {
            Some(Target::Route(number)) => number,
            Some(Target::Backend(backend)) => {
                let features = Features::of(view, None);
                // Named directly: nothing else to go to.
                self.fitting(vec![backend], &[], &[], &features)?;
                let (predicted_ttft_ms, expected_cached_tokens) =
                    self.first_prediction(backend, None, &features);
                return Ok(Decision {
                    route: None,
                    targets: vec![backend],
                    reason: Reason::Direct,
                    rule: None,
                    predicted_ttft_ms,
                    expected_cached_tokens,
                    features,
                    drafting: None,
                    learning: None,
                    upstream_model: None,
                    local_only: false,
                    sensitive: None,
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
        let mut features = Features::of(view, route.profile);
        let mut rule = None;
        let mut learning = None;
        let (targets, reason) = match &route.policy {
            Policy::Split { split, sticky } => match view.session.filter(|_| *sticky) {
                Some(session) => {
                    let stuck = split.pick(unit_from_key(session));
                    let budget = budget_for(route.budget, features.profile, features.prompt_tokens);
                    match self.unstick(stuck, &route.policy, budget, number, &features) {
                        Some(moved) => {
                            if trace.is_none() {
                                self.interleave.record(&route.name, split, moved);
                            }
                            (vec![moved], Reason::StickyMoved)
                        }
                        // Explaining must not count as a request.
                        None if trace.is_some() => {
                            match self.interleave.deal(&route.name, split, Some(stuck), false) {
                                (kept, false) => (vec![kept], Reason::SplitSticky),
                                (moved, true) => (vec![moved], Reason::StickyShare),
                            }
                        }
                        None => {
                            // The caller's own share first (a session id is
                            // the caller's to choose), then the route's.
                            let (held, moved) = self.sticky_shares.choose(
                                number,
                                view.key.unwrap_or(""),
                                split,
                                stuck,
                            );
                            match self.interleave.deal(&route.name, split, Some(held), true) {
                                (kept, false) if !moved => (vec![kept], Reason::SplitSticky),
                                (dealt, _) => (vec![dealt], Reason::StickyShare),
                            }
                        }
                    }
                }
                None => {
                    let (dealt, _) =
                        self.interleave
                            .deal(&route.name, split, None, trace.is_none());
                    (vec![dealt], Reason::Split)
                }
            },
            Policy::TargetShare {
                hard,
                easy,
                tracker,
                by,
            } => {
                let score = match by {
                    Some(p) => self.predict_fail(*p, view, &mut features, None).0,
                    None => features.score,
                };
                let is_hard = match trace {
                    // Explaining must not move the threshold.
                    Some(_) => score > tracker.threshold(),
                    None => tracker.is_hard(score, unit),
                };
                features.share_threshold = Some(tracker.threshold());
                if is_hard {
                    (vec![*hard], Reason::TargetShareHard)
                } else {
                    // A session keeps its easy backend while that stays
                    // within the weights, so its prefix cache stays warm.
                    let preferred = view.session.map(|s| easy.pick(unit_from_key(s)));
                    let (dealt, _) =
                        self.interleave
                            .deal(&route.name, easy, preferred, trace.is_none());
                    (vec![dealt], Reason::TargetShareEasy)
                }
            }
            Policy::Rules {
                rules,
                needs_embedding,
                predictor,
            } => {
                let embedding = needs_embedding.then(|| embed(view.last_user_text));
                if let Some(p) = predictor {
                    self.predict_fail(*p, view, &mut features, embedding.as_deref());
                }
                let mut chosen = None;
                for (i, (condition, to)) in rules.iter().enumerate() {
                    let matched = condition.matches(view, &features, embedding.as_deref());
                    if let Some(trace) = trace.as_deref_mut() {
                        let trace = &mut trace.rules;
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
            Policy::Cascade {
                order, learners, ..
            } => {
                learning = self.cascade_learning(learners, order[0], view, &mut features);
                (order.clone(), Reason::Cascade)
            }
            Policy::Learned(learned) => {
                let (targets, reason, taught) =
                    self.decide_learned(learned, view, &mut features, unit);
                learning = taught;
                (targets, reason)
            }
            Policy::Budgeted {
                candidates,
                cheapest,
            } => {
                let budget = budget_for(route.budget, features.profile, features.prompt_tokens);
                if trace.is_none() {
                    *deciding = Some(self.wait_for_budget_decisions());
                }
                let candidates: Vec<Candidate> = candidates
                    .iter()
                    .map(|&backend| {
                        let cached = self.expected_cached_tokens(backend, &features);
                        let shape =
                            self.shape_with_cached(Some(number), backend, &features, cached);
                        let prediction = self.latency.predict(backend, &shape);
                        let cost_usd = expected_cost(
                            &self.pricing[backend],
                            (features.prompt_tokens, cached),
                            shape.output_tokens,
                            &prediction,
                        );
                        Candidate {
                            backend,
                            prediction,
                            cost_usd,
                        }
                    })
                    .collect();
                match trace {
                    // Explaining: each candidate's figures and verdict too.
                    Some(trace) => {
                        let ranked = rank(candidates.clone(), budget, *cheapest);
                        trace.candidates =
                            candidate_traces(&candidates, &ranked.0, budget, *cheapest)
                                .into_iter()
                                .map(|(backend, t)| CandidateTrace {
                                    backend: self.backends[backend].clone(),
                                    ..t
                                })
                                .collect();
                        ranked
                    }
                    None => rank(candidates, budget, *cheapest),
                }
            }
        };
        let (targets, moved) = self.fitting(
            targets,
            &route.policy.members(),
            &route.fallbacks,
            &features,
        )?;
        let reason = if moved { Reason::ContextFit } else { reason };
        let (predicted_ttft_ms, expected_cached_tokens) =
            self.first_prediction(targets[0], Some(number), &features);
        Ok(Decision {
            route: Some(number),
            predicted_ttft_ms,
            expected_cached_tokens,
            targets,
            reason,
            rule,
            features,
            drafting: None,
            learning,
            upstream_model: None,
            local_only: false,
            sensitive: None,
        })
    }

    /// Where a session stuck to `stuck` goes instead, when `stuck` is
    /// predicted to break the first-token budget (its wait, mostly) and
    /// another of the policy's backends is not: the one of those with the
    /// soonest first token. A split's backends were chosen for their
    /// shares, so their decode rates are not held against them here.
    pub(super) fn unstick(
        &self,
        stuck: usize,
        policy: &Policy,
        budget: Option<LatencyBudget>,
        route: usize,
        features: &Features,
    ) -> Option<usize> {
        let budget = Some(LatencyBudget {
            ttft: Some(budget?.ttft?),
            min_tokens_per_s: 0.0,
            total: None,
        });
        if meets(budget, &self.predict(stuck, Some(route), features)) {
            return None;
        }
        policy
            .members()
            .into_iter()
            .filter(|&b| b != stuck)
            .map(|b| (b, self.predict(b, Some(route), features)))
            .filter(|(_, p)| meets(budget, p))
            .min_by(|a, b| a.1.ttft_p90_ms.total_cmp(&b.1.ttft_p90_ms))
            .map(|(b, _)| b)
    }

    /// The first target's predicted time to first token (p50) and the
    /// cached prompt tokens it was predicted with.
    pub(super) fn first_prediction(
        &self,
        backend: usize,
        route: Option<usize>,
        features: &Features,
    ) -> (f64, u32) {
        let shape = self.shape_of(backend, route, features);
        let prediction = self.latency.predict(backend, &shape);
        (prediction.ttft_p50_ms, shape.cached_tokens)
    }

    pub(super) fn predict(
        &self,
        backend: usize,
        route: Option<usize>,
        features: &Features,
    ) -> Prediction {
        self.latency
            .predict(backend, &self.shape_of(backend, route, features))
    }
}
