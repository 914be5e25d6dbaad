//! Accounting validation: prices, the ledger, keys, teams and budgets.

use std::time::Duration;

use super::accounting::{
    Auth, Durability, LedgerSettings, ModelAccess, OnExhausted, OnSpoolFull, PostgresLedger,
    PostgresUrl, Reference, SpendLimit, SpendScope, Team, VirtualKey,
};
use super::raw_accounting::{
    RawAccounting, RawAuth, RawKey, RawLedger, RawPostgres, RawPrice, RawSpendLimit,
};
use super::validate::Checker;
use super::{ConfigError, Tier};
use crate::pricing::{Pricing, TokenPrice, builtin_price};

/// A backend's pricing: as configured, else the built-in list price of its
/// model for cloud tiers, else free (local hardware nobody asked to count).
pub(super) fn pricing(
    ck: &Checker<'_>,
    backend: &str,
    tier: Tier,
    model: &str,
    raw: Option<RawPrice>,
) -> Result<Pricing, ConfigError> {
    let path = ["backends", backend, "price"];
    match raw {
        Some(raw) => price(ck, &path, raw),
        None if tier.is_local() => Ok(Pricing::Free),
        // Not an error: the gateway serves it, and `Config::warnings` says
        // what that means.
        None => Ok(builtin_price(model).map_or(Pricing::Unpriced, Pricing::Tokens)),
    }
}

/// A backend's service-tier multipliers: positive, finite, and only on a
/// per-token price.
pub(super) fn service_tiers(
    ck: &Checker<'_>,
    backend: &str,
    raw: &RawPrice,
) -> Result<Vec<(String, f64)>, ConfigError> {
    let mut tiers = Vec::with_capacity(raw.service_tiers.len());
    for (tier, &multiplier) in &raw.service_tiers {
        let path = ["backends", backend, "price", "service_tiers", tier.as_str()];
        if !multiplier.is_finite() || multiplier <= 0.0 {
            return Err(ck.error(&path, "a multiplier is a finite number > 0"));
        }
        if raw.input_per_mtok.is_none() {
            return Err(ck.error(&path, "service tiers multiply a per-token price"));
        }
        tiers.push((tier.clone(), multiplier));
    }
    Ok(tiers)
}

fn price(ck: &Checker<'_>, path: &[&str], raw: RawPrice) -> Result<Pricing, ConfigError> {
    let token_fields = [
        ("input_per_mtok", raw.input_per_mtok),
        ("cached_input_per_mtok", raw.cached_input_per_mtok),
        ("cache_write_per_mtok", raw.cache_write_per_mtok),
        ("output_per_mtok", raw.output_per_mtok),
        ("reasoning_per_mtok", raw.reasoning_per_mtok),
        ("usd_per_hour", raw.usd_per_hour),
    ];
    for (field, value) in token_fields {
        if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return Err(ck.error(
                &[path, &[field]].concat(),
                "a price is a finite number >= 0",
            ));
        }
    }
    let any_token = token_fields[..5].iter().any(|(_, v)| v.is_some());
    match (raw.free, raw.usd_per_hour, any_token) {
        (true, None, false) => Ok(Pricing::Free),
        (false, Some(usd_per_hour), false) => Ok(Pricing::Hourly { usd_per_hour }),
        (false, None, true) => {
            let (Some(input), Some(output)) = (raw.input_per_mtok, raw.output_per_mtok) else {
                return Err(ck.error(
                    path,
                    "per-token prices need at least input_per_mtok and output_per_mtok",
                ));
            };
            Ok(Pricing::Tokens(TokenPrice {
                input,
                cached_input: raw.cached_input_per_mtok.unwrap_or(input),
                cache_write: raw.cache_write_per_mtok.unwrap_or(input),
                output,
                reasoning: raw.reasoning_per_mtok.unwrap_or(output),
            }))
        }
        (false, None, false) => {
            Err(ck.error(path, "set per-token prices, usd_per_hour, or free: true"))
        }
        _ => Err(ck.error(
            path,
            "choose one of per-token prices, usd_per_hour, or free: true",
        )),
    }
}

