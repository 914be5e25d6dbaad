//! Prometheus metrics at `GET /metrics`, through the prometheus-client
//! crate: OpenMetrics text for scrapers that ask for it (Prometheus does),
//! the Prometheus text format otherwise. Per-call figures are recorded
//! from each call's ledger row, into handles looked up once per backend
//! (the per-route series once per route, reason and outcome; failures'
//! per call);
//! what is true at scrape time (breakers, queues, budgets, speculation) is
//! read then (`scrape`).

mod buckets;
mod drift;
pub(crate) mod families;

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use switchyard_policies::{PromptClass, VirtualKey};

use crate::ledger::LedgerRow;
use crate::metrics::families::{
    BackendLabel, Class, Families, FloatCounter, FloatGauge, GenAi, GenAiOutcome, GenAiTokens,
    Holder, Kind, Lookup, Outcome, ReloadOutcome, Role, Routed, TokenKind,
};

pub use crate::metrics::drift::DRIFT_THRESHOLD;

/// A backend as its metrics name it.
pub struct BackendLabels {
    pub name: String,
    /// `gen_ai.provider.name`.
    pub provider: &'static str,
    /// The model name sent upstream.
    pub model: String,
}

/// One backend's series, looked up once.
struct BackendSeries {
    name: Arc<str>,
    provider: &'static str,
    model: Arc<str>,
    outcomes: [Counter; 4],
    tokens: [Counter; 5],
    cost: FloatCounter,
    counterfactual: FloatCounter,
    ttft: Histogram,
    prediction_error: Histogram,
    overhead: Histogram,
    prefix: [Counter; 2],
    expected_cached_tokens: Counter,
    ttft_saved: FloatCounter,
    decode_tokens: [Counter; 2],
    decode_seconds: [FloatCounter; 2],
    /// Whether decode speed, prefill speed and the error rate are past
    /// their drift thresholds now.
    drifting: [std::sync::atomic::AtomicBool; 3],
    roles: [Counter; ROLES.len()],
    /// Decode and prefill drift, and the recent and baseline error
    /// shares, made when first set (a series appears once it has a value).
    drift: [std::sync::OnceLock<FloatGauge>; 4],
    /// This backend's per-route series, by route, reason and outcome (an
    /// index into `OUTCOMES`): each looked up in the family once, then here
    /// (the family's map hashes all four labels with SipHash under a lock,
    /// on every call).
    routed: std::sync::RwLock<RoutedSeries>,
    /// The GenAI series of a successful call, per operation, made on the
    /// first such call (a backend serves one or two operations).
    genai: [std::sync::OnceLock<GenAiSeries>; 3],
}

