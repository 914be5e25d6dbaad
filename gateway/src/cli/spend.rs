//! `switchyard spend`: the ledger's spend report as a table, JSON or CSV.

use std::io::Write;

use crate::admin::api::parse_dimension;
use crate::cli::report_text::{self, Rows};
use crate::ledger::{
    Postgres, SpendLine, SpendReport, now_ms, parse_since, postgres_spend_report, spend_report,
};

pub fn run(
    config: &switchyard_policies::Config,
    since: &str,
    by: &str,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let since = parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let by = parse_dimension(by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
    let since_ms = now_ms() - since;
    let ledger = &config.ledger;
    let report = match &ledger.postgres {
        // Summed in PostgreSQL, over every replica's rows.
        Some(postgres) => {
            postgres_spend_report(&*Postgres::connect_reader(postgres)?, since_ms, by)?
        }
        None => spend_report(&report_text::open_ledger(ledger, since_ms)?, since_ms, by)?,
    }
    .priced_on(config.reference.as_ref());
    report_text::write(out, format, &report, (report.by, &COLUMNS, &rows(&report)))?;
    // Tables say what the counterfactual is; JSON carries it, CSV stays columns.
    if let ("table", Some(basis)) = (format, &report.counterfactual) {
        let seller = basis
            .provider
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        writeln!(
            out,
            "counterfactual_usd: the same tokens priced on {}{seller}",
            basis.model
        )?;
    }
    Ok(())
}

const COLUMNS: [&str; 11] = [
    "requests",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "cost_usd",
    "cloud_usd",
    "local_usd",
    "counterfactual_usd",
    "savings_usd",
    "estimated",
    "refused",
];

fn cells(line: &SpendLine) -> [String; 11] {
    let usd = report_text::usd;
    [
        line.requests.to_string(),
        line.input_tokens.to_string(),
        line.cached_tokens.to_string(),
        line.output_tokens.to_string(),
        usd(line.cost_usd),
        usd(line.cloud_usd),
        usd(line.local_usd),
        usd(line.counterfactual_usd),
        usd(line.savings_usd),
        line.estimated.to_string(),
        line.refused.to_string(),
    ]
}

fn rows(report: &SpendReport) -> Rows {
    report
        .lines
        .iter()
        .chain(std::iter::once(&report.total))
        .map(|l| (l.group.clone(), cells(l).to_vec()))
        .collect()
}
