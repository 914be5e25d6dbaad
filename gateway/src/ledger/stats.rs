//! The dashboard's figures from the ledger: one window (1 h, 24 h or 7 d)
//! cut into buckets, with the routing split, spend against the all-cloud
//! counterfactual and first-token times per profile over time, and the
//! top keys and teams by spend.

use std::collections::BTreeMap;

use rusqlite::{Connection, params};
use serde::Serialize;

use crate::ledger::report::quantile;

/// A dashboard window: its length and its buckets' width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub name: &'static str,
    pub length_ms: i64,
    pub bucket_ms: i64,
}

impl Window {
    pub const ALL: [Window; 3] = [
        Window {
            name: "1h",
            length_ms: 3_600_000,
            bucket_ms: 60_000,
        },
        Window {
            name: "24h",
            length_ms: 86_400_000,
            bucket_ms: 1_800_000,
        },
        Window {
            name: "7d",
            length_ms: 604_800_000,
            bucket_ms: 10_800_000,
        },
    ];

    pub fn named(name: &str) -> Option<Window> {
        Self::ALL.into_iter().find(|w| w.name == name)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Requests (by request id), and those no backend answered.
    pub requests: u64,
    pub errors: u64,
    pub cost_usd: f64,
    pub cloud_usd: f64,
    pub local_usd: f64,
    pub counterfactual_usd: f64,
    pub savings_usd: f64,
}

/// A route's calls to one backend per bucket: every call, a hedge's two
/// legs and a fallback's failed tries included (refusals are not calls).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitSeries {
    /// `None`: a backend the caller named directly.
    pub route: Option<String>,
    pub backend: String,
    pub tier: String,
    pub calls: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SpendSeries {
    pub cloud_usd: Vec<f64>,
    pub local_usd: Vec<f64>,
    pub counterfactual_usd: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TtftSeries {
    pub profile: String,
    pub budget_ms: Option<f64>,
    pub p50_ms: Vec<Option<f64>>,
    pub p90_ms: Vec<Option<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Spender {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<Option<String>>,
    /// Requests (by request id), refused ones included.
    pub requests: u64,
    pub cost_usd: f64,
}

/// The window's figures from the ledger.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerStats {
    pub window: &'static str,
    pub now_ms: i64,
    pub since_ms: i64,
    pub bucket_ms: i64,
    pub buckets: Vec<i64>,
    pub totals: Totals,
    pub split: Vec<SplitSeries>,
    pub spend: SpendSeries,
    pub ttft: Vec<TtftSeries>,
    pub top_keys: Vec<Spender>,
    pub top_teams: Vec<Spender>,
}

/// Local tiers, whose spend is hardware share rather than a cloud bill.
const LOCAL_TIERS: &str = "('small', 'mid')";
/// Statuses of a request a backend answered (a hedge's losing leg and a
/// cascade's rejected answer are parts of requests answered elsewhere).
const ANSWERED: &str = "('ok', 'cancelled')";

/// The window's figures (read them in a transaction, so they agree with
/// each other).
pub fn ledger_stats(
    conn: &Connection,
    window: Window,
    now_ms: i64,
) -> rusqlite::Result<LedgerStats> {
    let since_ms = now_ms - window.length_ms;
    // Buckets aligned to their width, the last one holding `now`.
    let first = since_ms.div_euclid(window.bucket_ms) * window.bucket_ms;
    let buckets: Vec<i64> = (0..)
        .map(|i| first + i * window.bucket_ms)
        .take_while(|start| *start <= now_ms)
        .collect();
    let at = |ts: i64| {
        usize::try_from((ts - first).div_euclid(window.bucket_ms))
            .unwrap_or(0)
            .min(buckets.len().saturating_sub(1))
    };
    let n = buckets.len();
    let totals = totals(conn, since_ms)?;

    type SplitKey = (Option<String>, String, String);
    let mut split: BTreeMap<SplitKey, Vec<u64>> = BTreeMap::new();
    let mut spend = SpendSeries {
        cloud_usd: vec![0.0; n],
        local_usd: vec![0.0; n],
        counterfactual_usd: vec![0.0; n],
    };
    let mut ttfts: BTreeMap<String, Vec<Vec<f64>>> = BTreeMap::new();
    let mut stmt = conn.prepare(&format!(
        "SELECT ts_ms, route, backend, tier, profile, cost_usd, counterfactual_usd, ttft_ms,
                tier IN {LOCAL_TIERS}, reason IN ('refused', 'shadow'), status = 'ok' AND NOT cache_hit
         FROM requests WHERE ts_ms >= ?1"
    ))?;
    let mut rows = stmt.query(params![since_ms])?;
    while let Some(row) = rows.next()? {
        let b = at(row.get(0)?);
        let (cost, counterfactual): (f64, f64) = (row.get(5)?, row.get(6)?);
        if row.get::<_, bool>(8)? {
            spend.local_usd[b] += cost;
        } else {
            spend.cloud_usd[b] += cost;
        }
        spend.counterfactual_usd[b] += counterfactual;
        // Refusals route nothing; a shadow copy's spend counts, but it is
        // not where the route sent the request.
        if row.get::<_, bool>(9)? {
            continue;
        }
        let key = (row.get(1)?, row.get(2)?, row.get(3)?);
        split.entry(key).or_insert_with(|| vec![0; n])[b] += 1;
        // First tokens of answers a backend gave (not a losing hedge leg's,
        // a rejected cascade step's or a cached replay's).
        let answered: bool = row.get(10)?;
        if let (true, Some(profile), Some(ttft)) = (
            answered,
            row.get::<_, Option<String>>(4)?,
            row.get::<_, Option<f64>>(7)?,
        ) {
            ttfts.entry(profile).or_insert_with(|| vec![Vec::new(); n])[b].push(ttft);
        }
    }
    let ttft = ttfts
        .into_iter()
        .map(|(profile, mut per_bucket)| {
            per_bucket
                .iter_mut()
                .for_each(|v| v.sort_by(f64::total_cmp));
            TtftSeries {
                budget_ms: switchyard_policies::Profile::from_name(&profile)
                    .and_then(|p| p.budget().ttft)
                    .map(|d| d.as_secs_f64() * 1000.0),
                p50_ms: per_bucket.iter().map(|v| quantile(v, 0.5)).collect(),
                p90_ms: per_bucket.iter().map(|v| quantile(v, 0.9)).collect(),
                profile,
            }
        })
        .collect();
    Ok(LedgerStats {
        window: window.name,
        now_ms,
        since_ms,
        bucket_ms: window.bucket_ms,
        buckets,
        totals,
        split: split
            .into_iter()
            .map(|((route, backend, tier), calls)| SplitSeries {
                route,
                backend,
                tier,
                calls,
            })
            .collect(),
        spend,
        ttft,
        top_keys: spenders(conn, since_ms, "key", true)?,
        top_teams: spenders(conn, since_ms, "team", false)?,
    })
}

fn totals(conn: &Connection, since_ms: i64) -> rusqlite::Result<Totals> {
    let (cost_usd, cloud_usd, counterfactual_usd): (f64, f64, f64) = conn.query_row(
        &format!(
            "SELECT COALESCE(SUM(cost_usd), 0),
                    COALESCE(SUM(CASE WHEN tier IN {LOCAL_TIERS} THEN 0 ELSE cost_usd END), 0),
                    COALESCE(SUM(counterfactual_usd), 0)
             FROM requests WHERE ts_ms >= ?1"
        ),
        params![since_ms],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    // A request's calls share its id: it failed when none was answered.
    let (requests, errors): (i64, i64) = conn.query_row(
        &format!(
            "SELECT COUNT(*), COALESCE(SUM(answered = 0), 0) FROM (
                SELECT MAX(status IN {ANSWERED}) AS answered FROM requests
                WHERE ts_ms >= ?1 AND reason != 'shadow' GROUP BY COALESCE(request_id, 'row-' || id))"
        ),
        params![since_ms],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    Ok(Totals {
        requests: requests.unsigned_abs(),
        errors: errors.unsigned_abs(),
        cost_usd,
        cloud_usd,
        local_usd: cost_usd - cloud_usd,
        counterfactual_usd,
        savings_usd: counterfactual_usd - cost_usd,
    })
}

/// The ten keys or teams that spent most in the window (keys with their team).
fn spenders(
    conn: &Connection,
    since_ms: i64,
    column: &str,
    with_team: bool,
) -> rusqlite::Result<Vec<Spender>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {column}, MAX(team), COUNT(DISTINCT COALESCE(request_id, 'row-' || id)),
                COALESCE(SUM(cost_usd), 0) FROM requests
         WHERE ts_ms >= ?1 AND {column} IS NOT NULL
         GROUP BY {column} ORDER BY 4 DESC, 1 LIMIT 10"
    ))?;
    stmt.query_map(params![since_ms], |r| {
        Ok(Spender {
            name: r.get(0)?,
            team: with_team.then(|| r.get(1)).transpose()?,
            requests: r.get::<_, i64>(2)?.unsigned_abs(),
            cost_usd: r.get(3)?,
        })
    })?
    .collect()
}
