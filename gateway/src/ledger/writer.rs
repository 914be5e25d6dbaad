//! The writer thread: takes rows off the queue and commits them in batches.

use std::time::{Duration, Instant};

use rusqlite::Connection;
use rusqlite::ToSql;
use rusqlite::types::{ToSqlOutput, Value as SqlValue, ValueRef};

use crate::ledger::columns::{COLUMNS, Cell, cells};
use tokio::sync::mpsc;

use crate::ledger::Entry;

/// Most rows in one transaction.
const BATCH: usize = 1024;
/// The shortest wait of a gathering batch before it looks for more rows
/// (and its first, before the pace of rows is known).
const POLL: Duration = Duration::from_millis(20);
/// The longest: rows that come faster than the batch's pace so far (a
/// burst after a quiet spell) wait at most this long to be seen, however
/// long `flush_ms` is; the default queue (10,000 rows) fills in that time
/// only past 100,000 rows/s.
const LONGEST_NAP: Duration = Duration::from_millis(100);
/// How often old rows are purged.
const RETENTION_EVERY: Duration = Duration::from_secs(3600);

/// How long a batch that has gathered `rows` in `since_first` waits before
/// it looks again: about as long as `room` more rows take at that pace,
/// from [`POLL`] to [`LONGEST_NAP`], and not past `left`. Waking every
/// 20 ms, the writer woke ten times a 200 ms batch however few rows came.
/// At a steady pace the queue does not fill meanwhile (`room` is at most
/// half of it), so no request waits on it.
fn nap(rows: usize, since_first: Duration, room: usize, left: Duration) -> Duration {
    let pace = since_first.mul_f64(room as f64 / rows.max(1) as f64);
    pace.clamp(POLL, LONGEST_NAP).min(left)
}

/// Puts the calling thread (the writer) below the request threads, at
/// nice 10. A group's commit is milliseconds of CPU at once (about 16,500
/// instructions a row, 200 ms of rows a group), and where the request
/// threads keep the cores busy, every request arriving meanwhile waited
/// for it: at a fixed 3,000 requests/s with the gateway on one core that
/// was most of its added p99 (`scripts/bench-open-loop.sh`; the figures
/// are on the benchmark's page). Below them it still runs whenever a core
/// is free, and gets about a tenth of one where both want it (at nice 19,
/// whose p99 was a little lower, a saturated core would leave it about
/// 2,000 rows a second, and the gateway would run at that pace). Should it
/// fall behind, the queue fills and requests wait to hand over their rows
/// (`Ledger::backed_up`), so no row a request waits to hand over is lost.
/// Not in strict mode, where every caller waits for the commit.
pub fn yield_to_requests() {
    #[cfg(target_os = "linux")]
    if let Err(err) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10) {
        tracing::debug!(error = %err, "the ledger writer keeps its priority");
    }
}

/// Runs until every sender is gone and the queue is empty. `window` is how
/// long a batch gathers rows after its first (zero in strict mode).
pub fn run(
    mut conn: Connection,
    mut receiver: mpsc::Receiver<Entry>,
    window: Duration,
    retention_days: u32,
    health: &crate::ledger::WriterHealth,
) {
    prepare_inserts(&conn);
    let mut last_retention = Instant::now();
    // Room for the largest batch from the start, kept from batch to batch:
    // a vector grown by doubling moves every row it holds (664 bytes each)
    // at each step. The 680 KB are only touched as rows arrive.
    let mut batch = Vec::with_capacity(BATCH);
    let half_the_queue = receiver.max_capacity() / 2;
    while let Some(first) = receiver.blocking_recv() {
        batch.push(first);
        let started = Instant::now();
        let deadline = started + window;
        while batch.len() < BATCH {
            match receiver.try_recv() {
                Ok(entry) => batch.push(entry),
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < deadline => {
                    let room = (BATCH - batch.len()).min(half_the_queue);
                    let left = deadline.saturating_duration_since(Instant::now());
                    std::thread::sleep(nap(batch.len(), started.elapsed(), room, left));
                }
                Err(_) => break,
            }
        }
        let mut committed = commit(&mut conn, &batch);
        if let Err(err) = &committed {
            tracing::error!(error = %err, rows = batch.len(), "ledger commit failed; retrying once");
            std::thread::sleep(Duration::from_millis(100));
            committed = commit(&mut conn, &batch);
            if let Err(err) = &committed {
                tracing::error!(error = %err, rows = ?batch.iter().map(|e| &e.row).collect::<Vec<_>>(), "ledger rows lost");
                health.lost.inc_by(batch.len() as u64);
            }
        }
        if committed.is_ok() {
            for entry in &batch {
                health
                    .commit_lag
                    .observe(entry.queued.elapsed().as_secs_f64());
            }
        }
        for entry in batch.drain(..) {
            if let Some(waiting) = entry.committed {
                let _ = waiting.send(committed.is_ok());
            }
        }
        if last_retention.elapsed() > RETENTION_EVERY {
            last_retention = Instant::now();
            if let Err(err) = crate::ledger::schema::apply_retention(&conn, retention_days) {
                tracing::warn!(error = %err, "ledger retention failed");
            }
        }
    }
}

