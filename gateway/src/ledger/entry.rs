//! What the ledger's writers (SQLite and PostgreSQL) take from the queue and
//! report back: the entry, the writer's health, and whether a strict row
//! was committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use tokio::sync::oneshot;

use crate::ledger::row::LedgerRow;

/// What goes to the writer: a row and, in strict mode, who waits for it
/// (told whether the row was committed).
pub struct Entry {
    /// Boxed: a row is over 600 bytes, and an entry is moved into the
    /// queue, out of it and into the writer's batch.
    pub row: Box<LedgerRow>,
    pub committed: Option<oneshot::Sender<bool>>,
    /// Strict mode with PostgreSQL: who decides the answer's fate, the
    /// writer's commit or the waiter's patience (see [`Verdict`]).
    pub verdict: Option<Arc<Verdict>>,
    /// When the row was handed to the writer: its commit lag starts here.
    pub queued: std::time::Instant,
}

impl Entry {
    /// A row nobody waits on (group durability, or a row written from code
    /// that cannot wait).
    pub fn unwaited(row: LedgerRow) -> Self {
        Entry {
            row: Box::new(row),
            committed: None,
            verdict: None,
            queued: std::time::Instant::now(),
        }
    }
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

/// The status of a row whose answer strict durability withheld: the call
/// was made (and is priced, as the provider bills it) but the client got
/// `ledger_not_committed` instead of the answer.
pub const WITHHELD: &str = "ledger_not_committed";

/// Settles, exactly once, whether a strict request's answer goes out, so
/// that its row says what the client got. The writer claims the row before
/// each commit attempt; a waiter out of patience withholds the answer only
/// if no attempt has claimed it, and otherwise waits for that attempt's
/// outcome (bounded by the writer's commit timeout). A row whose answer was
/// withheld is written later with the status [`WITHHELD`], never as `ok`.
#[derive(Debug, Default)]
pub struct Verdict(AtomicU8);

const PENDING: u8 = 0;
const CLAIMED: u8 = 1;
const WITHHELD_STATE: u8 = 2;

impl Verdict {
    /// The writer is about to commit the row: `false` when its answer was
    /// already withheld (the row must say so).
    pub fn claim(&self) -> bool {
        match self
            .0
            .compare_exchange(PENDING, CLAIMED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now == CLAIMED,
        }
    }

    /// The waiter gives up: `true` when no commit attempt has the row, so
    /// the answer is withheld; `false` when one does (wait for it).
    pub fn give_up(&self) -> bool {
        self.0
            .compare_exchange(PENDING, WITHHELD_STATE, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// A claimed commit attempt failed: the waiter is told so, and the
    /// row, committed some later time, must say the answer was withheld.
    pub fn withhold(&self) {
        self.0.store(WITHHELD_STATE, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_writer_and_waiter_decides() {
        let claimed = Verdict::default();
        assert!(claimed.claim());
        assert!(!claimed.give_up(), "a claimed row's attempt decides");
        assert!(claimed.claim(), "a retried attempt keeps its claim");
        let abandoned = Verdict::default();
        assert!(abandoned.give_up());
        assert!(
            !abandoned.claim(),
            "the row must say its answer was withheld"
        );
        claimed.withhold();
        assert!(!claimed.claim());
    }
}
