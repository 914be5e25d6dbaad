//! Per-backend online latency models, behind a small trait so replicas can
//! share them later.

mod model;
mod queue;
mod stat;

use std::sync::{Arc, Mutex};
use std::time::Instant;

pub use model::{BackendLatency, LatencyHints, Observation, Prediction, Shape};
pub use queue::EngineLoad;

/// Where latency models live.
pub trait LatencyStore: Send + Sync {
    /// A request of `shape` is bound for `backend` (waiting for a slot
    /// until [`LatencyStore::running`]); its id, for the calls after.
    fn started(&self, backend: usize, shape: &Shape) -> u64;
    fn running(&self, backend: usize, id: u64);
    /// The request left the backend (answered, failed or given up).
    fn finished(&self, backend: usize, id: u64);
    /// What the backend's engine reports it is doing.
    fn set_engine_load(&self, backend: usize, load: EngineLoad);
    fn observe(&self, backend: usize, observation: &Observation);
    fn predict(&self, backend: usize, shape: &Shape) -> Prediction;
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
    fn started(&self, backend: usize, shape: &Shape) -> u64 {
        self.with(backend, |m| m.started(shape)).unwrap_or(0)
    }

    fn running(&self, backend: usize, id: u64) {
        self.with(backend, |m| m.running(id, Instant::now()));
    }

    fn finished(&self, backend: usize, id: u64) {
        self.with(backend, |m| m.finished(id));
    }

    fn set_engine_load(&self, backend: usize, load: EngineLoad) {
        self.with(backend, |m| m.set_engine_load(load, Instant::now()));
    }

    fn observe(&self, backend: usize, observation: &Observation) {
        self.with(backend, |m| m.observe(observation));
    }

    fn predict(&self, backend: usize, shape: &Shape) -> Prediction {
        self.with(backend, |m| m.predict(shape, Instant::now()))
            .unwrap_or(Prediction {
                queue_ms: f64::INFINITY,
                ttft_p50_ms: f64::INFINITY,
                ttft_p90_ms: f64::INFINITY,
                tokens_per_s: 0.0,
                total_p90_ms: f64::INFINITY,
                error_rate: 1.0,
            })
    }
}
