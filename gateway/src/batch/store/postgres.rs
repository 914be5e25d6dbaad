//! The batch store in the ledger's PostgreSQL database (schema version 8
//! made its tables), shared by every replica: a file uploaded to one is
//! read from another, a batch created on one is retrieved, listed and
//! cancelled on any. One replica at a time runs lines: the one holding a
//! session advisory lock on a connection of its own, which PostgreSQL
//! lets go when that replica or its connection goes, so another takes
//! over and runs the lines it left pending.
//!
//! Calls run on the ledger pool's runtime ([`Postgres::run`]) and block
//! until answered, like the SQLite store's.

use std::future::Future;
use std::sync::Arc;

use deadpool_postgres::{ClientWrapper, Object, Pool};
use tokio_postgres::Row;

use crate::batch::store::shape::{
    BatchRow, FileRow, Line, Pending, STATES, Store, StoreResult, never_ran, new_id,
    output_and_errors,
};
use crate::ledger::Postgres;

/// The runner's advisory lock (`switchbr` in ASCII), apart from the one
/// migrations take.
const RUNNER_LOCK: i64 = 0x7377_6974_6368_6272;

/// How long the lock's connection has to answer whether it still holds
/// the lock.
const LEASE_CHECK: std::time::Duration = std::time::Duration::from_secs(5);

pub struct Shared {
    postgres: Arc<Postgres>,
    lease: Arc<tokio::sync::Mutex<Lease>>,
}

/// The runner's own connection, outside the pool (a pooled one would go
/// back to the pool still holding the lock), and whether it holds the lock.
#[derive(Default)]
struct Lease {
    client: Option<ClientWrapper>,
    held: bool,
}

impl Shared {
    pub fn new(postgres: Arc<Postgres>) -> Shared {
        Shared {
            postgres,
            lease: Arc::default(),
        }
    }

    /// Runs `work` with the pool on the pool's runtime, and waits for it.
    fn call<T, F>(&self, work: impl FnOnce(Pool) -> F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Future<Output = StoreResult<T>> + Send + 'static,
    {
        self.postgres.run(work(self.postgres.pool().clone()))?
    }
}

const FILE_COLUMNS: &str =
    "SELECT id, owner, purpose, filename, bytes, created_at FROM batch_files";

const BATCH_COLUMNS: &str = "SELECT id, owner, endpoint, input_file_id, completion_window, status,
    metadata, errors, output_file_id, error_file_id, created_at, expires_at, in_progress_at,
    finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at, total,
    completed, failed FROM batches";

impl Store for Shared {
    fn put_file(&self, file: &FileRow, content: &[u8]) -> StoreResult<()> {
        let (file, content) = (file.clone(), content.to_vec());
        self.call(move |pool| async move {
            let client = pool.get().await?;
            insert_file(&**client, &file, &content).await
        })
    }

