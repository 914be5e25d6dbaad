//! What each backend would have done with a request: the router's latency
//! model, taught the window's calls, at the request's own lengths.

use std::collections::BTreeMap;
use std::time::Duration;

use rusqlite::params;
use switchyard_policies::{Config, LatencyBudget, Profile, PromptClass, TokenCounts};
use switchyard_router::Router;
use switchyard_router::budget_for;
use switchyard_router::latency::{LatencyStore, Observation, Prediction, Shape};

use super::{Candidate, Split};

/// An answered request of the window, as advise reads it.
#[derive(Debug, Clone)]
pub struct Request {
    pub route: Option<String>,
    pub backend: String,
    pub local: bool,
    pub profile: Option<Profile>,
    pub tokens: TokenCounts,
    pub class: PromptClass,
    pub ttft_ms: Option<f64>,
    pub duration_ms: f64,
    pub decode_tokens_per_s: Option<f64>,
    pub cost_usd: f64,
}

impl Request {
    fn prompt_tokens(&self) -> u32 {
        u32::try_from(self.tokens.prompt()).unwrap_or(u32::MAX)
    }

    /// The budget it is held to: its route's, else its profile's.
    fn budget(&self, route: Option<LatencyBudget>) -> Option<LatencyBudget> {
        budget_for(route, self.profile, self.prompt_tokens())
    }

    /// Whether what it got was within budget, where that was measured.
    pub fn measured_within(&self, route: Option<LatencyBudget>) -> Option<bool> {
        let budget = self.budget(route)?;
        let ttft = self.ttft_ms?;
        let ttft_ok = budget.ttft.is_none_or(|t| ttft <= t.as_secs_f64() * 1000.0);
        let decode_ok = self
            .decode_tokens_per_s
            .is_none_or(|rate| rate >= budget.min_tokens_per_s);
        Some(ttft_ok && decode_ok)
    }

    fn shape(&self) -> Shape {
        Shape {
            prompt_tokens: self.prompt_tokens(),
            // Priced and predicted cold: the cache another backend held
            // would not be there.
            cached_tokens: 0,
            output_tokens: u32::try_from(self.tokens.output).unwrap_or(u32::MAX),
            class: self.class,
        }
    }
}

/// The window's answered calls (not refusals, not cached replays, not a
/// losing hedge leg's), oldest first.
pub fn requests(conn: &rusqlite::Connection, since_ms: i64) -> rusqlite::Result<Vec<Request>> {
    let mut stmt = conn.prepare(
        "SELECT route, backend, tier IN ('small', 'mid'), profile, input_tokens, cached_tokens,
                cache_write_tokens, output_tokens, reasoning_tokens, prompt_class, ttft_ms,
                duration_ms, decode_tokens_per_s, cost_usd
         FROM requests
         WHERE ts_ms >= ?1 AND status = 'ok' AND refusal IS NULL AND NOT cache_hit
         ORDER BY ts_ms",
    )?;
    let count = |n: i64| n.unsigned_abs();
    stmt.query_map(params![since_ms], |r| {
        Ok(Request {
            route: r.get(0)?,
            backend: r.get(1)?,
            local: r.get(2)?,
            profile: r
                .get::<_, Option<String>>(3)?
                .as_deref()
                .and_then(Profile::from_name),
            tokens: TokenCounts {
                input: count(r.get(4)?),
                cached_input: count(r.get(5)?),
                cache_write: count(r.get(6)?),
                output: count(r.get(7)?),
                reasoning: count(r.get(8)?),
            },
            class: if r.get::<_, String>(9)? == "code" {
                PromptClass::Code
            } else {
                PromptClass::Prose
            },
            ttft_ms: r.get(10)?,
            duration_ms: r.get(11)?,
            decode_tokens_per_s: r.get(12)?,
            cost_usd: r.get(13)?,
        })
    })?
    .collect()
}

/// The latency model, taught the window, with the backends' prices.
pub struct Model<'a> {
    router: Router,
    config: &'a Config,
    /// Calls each backend's model learned from.
    calls: BTreeMap<String, u64>,
}

