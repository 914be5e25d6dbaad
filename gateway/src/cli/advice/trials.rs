//! What advise makes of the shadow comparison: for each route's candidate,
//! whether to replace what served with it, from the same requests served
//! both ways (`switchyard compare`), not from predictions.

use serde::Serialize;

use crate::ledger::CompareLine;

/// A candidate tried on a route's real traffic, and the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Trial {
    pub route: String,
    pub candidate: String,
    pub served_by: String,
    /// Requests served both ways.
    pub requests: u64,
    /// The share within budget on each side (of those held to one).
    pub within_budget: Option<f64>,
    pub served_within_budget: Option<f64>,
    /// The candidate's cost per request over the served side's (`None`
    /// when the served side cost nothing).
    pub cost_ratio: Option<f64>,
    pub agreement: Option<f64>,
    pub agreement_checked: Option<f64>,
    /// Replace what served with the candidate: it met the target (or did
    /// as well as what served), cost no more, and failed no more often.
    pub replace: bool,
    /// The verdict as a sentence.
    pub verdict: String,
}

/// The trials of `lines` against `target` (the share within budget the
/// advice holds routes to).
pub fn trials(lines: &[CompareLine], target: f64) -> Vec<Trial> {
    lines.iter().map(|line| trial(line, target)).collect()
}

fn trial(line: &CompareLine, target: f64) -> Trial {
    let cost_ratio = (line.served.cost_per_request_usd > 0.0)
        .then(|| line.candidate_figures.cost_per_request_usd / line.served.cost_per_request_usd);
    let fast_enough = match (
        line.candidate_figures.within_budget,
        line.served.within_budget,
    ) {
        (Some(within), served) => within + 1e-9 >= target || served.is_some_and(|s| within >= s),
        // Held to no budget (or none measured) on either side: speed is
        // not what decides.
        (None, None) => true,
        (None, Some(_)) => false,
    };
    let cheaper = line.candidate_figures.cost_per_request_usd <= line.served.cost_per_request_usd;
    let reliable = line.candidate_failed == 0;
    let replace = line.requests > 0 && fast_enough && cheaper && reliable;
    let percent = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.0}%", v * 100.0));
    let cost = match cost_ratio {
        Some(r) => format!("{:.0}% of the cost", r * 100.0),
        None => format!(
            "{} a request against nothing",
            crate::cli::report_text::dollars(line.candidate_figures.cost_per_request_usd)
        ),
    };
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0} ms"));
    let figures = format!(
        "{} within budget (against {}), first token p90 {} (against {}), at {cost}, agreeing on {} (exact {}{}), over {} requests",
        percent(line.candidate_figures.within_budget),
        percent(line.served.within_budget),
        ms(line.candidate_figures.ttft_p90_ms),
        ms(line.served.ttft_p90_ms),
        percent(line.agreement),
        percent(line.agreement_exact),
        match line.agreement_checked {
            Some(share) => format!(
                ", checked {} of {}",
                percent(Some(share)),
                line.checked_requests
            ),
            None => String::new(),
        },
        line.requests,
    );
    let verdict = if replace {
        format!(
            "replace {} with {}: {figures}",
            line.served_by, line.candidate
        )
    } else {
        let why = match (fast_enough, cheaper, reliable) {
            (_, _, false) => format!("it failed {} of the copies", line.candidate_failed),
            (false, _, _) => "it is slower than the budgets need".to_owned(),
            _ => "it costs more".to_owned(),
        };
        format!(
            "keep {} over {} ({why}): {figures}",
            line.served_by, line.candidate
        )
    };
    Trial {
        route: line.route.clone(),
        candidate: line.candidate.clone(),
        served_by: line.served_by.clone(),
        requests: line.requests,
        within_budget: line.candidate_figures.within_budget,
        served_within_budget: line.served.within_budget,
        cost_ratio,
        agreement: line.agreement,
        agreement_checked: line.agreement_checked,
        replace,
        verdict,
    }
}
