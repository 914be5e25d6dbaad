//! Configuration: YAML is parsed into raw types (`raw`), then validated into
//! the types below, which the program uses. Raw types mirror the file and are
//! strict (`deny_unknown_fields`); validated types carry only checked values.

mod accounting;
mod adapter;
mod batches;
mod error;
mod guardrails;
mod health;
mod locate;
mod mcp;
mod predictors;
mod raw;
mod raw_accounting;
mod raw_cloud;
mod route;
mod sensitive;
mod sim;
mod state;
mod stored_keys;
mod telemetry;
mod validate;
mod validate_accounting;
mod validate_adapter;
mod validate_route;
mod validate_shadow;

#[cfg(test)]
mod adapter_tests;
#[cfg(test)]
mod check_tests;
#[cfg(test)]
mod predictor_tests;
#[cfg(test)]
mod reference_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::pricing::Pricing;

pub use accounting::{
    Auth, Durability, LedgerSettings, McpAccess, ModelAccess, OnExhausted, OnSpoolFull,
    PostgresLedger, PostgresUrl, Reference, SpendLimit, SpendScope, Team, VirtualKey, Widening,
    redact_password,
};
pub use adapter::{
    AnthropicBackend, AzureAuth, AzureBackend, BackendAdapter, BedrockBackend, BedrockKeys,
    GeminiBackend, OpenAiBackend, VertexBackend,
};
pub use batches::BatchSettings;
pub use error::ConfigError;
pub use guardrails::{Guardrail, GuardrailStage};
pub use health::HealthCheck;
pub use mcp::{HeaderValueSource, McpServer, McpSettings, McpTransport};
pub use predictors::Predictor;
pub use route::{CacheShare, Hedge, LatencyBudget, ResponseCacheSettings, Shadow};
pub use route::{
    CascadeCheck, Condition, HeaderMatch, Pattern, PredictedFail, Route, RouteStrategy, Rule,
    Similar,
};
pub use sensitive::{SENSITIVE_KINDS, SensitiveAction, SensitivePolicy};
pub use sim::{SimFaults, SimParams, SimPreset, SimSpeculation};
pub use state::{OnUnavailable, RedisState, Secretive, SharedState};
pub use telemetry::Telemetry;
pub use validate_accounting::check_postgres_url;

/// A validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub server: ServerSettings,
    /// Backends by name, in name order.
    pub backends: BTreeMap<String, Backend>,
    /// Routes by name, in name order. Route and backend names never collide.
    pub routes: BTreeMap<String, Route>,
    /// The cloud model every request is also priced on (savings reports).
    pub reference: Option<Reference>,
    pub ledger: LedgerSettings,
    pub auth: Auth,
    pub limits: Limits,
    /// Output tokens budgets reserve for a request that sets no
    /// `max_tokens`, on a backend whose context window is unknown
    /// (`accounting.default_max_tokens`; 4096 unless set). Where the window
    /// is known, the window less the prompt is reserved instead.
    pub default_max_tokens: u32,
    /// The latency-hints file the config names, as written (relative to
    /// the config file); the caller reads it and calls
    /// [`Config::apply_latency_hints`].
    pub latency_hints: Option<String>,
    /// OpenTelemetry traces: `None` unless the file has a `telemetry:`
    /// section (the environment may still turn them on).
    pub telemetry: Option<Telemetry>,
    /// Budgets and rate limits shared between replicas (`state:`); empty:
    /// each process keeps its own.
    pub state: SharedState,
    /// Learned predictors by name (`predictors:`).
    pub predictors: BTreeMap<String, Predictor>,
    /// Guardrail hooks routes may ask, by name.
    pub guardrails: BTreeMap<String, Guardrail>,
    /// The MCP servers `/mcp` serves.
    pub mcp: McpSettings,
    /// The Files and Batches API.
    pub batches: BatchSettings,
}

impl Config {
    /// What a valid config still does that its author should know:
    /// `switchyard check` prints these, `serve` logs them.
    pub fn warnings(&self) -> Vec<String> {
        self.backends
            .values()
            .filter(|b| b.pricing == crate::pricing::Pricing::Unpriced)
            .map(|b| {
                format!(
                    "backend `{}` ({}, model `{}`) has no price, set or built in: its ledger rows cost 0 and say `unpriced`, and keys with budgets may not use it; set `price:`",
                    b.name,
                    b.tier.as_str(),
                    b.upstream_model
                )
            })
            .collect()
    }

