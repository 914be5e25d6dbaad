//! The PostgreSQL writer: a task that moves rows from the ledger's queue
//! into a bounded spool in memory and commits the spool's head in batches.
//! While PostgreSQL is away the batch stays at the head, retried with
//! backoff, and new rows gather behind it until the spool is full.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_postgres::Pool;
use switchyard_policies::OnSpoolFull;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_postgres::types::ToSql;

use crate::ledger::columns::{self, COLUMNS, Cell, Kind, cells};
use crate::ledger::{Entry, WITHHELD, WriterHealth};

/// Most rows in one INSERT: 40 arrays of 1,024 values, one statement.
const BATCH: usize = 1024;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// A batch that takes longer than this is counted failed and retried
/// (`ON CONFLICT` makes a retry safe whatever the first try did).
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// After the queue closes (shutdown), how long the spool keeps trying to
/// reach PostgreSQL before what is left is logged and counted lost.
const CLOSING_GRACE: Duration = Duration::from_secs(10);

/// The spool's state, shared with the ledger for `pending`, refusals and
/// metrics.
pub struct Spool {
    /// Rows taken from the queue and not yet committed.
    pub len: AtomicUsize,
    pub capacity: usize,
    pub on_full: OnSpoolFull,
    /// Names this process's rows: with `seq`, a row's key across retries.
    pub writer_id: String,
}

impl Spool {
    pub fn new(capacity: usize, on_full: OnSpoolFull) -> Self {
        Spool {
            len: AtomicUsize::new(0),
            capacity,
            on_full,
            writer_id: uuid::Builder::from_random_bytes(rand::random())
                .into_uuid()
                .to_string(),
        }
    }

    pub fn is_full(&self) -> bool {
        self.len.load(Ordering::Relaxed) >= self.capacity
    }
}

/// Rows waiting for their commit, each with its sequence number. The
/// spool's length follows every change at once: a row just taken off the
/// queue must not look written to `pending`.
struct Waiting {
    rows: VecDeque<(i64, Entry)>,
    next_seq: i64,
    spool: Arc<Spool>,
}

impl Waiting {
    fn push(&mut self, entry: Entry) {
        self.rows.push_back((self.next_seq, entry));
        self.next_seq += 1;
        self.spool.len.store(self.rows.len(), Ordering::Relaxed);
    }

    /// Takes the first `n` rows out (committed, or given up).
    fn take_first(&mut self, n: usize) -> Vec<(i64, Entry)> {
        let taken = self.rows.drain(..n).collect();
        self.spool.len.store(self.rows.len(), Ordering::Relaxed);
        taken
    }
}

