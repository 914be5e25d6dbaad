//! The ledger's columns, once. The SQLite table and its in-place
//! migrations (`schema`), PostgreSQL's schema versions (`postgres/migrate`),
//! both writers and the PostgreSQL snapshot reader are derived from
//! [`COLUMNS`] and [`cells`]; a column added here reaches all of them, and
//! the tests below fail if a row and the table disagree.

use crate::ledger::row::LedgerRow;

/// What a column holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Real,
    Text,
    /// 0 or 1, so report SQL means the same in SQLite and PostgreSQL.
    Flag,
}

/// When a column came: with the first ledger, or added to older SQLite
/// ledgers in place (such columns must take NULL: existing rows have none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    First,
    Added,
}

#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub name: &'static str,
    pub kind: Kind,
    /// `NOT NULL`.
    pub required: bool,
    pub since: Since,
    /// PostgreSQL schema version that brought it (1: the first).
    pub postgres_version: i32,
}

const fn column(name: &'static str, kind: Kind, required: bool, since: Since) -> Column {
    Column {
        name,
        kind,
        required,
        since,
        postgres_version: 1,
    }
}

use Kind::{Flag, Int, Real, Text};
use Since::{Added, First};

/// Every column of a row, in table order (the `id` key is the store's own).
pub const COLUMNS: [Column; 51] = [
    column("ts_ms", Int, true, First),
    column("request_id", Text, false, First),
    column("key", Text, false, First),
    column("team", Text, false, First),
    column("route", Text, false, First),
    column("backend", Text, true, First),
    column("tier", Text, true, First),
    column("profile", Text, false, First),
    column("dialect", Text, true, First),
    column("endpoint", Text, true, First),
    column("input_tokens", Int, true, First),
    column("cached_tokens", Int, true, First),
    column("cache_write_tokens", Int, true, First),
    column("output_tokens", Int, true, First),
    column("reasoning_tokens", Int, true, First),
    column("cost_usd", Real, true, First),
    column("counterfactual_usd", Real, true, First),
    column("ttft_ms", Real, false, First),
    column("predicted_ttft_ms", Real, false, Added),
    column("decode_tokens_per_s", Real, false, Added),
    column("duration_ms", Real, true, First),
    column("status", Text, true, First),
    column("reason", Text, true, First),
    column("hedge", Flag, true, First),
    column("fallback", Flag, true, First),
    column("cache_hit", Flag, true, First),
    column("estimated", Flag, true, First),
    column("prompt_class", Text, false, Added),
    column("draft_tokens", Int, false, Added),
    column("draft_accepted_tokens", Int, false, Added),
    column("expected_cached_tokens", Int, false, Added),
    column("refusal", Text, false, Added),
    column("client_request_id", Text, false, Added),
    column("service_tier", Text, false, Added),
    column("unpriced", Flag, false, Added),
    column("session", Text, false, Added),
    column("tool_results", Flag, false, Added),
    column("queued_ms", Real, false, Added),
    added_in_postgres(column("shadow", Flag, false, Added), 2),
    added_in_postgres(column("agree_exact", Flag, false, Added), 2),
    added_in_postgres(column("agree_similarity", Real, false, Added), 2),
    added_in_postgres(column("agree_checked", Flag, false, Added), 2),
    added_in_postgres(column("error", Text, false, Added), 3),
    added_in_postgres(column("sensitive", Text, false, Added), 4),
    added_in_postgres(column("sensitive_action", Text, false, Added), 4),
    added_in_postgres(column("provider", Text, false, Added), 5),
    added_in_postgres(column("kind", Text, false, Added), 6),
    added_in_postgres(column("tool", Text, false, Added), 6),
    added_in_postgres(column("bytes_in", Int, false, Added), 6),
    added_in_postgres(column("bytes_out", Int, false, Added), 6),
    added_in_postgres(column("batch", Text, false, Added), 7),
];

/// A column PostgreSQL ledgers gained with schema version `version`.
const fn added_in_postgres(column: Column, version: i32) -> Column {
    Column {
        postgres_version: version,
        ..column
    }
}

