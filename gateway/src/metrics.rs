//! Prometheus metrics at `GET /metrics`: per backend, requests, tokens,
//! spend, first-token time, decode speed and speculative acceptance per
//! prompt class, and what the engines themselves report. Counters are
//! atomics bumped once per finished call; the text is built per scrape.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use switchyard_policies::PromptClass;
use switchyard_router::speculation::SpeculationStats;

use crate::ledger::LedgerRow;

/// How far (as a share) recent decode speed may move from its baseline
/// before it is reported as drift, and how near it must come back before
/// the drift is reported over (apart, so a speed near the threshold does
/// not flip the report on every call).
pub const DRIFT_THRESHOLD: f64 = 0.3;
const DRIFT_CLEARED: f64 = 0.2;

/// Upper bounds, in seconds, of the prediction-error histogram's buckets:
/// under-predictions (the person waited longer than predicted) are
/// positive.
const PREDICTION_ERROR_BUCKETS: [f64; 11] =
    [-2.0, -1.0, -0.5, -0.25, -0.1, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0];

#[derive(Default)]
struct BackendCounters {
    ok: AtomicU64,
    failed: AtomicU64,
    /// Calls stopped on purpose: the client left, or the hedge's other leg won.
    cancelled: AtomicU64,
    /// Cascade answers that failed a check and were escalated.
    escalated: AtomicU64,
    prompt_tokens: AtomicU64,
    cached_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cost_nano_usd: AtomicU64,
    ttft_us_sum: AtomicU64,
    ttft_count: AtomicU64,
    /// Measured minus predicted first-token time, per bucket of
    /// [`PREDICTION_ERROR_BUCKETS`] (not cumulative; the last is +Inf),
    /// and the errors' sum in microseconds (signed).
    prediction_error: [AtomicU64; PREDICTION_ERROR_BUCKETS.len() + 1],
    prediction_error_us_sum: std::sync::atomic::AtomicI64,
    /// Per prompt class: tokens after the first, and the time they took.
    decode_tokens: [AtomicU64; 2],
    decode_us: [AtomicU64; 2],
    /// What the engine's own `/metrics` says of drafts, as f64 bits
    /// (NaN until read).
    engine_acceptance: AtomicU64,
    /// Recent decode speed over its baseline, as f64 bits (NaN until
    /// known), and whether it is past the drift threshold.
    decode_drift: AtomicU64,
    drifting: std::sync::atomic::AtomicBool,
    /// Prefix reuse: calls the index expected a cached prefix for, the
    /// tokens it expected, and the first-token time the cached tokens saved.
    prefix_hits: AtomicU64,
    prefix_misses: AtomicU64,
    expected_cached_tokens: AtomicU64,
    ttft_saved_us: AtomicU64,
}

/// Counters of the gateway as a whole.
#[derive(Default)]
struct GatewayCounters {
    /// Model requests refused before any backend call, by error kind (few
    /// kinds, and rare next to calls: a lock is cheap enough).
    refused: Mutex<BTreeMap<&'static str, u64>>,
    /// Requests turned away for a missing or unknown key.
    unauthenticated: AtomicU64,
    /// Config reloads applied, and refused (the file did not validate).
    reloads: AtomicU64,
    failed_reloads: AtomicU64,
}

/// Counters are shared with the next config on reload (per backend, for the
/// backends it keeps), so a reload never sets a counter back.
pub struct Metrics {
    names: Vec<String>,
    backends: Vec<Arc<BackendCounters>>,
    gateway: Arc<GatewayCounters>,
}

impl Metrics {
    pub fn new(names: Vec<String>) -> Self {
        Self::carrying(names, None)
    }

    /// Counters for backends `names`, continuing `previous`'s for the
    /// backends it had.
    pub fn carrying(names: Vec<String>, previous: Option<&Metrics>) -> Self {
        let backends = names
            .iter()
            .map(|name| {
                let old = previous.and_then(|m| {
                    let at = m.names.iter().position(|n| n == name)?;
                    m.backends.get(at).cloned()
                });
                old.unwrap_or_else(|| {
                    let counters = BackendCounters::default();
                    counters
                        .engine_acceptance
                        .store(f64::NAN.to_bits(), Ordering::Relaxed);
                    counters
                        .decode_drift
                        .store(f64::NAN.to_bits(), Ordering::Relaxed);
                    Arc::new(counters)
                })
            })
            .collect();
        Metrics {
            names,
            backends,
            gateway: previous.map(|m| m.gateway.clone()).unwrap_or_default(),
        }
    }

