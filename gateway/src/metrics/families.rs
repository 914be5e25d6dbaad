//! The metric families and their label sets. Every label value comes from
//! the config (backend, route, key, team and model names) or from a closed
//! set (outcomes, reasons, kinds): never from a request, so the number of
//! series is bounded by the config, whatever callers send.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use crate::metrics::buckets;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackendLabel {
    pub backend: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub backend: Arc<str>,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Lookup {
    pub backend: Arc<str>,
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Routed {
    /// The route's name, or `direct` for a backend named by the caller.
    pub route: Arc<str>,
    pub backend: Arc<str>,
    pub reason: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GuardrailCall {
    pub guardrail: String,
    /// `pre_call` or `post_call`.
    pub stage: &'static str,
    /// `allow`, `block`, `timeout` or `error`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SensitiveFound {
    /// `card`, `email`, ... (never a value).
    pub kind: &'static str,
    /// What the request's policy did: `refuse`, `local_only`, `mask`,
    /// `allow`.
    pub action: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowCopy {
    pub route: Arc<str>,
    pub candidate: Arc<str>,
    /// `sent`, or why not: `queue_full`, `over_budget`, `breaker_open`,
    /// `shutdown`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenKind {
    pub backend: Arc<str>,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Role {
    pub backend: Arc<str>,
    pub role: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Class {
    pub backend: Arc<str>,
    pub class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Holder {
    pub key: Arc<str>,
    pub team: Option<Arc<str>>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorWindow {
    pub backend: Arc<str>,
    /// `recent` (about the last ten calls) or `baseline` (the last hundred).
    pub window: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Kind {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Result {
    pub result: &'static str,
}

/// The GenAI semantic conventions' attributes, as Prometheus labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GenAi {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_request_model: Arc<str>,
    pub switchyard_backend: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GenAiOutcome {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_request_model: Arc<str>,
    pub switchyard_backend: Arc<str>,
    /// Unset when the call succeeded.
    pub error_type: Option<&'static str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GenAiTokens {
    pub gen_ai_operation_name: &'static str,
    pub gen_ai_provider_name: &'static str,
    pub gen_ai_request_model: Arc<str>,
    pub switchyard_backend: Arc<str>,
    pub gen_ai_token_type: &'static str,
}

pub type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;
pub type FloatCounter = Counter<f64, AtomicU64>;
pub type FloatGauge = Gauge<f64, AtomicU64>;

/// The process's families: created once and shared by every config's
/// metrics, so a reload never sets a series back. Each backend's series
/// keep handles to their entries (`BackendSeries`, some made on first use),
/// so no family but `key_cost` may be cleared or lose an entry: a kept
/// handle would go on counting where no scrape sees it.
pub struct Families {
    pub registry: Registry,
    pub requests: Family<Outcome, Counter>,
    pub routed: Family<Routed, Counter>,
    pub attempts: Family<Role, Counter>,
    pub tokens: Family<TokenKind, Counter>,
    pub cost: Family<BackendLabel, FloatCounter>,
    pub counterfactual: Family<BackendLabel, FloatCounter>,
    pub key_cost: Family<Holder, FloatCounter>,
    pub ttft: Histograms<BackendLabel>,
    pub prediction_error: Histograms<BackendLabel>,
    pub overhead: Histograms<BackendLabel>,
    pub prefix_lookups: Family<Lookup, Counter>,
    pub expected_cached_tokens: Family<BackendLabel, Counter>,
    pub ttft_saved: Family<BackendLabel, FloatCounter>,
    pub decode_tokens: Family<Class, Counter>,
    pub decode_seconds: Family<Class, FloatCounter>,
    pub decode_drift: Family<BackendLabel, FloatGauge>,
    pub prefill_drift: Family<BackendLabel, FloatGauge>,
    pub error_share: Family<ErrorWindow, FloatGauge>,
    pub engine_acceptance: Family<BackendLabel, FloatGauge>,
    pub refused: Family<Kind, Counter>,
    pub unauthenticated: Counter,
    pub reloads: Family<ReloadOutcome, Counter>,
    pub response_cache: Family<Result, Counter>,
    pub shadow_copies: Family<ShadowCopy, Counter>,
    pub sensitive: Family<SensitiveFound, Counter>,
    pub guardrail_calls: Family<GuardrailCall, Counter>,
    pub guardrail_seconds: Histograms<GuardrailCall>,
    pub tool_seconds: Histograms<ToolCall>,
    pub operation_duration: Histograms<GenAiOutcome>,
    pub token_usage: Histograms<GenAiTokens>,
    pub time_to_first_token: Histograms<GenAi>,
    pub time_per_output_token: Histograms<GenAi>,
}

/// A tool call through `/mcp`: its server, tool and outcome.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolCall {
    pub server: String,
    pub tool: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadOutcome {
    pub outcome: &'static str,
}

fn histograms<L>(buckets: fn() -> Histogram) -> Histograms<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    Family::new_with_constructor(buckets)
}

impl Families {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let families = Families {
            registry: Registry::default(),
            requests: Family::default(),
            routed: Family::default(),
            attempts: Family::default(),
            tokens: Family::default(),
            cost: Family::default(),
            counterfactual: Family::default(),
            key_cost: Family::default(),
            ttft: histograms(buckets::time_to_first_token),
            prediction_error: histograms(buckets::prediction_error),
            overhead: histograms(buckets::overhead),
            prefix_lookups: Family::default(),
            expected_cached_tokens: Family::default(),
            ttft_saved: Family::default(),
            decode_tokens: Family::default(),
            decode_seconds: Family::default(),
            decode_drift: Family::default(),
            prefill_drift: Family::default(),
            error_share: Family::default(),
            engine_acceptance: Family::default(),
            refused: Family::default(),
            unauthenticated: Counter::default(),
            reloads: Family::default(),
            response_cache: Family::default(),
            shadow_copies: Family::default(),
            sensitive: Family::default(),
            guardrail_calls: Family::default(),
            // Milliseconds to seconds, as a first token's.
            guardrail_seconds: histograms(buckets::time_to_first_token),
            tool_seconds: histograms(buckets::operation_duration),
            operation_duration: histograms(buckets::operation_duration),
            token_usage: histograms(buckets::token_usage),
            time_to_first_token: histograms(buckets::time_to_first_token),
            time_per_output_token: histograms(buckets::time_per_output_token),
        };
        let f = &families;
        let r = &mut registry;
        r.register("switchyard_requests", "Calls to a backend by outcome (a client that left and a hedge's losing leg are cancelled, a cascade's rejected answer escalated)", f.requests.clone());
        r.register("switchyard_routed_requests", "Calls by route (direct: a backend named by the caller), backend, routing reason and outcome", f.routed.clone());
        r.register(
            "switchyard_attempts",
            "Calls by what they were to their request: primary, hedge, fallback or cascade_step",
            f.attempts.clone(),
        );
        r.register("switchyard_tokens", "Tokens by kind: prompt (cached and cache writes included), cached, cache_write, completion, reasoning (part of completion)", f.tokens.clone());
        r.register(
            "switchyard_cost_usd",
            "Spend: cloud list price or local hardware share",
            f.cost.clone(),
        );
        r.register("switchyard_counterfactual_cost_usd", "What the same calls would have cost on the reference cloud model (accounting.reference)", f.counterfactual.clone());
        r.register(
            "switchyard_key_cost_usd",
            "Spend per virtual key (by its configured name, never the secret) and team",
            f.key_cost.clone(),
        );
        r.register_with_unit(
            "switchyard_ttft",
            "Time to first token of streamed calls, from before the wait for a backend slot",
            Unit::Seconds,
            f.ttft.clone(),
        );
        r.register_with_unit("switchyard_ttft_prediction_error", "Measured minus predicted time to first token (positive: slower than predicted), for calls routed with a prediction", Unit::Seconds, f.prediction_error.clone());
        r.register_with_unit("switchyard_gateway_overhead", "A request's time in the gateway before its first upstream call: reading the body (as fast as the client sends it), routing and admission; the wait for a backend slot excluded", Unit::Seconds, f.overhead.clone());
        r.register(
            "switchyard_prefix_lookups",
            "Calls by whether the prefix index expected part of the prompt cached",
            f.prefix_lookups.clone(),
        );
        r.register("switchyard_prefix_expected_cached_tokens", "Prompt tokens the prefix index expected cached (compare switchyard_tokens_total{kind=\"cached\"}, as reported)", f.expected_cached_tokens.clone());
        r.register_with_unit(
            "switchyard_prefix_ttft_saved",
            "First-token time the reported cached tokens saved, by the latency model",
            Unit::Seconds,
            f.ttft_saved.clone(),
        );
        r.register("switchyard_decode_tokens", "Tokens decoded after the first, by prompt class (with switchyard_decode_seconds_total: the effective decode speed, drafting included)", f.decode_tokens.clone());
        r.register_with_unit(
            "switchyard_decode",
            "Time spent decoding after the first token, by prompt class",
            Unit::Seconds,
            f.decode_seconds.clone(),
        );
        r.register("switchyard_decode_drift_ratio", "Recent decode speed (about the last ten calls) over its baseline (about the last hundred), at one context length", f.decode_drift.clone());
        r.register("switchyard_prefill_drift_ratio", "Recent prefill speed (about the last ten calls alone with long uncached prompts) over its baseline (about the last hundred)", f.prefill_drift.clone());
        r.register("switchyard_upstream_error_share", "Share of the backend's calls that failed upstream, recent (about the last ten) and baseline (about the last hundred)", f.error_share.clone());
        r.register(
            "switchyard_engine_draft_acceptance_ratio",
            "Accepted / drafted tokens as the engine's own /metrics report it",
            f.engine_acceptance.clone(),
        );
        r.register(
            "switchyard_refused_requests",
            "Model requests refused before any backend call, by error kind",
            f.refused.clone(),
        );
        r.register(
            "switchyard_unauthenticated_requests",
            "Requests refused for a missing or unknown key",
            f.unauthenticated.clone(),
        );
        r.register("switchyard_config_reloads", "Config reloads, by outcome: applied, or failed (the file was invalid or a backend's client could not be built; the running config stayed)", f.reloads.clone());
        r.register(
            "switchyard_mcp_tool_call_duration_seconds",
            "Tool calls through /mcp by server, tool and outcome (ok, tool_error, server_gone, unavailable, error), and how long each took",
            f.tool_seconds.clone(),
        );
        r.register(
            "switchyard_response_cache_lookups",
            "Response-cache lookups on routes that cache, by result",
            f.response_cache.clone(),
        );
        r.register(
            "switchyard_shadow_copies",
            "Sampled copies of a route's requests for its shadow candidate: sent, or dropped (queue_full, over_budget, breaker_open, shutdown)",
            f.shadow_copies.clone(),
        );
        r.register(
            "switchyard_sensitive_requests",
            "Requests a sensitive-data policy acted on, by kind found and the action taken (a request with two kinds counts once for each)",
            f.sensitive.clone(),
        );
        r.register(
            "switchyard_guardrail_calls",
            "Guardrail hook calls, by hook, stage (pre_call, post_call) and outcome (allow, block, timeout, error)",
            f.guardrail_calls.clone(),
        );
        r.register_with_unit(
            "switchyard_guardrail",
            "Time a guardrail hook took to answer, by hook, stage and outcome",
            Unit::Seconds,
            f.guardrail_seconds.clone(),
        );
        r.register_with_unit(
            "gen_ai_client_operation_duration",
            "GenAI operation duration (semantic conventions), per upstream call",
            Unit::Seconds,
            f.operation_duration.clone(),
        );
        r.register(
            "gen_ai_client_token_usage",
            "Tokens used per upstream call, by gen_ai_token_type (input includes cached)",
            f.token_usage.clone(),
        );
        r.register_with_unit(
            "gen_ai_server_time_to_first_token",
            "Time to the first output token of streamed upstream calls",
            Unit::Seconds,
            f.time_to_first_token.clone(),
        );
        r.register_with_unit(
            "gen_ai_server_time_per_output_token",
            "Time per output token after the first, of streamed upstream calls",
            Unit::Seconds,
            f.time_per_output_token.clone(),
        );
        // Series of closed sets start at zero, so a dashboard shows 0
        // rather than nothing before the first event.
        for outcome in ["applied", "failed"] {
            let _ = families.reloads.get_or_create(&ReloadOutcome { outcome });
        }
        for result in ["hit", "miss"] {
            let _ = families.response_cache.get_or_create(&Result { result });
        }
        Families {
            registry,
            ..families
        }
    }
}
