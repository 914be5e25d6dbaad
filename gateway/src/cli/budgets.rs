//! `switchyard budgets`: how much of the traffic got the speed its use case
//! needs, from the ledger, as a table, JSON or CSV.

use std::io::Write;

use switchyard_policies::Config;

use crate::admin::api::parse_attainment_dimension;
use crate::cli::report_text::{self, Rows};
use crate::ledger::{AttainmentReport, attainment_report, now_ms, parse_since, route_budgets};

pub fn run(
    config: &Config,
    since: &str,
    by: &str,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let since = parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let by = parse_attainment_dimension(by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
    let since_ms = now_ms() - since;
    let conn = report_text::open_ledger(&config.ledger, since_ms)?;
    let report = attainment_report(&conn, since_ms, by, &route_budgets(config))?;
    report_text::write(out, format, &report, (report.by, &COLUMNS, &rows(&report)))?;
    if format == "table" && report.batches.batch_calls > 0 {
        let b = &report.batches;
        let ms = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0} ms"));
        writeln!(
            out,
            "batches: {} lines, {} output tokens, {:.0} tokens per hour of the {:.0} s they ran; interactive first token p50/p90 {} / {} while they ran ({} requests), {} / {} otherwise ({})",
            b.batch_calls,
            b.batch_output_tokens,
            b.batch_tokens_per_hour.unwrap_or(0.0),
            b.batch_running_s,
            ms(b.interactive_while_batches.p50_ms),
            ms(b.interactive_while_batches.p90_ms),
            b.interactive_while_batches.requests,
            ms(b.interactive_otherwise.p50_ms),
            ms(b.interactive_otherwise.p90_ms),
            b.interactive_otherwise.requests,
        )?;
    }
    if format == "table" {
        for d in report.drift.iter().filter(|d| d.drifted) {
            match d.figure {
                "failed_share" => writeln!(
                    out,
                    "drift: {} failed {:.0}% of its calls over the last hour ({} calls), against {:.0}% of {} before",
                    d.backend,
                    d.recent * 100.0,
                    d.recent_calls,
                    d.baseline * 100.0,
                    d.baseline_calls
                )?,
                figure => writeln!(
                    out,
                    "drift: {} {} {:+.0}% over the last hour (p50 {:.1} tokens/s over {} calls, against {:.1} over {} before)",
                    d.backend,
                    if figure == "decode_tokens_per_s" {
                        "decodes"
                    } else {
                        "prefills"
                    },
                    d.change * 100.0,
                    d.recent,
                    d.recent_calls,
                    d.baseline,
                    d.baseline_calls
                )?,
            }
        }
    }
    Ok(())
}

const COLUMNS: [&str; 9] = [
    "requests",
    "ttft_ok",
    "decode_ok",
    "both_ok",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "decode_p50",
    "over_served",
    "over_served_usd",
];

fn rows(report: &AttainmentReport) -> Rows {
    let share = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{:.1}%", v * 100.0));
    let number = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
    report
        .lines
        .iter()
        .chain(std::iter::once(&report.total))
        .map(|l| {
            let cells = vec![
                l.requests.to_string(),
                share(l.within_ttft_share),
                share(l.within_decode_share),
                share(l.within_both_share),
                number(l.ttft_p50_ms),
                number(l.ttft_p90_ms),
                l.decode_p50_tokens_per_s
                    .map_or("-".to_owned(), |v| format!("{v:.1}")),
                l.over_served.to_string(),
                report_text::usd(l.over_served_usd),
            ];
            (l.group.clone(), cells)
        })
        .collect()
}
