//! The accounting sections of the file as written: prices, the ledger,
//! virtual keys, teams and budgets.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `price:` on a backend: per-token prices, or an hourly hardware cost.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPrice {
    pub input_per_mtok: Option<f64>,
    pub cached_input_per_mtok: Option<f64>,
    pub cache_write_per_mtok: Option<f64>,
    pub output_per_mtok: Option<f64>,
    pub reasoning_per_mtok: Option<f64>,
    pub usd_per_hour: Option<f64>,
    #[serde(default)]
    pub free: bool,
    /// Multipliers of the per-token price for the provider's service tiers
    /// (`{flex: 0.5, priority: 2}`): a request sent with such a tier costs
    /// that much more or less.
    #[serde(default)]
    pub service_tiers: BTreeMap<String, f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAccounting {
    /// The cloud model every request is also priced on, for savings reports.
    pub reference_model: Option<String>,
    pub reference_price: Option<RawPrice>,
    /// Output tokens a budget reserves for a request without `max_tokens`
    /// on a backend whose context window is unknown.
    pub default_max_tokens: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLedger {
    pub path: Option<String>,
    pub durability: Option<String>,
    pub flush_ms: Option<u64>,
    pub retention_days: Option<u32>,
    pub queue: Option<usize>,
    /// The ledger in PostgreSQL instead of the SQLite file, shared by replicas.
    pub postgres: Option<RawPostgres>,
}

/// `ledger.postgres:` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPostgres {
    /// `postgres://user:password@host:port/db`, or `env:NAME` naming the
    /// variable that holds it.
    pub url: Option<String>,
    pub pool_size: Option<usize>,
    pub spool_rows: Option<usize>,
    pub on_full: Option<String>,
    pub strict_wait_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub name: String,
    /// `sha256:<hex>` of the key; `switchyard key-hash KEY` prints it.
    pub hash: String,
    pub team: Option<String>,
    pub budget: Option<RawSpendLimit>,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    #[serde(default = "yes")]
    pub may_name_backends: bool,
    /// Route, alias and backend names the key may ask for (`*` wildcards).
    pub models: Option<Vec<String>>,
    pub sensitive: Option<super::sensitive::RawSensitive>,
    pub mcp: Option<RawMcpAccess>,
}

/// `auth.keys[].mcp`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMcpAccess {
    pub servers: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTeam {
    pub budget: Option<RawSpendLimit>,
    /// Shared by every key of the team, on top of each key's own.
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Names every key of the team may ask for (`*` wildcards).
    pub models: Option<Vec<String>>,
    pub sensitive: Option<super::sensitive::RawSensitive>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpendLimit {
    pub daily_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
    /// `cloud` (default): only cloud-tier spend counts; `total`: all spend.
    pub scope: Option<String>,
    /// `refuse` (default): 429; `downgrade`: serve from a local tier.
    pub on_exhausted: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAuth {
    #[serde(default)]
    pub keys: Vec<RawKey>,
    #[serde(default)]
    pub teams: BTreeMap<String, RawTeam>,
    /// `sha256:<hex>` of the key for `/admin/*`.
    pub admin_key_hash: Option<String>,
    /// Authentication off on purpose: what a reload that removes keys
    /// must say.
    #[serde(default)]
    pub disabled: bool,
    /// `sha256:<hex>` of a scraper's key: `/metrics` then answers only it
    /// (or the admin key).
    pub metrics_key_hash: Option<String>,
    /// Per-key and per-team series on `/metrics` (default true).
    pub metrics_key_labels: Option<bool>,
}
