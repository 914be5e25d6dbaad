//! What each backend would have done with a request: the router's latency
//! model, taught the window's calls, at the request's own lengths.

use std::collections::BTreeMap;
use std::time::Duration;

use rusqlite::params;
use switchyard_policies::{Config, LatencyBudget, Pricing, Profile, PromptClass, TokenCounts};
use switchyard_router::Router;
use switchyard_router::budget_for;
use switchyard_router::latency::{LatencyStore, Observation, Prediction, Shape};

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
    pub ts_ms: i64,
    /// Of `ttft_ms` and `duration_ms`, the wait for a slot of the
    /// backend's in the gateway.
    pub queued_ms: f64,
    /// Other requests of its route in flight when it arrived: the
    /// concurrency it came with, which a split shares among backends.
    pub others_in_flight: u32,
    /// Other routes' requests in flight on each backend when it arrived:
    /// load a split of this route does not move.
    pub elsewhere: BTreeMap<String, u32>,
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

    /// Served in the cloud far faster than its budget needs (as the budgets
    /// report counts it): first token within a quarter of the budget and
    /// decoding at four times its rate, or held to no first-token budget.
    pub fn over_served(&self, route: Option<LatencyBudget>) -> bool {
        let Some(budget) = self.budget(route).filter(|_| !self.local) else {
            return false;
        };
        match (budget.ttft, self.ttft_ms, self.decode_tokens_per_s) {
            (None, _, _) => true,
            (Some(limit), Some(ttft), Some(rate)) => {
                ttft * 4.0 <= limit.as_secs_f64() * 1000.0 && rate >= budget.min_tokens_per_s * 4.0
            }
            _ => false,
        }
    }

    fn shape(&self) -> Shape {
        Shape {
            prompt_tokens: self.prompt_tokens(),
            // Predicted cold: the prefix another backend held cached would
            // not be there (it is priced on its tokens as they were billed).
            cached_tokens: 0,
            output_tokens: u32::try_from(self.tokens.output).unwrap_or(u32::MAX),
            class: self.class,
        }
    }
}

/// The window's answered calls (not refusals, not cached replays, not a
/// losing hedge leg's), oldest first.
pub fn requests(conn: &rusqlite::Connection, since_ms: i64) -> rusqlite::Result<Vec<Request>> {
    // A ledger last written by an older version has no `queued_ms`.
    let queued: bool = conn.query_row(
        "SELECT COUNT(*) FROM pragma_table_info('requests') WHERE name = 'queued_ms'",
        [],
        |r| r.get(0),
    )?;
    let queued = if queued {
        "COALESCE(queued_ms, 0)"
    } else {
        "0.0"
    };
    let mut stmt = conn.prepare(&format!(
        "SELECT route, backend, tier IN ('small', 'mid'), profile, input_tokens, cached_tokens,
                cache_write_tokens, output_tokens, reasoning_tokens,
                COALESCE(prompt_class, 'prose'), ttft_ms, duration_ms, decode_tokens_per_s,
                cost_usd, ts_ms, {queued}
         FROM requests
         WHERE ts_ms >= ?1 AND status = 'ok' AND refusal IS NULL AND NOT cache_hit
               AND reason != 'shadow'
         ORDER BY ts_ms"
    ))?;
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
            ts_ms: r.get(14)?,
            queued_ms: r.get(15)?,
            others_in_flight: 0,
            elsewhere: BTreeMap::new(),
        })
    })?
    .collect::<rusqlite::Result<Vec<Request>>>()
    .map(count_in_flight)
}

