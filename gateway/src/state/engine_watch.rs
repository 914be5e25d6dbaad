//! Reads each engine's own `/metrics` (vLLM, SGLang, llama.cpp started with
//! `--metrics`) for speculative acceptance, published on ours, and for the
//! requests it is running and queueing, which the latency model waits for.
//! Runs beside the server; a backend whose page cannot be read is logged
//! once and tried again at the next interval.

use std::sync::Arc;
use std::time::Duration;

use switchyard_adapters::engine_metrics::{DraftFigures, draft_figures, engine_load, fetch};
use switchyard_adapters::upstream::{HttpClient, http_client_trusting};
use switchyard_policies::{BackendAdapter, Config, Engine};
use switchyard_router::latency::{EngineLoad, LatencyStore, LocalLatency};

use crate::metrics::Metrics;

const TIMEOUT: Duration = Duration::from_secs(3);

struct Watched {
    index: usize,
    name: String,
    engine: Engine,
    url: String,
    interval: Duration,
    /// The counters at the last scrape, for the rate between scrapes.
    last: Option<(f64, f64)>,
    failing: bool,
    /// A client that trusts what the backend's `tls:` says.
    client: HttpClient,
}

/// Starts the watcher when some backend has a metrics page to read.
pub fn spawn(
    config: &Config,
    metrics: Arc<Metrics>,
    latency: Arc<LocalLatency>,
) -> Option<tokio::task::AbortHandle> {
    let watched: Vec<Watched> = config
        .backends
        .values()
        .enumerate()
        .filter_map(|(index, backend)| match &backend.adapter {
            BackendAdapter::OpenAi(openai) if openai.engine != Engine::Generic => Some(Watched {
                index,
                name: backend.name.clone(),
                engine: openai.engine,
                url: openai.metrics_url.clone()?,
                interval: openai.metrics_interval,
                last: None,
                failing: false,
                client: http_client_trusting(TIMEOUT, &backend.tls)
                    .inspect_err(|err| tracing::warn!(backend = %backend.name, %err, "engine metrics: no HTTP client"))
                    .ok()?,
            }),
            _ => None,
        })
        .collect();
    if watched.is_empty() {
        return None;
    }
    Some(tokio::spawn(watch(watched, metrics, latency)).abort_handle())
}

async fn watch(mut watched: Vec<Watched>, metrics: Arc<Metrics>, latency: Arc<LocalLatency>) {
    // One pass per the shortest interval configured.
    let every = watched.iter().map(|w| w.interval).min().unwrap_or(TIMEOUT);
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        for w in &mut watched {
            match fetch(&w.client, &w.url, TIMEOUT).await {
                Ok(text) => {
                    w.failing = false;
                    if let Some(rate) = update(w, draft_figures(w.engine, &text)) {
                        metrics.set_engine_acceptance(w.index, rate);
                    }
                    // What the engine has running and queued beyond this
                    // gateway's requests is waited for too.
                    if let Some((running, waiting)) = engine_load(w.engine, &text) {
                        let count = |n: f64| n.clamp(0.0, f64::from(u32::MAX)) as u32;
                        let load = EngineLoad {
                            running: count(running),
                            waiting: count(waiting),
                        };
                        // Trusted until two scrapes are missed.
                        latency.set_engine_load(w.index, load, 2 * w.interval);
                    }
                }
                Err(err) => {
                    if !w.failing {
                        tracing::warn!(backend = %w.name, url = %w.url, %err, "engine metrics unreadable");
                    }
                    w.failing = true;
                }
            }
        }
    }
}

/// The acceptance rate since the last scrape (or overall, at the first).
fn update(w: &mut Watched, figures: Option<DraftFigures>) -> Option<f64> {
    match figures? {
        DraftFigures::Rate(rate) => Some(rate),
        DraftFigures::Counters { drafted, accepted } => {
            let (d0, a0) = match w.last.replace((drafted, accepted)) {
                // A restarted engine starts its counters again.
                Some((d, a)) if d <= drafted && a <= accepted => (d, a),
                _ => (0.0, 0.0),
            };
            let drafted = drafted - d0;
            (drafted > 0.0).then(|| (accepted - a0) / drafted)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_between_scrapes_and_after_a_restart() {
        let mut w = Watched {
            index: 0,
            name: "mid".into(),
            engine: Engine::Vllm,
            url: String::new(),
            interval: TIMEOUT,
            last: None,
            failing: false,
            client: http_client_trusting(TIMEOUT, &Default::default()).unwrap(),
        };
        let counters = |drafted, accepted| Some(DraftFigures::Counters { drafted, accepted });
        assert_eq!(update(&mut w, counters(100.0, 80.0)), Some(0.8));
        assert_eq!(update(&mut w, counters(200.0, 130.0)), Some(0.5));
        // Nothing drafted since: no new figure.
        assert_eq!(update(&mut w, counters(200.0, 130.0)), None);
        // Restarted: counters below the last reading start over.
        assert_eq!(update(&mut w, counters(10.0, 9.0)), Some(0.9));
    }
}
