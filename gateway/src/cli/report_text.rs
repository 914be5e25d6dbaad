//! The CLI's ledger reports: the ledger opened to read one, and the report
//! written as JSON, CSV or an aligned table. Rows are a group name and one
//! cell per column.

use std::io::Write;

pub type Rows = Vec<(String, Vec<String>)>;

/// The ledger `settings` name, to read a report of the rows since
/// `since_ms` from: the SQLite file, or a copy of the rows every replica
/// wrote to PostgreSQL.
pub fn open_ledger(
    settings: &switchyard_policies::LedgerSettings,
    since_ms: i64,
) -> anyhow::Result<rusqlite::Connection> {
    if let Some(postgres) = &settings.postgres {
        let postgres = crate::ledger::Postgres::connect_reader(postgres)?;
        return crate::ledger::snapshot(&postgres, since_ms);
    }
    let path = &settings.path;
    if !std::path::Path::new(path).exists() {
        anyhow::bail!("no ledger at {path}: nothing has been served with this config yet");
    }
    Ok(rusqlite::Connection::open(path)?)
}

/// Dollars as every report prints them: six decimals, and never `-0.000000`
/// (a refund rounding to nothing is nothing).
pub fn usd(value: f64) -> String {
    let text = format!("{value:.6}");
    match text.strip_prefix('-') {
        Some(rest) if rest.bytes().all(|b| b == b'0' || b == b'.') => rest.to_owned(),
        _ => text,
    }
}

/// Dollars in a sentence: `$0`, `$12.50`, `$0.004210` (four significant
/// digits below a dollar, where local costs live), never `-$0.00`.
pub fn dollars(value: f64) -> String {
    let size = value.abs();
    let text = if size >= 1.0 {
        format!("{size:.2}")
    } else if size >= 1e-9 {
        // Four significant digits: as many decimals as a number this small needs.
        let decimals = (3 - size.log10().floor() as i32).max(0) as usize;
        format!("{size:.decimals$}")
    } else {
        return "$0".to_owned();
    };
    let sign = if value < 0.0 { "-" } else { "" };
    format!("{sign}${text}")
}

/// `value`'s leaves as rows of one cell, each named by its dotted path
/// under `prefix` (`decision.targets.0`), for a table or CSV of a JSON
/// answer that has no columns of its own.
pub fn flatten(prefix: &str, value: &serde_json::Value, rows: &mut Rows) {
    use serde_json::Value;
    let path = |key: &str| {
        if prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{prefix}.{key}")
        }
    };
    match value {
        Value::Object(map) => map.iter().for_each(|(k, v)| flatten(&path(k), v, rows)),
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .for_each(|(i, v)| flatten(&path(&i.to_string()), v, rows)),
        Value::String(text) => rows.push((prefix.to_owned(), vec![text.clone()])),
        other => rows.push((prefix.to_owned(), vec![other.to_string()])),
    }
}

/// `report` as pretty JSON, or its `rows` (under `columns`, grouped `by`)
/// as CSV or a table, as `format` says.
pub fn write(
    out: &mut impl Write,
    format: &str,
    report: &impl serde::Serialize,
    (by, columns, rows): (&str, &[&str], &Rows),
) -> anyhow::Result<()> {
    match format {
        "json" => {
            serde_json::to_writer_pretty(&mut *out, report)?;
            writeln!(out)?;
        }
        "csv" => csv(out, by, columns, rows)?,
        "table" => table(out, by, columns, rows)?,
        other => anyhow::bail!("--format: `{other}` is not one of table, json, csv"),
    }
    Ok(())
}

fn csv(out: &mut impl Write, by: &str, columns: &[&str], rows: &Rows) -> std::io::Result<()> {
    writeln!(out, "{by},{}", columns.join(","))?;
    for (group, cells) in rows {
        // Groups and cells can be callers' own text (a session id).
        let cells: Vec<String> = cells.iter().map(|c| csv_field(c)).collect();
        writeln!(out, "{},{}", csv_field(group), cells.join(","))?;
    }
    Ok(())
}

/// A CSV field, quoted (RFC 4180) when it holds a comma, quote or line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

fn table(out: &mut impl Write, by: &str, columns: &[&str], rows: &Rows) -> std::io::Result<()> {
    // Widths in characters, as the padding counts them.
    let width = |text: &str| text.chars().count();
    let first = rows
        .iter()
        .map(|(g, _)| width(g))
        .chain([width(by)])
        .max()
        .unwrap_or(5);
    let widths: Vec<usize> = (0..columns.len())
        .map(|i| {
            rows.iter()
                .filter_map(|(_, c)| c.get(i).map(|cell| width(cell)))
                .chain([width(columns[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    write!(out, "{by:<first$}")?;
    for (name, width) in columns.iter().zip(&widths) {
        write!(out, "  {name:>width$}")?;
    }
    writeln!(out)?;
    for (group, cells) in rows {
        write!(out, "{group:<first$}")?;
        for (cell, width) in cells.iter().zip(&widths) {
            write!(out, "  {cell:>width$}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod money_tests {
    use super::{dollars, usd};

    #[test]
    fn money_never_reads_as_negative_zero_or_as_nothing() {
        assert_eq!(usd(-0.0000001), "0.000000");
        assert_eq!(usd(-0.25), "-0.250000");
        assert_eq!(usd(0.0), "0.000000");
        assert_eq!(dollars(0.0), "$0");
        assert_eq!(dollars(-1e-12), "$0");
        assert_eq!(dollars(12.5), "$12.50");
        assert_eq!(dollars(0.00421), "$0.004210");
        assert_eq!(dollars(-0.5), "-$0.5000");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_with_commas_quotes_or_breaks_are_quoted() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\"\n"), "\"say \"\"hi\"\"\n\"");
    }
}
