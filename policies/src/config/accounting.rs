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
    /// Set: rows go to PostgreSQL (shared by replicas), not to `path`.
    pub postgres: Option<PostgresLedger>,
}

/// The ledger in PostgreSQL.
#[derive(Clone, PartialEq)]
pub struct PostgresLedger {
    pub url: PostgresUrl,
    /// Connections in the pool the writer and the reports share.
    pub pool_size: usize,
    /// Rows that may wait in memory while PostgreSQL is away.
    pub spool_rows: usize,
    pub on_full: OnSpoolFull,
    /// How long a strict request waits for its row's commit before it is
    /// answered with an error (the row still lands once PostgreSQL is back).
    pub strict_wait: Duration,
}

/// Where the connection string comes from. It may hold a password: it is
/// never shown, only [`PostgresUrl::redacted`].
#[derive(Clone, PartialEq)]
pub enum PostgresUrl {
    Inline(String),
    /// The environment variable holding the URL, read at start.
    Env(String),
}

impl PostgresUrl {
    /// The URL with any password replaced, for logs and messages.
    pub fn redacted(&self) -> String {
        match self {
            PostgresUrl::Env(name) => format!("env:{name}"),
            PostgresUrl::Inline(url) => redact_password(url),
        }
    }
}

/// `scheme://user:password@host` -> `scheme://user:[redacted]@host`, and a
/// `password=` parameter likewise.
pub fn redact_password(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                out.replace_range(rest_start + colon + 1..rest_start + at, "[redacted]");
            }
        }
    }
    if let Some(at) = out.find("password=") {
        let value_start = at + "password=".len();
        let value_end = out[value_start..]
            .find('&')
            .map_or(out.len(), |i| value_start + i);
        out.replace_range(value_start..value_end, "[redacted]");
    }
    out
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for PostgresLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresLedger")
            .field("url", &self.url)
            .field("pool_size", &self.pool_size)
            .field("spool_rows", &self.spool_rows)
            .field("on_full", &self.on_full)
            .field("strict_wait", &self.strict_wait)
            .finish()
    }
}

/// What a request meets when PostgreSQL has been away long enough to fill
/// the spool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSpoolFull {
    /// 503 in the caller's dialect: nothing is served unrecorded.
    Refuse,
    /// Served; its row is counted lost and logged whole.
    Serve,
}

