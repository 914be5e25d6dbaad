//! Validated accounting settings: the ledger, virtual keys, teams, budgets.

use std::time::Duration;

use crate::pricing::TokenPrice;

/// Where and how durably request rows are stored.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerSettings {
    /// SQLite file (WAL); relative paths are from the working directory.
    pub path: String,
    pub durability: Durability,
    /// Group-commit interval: rows wait at most this long to be written.
    pub flush: Duration,
    /// Rows older than this many days are deleted (0 keeps everything).
    pub retention_days: u32,
    /// Rows waiting to be written; when full, requests wait (no row is dropped).
    pub queue: usize,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            path: "switchyard-ledger.db".into(),
            durability: Durability::Group,
            flush: Duration::from_millis(200),
            retention_days: 90,
            queue: 10_000,
        }
    }
}

/// What a crash may lose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Rows are committed in groups every `flush`: a kill -9 loses at most
    /// that window.
    Group,
    /// A response's last byte goes out only after its row is committed.
    Strict,
}

/// Who may call, and within what limits.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Auth {
    /// Empty: auth is off and every request is anonymous.
    pub keys: Vec<VirtualKey>,
    pub teams: Vec<Team>,
    pub admin_key_hash: Option<[u8; 32]>,
}

impl Auth {
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct VirtualKey {
    pub name: String,
    /// SHA-256 of the key; the key itself is never stored.
    pub hash: [u8; 32],
    pub team: Option<String>,
    pub budget: Option<SpendLimit>,
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// Whether the key may name a backend directly, bypassing routing.
    pub may_name_backends: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Team {
    pub name: String,
    pub budget: Option<SpendLimit>,
}

/// A spend budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpendLimit {
    pub daily_usd: Option<f64>,
    pub monthly_usd: Option<f64>,
    pub scope: SpendScope,
    pub on_exhausted: OnExhausted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpendScope {
    /// Only cloud-tier spend counts: local requests are never blocked.
    Cloud,
    /// All spend counts.
    Total,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExhausted {
    /// 429 `insufficient_quota`.
    Refuse,
    /// Serve from a local-tier backend instead.
    Downgrade,
}

/// The reference cloud model every request is also priced on.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub model: String,
    pub price: TokenPrice,
}
