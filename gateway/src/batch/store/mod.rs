//! Files and batches, kept durably: uploads and the files batches write,
//! each batch, and each of its lines with its state, so a batch in
//! progress resumes after a restart with every line answered once.
//!
//! In SQLite beside the ledger's file by default (`sqlite`), or in the
//! ledger's PostgreSQL database when the ledger is there (`postgres`),
//! where every replica sees the same files and batches and one replica at
//! a time runs them. Calls block: callers make them from blocking tasks.

mod postgres;
mod shape;
mod sqlite;

use std::sync::Arc;

use switchyard_policies::Config;

use crate::batch::store::postgres::Shared;
pub use crate::batch::store::shape::{
    BatchRow, FileRow, Line, Pending, STATES, Store, StoreResult, new_id,
};
use crate::batch::store::sqlite::Sqlite;

/// The store `config` names: the ledger's PostgreSQL database when the
/// ledger is there and `batches.path` is unset, else SQLite at
/// `batches.path` (beside the ledger's file by default). `ledger` is the
/// gateway's open ledger, whose connections a PostgreSQL store shares;
/// without it (the CLIs) the store connects on its own, to read.
pub fn open(
    config: &Config,
    ledger: Option<&crate::ledger::Ledger>,
) -> anyhow::Result<Arc<dyn Store>> {
    if let Some(settings) = in_postgres(config) {
        let postgres = match ledger.and_then(crate::ledger::Ledger::postgres) {
            Some(shared) => shared,
            None => crate::ledger::Postgres::connect_reader(settings)?,
        };
        return Ok(Arc::new(Shared::new(postgres)));
    }
    let path = config.batches.store_path(&config.ledger.path);
    let store = Sqlite::open(&path)
        .map_err(|e| anyhow::anyhow!("batches: cannot open {}: {e}", path.display()))?;
    Ok(Arc::new(store))
}

/// The ledger's PostgreSQL settings, when the batch store is there too:
/// the ledger is there, `batches.path` is unset, and no SQLite store is at
/// its default place. A gateway that kept batches in SQLite before it was
/// given a PostgreSQL ledger (or before batches moved there with it) goes
/// on with that file, so no batch under way is left behind and no file it
/// holds is lost; its log says how to move.
pub fn in_postgres(config: &Config) -> Option<&switchyard_policies::PostgresLedger> {
    let postgres = config.ledger.postgres.as_ref()?;
    if config.batches.path.is_some() {
        return None;
    }
    let existing = config.batches.store_path(&config.ledger.path);
    if existing.exists() {
        tracing::warn!(
            path = %existing.display(),
            "batches stay in this SQLite file beside the PostgreSQL ledger; once no batch is under way, \
             move it away to keep them in PostgreSQL, or set batches.path to keep it and silence this"
        );
        return None;
    }
    Some(postgres)
}
