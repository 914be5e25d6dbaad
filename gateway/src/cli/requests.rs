//! `switchyard requests`: the request log from the ledger (the filters of
//! `GET /admin/requests`, as flags), as a table, JSON or CSV; with an id,
//! one request's whole record as JSON.

use std::io::Write;
use std::path::PathBuf;

use crate::admin::requests::parse_filter;
use crate::cli::report_text::{self, Rows};
use crate::ledger::{RequestLine, now_ms, request_log, request_record};

#[derive(Debug, clap::Args)]
pub struct RequestsArgs {
    /// One request's id: its record alone.
    pub id: Option<String>,
    /// From how far back (7d, 24h, 30m) or when (Unix milliseconds).
    #[arg(long, default_value = "7d")]
    pub since: String,
    /// Until how far back or when; now when absent.
    #[arg(long)]
    pub until: Option<String>,
    #[arg(long)]
    pub key: Option<String>,
    #[arg(long)]
    pub team: Option<String>,
    #[arg(long)]
    pub route: Option<String>,
    /// Requests with any call to this backend.
    #[arg(long)]
    pub backend: Option<String>,
    /// ok, error or cancelled.
    #[arg(long)]
    pub status: Option<String>,
    /// The serving call's outcome exactly: ok, upstream_timeout, rate_limited...
    #[arg(long)]
    pub outcome: Option<String>,
    #[arg(long)]
    pub session: Option<String>,
    /// Requests that took at least this many milliseconds.
    #[arg(long)]
    pub min_ms: Option<String>,
    /// Requests a sensitive-data policy acted on: a kind (card, email...)
    /// or any.
    #[arg(long)]
    pub sensitive: Option<String>,
    /// Requests per page (at most 1000).
    #[arg(long, default_value = "50")]
    pub limit: String,
    /// Requests to skip (the page before's `next_offset`).
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// table, json or csv.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// The config whose ledger to read (the embedded default's when absent).
    #[arg(long)]
    pub config: Option<PathBuf>,
}

pub fn run(args: &RequestsArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let config = crate::state::config_file::load(args.config.as_deref())?;
    let flag = |name: &str| -> Option<String> {
        match name {
            "since" => Some(args.since.clone()),
            "until" => args.until.clone(),
            "key" => args.key.clone(),
            "team" => args.team.clone(),
            "route" => args.route.clone(),
            "backend" => args.backend.clone(),
            "status" => args.status.clone(),
            "outcome" => args.outcome.clone(),
            "session" => args.session.clone(),
            "min_ms" => args.min_ms.clone(),
            "sensitive" => args.sensitive.clone(),
            "limit" => Some(args.limit.clone()),
            "offset" => Some(args.offset.clone()),
            _ => None,
        }
    };
    let filter = parse_filter(flag, now_ms()).map_err(|err| anyhow::anyhow!("{err}"))?;
    let conn = report_text::open_ledger(
        &config.ledger,
        filter.since_ms.saturating_sub(crate::ledger::SPAN_MS),
    )?;
    if let Some(id) = &args.id {
        let record = request_record(&conn, id, filter.since_ms)?
            .ok_or_else(|| anyhow::anyhow!("no request `{id}` in the ledger"))?;
        serde_json::to_writer_pretty(&mut *out, &record)?;
        writeln!(out)?;
        return Ok(());
    }
    let log = request_log(&conn, &filter)?;
    let rows: Rows = log
        .requests
        .iter()
        .map(|line| (line.request_id.clone(), cells(line)))
        .collect();
    report_text::write(out, &args.format, &log, ("request_id", &COLUMNS, &rows))?;
    if let (Some(next), "table") = (log.next_offset, args.format.as_str()) {
        writeln!(out, "(more: --offset {next})")?;
    }
    Ok(())
}

const COLUMNS: [&str; 12] = [
    "time",
    "key",
    "route",
    "backend",
    "status",
    "outcome",
    "calls",
    "duration_ms",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "error",
];

fn cells(line: &RequestLine) -> Vec<String> {
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    vec![
        time_of(line.ts_ms),
        dash(&line.key),
        dash(&line.route),
        if line.backend.is_empty() {
            "-".into()
        } else {
            line.backend.clone()
        },
        format!("{:?}", line.status).to_lowercase(),
        line.outcome.clone(),
        line.calls.to_string(),
        format!("{:.0}", line.duration_ms),
        line.input_tokens.to_string(),
        line.output_tokens.to_string(),
        report_text::usd(line.cost_usd),
        line.error
            .clone()
            .or_else(|| line.refusal.clone())
            .unwrap_or_else(|| "-".into()),
    ]
}

/// Unix milliseconds as UTC `YYYY-MM-DD HH:MM:SS`.
fn time_of(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (year, month, day) = switchyard_policies::calendar::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(super::time_of(0), "1970-01-01 00:00:00");
        assert_eq!(super::time_of(1_796_256_000_000), "2026-12-03 00:00:00");
        assert_eq!(
            super::time_of(951_782_400_000 + 3_661_000),
            "2000-02-29 01:01:01"
        );
    }
}