/// Sets each request's `others_in_flight` (its route's requests that had
/// started and not ended when it arrived) and `elsewhere` (other routes'
/// requests then running on each backend). Rows come oldest first.
fn count_in_flight(mut rows: Vec<Request>) -> Vec<Request> {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};
    let mut by_route: HashMap<Option<String>, BinaryHeap<Reverse<i64>>> = HashMap::new();
    // Per backend: the end and route of each call running there.
    let mut by_backend: HashMap<String, Vec<(i64, Option<String>)>> = HashMap::new();
    for row in &mut rows {
        let end = row.ts_ms + row.duration_ms.max(0.0) as i64;
        let running = by_route.entry(row.route.clone()).or_default();
        while running.peek().is_some_and(|Reverse(end)| *end <= row.ts_ms) {
            running.pop();
        }
        row.others_in_flight = u32::try_from(running.len()).unwrap_or(u32::MAX);
        running.push(Reverse(end));
        for (backend, calls) in &mut by_backend {
            calls.retain(|(end, _)| *end > row.ts_ms);
            let other = calls
                .iter()
                .filter(|(_, route)| *route != row.route)
                .count();
            if other > 0 {
                row.elsewhere
                    .insert(backend.clone(), u32::try_from(other).unwrap_or(u32::MAX));
            }
        }
        by_backend
            .entry(row.backend.clone())
            .or_default()
            .push((end, row.route.clone()));
    }
    rows
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
            // The backend's own times: the wait for its slot is the
            // queue's, which `Profiled::at` adds back for the load a split
            // brings.
            let ms = |v: f64| Duration::from_secs_f64((v - row.queued_ms).max(0.0) / 1000.0);
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
                    work: None,
                    ran_beside: 0,
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

    /// How `backend` would serve each of `rows` alone (no queue of the
    /// route's own), held to the route's budget or each request's.
    pub fn profile(
        &self,
        backend: &str,
        rows: &[&Request],
        route: Option<LatencyBudget>,
    ) -> Option<Profiled> {
        let settings = self.config.backends.get(backend)?;
        let alone = rows
            .iter()
            .map(|row| {
                let prediction = self.predict(backend, row)?;
                let decode_s =
                    row.tokens.output.saturating_sub(1) as f64 / prediction.tokens_per_s.max(1e-9);
                let service_ms = prediction.ttft_p50_ms + decode_s * 1000.0;
                let budget = row.budget(route);
                Some(Alone {
                    ttft_ms: prediction.ttft_p50_ms,
                    service_ms,
                    tokens: row.tokens,
                    ttft_budget_ms: budget
                        .and_then(|b| b.ttft)
                        .map(|t| t.as_secs_f64() * 1000.0),
                    decode_ok: budget.is_none_or(|b| prediction.tokens_per_s >= b.min_tokens_per_s),
                    others: row.others_in_flight,
                    elsewhere: row.elsewhere.get(backend).copied().unwrap_or(0),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Profiled {
            backend: backend.to_owned(),
            pricing: settings.pricing,
            slots: settings
                .max_concurrency
                .map(|c| u32::try_from(c).unwrap_or(u32::MAX).max(1)),
            measured_calls: self.calls.get(backend).copied().unwrap_or(0),
            alone,
        })
    }
}

impl Model<'_> {
    /// Calls of `backend`'s the model learned from.
    pub fn calls(&self, backend: &str) -> u64 {
        self.calls.get(backend).copied().unwrap_or(0)
    }

    /// Of `rows` (served in the cloud), those `backend` is predicted to
    /// serve within their budgets were all of them sent to it, route by
    /// route (each at the concurrency it came with).
    pub fn could_serve<'r>(
        &self,
        backend: &str,
        rows: &[&'r Request],
        budgets: &BTreeMap<String, LatencyBudget>,
    ) -> Vec<&'r Request> {
        let mut routes: Vec<Option<&str>> = rows.iter().map(|r| r.route.as_deref()).collect();
        routes.sort_unstable();
        routes.dedup();
        let mut served = Vec::new();
        for route in routes {
            let mine: Vec<&Request> = rows
                .iter()
                .filter(|r| r.route.as_deref() == route)
                .copied()
                .collect();
            let budget = route.and_then(|r| budgets.get(r)).copied();
            if let Some(profile) = self.profile(backend, &mine, budget) {
                let within = profile.within(1.0);
                served.extend(
                    mine.iter()
                        .zip(within)
                        .filter(|(_, ok)| *ok)
                        .map(|(r, _)| *r),
                );
            }
        }
        served
    }
}

/// One request as a backend would serve it with nothing else queued.
struct Alone {
    ttft_ms: f64,
    /// First token and decoding: how long it holds a slot.
    service_ms: f64,
    tokens: TokenCounts,
    ttft_budget_ms: Option<f64>,
    decode_ok: bool,
    /// The route's requests in flight when it arrived.
    others: u32,
    /// Other routes' requests running on this backend when it arrived.
    elsewhere: u32,
}

/// A backend's predictions for a route's requests.
pub struct Profiled {
    pub backend: String,
    pricing: Pricing,
    /// Its concurrency limit: past it, requests wait their turn.
    slots: Option<u32>,
    pub measured_calls: u64,
    alone: Vec<Alone>,
}

impl Profiled {
    /// The share of the route's requests within budget and their cost
    /// when `weight` of the traffic comes here: a request then finds that
    /// share of the requests it arrived with here too, and beyond the
    /// backend's slots each waits a service time per slot's worth ahead.
    pub fn at(&self, weight: f64) -> (f64, f64) {
        let within = self.within(weight).into_iter().filter(|ok| *ok).count();
        let n = self.alone.len().max(1) as f64;
        let cost = self.alone.iter().map(|row| self.cost(row, weight)).sum();
        (within as f64 / n, cost)
    }