pub(super) fn reference(
    ck: &Checker<'_>,
    raw: RawAccounting,
) -> Result<Option<Reference>, ConfigError> {
    let model = raw.reference_model.unwrap_or_else(|| "gpt-4o".into());
    let price = match raw.reference_price {
        Some(raw_price) => match price(ck, &["accounting", "reference_price"], raw_price)? {
            Pricing::Tokens(price) => price,
            _ => {
                return Err(ck.error(
                    &["accounting", "reference_price"],
                    "the reference is a cloud model: give per-token prices",
                ));
            }
        },
        None => builtin_price(&model).ok_or_else(|| {
            ck.error(
                &["accounting", "reference_model"],
                format!("no built-in price for `{model}`; set reference_price"),
            )
        })?,
    };
    let provider = crate::pricing::list_provider(&model);
    Ok(Some(Reference {
        model,
        price,
        provider,
    }))
}

pub(super) fn ledger(ck: &Checker<'_>, raw: RawLedger) -> Result<LedgerSettings, ConfigError> {
    let defaults = LedgerSettings::default();
    let durability = match raw.durability.as_deref() {
        None | Some("group") => Durability::Group,
        Some("strict") => Durability::Strict,
        Some(other) => {
            return Err(ck.error(
                &["ledger", "durability"],
                format!("`{other}` is not one of group, strict"),
            ));
        }
    };
    let flush = raw
        .flush_ms
        .map(Duration::from_millis)
        .unwrap_or(defaults.flush);
    if flush.is_zero() || flush > Duration::from_secs(60) {
        return Err(ck.error(&["ledger", "flush_ms"], "between 1 and 60000"));
    }
    let queue = raw.queue.unwrap_or(defaults.queue);
    if queue == 0 {
        return Err(ck.error(&["ledger", "queue"], "must be positive"));
    }
    let postgres = raw
        .postgres
        .map(|raw| postgres_ledger(ck, raw))
        .transpose()?;
    Ok(LedgerSettings {
        path: raw.path.unwrap_or(defaults.path),
        durability,
        flush,
        retention_days: raw.retention_days.unwrap_or(defaults.retention_days),
        queue,
        postgres,
    })
}

fn postgres_ledger(ck: &Checker<'_>, raw: RawPostgres) -> Result<PostgresLedger, ConfigError> {
    let at = |field: &'static str| ["ledger", "postgres", field];
    let url = match raw.url {
        None => {
            return Err(ck.error(
                &at("url"),
                "required: `postgres://user@host:port/database` or `env:NAME`",
            ));
        }
        Some(text) => match text.strip_prefix("env:") {
            Some(var) if !var.is_empty() => PostgresUrl::Env(var.to_owned()),
            Some(_) => return Err(ck.error(&at("url"), "`env:` needs the variable's name")),
            None => {
                check_postgres_url(&text).map_err(|message| ck.error(&at("url"), message))?;
                PostgresUrl::Inline(text)
            }
        },
    };
    let pool_size = raw.pool_size.unwrap_or(4);
    if !(1..=64).contains(&pool_size) {
        return Err(ck.error(&at("pool_size"), "between 1 and 64"));
    }
    let spool_rows = raw.spool_rows.unwrap_or(100_000);
    if spool_rows == 0 {
        return Err(ck.error(&at("spool_rows"), "must be positive"));
    }
    let on_full = match raw.on_full.as_deref() {
        None | Some("refuse") => OnSpoolFull::Refuse,
        Some("serve") => OnSpoolFull::Serve,
        Some(other) => {
            return Err(ck.error(
                &at("on_full"),
                format!("`{other}` is not one of refuse, serve"),
            ));
        }
    };
    let strict_wait = Duration::from_millis(raw.strict_wait_ms.unwrap_or(5_000));
    if strict_wait.is_zero() || strict_wait > Duration::from_secs(300) {
        return Err(ck.error(&at("strict_wait_ms"), "between 1 and 300000"));
    }
    Ok(PostgresLedger {
        url,
        pool_size,
        spool_rows,
        on_full,
        strict_wait,
    })
}

