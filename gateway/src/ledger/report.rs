//! Spend reports from the ledger: totals per key, team, route, backend, tier
//! or day, cloud against local, and savings against the reference model;
//! and what every report shares: its window (`parse_since`), the time now
//! and the nearest-rank quantile.

use rusqlite::Connection;

/// What a report groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dimension {
    Key,
    Team,
    Route,
    Backend,
    Tier,
    Provider,
    Day,
}

impl Dimension {
    pub const ALL: [Dimension; 7] = [
        Dimension::Key,
        Dimension::Team,
        Dimension::Route,
        Dimension::Backend,
        Dimension::Tier,
        Dimension::Provider,
        Dimension::Day,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dimension::Key => "key",
            Dimension::Team => "team",
            Dimension::Route => "route",
            Dimension::Backend => "backend",
            Dimension::Tier => "tier",
            Dimension::Provider => "provider",
            Dimension::Day => "day",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The SQL expression grouped on (fixed text, never user input).
    fn column(self) -> &'static str {
        match self {
            Dimension::Key => "COALESCE(key, '-')",
            Dimension::Team => "COALESCE(team, '-')",
            Dimension::Route => "COALESCE(route, '-')",
            // A request refused before routing has no backend or tier.
            Dimension::Backend => "COALESCE(NULLIF(backend, ''), '-')",
            Dimension::Tier => "COALESCE(NULLIF(tier, ''), '-')",
            // Rows from before the column was added name no provider.
            Dimension::Provider => "COALESCE(NULLIF(provider, ''), '-')",
            Dimension::Day => "strftime('%Y-%m-%d', ts_ms / 1000, 'unixepoch')",
        }
    }
}

/// One group's spend.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SpendLine {
    pub group: String,
    /// Backend calls (each try, hedge leg and routing encoder call).
    pub requests: u64,
    /// Every prompt token, however billed (as in every report).
    pub input_tokens: u64,
    /// Of `input_tokens`, those read from a provider's prompt cache.
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub cloud_usd: f64,
    pub local_usd: f64,
    /// The same traffic priced on the reference cloud model.
    pub counterfactual_usd: f64,
    pub savings_usd: f64,
    /// Rows whose usage was counted here because the backend reported none.
    pub estimated: u64,
    /// Requests refused before any backend call (they cost nothing).
    pub refused: u64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpendReport {
    pub since_ms: i64,
    pub by: &'static str,
    pub lines: Vec<SpendLine>,
    pub total: SpendLine,
    /// What `counterfactual_usd` prices the traffic on, when the config
    /// that reads the report names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counterfactual: Option<CounterfactualBasis>,
}

/// The reference model the counterfactual is priced on, and its provider.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CounterfactualBasis {
    pub model: String,
    pub provider: Option<&'static str>,
}

impl SpendReport {
    /// The report, saying which model its counterfactual is priced on.
    pub fn priced_on(mut self, reference: Option<&switchyard_policies::Reference>) -> Self {
        self.counterfactual = reference.map(|r| CounterfactualBasis {
            model: r.model.clone(),
            provider: r.provider,
        });
        self
    }
}

/// SQLite integers are signed; counts are never negative.
fn count(value: Option<i64>) -> u64 {
    value.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Cloud tiers, for the cloud/local split.
const CLOUD: &str = "tier IN ('cloud', 'large')";

/// The SQL a spend report's query is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    Sqlite,
    Postgres,
}

impl Dimension {
    /// The grouped expression in `dialect`.
    fn column_in(self, dialect: Dialect) -> &'static str {
        match (self, dialect) {
            (Dimension::Day, Dialect::Postgres) => {
                "to_char(to_timestamp(ts_ms / 1000) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
            }
            _ => self.column(),
        }
    }
}