impl<'a> Model<'a> {
    pub fn learn(config: &'a Config, rows: &[Request]) -> Self {
        let router = Router::new(config);
        let mut calls = BTreeMap::new();
        for row in rows {
            let Some(index) = router.backends().iter().position(|b| *b == row.backend) else {
                continue;
            };
            *calls.entry(row.backend.clone()).or_insert(0) += 1;
            let ms = |v: f64| Duration::from_secs_f64(v.max(0.0) / 1000.0);
            router.latency().observe(
                index,
                &Observation {
                    prompt_tokens: row.prompt_tokens(),
                    cached_tokens: u32::try_from(row.tokens.cached_input).unwrap_or(u32::MAX),
                    output_tokens: u32::try_from(row.tokens.output).unwrap_or(u32::MAX),
                    ttft: row.ttft_ms.map(ms),
                    total: ms(row.duration_ms),
                    reported_prefill_tokens_per_s: None,
                    reported_decode_tokens_per_s: row
                        .ttft_ms
                        .is_none()
                        .then_some(row.decode_tokens_per_s)
                        .flatten(),
                    class: row.class,
                    concurrent: 1,
                    predicted_ttft_ms: None,
                    waited: Duration::ZERO,
                    failed: false,
                },
            );
        }
        Model {
            router,
            config,
            calls,
        }
    }

    fn predict(&self, backend: &str, row: &Request) -> Option<Prediction> {
        let index = self.router.backends().iter().position(|b| b == backend)?;
        Some(self.router.latency().predict(index, &row.shape()))
    }

    /// Whether `backend` is predicted to serve `row` within its budget
    /// (at the median), and what it would cost there.
    fn verdict(
        &self,
        backend: &str,
        row: &Request,
        route: Option<LatencyBudget>,
    ) -> Option<(bool, f64)> {
        let prediction = self.predict(backend, row)?;
        let pricing = self.config.backends.get(backend)?.pricing;
        let decode_s =
            row.tokens.output.saturating_sub(1) as f64 / prediction.tokens_per_s.max(1e-9);
        let busy_s = prediction.ttft_p50_ms / 1000.0 + decode_s;
        let cost = pricing.cost(&row.tokens, busy_s, 1);
        let within = row.budget(route).is_none_or(|budget| {
            budget
                .ttft
                .is_none_or(|t| prediction.ttft_p50_ms <= t.as_secs_f64() * 1000.0)
                && prediction.tokens_per_s >= budget.min_tokens_per_s
        });
        Some((within, cost))
    }

    /// `backend` for all of `rows`: the share within budget, and the cost.
    pub fn candidate(
        &self,
        backend: &str,
        rows: &[&Request],
        route: Option<LatencyBudget>,
    ) -> Option<Candidate> {
        let verdicts: Vec<(bool, f64)> = rows
            .iter()
            .map(|row| self.verdict(backend, row, route))
            .collect::<Option<_>>()?;
        Some(Candidate {
            backend: backend.to_owned(),
            within_budget: verdicts.iter().filter(|v| v.0).count() as f64
                / rows.len().max(1) as f64,
            cost_usd: verdicts.iter().map(|v| v.1).sum(),
            measured_calls: self.calls.get(backend).copied().unwrap_or(0),
        })
    }

    /// Each request on its cheapest backend among `backends` that meets its
    /// budget (the cheapest of all when none does).
    pub fn per_request(
        &self,
        backends: &[&str],
        rows: &[&Request],
        route: Option<LatencyBudget>,
    ) -> Option<Split> {
        let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
        let (mut within, mut cost) = (0u64, 0.0);
        for row in rows {
            let options: Vec<(&str, bool, f64)> = backends
                .iter()
                .filter_map(|b| self.verdict(b, row, route).map(|(w, c)| (*b, w, c)))
                .collect();
            let cheapest = |meeting: bool| {
                options
                    .iter()
                    .filter(|o| o.1 || !meeting)
                    .min_by(|a, b| a.2.total_cmp(&b.2))
                    .copied()
            };
            let (backend, ok, c) = cheapest(true).or_else(|| cheapest(false))?;
            *counts.entry(backend).or_default() += 1;
            within += u64::from(ok);
            cost += c;
        }
        let n = rows.len().max(1) as f64;
        Some(Split {
            weights: counts
                .into_iter()
                .map(|(b, k)| (b.to_owned(), (k as f64 / n * 100.0).round() as u32))
                .collect(),
            within_budget: within as f64 / n,
            cost_usd: cost,
        })
    }

    /// Of `rows` (served in the cloud), those `backend` is predicted to
    /// serve within their budgets.
    pub fn could_serve<'r>(
        &self,
        backend: &str,
        rows: &[&'r Request],
        budgets: &BTreeMap<String, LatencyBudget>,
    ) -> Option<Vec<&'r Request>> {
        self.calls.get(backend)?;
        Some(
            rows.iter()
                .filter(|row| {
                    let route = row.route.as_ref().and_then(|r| budgets.get(r)).copied();
                    self.verdict(backend, row, route).is_some_and(|v| v.0)
                })
                .copied()
                .collect(),
        )
    }
}