/// Rows one INSERT statement writes. Each statement run pays for itself
/// (opening and closing the table's and the indexes' cursors, resetting
/// its registers): one row per statement cost about 18,000 instructions a
/// row, eight about 15,600 (callgrind, 51 columns and two indexes, batches
/// of 200). Past eleven rows a row cost more than with one row a
/// statement, so eight stays clear of that edge.
const ROWS_PER_INSERT: usize = 8;

/// Columns most rows leave empty, whatever the deployment: a row with all
/// of them empty is written by statements that leave them out, and SQLite
/// fills them with NULL (no column has a default). Each column left out is
/// a parameter and a register copy fewer per row, about 100 instructions
/// (two of SQLite's opcodes). A row with any of them set is written by the
/// statements of every column.
const SPARSE: [&str; 19] = [
    "team",
    "profile",
    "draft_tokens",
    "draft_accepted_tokens",
    "refusal",
    "client_request_id",
    "service_tier",
    "session",
    "agree_exact",
    "agree_similarity",
    "agree_checked",
    "error",
    "sensitive",
    "sensitive_action",
    "kind",
    "tool",
    "bytes_in",
    "bytes_out",
    "batch",
];

/// Which columns a row's statements name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Every column.
    Full,
    /// Every column but the [`SPARSE`] ones, all empty in the row.
    Lean,
}

/// The positions in [`COLUMNS`] of the columns a lean statement names, and
/// of those it leaves out.
static LEAN: std::sync::LazyLock<(Vec<usize>, Vec<usize>)> = std::sync::LazyLock::new(|| {
    (0..COLUMNS.len()).partition(|&i| !SPARSE.contains(&COLUMNS[i].name))
});

static ALL: std::sync::LazyLock<Vec<usize>> =
    std::sync::LazyLock::new(|| (0..COLUMNS.len()).collect());

impl Shape {
    fn of(cells: &[Cell<'_>; COLUMNS.len()]) -> Shape {
        if LEAN.1.iter().all(|&i| cells[i].is_null()) {
            Shape::Lean
        } else {
            Shape::Full
        }
    }

    fn columns(self) -> &'static [usize] {
        match self {
            Shape::Full => &ALL,
            Shape::Lean => &LEAN.0,
        }
    }

    /// The statement for `rows` rows (eight or one) of this shape.
    fn sql(self, rows: usize) -> &'static str {
        static SQL: std::sync::LazyLock<[[String; 2]; 2]> = std::sync::LazyLock::new(|| {
            [Shape::Full, Shape::Lean]
                .map(|shape| [ROWS_PER_INSERT, 1].map(|rows| insert_sql(shape.columns(), rows)))
        });
        &SQL[self as usize][usize::from(rows == 1)]
    }
}

/// `INSERT OR FAIL INTO requests (...) VALUES (...), ...` of `columns`
/// (positions in [`COLUMNS`]) for `rows` rows, with the parameter of row
/// `r`'s `j`th column at `r * columns.len() + j + 1`.
///
/// `OR FAIL`: a plain INSERT of several rows into a table with `NOT NULL`
/// columns may have to undo its own first rows when a later one breaks a
/// constraint, so SQLite journals each page it changes for the statement
/// (about 850 instructions a row). On a failure `commit` drops the whole
/// transaction anyway, so the rows a failed statement kept never land
/// either.
fn insert_sql(columns: &[usize], rows: usize) -> String {
    let values: Vec<String> = (0..rows)
        .map(|r| {
            let placeholders: Vec<String> = (1..=columns.len())
                .map(|j| format!("?{}", r * columns.len() + j))
                .collect();
            format!("({})", placeholders.join(", "))
        })
        .collect();
    let names: Vec<&str> = columns.iter().map(|&i| COLUMNS[i].name).collect();
    format!(
        "INSERT OR FAIL INTO requests ({}) VALUES {}",
        names.join(", "),
        values.join(", ")
    )
}

