//! `switchyard advise`: from the ledger's window of traffic, per route, the
//! cheapest split of that traffic over the route's backends that keeps at
//! least a target share within its latency budget; the over-served traffic;
//! and, for traffic served in the cloud, whether a local backend could have
//! met its budgets and at what volume it would pay for itself.
//!
//! Predictions come from the latency model the router uses, fed the
//! window's own calls (so the advice rests on measurements, and says how
//! many), at each request's real prompt and answer lengths. Candidates a
//! route shadows are judged on the same requests served both ways
//! (`trials`).

mod predict;
mod text;
mod trials;

use std::collections::BTreeMap;

use serde::Serialize;
use switchyard_policies::{Config, Pricing};

pub use crate::cli::advice::predict::Request;
use crate::cli::advice::predict::{Model, Profiled, requests};
pub use crate::cli::advice::text::write;
pub use crate::cli::advice::trials::Trial;
use crate::ledger::{AttainmentDimension, attainment_report, compare_report, route_budgets};

/// What advise says of one backend for one route's traffic.
#[derive(Debug, Clone, Serialize)]
pub struct Candidate {
    pub backend: String,
    /// Share of the route's requests predicted within budget there.
    pub within_budget: f64,
    /// Predicted cost of all the route's requests there, USD.
    pub cost_usd: f64,
    /// Calls of the backend's own the prediction rests on.
    pub measured_calls: u64,
}

/// A split of a route's traffic, with what it is predicted to give.
#[derive(Debug, Clone, Serialize)]
pub struct Split {
    /// Backend and weight (percent, summing to 100).
    pub weights: Vec<(String, u32)>,
    pub within_budget: f64,
    pub cost_usd: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RouteAdvice {
    pub route: String,
    /// Answered requests of the window the advice is about.
    pub requests: u64,
    /// As served: the share measured within budget (of the requests whose
    /// first token was measured) and the cost.
    pub measured_within_budget: Option<f64>,
    pub measured_cost_usd: f64,
    pub candidates: Vec<Candidate>,
    /// The cheapest split predicted to reach the target; the likeliest to
    /// come near it when none does (`reaches_target` false).
    pub advised: Option<Split>,
    pub reaches_target: bool,
    /// The route as configured already measured the target for less than
    /// the advised split (a per-request strategy can beat any split).
    pub keep_current: bool,
    /// Served far faster than needed on a cloud tier, and what it cost.
    pub over_served: u64,
    pub over_served_usd: f64,
    /// Of those, the ones a local backend of the route is predicted to
    /// meet the budget of, and what they would have saved on the cheapest
    /// such backend, one by one (`None` when there are none).
    pub over_served_movable: u64,
    pub over_served_savings_usd: Option<f64>,
    /// The YAML to paste under `routes:`.
    pub snippet: Option<String>,
}

/// For the cloud traffic of the window: could a local backend have served
/// it, and above what volume would that pay.
#[derive(Debug, Clone, Serialize)]
pub struct LocalOption {
    pub backend: String,
    pub usd_per_hour: f64,
    /// Of the cloud requests, the share it is predicted to serve within
    /// budget, and what they cost in the cloud.
    pub could_serve: f64,
    pub cloud_cost_of_those_usd: f64,
    /// Those requests per day at the window's rate, and the daily volume
    /// above which the local server's hourly cost is less than their cloud
    /// bill.
    pub requests_per_day: f64,
    pub break_even_requests_per_day: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub since_ms: i64,
    pub now_ms: i64,
    pub target: f64,
    pub routes: Vec<RouteAdvice>,
    pub cloud_requests: u64,
    pub cloud_cost_usd: f64,
    pub local_options: Vec<LocalOption>,
    /// Candidates tried on the routes' real traffic (shadow copies).
    pub trials: Vec<Trial>,
}

/// `switchyard advise`.
pub fn run(
    config: &Config,
    since: &str,
    target: f64,
    format: &str,
    out: &mut impl std::io::Write,
) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&target) {
        anyhow::bail!("--target {target}: a share between 0 and 1, such as 0.95");
    }
    let since = crate::ledger::parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let now = crate::ledger::now_ms();
    let conn = crate::cli::report_text::open_ledger(&config.ledger, now - since)?;
    let advice = advise(&conn, config, now - since, now, target)?;
    write(out, format, &advice)
}