/// One value of a row, as its column's kind.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cell<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<&'a str>),
    Flag(Option<bool>),
}

impl Cell<'_> {
    pub fn kind(&self) -> Kind {
        match self {
            Cell::Int(_) => Kind::Int,
            Cell::Real(_) => Kind::Real,
            Cell::Text(_) => Kind::Text,
            Cell::Flag(_) => Kind::Flag,
        }
    }

    pub fn is_null(&self) -> bool {
        match self {
            Cell::Int(v) => v.is_none(),
            Cell::Real(v) => v.is_none(),
            Cell::Text(v) => v.is_none(),
            Cell::Flag(v) => v.is_none(),
        }
    }
}

/// A row's values in [`COLUMNS`] order.
pub fn cells(r: &LedgerRow) -> [Cell<'_>; COLUMNS.len()] {
    // Token counts are u64; a count past i64 (never seen) is stored clamped.
    let clamped = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    let n = |v: u64| Cell::Int(Some(clamped(v)));
    let t = &r.tokens;
    [
        Cell::Int(Some(r.ts_ms)),
        Cell::Text(r.request_id.as_deref()),
        Cell::Text(r.key.as_deref()),
        Cell::Text(r.team.as_deref()),
        Cell::Text(r.route.as_deref()),
        Cell::Text(Some(&r.backend)),
        Cell::Text(Some(r.tier)),
        Cell::Text(r.profile),
        Cell::Text(Some(r.dialect)),
        Cell::Text(Some(r.endpoint)),
        n(t.input),
        n(t.cached_input),
        n(t.cache_write),
        n(t.output),
        n(t.reasoning),
        Cell::Real(Some(r.cost_usd)),
        Cell::Real(Some(r.counterfactual_usd)),
        Cell::Real(r.ttft_ms),
        Cell::Real(r.predicted_ttft_ms),
        Cell::Real(r.decode_tokens_per_s),
        Cell::Real(Some(r.duration_ms)),
        Cell::Text(Some(r.status)),
        Cell::Text(Some(r.reason)),
        Cell::Flag(Some(r.hedge)),
        Cell::Flag(Some(r.fallback)),
        Cell::Flag(Some(r.cache_hit)),
        Cell::Flag(Some(r.estimated)),
        Cell::Text(Some(r.prompt_class.as_str())),
        Cell::Int(r.drafts.map(|d| clamped(d.drafted))),
        Cell::Int(r.drafts.map(|d| clamped(d.accepted))),
        Cell::Int(Some(i64::from(r.expected_cached_tokens))),
        Cell::Text(r.refusal.as_deref()),
        Cell::Text(r.client_request_id.as_deref()),
        Cell::Text(r.service_tier.as_deref()),
        Cell::Flag(Some(r.unpriced)),
        Cell::Text(r.session.as_deref()),
        Cell::Flag(Some(r.tool_results)),
        Cell::Real(Some(r.queued_ms)),
        Cell::Flag(Some(r.shadow.is_some())),
        Cell::Flag(r.shadow.and_then(|s| s.exact)),
        Cell::Real(r.shadow.and_then(|s| s.similarity)),
        Cell::Flag(r.shadow.and_then(|s| s.checked)),
        Cell::Text(r.error.as_deref()),
        Cell::Text(r.sensitive.as_ref().map(|s| s.kinds.as_str())),
        Cell::Text(r.sensitive.as_ref().map(|s| s.action.as_str())),
        Cell::Text(r.provider),
        Cell::Text(r.kind),
        Cell::Text(r.tool.as_deref()),
        Cell::Int(r.bytes_in.map(clamped)),
        Cell::Int(r.bytes_out.map(clamped)),
        Cell::Text(r.batch.as_deref()),
    ]
}

/// The column names, comma-separated, in table order.
pub fn names() -> String {
    COLUMNS.map(|c| c.name).join(", ")
}

