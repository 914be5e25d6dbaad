//! Budget attainment from the ledger: for the requests held to a latency
//! budget (their route's own, else their profile's: docs/src/routing/profiles.md,
//! as the router holds them: a RAG budget grows with the prompt), how many
//! got the speed it needs, and how many were served far faster than needed
//! on a paid cloud tier.

use std::collections::BTreeMap;

use rusqlite::Connection;
use switchyard_policies::{Config, LatencyBudget, Profile};
use switchyard_router::budget_for;

use crate::ledger::report::quantile;

/// What an attainment report groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttainmentDimension {
    Profile,
    Route,
    Backend,
}

impl AttainmentDimension {
    pub const ALL: [AttainmentDimension; 3] = [
        AttainmentDimension::Profile,
        AttainmentDimension::Route,
        AttainmentDimension::Backend,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AttainmentDimension::Profile => "profile",
            AttainmentDimension::Route => "route",
            AttainmentDimension::Backend => "backend",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// Served this much faster than the budget (first token within a quarter
/// of it, decoding at four times its rate), a request on a cloud tier paid
/// for speed nobody waited for.
const OVER_SERVED_FACTOR: f64 = 4.0;

/// One group's attainment. Shares are of the requests where the figure was
/// measured (a whole answer's first token is not seen).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AttainmentLine {
    pub group: String,
    /// Answered requests that named a profile.
    pub requests: u64,
    /// With a measured first token, and of those within its budget.
    pub ttft_measured: u64,
    pub within_ttft_share: Option<f64>,
    /// With a measured decode rate, and of those at the budget's rate.
    pub decode_measured: u64,
    pub within_decode_share: Option<f64>,
    /// Of those with both measured, within both.
    pub within_both_share: Option<f64>,
    pub ttft_p50_ms: Option<f64>,
    pub ttft_p90_ms: Option<f64>,
    pub decode_p50_tokens_per_s: Option<f64>,
    /// On a cloud tier and far faster than needed (or with no budget to
    /// meet at all: unattended and batch work).
    pub over_served: u64,
    pub over_served_usd: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AttainmentReport {
    pub since_ms: i64,
    pub by: &'static str,
    pub lines: Vec<AttainmentLine>,
    pub total: AttainmentLine,
    /// Each backend's decode and prefill speeds and failed share over the
    /// last hour against before it.
    pub drift: Vec<crate::ledger::drift::DriftLine>,
    /// Batch lines' throughput, and interactive first tokens while they ran.
    pub batches: crate::ledger::batch_load::BatchLoad,
}

pub(super) const HOUR_MS: i64 = 3_600_000;

/// One answered request, as the report reads it.
struct Served {
    group: String,
    budget: Option<LatencyBudget>,
    cloud: bool,
    /// Answered from the response cache (no backend time, no cost).
    cache_hit: bool,
    cost_usd: f64,
    ttft_ms: Option<f64>,
    decode: Option<f64>,
}

/// What one request got, against its profile's budget.
struct Verdict {
    /// Whether its first token came within budget (`None`: not measured).
    ttft: Option<bool>,
    /// Whether it decoded at the budget's rate (`None`: not measured).
    decode: Option<bool>,
    over_served: bool,
}

impl Served {
    fn verdict(&self) -> Verdict {
        let budget = self.budget;
        let ttft_budget_ms = budget
            .and_then(|b| b.ttft)
            .map(|t| t.as_secs_f64() * 1000.0);
        let min_rate = budget.map_or(0.0, |b| b.min_tokens_per_s);
        let ttft_ok = self
            .ttft_ms
            .map(|ms| ttft_budget_ms.is_none_or(|budget| ms <= budget));
        let decode_ok = self.decode.map(|rate| rate >= min_rate);
        let far_faster = match (ttft_budget_ms, self.ttft_ms, self.decode) {
            // Nobody waits for it: any cloud speed is more than it needs.
            (None, _, _) => true,
            (Some(budget), Some(ms), Some(rate)) => {
                ms * OVER_SERVED_FACTOR <= budget && rate >= min_rate * OVER_SERVED_FACTOR
            }
            _ => false,
        };
        Verdict {
            ttft: ttft_ok,
            decode: decode_ok,
            over_served: self.cloud && !self.cache_hit && far_faster,
        }
    }
}

/// Cloud tiers, as the spend report counts them.
const CLOUD_TIERS: [&str; 2] = ["cloud", "large"];

/// The routes' own latency budgets, by route name.
pub fn route_budgets(config: &Config) -> BTreeMap<String, LatencyBudget> {
    config
        .routes
        .iter()
        .filter_map(|(name, route)| Some((name.clone(), route.budget?)))
        .collect()
}

/// `route_budgets`: the routes' own budgets, by route name (a route's
/// budget comes before its requests' profiles, as in routing).
pub fn attainment_report(
    conn: &Connection,
    since_ms: i64,
    by: AttainmentDimension,
    route_budgets: &BTreeMap<String, LatencyBudget>,
) -> rusqlite::Result<AttainmentReport> {
    let mut report = attainment_lines(conn, since_ms, by, route_budgets)?;
    report.drift = crate::ledger::drift::drift(conn, since_ms, crate::ledger::now_ms() - HOUR_MS)?;
    report.batches = crate::ledger::batch_load::batch_load(conn, since_ms)?;
    Ok(report)
}

/// The report without its drift lines (the dashboard's, which shows none).
pub fn attainment_lines(
    conn: &Connection,
    since_ms: i64,
    by: AttainmentDimension,
    route_budgets: &BTreeMap<String, LatencyBudget>,
) -> rusqlite::Result<AttainmentReport> {
    let mut statement = conn.prepare(
        "SELECT COALESCE(route, '-'), backend, tier, profile, input_tokens + cached_tokens + cache_write_tokens,
                cost_usd, ttft_ms, decode_tokens_per_s, cache_hit
         FROM requests
         WHERE ts_ms >= ?1 AND status = 'ok' AND refusal IS NULL AND reason != 'shadow'",
    )?;
    let rows = statement.query_map([since_ms], |row| {
        let route: String = row.get(0)?;
        let backend: String = row.get(1)?;
        let tier: String = row.get(2)?;
        let profile: Option<String> = row.get(3)?;
        let prompt: i64 = row.get(4)?;
        Ok((
            route,
            backend,
            tier,
            profile,
            prompt,
            row.get(5)?,
            row.get(6)?,
            row.get(7)?,
            row.get::<_, bool>(8)?,
        ))
    })?;
    let mut served = Vec::new();
    for row in rows {
        let (route, backend, tier, profile, prompt, cost_usd, ttft_ms, decode, cache_hit) = row?;
        // A profile this version does not know (an older or newer ledger)
        // has no budget to hold it to.
        let profile = profile.as_deref().and_then(Profile::from_name);
        let prompt_tokens = u32::try_from(prompt.max(0)).unwrap_or(u32::MAX);
        let Some(budget) = budget_for(route_budgets.get(&route).copied(), profile, prompt_tokens)
        else {
            // Held to no budget: nothing to attain.
            continue;
        };
        let group = match by {
            AttainmentDimension::Profile => profile.map_or("-", Profile::name).to_owned(),
            AttainmentDimension::Route => route,
            AttainmentDimension::Backend => backend,
        };
        served.push(Served {
            group,
            budget: Some(budget),
            cloud: CLOUD_TIERS.contains(&tier.as_str()),
            cache_hit,
            cost_usd,
            ttft_ms,
            decode,
        });
    }
    let mut groups: Vec<String> = served.iter().map(|s| s.group.clone()).collect();
    groups.sort();
    groups.dedup();
    let lines = groups
        .into_iter()
        .map(|group| {
            let members: Vec<&Served> = served.iter().filter(|s| s.group == group).collect();
            line(group, &members)
        })
        .collect();
    let all: Vec<&Served> = served.iter().collect();
    Ok(AttainmentReport {
        since_ms,
        by: by.name(),
        lines,
        total: line("total".to_owned(), &all),
        drift: Vec::new(),
        batches: Default::default(),
    })
}

fn line(group: String, members: &[&Served]) -> AttainmentLine {
    let share = |hits: usize, of: usize| (of > 0).then(|| hits as f64 / of as f64);
    let verdicts: Vec<Verdict> = members.iter().map(|s| s.verdict()).collect();
    let count = |f: &dyn Fn(&Verdict) -> bool| verdicts.iter().filter(|v| f(v)).count();
    let ttft_measured = count(&|v| v.ttft.is_some());
    let decode_measured = count(&|v| v.decode.is_some());
    let both_measured = count(&|v| v.ttft.is_some() && v.decode.is_some());
    let mut ttfts: Vec<f64> = members.iter().filter_map(|s| s.ttft_ms).collect();
    let mut rates: Vec<f64> = members.iter().filter_map(|s| s.decode).collect();
    ttfts.sort_by(f64::total_cmp);
    rates.sort_by(f64::total_cmp);
    let over: Vec<&&Served> = members
        .iter()
        .zip(&verdicts)
        .filter(|(_, v)| v.over_served)
        .map(|(s, _)| s)
        .collect();
    AttainmentLine {
        group,
        requests: members.len() as u64,
        ttft_measured: ttft_measured as u64,
        within_ttft_share: share(count(&|v| v.ttft == Some(true)), ttft_measured),
        decode_measured: decode_measured as u64,
        within_decode_share: share(count(&|v| v.decode == Some(true)), decode_measured),
        within_both_share: share(
            count(&|v| v.ttft == Some(true) && v.decode == Some(true)),
            both_measured,
        ),
        ttft_p50_ms: quantile(&ttfts, 0.5),
        ttft_p90_ms: quantile(&ttfts, 0.9),
        decode_p50_tokens_per_s: quantile(&rates, 0.5),
        over_served: over.len() as u64,
        over_served_usd: over.iter().map(|s| s.cost_usd).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger with rows whose verdicts are worked out by hand below.
    fn ledger() -> (Connection, std::path::PathBuf) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("attainment-{}-{n}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let conn = super::super::schema::open(path.to_str().unwrap(), false).unwrap();
        let rows = [
            // route, backend, tier, profile, prompt, cost, ttft, decode, status
            (
                "chat",
                "local",
                "small",
                Some("chat"),
                100,
                0.0,
                Some(400.0),
                Some(50.0),
                "ok",
            ),
            (
                "chat",
                "local",
                "small",
                Some("chat"),
                100,
                0.0,
                Some(1500.0),
                Some(50.0),
                "ok",
            ),
            (
                "chat",
                "cloud",
                "cloud",
                Some("chat"),
                100,
                0.01,
                Some(200.0),
                Some(90.0),
                "ok",
            ),
            (
                "chat",
                "local",
                "small",
                Some("chat"),
                100,
                0.0,
                None,
                Some(10.0),
                "ok",
            ),
            // RAG: 4,000 prompt tokens, so 1 s + 2 s of budget.
            (
                "rag",
                "local",
                "small",
                Some("rag"),
                4000,
                0.0,
                Some(2500.0),
                Some(20.0),
                "ok",
            ),
            (
                "batch",
                "cloud",
                "cloud",
                Some("batch"),
                50,
                0.02,
                None,
                Some(80.0),
                "ok",
            ),
            // Not counted: failed, or no profile.
            (
                "chat",
                "local",
                "small",
                Some("chat"),
                100,
                0.0,
                Some(9000.0),
                None,
                "upstream_error",
            ),
            (
                "chat",
                "local",
                "small",
                None,
                100,
                0.0,
                Some(100.0),
                Some(50.0),
                "ok",
            ),
        ];
        for (route, backend, tier, profile, prompt, cost, ttft, decode, status) in rows {
            conn.execute(
                "INSERT INTO requests (ts_ms, route, backend, tier, profile, dialect, endpoint,
                     input_tokens, cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                     cost_usd, counterfactual_usd, ttft_ms, decode_tokens_per_s, duration_ms, status,
                     reason, hedge, fallback, cache_hit, estimated)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'openai', 'chat', ?6, 0, 0, 10, 0, ?7, 0, ?8, ?9, 1000, ?10,
                     'split', 0, 0, 0, 0)",
                rusqlite::params![
                    super::super::now_ms(),
                    route,
                    backend,
                    tier,
                    profile,
                    prompt,
                    cost,
                    ttft,
                    decode,
                    status
                ],
            )
            .unwrap();
        }
        (conn, path)
    }

    #[test]
    fn attainment_per_profile_worked_out_by_hand() {
        let (conn, path) = ledger();
        let report =
            attainment_report(&conn, 0, AttainmentDimension::Profile, &BTreeMap::new()).unwrap();
        let chat = report.lines.iter().find(|l| l.group == "chat").unwrap();
        // Four answered chat requests; three with a first token (400 and
        // 200 within 1 s, 1,500 not), four decode rates (10 under 20).
        assert_eq!(chat.requests, 4);
        assert_eq!(chat.ttft_measured, 3);
        assert_eq!(chat.within_ttft_share, Some(2.0 / 3.0));
        assert_eq!(chat.within_decode_share, Some(3.0 / 4.0));
        assert_eq!(chat.within_both_share, Some(2.0 / 3.0));
        assert_eq!(
            (chat.ttft_p50_ms, chat.ttft_p90_ms),
            (Some(400.0), Some(1500.0))
        );
        // The cloud answer beat the budget four times over on both counts
        // (200 ms * 4 <= 1 s; 90 tokens/s >= 4 * 20): over-served.
        assert_eq!(chat.over_served, 1);
        let rag = report.lines.iter().find(|l| l.group == "rag").unwrap();
        assert_eq!(rag.within_ttft_share, Some(1.0), "2.5 s within 3 s");
        let batch = report.lines.iter().find(|l| l.group == "batch").unwrap();
        assert_eq!(batch.within_ttft_share, None, "no first token measured");
        assert_eq!((batch.over_served, batch.over_served_usd), (1, 0.02));
        assert_eq!(report.total.requests, 6);
        assert_eq!(report.total.over_served, 2);
        let by_backend =
            attainment_report(&conn, 0, AttainmentDimension::Backend, &BTreeMap::new()).unwrap();
        let groups: Vec<&str> = by_backend.lines.iter().map(|l| l.group.as_str()).collect();
        assert_eq!(groups, ["cloud", "local"]);
        drop(conn);
        let _ = std::fs::remove_file(path);
    }
}