/// Runs until the queue is closed and the spool is empty (or, PostgreSQL
/// still away, `CLOSING_GRACE` after the close). `window`: how long a batch
/// gathers rows after its first (zero in strict mode).
pub async fn run(
    pool: Pool,
    mut receiver: mpsc::Receiver<Entry>,
    window: Duration,
    spool: Arc<Spool>,
    health: Arc<WriterHealth>,
) {
    let mut waiting = Waiting {
        rows: VecDeque::new(),
        next_seq: 0,
        spool: spool.clone(),
    };
    let mut open = true;
    let mut backoff = FIRST_BACKOFF;
    let mut closed_at: Option<Instant> = None;
    loop {
        if waiting.rows.is_empty() {
            if !open {
                break;
            }
            match receiver.recv().await {
                Some(entry) => waiting.push(entry),
                None => {
                    open = false;
                    continue;
                }
            }
            let deadline = Instant::now() + window;
            while open && waiting.rows.len() < BATCH.min(spool.capacity) {
                match tokio::time::timeout_at(deadline, receiver.recv()).await {
                    Ok(Some(entry)) => waiting.push(entry),
                    Ok(None) => open = false,
                    Err(_) => break,
                }
            }
        }
        // Under `refuse` a full spool leaves rows in the queue (their
        // requests wait); under `serve` they are taken and dropped.
        while open && (waiting.rows.len() < spool.capacity || spool.on_full == OnSpoolFull::Serve) {
            match receiver.try_recv() {
                Ok(entry) => take(&mut waiting, entry, &spool, &health),
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => open = false,
            }
        }
        match commit_head(&pool, &mut waiting, &health).await {
            Ok(()) => {
                if backoff > FIRST_BACKOFF {
                    tracing::info!(spooled = waiting.rows.len(), "ledger: PostgreSQL is back");
                }
                backoff = FIRST_BACKOFF;
            }
            Err(err) => {
                tracing::warn!(
                    error = %format_args!("{err:#}"),
                    spooled = waiting.rows.len(),
                    retry_in_ms = backoff.as_millis() as u64,
                    "ledger: PostgreSQL commit failed; rows stay in the spool"
                );
                if !open {
                    let since = *closed_at.get_or_insert_with(Instant::now);
                    if since.elapsed() >= CLOSING_GRACE {
                        let all = waiting.rows.len();
                        give_up(waiting.take_first(all), &health);
                        return;
                    }
                }
                // Keep taking rows while waiting, as far as the spool holds.
                let until = Instant::now() + backoff;
                loop {
                    let room =
                        waiting.rows.len() < spool.capacity || spool.on_full == OnSpoolFull::Serve;
                    tokio::select! {
                        _ = tokio::time::sleep_until(until) => break,
                        entry = receiver.recv(), if open && room => match entry {
                            Some(entry) => take(&mut waiting, entry, &spool, &health),
                            None => open = false,
                        },
                    }
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
    spool.len.store(0, Ordering::Relaxed);
}

/// Commits the spool's head batch. A batch PostgreSQL rejects for its data
/// (not for being away) is retried row by row, and a row rejected alone is
/// logged whole and counted lost: one bad row must not hold up the ledger.
async fn commit_head(
    pool: &Pool,
    waiting: &mut Waiting,
    health: &WriterHealth,
) -> anyhow::Result<()> {
    let n = waiting.rows.len().min(BATCH);
    let writer_id = waiting.spool.writer_id.clone();
    claim(waiting.rows.range_mut(..n));
    match commit_within(pool, &writer_id, waiting.rows.range(..n)).await {
        Ok(()) => {
            committed(waiting.take_first(n), health);
            return Ok(());
        }
        Err(err) if !rejected(&err) => {
            withhold(waiting.rows.range_mut(..n));
            return Err(err);
        }
        Err(err) => {
            tracing::warn!(error = %format_args!("{err:#}"), rows = n, "ledger: batch rejected; writing its rows one by one")
        }
    }
    for _ in 0..n {
        match commit_within(pool, &writer_id, waiting.rows.range(..1)).await {
            Ok(()) => committed(waiting.take_first(1), health),
            Err(err) if rejected(&err) => {
                for (_, entry) in waiting.take_first(1) {
                    tracing::error!(error = %format_args!("{err:#}"), row = ?entry.row, "ledger: row rejected by PostgreSQL; not written");
                    health.lost.inc();
                    if let Some(waiter) = entry.committed {
                        let _ = waiter.send(false);
                    }
                }
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

/// [`commit`], bounded in time.
async fn commit_within<'a>(
    pool: &Pool,
    writer_id: &str,
    batch: impl Iterator<Item = &'a (i64, Entry)> + Clone,
) -> anyhow::Result<()> {
    tokio::time::timeout(COMMIT_TIMEOUT, commit(pool, writer_id, batch))
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no answer in {COMMIT_TIMEOUT:?}")))
}

/// Whether PostgreSQL refused the statement for the data in it (SQLSTATE
/// classes 22, data exception, and 23, integrity constraint), which no
/// retry would change; anything else (a connection lost, the server
/// shutting down, a missing table) is waited out.
fn rejected(err: &anyhow::Error) -> bool {
    err.downcast_ref::<tokio_postgres::Error>()
        .and_then(tokio_postgres::Error::code)
        .is_some_and(|code| matches!(&code.code()[..2], "22" | "23"))
}

/// Claims the strict rows about to be committed (see [`Verdict`]); a row
/// whose answer its waiter already withheld is written saying so.
///
/// [`Verdict`]: crate::ledger::Verdict
fn claim<'a>(rows: impl Iterator<Item = &'a mut (i64, Entry)>) {
    for (_, entry) in rows {
        if entry.verdict.as_ref().is_some_and(|v| !v.claim()) {
            entry.row.status = WITHHELD;
        }
    }
}

/// A commit attempt failed with PostgreSQL away: the strict rows in it have
/// their answers withheld now (their waiters are told), and stay in the
/// spool to land later saying so.
fn withhold<'a>(rows: impl Iterator<Item = &'a mut (i64, Entry)>) {
    for (_, entry) in rows {
        let Some(verdict) = &entry.verdict else {
            continue;
        };
        verdict.withhold();
        entry.row.status = WITHHELD;
        if let Some(waiter) = entry.committed.take() {
            let _ = waiter.send(false);
        }
    }
}

/// Tells the waiters of rows just committed.
fn committed(rows: Vec<(i64, Entry)>, health: &WriterHealth) {
    for (_, entry) in rows {
        health
            .commit_lag
            .observe(entry.queued.elapsed().as_secs_f64());
        if let Some(waiter) = entry.committed {
            let _ = waiter.send(true);
        }
    }
}

/// Spools `entry`, or, the spool full under `on_full: serve`, drops it:
/// logged whole and counted lost, so it can be entered by hand.
fn take(waiting: &mut Waiting, entry: Entry, spool: &Spool, health: &WriterHealth) {
    if waiting.rows.len() < spool.capacity {
        waiting.push(entry);
        return;
    }
    tracing::error!(row = ?entry.row, "ledger spool full (PostgreSQL away): row not written");
    health.lost.inc();
    if let Some(waiter) = entry.committed {
        let _ = waiter.send(false);
    }
}

fn give_up(rows: Vec<(i64, Entry)>, health: &WriterHealth) {
    tracing::error!(
        rows = ?rows.iter().map(|(_, e)| &e.row).collect::<Vec<_>>(),
        "ledger: PostgreSQL still away at shutdown; rows lost"
    );
    health.lost.inc_by(rows.len() as u64);
    for (_, entry) in rows {
        if let Some(waiter) = entry.committed {
            let _ = waiter.send(false);
        }
    }
}

/// One INSERT of a whole batch: an array per column, unnested into rows,
/// the columns and their array types from the column table.
static INSERT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let arrays: Vec<String> = COLUMNS
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let kind = match column.kind {
                Kind::Int => "bigint",
                Kind::Real => "float8",
                Kind::Text => "text",
                Kind::Flag => "int",
            };
            format!("${}::{kind}[]", i + 3)
        })
        .collect();
    format!(
        "INSERT INTO requests (writer_id, seq, {})
    SELECT * FROM unnest($1::text[], $2::bigint[], {})
    ON CONFLICT (writer_id, seq) DO NOTHING",
        columns::names(),
        arrays.join(", ")
    )
});

/// One column of a batch, as the array PostgreSQL takes for it.
enum ColumnArray {
    Int(Vec<Option<i64>>),
    Real(Vec<Option<f64>>),
    Text(Vec<Option<String>>),
    Flag(Vec<Option<i32>>),
}

impl ColumnArray {
    fn new(kind: Kind, rows: usize) -> Self {
        match kind {
            Kind::Int => ColumnArray::Int(Vec::with_capacity(rows)),
            Kind::Real => ColumnArray::Real(Vec::with_capacity(rows)),
            Kind::Text => ColumnArray::Text(Vec::with_capacity(rows)),
            Kind::Flag => ColumnArray::Flag(Vec::with_capacity(rows)),
        }
    }

    fn push(&mut self, cell: Cell<'_>) {
        match (self, cell) {
            (ColumnArray::Int(values), Cell::Int(v)) => values.push(v),
            (ColumnArray::Real(values), Cell::Real(v)) => values.push(v),
            // PostgreSQL's text cannot hold NUL, which a caller's JSON can (a
            // session from the body's `user`): stored as U+FFFD instead.
            (ColumnArray::Text(values), Cell::Text(v)) => {
                values.push(v.map(|s| s.replace('\0', "\u{FFFD}")));
            }
            (ColumnArray::Flag(values), Cell::Flag(v)) => values.push(v.map(i32::from)),
            // `cells` gives each column its own kind (tested in `columns`).
            (array, cell) => {
                unreachable!("a {:?} cell in a {:?} column", cell.kind(), array.kind())
            }
        }
    }

    fn kind(&self) -> Kind {
        match self {
            ColumnArray::Int(_) => Kind::Int,
            ColumnArray::Real(_) => Kind::Real,
            ColumnArray::Text(_) => Kind::Text,
            ColumnArray::Flag(_) => Kind::Flag,
        }
    }

    fn as_param(&self) -> &(dyn ToSql + Sync) {
        match self {
            ColumnArray::Int(values) => values,
            ColumnArray::Real(values) => values,
            ColumnArray::Text(values) => values,
            ColumnArray::Flag(values) => values,
        }
    }
}

/// Inserts `batch` in one statement (its own transaction: the answer comes
/// after COMMIT). The batch is in `seq` order under one `writer_id`, so
/// rows are inserted in key order and replicas never wait on each other's
/// keys: concurrent batches cannot deadlock.
async fn commit<'a>(
    pool: &Pool,
    writer_id: &str,
    batch: impl Iterator<Item = &'a (i64, Entry)> + Clone,
) -> anyhow::Result<()> {
    let client = pool.get().await?;
    let insert = client.prepare_cached(&INSERT).await?;
    let rows = batch.clone().count();
    let writer_ids = vec![writer_id; rows];
    let seqs: Vec<i64> = batch.clone().map(|(seq, _)| *seq).collect();
    let mut arrays: Vec<ColumnArray> = COLUMNS
        .iter()
        .map(|column| ColumnArray::new(column.kind, rows))
        .collect();
    for (_, entry) in batch {
        for (array, cell) in arrays.iter_mut().zip(cells(&entry.row)) {
            array.push(cell);
        }
    }
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&writer_ids, &seqs];
    params.extend(arrays.iter().map(ColumnArray::as_param));
    client.execute(&insert, &params).await?;
    Ok(())
}
