//! OpenAI's Files and Batches API on the gateway's own backends: files
//! uploaded to `/v1/files`, batches of their lines created at
//! `/v1/batches`, each line routed like any request (under the `batch`
//! profile, behind interactive traffic in every backend's queue) by a
//! runner that resumes after a restart, and the answers written to an
//! output file and an error file.
//!
//! May import: dispatch (a line goes down the pipeline like a request),
//! ingress's endpoint types, admit (the key a batch runs as), state, http,
//! error, ledger.

pub mod api;
mod lines;
pub mod objects;
pub mod runner;
pub mod store;

use std::sync::Arc;

use switchyard_policies::{BatchSettings, Config};
use tokio::sync::Notify;

use crate::batch::store::Store;
pub use crate::batch::store::new_id;

/// The Files and Batches API's state: its store and settings, kept across
/// config reloads (like the ledger, they change at restart).
pub struct Batches {
    pub store: Arc<dyn Store>,
    pub settings: BatchSettings,
    /// Wakes the runner: a batch was created or cancelled.
    pub wake: Notify,
    /// Uploads, batch creations and file reads under way: each holds a
    /// whole file in memory (up to `max_file_bytes`, more than once while
    /// it is parsed and stored), so only a few run at once.
    pub heavy: tokio::sync::Semaphore,
}

/// Whole files in memory at once.
const HEAVY_AT_ONCE: usize = 2;

impl Batches {
    /// Opens the store `config` names ([`store::open`]), beside `ledger`.
    pub fn open(config: &Config, ledger: &crate::ledger::Ledger) -> anyhow::Result<Batches> {
        Ok(Batches {
            store: store::open(config, Some(ledger))?,
            settings: config.batches.clone(),
            wake: Notify::new(),
            heavy: tokio::sync::Semaphore::new(HEAVY_AT_ONCE),
        })
    }
}

/// Who owns files and batches: the caller's key, or `""` with auth off.
pub fn owner_of(caller: Option<&crate::admit::access::Caller>) -> String {
    caller.map_or_else(String::new, |c| c.key.name.clone())
}

/// Seconds since the epoch, as the API's timestamps are.
pub fn now_s() -> i64 {
    crate::ledger::now_ms() / 1000
}
