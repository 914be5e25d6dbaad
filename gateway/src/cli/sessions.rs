//! `switchyard sessions`: agent task time per session, from the ledger, as
//! a table, JSON or CSV.

use std::io::Write;

use crate::cli::report_text::{self, Rows};
use crate::ledger::{SessionLine, now_ms, parse_since, sessions_report};

pub fn run(
    ledger: &switchyard_policies::LedgerSettings,
    since: &str,
    route: Option<&str>,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let since = parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let since_ms = now_ms() - since;
    let conn = report_text::open_ledger(ledger, since_ms)?;
    let report = sessions_report(&conn, since_ms, route)?;
    let rows: Rows = report
        .sessions
        .iter()
        .chain(&report.routes)
        .chain(&report.profiles)
        .chain(std::iter::once(&report.total))
        .map(|line| (line.session.clone(), cells(line)))
        .collect();
    report_text::write(out, format, &report, ("session", &COLUMNS, &rows))
}

const COLUMNS: [&str; 16] = [
    "key",
    "route",
    "profile",
    "calls",
    "tool_results",
    "wall_s",
    "model_s",
    "tool_calls",
    "tool_s",
    "back_to_back",
    "gap_s",
    "waiting",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "tiers",
];

fn cells(line: &SessionLine) -> Vec<String> {
    let seconds = |ms: f64| format!("{:.3}", ms / 1000.0);
    vec![
        line.key.clone(),
        line.route.clone(),
        line.profile.clone(),
        line.calls.to_string(),
        line.tool_result_calls.to_string(),
        seconds(line.wall_ms),
        seconds(line.model_ms),
        line.tool_calls.to_string(),
        seconds(line.tool_ms),
        line.back_to_back_tool_calls.to_string(),
        seconds(line.gap_ms),
        line.waiting_on_models_share
            .map_or("-".to_owned(), |s| format!("{:.0}%", s * 100.0)),
        line.input_tokens.to_string(),
        line.output_tokens.to_string(),
        report_text::usd(line.cost_usd),
        line.tiers.join("+"),
    ]
}
