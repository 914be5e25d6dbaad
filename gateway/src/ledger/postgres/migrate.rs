//! The schema's versions, applied at start by whichever replica gets there
//! first. Every replica runs the same steps inside one transaction that
//! first takes a transaction-scoped advisory lock: replicas starting
//! together queue on the lock, and each finds the versions the one before
//! it applied (refinery reads the applied versions outside any lock, so
//! replicas starting together can both apply one).

use deadpool_postgres::Pool;

/// The advisory lock's key: any constant other software on the database
/// is unlikely to use (`switchya` in ASCII).
const LOCK_KEY: i64 = 0x7377_6974_6368_7961;

/// `(version, SQL)`, in order; a version once released never changes.
///
/// Version 1: the SQLite ledger's columns with PostgreSQL's types (INTEGER
/// becomes BIGINT, REAL DOUBLE PRECISION, as PostgreSQL's REAL is 4 bytes);
/// flags stay 0/1 integers so report SQL means the same in both databases.
/// `(writer_id, seq)` names a row across retries: a batch retried after a
/// COMMIT whose answer was lost inserts nothing twice.
const MIGRATIONS: &[(i32, &str)] = &[(
    1,
    "CREATE TABLE requests (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        writer_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        ts_ms BIGINT NOT NULL,
        request_id TEXT,
        key TEXT,
        team TEXT,
        route TEXT,
        backend TEXT NOT NULL,
        tier TEXT NOT NULL,
        profile TEXT,
        dialect TEXT NOT NULL,
        endpoint TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        cached_tokens BIGINT NOT NULL,
        cache_write_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        reasoning_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        counterfactual_usd DOUBLE PRECISION NOT NULL,
        ttft_ms DOUBLE PRECISION,
        predicted_ttft_ms DOUBLE PRECISION,
        decode_tokens_per_s DOUBLE PRECISION,
        duration_ms DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        reason TEXT NOT NULL,
        hedge INTEGER NOT NULL,
        fallback INTEGER NOT NULL,
        cache_hit INTEGER NOT NULL,
        estimated INTEGER NOT NULL,
        prompt_class TEXT,
        draft_tokens BIGINT,
        draft_accepted_tokens BIGINT,
        expected_cached_tokens BIGINT,
        refusal TEXT,
        client_request_id TEXT,
        service_tier TEXT,
        unpriced INTEGER,
        session TEXT,
        tool_results INTEGER,
        queued_ms DOUBLE PRECISION,
        UNIQUE (writer_id, seq)
    );
    CREATE INDEX requests_ts ON requests (ts_ms);",
)];

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
    for (version, sql) in MIGRATIONS {
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
        && *newest > MIGRATIONS.len() as i32
    {
        anyhow::bail!(
            "the database has ledger schema version {newest}, newer than this build knows ({}): run the newer build",
            MIGRATIONS.len()
        );
    }
    tx.commit().await?;
    Ok(())
}
