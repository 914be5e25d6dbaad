//! The shadow comparison from the ledger: for each route and candidate,
//! the shadowed requests beside what served them (joined on the request's
//! id): first-token times at the prompts the route really gets, decode
//! speed, the share within each profile's latency budget, cost per
//! request and per day at the route's traffic, and how often the answers
//! agree.

use std::collections::BTreeMap;

use rusqlite::Connection;
use switchyard_policies::{LatencyBudget, Profile};
use switchyard_router::budget_for;

use crate::ledger::report::quantile;

const DAY_MS: f64 = 86_400_000.0;
/// The shortest span a day's traffic is extrapolated from.
const MIN_SPAN_MS: f64 = 3_600_000.0;

/// One side's figures: the candidate's, or what served the same requests.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SideFigures {
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    /// Median decode speed, tokens/s after the first.
    pub decode_tokens_per_s: Option<f64>,
    /// Of the requests held to a budget with a measured speed, the share
    /// that got it.
    pub within_budget: Option<f64>,
    pub cost_per_request_usd: f64,
    /// At the route's traffic in the window.
    pub cost_per_day_usd: f64,
}

/// One profile's share within budget, both sides.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProfileLine {
    pub profile: String,
    pub requests: u64,
    pub within_budget: Option<f64>,
    pub served_within_budget: Option<f64>,
}

/// A route's candidate beside the backend that served the same requests.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CompareLine {
    pub route: String,
    pub candidate: String,
    pub served_by: String,
    /// Shadowed requests whose served answer is in the ledger.
    pub requests: u64,
    /// Of those, copies the candidate failed.
    pub candidate_failed: u64,
    /// The candidate's figures (at the top level of the JSON line).
    #[serde(flatten)]
    pub candidate_figures: SideFigures,
    /// Mean normalised-text similarity of the answers, 0 to 1.
    pub agreement: Option<f64>,
    /// Share of answers with the same text.
    pub agreement_exact: Option<f64>,
    /// Of the checkable answers (JSON, tool calls, code), the share where
    /// both say the same once parsed, and how many there were.
    pub agreement_checked: Option<f64>,
    pub checked_requests: u64,
    pub by_profile: Vec<ProfileLine>,
    /// The served side's figures over the same requests.
    pub served: SideFigures,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CompareReport {
    pub since_ms: i64,
    pub lines: Vec<CompareLine>,
}

/// One call's figures, as a side of one pair.
#[derive(Default)]
struct Call {
    ok: bool,
    ttft_ms: Option<f64>,
    decode: Option<f64>,
    cost_usd: f64,
    within: Option<bool>,
}

/// A shadowed request: the copy, the served call, and how they compared.
struct Pair {
    profile: Option<Profile>,
    candidate: Call,
    served: Call,
    exact: Option<bool>,
    similarity: Option<f64>,
    checked: Option<bool>,
}

/// The comparison since `since_ms` (`now_ms` for extrapolating a day),
/// for `route` only when given. `route_budgets`: the routes' own latency
/// budgets, as routing holds requests to them.
pub fn compare_report(
    conn: &Connection,
    (since_ms, now_ms): (i64, i64),
    route: Option<&str>,
    route_budgets: &BTreeMap<String, LatencyBudget>,
) -> rusqlite::Result<CompareReport> {
    let mut report = CompareReport {
        since_ms,
        lines: Vec::new(),
    };
    // A ledger no version with shadows has written has none to compare;
    // nor has a window without copies.
    let has_columns: bool = conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('requests') WHERE name = 'agree_checked'",
        [],
        |r| r.get(0),
    )?;
    let has_copies = has_columns
        && conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM requests WHERE ts_ms >= ?1 AND reason = 'shadow')",
            [since_ms],
            |r| r.get::<_, bool>(0),
        )?;
    if !has_copies {
        return Ok(report);
    }
    let traffic = route_traffic(conn, since_ms, now_ms)?;
    // The served call is the request's answered call on the same route
    // (not an encoder's call for routing, not the candidate itself; at
    // most an hour before the window, as a copy follows its request's
    // first call). Copies cut off by a shutdown (`cancelled`)
    // say nothing of the candidate and are left out.
    let mut statement = conn.prepare(
        "SELECT s.route, s.backend, p.backend, s.profile, s.input_tokens + s.cached_tokens + s.cache_write_tokens,
                s.status = 'ok', s.ttft_ms, s.decode_tokens_per_s, s.cost_usd,
                p.ttft_ms, p.decode_tokens_per_s, p.cost_usd,
                s.agree_exact, s.agree_similarity, s.agree_checked
         FROM requests s JOIN requests p
           ON p.request_id = s.request_id AND p.route = s.route
              AND p.reason NOT IN ('shadow', 'routing-encoder') AND p.status = 'ok'
              AND p.refusal IS NULL AND p.backend != s.backend
              AND p.ts_ms >= ?1 - 3600000
         WHERE s.reason = 'shadow' AND s.ts_ms >= ?1 AND s.status != 'cancelled'
           AND s.route IS NOT NULL AND (?2 IS NULL OR s.route = ?2)
         ORDER BY s.ts_ms",
    )?;
    let mut groups: BTreeMap<(String, String, String), Vec<Pair>> = BTreeMap::new();
    let mut rows = statement.query(rusqlite::params![since_ms, route])?;
    while let Some(row) = rows.next()? {
        let route: String = row.get(0)?;
        let profile = row
            .get::<_, Option<String>>(3)?
            .as_deref()
            .and_then(Profile::from_name);
        let prompt = u32::try_from(row.get::<_, i64>(4)?.max(0)).unwrap_or(u32::MAX);
        let budget = budget_for(route_budgets.get(&route).copied(), profile, prompt);
        let call = |ok: bool, ttft_ms: Option<f64>, decode: Option<f64>, cost_usd: f64| Call {
            ok,
            ttft_ms,
            decode,
            cost_usd,
            within: ok.then(|| within(budget, ttft_ms, decode)).flatten(),
        };
        let pair = Pair {
            profile,
            candidate: call(row.get(5)?, row.get(6)?, row.get(7)?, row.get(8)?),
            served: call(true, row.get(9)?, row.get(10)?, row.get(11)?),
            exact: row.get(12)?,
            similarity: row.get(13)?,
            checked: row.get(14)?,
        };
        groups
            .entry((route, row.get(1)?, row.get(2)?))
            .or_default()
            .push(pair);
    }
    for ((route, candidate, served_by), pairs) in groups {
        let per_day = traffic.get(&route).copied().unwrap_or(0.0);
        let candidate_figures = side(pairs.iter().map(|p| &p.candidate), per_day);
        let served = side(pairs.iter().map(|p| &p.served), per_day);
        let checked: Vec<bool> = pairs.iter().filter_map(|p| p.checked).collect();
        report.lines.push(CompareLine {
            route,
            candidate,
            served_by,
            requests: pairs.len() as u64,
            candidate_failed: pairs.iter().filter(|p| !p.candidate.ok).count() as u64,
            candidate_figures,
            agreement: mean(pairs.iter().filter_map(|p| p.similarity)),
            agreement_exact: share(pairs.iter().filter_map(|p| p.exact)),
            agreement_checked: share(checked.iter().copied()),
            checked_requests: checked.len() as u64,
            by_profile: by_profile(&pairs),
            served,
        });
    }
    Ok(report)
}

