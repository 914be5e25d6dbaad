//! `switchyard compare`: each route's shadow candidate beside what served
//! the same requests, from the ledger, as a table (two lines per candidate:
//! the candidate's figures, then the served side's), JSON or CSV.

use std::io::Write;

use crate::cli::report_text::{self, Rows};
use crate::ledger::{CompareLine, SideFigures, compare_report, now_ms, parse_since, route_budgets};

pub fn run(
    config: &switchyard_policies::Config,
    since: &str,
    route: Option<&str>,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let since = parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let now = now_ms();
    let conn = report_text::open_ledger(&config.ledger, now - since)?;
    let report = compare_report(&conn, (now - since, now), route, &route_budgets(config))?;
    let rows: Rows = report.lines.iter().flat_map(lines).collect();
    report_text::write(out, format, &report, ("route", &COLUMNS, &rows))
}

const COLUMNS: [&str; 12] = [
    "side",
    "backend",
    "requests",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "decode_tok_s",
    "within_budget",
    "usd_per_request",
    "usd_per_day",
    "agreement",
    "exact",
    "checked",
];

/// The candidate's line and the served side's.
fn lines(line: &CompareLine) -> [(String, Vec<String>); 2] {
    let percent = |v: Option<f64>| v.map_or("-".to_owned(), |s| format!("{:.0}%", s * 100.0));
    let requests = if line.candidate_failed > 0 {
        format!("{} ({} failed)", line.requests, line.candidate_failed)
    } else {
        line.requests.to_string()
    };
    let checked = match line.agreement_checked {
        Some(share) => format!("{} of {}", percent(Some(share)), line.checked_requests),
        None => "-".to_owned(),
    };
    let mut candidate_cells = side(
        "candidate",
        &line.candidate,
        requests,
        &line.candidate_figures,
    );
    candidate_cells.extend([
        percent(line.agreement),
        percent(line.agreement_exact),
        checked,
    ]);
    let mut served_cells = side(
        "served",
        &line.served_by,
        line.requests.to_string(),
        &line.served,
    );
    served_cells.extend(["-".to_owned(), "-".to_owned(), "-".to_owned()]);
    [
        (line.route.clone(), candidate_cells),
        (line.route.clone(), served_cells),
    ]
}

fn side(name: &str, backend: &str, requests: String, figures: &SideFigures) -> Vec<String> {
    let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
    vec![
        name.to_owned(),
        backend.to_owned(),
        requests,
        ms(figures.ttft_p50_ms),
        ms(figures.ttft_p90_ms),
        figures
            .decode_tokens_per_s
            .map_or("-".to_owned(), |v| format!("{v:.1}")),
        figures
            .within_budget
            .map_or("-".to_owned(), |s| format!("{:.0}%", s * 100.0)),
        report_text::usd(figures.cost_per_request_usd),
        report_text::usd(figures.cost_per_day_usd),
    ]
}