    fn file(&self, id: &str, owner: &str) -> StoreResult<Option<FileRow>> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let sql = format!("{FILE_COLUMNS} WHERE id = $1 AND owner = $2");
            let row = client.query_opt(&sql, &[&id, &owner]).await?;
            row.as_ref().map(file_row).transpose()
        })
    }

    fn file_content(&self, id: &str, owner: &str) -> StoreResult<Option<Vec<u8>>> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let row = client
                .query_opt(
                    "SELECT content FROM batch_files WHERE id = $1 AND owner = $2",
                    &[&id, &owner],
                )
                .await?;
            Ok(row.map(|r| r.try_get(0)).transpose()?)
        })
    }

    fn files(
        &self,
        owner: &str,
        purpose: Option<&str>,
        (after, limit, ascending): (Option<&str>, usize, bool),
    ) -> StoreResult<Vec<FileRow>> {
        let order = if ascending { "ASC" } else { "DESC" };
        let cmp = if ascending { ">" } else { "<" };
        let sql = format!(
            "{FILE_COLUMNS} WHERE owner = $1 AND ($2::text IS NULL OR purpose = $2)
               AND ($3::text IS NULL OR (created_at, id) {cmp}
                    (SELECT created_at, id FROM batch_files WHERE id = $3 AND owner = $1))
             ORDER BY created_at {order}, id {order} LIMIT $4"
        );
        let (owner, purpose, after) = (
            owner.to_owned(),
            purpose.map(str::to_owned),
            after.map(str::to_owned),
        );
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let rows = client
                .query(&sql, &[&owner, &purpose, &after, &(limit as i64)])
                .await?;
            rows.iter().map(file_row).collect()
        })
    }

    fn delete_file(&self, id: &str, owner: &str) -> StoreResult<bool> {
        let (id, owner) = (id.to_owned(), owner.to_owned());
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let deleted = client
                .execute(
                    "DELETE FROM batch_files WHERE id = $1 AND owner = $2",
                    &[&id, &owner],
                )
                .await?;
            Ok(deleted > 0)
        })
    }

    fn create_batch(&self, batch: &BatchRow, lines: &[Line]) -> StoreResult<()> {
        let batch = batch.clone();
        // The lines go in as arrays, one statement for all of them.
        let numbers: Vec<i64> = lines.iter().map(|l| l.line as i64).collect();
        let custom_ids: Vec<Option<String>> = lines.iter().map(|l| l.custom_id.clone()).collect();
        let bodies: Vec<Option<String>> = lines.iter().map(|l| l.body.clone()).collect();
        let states: Vec<String> = lines.iter().map(|l| l.state.to_owned()).collect();
        let results: Vec<Option<String>> = lines.iter().map(|l| l.result.clone()).collect();
        self.call(move |pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "INSERT INTO batches (id, owner, endpoint, input_file_id, completion_window,
                     status, metadata, errors, created_at, expires_at, in_progress_at, failed_at,
                     total, completed, failed)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 0, 0)",
                &[
                    &batch.id,
                    &batch.owner,
                    &batch.endpoint,
                    &batch.input_file_id,
                    &batch.completion_window,
                    &batch.status,
                    &batch.metadata,
                    &batch.errors,
                    &batch.created_at,
                    &batch.expires_at,
                    &batch.times[0],
                    &batch.times[3],
                    &(batch.total as i64),
                ],
            )
            .await?;
            tx.execute(
                "INSERT INTO batch_lines (batch_id, line, custom_id, body, state, result)
                 SELECT $1, * FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[],
                     $6::text[])",
                &[&batch.id, &numbers, &custom_ids, &bodies, &states, &results],
            )
            .await?;
            tx.execute(
                "UPDATE batches SET failed = (SELECT COUNT(*) FROM batch_lines
                     WHERE batch_id = $1 AND state = 'failed') WHERE id = $1",
                &[&batch.id],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn batch(&self, id: &str, owner: Option<&str>) -> StoreResult<Option<BatchRow>> {
        let (id, owner) = (id.to_owned(), owner.map(str::to_owned));
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let sql = format!("{BATCH_COLUMNS} WHERE id = $1 AND ($2::text IS NULL OR owner = $2)");
            let row = client.query_opt(&sql, &[&id, &owner]).await?;
            row.as_ref().map(batch_row).transpose()
        })
    }

    fn batches(
        &self,
        owner: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<BatchRow>> {
        let (owner, after) = (owner.to_owned(), after.map(str::to_owned));
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let sql = format!(
                "{BATCH_COLUMNS} WHERE owner = $1 AND ($2::text IS NULL OR (created_at, id) <
                     (SELECT created_at, id FROM batches WHERE id = $2 AND owner = $1))
                 ORDER BY created_at DESC, id DESC LIMIT $3"
            );
            let rows = client
                .query(&sql, &[&owner, &after, &(limit as i64)])
                .await?;
            rows.iter().map(batch_row).collect()
        })
    }

    fn recent(&self, limit: usize) -> StoreResult<Vec<BatchRow>> {
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let sql = format!("{BATCH_COLUMNS} ORDER BY created_at DESC, id DESC LIMIT $1");
            let rows = client.query(&sql, &[&(limit as i64)]).await?;
            rows.iter().map(batch_row).collect()
        })
    }

    fn unfinished(&self) -> StoreResult<Vec<BatchRow>> {
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let sql = format!(
                "{BATCH_COLUMNS} WHERE status IN ('in_progress', 'finalizing', 'cancelling')
                 ORDER BY created_at, id"
            );
            let rows = client.query(&sql, &[]).await?;
            rows.iter().map(batch_row).collect()
        })
    }

    fn set_status(&self, id: &str, status: &str, from: &[&str], at: i64) -> StoreResult<bool> {
        anyhow::ensure!(STATES.contains(&status), "no batch state {status}");
        let sql = format!(
            "UPDATE batches SET status = $2, {status}_at = $3 WHERE id = $1 AND status = ANY($4)"
        );
        let (id, status) = (id.to_owned(), status.to_owned());
        let from: Vec<String> = from.iter().map(|s| (*s).to_owned()).collect();
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let changed = client.execute(&sql, &[&id, &status, &at, &from]).await?;
            Ok(changed > 0)
        })
    }

    fn pending_lines(
        &self,
        batch_id: &str,
        running: &[u64],
        limit: usize,
    ) -> StoreResult<Vec<Pending>> {
        let batch_id = batch_id.to_owned();
        let running: Vec<i64> = running.iter().map(|l| *l as i64).collect();
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let rows = client
                .query(
                    "SELECT line, custom_id, body FROM batch_lines
                     WHERE batch_id = $1 AND state = 'pending' AND NOT (line = ANY($2))
                     ORDER BY line LIMIT $3",
                    &[&batch_id, &running, &(limit as i64)],
                )
                .await?;
            rows.iter()
                .map(|row| {
                    Ok(Pending {
                        line: row.try_get::<_, i64>(0)? as u64,
                        custom_id: row.try_get(1)?,
                        body: row.try_get(2)?,
                    })
                })
                .collect()
        })
    }

    fn finish_line(&self, batch_id: &str, line: u64, done: bool, result: &str) -> StoreResult<()> {
        let (batch_id, result) = (batch_id.to_owned(), result.to_owned());
        self.call(move |pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let state = if done { "done" } else { "failed" };
            let changed = tx
                .execute(
                    "UPDATE batch_lines SET state = $3, result = $4
                     WHERE batch_id = $1 AND line = $2 AND state = 'pending'",
                    &[&batch_id, &(line as i64), &state, &result],
                )
                .await?;
            if changed > 0 {
                let counter = if done { "completed" } else { "failed" };
                tx.execute(
                    &format!("UPDATE batches SET {counter} = {counter} + 1 WHERE id = $1"),
                    &[&batch_id],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    fn fail_pending(&self, batch_id: &str, code: &str) -> StoreResult<()> {
        let (batch_id, code) = (batch_id.to_owned(), code.to_owned());
        self.call(move |pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let pending = tx
                .query(
                    "SELECT line, custom_id FROM batch_lines
                     WHERE batch_id = $1 AND state = 'pending' FOR UPDATE",
                    &[&batch_id],
                )
                .await?;
            let (mut lines, mut results) = (Vec::new(), Vec::new());
            for row in &pending {
                let (line, custom_id): (i64, Option<String>) = (row.try_get(0)?, row.try_get(1)?);
                lines.push(line);
                results.push(never_ran(
                    &new_id("batch_req_"),
                    custom_id.as_deref(),
                    &code,
                    line,
                ));
            }
            tx.execute(
                "UPDATE batch_lines SET state = 'failed', result = failing.result
                 FROM unnest($2::bigint[], $3::text[]) AS failing (line, result)
                 WHERE batch_lines.batch_id = $1 AND batch_lines.line = failing.line",
                &[&batch_id, &lines, &results],
            )
            .await?;
            tx.execute(
                "UPDATE batches SET failed = failed + $2 WHERE id = $1",
                &[&batch_id, &(lines.len() as i64)],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
    }

    fn has_pending(&self, batch_id: &str) -> StoreResult<bool> {
        let batch_id = batch_id.to_owned();
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let row = client
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM batch_lines
                         WHERE batch_id = $1 AND state = 'pending')",
                    &[&batch_id],
                )
                .await?;
            Ok(row.try_get(0)?)
        })
    }

    fn results(&self, batch_id: &str) -> StoreResult<(Vec<String>, Vec<String>)> {
        let batch_id = batch_id.to_owned();
        self.call(move |pool| async move {
            let client = pool.get().await?;
            let rows = client
                .query(
                    "SELECT state, result FROM batch_lines
                     WHERE batch_id = $1 AND state != 'pending' ORDER BY line",
                    &[&batch_id],
                )
                .await?;
            output_and_errors(
                rows.iter()
                    .map(|row| Ok((row.try_get(0)?, row.try_get(1)?))),
            )
        })
    }

    fn finish_batch(
        &self,
        batch: &BatchRow,
        files: [Option<(FileRow, Vec<u8>)>; 2],
        status: &str,
        at: i64,
    ) -> StoreResult<bool> {
        anyhow::ensure!(STATES.contains(&status), "no batch state {status}");
        let sql = format!(
            "UPDATE batches SET status = $2, {status}_at = $3, output_file_id = $4,
                 error_file_id = $5 WHERE id = $1 AND status = $6"
        );
        let (id, was, status) = (batch.id.clone(), batch.status.clone(), status.to_owned());
        self.call(move |pool| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            let mut ids: [Option<String>; 2] = [None, None];
            for (slot, file) in ids.iter_mut().zip(files) {
                if let Some((file, content)) = file {
                    insert_file(&*tx, &file, &content).await?;
                    *slot = Some(file.id);
                }
            }
            let changed = tx
                .execute(&sql, &[&id, &status, &at, &ids[0], &ids[1], &was])
                .await?;
            // Dropped without a commit, the transaction writes nothing.
            if changed == 0 {
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    fn runner_lease(&self) -> StoreResult<bool> {
        let lease = self.lease.clone();
        self.call(move |pool| async move {
            let mut lease = lease.lock().await;
            let client = match lease.client.take() {
                Some(client) if !client.is_closed() => client,
                // Never connected, or the connection (and the lock with it)
                // is gone: PostgreSQL restarted, or dropped us.
                _ => {
                    lease.held = false;
                    let client = Object::take(pool.get().await?);
                    // PostgreSQL lets a session's locks go when it ends; these
                    // make it notice within about 25 s that the replica's host
                    // went away (a crash, a network split), rather than after
                    // the system's two hours of TCP keepalive.
                    client
                        .batch_execute(
                            "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;
                             SET tcp_keepalives_count = 3",
                        )
                        .await?;
                    client
                }
            };
            // Held, the session is asked after each look whether it is still
            // there: a session lock lasts as long as its session, and a
            // session PostgreSQL ended (killed, restarted, timed out by a
            // proxy) fails the query, while this process lives on.
            let query = if lease.held {
                "SELECT true"
            } else {
                "SELECT pg_try_advisory_lock($1)"
            };
            let params: &[&(dyn tokio_postgres::types::ToSql + Sync)] =
                if lease.held { &[] } else { &[&RUNNER_LOCK] };
            let asked = tokio::time::timeout(LEASE_CHECK, client.query_one(query, params));
            let why = match asked.await {
                Ok(Ok(row)) => {
                    lease.held = row.try_get(0)?;
                    lease.client = Some(client);
                    return Ok(lease.held);
                }
                Ok(Err(err)) => err.to_string(),
                Err(_) => format!("no answer within {} s", LEASE_CHECK.as_secs()),
            };
            // The connection is dropped here, and the lock with it once
            // PostgreSQL sees it gone: not held, whatever it was.
            lease.held = false;
            tracing::warn!(%why, "batch runner: the lease's connection failed");
            Ok(false)
        })
    }

    fn shared(&self) -> bool {
        true
    }
}

async fn insert_file(
    client: &impl tokio_postgres::GenericClient,
    file: &FileRow,
    content: &[u8],
) -> StoreResult<()> {
    client
        .execute(
            "INSERT INTO batch_files (id, owner, purpose, filename, bytes, created_at, content)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            &[
                &file.id,
                &file.owner,
                &file.purpose,
                &file.filename,
                &(file.bytes as i64),
                &file.created_at,
                &content,
            ],
        )
        .await?;
    Ok(())
}

fn file_row(row: &Row) -> StoreResult<FileRow> {
    Ok(FileRow {
        id: row.try_get(0)?,
        owner: row.try_get(1)?,
        purpose: row.try_get(2)?,
        filename: row.try_get(3)?,
        bytes: row.try_get::<_, i64>(4)? as u64,
        created_at: row.try_get(5)?,
    })
}

fn batch_row(row: &Row) -> StoreResult<BatchRow> {
    let mut times = [None; 7];
    for (i, time) in times.iter_mut().enumerate() {
        *time = row.try_get(12 + i)?;
    }
    Ok(BatchRow {
        id: row.try_get(0)?,
        owner: row.try_get(1)?,
        endpoint: row.try_get(2)?,
        input_file_id: row.try_get(3)?,
        completion_window: row.try_get(4)?,
        status: row.try_get(5)?,
        metadata: row.try_get(6)?,
        errors: row.try_get(7)?,
        output_file_id: row.try_get(8)?,
        error_file_id: row.try_get(9)?,
        created_at: row.try_get(10)?,
        expires_at: row.try_get(11)?,
        times,
        total: row.try_get::<_, i64>(19)? as u64,
        completed: row.try_get::<_, i64>(20)? as u64,
        failed: row.try_get::<_, i64>(21)? as u64,
    })
}
