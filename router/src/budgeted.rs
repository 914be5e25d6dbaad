//! Budget-aware selection: predict each candidate's first-token time, decode
//! speed and total time, and pick the cheapest that meets the budget (or the
//! fastest).

use std::time::Duration;

use switchyard_policies::{LatencyBudget, Pricing, Profile, TokenCounts};

use crate::decision::Reason;
use crate::explain::CandidateTrace;
use crate::latency::Prediction;

/// Output tokens assumed when a request sets no limit.
pub const DEFAULT_EXPECTED_OUTPUT: u32 = 256;

/// The budget a request is held to: the route's own numbers, else its
/// profile's. A RAG prompt's first-token budget grows with its length
/// (prefill dominates): one extra second per 2,000 prompt tokens.
pub fn budget_for(
    route: Option<LatencyBudget>,
    profile: Option<Profile>,
    prompt_tokens: u32,
) -> Option<LatencyBudget> {
    route.or_else(|| {
        let profile = profile?;
        let budget = profile.budget();
        let ttft = budget.ttft.map(|t| match profile {
            Profile::Rag => t + Duration::from_secs_f64(f64::from(prompt_tokens) / 2000.0),
            _ => t,
        });
        Some(LatencyBudget {
            ttft,
            min_tokens_per_s: budget.min_tokens_per_s,
            total: None,
        })
    })
}

/// Whether a prediction (at p90) meets a budget.
pub fn meets(budget: Option<LatencyBudget>, p: &Prediction) -> bool {
    breach(budget, p).is_none()
}

/// The first part of a budget a prediction (at p90) breaks, in words.
pub fn breach(budget: Option<LatencyBudget>, p: &Prediction) -> Option<String> {
    let b = budget?;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    if let Some(t) = b.ttft.filter(|t| p.ttft_p90_ms > ms(*t)) {
        return Some(format!(
            "first token p90 {:.0} ms (of it {:.0} ms waiting) over the budget's {:.0} ms",
            p.ttft_p90_ms,
            p.queue_ms,
            ms(t)
        ));
    }
    if p.tokens_per_s < b.min_tokens_per_s {
        return Some(format!(
            "{:.1} tokens/s under the budget's {:.1}",
            p.tokens_per_s, b.min_tokens_per_s
        ));
    }
    b.total.filter(|t| p.total_p90_ms > ms(*t)).map(|t| {
        format!(
            "total p90 {:.0} ms over the budget's {:.0} ms",
            p.total_p90_ms,
            ms(t)
        )
    })
}

/// Each candidate's figures and verdict, in the order `ranked` tries
/// them (backend numbers; names are the caller's to fill in).
pub(crate) fn candidate_traces(
    candidates: &[Candidate],
    ranked: &[usize],
    budget: Option<LatencyBudget>,
    cheapest: bool,
) -> Vec<(usize, CandidateTrace)> {
    let first = ranked.first().copied();
    ranked
        .iter()
        .filter_map(|b| candidates.iter().find(|c| c.backend == *b))
        .map(|c| {
            let p = &c.prediction;
            let breached = breach(budget, p);
            let verdict = match (Some(c.backend) == first, &breached, cheapest) {
                (true, _, false) => "picked: the fastest".to_owned(),
                (true, None, true) => "picked: the cheapest within budget".to_owned(),
                (true, Some(why), true) => {
                    format!("picked: none meets the budget, the fastest ({why})")
                }
                (false, None, true) => "within budget, dearer".to_owned(),
                (false, Some(why), true) => format!("passed over: {why}"),
                (false, _, false) => "slower".to_owned(),
            };
            let verdict = match p.learned_concurrency {
                Some(n) => format!("{verdict} (learned concurrency {n})"),
                None => verdict,
            };
            let trace = CandidateTrace {
                backend: String::new(),
                ttft_p50_ms: p.ttft_p50_ms,
                ttft_p90_ms: p.ttft_p90_ms,
                queue_ms: p.queue_ms,
                tokens_per_s: p.tokens_per_s,
                total_p90_ms: p.total_p90_ms,
                learned_concurrency: p.learned_concurrency,
                cost_usd: c.cost_usd,
                within_budget: breached.is_none(),
                verdict,
            };
            (c.backend, trace)
        })
        .collect()
}