impl Default for LedgerSettings {
    fn default() -> Self {
        LedgerSettings {
            path: "switchyard-ledger.db".into(),
            durability: Durability::Group,
            flush: Duration::from_millis(200),
            retention_days: 90,
            queue: 10_000,
            postgres: None,
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
    /// `auth: {disabled: true}`: no keys, on purpose.
    pub disabled: bool,
    /// A scraper's key for `/metrics`; `None`: `/metrics` is open.
    pub metrics_key_hash: Option<[u8; 32]>,
    /// Whether `/metrics` has per-key and per-team series.
    pub metrics_key_labels: bool,
    /// Keys were made through the admin API (revoked ones count): auth
    /// stays on however many of them are revoked, and whatever the file
    /// says.
    pub stored_keys_exist: bool,
}

impl Auth {
    pub fn enabled(&self) -> bool {
        !self.keys.is_empty() || self.stored_keys_exist
    }

    /// How `next` would open access that `self` guards, each in words. A
    /// reload that does any of these is held back (see the reload docs):
    /// [`Widening::AuthRemoved`] unless `next` says `disabled: true`, the
    /// rest unless the reload was asked to widen.
    pub fn widenings(&self, next: &Auth) -> Vec<Widening> {
        let mut found = Vec::new();
        if self.enabled() && !next.enabled() {
            // `disabled: true` says the operator means it, admin key and all.
            if !next.disabled {
                found.push(Widening::AuthRemoved);
            }
            return found;
        }
        if self.admin_key_hash.is_some() && next.admin_key_hash.is_none() {
            found.push(Widening::Other("the admin key is removed".into()));
        }
        if self.metrics_key_hash.is_some() && next.metrics_key_hash.is_none() {
            found.push(Widening::Other("`/metrics` no longer needs a key".into()));
        }
        for key in &self.keys {
            let Some(new) = next.keys.iter().find(|k| k.name == key.name) else {
                continue;
            };
            let had = Limits::of(key.budget, key.requests_per_minute, key.tokens_per_minute);
            let has = Limits::of(new.budget, new.requests_per_minute, new.tokens_per_minute);
            for what in had.lost(has) {
                found.push(Widening::Other(format!(
                    "key `{}` loses its {what}",
                    key.name
                )));
            }
            if !key.may_name_backends && new.may_name_backends {
                found.push(Widening::Other(format!(
                    "key `{}` may now name backends",
                    key.name
                )));
            }
            if widens(key.models.as_ref(), new.models.as_ref()) {
                found.push(Widening::Other(format!(
                    "key `{}` may ask for more models",
                    key.name
                )));
            }
        }
        let limited = |team: &Team| {
            Limits::of(
                team.budget,
                team.requests_per_minute,
                team.tokens_per_minute,
            )
            .lost(Limits::default())
            .next()
            .is_some()
        };
        for key in &self.keys {
            let Some(team) = key.team.as_deref() else {
                continue;
            };
            let had_limits = self.teams.iter().any(|t| t.name == team && limited(t));
            let stays = next
                .keys
                .iter()
                .find(|k| k.name == key.name)
                .is_none_or(|k| k.team.as_deref() == Some(team));
            if had_limits && !stays {
                found.push(Widening::Other(format!(
                    "key `{}` leaves team `{team}` and its limits",
                    key.name
                )));
            }
        }
        for team in &self.teams {
            let Some(new) = next.teams.iter().find(|t| t.name == team.name) else {
                if limited(team) {
                    found.push(Widening::Other(format!(
                        "team `{}` and its limits are removed",
                        team.name
                    )));
                }
                continue;
            };
            let had = Limits::of(
                team.budget,
                team.requests_per_minute,
                team.tokens_per_minute,
            );
            let has = Limits::of(new.budget, new.requests_per_minute, new.tokens_per_minute);
            for what in had.lost(has) {
                found.push(Widening::Other(format!(
                    "team `{}` loses its {what}",
                    team.name
                )));
            }
            if widens(team.models.as_ref(), new.models.as_ref()) {
                found.push(Widening::Other(format!(
                    "team `{}` may ask for more models",
                    team.name
                )));
            }
        }
        found
    }
}

/// Which of a key's or team's limits are set.
#[derive(Debug, Clone, Copy, Default)]
struct Limits {
    budget: bool,
    requests_per_minute: bool,
    tokens_per_minute: bool,
}

impl Limits {
    fn of(budget: Option<SpendLimit>, rpm: Option<u32>, tpm: Option<u32>) -> Self {
        Limits {
            budget: budget.is_some(),
            requests_per_minute: rpm.is_some(),
            tokens_per_minute: tpm.is_some(),
        }
    }

    /// The limits set here and not in `next`, by their field names.
    fn lost(self, next: Limits) -> impl Iterator<Item = &'static str> {
        [
            ("budget", self.budget && !next.budget),
            (
                "requests_per_minute",
                self.requests_per_minute && !next.requests_per_minute,
            ),
            (
                "tokens_per_minute",
                self.tokens_per_minute && !next.tokens_per_minute,
            ),
        ]
        .into_iter()
        .filter_map(|(name, lost)| lost.then_some(name))
    }
}

/// One way a new config opens access the running one guards.
#[derive(Debug, Clone, PartialEq)]
pub enum Widening {
    /// Keys were set and the new config has none, without saying
    /// `auth: {disabled: true}`: a half-written file or a templating slip
    /// looks like this.
    AuthRemoved,
    /// A limit dropped, the admin key removed and the like.
    Other(String),
}

impl std::fmt::Display for Widening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Widening::AuthRemoved => f.write_str(
                "the new config has no `auth` keys: authentication would be off (say `auth: {disabled: true}` to mean it)",
            ),
            Widening::Other(what) => f.write_str(what),
        }
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
    /// The model names (routes, aliases, backends) the key may ask for;
    /// every one when `None`.
    pub models: Option<ModelAccess>,
    /// When the key stops working, Unix milliseconds (keys made through
    /// the admin API may expire; the file's do not).
    pub expires_at_ms: Option<i64>,
    /// Made through the admin API and kept in the ledger's database, not
    /// written in the config file.
    pub from_api: bool,
    /// What a request holding sensitive data may do, for this key.
    pub sensitive: Option<super::SensitivePolicy>,
    /// The MCP servers and tools the key may reach at `/mcp`; every one
    /// when `None`, as with `models`.
    pub mcp: Option<McpAccess>,
}