/// Advice from the window `since_ms..now_ms` of the ledger on `conn`.
pub fn advise(
    conn: &rusqlite::Connection,
    config: &Config,
    since_ms: i64,
    now_ms: i64,
    target: f64,
) -> rusqlite::Result<Advice> {
    let rows = requests(conn, since_ms)?;
    let model = Model::learn(config, &rows);
    let budgets = route_budgets(config);
    let attainment = attainment_report(conn, since_ms, AttainmentDimension::Route, &budgets)?;
    let over: BTreeMap<&str, (u64, f64)> = attainment
        .lines
        .iter()
        .map(|l| (l.group.as_str(), (l.over_served, l.over_served_usd)))
        .collect();
    let mut routes = Vec::new();
    for route in config.routes.values() {
        let mine: Vec<&Request> = rows
            .iter()
            .filter(|r| r.route.as_deref() == Some(route.name.as_str()))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut names: Vec<&str> = route.strategy.backends();
        names.extend(route.fallbacks.iter().map(String::as_str));
        names.sort_unstable();
        names.dedup();
        let budget = budgets.get(&route.name).copied();
        let profiles: Vec<Profiled> = names
            .iter()
            .filter_map(|name| model.profile(name, &mine, budget))
            .collect();
        let candidates: Vec<Candidate> = profiles
            .iter()
            .map(|p| {
                let (within_budget, cost_usd) = p.at(1.0);
                Candidate {
                    backend: p.backend.clone(),
                    within_budget,
                    cost_usd,
                    measured_calls: p.measured_calls,
                }
            })
            .collect();
        let advised = cheapest_split(&profiles, target);
        let reaches_target = advised.is_some();
        let advised = advised.or_else(|| best_effort(&profiles));
        let measured_within_budget = {
            let measured: Vec<bool> = mine
                .iter()
                .filter_map(|r| r.measured_within(budget))
                .collect();
            (!measured.is_empty())
                .then(|| measured.iter().filter(|w| **w).count() as f64 / measured.len() as f64)
        };
        let measured_cost_usd: f64 = mine.iter().map(|r| r.cost_usd).sum();
        let keep_current = keep_current(
            (measured_within_budget, measured_cost_usd),
            advised.as_ref().filter(|_| reaches_target),
            target,
        );
        let (over_served, over_served_usd) =
            over.get(route.name.as_str()).copied().unwrap_or_default();
        let local: Vec<&Profiled> = profiles
            .iter()
            .filter(|p| {
                config
                    .backends
                    .get(&p.backend)
                    .is_some_and(|b| b.tier.is_local())
            })
            .collect();
        let savings: Vec<f64> = mine
            .iter()
            .enumerate()
            .filter(|(_, r)| r.over_served(budget))
            .filter_map(|(i, r)| {
                let cheapest = local
                    .iter()
                    .filter_map(|p| {
                        p.alone(i)
                            .filter(|(within, _)| *within)
                            .map(|(_, cost)| cost)
                    })
                    .min_by(f64::total_cmp)?;
                Some(if r.cost_usd > cheapest {
                    r.cost_usd - cheapest
                } else {
                    0.0
                })
            })
            .collect();
        // Folded from +0.0: an empty f64 sum is -0.0, which prints as such.
        let over_served_savings_usd =
            (!savings.is_empty()).then(|| savings.iter().fold(0.0, |sum, s| sum + s));
        routes.push(RouteAdvice {
            route: route.name.clone(),
            requests: mine.len() as u64,
            measured_within_budget,
            measured_cost_usd,
            snippet: advised
                .as_ref()
                .filter(|_| !keep_current)
                .map(|s| text::snippet(&route.name, s)),
            advised,
            reaches_target,
            keep_current,
            candidates,
            over_served,
            over_served_usd,
            over_served_movable: savings.len() as u64,
            over_served_savings_usd,
        });
    }
    let cloud: Vec<&Request> = rows.iter().filter(|r| !r.local).collect();
    // Per day over the span the rows cover (a ledger younger than the
    // window, or pruned, covers less), at least an hour.
    let span_ms = match (rows.first(), rows.last()) {
        (Some(first), Some(last)) => last.ts_ms - first.ts_ms,
        _ => 0,
    };
    let days = (span_ms as f64 / 86_400_000.0).max(1.0 / 24.0);
    let local_options = config
        .backends
        .values()
        .filter(|b| b.tier.is_local())
        .filter_map(|b| {
            let Pricing::Hourly { usd_per_hour } = b.pricing else {
                return None;
            };
            let served = model.could_serve(&b.name, &cloud, &budgets);
            if served.is_empty() && model.calls(&b.name) == 0 {
                return None;
            }
            let cost: f64 = served.iter().map(|r| r.cost_usd).sum();
            let per_day = served.len() as f64 / days;
            let cost_each = cost / served.len().max(1) as f64;
            Some(LocalOption {
                backend: b.name.clone(),
                usd_per_hour,
                could_serve: served.len() as f64 / cloud.len().max(1) as f64,
                cloud_cost_of_those_usd: cost,
                requests_per_day: per_day,
                break_even_requests_per_day: (cost_each > 0.0)
                    .then(|| usd_per_hour * 24.0 / cost_each),
            })
        })
        .collect();
    Ok(Advice {
        since_ms,
        now_ms,
        target,
        routes,
        cloud_requests: cloud.len() as u64,
        cloud_cost_usd: cloud.iter().map(|r| r.cost_usd).sum(),
        local_options,
        trials: trials::trials(
            &compare_report(conn, (since_ms, now_ms), None, &budgets)?.lines,
            target,
        ),
    })
}

