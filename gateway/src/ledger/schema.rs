//! The ledger's table and indexes, and retention.

use rusqlite::Connection;

use crate::ledger::columns::{COLUMNS, Since, definition};

/// The table, from the column table, with the store's own key first.
fn table_sql() -> String {
    let columns: Vec<String> = COLUMNS.iter().map(|c| definition(c, false)).collect();
    format!(
        "CREATE TABLE IF NOT EXISTS requests (\n    id INTEGER PRIMARY KEY,\n    {}\n);",
        columns.join(",\n    ")
    )
}

const INDEXES: &str = "
-- Report queries filter by time and group by one dimension: they read the
-- time range from this index and group what it finds. (Indexes on a
-- dimension and time led SQLite to scan the whole index to avoid a sort,
-- and cost the writer three more B-tree inserts per row.)
CREATE INDEX IF NOT EXISTS requests_ts ON requests (ts_ms);
-- The request log finds one request's calls by the id its caller saw, at
-- once however long the ledger (one more B-tree insert per row).
CREATE INDEX IF NOT EXISTS requests_request_id ON requests (request_id);
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
    // 16 KiB pages rather than SQLite's 4 KiB: a row with its index
    // entries takes about 260 bytes, and with four times the rows a page,
    // the table's and the indexes' B-trees split a page a quarter as often
    // (about 950 instructions a row fewer, callgrind; the writer thread's
    // CPU at 13,500 rows/s went from about 5.2% of a core to 4.4%). A
    // commit writes whole pages to the WAL, so a commit of one row writes
    // 16 KiB a page it touches: a few pages, at most every `flush`, or
    // at once in strict mode, often for a single row (four times the
    // bytes it wrote with 4 KiB pages; not timed). The
    // WAL, checkpointed every 1,000 pages, reaches 16 MiB rather than 4
    // before it is copied back. SQLite sets the size only while the file
    // has no tables; an older ledger keeps its own.
    conn.pragma_update(None, "page_size", 16384)?;
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
    conn.execute_batch(&table_sql())?;
    conn.execute_batch(INDEXES)?;
    conn.execute_batch(crate::ledger::keys::SQLITE_TABLES)?;
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

fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    let mut statement = conn.prepare("SELECT name FROM pragma_table_info('requests')")?;
    let existing: Vec<String> = statement
        .query_map([], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    // Columns added after the first release, added to older ledgers in place.
    for column in COLUMNS.iter().filter(|c| c.since == Since::Added) {
        if !existing.iter().any(|c| c == column.name) {
            let definition = definition(column, false);
            conn.execute_batch(&format!("ALTER TABLE requests ADD COLUMN {definition}"))?;
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

    #[test]
    fn new_ledgers_get_16_kib_pages_and_older_ones_keep_theirs() {
        let dir = std::env::temp_dir().join(format!("switchyard-pages-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let page_size = |conn: &Connection| -> i64 {
            conn.query_row("PRAGMA page_size", [], |r| r.get(0))
                .unwrap()
        };
        let new = dir.join("new.db");
        assert_eq!(
            page_size(&open(new.to_str().unwrap(), false).unwrap()),
            16384
        );
        // A ledger made before, with SQLite's default pages and a row.
        let older = dir.join("older.db");
        {
            let conn = Connection::open(&older).unwrap();
            conn.pragma_update(None, "page_size", 4096).unwrap();
            create(&conn).unwrap();
            conn.execute(
                "INSERT INTO requests (ts_ms, backend, tier, dialect, endpoint, input_tokens,
                 cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                 counterfactual_usd, duration_ms, status, reason, hedge, fallback, cache_hit,
                 estimated) VALUES (1, 'b', 'small', 'openai', '/v1/chat/completions', 1, 0, 0,
                 1, 0, 0.0, 0.0, 1.0, 'ok', 'split', 0, 0, 0, 0)",
                [],
            )
            .unwrap();
        }
        let conn = open(older.to_str().unwrap(), false).unwrap();
        assert_eq!(page_size(&conn), 4096);
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM requests", [], |r| r.get(0))
            .unwrap();
        assert_eq!(rows, 1);
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn table_columns(conn: &Connection) -> Vec<(String, String, bool)> {
        let mut statement = conn
            .prepare("SELECT name, type, \"notnull\" FROM pragma_table_info('requests') WHERE name != 'id'")
            .unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    fn want(columns: &[crate::ledger::columns::Column]) -> Vec<(String, String, bool)> {
        columns
            .iter()
            .map(|c| {
                let definition = definition(c, false);
                let kind = definition.split(' ').nth(1).unwrap().to_owned();
                (c.name.to_owned(), kind, c.required)
            })
            .collect()
    }

    #[test]
    fn the_table_has_the_column_tables_columns() {
        let conn = Connection::open_in_memory().unwrap();
        create(&conn).unwrap();
        assert_eq!(table_columns(&conn), want(&COLUMNS));
    }

    #[test]
    fn an_older_ledger_gains_the_added_columns_and_keeps_its_rows() {
        let conn = Connection::open_in_memory().unwrap();
        let first: Vec<_> = COLUMNS
            .iter()
            .filter(|c| c.since == Since::First)
            .copied()
            .collect();
        let definitions: Vec<String> = first.iter().map(|c| definition(c, false)).collect();
        conn.execute_batch(&format!(
            "CREATE TABLE requests (id INTEGER PRIMARY KEY, {});",
            definitions.join(", ")
        ))
        .unwrap();
        let names: Vec<&str> = first.iter().map(|c| c.name).collect();
        let values: Vec<&str> = first
            .iter()
            .map(|c| match c.kind {
                crate::ledger::columns::Kind::Text => "'x'",
                _ => "1",
            })
            .collect();
        conn.execute_batch(&format!(
            "INSERT INTO requests ({}) VALUES ({})",
            names.join(", "),
            values.join(", ")
        ))
        .unwrap();
        create(&conn).unwrap();
        let mut have = table_columns(&conn);
        let mut expected = want(&COLUMNS);
        have.sort();
        expected.sort();
        assert_eq!(have, expected);
        let rows: i64 = conn
            .query_row(
                "SELECT count(*) FROM requests WHERE queued_ms IS NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(rows, 1);
    }
}
