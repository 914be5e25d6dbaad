//! The ledger's table and indexes, and retention.

use rusqlite::Connection;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS requests (
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    request_id TEXT,
    key TEXT,
    team TEXT,
    route TEXT,
    backend TEXT NOT NULL,
    tier TEXT NOT NULL,
    profile TEXT,
    dialect TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    cached_tokens INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    reasoning_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    counterfactual_usd REAL NOT NULL,
    ttft_ms REAL,
    predicted_ttft_ms REAL,
    decode_tokens_per_s REAL,
    duration_ms REAL NOT NULL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL,
    hedge INTEGER NOT NULL,
    fallback INTEGER NOT NULL,
    cache_hit INTEGER NOT NULL,
    estimated INTEGER NOT NULL,
    prompt_class TEXT,
    draft_tokens INTEGER,
    draft_accepted_tokens INTEGER,
    expected_cached_tokens INTEGER,
    refusal TEXT,
    client_request_id TEXT,
    service_tier TEXT,
    unpriced INTEGER,
    session TEXT,
    tool_results INTEGER,
    queued_ms REAL
);
-- Report queries filter by time and group by one dimension: they read the
-- time range from this index and group what it finds. (Indexes on a
-- dimension and time led SQLite to scan the whole index to avoid a sort,
-- and cost the writer three more B-tree inserts per row.)
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts_ms);
DROP INDEX IF EXISTS requests_key_ts;
DROP INDEX IF EXISTS requests_team_ts;
DROP INDEX IF EXISTS requests_backend_ts;
";

/// Opens the ledger; `strict`: every commit is synced to disk before it
/// returns (`synchronous=FULL`), as strict durability promises. Otherwise
/// NORMAL: under WAL a commit is synced at the next checkpoint, and a power
/// loss can take the last commits (a process crash cannot).
pub fn open(path: &str, strict: bool) -> anyhow::Result<Connection> {
    create_private(path)?;
    let conn = Connection::open(path).map_err(|err| anyhow::anyhow!("ledger {path}: {err}"))?;
    // WAL: readers (reports) never block the writer.
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", if strict { "FULL" } else { "NORMAL" })?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    create(&conn)?;
    Ok(conn)
}

/// Creates the table and its indexes on `conn` (or brings an older ledger's
/// up to date).
pub fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(SCHEMA)?;
    migrate(conn)
}

/// Creates the ledger file readable and writable by its owner only, when it
/// does not exist yet: it holds who asked what, when, and at what cost.
/// (SQLite gives its `-wal` and `-shm` files the database file's mode.)
fn create_private(path: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(err) => Err(anyhow::anyhow!("ledger {path}: {err}")),
    }
}

/// Columns added after the first release, added to older ledgers in place.
const ADDED_COLUMNS: [(&str, &str); 13] = [
    ("predicted_ttft_ms", "REAL"),
    ("decode_tokens_per_s", "REAL"),
    ("prompt_class", "TEXT"),
    ("draft_tokens", "INTEGER"),
    ("draft_accepted_tokens", "INTEGER"),
    ("expected_cached_tokens", "INTEGER"),
    ("refusal", "TEXT"),
    ("client_request_id", "TEXT"),
    ("service_tier", "TEXT"),
    ("unpriced", "INTEGER"),
    ("session", "TEXT"),
    ("tool_results", "INTEGER"),
    ("queued_ms", "REAL"),
];

fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info('requests')")?;
    let existing: Vec<String> = statement
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for (column, kind) in ADDED_COLUMNS {
        if !existing.iter().any(|c| c == column) {
            conn.execute_batch(&format!("ALTER TABLE requests ADD COLUMN {column} {kind}"))?;
        }
    }
    Ok(())
}

/// Deletes rows older than `days` (0 keeps everything).
pub fn apply_retention(conn: &Connection, days: u32) -> rusqlite::Result<usize> {
    if days == 0 {
        return Ok(0);
    }
    let cutoff = crate::ledger::report::now_ms() - i64::from(days) * 86_400_000;
    conn.execute("DELETE FROM requests WHERE ts_ms < ?1", [cutoff])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_ledgers_sync_every_commit() {
        let dir = std::env::temp_dir().join(format!("switchyard-schema-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (strict, want) in [(true, 2), (false, 1)] {
            let path = dir.join(format!("ledger-{strict}.db"));
            let conn = open(path.to_str().unwrap(), strict).unwrap();
            let synchronous: i64 = conn
                .query_row("PRAGMA synchronous", [], |r| r.get(0))
                .unwrap();
            assert_eq!(synchronous, want, "strict={strict}: 2 is FULL, 1 NORMAL");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
