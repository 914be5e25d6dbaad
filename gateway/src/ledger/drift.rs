//! Each backend's figures over the last hour against the rest of a
//! report's window: decode speed (at prompts under 2,048 tokens, so a
//! change in the traffic's prompt lengths does not pass for one in the
//! backend), prefill speed (of long uncached prompts) and the share of
//! calls that failed upstream.

use std::collections::BTreeMap;

use rusqlite::Connection;

use crate::ledger::report::quantile;

/// One backend's figure, recent against before.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DriftLine {
    pub backend: String,
    /// `decode_tokens_per_s`, `prefill_tokens_per_s` (medians) or
    /// `failed_share`.
    pub figure: &'static str,
    pub recent_calls: u64,
    pub recent: f64,
    pub baseline_calls: u64,
    pub baseline: f64,
    /// Speeds: recent over baseline, less one; the failed share: recent
    /// less baseline.
    pub change: f64,
    /// Moved past its threshold: 30% either way for a speed, 10 points up
    /// for failures.
    pub drifted: bool,
}

/// Calls each side of the comparison needs.
const MIN_CALLS: usize = 10;
/// Prompts long enough for their prefill to dominate the first token.
const LONG_PROMPT: i64 = 1024;
const FAILURES_RISE: f64 = 0.1;

/// Every backend's drift lines: calls since `recent_ms` against those
/// from `since_ms` until then.
pub fn drift(conn: &Connection, since_ms: i64, recent_ms: i64) -> rusqlite::Result<Vec<DriftLine>> {
    let mut lines = Vec::new();
    let speeds = [
        (
            "decode_tokens_per_s",
            "SELECT backend, ts_ms >= ?2, decode_tokens_per_s FROM requests
             WHERE ts_ms >= ?1 AND status = 'ok' AND decode_tokens_per_s > 0 AND NOT cache_hit
                   AND input_tokens + cached_tokens + cache_write_tokens < 2048"
                .to_owned(),
        ),
        (
            "prefill_tokens_per_s",
            format!(
                "SELECT backend, ts_ms >= ?2, input_tokens / (ttft_ms / 1000.0) FROM requests
                 WHERE ts_ms >= ?1 AND status = 'ok' AND ttft_ms > 0 AND NOT cache_hit
                       AND input_tokens >= {LONG_PROMPT}"
            ),
        ),
        (
            "failed_share",
            // The backend's own failures, as its breaker counts them (not
            // a caller's rejected request, a rate limit or a certificate).
            format!(
                "SELECT backend, ts_ms >= ?2, CAST(status IN ({}) AS REAL)
                 FROM requests
                 WHERE ts_ms >= ?1 AND backend != '' AND reason != 'refused' AND NOT cache_hit",
                crate::ledger::UPSTREAM_FAILURES
                    .map(|status| format!("'{status}'"))
                    .join(", ")
            ),
        ),
    ];
    for (figure, sql) in speeds {
        let mut statement = conn.prepare(&sql)?;
        let mut values: BTreeMap<String, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
        let rows = statement.query_map([since_ms, recent_ms], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, bool>(1)?,
                row.get::<_, f64>(2)?,
            ))
        })?;
        for row in rows {
            let (backend, recent, value) = row?;
            let (before, after) = values.entry(backend).or_default();
            if recent { after } else { before }.push(value);
        }
        lines.extend(
            values
                .into_iter()
                .filter(|(_, (before, after))| {
                    before.len() >= MIN_CALLS && after.len() >= MIN_CALLS
                })
                .filter_map(|(backend, (before, after))| line(backend, figure, before, after)),
        );
    }
    Ok(lines)
}