    /// A request's cost here at `weight`: by the hour, it shares the hour
    /// with the requests it finds running (its share of those it came
    /// with), as the ledger prices it.
    fn cost(&self, row: &Alone, weight: f64) -> f64 {
        let sharing = 1 + (weight * f64::from(row.others)).round() as u32 + row.elsewhere;
        self.pricing
            .cost(&row.tokens, row.service_ms / 1000.0, sharing)
    }

    /// Request `i` served here with nothing queued: whether within its
    /// budget, and its cost.
    pub fn alone(&self, i: usize) -> Option<(bool, f64)> {
        let row = self.alone.get(i)?;
        let ttft_ok = row
            .ttft_budget_ms
            .is_none_or(|budget| row.ttft_ms <= budget);
        Some((ttft_ok && row.decode_ok, self.cost(row, 0.0)))
    }

    /// Whether each request is within budget at `weight`.
    fn within(&self, weight: f64) -> Vec<bool> {
        self.alone
            .iter()
            .map(|row| {
                let wait_ms = match self.slots {
                    None => 0.0,
                    Some(slots) => {
                        let ahead = weight * f64::from(row.others) + f64::from(row.elsewhere)
                            - f64::from(slots - 1);
                        ahead.max(0.0) * row.service_ms / f64::from(slots)
                    }
                };
                let ttft_ok = row
                    .ttft_budget_ms
                    .is_none_or(|budget| row.ttft_ms + wait_ms <= budget);
                ttft_ok && row.decode_ok
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(slots: Option<u32>, others: u32) -> Profiled {
        let row = Alone {
            ttft_ms: 50.0,
            service_ms: 100.0,
            tokens: TokenCounts::default(),
            ttft_budget_ms: Some(200.0),
            decode_ok: true,
            others,
            elsewhere: 0,
        };
        Profiled {
            backend: "b".into(),
            pricing: Pricing::Free,
            slots,
            measured_calls: 1,
            alone: vec![row],
        }
    }

    #[test]
    fn a_share_of_the_concurrent_traffic_queues_behind_the_slots() {
        // Two requests arrived with this one: all here, two wait ahead of
        // it on one slot (50 + 200 ms); half here, one (50 + 100 ms).
        let one_slot = backend(Some(1), 2);
        assert_eq!(one_slot.at(1.0).0, 0.0);
        assert_eq!(one_slot.at(0.5).0, 1.0);
        // Three slots hold them all; no limit never queues.
        assert_eq!(backend(Some(3), 2).at(1.0).0, 1.0);
        assert_eq!(backend(None, 50).at(1.0).0, 1.0);
        // Sequential traffic never waits.
        assert_eq!(backend(Some(1), 0).at(1.0).0, 1.0);
        // Other routes' calls running there wait ahead whatever the split.
        let mut shared = backend(Some(1), 0);
        shared.alone[0].elsewhere = 2;
        assert_eq!(shared.at(0.1).0, 0.0);
    }

    fn row(route: &str, backend: &str, ts_ms: i64, duration_ms: f64) -> Request {
        Request {
            route: Some(route.into()),
            backend: backend.into(),
            local: true,
            profile: None,
            tokens: TokenCounts::default(),
            class: PromptClass::Prose,
            ttft_ms: None,
            duration_ms,
            decode_tokens_per_s: None,
            cost_usd: 0.0,
            ts_ms,
            queued_ms: 0.0,
            others_in_flight: 0,
            elsewhere: BTreeMap::new(),
        }
    }

    #[test]
    fn in_flight_counts_the_route_and_other_routes_apart() {
        let rows = count_in_flight(vec![
            row("a", "local", 0, 100.0),
            row("b", "local", 10, 100.0),
            row("a", "cloud", 20, 100.0),
            row("a", "local", 200, 10.0),
        ]);
        assert_eq!(rows[1].others_in_flight, 0, "route b's first");
        assert_eq!(
            rows[1].elsewhere.get("local"),
            Some(&1),
            "route a's call on local"
        );
        assert_eq!(
            rows[2].others_in_flight, 1,
            "route a's first call still runs"
        );
        assert_eq!(
            rows[2].elsewhere.get("local"),
            Some(&1),
            "route b's call on local"
        );
        assert!(
            rows[3].elsewhere.is_empty() && rows[3].others_in_flight == 0,
            "all ended"
        );
    }
}