/// Whether a call got its budget's speed: `None` when it is held to no
/// budget or nothing of its speed was measured.
fn within(
    budget: Option<LatencyBudget>,
    ttft_ms: Option<f64>,
    decode: Option<f64>,
) -> Option<bool> {
    let budget = budget?;
    let ttft_ok = ttft_ms.map(|ms| {
        budget
            .ttft
            .is_none_or(|limit| ms <= limit.as_secs_f64() * 1000.0)
    });
    let decode_ok = decode.map(|rate| rate >= budget.min_tokens_per_s);
    match (ttft_ok, decode_ok) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(true) && b.unwrap_or(true)),
    }
}

/// Each route's answered requests per day in the window, from its first
/// to now (at least an hour, so a minute's traffic is not a day's).
fn route_traffic(
    conn: &Connection,
    since_ms: i64,
    now_ms: i64,
) -> rusqlite::Result<BTreeMap<String, f64>> {
    let mut statement = conn.prepare(
        "SELECT route, COUNT(DISTINCT request_id), MIN(ts_ms) FROM requests
         WHERE ts_ms >= ?1 AND route IS NOT NULL AND reason != 'shadow' AND status = 'ok'
         GROUP BY route",
    )?;
    let rows = statement.query_map([since_ms], |r| {
        let (route, requests, first): (String, i64, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
        let span = ((now_ms - first) as f64).max(MIN_SPAN_MS);
        Ok((route, requests as f64 * DAY_MS / span))
    })?;
    rows.collect()
}

fn side<'a>(calls: impl Iterator<Item = &'a Call>, per_day: f64) -> SideFigures {
    let calls: Vec<&Call> = calls.collect();
    let sorted = |values: Vec<f64>| {
        let mut values = values;
        values.sort_by(f64::total_cmp);
        values
    };
    let ttfts = sorted(
        calls
            .iter()
            .filter(|c| c.ok)
            .filter_map(|c| c.ttft_ms)
            .collect(),
    );
    let decodes = sorted(
        calls
            .iter()
            .filter(|c| c.ok)
            .filter_map(|c| c.decode)
            .collect(),
    );
    let cost_per_request = mean(calls.iter().map(|c| c.cost_usd)).unwrap_or(0.0);
    SideFigures {
        ttft_p50_ms: quantile(&ttfts, 0.5),
        ttft_p90_ms: quantile(&ttfts, 0.9),
        decode_tokens_per_s: quantile(&decodes, 0.5),
        within_budget: share(calls.iter().filter_map(|c| c.within)),
        cost_per_request_usd: cost_per_request,
        cost_per_day_usd: cost_per_request * per_day,
    }
}

fn by_profile(pairs: &[Pair]) -> Vec<ProfileLine> {
    let mut profiles: BTreeMap<&'static str, Vec<&Pair>> = BTreeMap::new();
    for pair in pairs {
        profiles
            .entry(pair.profile.map_or("-", Profile::name))
            .or_default()
            .push(pair);
    }
    profiles
        .into_iter()
        .map(|(profile, pairs)| ProfileLine {
            profile: profile.to_owned(),
            requests: pairs.len() as u64,
            within_budget: share(pairs.iter().filter_map(|p| p.candidate.within)),
            served_within_budget: share(pairs.iter().filter_map(|p| p.served.within)),
        })
        .collect()
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

fn share(values: impl Iterator<Item = bool>) -> Option<f64> {
    mean(values.map(|v| if v { 1.0 } else { 0.0 }))
}