/// The spend report's query (`?1` is the start; PostgreSQL's takes `$1`).
/// Counts are summed as CASE and cast to BIGINT, which both databases read
/// alike (PostgreSQL sums BIGINTs to NUMERIC); groups sort by their bytes,
/// SQLite's order, whatever the database's collation.
pub(super) fn spend_sql(by: Dimension, dialect: Dialect) -> String {
    let group = by.column_in(dialect);
    let (start, bytes) = match dialect {
        Dialect::Sqlite => ("?1", ""),
        Dialect::Postgres => ("$1", " COLLATE \"C\""),
    };
    format!(
        "SELECT {group}, CAST(SUM(CASE WHEN refusal IS NULL AND reason != 'shadow' THEN 1 ELSE 0 END) AS BIGINT),
                CAST(SUM(input_tokens + cached_tokens + cache_write_tokens) AS BIGINT),
                CAST(SUM(cached_tokens) AS BIGINT),
                CAST(SUM(output_tokens) AS BIGINT), SUM(cost_usd),
                SUM(CASE WHEN {CLOUD} THEN cost_usd ELSE 0 END), SUM(counterfactual_usd),
                CAST(SUM(estimated) AS BIGINT),
                CAST(SUM(CASE WHEN refusal IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT)
         FROM requests WHERE ts_ms >= {start} GROUP BY 1 ORDER BY 6 DESC, {group}{bytes}"
    )
}

/// One row of [`spend_sql`]'s answer: the group, then the sums in order.
pub(super) struct SpendSums {
    pub group: String,
    pub counts: [Option<i64>; 4],
    pub usd: [Option<f64>; 3],
    pub estimated: Option<i64>,
    pub refused: Option<i64>,
}

pub fn spend_report(
    conn: &Connection,
    since_ms: i64,
    by: Dimension,
) -> rusqlite::Result<SpendReport> {
    let mut statement = conn.prepare(&spend_sql(by, Dialect::Sqlite))?;
    let sums = statement
        .query_map([since_ms], |row| {
            Ok(SpendSums {
                group: row.get(0)?,
                counts: [row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?],
                usd: [row.get(5)?, row.get(6)?, row.get(7)?],
                estimated: row.get(8)?,
                refused: row.get(9)?,
            })
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    Ok(spend_lines(since_ms, by, sums))
}

/// The report from its query's rows, and their total.
pub(super) fn spend_lines(since_ms: i64, by: Dimension, sums: Vec<SpendSums>) -> SpendReport {
    let lines: Vec<SpendLine> = sums
        .into_iter()
        .map(|s| {
            let [cost, cloud, counterfactual] = s.usd.map(|v| v.unwrap_or(0.0));
            SpendLine {
                group: s.group,
                requests: count(s.counts[0]),
                input_tokens: count(s.counts[1]),
                cached_tokens: count(s.counts[2]),
                output_tokens: count(s.counts[3]),
                cost_usd: cost,
                cloud_usd: cloud,
                local_usd: cost - cloud,
                counterfactual_usd: counterfactual,
                savings_usd: counterfactual - cost,
                estimated: count(s.estimated),
                refused: count(s.refused),
            }
        })
        .collect();
    let mut total = SpendLine {
        group: "total".into(),
        ..SpendLine::default()
    };
    for line in &lines {
        total.requests += line.requests;
        total.input_tokens += line.input_tokens;
        total.cached_tokens += line.cached_tokens;
        total.output_tokens += line.output_tokens;
        total.cost_usd += line.cost_usd;
        total.cloud_usd += line.cloud_usd;
        total.local_usd += line.local_usd;
        total.counterfactual_usd += line.counterfactual_usd;
        total.savings_usd += line.savings_usd;
        total.estimated += line.estimated;
        total.refused += line.refused;
    }
    SpendReport {
        since_ms,
        by: by.name(),
        lines,
        total,
        counterfactual: None,
    }
}

/// The query of [`spend_since`], in SQL that SQLite and PostgreSQL read
/// alike (`?1` is the start).
pub(super) fn spend_since_sql() -> String {
    format!(
        "SELECT CAST('key' AS TEXT), key, SUM(CASE WHEN {CLOUD} THEN cost_usd ELSE 0 END), SUM(cost_usd)
           FROM requests WHERE ts_ms >= ?1 AND key IS NOT NULL GROUP BY key
         UNION ALL
         SELECT CAST('team' AS TEXT), team, SUM(CASE WHEN {CLOUD} THEN cost_usd ELSE 0 END), SUM(cost_usd)
           FROM requests WHERE ts_ms >= ?1 AND team IS NOT NULL GROUP BY team"
    )
}

/// Spend so far per key and per team since `since_ms`, split into
/// (cloud, total), for budgets to start from after a restart.
pub fn spend_since(
    conn: &Connection,
    since_ms: i64,
) -> rusqlite::Result<Vec<(String, String, f64, f64)>> {
    let mut statement = conn.prepare(&spend_since_sql())?;
    statement
        .query_map([since_ms], |row| {
            Ok((
                row.get(0)?,
                row.get(1)?,
                row.get::<_, Option<f64>>(2)?.unwrap_or(0.0),
                row.get::<_, Option<f64>>(3)?.unwrap_or(0.0),
            ))
        })?
        .collect()
}

/// The nearest-rank quantile of sorted values, as every report takes it.
pub(super) fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    sorted.get(((last as f64) * q).round() as usize).copied()
}

/// `7d`, `24h`, `30m` -> milliseconds: a whole number of days, hours or
/// minutes. The text comes from a query string or a command line, so it
/// may be anything: whatever it is, the answer is a duration or an error
/// that says why, never a panic.
pub fn parse_since(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not a duration such as 7d, 24h or 30m");
    let units = [
        ("d", 86_400_000, "days"),
        ("h", 3_600_000, "hours"),
        ("m", 60_000, "minutes"),
    ];
    let Some((number, unit_ms, unit)) = units
        .into_iter()
        .find_map(|(suffix, ms, name)| Some((text.strip_suffix(suffix)?, ms, name)))
    else {
        return Err(bad());
    };
    // Digits only: no sign, no space (`str::parse` takes a leading `+`).
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    number
        .parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(unit_ms))
        .ok_or_else(|| {
            format!(
                "`{text}` is too long a duration: at most {} {unit}",
                i64::MAX / unit_ms
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse() {
        assert_eq!(parse_since("7d"), Ok(7 * 86_400_000));
        assert_eq!(parse_since("30m"), Ok(30 * 60_000));
        assert!(parse_since("soon").is_err());
        assert!(parse_since("-1d").is_err());
    }

    /// Issue #38, bug 7: `since=7é` cut `é` in half and panicked.
    #[test]
    fn any_since_text_is_a_duration_or_an_error_never_a_panic() {
        assert_eq!(parse_since("24h"), Ok(24 * 3_600_000));
        assert_eq!(parse_since("0d"), Ok(0));
        for text in [
            "7é",
            "é",
            "",
            "7",
            "d",
            "-1d",
            "+1d",
            " 7d",
            "7d ",
            "1w",
            "7D",
            "1.5h",
            "7dd",
            "é7d",
            "7\u{0}d",
            "١d",
            "🦀m",
            "7\u{301}d",
        ] {
            let err = parse_since(text).unwrap_err();
            assert!(
                err.contains("is not a duration such as 7d"),
                "{text:?}: {err}"
            );
        }
        for text in [
            "99999999999999999999d",
            "106751991168d",
            "9223372036854775807m",
        ] {
            let err = parse_since(text).unwrap_err();
            assert!(err.contains("too long a duration"), "{text:?}: {err}");
        }
        // The longest there is, to the day.
        assert_eq!(
            parse_since("106751991167d"),
            Ok(106_751_991_167 * 86_400_000)
        );
    }
}
