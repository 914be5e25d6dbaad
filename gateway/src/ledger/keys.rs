//! Keys made through the admin API, kept beside the ledger's rows (the
//! SQLite file, or PostgreSQL shared by replicas): each key's `auth.keys[]`
//! entry as JSON (its hash, never the key), when it was made, changed,
//! revoked and when it expires; and an audit trail of every change: when,
//! who, what. The audit trail's last id is also the store's version, which
//! replicas compare to notice another's change.

use rusqlite::{Connection, params};
use serde::Serialize;

/// One stored key.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StoredKey {
    pub name: String,
    /// The `auth.keys[]` entry, its `hash` included.
    pub spec: serde_json::Value,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
}

/// One change to the stored keys.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditEntry {
    pub ts_ms: i64,
    /// Who made it: the credential used and the client it came from.
    pub actor: String,
    /// `create`, `update`, `rotate` or `revoke`.
    pub action: String,
    pub name: String,
    /// What changed (fields as sent; a secret never).
    pub detail: serde_json::Value,
}

/// The tables, in SQLite's words.
pub const SQLITE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    revoked_ms INTEGER
);
CREATE TABLE IF NOT EXISTS key_audit (
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    name TEXT NOT NULL,
    detail TEXT NOT NULL
);
";

/// The tables, in PostgreSQL's words (schema version 3).
pub const POSTGRES_TABLES: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    revoked_ms BIGINT
);
CREATE TABLE IF NOT EXISTS key_audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    name TEXT NOT NULL,
    detail TEXT NOT NULL
);
";

/// Writes a key: a new name always; over a stored one only when `$7`
/// (a change to it) or when that one was revoked (a name made again).
pub(crate) const UPSERT: &str =
    "INSERT INTO api_keys (name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms)
     VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, created_ms = excluded.created_ms,
       updated_ms = excluded.updated_ms, expires_at_ms = excluded.expires_at_ms,
       revoked_ms = excluded.revoked_ms
     WHERE $7 OR api_keys.revoked_ms IS NOT NULL";
pub(crate) const AUDIT: &str =
    "INSERT INTO key_audit (ts_ms, actor, action, name, detail) VALUES ($1, $2, $3, $4, $5)";
pub(crate) const LOAD: &str = "SELECT name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms FROM api_keys ORDER BY name";
pub(crate) const VERSION: &str = "SELECT COALESCE(MAX(id), 0) FROM key_audit";
pub(crate) const AUDIT_LIST: &str =
    "SELECT ts_ms, actor, action, name, detail FROM key_audit ORDER BY id DESC LIMIT 1000";

/// SQLite's `?N` for PostgreSQL's `$N`.
fn sqlite(sql: &str) -> String {
    sql.replace('$', "?")
}

pub fn sqlite_load(conn: &Connection) -> anyhow::Result<Vec<StoredKey>> {
    let mut statement = conn.prepare(&sqlite(LOAD))?;
    let rows = statement.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ))
    })?;
    rows.map(|row| {
        let (name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms) = row?;
        Ok(StoredKey {
            name,
            spec: serde_json::from_str(&spec)?,
            created_ms,
            updated_ms,
            expires_at_ms,
            revoked_ms,
        })
    })
    .collect()
}

/// Writes `key` and its audit entry in one transaction; `false` (and
/// nothing written) when a new key's name is taken.
pub fn sqlite_put(
    conn: &mut Connection,
    key: &StoredKey,
    audit: &AuditEntry,
    overwrite: bool,
) -> anyhow::Result<bool> {
    let tx = conn.transaction()?;
    let written = tx.execute(
        &sqlite(UPSERT),
        params![
            key.name,
            key.spec.to_string(),
            key.created_ms,
            key.updated_ms,
            key.expires_at_ms,
            key.revoked_ms,
            overwrite
        ],
    )?;
    if written == 0 {
        return Ok(false);
    }
    tx.execute(
        &sqlite(AUDIT),
        params![
            audit.ts_ms,
            audit.actor,
            audit.action,
            audit.name,
            audit.detail.to_string()
        ],
    )?;
    tx.commit()?;
    Ok(true)
}

pub fn sqlite_version(conn: &Connection) -> anyhow::Result<i64> {
    Ok(conn.query_row(VERSION, [], |r| r.get(0))?)
}

pub fn sqlite_audit(conn: &Connection) -> anyhow::Result<Vec<AuditEntry>> {
    let mut statement = conn.prepare(AUDIT_LIST)?;
    let rows = statement.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    rows.map(|row| {
        let (ts_ms, actor, action, name, detail) = row?;
        Ok(AuditEntry {
            ts_ms,
            actor,
            action,
            name,
            detail: serde_json::from_str(&detail)?,
        })
    })
    .collect()
}