    /// Counts a config reload, applied or refused.
    pub fn reloaded(&self, applied: bool) {
        let counter = if applied {
            &self.gateway.reloads
        } else {
            &self.gateway.failed_reloads
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a model request refused before any backend call.
    pub fn refused(&self, kind: &'static str) {
        *self
            .gateway
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(kind)
            .or_default() += 1;
    }

    /// Counts a request refused for its key (missing, unknown).
    pub fn unauthenticated(&self) {
        self.gateway.unauthenticated.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one finished call from its ledger row; `saved_ms` is the
    /// first-token time its cached prompt tokens saved, by the latency model.
    pub fn record(&self, backend: usize, row: &LedgerRow, saved_ms: f64) {
        let Some(c) = self.backends.get(backend) else {
            return;
        };
        let add = |counter: &AtomicU64, v: u64| counter.fetch_add(v, Ordering::Relaxed);
        let outcome = match row.status {
            "ok" => &c.ok,
            "cancelled" | "hedge-lost" => &c.cancelled,
            "escalated" => &c.escalated,
            _ => &c.failed,
        };
        add(outcome, 1);
        add(&c.prompt_tokens, row.tokens.prompt());
        add(&c.cached_tokens, row.tokens.cached_input);
        add(&c.completion_tokens, row.tokens.output);
        add(&c.cost_nano_usd, (row.cost_usd.max(0.0) * 1e9) as u64);
        if row.expected_cached_tokens > 0 {
            add(&c.prefix_hits, 1);
        } else {
            add(&c.prefix_misses, 1);
        }
        add(
            &c.expected_cached_tokens,
            u64::from(row.expected_cached_tokens),
        );
        add(&c.ttft_saved_us, (saved_ms * 1000.0) as u64);
        if let Some(ttft) = row.ttft_ms {
            add(&c.ttft_us_sum, (ttft * 1000.0) as u64);
            add(&c.ttft_count, 1);
            if let Some(predicted) = row.predicted_ttft_ms.filter(|p| p.is_finite()) {
                let error_s = (ttft - predicted) / 1000.0;
                let bucket = PREDICTION_ERROR_BUCKETS
                    .iter()
                    .position(|&le| error_s <= le)
                    .unwrap_or(PREDICTION_ERROR_BUCKETS.len());
                add(&c.prediction_error[bucket], 1);
                c.prediction_error_us_sum
                    .fetch_add((error_s * 1e6) as i64, Ordering::Relaxed);
            }
        }
        if let Some(rate) = row.decode_tokens_per_s
            && rate > 0.0
        {
            let decoding_ms = row.tokens.output.saturating_sub(1) as f64 / rate * 1000.0;
            add(
                &c.decode_tokens[row.prompt_class.index()],
                row.tokens.output.saturating_sub(1),
            );
            add(
                &c.decode_us[row.prompt_class.index()],
                (decoding_ms * 1000.0) as u64,
            );
        }
    }

    /// How far measured first-token times fell from their predictions, per
    /// backend, as a histogram.
    fn render_prediction_errors(&self, out: &mut String) {
        let name = "switchyard_ttft_prediction_error_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Measured minus predicted time to first token (positive: slower than predicted), for calls routed with a prediction.\n# TYPE {name} histogram"
        );
        for (backend, c) in self.names.iter().zip(&self.backends) {
            let mut cumulative = 0;
            for (i, count) in c.prediction_error.iter().enumerate() {
                cumulative += count.load(Ordering::Relaxed);
                let le = PREDICTION_ERROR_BUCKETS
                    .get(i)
                    .map_or("+Inf".to_owned(), |le| format!("{le:?}"));
                let _ = writeln!(
                    out,
                    "{name}_bucket{{backend=\"{backend}\",le=\"{le}\"}} {cumulative}"
                );
            }
            let sum = c.prediction_error_us_sum.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "{name}_sum{{backend=\"{backend}\"}} {sum}");
            let _ = writeln!(out, "{name}_count{{backend=\"{backend}\"}} {cumulative}");
        }
    }

    /// A backend's recent decode speed over its own baseline. Crossing
    /// [`DRIFT_THRESHOLD`] either way is logged (at warn when it drifts).
    pub fn set_decode_drift(&self, backend: usize, ratio: f64) {
        let (Some(c), Some(name)) = (self.backends.get(backend), self.names.get(backend)) else {
            return;
        };
        c.decode_drift.store(ratio.to_bits(), Ordering::Relaxed);
        let moved = (ratio - 1.0).abs();
        let was = c.drifting.load(Ordering::Relaxed);
        let drifting = if was {
            moved >= DRIFT_CLEARED
        } else {
            moved >= DRIFT_THRESHOLD
        };
        if c.drifting.swap(drifting, Ordering::Relaxed) != drifting {
            let change = format!("{:+.0}%", (ratio - 1.0) * 100.0);
            if drifting {
                tracing::warn!(backend = %name, %change, "decode speed drifted from its baseline");
            } else {
                tracing::info!(backend = %name, %change, "decode speed back near its baseline");
            }
        }
    }

    /// The share of drafted tokens the engine reports it accepted.
    pub fn set_engine_acceptance(&self, backend: usize, acceptance: f64) {
        if let Some(c) = self.backends.get(backend) {
            c.engine_acceptance
                .store(acceptance.to_bits(), Ordering::Relaxed);
        }
    }

    /// The exposition text (Prometheus 0.0.4).
    pub fn render(&self, speculation: &SpeculationStats) -> String {
        let mut out = String::with_capacity(4096);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let per_backend =
            |out: &mut String,
             name: &str,
             kind: &str,
             help: &str,
             value: &dyn Fn(&BackendCounters) -> Option<f64>| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
                for (backend, c) in self.names.iter().zip(&self.backends) {
                    if let Some(v) = value(c) {
                        let _ = writeln!(out, "{name}{{backend=\"{backend}\"}} {v}");
                    }
                }
            };
        let _ = writeln!(
            out,
            "# HELP switchyard_requests_total Calls to a backend by outcome.\n# TYPE switchyard_requests_total counter"
        );
        for (backend, c) in self.names.iter().zip(&self.backends) {
            for (outcome, v) in [
                ("ok", get(&c.ok)),
                ("error", get(&c.failed)),
                ("cancelled", get(&c.cancelled)),
                ("escalated", get(&c.escalated)),
            ] {
                let _ = writeln!(
                    out,
                    "switchyard_requests_total{{backend=\"{backend}\",outcome=\"{outcome}\"}} {v}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP switchyard_tokens_total Tokens by kind (prompt includes cached).\n# TYPE switchyard_tokens_total counter"
        );
        for (backend, c) in self.names.iter().zip(&self.backends) {
            for (kind, v) in [
                ("prompt", get(&c.prompt_tokens)),
                ("cached", get(&c.cached_tokens)),
                ("completion", get(&c.completion_tokens)),
            ] {
                let _ = writeln!(
                    out,
                    "switchyard_tokens_total{{backend=\"{backend}\",kind=\"{kind}\"}} {v}"
                );
            }
        }
        per_backend(
            &mut out,
            "switchyard_cost_usd_total",
            "counter",
            "Spend, cloud list price or local hardware share.",
            &|c| Some(get(&c.cost_nano_usd) as f64 / 1e9),
        );
        per_backend(
            &mut out,
            "switchyard_ttft_seconds_sum",
            "counter",
            "Time to first token, summed over calls with output.",
            &|c| Some(get(&c.ttft_us_sum) as f64 / 1e6),
        );
        per_backend(
            &mut out,
            "switchyard_ttft_seconds_count",
            "counter",
            "Calls with a first token.",
            &|c| Some(get(&c.ttft_count) as f64),
        );
        self.render_prediction_errors(&mut out);
        let _ = writeln!(
            out,
            "# HELP switchyard_prefix_lookups_total Calls by whether the prefix index expected part of the prompt cached.\n# TYPE switchyard_prefix_lookups_total counter"
        );
        for (backend, c) in self.names.iter().zip(&self.backends) {
            for (result, v) in [
                ("hit", get(&c.prefix_hits)),
                ("miss", get(&c.prefix_misses)),
            ] {
                let _ = writeln!(
                    out,
                    "switchyard_prefix_lookups_total{{backend=\"{backend}\",result=\"{result}\"}} {v}"
                );
            }
        }
        per_backend(
            &mut out,
            "switchyard_prefix_expected_cached_tokens_total",
            "counter",
            "Prompt tokens the prefix index expected cached (compare switchyard_tokens_total{kind=\"cached\"}, as reported).",
            &|c| Some(get(&c.expected_cached_tokens) as f64),
        );
        per_backend(
            &mut out,
            "switchyard_prefix_ttft_saved_seconds_total",
            "counter",
            "First-token time the reported cached tokens saved, by the latency model.",
            &|c| Some(get(&c.ttft_saved_us) as f64 / 1e6),
        );
        per_backend(
            &mut out,
            "switchyard_decode_drift_ratio",
            "gauge",
            "Recent decode speed (about the last ten calls) over its baseline (about the last hundred), at one context length.",
            &|c| Some(f64::from_bits(get(&c.decode_drift))).filter(|v| v.is_finite()),
        );
        per_backend(
            &mut out,
            "switchyard_engine_draft_acceptance_ratio",
            "gauge",
            "Accepted / drafted tokens as the engine's own /metrics report it.",
            &|c| Some(f64::from_bits(get(&c.engine_acceptance))).filter(|v| v.is_finite()),
        );
        let _ = writeln!(
            out,
            "# HELP switchyard_decode_tokens_per_second Effective decode speed (drafting included) by prompt class.\n# TYPE switchyard_decode_tokens_per_second gauge"
        );
        for (backend, c) in self.names.iter().zip(&self.backends) {
            for class in PromptClass::ALL {
                let us = get(&c.decode_us[class.index()]);
                if us > 0 {
                    let rate = get(&c.decode_tokens[class.index()]) as f64 / (us as f64 / 1e6);
                    let _ = writeln!(
                        out,
                        "switchyard_decode_tokens_per_second{{backend=\"{backend}\",class=\"{}\"}} {rate:.3}",
                        class.as_str()
                    );
                }
            }
        }
        self.render_refusals(&mut out);
        self.render_speculation(&mut out, speculation);
        out
    }

    fn render_refusals(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP switchyard_refused_requests_total Model requests refused before any backend call, by error kind.\n# TYPE switchyard_refused_requests_total counter"
        );
        let refused = self
            .gateway
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        for (kind, n) in refused.iter() {
            let _ = writeln!(
                out,
                "switchyard_refused_requests_total{{kind=\"{kind}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP switchyard_unauthenticated_requests_total Requests refused for a missing or unknown key.\n# TYPE switchyard_unauthenticated_requests_total counter\nswitchyard_unauthenticated_requests_total {}",
            self.gateway.unauthenticated.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP switchyard_config_reloads_total Config reloads, by outcome: applied, or failed (the file was invalid or a backend's client could not be built; the running config stayed).\n# TYPE switchyard_config_reloads_total counter\nswitchyard_config_reloads_total{{outcome=\"applied\"}} {}\nswitchyard_config_reloads_total{{outcome=\"failed\"}} {}",
            self.gateway.reloads.load(Ordering::Relaxed),
            self.gateway.failed_reloads.load(Ordering::Relaxed)
        );
    }

    fn render_speculation(&self, out: &mut String, speculation: &SpeculationStats) {
        let mut lines = [String::new(), String::new(), String::new()];
        for (index, backend) in self.names.iter().enumerate() {
            for class in PromptClass::ALL {
                let s = speculation.get(index, class);
                if s.requests == 0 {
                    continue;
                }
                let labels = format!("backend=\"{backend}\",class=\"{}\"", class.as_str());
                let _ = writeln!(
                    lines[0],
                    "switchyard_draft_tokens_total{{{labels}}} {}",
                    s.drafted
                );
                let _ = writeln!(
                    lines[1],
                    "switchyard_draft_accepted_tokens_total{{{labels}}} {}",
                    s.accepted
                );
                if let Some(rate) = s.recent {
                    let _ = writeln!(
                        lines[2],
                        "switchyard_draft_acceptance_ratio{{{labels}}} {rate:.4}"
                    );
                }
            }
        }
        for ((name, kind, help), body) in [
            (
                "switchyard_draft_tokens_total",
                "counter",
                "Tokens drafted by speculative decoding.",
            ),
            (
                "switchyard_draft_accepted_tokens_total",
                "counter",
                "Drafted tokens the target model kept.",
            ),
            (
                "switchyard_draft_acceptance_ratio",
                "gauge",
                "Recent accepted / drafted, weighted to the newest requests.",
            ),
        ]
        .into_iter()
        .zip(lines)
        {
            let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{body}");
        }
    }
}

/// Each backend's circuit breaker: whether it is open now, and how often it
/// opened and closed again.
pub fn render_breakers<'a>(
    out: &mut String,
    breakers: impl Iterator<Item = (&'a str, &'a crate::breaker::Breaker)> + Clone,
) {
    let _ = writeln!(
        out,
        "# HELP switchyard_breaker_open Whether the backend's circuit breaker is open or half-open (1) or closed (0).\n# TYPE switchyard_breaker_open gauge"
    );
    for (backend, breaker) in breakers.clone() {
        let open = u8::from(breaker.state() != "closed");
        let _ = writeln!(
            out,
            "switchyard_breaker_open{{backend=\"{backend}\"}} {open}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP switchyard_breaker_opened_total Times the backend's circuit breaker opened (a failed probe reopening it included).\n# TYPE switchyard_breaker_opened_total counter"
    );
    for (backend, breaker) in breakers.clone() {
        let _ = writeln!(
            out,
            "switchyard_breaker_opened_total{{backend=\"{backend}\"}} {}",
            breaker.transitions().0
        );
    }
    let _ = writeln!(
        out,
        "# HELP switchyard_breaker_closed_total Times the backend's circuit breaker closed again after a successful probe.\n# TYPE switchyard_breaker_closed_total counter"
    );
    for (backend, breaker) in breakers {
        let _ = writeln!(
            out,
            "switchyard_breaker_closed_total{{backend=\"{backend}\"}} {}",
            breaker.transitions().1
        );
    }
}