/// Whether a route that measured `within` and `cost` should stay as it
/// is: it reached the target, and no split is predicted to reach it for
/// less (`advised`: the cheapest split reaching the target, if any).
fn keep_current((within, cost): (Option<f64>, f64), advised: Option<&Split>, target: f64) -> bool {
    within.is_some_and(|w| w + 1e-9 >= target) && advised.is_none_or(|s| cost <= s.cost_usd)
}

/// Every split of the traffic over one backend or two, in whole percent,
/// with its predicted share within budget and cost.
fn splits(profiles: &[Profiled]) -> Vec<Split> {
    let at: Vec<Vec<(f64, f64)>> = profiles
        .iter()
        .map(|p| (0..=100).map(|w| p.at(f64::from(w) / 100.0)).collect())
        .collect();
    let mut all = Vec::new();
    for (i, a) in profiles.iter().enumerate() {
        let (within, cost) = at[i][100];
        all.push(Split {
            weights: vec![(a.backend.clone(), 100)],
            within_budget: within,
            cost_usd: cost,
        });
        for (j, b) in profiles.iter().enumerate().skip(i + 1) {
            for w in 1..100u32 {
                let (share_a, share_b) = (f64::from(100 - w) / 100.0, f64::from(w) / 100.0);
                let (within_a, cost_a) = at[i][(100 - w) as usize];
                let (within_b, cost_b) = at[j][w as usize];
                all.push(Split {
                    weights: vec![(a.backend.clone(), 100 - w), (b.backend.clone(), w)],
                    within_budget: share_a * within_a + share_b * within_b,
                    cost_usd: share_a * cost_a + share_b * cost_b,
                });
            }
        }
    }
    all
}

/// The cheapest split predicted to keep `target` of the traffic within
/// budget. A split's figures are its backends' weighted by their shares,
/// each at the load its share brings, so one backend, or two mixed, is
/// the optimum.
fn cheapest_split(profiles: &[Profiled], target: f64) -> Option<Split> {
    splits(profiles)
        .into_iter()
        .filter(|s| s.within_budget + 1e-9 >= target)
        .min_by(|a, b| a.cost_usd.total_cmp(&b.cost_usd))
}

/// The split with the most traffic within budget (the cheapest of those),
/// when none reaches the target.
fn best_effort(profiles: &[Profiled]) -> Option<Split> {
    splits(profiles).into_iter().max_by(|a, b| {
        a.within_budget
            .total_cmp(&b.within_budget)
            .then(b.cost_usd.total_cmp(&a.cost_usd))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(within_budget: f64, cost_usd: f64) -> Split {
        Split {
            weights: vec![("b".into(), 100)],
            within_budget,
            cost_usd,
        }
    }

    #[test]
    fn a_route_that_measured_the_target_for_less_stays_as_it_is() {
        let cheaper_split = split(0.95, 1.0);
        // Measured the target for less than the split: keep.
        assert!(keep_current((Some(0.96), 0.5), Some(&cheaper_split), 0.95));
        // A split reaches it for less: take the split.
        assert!(!keep_current((Some(0.96), 2.0), Some(&cheaper_split), 0.95));
        // Short of the target, or not measured: advise.
        assert!(!keep_current((Some(0.90), 0.5), Some(&cheaper_split), 0.95));
        assert!(!keep_current((None, 0.5), Some(&cheaper_split), 0.95));
        // No split reaches it, the route does: keep.
        assert!(keep_current((Some(0.97), 9.0), None, 0.95));
    }
}