/// Compiles the INSERT statements into `conn`'s statement cache, so that
/// the gateway pays for them as it starts rather than in its first batch
/// (an eight-row statement's text and compilation take about a million
/// instructions, once).
fn prepare_inserts(conn: &Connection) {
    for shape in [Shape::Full, Shape::Lean] {
        for rows in [ROWS_PER_INSERT, 1] {
            if let Err(err) = conn.prepare_cached(shape.sql(rows)) {
                tracing::warn!(error = %err, "ledger insert not compiled ahead; the first batch will try again");
            }
        }
    }
}

/// Writes the batch's rows in their order: each run of rows of one shape
/// eight a statement, then one a statement.
fn commit(conn: &mut Connection, batch: &[Entry]) -> rusqlite::Result<()> {
    let rows: Vec<[Cell<'_>; COLUMNS.len()]> = batch.iter().map(|e| cells(&e.row)).collect();
    let tx = conn.transaction()?;
    let mut from = 0;
    while let Some(first) = rows.get(from) {
        let shape = Shape::of(first);
        let run = 1 + rows[from + 1..]
            .iter()
            .take_while(|r| Shape::of(r) == shape)
            .count();
        let mut groups = rows[from..from + run].chunks_exact(ROWS_PER_INSERT);
        if groups.len() > 0 {
            let mut statement = tx.prepare_cached(shape.sql(ROWS_PER_INSERT))?;
            insert(&mut statement, shape.columns(), groups.by_ref())?;
        }
        let rest = groups.remainder();
        if !rest.is_empty() {
            let mut statement = tx.prepare_cached(shape.sql(1))?;
            insert(&mut statement, shape.columns(), rest.chunks(1))?;
        }
        from += run;
    }
    tx.commit()
}

/// Runs `statement`, which names `columns`, once for each group of rows,
/// all of a group's size.
///
/// A statement keeps its bindings from one run to the next (SQLite holds
/// its own copy of each), so a cell is bound only where it differs from
/// the cell the same parameter held in the run before: most optional
/// columns are empty in every row, and most names (tier, dialect, status,
/// reason, key, backend) repeat. Binding every cell cost about 5,500
/// instructions a row, most of them copying text. The first run starts
/// with every parameter unbound, as NULL.
fn insert<'a, 'row: 'a>(
    statement: &mut rusqlite::CachedStatement<'_>,
    columns: &[usize],
    groups: impl Iterator<Item = &'a [[Cell<'row>; COLUMNS.len()]]>,
) -> rusqlite::Result<()> {
    statement.clear_bindings();
    // The cells each row position of the statement was bound to last.
    let mut bound: Vec<&[Cell<'row>; COLUMNS.len()]> = Vec::new();
    for group in groups {
        for (slot, cells) in group.iter().enumerate() {
            let before = bound.get(slot);
            for (j, &i) in columns.iter().enumerate() {
                let cell = &cells[i];
                let unchanged = match before {
                    Some(before) => same(&before[i], cell),
                    None => cell.is_null(),
                };
                if !unchanged {
                    statement.raw_bind_parameter(slot * columns.len() + j + 1, cell)?;
                }
            }
            match bound.get_mut(slot) {
                Some(last) => *last = cells,
                None => bound.push(cells),
            }
        }
        statement.raw_execute()?;
    }
    Ok(())
}

/// Whether two cells hold the same value, bit for bit: `-0.0` is not
/// `0.0` here, so a sign is never lost by not binding it again. Inlined:
/// it runs for every cell of every row.
#[inline]
fn same(a: &Cell<'_>, b: &Cell<'_>) -> bool {
    match (a, b) {
        (Cell::Real(x), Cell::Real(y)) => x.map(f64::to_bits) == y.map(f64::to_bits),
        _ => a == b,
    }
}

/// A cell as SQLite stores it: flags as 0 or 1, as rusqlite stores `bool`.
impl ToSql for Cell<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Cell::Int(Some(v)) => ToSqlOutput::Owned(SqlValue::Integer(v)),
            Cell::Real(Some(v)) => ToSqlOutput::Owned(SqlValue::Real(v)),
            Cell::Text(Some(v)) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Cell::Flag(Some(v)) => ToSqlOutput::Owned(SqlValue::Integer(i64::from(v))),
            Cell::Int(None) | Cell::Real(None) | Cell::Text(None) | Cell::Flag(None) => {
                ToSqlOutput::Owned(SqlValue::Null)
            }
        })
    }
}

#[cfg(test)]
mod tests;
