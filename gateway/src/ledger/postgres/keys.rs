//! Keys made through the admin API, in PostgreSQL (`ledger::keys` has the
//! tables and the SQL, the same as SQLite's).

use crate::ledger::keys::{AUDIT, AUDIT_LIST, AuditEntry, LOAD, StoredKey, UPSERT, VERSION};
use crate::ledger::postgres::Postgres;

pub fn load(postgres: &Postgres) -> anyhow::Result<Vec<StoredKey>> {
    let pool = postgres.pool().clone();
    postgres.run(async move {
        let client = pool.get().await?;
        client
            .query(LOAD, &[])
            .await?
            .iter()
            .map(|r| {
                Ok(StoredKey {
                    name: r.try_get(0)?,
                    spec: serde_json::from_str(r.try_get::<_, &str>(1)?)?,
                    created_ms: r.try_get(2)?,
                    updated_ms: r.try_get(3)?,
                    expires_at_ms: r.try_get(4)?,
                    revoked_ms: r.try_get(5)?,
                })
            })
            .collect()
    })?
}

pub fn put(
    postgres: &Postgres,
    key: &StoredKey,
    audit: &AuditEntry,
    overwrite: bool,
) -> anyhow::Result<bool> {
    let pool = postgres.pool().clone();
    let (key, audit) = (key.clone(), audit.clone());
    postgres.run(async move {
        let mut client = pool.get().await?;
        let tx = client.transaction().await?;
        let written = tx
            .execute(
                UPSERT,
                &[
                    &key.name,
                    &key.spec.to_string(),
                    &key.created_ms,
                    &key.updated_ms,
                    &key.expires_at_ms,
                    &key.revoked_ms,
                    &overwrite,
                ],
            )
            .await?;
        if written == 0 {
            return Ok(false);
        }
        tx.execute(
            AUDIT,
            &[
                &audit.ts_ms,
                &audit.actor,
                &audit.action,
                &audit.name,
                &audit.detail.to_string(),
            ],
        )
        .await?;
        tx.commit().await?;
        anyhow::Ok(true)
    })?
}

pub fn version(postgres: &Postgres) -> anyhow::Result<i64> {
    let pool = postgres.pool().clone();
    postgres.run(async move {
        let client = pool.get().await?;
        anyhow::Ok(client.query_one(VERSION, &[]).await?.try_get(0)?)
    })?
}

pub fn audit(postgres: &Postgres) -> anyhow::Result<Vec<AuditEntry>> {
    let pool = postgres.pool().clone();
    postgres.run(async move {
        let client = pool.get().await?;
        client
            .query(AUDIT_LIST, &[])
            .await?
            .iter()
            .map(|r| {
                Ok(AuditEntry {
                    ts_ms: r.try_get(0)?,
                    actor: r.try_get(1)?,
                    action: r.try_get(2)?,
                    name: r.try_get(3)?,
                    detail: serde_json::from_str(r.try_get::<_, &str>(4)?)?,
                })
            })
            .collect()
    })?
}
