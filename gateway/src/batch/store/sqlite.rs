//! The batch store in SQLite (WAL), beside the ledger's file by default:
//! one connection, used from blocking tasks, for one process.

use std::path::Path;
use std::sync::{Mutex, PoisonError};

use rusqlite::{Connection, OptionalExtension, params};

use crate::batch::store::shape::{
    BatchRow, FileRow, Line, Pending, STATES, Store, StoreResult, never_ran, new_id,
    output_and_errors,
};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, purpose TEXT NOT NULL, filename TEXT NOT NULL,
    bytes INTEGER NOT NULL, created_at INTEGER NOT NULL, content BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL,
    completion_window TEXT NOT NULL, status TEXT NOT NULL, metadata TEXT, errors TEXT,
    output_file_id TEXT, error_file_id TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    in_progress_at INTEGER, finalizing_at INTEGER, completed_at INTEGER, failed_at INTEGER,
    expired_at INTEGER, cancelling_at INTEGER, cancelled_at INTEGER,
    total INTEGER NOT NULL, completed INTEGER NOT NULL, failed INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batch_lines (
    batch_id TEXT NOT NULL, line INTEGER NOT NULL, custom_id TEXT, body TEXT,
    state TEXT NOT NULL, result TEXT, PRIMARY KEY (batch_id, line));
CREATE INDEX IF NOT EXISTS batch_lines_pending ON batch_lines (batch_id, state);
";

pub struct Sqlite(Mutex<Connection>);

