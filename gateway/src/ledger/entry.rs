//! What the ledger's writers (SQLite and PostgreSQL) take from the queue and
//! report back: the entry, the writer's health, and whether a strict row
//! was committed.

use tokio::sync::oneshot;

use crate::ledger::row::LedgerRow;

/// What goes to the writer: a row and, in strict mode, who waits for it
/// (told whether the row was committed).
pub struct Entry {
    pub row: LedgerRow,
    pub committed: Option<oneshot::Sender<bool>>,
    /// When the row was handed to the writer: its commit lag starts here.
    pub queued: std::time::Instant,
}

/// How the writer keeps up, for `/metrics`.
#[derive(Debug)]
pub struct WriterHealth {
    /// From a row's handing to the writer to its commit.
    pub commit_lag: prometheus_client::metrics::histogram::Histogram,
    /// Rows whose commit failed twice (logged whole).
    pub lost: prometheus_client::metrics::counter::Counter,
}

impl WriterHealth {
    pub(crate) fn new() -> Self {
        WriterHealth {
            // 1 ms to about 33 s.
            commit_lag: prometheus_client::metrics::histogram::Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.001, 2.0, 16),
            ),
            lost: Default::default(),
        }
    }
}

/// A row that strict durability required committed was not: the request
/// it records must not be answered as a success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotCommitted;

/// Where a row stands once `Ledger::write` is done with it: committed (in
/// strict mode) or queued for the next group commit.
pub type Written = Result<(), NotCommitted>;