/// A candidate with its prediction and expected cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub backend: usize,
    pub prediction: Prediction,
    pub cost_usd: f64,
}

/// The expected cost of a request on a backend.
pub fn expected_cost(
    pricing: &Pricing,
    (prompt_tokens, cached_tokens): (u32, u32),
    output_tokens: u32,
    p: &Prediction,
) -> f64 {
    // Prompt tokens a provider's prompt cache is expected to hold are
    // priced at its cached-input rate.
    let cached = cached_tokens.min(prompt_tokens);
    let tokens = TokenCounts {
        input: u64::from(prompt_tokens - cached),
        cached_input: u64::from(cached),
        output: u64::from(output_tokens),
        ..TokenCounts::default()
    };
    // Hardware is paid for while it serves the request, not while the
    // request waits for it.
    pricing.cost(&tokens, (p.total_p90_ms - p.queue_ms).max(0.0) / 1000.0, 1)
}

/// Ranks candidates: the cheapest that meet the budget (ties to the
/// faster), then the rest fastest first. Fastest mode ranks by total time.
pub fn rank(
    mut candidates: Vec<Candidate>,
    budget: Option<LatencyBudget>,
    cheapest: bool,
) -> (Vec<usize>, Reason) {
    let by_speed = |a: &Candidate, b: &Candidate| {
        a.prediction
            .total_p90_ms
            .total_cmp(&b.prediction.total_p90_ms)
    };
    if !cheapest {
        candidates.sort_by(by_speed);
        return (
            candidates.iter().map(|c| c.backend).collect(),
            Reason::Fastest,
        );
    }
    let (mut within, mut over): (Vec<Candidate>, Vec<Candidate>) = candidates
        .into_iter()
        .partition(|c| meets(budget, &c.prediction));
    within.sort_by(|a, b| {
        a.cost_usd
            .total_cmp(&b.cost_usd)
            .then_with(|| by_speed(a, b))
    });
    over.sort_by(by_speed);
    let reason = if within.is_empty() {
        Reason::BudgetUnmeetable
    } else {
        Reason::WithinBudget
    };
    (
        within.iter().chain(&over).map(|c| c.backend).collect(),
        reason,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(backend: usize, ttft_ms: f64, tps: f64, cost: f64) -> Candidate {
        let prediction = Prediction {
            queue_ms: 0.0,
            ttft_p50_ms: ttft_ms,
            ttft_p90_ms: ttft_ms,
            tokens_per_s: tps,
            total_p90_ms: ttft_ms + 256.0 / tps * 1000.0,
            error_rate: 0.0,
            learned_concurrency: None,
        };
        Candidate {
            backend,
            prediction,
            cost_usd: cost,
        }
    }

    #[test]
    fn cheapest_that_meets_the_budget_wins() {
        let chat = budget_for(None, Some(Profile::Chat), 100);
        let local_slow = candidate(0, 300.0, 12.0, 0.0001); // too slow to read along
        let local_ok = candidate(1, 400.0, 35.0, 0.0002);
        let cloud = candidate(2, 600.0, 80.0, 0.01);
        let (order, reason) = rank(vec![cloud, local_slow, local_ok], chat, true);
        assert_eq!(reason, Reason::WithinBudget);
        assert_eq!(order, [1, 2, 0]);
    }

    #[test]
    fn none_meeting_means_the_fastest() {
        let agentic = budget_for(None, Some(Profile::Agentic), 100);
        let (order, reason) = rank(
            vec![
                candidate(0, 3000.0, 20.0, 0.0),
                candidate(1, 2500.0, 40.0, 0.01),
            ],
            agentic,
            true,
        );
        assert_eq!(reason, Reason::BudgetUnmeetable);
        assert_eq!(order[0], 1);
    }

    #[test]
    fn rag_budgets_grow_with_the_prompt() {
        let short = budget_for(None, Some(Profile::Rag), 0)
            .unwrap()
            .ttft
            .unwrap();
        let long = budget_for(None, Some(Profile::Rag), 20_000)
            .unwrap()
            .ttft
            .unwrap();
        assert_eq!(long - short, Duration::from_secs(10));
        assert!(
            budget_for(None, Some(Profile::Batch), 10)
                .unwrap()
                .ttft
                .is_none()
        );
        assert!(budget_for(None, None, 10).is_none());
    }
}
