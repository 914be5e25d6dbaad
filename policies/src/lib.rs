//! Switchyard's policies: configuration types and their validation.
//!
//! Everything here is pure: it parses text the gateway has already read and
//! turns it into the validated types the rest of the program uses. No I/O.

pub mod calendar;
pub mod config;
pub mod pricing;
pub mod profiles;
pub mod speculation;

pub use config::{
    AnthropicBackend, Auth, AzureAuth, AzureBackend, Backend, BackendAdapter, BackendTls, Balance,
    BatchSettings, BedrockBackend, BedrockKeys, BreakerSettings, CacheShare, CascadeCheck,
    ClientCert, Condition, Config, ConfigError, Durability, Engine, GeminiBackend, Guardrail,
    GuardrailStage, HeaderMatch, HeaderValueSource, HealthCheck, Hedge, LatencyBudget,
    LatencyHintsConfig, LedgerSettings, Limits, McpServer, McpSettings, McpTransport, ModelAccess,
    OnExhausted, OnSpoolFull, OnUnavailable, OpenAiBackend, Pattern, PostgresLedger, PostgresUrl,
    PrefixCacheSettings, RedisState, Reference, ResponseCacheSettings, Route, RouteStrategy, Rule,
    SENSITIVE_KINDS, Secretive, SensitiveAction, SensitivePolicy, ServerSettings, SharedState,
    SimFaults, SimParams, SimPreset, SimSpeculation, Similar, SpendLimit, SpendScope, Team,
    Telemetry, Tier, Timeouts, TlsFiles, TrustRoots, VertexBackend, VirtualKey, Widening,
    check_postgres_url, redact_password, sim_params_from_yaml,
};
pub use pricing::{Pricing, TokenCounts, TokenPrice, builtin_price};
pub use profiles::{Budget, Profile};
pub use speculation::{PromptClass, Speculative};
