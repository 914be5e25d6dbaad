//! The ledger: one durable row per request, cloud and local alike, in SQLite
//! (WAL), or in PostgreSQL shared by replicas (`ledger.postgres`). Rows go
//! to a writer over a bounded channel: when it is full, requests wait
//! rather than drop rows. Rows are committed in groups
//! (every `flush`, or at once in strict mode, where the caller waits for the
//! commit), and everything queued is written before the process exits.

mod attainment;
mod batch_load;
pub mod columns;
mod compare;
mod drift;
mod entry;
pub mod keys;
mod postgres;
mod report;
mod requests;
mod row;
mod schema;
mod sessions;
mod stats;
mod writer;

use std::future::Ready;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use crate::ledger::attainment::{
    AttainmentDimension, AttainmentReport, attainment_lines, attainment_report, route_budgets,
};
pub use crate::ledger::batch_load::{BatchLoad, FirstTokens, batch_load};
pub use crate::ledger::compare::{
    CompareLine, CompareReport, ProfileLine, SideFigures, compare_report,
};
pub use crate::ledger::entry::{Entry, NotCommitted, Verdict, WITHHELD, WriterHealth, Written};
/// The keys made through the admin API, read where `settings` keep them,
/// without opening the ledger for writing (for the CLI; a running gateway
/// has `Ledger::stored_keys`).
pub fn read_stored_keys(settings: &LedgerSettings) -> anyhow::Result<Vec<keys::StoredKey>> {
    match &settings.postgres {
        Some(url) => postgres::keys::load(&*Postgres::connect_reader(url)?),
        None if std::path::Path::new(&settings.path).exists() => {
            keys::sqlite_load(&rusqlite::Connection::open(&settings.path)?)
        }
        None => Ok(Vec::new()),
    }
}

/// The spend report from PostgreSQL (`Ledger::spend_report` for a running ledger).
pub use crate::ledger::postgres::spend_report as postgres_spend_report;
/// Spend per key and team from PostgreSQL (`Ledger::spend_since` for a running ledger).
pub use crate::ledger::postgres::spend_since as postgres_spend_since;
pub use crate::ledger::postgres::{Postgres, snapshot};
pub use crate::ledger::report::{
    Dimension, SpendLine, SpendReport, now_ms, parse_since, spend_report, spend_since,
};
pub use crate::ledger::requests::{
    MAX_PAGE, RequestFilter, RequestLine, RequestLog, RequestRecord, SPAN_MS, StatusClass,
    request_log, request_record,
};
pub use crate::ledger::row::{BatchId, Drafts, LedgerRow, Shadowed, UPSTREAM_FAILURES};
pub use crate::ledger::sessions::{SessionLine, SessionsReport, sessions_report};
pub use crate::ledger::stats::{LedgerStats, Window, ledger_stats};
use futures_util::future::{BoxFuture, Either};
use switchyard_policies::{Durability, LedgerSettings, OnSpoolFull};
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, mpsc, oneshot};

/// Where `Ledger::write` got with a row before any waiting.
enum Queued {
    Now,
    /// The queue is full: the row waits with a sender of its own.
    Later(mpsc::Sender<Entry>, Entry),
    /// The writer has stopped.
    Lost(Entry),
}

/// The writer, on a thread of its own (SQLite) or a task on the pool's
/// runtime (PostgreSQL).
enum Writer {
    Sqlite(std::thread::JoinHandle<()>),
    Postgres(tokio::task::JoinHandle<()>),
}

/// Where rows are stored and reports read from.
enum Store {
    Sqlite {
        path: String,
    },
    Postgres {
        postgres: Arc<Postgres>,
        spool: Arc<postgres::Spool>,
        /// How long a strict request waits for its commit.
        strict_wait: Duration,
    },
}

pub struct Ledger {
    sender: Mutex<Option<mpsc::Sender<Entry>>>,
    strict: bool,
    writer: Mutex<Option<Writer>>,
    store: Store,
    /// Rows handed to background tasks and not yet queued.
    detached: AtomicUsize,
    detached_done: Notify,
    /// The queue's size: also how many rows may wait in background tasks.
    queue: usize,
    health: Arc<WriterHealth>,
}

