//! Batch work beside interactive traffic, from the ledger: how fast batch
//! lines were answered (output tokens per hour of the time some line was
//! running), and the first-token times of interactive requests that began
//! while batch lines ran against those of the rest of the time.

use rusqlite::Connection;

use crate::ledger::report::quantile;

/// First-token times of a set of interactive requests.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FirstTokens {
    pub requests: u64,
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
}

impl FirstTokens {
    fn of(mut ttfts: Vec<f64>) -> FirstTokens {
        ttfts.sort_by(f64::total_cmp);
        FirstTokens {
            requests: ttfts.len() as u64,
            p50_ms: quantile(&ttfts, 0.5),
            p90_ms: quantile(&ttfts, 0.9),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct BatchLoad {
    /// Batch lines answered (by their request ids), and their output
    /// tokens.
    pub batch_calls: u64,
    pub batch_output_tokens: u64,
    /// Time some batch line was running, in seconds.
    pub batch_running_s: f64,
    /// Output tokens per hour of that time.
    pub batch_tokens_per_hour: Option<f64>,
    /// Interactive requests (any profile but `unattended` and `batch`)
    /// that began while a batch line ran, and the others.
    pub interactive_while_batches: FirstTokens,
    pub interactive_otherwise: FirstTokens,
}

pub fn batch_load(conn: &Connection, since_ms: i64) -> rusqlite::Result<BatchLoad> {
    // From when each call had its slot (not while it queued); shadow
    // copies are not the batch's work. Calls are counted by line (a
    // fallback's tries are one line's).
    let mut statement = conn.prepare(
        "SELECT ts_ms, queued_ms, duration_ms, output_tokens, request_id FROM requests
         WHERE ts_ms >= ?1 AND batch IS NOT NULL AND refusal IS NULL AND reason != 'shadow'",
    )?;
    let mut spans = Vec::new();
    let mut tokens = 0u64;
    let mut lines = std::collections::HashSet::new();
    for row in statement.query_map([since_ms], |row| {
        let ts = row.get::<_, i64>(0)? as f64;
        let start = ts + row.get::<_, Option<f64>>(1)?.unwrap_or(0.0);
        let end = ts + row.get::<_, f64>(2)?;
        Ok((
            start.min(end),
            end,
            row.get::<_, i64>(3)?,
            row.get::<_, Option<String>>(4)?,
        ))
    })? {
        let (start, end, output, line) = row?;
        spans.push((start, end));
        tokens += u64::try_from(output).unwrap_or(0);
        lines.insert(line);
    }
    let calls = lines.len() as u64;
    let running = merged(spans);
    let running_ms: f64 = running.iter().map(|(s, e)| e - s).sum();
    let mut statement = conn.prepare(
        "SELECT ts_ms, ttft_ms FROM requests
         WHERE ts_ms >= ?1 AND batch IS NULL AND kind IS NULL AND ttft_ms IS NOT NULL
               AND refusal IS NULL AND reason != 'shadow'
               AND COALESCE(profile, '') NOT IN ('batch', 'unattended')",
    )?;
    let (mut during, mut otherwise) = (Vec::new(), Vec::new());
    for row in statement.query_map([since_ms], |row| {
        Ok((row.get::<_, i64>(0)? as f64, row.get::<_, f64>(1)?))
    })? {
        let (start, ttft) = row?;
        if within(&running, start) {
            during.push(ttft);
        } else {
            otherwise.push(ttft);
        }
    }
    Ok(BatchLoad {
        batch_calls: calls,
        batch_output_tokens: tokens,
        batch_running_s: running_ms / 1000.0,
        batch_tokens_per_hour: (running_ms > 0.0)
            .then(|| tokens as f64 / (running_ms / 3_600_000.0)),
        interactive_while_batches: FirstTokens::of(during),
        interactive_otherwise: FirstTokens::of(otherwise),
    })
}

/// The intervals' union, as sorted disjoint intervals.
fn merged(mut spans: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (start, end) in spans {
        match out.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

/// Whether `at` falls in one of the sorted disjoint `spans`.
fn within(spans: &[(f64, f64)], at: f64) -> bool {
    let after = spans.partition_point(|(start, _)| *start <= at);
    after > 0 && at <= spans[after - 1].1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_told_apart_by_whether_a_batch_line_ran() {
        let spans = merged(vec![(0.0, 100.0), (50.0, 150.0), (300.0, 400.0)]);
        assert_eq!(spans, [(0.0, 150.0), (300.0, 400.0)]);
        assert!(within(&spans, 120.0));
        assert!(!within(&spans, 200.0));
        assert!(within(&spans, 300.0));
        assert!(!within(&spans, 401.0));
    }
}