    /// Every `env:NAME` the config reads at start, as `(field path, NAME)`:
    /// backends' API keys, the PostgreSQL ledger's URL, Redis's URL.
    pub fn env_references(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for backend in self.backends.values() {
            for (field, var) in backend.adapter.env_references() {
                out.push((format!("backends.{}.{field}", backend.name), var.to_owned()));
            }
        }
        if let Some(postgres) = &self.ledger.postgres
            && let PostgresUrl::Env(var) = &postgres.url
        {
            out.push(("ledger.postgres.url".to_owned(), var.clone()));
        }
        for hook in self.guardrails.values() {
            if let Some(var) = &hook.api_key_env {
                out.push((format!("guardrails.{}.api_key", hook.name), var.clone()));
            }
        }
        if let Some(redis) = &self.state.redis
            && let state::Secretive::Env(var) = &redis.url
        {
            out.push(("state.redis.url".to_owned(), var.clone()));
        }
        out
    }

    /// Parses and validates YAML text. `source` names the text in errors
    /// (a file path, or `<embedded default>`).
    pub fn from_yaml(text: &str, source: &str) -> Result<Self, ConfigError> {
        let raw = raw::parse(text, source)?;
        validate::validate(raw, text, source)
    }

    /// Gives a predictor its weights file's text, which the caller read
    /// (from the path in [`Predictor::weights`]) and checked.
    pub fn apply_predictor_weights(&mut self, predictor: &str, text: &str) {
        if let Some(p) = self.predictors.get_mut(predictor) {
            p.weights_text = Some(text.into());
        }
    }

    /// Fills each backend's unset latency hints from a hints file (YAML:
    /// backend name to `ttft_ms`, `prefill_tokens_per_s`,
    /// `decode_tokens_per_s`, `concurrency`). Hints for a backend the config
    /// does not have are an error.
    pub fn apply_latency_hints(&mut self, text: &str, source: &str) -> Result<(), ConfigError> {
        validate::apply_latency_hints(self, text, source)
    }

    /// Every model name a caller may send: routes and their aliases (a
    /// wildcard route as written, `openai/*`), then backends.
    pub fn model_names(&self) -> Vec<String> {
        let routes = self
            .routes
            .values()
            .flat_map(|r| std::iter::once(&r.name).chain(&r.aliases));
        routes.chain(self.backends.keys()).cloned().collect()
    }
}

/// Simulator parameters from a YAML mapping of the fields a backend's `sim:`
/// section takes (`preset`, `decode_tokens_per_s`, `faults`, ...).
pub fn sim_params_from_yaml(text: &str, source: &str) -> Result<SimParams, ConfigError> {
    validate::sim_params_from_yaml(text, source)
}

/// Listener and request limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSettings {
    pub listen: SocketAddr,
    /// Largest request body accepted; larger bodies get 413.
    pub max_body_bytes: usize,
    /// Requests in flight at once across the gateway; more get 503.
    pub max_concurrent_requests: usize,
    /// How long in-flight requests and streams may run after a shutdown
    /// signal before the process exits anyway.
    pub shutdown_grace: Duration,
    /// How long a client has to send a request's head before it is
    /// disconnected: from accept to the first head (TLS handshake and
    /// protocol detection included), then each later HTTP/1 head.
    pub header_read_timeout: Duration,
    /// How long a client has to send a request's body (408 after).
    pub body_read_timeout: Duration,
    /// The longest a client may pause while sending a body (408 after).
    pub body_idle_timeout: Duration,
    /// The largest request head (431 past it on HTTP/1).
    pub max_header_bytes: usize,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Streams one HTTP/2 connection may have open at once.
    pub http2_max_concurrent_streams: u32,
    /// A connection with no request in flight for this long is closed
    /// (GOAWAY on HTTP/2; an idle HTTP/1 keep-alive is already bounded by
    /// the header read timeout).
    pub http2_idle_timeout: Duration,
    /// How often an HTTP/2 connection is pinged.
    pub http2_keepalive_interval: Duration,
    /// How long a ping's answer may take before the connection is closed.
    pub http2_keepalive_timeout: Duration,
    /// Connections older than this are asked to close after their requests
    /// (so clients spread over new replicas); unset, no limit.
    pub max_connection_age: Option<Duration>,
    /// Serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with these files.
    pub tls: Option<TlsFiles>,
    /// Reload the config when its file changes (SIGHUP and
    /// `POST /admin/reload` reload it whatever this says).
    pub watch_config: bool,
}