fn line(
    backend: String,
    figure: &'static str,
    mut before: Vec<f64>,
    mut after: Vec<f64>,
) -> Option<DriftLine> {
    let (baseline, recent, change, drifted) = if figure == "failed_share" {
        let share = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let (baseline, recent) = (share(&before), share(&after));
        (
            baseline,
            recent,
            recent - baseline,
            recent - baseline >= FAILURES_RISE,
        )
    } else {
        before.sort_by(f64::total_cmp);
        after.sort_by(f64::total_cmp);
        let (baseline, recent) = (quantile(&before, 0.5)?, quantile(&after, 0.5)?);
        let change = recent / baseline - 1.0;
        (
            baseline,
            recent,
            change,
            change.abs() >= crate::metrics::DRIFT_THRESHOLD,
        )
    };
    Some(DriftLine {
        backend,
        figure,
        recent_calls: after.len() as u64,
        recent,
        baseline_calls: before.len() as u64,
        baseline,
        change,
        drifted,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::attainment::{AttainmentDimension, HOUR_MS, attainment_report};

    #[test]
    fn slower_decode_slower_prefill_and_more_failures_this_hour_are_drift() {
        let path = std::env::temp_dir().join(format!("switchyard-drift-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let conn = super::super::schema::open(path.to_str().unwrap(), false).unwrap();
        let now = super::super::now_ms();
        let insert = |ts_ms: i64,
                      backend: &str,
                      prompt: i64,
                      ttft: f64,
                      rate: f64,
                      status: &str| {
            conn.execute(
                "INSERT INTO requests (ts_ms, backend, tier, dialect, endpoint, input_tokens, cached_tokens,
                     cache_write_tokens, output_tokens, reasoning_tokens, cost_usd, counterfactual_usd,
                     ttft_ms, decode_tokens_per_s, duration_ms, status, reason, hedge, fallback, cache_hit, estimated)
                 VALUES (?1, ?2, 'small', 'openai', 'chat', ?3, 0, 0, 10, 0, 0, 0, ?4, ?5, 1000, ?6, 'split', 0, 0, 0, 0)",
                rusqlite::params![ts_ms, backend, prompt, ttft, rate, status],
            )
            .unwrap();
        };
        for i in 0..12 {
            let (before, recent) = (now - 2 * HOUR_MS - i, now - i);
            insert(before, "slowed", 100, 50.0, 100.0, "ok");
            insert(recent, "slowed", 100, 50.0, 60.0, "ok");
            insert(before, "steady", 100, 50.0, 50.0, "ok");
            insert(recent, "steady", 100, 50.0, 52.0, "ok");
            // 2,000-token prompts: 100 ms to first token before, 400 now.
            insert(before, "prefill", 2000, 100.0, 50.0, "ok");
            insert(recent, "prefill", 2000, 400.0, 50.0, "ok");
            // One call in twelve failed before; half of them now.
            insert(
                before,
                "failing",
                100,
                50.0,
                50.0,
                if i == 0 { "upstream_error" } else { "ok" },
            );
            insert(
                recent,
                "failing",
                100,
                50.0,
                50.0,
                if i % 2 == 0 { "upstream_error" } else { "ok" },
            );
        }
        let report = attainment_report(
            &conn,
            now - 24 * HOUR_MS,
            AttainmentDimension::Backend,
            &BTreeMap::new(),
        )
        .unwrap();
        let find = |backend: &str, figure: &str| {
            report
                .drift
                .iter()
                .find(|d| d.backend == backend && d.figure == figure)
                .unwrap()
                .clone()
        };
        let slowed = find("slowed", "decode_tokens_per_s");
        assert_eq!((slowed.recent_calls, slowed.baseline_calls), (12, 12));
        assert!((slowed.change + 0.4).abs() < 1e-9 && slowed.drifted);
        assert!(!find("steady", "decode_tokens_per_s").drifted);
        let prefill = find("prefill", "prefill_tokens_per_s");
        assert!(
            (prefill.baseline - 20_000.0).abs() < 1e-6 && (prefill.recent - 5_000.0).abs() < 1e-6
        );
        assert!(prefill.drifted);
        let failing = find("failing", "failed_share");
        assert!(
            (failing.recent - 0.5).abs() < 1e-9 && (failing.baseline - 1.0 / 12.0).abs() < 1e-9
        );
        assert!(failing.drifted);
        assert!(!find("steady", "failed_share").drifted);
        drop(conn);
        let _ = std::fs::remove_file(path);
    }
}