impl Sqlite {
    pub fn open(path: &Path) -> rusqlite::Result<Sqlite> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(Sqlite(Mutex::new(conn)))
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Store for Sqlite {
    fn put_file(&self, file: &FileRow, content: &[u8]) -> StoreResult<()> {
        Ok(insert_file(&self.conn(), file, content)?)
    }

    fn file(&self, id: &str, owner: &str) -> StoreResult<Option<FileRow>> {
        self.conn()
            .query_row(
                "SELECT id, owner, purpose, filename, bytes, created_at FROM files
                 WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                file_row,
            )
            .optional()
            .map_err(Into::into)
    }

    fn file_content(&self, id: &str, owner: &str) -> StoreResult<Option<Vec<u8>>> {
        self.conn()
            .query_row(
                "SELECT content FROM files WHERE id = ?1 AND owner = ?2",
                params![id, owner],
                |row| row.get(0),
            )
            .optional()
            .map_err(Into::into)
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
            "SELECT id, owner, purpose, filename, bytes, created_at FROM files
             WHERE owner = ?1 AND (?2 IS NULL OR purpose = ?2)
               AND (?3 IS NULL OR (created_at, id) {cmp}
                    (SELECT created_at, id FROM files WHERE id = ?3 AND owner = ?1))
             ORDER BY created_at {order}, id {order} LIMIT ?4"
        );
        let conn = self.conn();
        let mut statement = conn.prepare(&sql)?;
        let rows = statement.query_map(params![owner, purpose, after, limit as i64], file_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn delete_file(&self, id: &str, owner: &str) -> StoreResult<bool> {
        let deleted = self.conn().execute(
            "DELETE FROM files WHERE id = ?1 AND owner = ?2",
            params![id, owner],
        )?;
        Ok(deleted > 0)
    }

    fn create_batch(&self, batch: &BatchRow, lines: &[Line]) -> StoreResult<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT INTO batches (id, owner, endpoint, input_file_id, completion_window, status,
                 metadata, errors, created_at, expires_at, in_progress_at, failed_at,
                 total, completed, failed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 0, 0)",
            params![
                batch.id,
                batch.owner,
                batch.endpoint,
                batch.input_file_id,
                batch.completion_window,
                batch.status,
                batch.metadata,
                batch.errors,
                batch.created_at,
                batch.expires_at,
                batch.times[0],
                batch.times[3],
                batch.total as i64,
            ],
        )?;
        {
            let mut insert = tx.prepare(
                "INSERT INTO batch_lines (batch_id, line, custom_id, body, state, result)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            for line in lines {
                insert.execute(params![
                    batch.id,
                    line.line as i64,
                    line.custom_id,
                    line.body,
                    line.state,
                    line.result
                ])?;
            }
        }
        // Lines that could not be read are failed from the start.
        tx.execute(
            "UPDATE batches SET failed = (SELECT COUNT(*) FROM batch_lines
                 WHERE batch_id = ?1 AND state = 'failed') WHERE id = ?1",
            params![batch.id],
        )?;
        Ok(tx.commit()?)
    }

    fn batch(&self, id: &str, owner: Option<&str>) -> StoreResult<Option<BatchRow>> {
        self.conn()
            .query_row(
                &format!("{BATCH_COLUMNS} WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)"),
                params![id, owner],
                batch_row,
            )
            .optional()
            .map_err(Into::into)
    }

    fn batches(
        &self,
        owner: &str,
        after: Option<&str>,
        limit: usize,
    ) -> StoreResult<Vec<BatchRow>> {
        let conn = self.conn();
        let mut statement = conn.prepare(&format!(
            "{BATCH_COLUMNS} WHERE owner = ?1 AND (?2 IS NULL OR (created_at, id) <
                 (SELECT created_at, id FROM batches WHERE id = ?2 AND owner = ?1))
             ORDER BY created_at DESC, id DESC LIMIT ?3"
        ))?;
        let rows = statement.query_map(params![owner, after, limit as i64], batch_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn recent(&self, limit: usize) -> StoreResult<Vec<BatchRow>> {
        let conn = self.conn();
        let mut statement = conn.prepare(&format!(
            "{BATCH_COLUMNS} ORDER BY created_at DESC, id DESC LIMIT ?1"
        ))?;
        let rows = statement.query_map([limit as i64], batch_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn unfinished(&self) -> StoreResult<Vec<BatchRow>> {
        let conn = self.conn();
        let mut statement = conn.prepare(&format!(
            "{BATCH_COLUMNS} WHERE status IN ('in_progress', 'finalizing', 'cancelling')
             ORDER BY created_at, id"
        ))?;
        let rows = statement.query_map([], batch_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    fn set_status(&self, id: &str, status: &str, from: &[&str], at: i64) -> StoreResult<bool> {
        let column = format!("{status}_at");
        anyhow::ensure!(STATES.contains(&status), "no batch state {status}");
        let allowed = from
            .iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let changed = self.conn().execute(
            &format!(
                "UPDATE batches SET status = ?2, {column} = ?3 WHERE id = ?1 AND status IN ({allowed})"
            ),
            params![id, status, at],
        )?;
        Ok(changed > 0)
    }

    fn pending_lines(
        &self,
        batch_id: &str,
        running: &[u64],
        limit: usize,
    ) -> StoreResult<Vec<Pending>> {
        let conn = self.conn();
        let mut statement = conn.prepare(
            "SELECT line, custom_id, body FROM batch_lines WHERE batch_id = ?1 AND state = 'pending'
             ORDER BY line LIMIT ?2",
        )?;
        let rows =
            statement.query_map(params![batch_id, (limit + running.len()) as i64], |row| {
                Ok(Pending {
                    line: row.get::<_, i64>(0)? as u64,
                    custom_id: row.get(1)?,
                    body: row.get(2)?,
                })
            })?;
        let mut lines = Vec::new();
        for row in rows {
            let pending = row?;
            if !running.contains(&pending.line) && lines.len() < limit {
                lines.push(pending);
            }
        }
        Ok(lines)
    }

    fn finish_line(&self, batch_id: &str, line: u64, done: bool, result: &str) -> StoreResult<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let state = if done { "done" } else { "failed" };
        let changed = tx.execute(
            "UPDATE batch_lines SET state = ?3, result = ?4
             WHERE batch_id = ?1 AND line = ?2 AND state = 'pending'",
            params![batch_id, line as i64, state, result],
        )?;
        if changed > 0 {
            let counter = if done { "completed" } else { "failed" };
            tx.execute(
                &format!("UPDATE batches SET {counter} = {counter} + 1 WHERE id = ?1"),
                params![batch_id],
            )?;
        }
        Ok(tx.commit()?)
    }

    fn fail_pending(&self, batch_id: &str, code: &str) -> StoreResult<()> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let pending: Vec<(i64, Option<String>)> = {
            let mut statement = tx.prepare(
                "SELECT line, custom_id FROM batch_lines WHERE batch_id = ?1 AND state = 'pending'",
            )?;
            let rows =
                statement.query_map(params![batch_id], |row| Ok((row.get(0)?, row.get(1)?)))?;
            rows.collect::<rusqlite::Result<_>>()?
        };
        for (line, custom_id) in &pending {
            let result = never_ran(&new_id("batch_req_"), custom_id.as_deref(), code, *line);
            tx.execute(
                "UPDATE batch_lines SET state = 'failed', result = ?3 WHERE batch_id = ?1 AND line = ?2",
                params![batch_id, line, result],
            )?;
        }
        tx.execute(
            "UPDATE batches SET failed = failed + ?2 WHERE id = ?1",
            params![batch_id, pending.len() as i64],
        )?;
        Ok(tx.commit()?)
    }

    fn has_pending(&self, batch_id: &str) -> StoreResult<bool> {
        Ok(self.conn().query_row(
            "SELECT EXISTS (SELECT 1 FROM batch_lines WHERE batch_id = ?1 AND state = 'pending')",
            params![batch_id],
            |row| row.get(0),
        )?)
    }

    fn results(&self, batch_id: &str) -> StoreResult<(Vec<String>, Vec<String>)> {
        let conn = self.conn();
        let mut statement = conn.prepare(
            "SELECT state, result FROM batch_lines WHERE batch_id = ?1 AND state != 'pending'
             ORDER BY line",
        )?;
        let rows = statement.query_map(params![batch_id], |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
        })?;
        output_and_errors(rows.map(|row| row.map_err(Into::into)))
    }

    fn finish_batch(
        &self,
        batch: &BatchRow,
        files: [Option<(FileRow, Vec<u8>)>; 2],
        status: &str,
        at: i64,
    ) -> StoreResult<bool> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        let mut ids: [Option<String>; 2] = [None, None];
        for (slot, file) in ids.iter_mut().zip(files) {
            if let Some((file, content)) = file {
                insert_file(&tx, &file, &content)?;
                *slot = Some(file.id);
            }
        }
        let changed = tx.execute(
            &format!(
                "UPDATE batches SET status = ?2, {status}_at = ?3, output_file_id = ?4,
                     error_file_id = ?5 WHERE id = ?1 AND status = ?6"
            ),
            params![batch.id, status, at, ids[0], ids[1], batch.status],
        )?;
        // Dropped without a commit, the transaction writes nothing.
        if changed == 0 {
            return Ok(false);
        }
        tx.commit()?;
        Ok(true)
    }
}