/// `auth.keys[].mcp`: the servers a key may reach, and of their tools
/// (named `SERVER_TOOL`, `*` patterns allowed) those it may call. Either
/// list left out does not limit.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct McpAccess {
    pub servers: Option<Vec<String>>,
    pub tools: Option<ModelAccess>,
}

impl McpAccess {
    /// Whether the key may reach `server`, and call `tool` (its prefixed
    /// name) there when one is named.
    pub fn allows(&self, server: &str, tool: Option<&str>) -> bool {
        let server_ok = self
            .servers
            .as_ref()
            .is_none_or(|s| s.iter().any(|n| n == server));
        let tool_ok = match (tool, &self.tools) {
            (Some(tool), Some(tools)) => tools.allows(tool),
            _ => true,
        };
        server_ok && tool_ok
    }
}

/// Whether `next` lets through a model name `before` did not: the list
/// lifted, or a pattern added.
fn widens(before: Option<&ModelAccess>, next: Option<&ModelAccess>) -> bool {
    match (before, next) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(before), Some(next)) => next.0.iter().any(|p| !before.0.contains(p)),
    }
}

/// Model names a key or team may ask for: names, or patterns where `*`
/// stands for any run of characters (`gpt-*`, `*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAccess(pub Vec<String>);

impl ModelAccess {
    pub fn allows(&self, model: &str) -> bool {
        self.0.iter().any(|pattern| glob(pattern, model))
    }
}

/// Whether `name` matches `pattern`, `*` matching any run of characters.
fn glob(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[derive(Debug, Clone, PartialEq)]
pub struct Team {
    pub name: String,
    pub budget: Option<SpendLimit>,
    /// Limits every key of the team counts against together, on top of
    /// each key's own.
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
    /// The model names every key of the team may ask for (a key's own list
    /// narrows it further); every one when `None`.
    pub models: Option<ModelAccess>,
    /// What a request holding sensitive data may do, for the team's keys.
    pub sensitive: Option<super::SensitivePolicy>,
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
    /// Who sells it, when it is a model of the built-in price list.
    pub provider: Option<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_patterns_match_names_with_stars_anywhere() {
        let access = ModelAccess(vec![
            "auto".into(),
            "gpt-*".into(),
            "*-mini".into(),
            "a*b*c".into(),
        ]);
        for allowed in [
            "auto", "gpt-4o", "gpt-", "o4-mini", "abc", "a-b-c", "aXbYbZc",
        ] {
            assert!(access.allows(allowed), "{allowed}");
        }
        for refused in ["auto2", "xauto", "gpt4", "mini", "ab", "acb", "a-b-cd"] {
            assert!(!access.allows(refused), "{refused}");
        }
        assert!(ModelAccess(vec!["*".into()]).allows("anything"));
        assert!(!ModelAccess(vec![]).allows("auto"));
    }

    #[test]
    fn more_models_for_a_key_is_a_widening() {
        let narrow = Some(ModelAccess(vec!["auto".into()]));
        let wider = Some(ModelAccess(vec!["auto".into(), "large".into()]));
        assert!(widens(narrow.as_ref(), wider.as_ref()));
        assert!(widens(narrow.as_ref(), None), "the list lifted");
        assert!(!widens(wider.as_ref(), narrow.as_ref()));
        assert!(!widens(None, narrow.as_ref()));
    }

    #[test]
    fn postgres_passwords_are_never_shown() {
        let cases = [
            (
                "postgres://sy:hunter2@db:5432/ledger",
                "postgres://sy:[redacted]@db:5432/ledger",
            ),
            (
                "postgresql://sy:p@ss:w@db/ledger?sslmode=disable",
                "postgresql://sy:[redacted]@db/ledger?sslmode=disable",
            ),
            (
                "postgres://db/ledger?user=sy&password=hunter2&sslmode=disable",
                "postgres://db/ledger?user=sy&password=[redacted]&sslmode=disable",
            ),
            ("postgres://sy@db/ledger", "postgres://sy@db/ledger"),
        ];
        for (url, want) in cases {
            assert_eq!(redact_password(url), want);
            let shown = format!("{:?}", PostgresUrl::Inline(url.into()));
            assert_eq!(shown, want, "Debug shows the redacted URL");
        }
        assert_eq!(
            format!("{:?}", PostgresUrl::Env("LEDGER_URL".into())),
            "env:LEDGER_URL"
        );
    }
}