/// A certificate chain and its private key, PEM files (paths as written,
/// relative to the working directory). All of them are read again when
/// they change on disk.
#[derive(Debug, Clone, PartialEq)]
pub struct TlsFiles {
    pub cert_file: String,
    pub key_file: String,
    /// When set, clients must present a certificate this CA (PEM) signed.
    pub client_ca_file: Option<String>,
    /// Revocation lists (PEM or DER) of the client CAs: a client
    /// certificate one lists is refused. Only with `client_ca_file`.
    pub crl_files: Vec<String>,
}

impl Default for ServerSettings {
    /// What a config with no `server:` section gets.
    fn default() -> Self {
        validate::server_settings(
            raw::RawServer::default(),
            SocketAddr::from(([127, 0, 0, 1], 8080)),
        )
    }
}

/// How the gateway checks a backend's certificate and proves itself to it.
/// Verification is always on: there is no setting to turn it off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BackendTls {
    /// The public CAs trusted.
    pub roots: TrustRoots,
    /// A PEM file of CAs trusted beside them (a private CA).
    pub ca_file: Option<String>,
    /// The gateway's client certificate chain and key (PEM), for a backend
    /// that asks for one.
    pub client_cert: Option<ClientCert>,
}

/// Which public CAs a backend's certificate may chain to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrustRoots {
    /// Mozilla's roots, built in (the same on every machine).
    #[default]
    Webpki,
    /// The operating system's trust store (what an enterprise proxy's CA
    /// is usually added to).
    Platform,
}

/// A certificate chain and its private key, PEM files.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientCert {
    pub cert_file: String,
    pub key_file: String,
}

/// Limits on what one request may ask for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The most answers one request may ask for (`n`, and `best_of` on
    /// completions); each is generated and billed, so a larger `n` is a
    /// larger bill.
    pub max_n: u32,
}

/// What a backend is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Small,
    Mid,
    Large,
    Cloud,
}

impl Tier {
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Small => "small",
            Tier::Mid => "mid",
            Tier::Large => "large",
            Tier::Cloud => "cloud",
        }
    }

    /// Local tiers run on the user's own hardware.
    pub fn is_local(self) -> bool {
        matches!(self, Tier::Small | Tier::Mid)
    }
}

impl Backend {
    /// Whether `other` (the same backend under another config) reaches the
    /// same servers for the same model: only then does what was learned of
    /// one (latency, cache contents, health) hold for the other.
    pub fn same_server(&self, other: &Backend) -> bool {
        self.adapter == other.adapter && self.upstream_model == other.upstream_model
    }
}

