//! The ledger: one durable row per request, cloud and local alike, in SQLite
//! (WAL). Rows go to a writer thread over a bounded channel: when it is
//! full, requests wait rather than drop rows. Rows are committed in groups
//! (every `flush`, or at once in strict mode, where the caller waits for the
//! commit), and everything queued is written before the process exits.

mod report;
mod row;
mod schema;
mod writer;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use report::{Dimension, SpendLine, SpendReport, now_ms, spend_report, spend_since};
pub use row::{Drafts, LedgerRow};
use switchyard_policies::{Durability, LedgerSettings};
use tokio::sync::{Notify, mpsc, oneshot};

/// What goes to the writer: a row and, in strict mode, who waits for it.
struct Entry {
    row: LedgerRow,
    committed: Option<oneshot::Sender<()>>,
}

pub struct Ledger {
    sender: Mutex<Option<mpsc::Sender<Entry>>>,
    strict: bool,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Rows handed to background tasks and not yet queued.
    detached: AtomicUsize,
    detached_done: Notify,
}

impl Ledger {
    /// Opens (creating) the database and starts the writer thread.
    pub fn open(settings: &LedgerSettings) -> anyhow::Result<Arc<Ledger>> {
        let conn = schema::open(&settings.path)?;
        schema::apply_retention(&conn, settings.retention_days)?;
        let (sender, receiver) = mpsc::channel(settings.queue);
        let strict = settings.durability == Durability::Strict;
        let (flush, retention_days) = (settings.flush, settings.retention_days);
        let writer = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || {
                writer::run(
                    conn,
                    receiver,
                    if strict { Duration::ZERO } else { flush },
                    retention_days,
                )
            })?;
        Ok(Arc::new(Ledger {
            sender: Mutex::new(Some(sender)),
            strict,
            writer: Mutex::new(Some(writer)),
            detached: AtomicUsize::new(0),
            detached_done: Notify::new(),
        }))
    }

    fn sender(&self) -> Option<mpsc::Sender<Entry>> {
        self.sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues a row, waiting while the queue is full; in strict mode, also
    /// until the row is committed.
    pub async fn write(&self, row: LedgerRow) {
        let Some(sender) = self.sender() else {
            tracing::error!(?row, "ledger closed; row not written");
            return;
        };
        let (committed, wait) = if self.strict {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        if sender.send(Entry { row, committed }).await.is_err() {
            tracing::error!("ledger writer stopped; row not written");
            return;
        }
        if let Some(wait) = wait {
            let _ = wait.await;
        }
    }

    /// Writes a row from code that cannot wait (a dropped stream): a task
    /// does the waiting, and `close` waits for such tasks.
    pub fn write_detached(self: &Arc<Self>, row: LedgerRow) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside a runtime nothing awaits: block this thread instead.
            if let Some(sender) = self.sender() {
                let _ = sender.blocking_send(Entry {
                    row,
                    committed: None,
                });
            }
            return;
        };
        self.detached.fetch_add(1, Ordering::AcqRel);
        let ledger = self.clone();
        runtime.spawn(async move {
            ledger.write(row).await;
            if ledger.detached.fetch_sub(1, Ordering::AcqRel) == 1 {
                ledger.detached_done.notify_waiters();
            }
        });
    }

    /// Writes everything queued and stops the writer. Later writes are logged
    /// and dropped.
    pub async fn close(&self) {
        // Rows from requests that just ended may still be on their way.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.detached.load(Ordering::Acquire) > 0 {
            let notified = self.detached_done.notified();
            if self.detached.load(Ordering::Acquire) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                tracing::error!("ledger rows still in flight at shutdown");
                break;
            }
        }
        drop(self.sender.lock().unwrap_or_else(|p| p.into_inner()).take());
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(writer) = writer {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }
}
