//! Per-backend online latency models, behind a small trait so replicas can
//! share them later.

mod model;
mod stat;

use std::sync::{Arc, Mutex};

use switchyard_policies::PromptClass;

pub use model::{BackendLatency, LatencyHints, Observation, Prediction};

/// Where latency models live.
pub trait LatencyStore: Send + Sync {
    fn started(&self, backend: usize);
    fn observe(&self, backend: usize, observation: &Observation);
    fn predict(
        &self,
        backend: usize,
        prompt_tokens: u32,
        cached_tokens: u32,
        output_tokens: u32,
        class: PromptClass,
    ) -> Prediction;
}

/// The models in this process.
pub struct LocalLatency {
    /// Shared with the gateway's next config on reload, so what was learned
    /// of a backend outlives a config change.
    backends: Vec<Arc<Mutex<BackendLatency>>>,
}

impl LocalLatency {
    pub fn new(hints: impl IntoIterator<Item = LatencyHints>) -> Self {
        LocalLatency {
            backends: hints
                .into_iter()
                .map(|h| Arc::new(Mutex::new(BackendLatency::new(h))))
                .collect(),
        }
    }

    /// Backend `backend` keeps learning in `from`'s model of `theirs`
    /// (the same backend under a previous config).
    pub fn adopt(&mut self, backend: usize, from: &LocalLatency, theirs: usize) {
        if let (Some(mine), Some(model)) =
            (self.backends.get_mut(backend), from.backends.get(theirs))
        {
            mine.clone_from(model);
        }
    }

    fn with<T>(&self, backend: usize, f: impl FnOnce(&mut BackendLatency) -> T) -> Option<T> {
        let model = self.backends.get(backend)?;
        // A panic mid-update leaves a usable model (each update is small).
        let mut model = model.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut model))
    }
}

impl LatencyStore for LocalLatency {
    fn started(&self, backend: usize) {
        self.with(backend, BackendLatency::started);
    }

    fn observe(&self, backend: usize, observation: &Observation) {
        self.with(backend, |m| m.observe(observation));
    }

    fn predict(
        &self,
        backend: usize,
        prompt_tokens: u32,
        cached_tokens: u32,
        output_tokens: u32,
        class: PromptClass,
    ) -> Prediction {
        self.with(backend, |m| {
            m.predict(prompt_tokens, cached_tokens, output_tokens, class)
        })
        .unwrap_or(Prediction {
            ttft_p50_ms: f64::INFINITY,
            ttft_p90_ms: f64::INFINITY,
            tokens_per_s: 0.0,
            total_p90_ms: f64::INFINITY,
            error_rate: 1.0,
        })
    }
}
