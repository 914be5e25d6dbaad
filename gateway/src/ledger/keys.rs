//! Keys made through the admin API, kept beside the ledger's rows (the
//! SQLite file, or PostgreSQL shared by replicas): each key's `auth.keys[]`
//! entry as JSON (its hash, never the key), when it was made, changed,
//! revoked and when it expires, and its version; and an audit trail of
//! every change: when, who, what.
//!
//! A change is written only over the version it was made from, so two
//! changes at once cannot undo each other (a rotation or a revocation is
//! never lost to a concurrent edit). The store's fingerprint (rows plus
//! the sum of their versions) moves with every committed change and only
//! then: replicas compare it to notice another's change.

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
    /// 1 when made, one more with every change.
    pub version: i64,
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

/// How a write may land.
#[derive(Debug, Clone, Copy)]
pub enum Write {
    /// A new key: only where no key of its name is, or one was revoked.
    Create,
    /// A change to the key as read at this version, not revoked since.
    Change { from_version: i64 },
}

impl Write {
    /// The upsert's condition parameter: the version a change was made
    /// from, or -1 for a new key.
    pub(crate) fn expected_version(self) -> i64 {
        match self {
            Write::Create => -1,
            Write::Change { from_version } => from_version,
        }
    }
}

/// The tables, in SQLite's words.
pub const SQLITE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL,
    expires_at_ms INTEGER,
    revoked_ms INTEGER,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS key_audit (
    id INTEGER PRIMARY KEY,
    ts_ms INTEGER NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    name TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS key_audit_name ON key_audit (name);
";

/// The tables, in PostgreSQL's words (schema version 3).
pub const POSTGRES_TABLES: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    updated_ms BIGINT NOT NULL,
    expires_at_ms BIGINT,
    revoked_ms BIGINT,
    version BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS key_audit (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms BIGINT NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    name TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS key_audit_name ON key_audit (name);
";

/// Writes a key as [`Write`] allows (`$7`: its `expected_version`); nothing is
/// written otherwise.
pub(crate) const UPSERT: &str =
    "INSERT INTO api_keys (name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms, version)
     VALUES ($1, $2, $3, $4, $5, $6, 1)
     ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, created_ms = excluded.created_ms,
       updated_ms = excluded.updated_ms, expires_at_ms = excluded.expires_at_ms,
       revoked_ms = excluded.revoked_ms, version = api_keys.version + 1
     WHERE (api_keys.version = $7 AND api_keys.revoked_ms IS NULL)
        OR ($7 < 0 AND api_keys.revoked_ms IS NOT NULL)";
pub(crate) const AUDIT: &str =
    "INSERT INTO key_audit (ts_ms, actor, action, name, detail) VALUES ($1, $2, $3, $4, $5)";
pub(crate) const LOAD: &str =
    "SELECT name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms, version
     FROM api_keys ORDER BY name";
/// Grows with every committed change, and only then.
pub(crate) const FINGERPRINT: &str =
    "SELECT CAST(COUNT(*) + COALESCE(SUM(version), 0) AS BIGINT) FROM api_keys";
pub(crate) const AUDIT_OF: &str = "SELECT ts_ms, actor, action, name, detail FROM key_audit WHERE name = $1 ORDER BY id DESC LIMIT 1000";

/// SQLite's `?N` for PostgreSQL's `$N`.
fn sqlite(sql: &str) -> String {
    sql.replace('$', "?")
}

/// A stored key from its row's columns (in [`LOAD`]'s order).
pub(crate) fn stored_key(
    (name, spec, created_ms, updated_ms, expires_at_ms, revoked_ms, version): (
        String,
        String,
        i64,
        i64,
        Option<i64>,
        Option<i64>,
        i64,
    ),
) -> anyhow::Result<StoredKey> {
    Ok(StoredKey {
        name,
        spec: serde_json::from_str(&spec)?,
        created_ms,
        updated_ms,
        expires_at_ms,
        revoked_ms,
        version,
    })
}

/// An audit entry from its row's columns (in [`AUDIT_OF`]'s order).
pub(crate) fn audit_entry(
    (ts_ms, actor, action, name, detail): (i64, String, String, String, String),
) -> anyhow::Result<AuditEntry> {
    Ok(AuditEntry {
        ts_ms,
        actor,
        action,
        name,
        detail: serde_json::from_str(&detail)?,
    })
}

pub fn sqlite_load(conn: &Connection) -> anyhow::Result<Vec<StoredKey>> {
    let mut statement = conn.prepare(&sqlite(LOAD))?;
    let rows = statement.query_map([], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
        ))
    })?;
    rows.map(|row| stored_key(row?)).collect()
}