/// Whether `url` is a PostgreSQL URL this build can use: plain connections
/// only (no TLS support is compiled in), so an `sslmode` that demands TLS is
/// refused here rather than at the first connection. Messages never echo
/// the URL: it may hold a password.
pub fn check_postgres_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err("must start with postgres:// or postgresql:// (or be `env:NAME`)".into());
    }
    let query = url.split_once('?').map_or("", |(_, q)| q);
    for pair in query.split('&') {
        if let Some(("sslmode", mode)) = pair.split_once('=') {
            match mode {
                "disable" | "prefer" => {}
                "require" | "verify-ca" | "verify-full" => {
                    return Err(format!(
                        "sslmode={mode}: this build connects to PostgreSQL without TLS only; use sslmode=disable (or prefer) on a trusted network, or a TLS-terminating proxy such as pgbouncer on loopback"
                    ));
                }
                other => return Err(format!("sslmode=`{other}` is not one of disable, prefer")),
            }
        }
    }
    Ok(())
}

/// `sha256:<64 hex digits>` -> bytes.
fn key_hash(ck: &Checker<'_>, path: &[&str], text: &str) -> Result<[u8; 32], ConfigError> {
    let bad = || {
        ck.error(
            path,
            "write `sha256:` and 64 hex digits (`switchyard key-hash KEY` prints it)",
        )
    };
    let hex = text.strip_prefix("sha256:").ok_or_else(bad)?;
    // Hex digits only before slicing by byte: a non-ASCII character would
    // put a slice inside it (a panic, found by review).
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

fn spend_limit(
    ck: &Checker<'_>,
    path: &[&str],
    raw: RawSpendLimit,
) -> Result<SpendLimit, ConfigError> {
    for (field, value) in [
        ("daily_usd", raw.daily_usd),
        ("monthly_usd", raw.monthly_usd),
    ] {
        if value.is_some_and(|v| !v.is_finite() || v < 0.0) {
            return Err(ck.error(
                &[path, &[field]].concat(),
                "a budget is a finite number of USD >= 0",
            ));
        }
    }
    if raw.daily_usd.is_none() && raw.monthly_usd.is_none() {
        return Err(ck.error(path, "set daily_usd, monthly_usd, or both"));
    }
    let scope = match raw.scope.as_deref() {
        None | Some("cloud") => SpendScope::Cloud,
        Some("total") => SpendScope::Total,
        Some(other) => {
            return Err(ck.error(
                &[path, &["scope"]].concat(),
                format!("`{other}` is not one of cloud, total"),
            ));
        }
    };
    let on_exhausted = match raw.on_exhausted.as_deref() {
        None | Some("refuse") => OnExhausted::Refuse,
        Some("downgrade") => OnExhausted::Downgrade,
        Some(other) => {
            return Err(ck.error(
                &[path, &["on_exhausted"]].concat(),
                format!("`{other}` is not one of refuse, downgrade"),
            ));
        }
    };
    Ok(SpendLimit {
        daily_usd: raw.daily_usd,
        monthly_usd: raw.monthly_usd,
        scope,
        on_exhausted,
    })
}

pub(super) fn auth(ck: &Checker<'_>, raw: RawAuth) -> Result<Auth, ConfigError> {
    let mut teams = Vec::new();
    for (name, team) in raw.teams {
        let budget = team
            .budget
            .map(|b| spend_limit(ck, &["auth", "teams", &name, "budget"], b))
            .transpose()?;
        for (field, value) in [
            ("requests_per_minute", team.requests_per_minute),
            ("tokens_per_minute", team.tokens_per_minute),
        ] {
            if value == Some(0) {
                return Err(ck.error(
                    &["auth", "teams", &name, field],
                    "must be positive (leave it out for no limit)",
                ));
            }
        }
        let models = model_access(ck, &["auth", "teams", &name, "models"], team.models)?;
        let sensitive = super::sensitive::sensitive(
            ck,
            &["auth", "teams", &name, "sensitive"],
            team.sensitive,
        )?;
        teams.push(Team {
            name,
            budget,
            requests_per_minute: team.requests_per_minute,
            tokens_per_minute: team.tokens_per_minute,
            models,
            sensitive,
        });
    }
    let mut keys: Vec<VirtualKey> = Vec::new();
    for (i, raw_key) in raw.keys.into_iter().enumerate() {
        let index = i.to_string();
        let checked = key(
            ck,
            &["auth", "keys", index.as_str()],
            raw_key,
            &teams,
            &keys,
        )?;
        keys.push(checked);
    }
    let admin_key_hash = raw
        .admin_key_hash
        .map(|h| key_hash(ck, &["auth", "admin_key_hash"], &h))
        .transpose()?;
    let metrics_key_hash = raw
        .metrics_key_hash
        .map(|h| key_hash(ck, &["auth", "metrics_key_hash"], &h))
        .transpose()?;
    if raw.disabled && !keys.is_empty() {
        return Err(ck.error(
            &["auth", "disabled"],
            "`disabled: true` turns authentication off, yet `keys` are set: remove one of them",
        ));
    }
    Ok(Auth {
        keys,
        teams,
        admin_key_hash,
        disabled: raw.disabled,
        metrics_key_hash,
        metrics_key_labels: raw.metrics_key_labels.unwrap_or(true),
        stored_keys_exist: false,
    })
}

/// One `auth.keys[]` entry at `path`, checked against the `teams` and the
/// `keys` before it.
pub(super) fn key(
    ck: &Checker<'_>,
    path: &[&str],
    key: RawKey,
    teams: &[Team],
    keys: &[VirtualKey],
) -> Result<VirtualKey, ConfigError> {
    let at = |field: &'static str| [path, &[field]].concat();
    let hash = key_hash(ck, &at("hash"), &key.hash)?;
    if key.name.trim().is_empty() {
        return Err(ck.error(&at("name"), "a key needs a name"));
    }
    if keys.iter().any(|k| k.name == key.name) {
        return Err(ck.error(&at("name"), format!("another key is named `{}`", key.name)));
    }
    if keys.iter().any(|k| k.hash == hash) {
        return Err(ck.error(&at("hash"), "another key has this hash"));
    }
    if let Some(team) = &key.team
        && !teams.iter().any(|t| &t.name == team)
    {
        return Err(ck.error(&at("team"), format!("no team `{team}` under auth.teams")));
    }
    for (field, value) in [
        ("requests_per_minute", key.requests_per_minute),
        ("tokens_per_minute", key.tokens_per_minute),
    ] {
        if value == Some(0) {
            return Err(ck.error(&at(field), "must be positive (leave it out for no limit)"));
        }
    }
    let budget = key
        .budget
        .map(|b| spend_limit(ck, &at("budget"), b))
        .transpose()?;
    let models = model_access(ck, &at("models"), key.models)?;
    let sensitive = super::sensitive::sensitive(ck, &at("sensitive"), key.sensitive)?;
    let mcp = match key.mcp {
        None => None,
        Some(access) => Some(super::McpAccess {
            servers: access.servers,
            tools: model_access(ck, &[&at("mcp")[..], &["tools"]].concat(), access.tools)?,
        }),
    };
    Ok(VirtualKey {
        name: key.name,
        hash,
        team: key.team,
        budget,
        requests_per_minute: key.requests_per_minute,
        tokens_per_minute: key.tokens_per_minute,
        may_name_backends: key.may_name_backends,
        models,
        expires_at_ms: None,
        from_api: false,
        sensitive,
        mcp,
    })
}

/// A key's or team's `models`: names or `*` patterns, none empty.
fn model_access(
    ck: &Checker<'_>,
    path: &[&str],
    models: Option<Vec<String>>,
) -> Result<Option<ModelAccess>, ConfigError> {
    let Some(models) = models else {
        return Ok(None);
    };
    if let Some(at) = models.iter().position(|m| m.trim().is_empty()) {
        return Err(ck.error(
            &[path, &[at.to_string().as_str()]].concat(),
            "a model name or pattern (`*` for any run of characters), not empty",
        ));
    }
    Ok(Some(ModelAccess(models)))
}