/// One upstream model endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct Backend {
    pub name: String,
    pub tier: Tier,
    /// What is sent to it stays on machines the operator controls (a
    /// large model on its own hardware, a private cloud): sensitive-data
    /// policies may send it what they keep from the cloud. Small and mid
    /// tiers are local unless `local: false`.
    pub local: bool,
    /// The model name sent upstream (the backend's own name when unset).
    pub upstream_model: String,
    pub adapter: BackendAdapter,
    pub timeouts: Timeouts,
    /// Requests this gateway sends to the backend at once; more wait (up to
    /// `max_queue`) or get 503.
    pub max_concurrency: Option<usize>,
    pub max_queue: usize,
    /// Slots batch lines leave free for interactive requests: the share
    /// `interactive_reserve` of `max_concurrency`, rounded down, on a local
    /// backend, but never the last slot (0 on a cloud backend or without a
    /// limit).
    pub interactive_reserve: usize,
    /// The machine the backend runs on, when it shares one with other
    /// backends (`hardware:`): their requests slow each other, so the
    /// latency model counts them as load on each.
    pub hardware: Option<String>,
    pub pricing: Pricing,
    /// A cloud backend with no `price:`, priced by the built-in list for
    /// its model: a wildcard route's request is priced for the model it
    /// names instead.
    pub price_from_list: bool,
    /// Starting figures for the latency model (from the simulator's own
    /// parameters for `sim` backends when unset).
    pub latency: LatencyHintsConfig,
    pub breaker: BreakerSettings,
    /// Active health checks, when configured.
    pub health_check: Option<HealthCheck>,
    pub prefix_cache: PrefixCacheSettings,
    /// Tokens of prompt and output one request may hold: from config, or a
    /// simulator's own; unknown otherwise until the gateway reads it from
    /// the server (llama.cpp's `/props`, vLLM's `/v1/models`).
    pub context_window: Option<u32>,
    /// The largest whole answer, or single streamed event, read from the
    /// backend; past it the answer is cut with an error rather than held
    /// in memory whole.
    pub max_response_bytes: usize,
    /// Price multipliers of the provider's service tiers, by tier name.
    pub service_tiers: Vec<(String, f64)>,
    /// How the backend's certificate is checked, and the gateway's own
    /// certificate for it (`tls:`).
    pub tls: BackendTls,
    /// Request fields never sent to this backend (`passthrough.deny`).
    /// A `service_tier` the backend's price does not name is never sent
    /// either: a field that changes the bill is priced or stripped.
    pub deny_fields: Vec<String>,
}

/// `max_response_bytes` unless a backend sets its own: far above any real
/// answer, far below what would exhaust the gateway's memory.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;

/// Starting figures for a backend's latency model; unset ones use defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencyHintsConfig {
    pub ttft: Option<Duration>,
    pub prefill_tokens_per_s: Option<f64>,
    pub decode_tokens_per_s: Option<f64>,
    pub concurrency: Option<u32>,
}

/// The circuit breaker: opens after `failures` consecutive upstream
/// failures, stays open for `cooldown`, then lets one probe through.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerSettings {
    pub failures: u32,
    pub cooldown: Duration,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            failures: 5,
            cooldown: Duration::from_secs(10),
        }
    }
}

/// How a backend with several replicas picks one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// The replica holding the longest prefix of the prompt, unless it is
    /// loaded beyond the least loaded by more than `max_imbalance`.
    #[default]
    CacheAffinity,
    RoundRobin,
    LeastLoaded,
}

/// What the prefix index assumes of a backend's caches, and how its
/// replicas are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrefixCacheSettings {
    /// KV cache per replica, in tokens.
    pub kv_tokens: u64,
    /// How long an unused prefix stays cached.
    pub ttl: Duration,
    pub balance: Balance,
    /// Requests in flight a cached replica may be ahead of the least loaded.
    pub max_imbalance: u32,
    /// Whose cached prefixes a request may count on (and, on engines that
    /// take a cache salt, reuse): its key's only by default.
    pub share: CacheShare,
}

impl Default for PrefixCacheSettings {
    fn default() -> Self {
        PrefixCacheSettings {
            kv_tokens: 65_536,
            // Anthropic's and OpenAI's prompt caches keep an idle prefix
            // about five minutes; local servers until evicted.
            ttl: Duration::from_secs(300),
            balance: Balance::CacheAffinity,
            max_imbalance: 2,
            share: CacheShare::Key,
        }
    }
}

/// The server software behind an OpenAI-compatible backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Anything OpenAI-compatible; no engine extras are sent.
    #[default]
    Generic,
    /// llama.cpp's llama-server: `timings`, `speculative.*`, `id_slot`.
    Llamacpp,
    Vllm,
    Sglang,
}

impl Engine {
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Generic => "generic",
            Engine::Llamacpp => "llamacpp",
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
        }
    }
}

/// Upstream timeouts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timeouts {
    pub connect: Duration,
    /// From sending the request until the response headers arrive (and, for
    /// non-streaming calls, the whole body).
    pub first_byte: Duration,
    /// Longest gap between two pieces of a streamed body.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(120),
            idle: Duration::from_secs(60),
        }
    }
}
