//! What a batch store keeps (files, batches, lines) and what it answers:
//! the rows, and the calls each store answers.

/// A stored file, without its content.
#[derive(Debug, Clone)]
pub struct FileRow {
    pub id: String,
    pub owner: String,
    pub purpose: String,
    pub filename: String,
    pub bytes: u64,
    pub created_at: i64,
}

/// A batch as stored.
#[derive(Debug, Clone, Default)]
pub struct BatchRow {
    pub id: String,
    pub owner: String,
    pub endpoint: String,
    pub input_file_id: String,
    pub completion_window: String,
    pub status: String,
    pub metadata: Option<String>,
    pub errors: Option<String>,
    pub output_file_id: Option<String>,
    pub error_file_id: Option<String>,
    pub created_at: i64,
    pub expires_at: i64,
    /// When it entered each state (`in_progress_at`, ...), by state.
    pub times: [Option<i64>; 7],
    pub total: u64,
    pub completed: u64,
    pub failed: u64,
}

/// The states a batch passes through, in `BatchRow::times`' order.
pub const STATES: [&str; 7] = [
    "in_progress",
    "finalizing",
    "completed",
    "failed",
    "expired",
    "cancelling",
    "cancelled",
];

/// A line of a batch: its request, or why it could not be read.
#[derive(Debug, Clone)]
pub struct Line {
    pub line: u64,
    pub custom_id: Option<String>,
    /// The request's body; `None` for a line that failed to read.
    pub body: Option<String>,
    /// `pending`, `done` (answered 2xx) or `failed`.
    pub state: &'static str,
    /// The output or error file's line for it, once it has one.
    pub result: Option<String>,
}

/// A line still to run.
#[derive(Debug, Clone)]
pub struct Pending {
    pub line: u64,
    pub custom_id: String,
    pub body: String,
}

pub type StoreResult<T> = anyhow::Result<T>;

/// What the API and the runner ask of a store.
pub trait Store: Send + Sync {
    fn put_file(&self, file: &FileRow, content: &[u8]) -> StoreResult<()>;

    fn file(&self, id: &str, owner: &str) -> StoreResult<Option<FileRow>>;

    fn file_content(&self, id: &str, owner: &str) -> StoreResult<Option<Vec<u8>>>;

    /// The owner's files, newest first (or oldest, `ascending`), after the
    /// file `after` in that order, at most `limit`.
    fn files(
        &self,
        owner: &str,
        purpose: Option<&str>,
        page: (Option<&str>, usize, bool),
    ) -> StoreResult<Vec<FileRow>>;

    fn delete_file(&self, id: &str, owner: &str) -> StoreResult<bool>;

    /// A new batch with its lines, in one transaction; lines that could
    /// not be read are counted failed from the start.
    fn create_batch(&self, batch: &BatchRow, lines: &[Line]) -> StoreResult<()>;

    fn batch(&self, id: &str, owner: Option<&str>) -> StoreResult<Option<BatchRow>>;

    /// The owner's batches, newest first, after `after`, at most `limit`.
    fn batches(&self, owner: &str, after: Option<&str>, limit: usize)
    -> StoreResult<Vec<BatchRow>>;

    /// The newest `limit` batches of every key (`switchyard batches`).
    fn recent(&self, limit: usize) -> StoreResult<Vec<BatchRow>>;

    /// Every batch not yet ended, oldest first: the runner's work.
    fn unfinished(&self) -> StoreResult<Vec<BatchRow>>;

    /// Moves a batch to `status` (one of [`STATES`]), noting when; `from`
    /// names the states it may leave (a cancel after completion is not).
    fn set_status(&self, id: &str, status: &str, from: &[&str], at: i64) -> StoreResult<bool>;

    /// Up to `limit` of a batch's pending lines, in order, leaving out
    /// those in `running`.
    fn pending_lines(
        &self,
        batch_id: &str,
        running: &[u64],
        limit: usize,
    ) -> StoreResult<Vec<Pending>>;

    /// Records a line's outcome and counts it, once: a line already
    /// answered is left as it was.
    fn finish_line(&self, batch_id: &str, line: u64, done: bool, result: &str) -> StoreResult<()>;

    /// Fails every line still pending, each with an error file entry of
    /// `code` (a batch cancelled or expired before they ran); counted.
    fn fail_pending(&self, batch_id: &str, code: &str) -> StoreResult<()>;

    /// Whether a batch has lines still pending.
    fn has_pending(&self, batch_id: &str) -> StoreResult<bool>;

    /// The answered lines' results, in line order: those done (the output
    /// file) and those failed (the error file).
    fn results(&self, batch_id: &str) -> StoreResult<(Vec<String>, Vec<String>)>;

    /// Ends a batch still in `batch.status`: its output and error files
    /// (when it has lines for them) stored, and its status `status`, in one
    /// transaction. `false`, with nothing written, when its status moved
    /// meanwhile (a cancel came in).
    fn finish_batch(
        &self,
        batch: &BatchRow,
        files: [Option<(FileRow, Vec<u8>)>; 2],
        status: &str,
        at: i64,
    ) -> StoreResult<bool>;

    /// Whether this process may run batches' lines now. A store of its own
    /// always may; a store replicas share lets one at a time.
    fn runner_lease(&self) -> StoreResult<bool> {
        Ok(true)
    }

    /// Whether other processes write to this store too: then a runner with
    /// nothing to do still looks now and then, for their new batches.
    fn shared(&self) -> bool {
        false
    }
}

/// Answered lines' `(state, result)`, in line order, as the output file's
/// lines (those `done`) and the error file's (the rest).
pub(super) fn output_and_errors(
    rows: impl IntoIterator<Item = StoreResult<(String, Option<String>)>>,
) -> StoreResult<(Vec<String>, Vec<String>)> {
    let (mut done, mut failed) = (Vec::new(), Vec::new());
    for row in rows {
        let (state, result) = row?;
        let result = result.unwrap_or_default();
        if state == "done" {
            done.push(result);
        } else {
            failed.push(result);
        }
    }
    Ok((done, failed))
}

/// The JSON an error file holds for a line that never ran.
pub(super) fn never_ran(id: &str, custom_id: Option<&str>, code: &str, line: i64) -> String {
    serde_json::json!({
        "id": id, "custom_id": custom_id, "response": null,
        "error": {"code": code, "message": NEVER_RAN, "line": line},
    })
    .to_string()
}

const NEVER_RAN: &str = "the batch ended before this line ran";

/// A new id: `prefix` and 24 hex digits.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}{:024x}", rand::random::<u128>() >> 32)
}
