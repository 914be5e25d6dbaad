//! The learned router: a logistic regression that predicts, from the
//! request alone, whether a backend's answer will fail (the label a
//! cascade's escalations give for free). Features in, probability out,
//! training included; the gateway feeds it outcomes.

pub mod builtin;
mod features;
mod model;
mod train;

#[cfg(test)]
mod tests;

use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};

pub use features::{DENSE, FEATURE_SET, NGRAM_SLOTS, Sample};
pub use model::{About, FORMAT, Weights, sigmoid};
pub use train::{TrainOptions, Validation, auc, fit, train, validate};

/// A predictor as a router holds it: the weights it started from (a file,
/// or zeros) and the live weights online learning moves.
#[derive(Debug)]
pub struct Predictor {
    pub name: String,
    /// The backend whose failures it predicts (an index into the router's
    /// backends).
    pub backend: usize,
    /// The starting weights' version.
    base: String,
    live: RwLock<Weights>,
    updates: AtomicU64,
    learning_rate: f64,
}

/// L2 pull of each online step: weak, so a weights file's knowledge fades
/// only under evidence.
const ONLINE_L2: f64 = 1e-4;

impl Predictor {
    pub fn new(name: &str, backend: usize, weights: Weights, learning_rate: f64) -> Self {
        Predictor {
            name: name.to_owned(),
            backend,
            base: weights.version(),
            live: RwLock::new(weights),
            updates: AtomicU64::new(0),
            learning_rate,
        }
    }

    /// The live weights to read. A step cannot leave them half-written
    /// (it panics on nothing), so a poisoned lock's weights are still good.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Weights> {
        self.live
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// P(the backend's answer fails | request).
    pub fn predict(&self, sample: &Sample) -> f64 {
        self.read().predict(sample)
    }

    /// One online step from an outcome: `failed` when the answer failed its
    /// checks.
    pub fn learn(&self, sample: &Sample, failed: bool) {
        if self.learning_rate <= 0.0 {
            return;
        }
        let mut live = self
            .live
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        live.step(sample, failed, self.learning_rate, ONLINE_L2, 1.0);
        self.updates.fetch_add(1, Ordering::Relaxed);
    }

    /// `<starting weights' version>+<online updates since>`: which numbers
    /// made a decision.
    pub fn version(&self) -> String {
        format!("{}+{}", self.base, self.updates.load(Ordering::Relaxed))
    }

    /// The live weights, to save or inspect.
    pub fn weights(&self) -> Weights {
        self.read().clone()
    }

    pub fn updates(&self) -> u64 {
        self.updates.load(Ordering::Relaxed)
    }

    /// Whether this predictor was built from the same starting weights
    /// and settings, so a reload may keep it (and what it learned since).
    pub fn same_start(&self, backend: usize, weights: &Weights, learning_rate: f64) -> bool {
        self.backend == backend
            && self.base == weights.version()
            && self.learning_rate == learning_rate
    }
}
