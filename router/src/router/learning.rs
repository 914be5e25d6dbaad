//! The learned router's part in deciding: consulting a predictor, and
//! feeding predictors the outcomes of the answers a route checks.

use std::sync::Arc;

use switchyard_policies::CascadeCheck;

use super::Router;
use crate::decision::{Decision, Learning, Reason};
use crate::features::{Features, RequestView};
use crate::learned::{Predictor, Sample};

/// A `learned` route, compiled.
pub(super) struct LearnedPolicy {
    pub predictor: usize,
    pub threshold: f64,
    pub easy: usize,
    pub hard: usize,
    pub checks: Vec<CascadeCheck>,
    pub min_mean_logprob: f64,
    pub explore: f64,
    /// Predictors its easy backend's outcomes train (its own first).
    pub learners: Vec<usize>,
}

impl Router {
    /// Feeds the outcome of `backend`'s answer to a decision (`failed`: it
    /// failed a check) to the predictors that learn from it, when it is the
    /// answer they learn from.
    pub fn observe(&self, decision: &Decision, backend: usize, failed: bool) {
        if let Some(learning) = decision.lesson(backend) {
            for &p in &learning.predictors {
                self.predictors[p].learn(&learning.sample, failed);
            }
        }
    }

    /// The learned predictors, by name.
    pub fn predictors(&self) -> impl Iterator<Item = &Predictor> {
        self.predictors.iter().map(|p| &**p)
    }

    /// A predictor's P(its backend fails) for the request, recorded in the
    /// features (explanations and receipts show it), with the sample it
    /// was computed on, for learning from the outcome.
    pub(super) fn predict_fail(
        &self,
        predictor: usize,
        view: &RequestView<'_>,
        features: &mut Features,
        embedding: Option<&[f32]>,
    ) -> (f64, Arc<Sample>) {
        let sample = Arc::new(Sample::of(view, features, embedding));
        let fail = self.predictors[predictor].predict(&sample);
        features.predicted_fail = Some(fail);
        (fail, sample)
    }

    /// What a cascade's first answer (from `first`) teaches the predictors
    /// that learn from it (`learn_from`), if any do.
    pub(super) fn cascade_learning(
        &self,
        learners: &[usize],
        first: usize,
        view: &RequestView<'_>,
        features: &mut Features,
    ) -> Option<Learning> {
        let &predictor = learners.first()?;
        let (_, sample) = self.predict_fail(predictor, view, features, None);
        Some(Learning {
            predictors: learners.to_vec(),
            backend: first,
            sample,
        })
    }

    /// A learned route's targets and reason: predicted failures straight
    /// to `hard` (but the `explore` share), the rest to `easy` first, as a
    /// cascade to `hard` when the route checks answers, whose outcome then
    /// teaches the predictors.
    pub(super) fn decide_learned(
        &self,
        learned: &LearnedPolicy,
        view: &RequestView<'_>,
        features: &mut Features,
        unit: f64,
    ) -> (Vec<usize>, Reason, Option<Learning>) {
        let (fail, sample) = self.predict_fail(learned.predictor, view, features, None);
        let reason = if fail < learned.threshold {
            Reason::LearnedEasy
        } else if unit < learned.explore {
            Reason::LearnedExplore
        } else {
            Reason::LearnedHard
        };
        if reason == Reason::LearnedHard {
            (vec![learned.hard], reason, None)
        } else if learned.checks.is_empty() {
            (vec![learned.easy], reason, None)
        } else {
            let learning = Learning {
                predictors: learned.learners.clone(),
                backend: learned.easy,
                sample,
            };
            (vec![learned.easy, learned.hard], reason, Some(learning))
        }
    }
}
