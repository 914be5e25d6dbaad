//! The configuration file as written. Strict: unknown fields are errors.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::raw_accounting::{RawAccounting, RawAuth, RawLedger, RawPrice};
use super::{CascadeCheck, ConfigError, SimPreset, Tier};
use crate::profiles::Profile;

pub(super) fn parse(text: &str, source: &str) -> Result<RawConfig, ConfigError> {
    parse_any(text, source)
}

/// Deserializes YAML, keeping the field path and line of the first error.
pub(super) fn parse_any<T: serde::de::DeserializeOwned>(
    text: &str,
    source: &str,
) -> Result<T, ConfigError> {
    let de = serde_norway::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let line = inner.location().map(|l| l.line());
        // The parser's message repeats the path and position we report
        // separately; keep only what it says about the problem.
        let mut message = inner.to_string();
        if let Some((prefix, rest)) = message.split_once(": ")
            && path.starts_with(prefix)
        {
            message = rest.to_owned();
        }
        if let Some(at) = message.rfind(" at line ") {
            message.truncate(at);
        }
        let message = plain_types(&message);
        ConfigError {
            source_name: source.to_owned(),
            path: if path == "." { String::new() } else { path },
            line,
            message,
        }
    })
}

/// The parser's type names (`expected usize`, `expected f64`) in words a
/// config's reader uses.
fn plain_types(message: &str) -> String {
    const WORDS: [(&str, &str); 10] = [
        ("usize", "a whole number, 0 or more"),
        ("u64", "a whole number, 0 or more"),
        ("u32", "a whole number, 0 or more"),
        ("u16", "a whole number, 0 or more"),
        ("u8", "a whole number, 0 or more"),
        ("i64", "a whole number"),
        ("i32", "a whole number"),
        ("f64", "a number"),
        ("f32", "a number"),
        ("a borrowed string", "a string"),
    ];
    let Some((before, after)) = message.rsplit_once("expected ") else {
        return message.to_owned();
    };
    match WORDS.iter().find(|(rust, _)| after == *rust) {
        Some((_, words)) => format!("{before}expected {words}"),
        None => message.to_owned(),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    pub backends: BTreeMap<String, RawBackend>,
    #[serde(default)]
    pub routes: BTreeMap<String, RawRoute>,
    #[serde(default)]
    pub accounting: RawAccounting,
    #[serde(default)]
    pub ledger: RawLedger,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub limits: RawLimits,
    /// A file of latency hints per backend (as `switchyard probe` writes).
    pub latency_hints: Option<String>,
    pub telemetry: Option<super::telemetry::RawTelemetry>,
    #[serde(default)]
    pub state: super::state::RawState,
    #[serde(default)]
    pub predictors: BTreeMap<String, super::predictors::RawPredictor>,
    #[serde(default)]
    pub guardrails: BTreeMap<String, super::guardrails::RawGuardrail>,
    #[serde(default)]
    pub mcp: super::mcp::RawMcp,
    #[serde(default)]
    pub batches: super::batches::RawBatches,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawServer {
    pub listen: String,
    pub max_body_bytes: usize,
    pub max_concurrent_requests: usize,
    pub shutdown_grace_ms: u64,
    pub header_read_timeout_ms: u64,
    pub body_read_timeout_ms: u64,
    pub body_idle_timeout_ms: u64,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    pub http2_max_concurrent_streams: u32,
    pub http2_idle_timeout_ms: u64,
    pub http2_keepalive_interval_ms: u64,
    pub http2_keepalive_timeout_ms: u64,
    pub max_connection_age_ms: Option<u64>,
    pub tls: Option<RawTls>,
    pub watch_config: bool,
}

/// `server.tls`: serve HTTPS with this certificate chain and key (PEM).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTls {
    pub cert_file: String,
    pub key_file: String,
    pub client_ca_file: Option<String>,
    /// Revocation lists (PEM or DER) for the client CA's certificates.
    #[serde(default)]
    pub crl_files: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct RawLimits {
    pub max_n: u32,
}

impl Default for RawLimits {
    fn default() -> Self {
        RawLimits { max_n: 8 }
    }
}

impl Default for RawServer {
    fn default() -> Self {
        RawServer {
            listen: "127.0.0.1:8080".to_owned(),
            max_body_bytes: 8 * 1024 * 1024,
            max_concurrent_requests: 1024,
            shutdown_grace_ms: 15_000,
            header_read_timeout_ms: 30_000,
            body_read_timeout_ms: 60_000,
            body_idle_timeout_ms: 15_000,
            max_header_bytes: 64 * 1024,
            max_connections: 10_000,
            http2_max_concurrent_streams: 200,
            http2_idle_timeout_ms: 120_000,
            http2_keepalive_interval_ms: 30_000,
            http2_keepalive_timeout_ms: 20_000,
            max_connection_age_ms: None,
            tls: None,
            watch_config: true,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBackend {
    pub tier: Tier,
    /// Whether what is sent stays on machines the operator controls; the
    /// tier says when unset (small and mid are local).
    pub local: Option<bool>,
    /// Upstream model name; the backend's name when unset.
    pub model: Option<String>,
    pub openai: Option<RawOpenAi>,
    pub anthropic: Option<RawAnthropic>,
    pub sim: Option<RawSim>,
    pub gemini: Option<super::raw_cloud::RawGemini>,
    pub azure: Option<super::raw_cloud::RawAzure>,
    pub vertex: Option<super::raw_cloud::RawVertex>,
    pub bedrock: Option<super::raw_cloud::RawBedrock>,
    #[serde(default)]
    pub timeouts: RawTimeouts,
    pub max_concurrency: Option<usize>,
    /// Backends naming the same hardware share it (and slow each other).
    pub hardware: Option<String>,
    pub context_window: Option<u32>,
    pub max_response_bytes: Option<usize>,
    #[serde(default)]
    pub passthrough: RawPassthrough,
    pub tls: Option<RawBackendTls>,
    /// Requests that may wait for a slot when `max_concurrency` is reached.
    pub max_queue: Option<usize>,
    /// The share of a local backend's slots batch lines leave free.
    pub interactive_reserve: Option<f64>,
    pub price: Option<RawPrice>,
    /// Starting figures for the latency model.
    pub latency: Option<RawLatencyHints>,
    pub breaker: Option<RawBreaker>,
    pub prefix_cache: Option<RawPrefixCache>,
    pub health_check: Option<super::health::RawHealthCheck>,
}

/// `tls:` on a backend: which CAs its certificate may chain to, and the
/// gateway's own certificate when the backend asks for one (mTLS).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBackendTls {
    pub ca_file: Option<String>,
    #[serde(default)]
    pub roots: super::TrustRoots,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
}

/// `passthrough:` on a backend: request fields never sent to it.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPassthrough {
    #[serde(default)]
    pub deny: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrefixCache {
    pub kv_tokens: Option<u64>,
    pub share: Option<super::CacheShare>,
    pub ttl_s: Option<u64>,
    pub balance: Option<super::Balance>,
    pub max_imbalance: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLatencyHints {
    pub ttft_ms: Option<u64>,
    pub prefill_tokens_per_s: Option<f64>,
    pub decode_tokens_per_s: Option<f64>,
    pub concurrency: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBreaker {
    pub failures: Option<u32>,
    pub cooldown_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAnthropic {
    pub base_url: String,
    /// `env:NAME`.
    pub api_key: Option<String>,
    pub version: Option<String>,
    /// Mark long stable prefixes with `cache_control` when the client set none.
    #[serde(default)]
    pub prompt_caching: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOpenAi {
    pub base_url: String,
    /// `env:NAME`.
    pub api_key: Option<String>,
    /// Whether the server speaks the Responses API itself.
    #[serde(default)]
    pub responses: bool,
    /// The serving engine, for its extras: `llamacpp`, `vllm` or `sglang`.
    pub engine: Option<super::Engine>,
    /// llama.cpp: the server's `--parallel` slots, so a session keeps its slot.
    pub slots: Option<u32>,
    /// Where the engine's Prometheus metrics are; `<origin>/metrics` when unset.
    pub metrics_url: Option<String>,
    /// How often they are read (10 s when unset).
    pub metrics_interval_ms: Option<u64>,
    /// More servers of the same model, beside `base_url`.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// Send `prompt_cache_key` (from the prompt's prefix chain) when the
    /// client did not; on by default for api.openai.com.
    pub prompt_cache_key: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    pub connect_ms: Option<u64>,
    pub first_byte_ms: Option<u64>,
    pub idle_ms: Option<u64>,
}

/// Simulator parameters: a preset plus any overrides.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSim {
    pub preset: Option<SimPreset>,
    pub seed: Option<u64>,
    pub base_ttft_ms: Option<u64>,
    pub prefill_tokens_per_s: Option<f64>,
    pub decode_tokens_per_s: Option<f64>,
    pub decode_halving_context: Option<f64>,
    pub jitter: Option<f64>,
    pub max_concurrency: Option<usize>,
    pub max_queue: Option<usize>,
    pub prefix_cache_blocks: Option<u64>,
    pub context_window: Option<u32>,
    pub default_max_tokens: Option<u32>,
    pub embedding_dimensions: Option<usize>,
    pub speculative: Option<RawSpeculation>,
    #[serde(default)]
    pub faults: RawFaults,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSpeculation {
    pub acceptance_rate: f64,
    pub draft_tokens: u32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFaults {
    #[serde(default)]
    pub error_rate: f64,
    #[serde(default)]
    pub stall_rate: f64,
    #[serde(default)]
    pub stall_ms: u64,
    #[serde(default)]
    pub reset_rate: f64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    #[serde(default)]
    pub aliases: Vec<String>,
    pub profile: Option<Profile>,
    /// Written as a one-key map: `strategy: {split: {...}}`.
    #[serde(with = "serde_norway::with::singleton_map")]
    pub strategy: RawStrategy,
    #[serde(default)]
    pub fallbacks: Vec<String>,
    /// Latency budget; the profile's when unset.
    pub budget: Option<RawLatencyBudget>,
    /// Retries of a failed backend before moving on (before the first byte).
    pub retries: Option<u32>,
    pub hedge: Option<RawHedge>,
    pub speculative: Option<RawSpeculative>,
    pub response_cache: Option<RawResponseCache>,
    pub shadow: Option<RawShadow>,
    pub sensitive: Option<super::sensitive::RawSensitive>,
    /// Guardrail hooks (names under `guardrails:`) asked for every request.
    #[serde(default)]
    pub guardrails: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawShadow {
    pub backend: String,
    pub sample: f64,
    pub max_concurrency: Option<usize>,
    pub queue: Option<usize>,
    #[serde(default)]
    pub profiles: Vec<Profile>,
    pub daily_usd: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResponseCache {
    pub ttl_s: Option<u64>,
    pub max_entries: Option<u64>,
    pub share: Option<super::route::CacheShare>,
    #[serde(default)]
    pub any_temperature: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpeculative {
    pub n_max: Option<u32>,
    pub n_min: Option<u32>,
    pub p_min: Option<f64>,
    #[serde(default)]
    pub disable_for: Vec<crate::speculation::PromptClass>,
    pub min_acceptance: Option<f64>,
    pub instead: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLatencyBudget {
    pub ttft_ms: Option<u64>,
    pub min_tokens_per_s: Option<f64>,
    pub total_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHedge {
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Hedged spend per key per day, USD.
    pub max_usd_per_key_per_day: Option<f64>,
}

/// A target share's `easy` side: one backend, or a weighted split.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawEasy {
    One(String),
    Split(BTreeMap<String, f64>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(super) enum RawStrategy {
    /// `split: {weights: {backend: weight, ...}, sticky: true}`
    Split {
        weights: BTreeMap<String, f64>,
        #[serde(default = "yes")]
        sticky: bool,
    },
    /// `target_share: {hard: big, easy: small, share: 0.2, window: 2000}`;
    /// `easy` may be a split, `{small: 40, mid: 40}`.
    TargetShare {
        hard: String,
        easy: RawEasy,
        share: f64,
        window: Option<usize>,
        by: Option<String>,
    },
    /// `learned: {predictor: p, threshold: 0.5, easy: small, hard: large, escalate_on: [length]}`
    Learned {
        predictor: String,
        threshold: Option<f64>,
        easy: String,
        hard: String,
        #[serde(default)]
        escalate_on: Vec<CascadeCheck>,
        min_mean_logprob: Option<f64>,
        explore: Option<f64>,
    },
    /// `rules: [{when: {...}, to: backend}, ..., {to: default}]`
    Rules(Vec<RawRule>),
    /// `cheapest_within_budget: {candidates: [small, mid, large]}`
    CheapestWithinBudget { candidates: Vec<String> },
    /// `fastest: {candidates: [small, mid, large]}`
    Fastest { candidates: Vec<String> },
    /// `cascade: {order: [small, large], escalate_on: [length, empty]}`
    Cascade {
        order: Vec<String>,
        escalate_on: Option<Vec<CascadeCheck>>,
        min_mean_logprob: Option<f64>,
    },
}

fn yes() -> bool {
    true
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    #[serde(default)]
    pub when: RawCondition,
    pub to: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCondition {
    pub model: Option<String>,
    /// One of these virtual keys (by name).
    pub keys: Option<Vec<String>>,
    /// A key of one of these teams.
    pub teams: Option<Vec<String>>,
    pub header: Option<RawHeaderMatch>,
    pub profile: Option<Vec<Profile>>,
    pub tools: Option<bool>,
    pub images: Option<bool>,
    pub streaming: Option<bool>,
    pub min_prompt_tokens: Option<u32>,
    pub max_prompt_tokens: Option<u32>,
    pub regex: Option<String>,
    pub keywords: Option<Vec<String>>,
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
    pub similar_to: Option<RawSimilar>,
    pub predicted_fail: Option<RawPredictedFail>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPredictedFail {
    pub predictor: Option<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHeaderMatch {
    pub name: String,
    pub value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSimilar {
    pub examples: Vec<String>,
    pub encoder: Option<String>,
    #[serde(default = "default_similarity")]
    pub threshold: f64,
}

fn default_similarity() -> f64 {
    0.5
}
