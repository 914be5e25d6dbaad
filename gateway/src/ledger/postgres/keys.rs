//! Keys made through the admin API, in PostgreSQL (`ledger::keys` has the
//! tables and the SQL, the same as SQLite's).

use crate::ledger::keys::{
    AUDIT, AUDIT_OF, AuditEntry, FINGERPRINT, LOAD, StoredKey, UPSERT, Write, audit_entry,
    stored_key,
};
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
                stored_key((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    r.try_get(2)?,
                    r.try_get(3)?,
                    r.try_get(4)?,
                    r.try_get(5)?,
                    r.try_get(6)?,
                ))
            })
            .collect()
    })?
}

pub fn put(
    postgres: &Postgres,
    key: &StoredKey,
    audit: &AuditEntry,
    how: Write,
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
                    &how.expected_version(),
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

pub fn fingerprint(postgres: &Postgres) -> anyhow::Result<i64> {
    let pool = postgres.pool().clone();
    postgres.run(async move {
        let client = pool.get().await?;
        anyhow::Ok(client.query_one(FINGERPRINT, &[]).await?.try_get(0)?)
    })?
}

pub fn audit(postgres: &Postgres, name: &str) -> anyhow::Result<Vec<AuditEntry>> {
    let pool = postgres.pool().clone();
    let name = name.to_owned();
    postgres.run(async move {
        let client = pool.get().await?;
        client
            .query(AUDIT_OF, &[&name])
            .await?
            .iter()
            .map(|r| {
                audit_entry((
                    r.try_get(0)?,
                    r.try_get(1)?,
                    r.try_get(2)?,
                    r.try_get(3)?,
                    r.try_get(4)?,
                ))
            })
            .collect()
    })?
}
