//! The schema's versions, applied at start by whichever replica gets there
//! first. Every replica runs the same steps inside one transaction that
//! first takes a transaction-scoped advisory lock: replicas starting
//! together queue on the lock, and each finds the versions the one before
//! it applied (refinery reads the applied versions outside any lock, so
//! replicas starting together can both apply one).

use deadpool_postgres::Pool;

use crate::ledger::columns::{COLUMNS, definition};

/// The advisory lock's key: any constant other software on the database
/// is unlikely to use (`switchya` in ASCII).
const LOCK_KEY: i64 = 0x7377_6974_6368_7961;

/// What a later version brought beside its columns.
const EXTRAS: [(i32, &str); 3] = [
    // The request log finds one request's calls by the id its caller saw.
    (
        3,
        "CREATE INDEX IF NOT EXISTS requests_request_id ON requests (request_id);",
    ),
    // Keys made through the admin API, and their audit trail.
    (3, crate::ledger::keys::POSTGRES_TABLES),
    // The Files and Batches API's files, batches and lines
    // (`batch::store`'s PostgreSQL store).
    (8, BATCH_TABLES),
];

/// The batch store's tables: SQLite's, with PostgreSQL's types; `files`
/// is `batch_files` here, in a database other tables may share.
const BATCH_TABLES: &str = "
CREATE TABLE batch_files (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, purpose TEXT NOT NULL, filename TEXT NOT NULL,
    bytes BIGINT NOT NULL, created_at BIGINT NOT NULL, content BYTEA NOT NULL);
CREATE INDEX batch_files_owner ON batch_files (owner, created_at);
CREATE TABLE batches (
    id TEXT PRIMARY KEY, owner TEXT NOT NULL, endpoint TEXT NOT NULL, input_file_id TEXT NOT NULL,
    completion_window TEXT NOT NULL, status TEXT NOT NULL, metadata TEXT, errors TEXT,
    output_file_id TEXT, error_file_id TEXT, created_at BIGINT NOT NULL, expires_at BIGINT NOT NULL,
    in_progress_at BIGINT, finalizing_at BIGINT, completed_at BIGINT, failed_at BIGINT,
    expired_at BIGINT, cancelling_at BIGINT, cancelled_at BIGINT,
    total BIGINT NOT NULL, completed BIGINT NOT NULL, failed BIGINT NOT NULL);
CREATE INDEX batches_owner ON batches (owner, created_at);
CREATE INDEX batches_status ON batches (status);
CREATE TABLE batch_lines (
    batch_id TEXT NOT NULL, line BIGINT NOT NULL, custom_id TEXT, body TEXT,
    state TEXT NOT NULL, result TEXT, PRIMARY KEY (batch_id, line));
CREATE INDEX batch_lines_pending ON batch_lines (batch_id, state);
";

/// `(version, SQL)`, in order, from the column table: version 1 creates the
/// table with the columns it brought, each later version adds its own.
/// A version once released never changes what it does.
///
/// Version 1: the SQLite ledger's columns with PostgreSQL's types (INTEGER
/// becomes BIGINT, REAL DOUBLE PRECISION, as PostgreSQL's REAL is 4 bytes);
/// flags stay 0/1 integers so report SQL means the same in both databases.
/// `(writer_id, seq)` names a row across retries: a batch retried after a
/// COMMIT whose answer was lost inserts nothing twice.
fn migrations() -> Vec<(i32, String)> {
    let newest = COLUMNS
        .iter()
        .map(|c| c.postgres_version)
        .chain(EXTRAS.iter().map(|(version, _)| *version))
        .max()
        .unwrap_or(1);
    (1..=newest)
        .map(|version| {
            let columns = COLUMNS
                .iter()
                .filter(|c| c.postgres_version == version)
                .map(|c| definition(c, true));
            let sql = if version == 1 {
                let columns: Vec<String> = columns.collect();
                format!(
                    "CREATE TABLE requests (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        writer_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        {},
        UNIQUE (writer_id, seq)
    );
    CREATE INDEX requests_ts ON requests (ts_ms);",
                    columns.join(",\n        ")
                )
            } else {
                columns
                    .map(|c| format!("ALTER TABLE requests ADD COLUMN {c};"))
                    .chain(
                        EXTRAS
                            .iter()
                            .filter(|(v, _)| *v == version)
                            .map(|(_, sql)| (*sql).to_owned()),
                    )
                    .collect::<Vec<_>>()
                    .join("\n")
            };
            (version, sql)
        })
        .collect()
}

/// Applies every version not yet applied, each once across all replicas.
pub async fn apply(pool: &Pool) -> anyhow::Result<()> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS switchyard_schema (
            version INTEGER PRIMARY KEY,
            applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )",
    )
    .await?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM switchyard_schema", &[])
        .await?
        .iter()
        .map(|row| row.get(0))
        .collect();
    let migrations = migrations();
    for (version, sql) in &migrations {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .map_err(|err| anyhow::anyhow!("schema version {version}: {err}"))?;
        tx.execute(
            "INSERT INTO switchyard_schema (version) VALUES ($1)",
            &[version],
        )
        .await?;
        tracing::info!(version, "ledger schema version applied");
    }
    if let Some(newest) = applied.iter().max()
        && *newest > migrations.len() as i32
    {
        anyhow::bail!(
            "the database has ledger schema version {newest}, newer than this build knows ({}): run the newer build",
            migrations.len()
        );
    }
    tx.commit().await?;
    Ok(())
}
