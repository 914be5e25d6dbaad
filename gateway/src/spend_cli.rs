//! `switchyard spend`: the ledger's spend report as a table, JSON or CSV.

use std::io::Write;

use crate::handlers::{parse_dimension, parse_since};
use crate::ledger::{SpendLine, SpendReport, now_ms, spend_report};

pub fn run(
    ledger_path: &str,
    since: &str,
    by: &str,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let since = parse_since(since).map_err(|e| anyhow::anyhow!("--since: {e}"))?;
    let by = parse_dimension(by).map_err(|e| anyhow::anyhow!("--by: {e}"))?;
    if !std::path::Path::new(ledger_path).exists() {
        anyhow::bail!("no ledger at {ledger_path}: nothing has been served with this config yet");
    }
    let conn = rusqlite::Connection::open(ledger_path)?;
    let report = spend_report(&conn, now_ms() - since, by)?;
    match format {
        "json" => {
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        "csv" => csv(&report, out)?,
        "table" => table(&report, out)?,
        other => anyhow::bail!("--format: `{other}` is not one of table, json, csv"),
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
    let usd = |v: f64| format!("{v:.6}");
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

fn csv(report: &SpendReport, out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{},{}", report.by, COLUMNS.join(","))?;
    for line in report.lines.iter().chain(std::iter::once(&report.total)) {
        // Group names come from config (a safe alphabet) or dates.
        writeln!(out, "{},{}", line.group, cells(line).join(","))?;
    }
    Ok(())
}

fn table(report: &SpendReport, out: &mut impl Write) -> std::io::Result<()> {
    let rows: Vec<(String, [String; 11])> = report
        .lines
        .iter()
        .chain(std::iter::once(&report.total))
        .map(|l| (l.group.clone(), cells(l)))
        .collect();
    let first = rows
        .iter()
        .map(|(g, _)| g.len())
        .chain([report.by.len()])
        .max()
        .unwrap_or(5);
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|i| {
            rows.iter()
                .map(|(_, c)| c[i].len())
                .chain([COLUMNS[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    write!(out, "{:<first$}", report.by)?;
    for (name, width) in COLUMNS.iter().zip(&widths) {
        write!(out, "  {name:>width$}")?;
    }
    writeln!(out)?;
    for (group, cells) in &rows {
        write!(out, "{group:<first$}")?;
        for (cell, width) in cells.iter().zip(&widths) {
            write!(out, "  {cell:>width$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}