const BATCH_COLUMNS: &str = "SELECT id, owner, endpoint, input_file_id, completion_window, status,
    metadata, errors, output_file_id, error_file_id, created_at, expires_at, in_progress_at,
    finalizing_at, completed_at, failed_at, expired_at, cancelling_at, cancelled_at, total,
    completed, failed FROM batches";

fn insert_file(conn: &Connection, file: &FileRow, content: &[u8]) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT INTO files (id, owner, purpose, filename, bytes, created_at, content)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            file.id,
            file.owner,
            file.purpose,
            file.filename,
            file.bytes as i64,
            file.created_at,
            content
        ],
    )?;
    Ok(())
}

fn file_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<FileRow> {
    Ok(FileRow {
        id: row.get(0)?,
        owner: row.get(1)?,
        purpose: row.get(2)?,
        filename: row.get(3)?,
        bytes: row.get::<_, i64>(4)? as u64,
        created_at: row.get(5)?,
    })
}

fn batch_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<BatchRow> {
    let mut times = [None; 7];
    for (i, time) in times.iter_mut().enumerate() {
        *time = row.get(12 + i)?;
    }
    Ok(BatchRow {
        id: row.get(0)?,
        owner: row.get(1)?,
        endpoint: row.get(2)?,
        input_file_id: row.get(3)?,
        completion_window: row.get(4)?,
        status: row.get(5)?,
        metadata: row.get(6)?,
        errors: row.get(7)?,
        output_file_id: row.get(8)?,
        error_file_id: row.get(9)?,
        created_at: row.get(10)?,
        expires_at: row.get(11)?,
        times,
        total: row.get::<_, i64>(19)? as u64,
        completed: row.get::<_, i64>(20)? as u64,
        failed: row.get::<_, i64>(21)? as u64,
    })
}