/// A backend's `switchyard_routed_requests` counters by route, reason and
/// outcome.
type RoutedSeries = switchyard_router::NameMap<(Arc<str>, &'static str, usize), Counter>;

/// One backend's GenAI histograms for one operation, successful calls.
struct GenAiSeries {
    duration: Histogram,
    input_tokens: Histogram,
    output_tokens: Histogram,
    time_to_first_token: Histogram,
    time_per_output_token: Histogram,
}

const OUTCOMES: [&str; 4] = ["ok", "error", "cancelled", "escalated"];
const ROLES: [&str; 5] = ["primary", "hedge", "fallback", "cascade_step", "shadow"];
const OPERATIONS: [&str; 3] = ["chat", "text_completion", "embeddings"];
const TOKEN_KINDS: [&str; 5] = ["prompt", "cached", "cache_write", "completion", "reasoning"];

impl BackendSeries {
    fn new(f: &Families, labels: &BackendLabels) -> Self {
        let name: Arc<str> = Arc::from(labels.name.as_str());
        let one = BackendLabel {
            backend: name.clone(),
        };
        let class = |class: PromptClass| Class {
            backend: name.clone(),
            class: class.as_str(),
        };
        let classes = PromptClass::ALL;
        BackendSeries {
            outcomes: OUTCOMES.map(|outcome| {
                f.requests.get_or_create_owned(&Outcome {
                    backend: name.clone(),
                    outcome,
                })
            }),
            tokens: TOKEN_KINDS.map(|kind| {
                f.tokens.get_or_create_owned(&TokenKind {
                    backend: name.clone(),
                    kind,
                })
            }),
            cost: f.cost.get_or_create_owned(&one),
            counterfactual: f.counterfactual.get_or_create_owned(&one),
            ttft: f.ttft.get_or_create_owned(&one),
            prediction_error: f.prediction_error.get_or_create_owned(&one),
            overhead: f.overhead.get_or_create_owned(&one),
            prefix: ["hit", "miss"].map(|result| {
                f.prefix_lookups.get_or_create_owned(&Lookup {
                    backend: name.clone(),
                    result,
                })
            }),
            expected_cached_tokens: f.expected_cached_tokens.get_or_create_owned(&one),
            ttft_saved: f.ttft_saved.get_or_create_owned(&one),
            decode_tokens: classes.map(|c| f.decode_tokens.get_or_create_owned(&class(c))),
            decode_seconds: classes.map(|c| f.decode_seconds.get_or_create_owned(&class(c))),
            drifting: Default::default(),
            roles: ROLES.map(|role| {
                f.attempts.get_or_create_owned(&Role {
                    backend: name.clone(),
                    role,
                })
            }),
            drift: Default::default(),
            routed: Default::default(),
            genai: Default::default(),
            provider: labels.provider,
            model: Arc::from(labels.model.as_str()),
            name,
        }
    }

    fn genai(&self, operation: &'static str) -> GenAi {
        GenAi {
            gen_ai_operation_name: operation,
            gen_ai_provider_name: self.provider,
            gen_ai_request_model: self.model.clone(),
            switchyard_backend: self.name.clone(),
        }
    }

    /// The GenAI series of a successful `operation` call.
    fn genai_series(&self, f: &Families, operation: &'static str) -> &GenAiSeries {
        let at = OPERATIONS.iter().position(|o| *o == operation).unwrap_or(0);
        self.genai[at].get_or_init(|| {
            let labels = self.genai(operation);
            let tokens = |gen_ai_token_type| {
                f.token_usage.get_or_create_owned(&GenAiTokens {
                    gen_ai_operation_name: operation,
                    gen_ai_provider_name: self.provider,
                    gen_ai_request_model: self.model.clone(),
                    switchyard_backend: self.name.clone(),
                    gen_ai_token_type,
                })
            };
            GenAiSeries {
                duration: f
                    .operation_duration
                    .get_or_create_owned(&self.outcome(operation, None)),
                input_tokens: tokens("input"),
                output_tokens: tokens("output"),
                time_to_first_token: f.time_to_first_token.get_or_create_owned(&labels),
                time_per_output_token: f.time_per_output_token.get_or_create_owned(&labels),
            }
        })
    }

    fn outcome(&self, operation: &'static str, error_type: Option<&'static str>) -> GenAiOutcome {
        GenAiOutcome {
            gen_ai_operation_name: operation,
            gen_ai_provider_name: self.provider,
            gen_ai_request_model: self.model.clone(),
            switchyard_backend: self.name.clone(),
            error_type,
        }
    }
}

/// The metrics of one config. The series are the process's, shared with
/// the next config on reload (per backend name), so a reload never sets a
/// counter back.
pub struct Metrics {
    pub(crate) families: Arc<Families>,
    backends: Vec<Arc<BackendSeries>>,
    /// Spend per configured key, looked up by name (a few string
    /// comparisons; hashing the name cost more).
    keys: std::collections::BTreeMap<String, FloatCounter>,
    /// The route label of a backend named by the caller.
    direct: Arc<str>,
}

impl Metrics {
    pub fn new(backends: &[BackendLabels], keys: &[VirtualKey]) -> Self {
        Self::carrying(backends, keys, None)
    }

    /// Metrics for `backends` and `keys`, continuing `previous`'s series.
    pub fn carrying(
        backends: &[BackendLabels],
        keys: &[VirtualKey],
        previous: Option<&Metrics>,
    ) -> Self {
        let families = previous.map_or_else(|| Arc::new(Families::new()), |m| m.families.clone());
        if keys.is_empty() {
            // Keys gone, or their labels turned off: no earlier config's
            // series stays on show.
            families.key_cost.clear();
        }
        let backends = backends
            .iter()
            .map(|labels| {
                let kept = previous.and_then(|m| {
                    m.backends.iter().find(|b| {
                        *b.name == *labels.name
                            && b.provider == labels.provider
                            && *b.model == *labels.model
                    })
                });
                kept.cloned()
                    .unwrap_or_else(|| Arc::new(BackendSeries::new(&families, labels)))
            })
            .collect::<Vec<_>>();
        let keys = keys
            .iter()
            .map(|key| {
                let holder = Holder {
                    key: Arc::from(key.name.as_str()),
                    team: key.team.as_deref().map(Arc::from),
                };
                (
                    key.name.clone(),
                    families.key_cost.get_or_create_owned(&holder),
                )
            })
            .collect();
        Metrics {
            families,
            backends,
            keys,
            direct: Arc::from("direct"),
        }
    }

    /// Counts a config reload, applied or refused.
    pub fn reloaded(&self, applied: bool) {
        let outcome = if applied { "applied" } else { "failed" };
        self.families
            .reloads
            .get_or_create(&ReloadOutcome { outcome })
            .inc();
    }

    /// Counts a model request refused before any backend call.
    pub fn refused(&self, kind: &'static str) {
        self.families.refused.get_or_create(&Kind { kind }).inc();
    }

    /// Times a tool call through `/mcp`.
    pub fn tool_call(
        &self,
        server: &str,
        tool: &str,
        outcome: &'static str,
        took: std::time::Duration,
    ) {
        self.families
            .tool_seconds
            .get_or_create(&families::ToolCall {
                server: server.to_owned(),
                tool: tool.to_owned(),
                outcome,
            })
            .observe(took.as_secs_f64());
    }

    /// Counts a request refused for its key (missing, unknown).
    pub fn unauthenticated(&self) {
        self.families.unauthenticated.inc();
    }

    /// Counts a response-cache lookup.
    pub fn response_cache(&self, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.families
            .response_cache
            .get_or_create(&families::Result { result })
            .inc();
    }

    /// Counts and times one guardrail hook call.
    pub fn guardrail(
        &self,
        guardrail: &str,
        stage: &'static str,
        outcome: &'static str,
        took: Duration,
    ) {
        let labels = families::GuardrailCall {
            guardrail: guardrail.to_owned(),
            stage,
            outcome,
        };
        self.families.guardrail_calls.get_or_create(&labels).inc();
        self.families
            .guardrail_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// Counts a request a sensitive-data policy acted on, once per kind.
    pub fn sensitive_found(
        &self,
        kinds: &[switchyard_router::sensitive::Kind],
        action: &'static str,
    ) {
        for kind in kinds {
            self.families
                .sensitive
                .get_or_create(&families::SensitiveFound {
                    kind: kind.as_str(),
                    action,
                })
                .inc();
        }
    }

    /// Counts shadow copies of `route`'s requests for `candidate`, by
    /// outcome (`sent`, `queue_full`, `over_budget`, `breaker_open`,
    /// `shutdown`).
    pub fn shadow_copies(
        &self,
        route: &Arc<str>,
        candidate: &Arc<str>,
        outcome: &'static str,
        n: u64,
    ) {
        self.families
            .shadow_copies
            .get_or_create(&families::ShadowCopy {
                route: route.clone(),
                candidate: candidate.clone(),
                outcome,
            })
            .inc_by(n);
    }

    /// The gateway's own time before a call to `backend`.
    pub fn overhead(&self, backend: usize, took: Duration) {
        if let Some(b) = self.backends.get(backend) {
            b.overhead.observe(took.as_secs_f64());
        }
    }

    /// Counts one finished call from its ledger row and what the row does
    /// not say (`call`). An answer from the response cache is no backend
    /// call: only the cache's own counter has it.
    pub fn record(&self, backend: usize, row: &LedgerRow, call: CallFacts) {
        let Some(b) = self.backends.get(backend) else {
            return;
        };
        if call.from_cache {
            return;
        }
        let f = &self.families;
        let outcome = match row.status {
            "ok" => 0,
            "cancelled" | "hedge-lost" => 2,
            "escalated" => 3,
            _ => 1,
        };
        b.outcomes[outcome].inc();
        let key = (
            row.route.clone().unwrap_or_else(|| self.direct.clone()),
            row.reason,
            outcome,
        );
        let known = b.routed.read().unwrap_or_else(|p| p.into_inner());
        if let Some(counter) = known.get(&key) {
            counter.inc();
            drop(known);
        } else {
            // The family's lock is taken with this map's let go, so a
            // scrape holding it never holds up this backend's other calls.
            drop(known);
            let counter = f.routed.get_or_create_owned(&Routed {
                route: key.0.clone(),
                backend: b.name.clone(),
                reason: row.reason,
                outcome: OUTCOMES[outcome],
            });
            counter.inc();
            b.routed
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, counter);
        }
        if let Some(role) = ROLES.iter().position(|r| *r == call.role) {
            b.roles[role].inc();
        }
        let t = &row.tokens;
        for (counter, n) in b.tokens.iter().zip([
            t.prompt(),
            t.cached_input,
            t.cache_write,
            t.output,
            t.reasoning,
        ]) {
            counter.inc_by(n);
        }
        b.cost.inc_by(row.cost_usd.max(0.0));
        b.counterfactual.inc_by(row.counterfactual_usd.max(0.0));
        if let Some(spent) = row.key.as_ref().and_then(|key| self.keys.get(key)) {
            spent.inc_by(row.cost_usd.max(0.0));
        }
        b.prefix[usize::from(row.expected_cached_tokens == 0)].inc();
        b.expected_cached_tokens
            .inc_by(u64::from(row.expected_cached_tokens));
        b.ttft_saved.inc_by(call.ttft_saved_ms.max(0.0) / 1000.0);
        if let Some(ttft) = row.ttft_ms {
            b.ttft.observe(ttft / 1000.0);
            if let Some(predicted) = row.predicted_ttft_ms.filter(|p| p.is_finite()) {
                b.prediction_error.observe((ttft - predicted) / 1000.0);
            }
        }
        if let Some(rate) = row.decode_tokens_per_s
            && rate > 0.0
        {
            let decoded = t.output.saturating_sub(1);
            let i = row.prompt_class.index();
            b.decode_tokens[i].inc_by(decoded);
            b.decode_seconds[i].inc_by(decoded as f64 / rate);
        }
        self.record_genai(b, row, call);
    }

    /// The GenAI semantic-convention histograms of one call. A call that
    /// did not answer (failed, or stopped: the client left, the other hedge
    /// leg won) has only its duration, with its `error_type`.
    fn record_genai(&self, b: &BackendSeries, row: &LedgerRow, call: CallFacts) {
        let f = &self.families;
        let error_type = match row.status {
            "ok" | "escalated" => None,
            "hedge-lost" => Some("cancelled"),
            other => Some(other),
        };
        if let Some(error_type) = error_type {
            // Rarer than answers: their series are looked up by kind.
            f.operation_duration
                .get_or_create(&b.outcome(call.operation, Some(error_type)))
                .observe(call.upstream_seconds);
            return;
        }
        let series = b.genai_series(f, call.operation);
        series.duration.observe(call.upstream_seconds);
        // Token usage is for calls whose tokens are known (the
        // conventions: not reported when they cannot be counted).
        if !row.estimated {
            series.input_tokens.observe(row.tokens.prompt() as f64);
            series.output_tokens.observe(row.tokens.output as f64);
        }
        if let Some(ttft) = call.upstream_ttft {
            series.time_to_first_token.observe(ttft.as_secs_f64());
            if let Some(rate) = row.decode_tokens_per_s.filter(|r| *r > 0.0) {
                series.time_per_output_token.observe(1.0 / rate);
            }
        }
    }

    /// The share of drafted tokens the engine reports it accepted.
    pub fn set_engine_acceptance(&self, backend: usize, acceptance: f64) {
        if let Some(b) = self.backends.get(backend) {
            self.families
                .engine_acceptance
                .get_or_create(&BackendLabel {
                    backend: b.name.clone(),
                })
                .set(acceptance);
        }
    }

    /// The decode speed measured on `backend` for prompts of `class`
    /// (tokens/s), if any call has measured it.
    pub fn decode_speed(&self, backend: usize, class: PromptClass) -> Option<f64> {
        let b = self.backends.get(backend)?;
        let tokens = b.decode_tokens[class.index()].get();
        let seconds = b.decode_seconds[class.index()].get();
        (tokens > 0 && seconds > 0.0).then(|| tokens as f64 / seconds)
    }
}

/// What a call's row does not say that its metrics need.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts {
    /// The GenAI operation (`chat`, `text_completion`, `embeddings`).
    pub operation: &'static str,
    /// `primary`, `hedge`, `fallback` or `cascade_step`.
    pub role: &'static str,
    pub ttft_saved_ms: f64,
    /// The upstream call's own time (from the request sent), and its first
    /// token's.
    pub upstream_seconds: f64,
    pub upstream_ttft: Option<Duration>,
    /// Answered from the response cache: no upstream call.
    pub from_cache: bool,
}