impl Ledger {
    /// Opens (creating) the database and starts the writer thread.
    pub fn open(settings: &LedgerSettings) -> anyhow::Result<Arc<Ledger>> {
        if settings.postgres.is_some() {
            return Self::open_postgres(settings);
        }
        let strict = settings.durability == Durability::Strict;
        let conn = schema::open(&settings.path, strict)?;
        schema::apply_retention(&conn, settings.retention_days)?;
        let (sender, receiver) = mpsc::channel(settings.queue);
        let (flush, retention_days) = (settings.flush, settings.retention_days);
        let health = Arc::new(WriterHealth::new());
        let writer_health = health.clone();
        let writer = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || {
                if !strict {
                    writer::yield_to_requests();
                }
                writer::run(
                    conn,
                    receiver,
                    if strict { Duration::ZERO } else { flush },
                    retention_days,
                    &writer_health,
                )
            })?;
        Ok(Arc::new(Ledger {
            sender: Mutex::new(Some(sender)),
            strict,
            writer: Mutex::new(Some(Writer::Sqlite(writer))),
            store: Store::Sqlite {
                path: settings.path.clone(),
            },
            detached: AtomicUsize::new(0),
            detached_done: Notify::new(),
            queue: settings.queue,
            health,
        }))
    }

    /// Connects to PostgreSQL (applying the schema's migrations) and starts
    /// the spooling writer on the pool's runtime.
    fn open_postgres(settings: &LedgerSettings) -> anyhow::Result<Arc<Ledger>> {
        let Some(pg) = &settings.postgres else {
            anyhow::bail!("ledger.postgres is not set");
        };
        let strict = settings.durability == Durability::Strict;
        let postgres = Postgres::connect(pg)?;
        let spool = Arc::new(postgres::Spool::new(pg.spool_rows, pg.on_full));
        let (sender, receiver) = mpsc::channel(settings.queue);
        let health = Arc::new(WriterHealth::new());
        let writer = postgres.spawn(postgres::run_writer(
            postgres.pool().clone(),
            receiver,
            if strict {
                Duration::ZERO
            } else {
                settings.flush
            },
            spool.clone(),
            health.clone(),
        ));
        postgres.spawn(postgres::run_retention(
            postgres.pool().clone(),
            settings.retention_days,
        ));
        tracing::info!(
            url = %pg.url.redacted(),
            writer_id = %spool.writer_id,
            "ledger in PostgreSQL"
        );
        Ok(Arc::new(Ledger {
            sender: Mutex::new(Some(sender)),
            strict,
            writer: Mutex::new(Some(Writer::Postgres(writer))),
            store: Store::Postgres {
                postgres,
                spool,
                strict_wait: pg.strict_wait,
            },
            detached: AtomicUsize::new(0),
            detached_done: Notify::new(),
            queue: settings.queue,
            health,
        }))
    }

    /// The ledger's PostgreSQL pool, when the ledger is there: the batch
    /// store keeps its tables in the same database.
    pub fn postgres(&self) -> Option<Arc<Postgres>> {
        match &self.store {
            Store::Sqlite { .. } => None,
            Store::Postgres { postgres, .. } => Some(postgres.clone()),
        }
    }

    /// `sqlite` or `postgres`, for `/readyz`.
    pub fn store_name(&self) -> &'static str {
        match &self.store {
            Store::Sqlite { .. } => "sqlite",
            Store::Postgres { .. } => "postgres",
        }
    }

    /// Whether new requests are to be refused: PostgreSQL has been away
    /// long enough to fill the spool, and `on_full: refuse` says nothing is
    /// to be served unrecorded.
    pub fn refusing(&self) -> bool {
        match &self.store {
            Store::Sqlite { .. } => false,
            Store::Postgres { spool, .. } => {
                spool.on_full == OnSpoolFull::Refuse && spool.is_full()
            }
        }
    }

    /// Runs `read` on the ledger's rows since `since_ms`: on the SQLite file,
    /// or on a copy of PostgreSQL's rows from every replica. Blocks: call it
    /// off the async threads.
    pub fn read<R>(
        &self,
        since_ms: i64,
        read: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R>,
    ) -> anyhow::Result<R> {
        let mut conn = match &self.store {
            Store::Sqlite { path } => rusqlite::Connection::open(path)?,
            Store::Postgres { postgres, .. } => postgres::snapshot(postgres, since_ms)?,
        };
        Ok(read(&mut conn)?)
    }

    /// Runs `read` on one request's rows (`id`, the gateway's or, from
    /// `since_ms` on, the caller's own): on the SQLite file, or on a copy of
    /// them from PostgreSQL. Blocks: call it off the async threads.
    pub fn read_request<R>(
        &self,
        id: &str,
        since_ms: i64,
        read: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R>,
    ) -> anyhow::Result<R> {
        let mut conn = match &self.store {
            Store::Sqlite { path } => rusqlite::Connection::open(path)?,
            Store::Postgres { postgres, .. } => postgres::request_snapshot(postgres, id, since_ms)?,
        };
        Ok(read(&mut conn)?)
    }

    /// Every key made through the admin API, revoked ones too. Blocks.
    pub fn stored_keys(&self) -> anyhow::Result<Vec<keys::StoredKey>> {
        match &self.store {
            Store::Sqlite { path } => keys::sqlite_load(&rusqlite::Connection::open(path)?),
            Store::Postgres { postgres, .. } => postgres::keys::load(postgres),
        }
    }

    /// Writes a stored key and the audit entry of its change together, as
    /// `how` allows; `false` (nothing written) when it may not: a new
    /// key's name is taken, or the key changed since it was read. Blocks.
    pub fn put_key(
        &self,
        key: &keys::StoredKey,
        audit: &keys::AuditEntry,
        how: keys::Write,
    ) -> anyhow::Result<bool> {
        match &self.store {
            Store::Sqlite { path } => {
                let mut conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(Duration::from_secs(5))?;
                keys::sqlite_put(&mut conn, key, audit, how)
            }
            Store::Postgres { postgres, .. } => postgres::keys::put(postgres, key, audit, how),
        }
    }

    /// The stored keys' fingerprint: it moves with every committed change.
    /// A SQLite ledger is read through `kept`, so a caller that asks again
    /// and again (the running config's watcher) opens one connection, not
    /// one a look. Blocks.
    pub fn keys_fingerprint(&self, kept: &mut keys::KeptConnection) -> anyhow::Result<i64> {
        match &self.store {
            Store::Sqlite { path } => kept.fingerprint(path),
            Store::Postgres { postgres, .. } => postgres::keys::fingerprint(postgres),
        }
    }

    /// The last 1,000 changes to the stored key `name`, newest first. Blocks.
    pub fn key_audit(&self, name: &str) -> anyhow::Result<Vec<keys::AuditEntry>> {
        match &self.store {
            Store::Sqlite { path } => keys::sqlite_audit(&rusqlite::Connection::open(path)?, name),
            Store::Postgres { postgres, .. } => postgres::keys::audit(postgres, name),
        }
    }

    /// The spend report since `since_ms`, across all replicas when the
    /// ledger is in PostgreSQL (summed there). Blocks: call it off the
    /// async threads.
    pub fn spend_report(&self, since_ms: i64, by: Dimension) -> anyhow::Result<SpendReport> {
        match &self.store {
            Store::Sqlite { path } => Ok(spend_report(
                &rusqlite::Connection::open(path)?,
                since_ms,
                by,
            )?),
            Store::Postgres { postgres, .. } => postgres::spend_report(postgres, since_ms, by),
        }
    }

    /// Spend per key and team since `since_ms`, across all replicas when the
    /// ledger is in PostgreSQL: `(kind, name, cloud_usd, total_usd)` with
    /// kind `key` or `team`. Blocks: call it at start or off the async
    /// threads. Rows still in this process's queue or spool are not in it.
    pub fn spend_since(&self, since_ms: i64) -> anyhow::Result<Vec<(String, String, f64, f64)>> {
        match &self.store {
            Store::Sqlite { path } => {
                Ok(spend_since(&rusqlite::Connection::open(path)?, since_ms)?)
            }
            Store::Postgres { postgres, .. } => postgres::spend_since(postgres, since_ms),
        }
    }

    /// [`Ledger::spend_since`] from async code: the read runs on a blocking
    /// thread, so the caller's task only awaits it.
    pub async fn spend_since_async(
        self: &Arc<Self>,
        since_ms: i64,
    ) -> anyhow::Result<Vec<(String, String, f64, f64)>> {
        let ledger = self.clone();
        tokio::task::spawn_blocking(move || ledger.spend_since(since_ms)).await?
    }

    fn sender(&self) -> Option<mpsc::Sender<Entry>> {
        self.sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Queues a row; the future waits while the queue is full and, in strict
    /// mode, until the row is committed, and says whether it was (a row the
    /// writer could not take is not committed either). A row is queued here, before the
    /// future is polled, when the queue has room: the usual case then needs
    /// no waiting state, and the future is a few bytes rather than the row
    /// and a channel send (inline, that state would be part of, and copied
    /// with, every request's future).
    pub fn write(&self, row: LedgerRow) -> Either<Ready<Written>, BoxFuture<'static, Written>> {
        let (committed, wait) = if self.strict {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let limit = match &self.store {
            Store::Postgres { strict_wait, .. } => Some(*strict_wait),
            Store::Sqlite { .. } => None,
        };
        let verdict = (self.strict && limit.is_some()).then(|| Arc::new(Verdict::default()));
        let entry = Entry {
            row: Box::new(row),
            committed,
            verdict: verdict.clone(),
            queued: std::time::Instant::now(),
        };
        let queued = {
            let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
            match sender.as_ref() {
                None => Queued::Lost(entry),
                Some(sender) => match sender.try_send(entry) {
                    Ok(()) => Queued::Now,
                    Err(TrySendError::Full(entry)) => Queued::Later(sender.clone(), entry),
                    Err(TrySendError::Closed(entry)) => Queued::Lost(entry),
                },
            }
        };
        let committed = move |mut wait: oneshot::Receiver<bool>| async move {
            let answer = match (limit, verdict) {
                // PostgreSQL away: the caller is not kept waiting; its
                // answer is withheld and the row, spooled, lands later
                // saying so. Unless a commit attempt has the row already:
                // its outcome (within the writer's commit timeout) decides.
                (Some(limit), Some(verdict)) => {
                    match tokio::time::timeout(limit, &mut wait).await {
                        Ok(answer) => answer,
                        Err(_) if verdict.give_up() => Ok(false),
                        Err(_) => wait.await,
                    }
                }
                _ => wait.await,
            };
            match answer {
                Ok(true) => Ok(()),
                _ => Err(NotCommitted),
            }
        };
        match (queued, wait) {
            (Queued::Now, None) => Either::Left(std::future::ready(Ok(()))),
            (Queued::Now, Some(wait)) => Either::Right(Box::pin(committed(wait))),
            (Queued::Later(sender, entry), wait) => Either::Right(Box::pin(async move {
                if let Err(lost) = sender.send(entry).await {
                    tracing::error!(row = ?lost.0.row, "ledger writer stopped; row not written");
                    return Err(NotCommitted);
                }
                match wait {
                    Some(wait) => committed(wait).await,
                    None => Ok(()),
                }
            })),
            (Queued::Lost(entry), _) => {
                tracing::error!(row = ?entry.row, "ledger closed; row not written");
                Either::Left(std::future::ready(Err(NotCommitted)))
            }
        }
    }

    /// Whether a request waits for its row's commit before it is answered.
    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// Writes a row from code that cannot wait (a dropped stream): a task
    /// does the waiting, and `close` waits for such tasks.
    pub fn write_detached(self: &Arc<Self>, row: LedgerRow) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // Outside a runtime nothing awaits: block this thread instead.
            if let Some(sender) = self.sender() {
                let _ = sender.blocking_send(Entry::unwaited(row));
            }
            return;
        };
        if !self.backed_up() {
            self.spawn_counted(&runtime, move || Some(row));
            return;
        }
        // As many rows wait in tasks as the queue holds (the writer is
        // stuck: PostgreSQL away and the spool full under `refuse`, where
        // every refusal still has a row): one more task per row would grow
        // without bound. The row joins the queue if it has room, or is
        // logged whole and counted lost, as a full spool's rows are.
        let entry = Entry::unwaited(row);
        let refused = match self.sender() {
            Some(sender) => sender.try_send(entry).err().map(|err| err.into_inner()),
            None => Some(entry),
        };
        if let Some(entry) = refused {
            tracing::error!(row = ?entry.row, "ledger backed up (queue full and as many rows waiting): row not written");
            self.health.lost.inc();
        }
    }

    /// Whether as many rows already wait in background tasks as the queue
    /// holds: a caller that can wait should then write its row itself.
    pub fn backed_up(&self) -> bool {
        self.detached.load(Ordering::Acquire) >= self.queue
    }

    /// How the writer keeps up.
    pub fn health(&self) -> &WriterHealth {
        &self.health
    }

    /// Rows not yet committed by the writer: in its queue, waiting in
    /// background tasks to be queued, or (PostgreSQL) in its spool.
    pub fn pending(&self) -> usize {
        let queued = self.sender().map_or(0, |s| s.max_capacity() - s.capacity());
        let spooled = match &self.store {
            Store::Postgres { spool, .. } => spool.len.load(Ordering::Relaxed),
            Store::Sqlite { .. } => 0,
        };
        queued + spooled + self.detached.load(Ordering::Relaxed)
    }

    /// Runs `work` (a request's bookkeeping, ending in its row) once the
    /// reply is out, and writes the row; `close` waits for it as for a
    /// detached row. In an HTTP/1 connection's task it runs there, once
    /// hyper has handed the answer to the socket (`http::after_poll`: a task
    /// of its own woke an idle worker per request); elsewhere in a task of
    /// its own. Not for strict mode, whose caller waits for the commit.
    /// It runs inside the span it was queued in (the request's), so the
    /// request's log line (`switchyard::request`) carries the request's id.
    ///
    /// (A single long-lived task fed by a channel instead measured no
    /// cheaper under load, and slower at c=1.)
    pub fn after_reply(
        self: &Arc<Self>,
        work: impl FnOnce() -> Option<LedgerRow> + Send + 'static,
    ) {
        debug_assert!(!self.strict, "strict rows are written by their request");
        self.detached.fetch_add(1, Ordering::AcqRel);
        let detached = Detached(self.clone());
        let span = tracing::Span::current();
        let queued = crate::http::after_poll::queue(Box::new(move || {
            let _in_span = span.enter();
            let Some(row) = work() else { return };
            // A full queue: a task waits for room, the row still detached.
            if let Either::Right(later) = detached.0.write(row) {
                let waits = async move {
                    let _ = later.await;
                    drop(detached);
                };
                tokio::spawn(tracing::Instrument::instrument(waits, span.clone()));
            }
        }));
        if let Err(work) = queued {
            tokio::spawn(async move { work() });
        }
    }

    /// Spawns `work` and writes its row, counted in `detached` until then.
    fn spawn_counted(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        work: impl FnOnce() -> Option<LedgerRow> + Send + 'static,
    ) {
        self.detached.fetch_add(1, Ordering::AcqRel);
        let detached = Detached(self.clone());
        runtime.spawn(async move {
            if let Some(row) = work() {
                // Nobody waits on this row: a failed commit is logged by
                // the writer.
                let _ = detached.0.write(row).await;
            }
        });
    }

    fn detached_done(&self) {
        if self.detached.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.detached_done.notify_waiters();
        }
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
        match writer {
            Some(Writer::Sqlite(writer)) => {
                let _ = tokio::task::spawn_blocking(move || writer.join()).await;
            }
            Some(Writer::Postgres(writer)) => {
                // The writer gives up on an unreachable PostgreSQL 10 s after
                // the queue closes; rows still waiting to enter the queue
                // (the spool full) keep it open: stop waiting anyway.
                let finished = tokio::time::timeout(Duration::from_secs(30), writer).await;
                if finished.is_err() {
                    let left = self.pending();
                    tracing::error!(
                        rows = left,
                        "ledger: PostgreSQL away at shutdown; spooled rows lost"
                    );
                    self.health.lost.inc_by(left as u64);
                }
            }
            None => {}
        }
        if let Store::Postgres { postgres, .. } = &self.store {
            postgres.stop().await;
        }
    }
}

/// A row on its way to the queue, counted in `detached` until this drops
/// (also when the work making the row panics), so `close` waits for it.
struct Detached(Arc<Ledger>);

impl Drop for Detached {
    fn drop(&mut self) {
        self.0.detached_done();
    }
}
