//! Per-backend online latency models, behind a small trait so replicas can
//! share them later.

mod drift;
mod model;
mod queue;
mod stat;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use drift::Drifts;
pub use model::{BackendLatency, LatencyHints, Observation, Prediction, Shape};
pub use queue::EngineLoad;

/// Where latency models live.
pub trait LatencyStore: Send + Sync {
    /// A request of `shape` is bound for `backend` (waiting for a slot
    /// until [`LatencyStore::running`]); its id, for the calls after.
    fn started(&self, backend: usize, shape: &Shape) -> u64;
    /// A request of `shape` was just routed to `backend`: work ahead of
    /// the next decisions there until [`LatencyStore::started`] takes it
    /// over (or it lapses, if never admitted).
    fn reserve(&self, backend: usize, shape: &Shape);
    /// The request got its slot; returns the requests now running on the
    /// backend's hardware, itself included (the load it runs under).
    fn running(&self, backend: usize, id: u64) -> u32;
    /// The request left the backend (answered, failed or given up).
    fn finished(&self, backend: usize, id: u64);
    /// What the backend's engine reports it is doing, trusted for
    /// `fresh_for`.
    fn set_engine_load(&self, backend: usize, load: EngineLoad, fresh_for: Duration);
    fn observe(&self, backend: usize, observation: &Observation);
    /// A streamed call's first token came (`observation` as far as known:
    /// its load, prompt and first-token time): whether it waited behind
    /// others teaches the backend's concurrency at once, before the next
    /// requests are routed, not when the answer ends. Returns the most
    /// requests that ran there before the token came, itself included.
    fn first_token(&self, backend: usize, observation: &Observation) -> u32;
    fn predict(&self, backend: usize, shape: &Shape) -> Prediction;
    /// The backend's recent decode and prefill speeds and error rate
    /// against its own baseline, as far as known.
    fn drifts(&self, backend: usize) -> Drifts;
}

/// The models in this process.
pub struct LocalLatency {
    /// Shared with the gateway's next config on reload, so what was learned
    /// of a backend outlives a config change.
    backends: Vec<Arc<Mutex<BackendLatency>>>,
    /// For each backend, the other backends on the same hardware.
    peers: Vec<Vec<usize>>,
}

impl LocalLatency {
    /// Models starting from `hints`, one per backend, with each backend's
    /// hardware (`None`: its own) saying which slow each other down.
    pub fn new(hints: impl IntoIterator<Item = (LatencyHints, Option<String>)>) -> Self {
        let (hints, hardware): (Vec<_>, Vec<_>) = hints.into_iter().unzip();
        let peers = hardware
            .iter()
            .enumerate()
            .map(|(mine, machine)| match machine {
                None => Vec::new(),
                Some(machine) => (0..hardware.len())
                    .filter(|&other| other != mine && hardware[other].as_ref() == Some(machine))
                    .collect(),
            })
            .collect();
        LocalLatency {
            backends: hints
                .into_iter()
                .map(|h| Arc::new(Mutex::new(BackendLatency::new(h))))
                .collect(),
            peers,
        }
    }

    /// Requests running on the other backends of `backend`'s hardware
    /// (each model locked in turn, never two at once).
    fn others_running(&self, backend: usize) -> u32 {
        self.peers.get(backend).map_or(0, |peers| {
            peers
                .iter()
                .filter_map(|&peer| self.with(peer, |m| m.running_now()))
                .sum()
        })
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
        let others = self.others_running(backend);
        self.with(backend, |m| m.started(shape, others))
            .unwrap_or(0)
    }

    fn reserve(&self, backend: usize, shape: &Shape) {
        let others = self.others_running(backend);
        self.with(backend, |m| m.reserve(shape, others));
    }

    fn running(&self, backend: usize, id: u64) -> u32 {
        let others = self.others_running(backend);
        let mine = self
            .with(backend, |m| {
                m.running(id, Instant::now());
                m.running_now()
            })
            .unwrap_or(1);
        mine.saturating_add(others)
    }

    fn finished(&self, backend: usize, id: u64) {
        self.with(backend, |m| m.finished(id));
    }

    fn set_engine_load(&self, backend: usize, load: EngineLoad, fresh_for: Duration) {
        self.with(backend, |m| {
            m.set_engine_load(load, Instant::now(), fresh_for)
        });
    }

    fn observe(&self, backend: usize, observation: &Observation) {
        self.with(backend, |m| m.observe(observation));
    }

    fn drifts(&self, backend: usize) -> Drifts {
        self.with(backend, |m| m.drifts()).unwrap_or_default()
    }

    fn first_token(&self, backend: usize, observation: &Observation) -> u32 {
        self.with(backend, |m| m.first_token(observation))
            .unwrap_or(observation.concurrent)
    }

    fn predict(&self, backend: usize, shape: &Shape) -> Prediction {
        let others = self.others_running(backend);
        self.with(backend, |m| m.predict(shape, Instant::now(), others))
            .unwrap_or(Prediction {
                queue_ms: f64::INFINITY,
                ttft_p50_ms: f64::INFINITY,
                ttft_p90_ms: f64::INFINITY,
                tokens_per_s: 0.0,
                total_p90_ms: f64::INFINITY,
                error_rate: 1.0,
                learned_concurrency: None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policies::PromptClass;

    #[test]
    fn backends_on_the_same_hardware_are_load_on_each_other() {
        let hints = LatencyHints {
            decode_tokens_per_s: 100.0,
            concurrency: 1,
            ..LatencyHints::default()
        };
        let box1 = Some("box1".to_owned());
        let latency = LocalLatency::new([(hints, box1.clone()), (hints, box1), (hints, None)]);
        let shape = Shape {
            prompt_tokens: 10,
            output_tokens: 10,
            class: PromptClass::Prose,
            ..Shape::default()
        };
        // Backend 1 runs beside backend 0's request; backend 2 does not.
        let id = latency.started(0, &shape);
        assert_eq!(latency.running(0, id), 1);
        let beside = latency.started(1, &shape);
        assert_eq!(latency.running(1, beside), 2, "itself and its neighbour's");
        let alone = latency.started(2, &shape);
        assert_eq!(latency.running(2, alone), 1);
        // A decode rate measured beside one other request is the rate
        // predicted for a request that will run beside one.
        for _ in 0..40 {
            latency.observe(
                1,
                &Observation {
                    prompt_tokens: 10,
                    output_tokens: 41,
                    ttft: Some(Duration::from_millis(50)),
                    total: Duration::from_millis(1050),
                    concurrent: 2,
                    ..Observation::default()
                },
            );
        }
        latency.finished(1, beside);
        assert!((latency.predict(1, &shape).tokens_per_s - 40.0).abs() < 5.0);
        latency.finished(0, id);
        assert!((latency.predict(1, &shape).tokens_per_s - 100.0).abs() < 5.0);
    }
}