/// Writes `key` (as `how` allows) and its audit entry in one transaction;
/// `false`, and nothing written, when it may not land.
pub fn sqlite_put(
    conn: &mut Connection,
    key: &StoredKey,
    audit: &AuditEntry,
    how: Write,
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
            how.expected_version()
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

/// Prepared once per connection: a connection kept open asks again and
/// again (see [`KeptConnection`]).
pub fn sqlite_fingerprint(conn: &Connection) -> anyhow::Result<i64> {
    Ok(conn
        .prepare_cached(FINGERPRINT)?
        .query_row([], |r| r.get(0))?)
}

/// A connection to a SQLite ledger kept from one look at the stored keys
/// to the next. The running config's watcher looks every two seconds,
/// and opening a connection each time cost SQLite a read of the whole
/// schema to prepare the query. Reopened when the ledger's path changes,
/// and after an error.
#[derive(Default)]
pub struct KeptConnection(Option<(String, Connection)>);

impl KeptConnection {
    pub fn fingerprint(&mut self, path: &str) -> anyhow::Result<i64> {
        let conn = match &mut self.0 {
            Some((kept, conn)) if kept == path => conn,
            _ => &mut self.0.insert((path.to_owned(), Connection::open(path)?)).1,
        };
        let read = sqlite_fingerprint(conn);
        if read.is_err() {
            self.0 = None;
        }
        read
    }
}

pub fn sqlite_audit(conn: &Connection, name: &str) -> anyhow::Result<Vec<AuditEntry>> {
    let mut statement = conn.prepare(&sqlite(AUDIT_OF))?;
    let rows = statement.query_map([name], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })?;
    rows.map(|row| audit_entry(row?)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(version: i64, revoked_ms: Option<i64>) -> StoredKey {
        StoredKey {
            name: "ci".into(),
            spec: serde_json::json!({"name": "ci", "hash": "sha256:00"}),
            created_ms: 1,
            updated_ms: 1,
            expires_at_ms: None,
            revoked_ms,
            version,
        }
    }

    fn audit() -> AuditEntry {
        AuditEntry {
            ts_ms: 1,
            actor: "admin key".into(),
            action: "test".into(),
            name: "ci".into(),
            detail: serde_json::json!({}),
        }
    }

    /// Two changes made from the same read: the second is refused, so it
    /// cannot undo the first (a revocation stays revoked); a revoked name
    /// can be made again; the fingerprint moves with every write.
    #[test]
    fn a_change_lands_only_on_the_version_it_was_made_from() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(SQLITE_TABLES).unwrap();
        let print = |conn: &Connection| sqlite_fingerprint(conn).unwrap();
        assert_eq!(print(&conn), 0);
        assert!(sqlite_put(&mut conn, &key(1, None), &audit(), Write::Create).unwrap());
        assert!(
            !sqlite_put(&mut conn, &key(1, None), &audit(), Write::Create).unwrap(),
            "name taken"
        );
        let after_create = print(&conn);
        // A revocation and an edit, both made from version 1.
        let revoke = Write::Change { from_version: 1 };
        assert!(sqlite_put(&mut conn, &key(1, Some(5)), &audit(), revoke).unwrap());
        assert!(
            !sqlite_put(&mut conn, &key(1, None), &audit(), revoke).unwrap(),
            "stale edit"
        );
        let stored = sqlite_load(&conn).unwrap();
        assert_eq!((stored[0].revoked_ms, stored[0].version), (Some(5), 2));
        assert!(print(&conn) > after_create);
        // Revoked: changes are refused, the name can be made again.
        let change = Write::Change { from_version: 2 };
        assert!(!sqlite_put(&mut conn, &key(2, None), &audit(), change).unwrap());
        assert!(sqlite_put(&mut conn, &key(1, None), &audit(), Write::Create).unwrap());
        assert_eq!(sqlite_load(&conn).unwrap()[0].revoked_ms, None);
        assert_eq!(
            sqlite_audit(&conn, "ci").unwrap().len(),
            3,
            "refused writes leave no audit"
        );
        assert!(sqlite_audit(&conn, "other").unwrap().is_empty());
    }

    /// A watcher's kept connection sees each change another connection
    /// commits, and follows the ledger to a new path.
    #[test]
    fn a_kept_connection_sees_every_later_change() {
        let dir = std::env::temp_dir().join(format!("switchyard-kept-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (first, second) = (dir.join("a.db"), dir.join("b.db"));
        let mut kept = KeptConnection::default();
        for path in [&first, &second] {
            let path = path.to_str().unwrap();
            let mut writer = crate::ledger::schema::open(path, false).unwrap();
            assert_eq!(kept.fingerprint(path).unwrap(), 0);
            assert!(sqlite_put(&mut writer, &key(1, None), &audit(), Write::Create).unwrap());
            let created = kept.fingerprint(path).unwrap();
            assert_eq!(created, sqlite_fingerprint(&writer).unwrap());
            let revoke = Write::Change { from_version: 1 };
            assert!(sqlite_put(&mut writer, &key(1, Some(5)), &audit(), revoke).unwrap());
            assert!(kept.fingerprint(path).unwrap() > created);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