/// A column's definition in SQLite's or PostgreSQL's words.
pub fn definition(column: &Column, postgres: bool) -> String {
    let kind = match (column.kind, postgres) {
        (Kind::Int, false) | (Kind::Flag, _) => "INTEGER",
        (Kind::Int, true) => "BIGINT",
        (Kind::Real, false) => "REAL",
        // PostgreSQL's REAL is 4 bytes; SQLite's is 8.
        (Kind::Real, true) => "DOUBLE PRECISION",
        (Kind::Text, _) => "TEXT",
    };
    let null = if column.required { " NOT NULL" } else { "" };
    format!("{} {kind}{null}", column.name)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use switchyard_policies::{PromptClass, TokenCounts};

    use super::*;
    use crate::ledger::Drafts;

    fn row() -> LedgerRow {
        LedgerRow {
            ts_ms: 1,
            request_id: Some("r".into()),
            client_request_id: Some("c".into()),
            key: Some("k".into()),
            team: Some("t".into()),
            route: Some(Arc::from("auto")),
            backend: "small".into(),
            tier: "small",
            provider: Some("openai"),
            kind: Some("tool"),
            tool: Some("add".into()),
            bytes_in: Some(40),
            bytes_out: Some(80),
            batch: Some(Arc::from("batch_1")),
            profile: Some("chat"),
            dialect: "openai",
            endpoint: "chat",
            tokens: TokenCounts {
                input: 10,
                cached_input: 2,
                cache_write: 1,
                output: 5,
                reasoning: 3,
            },
            cost_usd: 0.5,
            counterfactual_usd: 0.7,
            ttft_ms: Some(12.0),
            predicted_ttft_ms: Some(11.0),
            decode_tokens_per_s: Some(40.0),
            duration_ms: 100.0,
            status: "ok",
            refusal: Some("no".into()),
            reason: "split",
            hedge: true,
            fallback: true,
            cache_hit: true,
            estimated: true,
            prompt_class: PromptClass::Code,
            drafts: Some(Drafts {
                drafted: 8,
                accepted: 6,
            }),
            expected_cached_tokens: 4,
            service_tier: Some("flex".into()),
            unpriced: true,
            session: Some(Arc::from("s")),
            tool_results: true,
            queued_ms: 3.0,
            error: Some("upstream said no".into()),
            shadow: Some(crate::ledger::Shadowed {
                exact: Some(false),
                similarity: Some(0.5),
                checked: Some(true),
            }),
            sensitive: Some(std::sync::Arc::new(
                switchyard_router::sensitive::Handling {
                    kinds: "card,email".into(),
                    action: switchyard_policies::SensitiveAction::Mask,
                    masker: None,
                },
            )),
        }
    }

    #[test]
    fn a_rows_cells_have_their_columns_kinds() {
        let row = row();
        for (column, cell) in COLUMNS.iter().zip(cells(&row)) {
            assert_eq!(column.kind, cell.kind(), "{}", column.name);
            // Every field of this row is set: a NULL would be a field left out.
            assert!(!cell.is_null(), "{} is NULL for a full row", column.name);
        }
    }

    #[test]
    fn required_columns_are_never_null_and_added_ones_may_be() {
        let mut row = row();
        row.request_id = None;
        row.key = None;
        row.team = None;
        row.route = None;
        row.profile = None;
        row.ttft_ms = None;
        row.drafts = None;
        row.shadow = Some(crate::ledger::Shadowed::default());
        for (column, cell) in COLUMNS.iter().zip(cells(&row)) {
            if column.required {
                assert!(!cell.is_null(), "{} is required", column.name);
            }
            if column.since == Since::Added {
                assert!(
                    !column.required,
                    "{} is added to old ledgers, so takes NULL",
                    column.name
                );
            }
        }
    }

    #[test]
    fn names_are_unique_and_definitions_follow_the_kind() {
        let mut names: Vec<_> = COLUMNS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COLUMNS.len());
        assert_eq!(definition(&COLUMNS[0], false), "ts_ms INTEGER NOT NULL");
        assert_eq!(definition(&COLUMNS[0], true), "ts_ms BIGINT NOT NULL");
        assert_eq!(definition(&COLUMNS[17], true), "ttft_ms DOUBLE PRECISION");
        assert_eq!(definition(&COLUMNS[23], true), "hedge INTEGER NOT NULL");
    }
}
