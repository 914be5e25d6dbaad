//! Deleting rows older than `retention_days` from the shared ledger: at
//! start and hourly, by whichever replica takes the lock, in chunks so no
//! one transaction holds many row locks or stalls the writers.

use std::time::Duration;

use deadpool_postgres::Pool;

/// Another constant than the migrations' lock: a purge never waits for a
/// replica starting, nor the other way round.
const LOCK_KEY: i64 = 0x7377_7265_7465_6e74;
const CHUNK: i64 = 10_000;
const EVERY: Duration = Duration::from_secs(3600);

/// Purges now and then every hour, for as long as the runtime runs.
pub async fn run(pool: Pool, days: u32) {
    if days == 0 {
        return;
    }
    let mut every = tokio::time::interval(EVERY);
    loop {
        every.tick().await;
        match purge(&pool, days).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, days, "ledger retention"),
            Err(err) => tracing::warn!(error = %format_args!("{err:#}"), "ledger retention failed"),
        }
    }
}

/// Deletes rows older than `days`, a chunk per transaction, while this
/// replica holds the lock; returns how many.
async fn purge(pool: &Pool, days: u32) -> anyhow::Result<u64> {
    let cutoff = crate::ledger::report::now_ms() - i64::from(days) * 86_400_000;
    let mut client = pool.get().await?;
    let mut deleted = 0;
    loop {
        let tx = client.transaction().await?;
        let locked: bool = tx
            .query_one("SELECT pg_try_advisory_xact_lock($1)", &[&LOCK_KEY])
            .await?
            .get(0);
        if !locked {
            // Another replica is purging.
            return Ok(deleted);
        }
        let n = tx
            .execute(
                "DELETE FROM requests WHERE id IN
                   (SELECT id FROM requests WHERE ts_ms < $1 ORDER BY ts_ms LIMIT $2)",
                &[&cutoff, &CHUNK],
            )
            .await?;
        tx.commit().await?;
        deleted += n;
        if n < CHUNK as u64 {
            return Ok(deleted);
        }
    }
}
