//! The writer thread: takes rows off the queue and commits them in batches.

use std::time::{Duration, Instant};

use rusqlite::{Connection, params};
use tokio::sync::mpsc;

use crate::ledger::Entry;
use crate::ledger::row::LedgerRow;

/// Most rows in one transaction.
const BATCH: usize = 1024;
/// How often a gathering batch looks for more rows: rarely enough that the
/// writer wakes a few dozen times per flush, not once per row; often enough
/// that the queue (10,000 rows by default) does not fill at 15k rows/s.
const POLL: Duration = Duration::from_millis(20);
/// How often old rows are purged.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// Runs until every sender is gone and the queue is empty. `window` is how
/// long a batch gathers rows after its first (zero in strict mode).
pub fn run(
    mut conn: Connection,
    mut receiver: mpsc::Receiver<Entry>,
    window: Duration,
    retention_days: u32,
    health: &crate::ledger::WriterHealth,
) {
    let mut last_retention = Instant::now();
    while let Some(first) = receiver.blocking_recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + window;
        while batch.len() < BATCH {
            match receiver.try_recv() {
                Ok(entry) => batch.push(entry),
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < deadline => {
                    std::thread::sleep(POLL.min(deadline - Instant::now()));
                }
                Err(_) => break,
            }
        }
        let mut committed = commit(&mut conn, &batch);
        if let Err(err) = &committed {
            tracing::error!(error = %err, rows = batch.len(), "ledger commit failed; retrying once");
            std::thread::sleep(Duration::from_millis(100));
            committed = commit(&mut conn, &batch);
            if let Err(err) = &committed {
                tracing::error!(error = %err, rows = ?batch.iter().map(|e| &e.row).collect::<Vec<_>>(), "ledger rows lost");
                health.lost.inc_by(batch.len() as u64);
            }
        }
        if committed.is_ok() {
            for entry in &batch {
                health
                    .commit_lag
                    .observe(entry.queued.elapsed().as_secs_f64());
            }
        }
        for entry in batch {
            if let Some(waiting) = entry.committed {
                let _ = waiting.send(committed.is_ok());
            }
        }
        if last_retention.elapsed() > RETENTION_EVERY {
            last_retention = Instant::now();
            if let Err(err) = crate::ledger::schema::apply_retention(&conn, retention_days) {
                tracing::warn!(error = %err, "ledger retention failed");
            }
        }
    }
}

fn commit(conn: &mut Connection, batch: &[Entry]) -> rusqlite::Result<()> {
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO requests (ts_ms, request_id, key, team, route, backend, tier, profile, dialect, endpoint,
                input_tokens, cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                cost_usd, counterfactual_usd, ttft_ms, duration_ms, status, reason, hedge, fallback, cache_hit, estimated,
                predicted_ttft_ms, decode_tokens_per_s, prompt_class, draft_tokens, draft_accepted_tokens,
                expected_cached_tokens, refusal, client_request_id, service_tier, unpriced, session, tool_results,
                queued_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38)",
        )?;
        for Entry { row, .. } in batch {
            insert_row(&mut insert, row)?;
        }
    }
    tx.commit()
}

fn insert_row(
    insert: &mut rusqlite::CachedStatement<'_>,
    r: &LedgerRow,
) -> rusqlite::Result<usize> {
    let t = &r.tokens;
    let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    insert.execute(params![
        r.ts_ms,
        r.request_id,
        r.key,
        r.team,
        r.route,
        r.backend,
        r.tier,
        r.profile,
        r.dialect,
        r.endpoint,
        n(t.input),
        n(t.cached_input),
        n(t.cache_write),
        n(t.output),
        n(t.reasoning),
        r.cost_usd,
        r.counterfactual_usd,
        r.ttft_ms,
        r.duration_ms,
        r.status,
        r.reason,
        r.hedge,
        r.fallback,
        r.cache_hit,
        r.estimated,
        r.predicted_ttft_ms,
        r.decode_tokens_per_s,
        r.prompt_class.as_str(),
        r.drafts.map(|d| n(d.drafted)),
        r.drafts.map(|d| n(d.accepted)),
        r.expected_cached_tokens,
        r.refusal,
        r.client_request_id,
        r.service_tier,
        r.unpriced,
        r.session,
        r.tool_results,
        r.queued_ms,
    ])
}

#[cfg(test)]
mod tests {
    use switchyard_policies::{PromptClass, TokenCounts};

    use super::super::Drafts;
    use super::*;

    fn row(i: usize) -> LedgerRow {
        LedgerRow {
            ts_ms: i64::try_from(i).unwrap_or(0),
            request_id: Some(format!("req-{i}")),
            client_request_id: None,
            key: Some("alice".into()),
            team: None,
            route: Some("auto".into()),
            backend: "local".into(),
            tier: "small",
            profile: None,
            dialect: "openai",
            endpoint: "chat",
            tokens: TokenCounts {
                input: i as u64,
                output: 2 * i as u64,
                ..TokenCounts::default()
            },
            cost_usd: 0.5,
            counterfactual_usd: 1.0,
            ttft_ms: Some(1.0),
            predicted_ttft_ms: None,
            decode_tokens_per_s: None,
            duration_ms: 2.0,
            status: "ok",
            refusal: None,
            reason: "split",
            hedge: false,
            fallback: false,
            cache_hit: false,
            estimated: false,
            prompt_class: PromptClass::Code,
            drafts: Some(Drafts {
                drafted: 7,
                accepted: 5,
            }),
            expected_cached_tokens: 3,
            service_tier: None,
            unpriced: false,
            session: Some("task-1".into()),
            tool_results: true,
            queued_ms: 0.0,
        }
    }

    /// Every row of a batch lands whole, each value in its own column.
    #[test]
    fn every_row_of_a_batch_lands_in_its_columns() {
        let dir = std::env::temp_dir().join(format!("switchyard-writer-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ledger.db");
        let mut conn = super::super::schema::open(path.to_str().unwrap(), false).unwrap();
        let rows = 69;
        let batch: Vec<Entry> = (0..rows)
            .map(|i| Entry {
                row: row(i),
                committed: None,
                queued: std::time::Instant::now(),
            })
            .collect();
        commit(&mut conn, &batch).unwrap();
        let (count, inputs, outputs): (i64, i64, i64) = conn
            .query_row(
                "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM requests",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap();
        let expected = i64::try_from(rows * (rows - 1) / 2).unwrap();
        assert_eq!(
            (count, inputs, outputs),
            (i64::try_from(rows).unwrap(), expected, 2 * expected)
        );
        let last: (String, i64, String, i64, i64) = conn
            .query_row(
                "SELECT request_id, ts_ms, prompt_class, draft_accepted_tokens, expected_cached_tokens FROM requests WHERE ts_ms = ?1",
                [i64::try_from(rows - 1).unwrap()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
            )
            .unwrap();
        assert_eq!(
            last,
            (
                format!("req-{}", rows - 1),
                i64::try_from(rows - 1).unwrap(),
                "code".into(),
                5,
                3
            )
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
