//! `batches:`: the OpenAI Files and Batches API the gateway serves
//! (`/v1/files`, `/v1/batches`): where files and batch state are kept, and
//! the bounds on what is uploaded and run.

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBatches {
    pub path: Option<String>,
    pub max_file_bytes: Option<usize>,
    pub max_lines: Option<usize>,
    pub lines_in_flight: Option<usize>,
}

/// The Files and Batches API's settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSettings {
    /// The SQLite file (WAL) holding files, batches and each line's state;
    /// relative paths are from the working directory. Unset: the ledger's
    /// PostgreSQL database when the ledger is there, else beside the
    /// ledger's file, `switchyard-batches.db`.
    pub path: Option<String>,
    /// The largest upload (413 past it).
    pub max_file_bytes: usize,
    /// The most lines (requests) one batch may hold.
    pub max_lines: usize,
    /// Lines of all batches running at once.
    pub lines_in_flight: usize,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            path: None,
            max_file_bytes: 100 << 20,
            max_lines: 50_000,
            lines_in_flight: 8,
        }
    }
}

impl BatchSettings {
    /// The store's file: `path`, or `switchyard-batches.db` in the
    /// directory of the ledger's file `ledger_path`.
    pub fn store_path(&self, ledger_path: &str) -> std::path::PathBuf {
        match &self.path {
            Some(path) => path.into(),
            None => std::path::Path::new(ledger_path).with_file_name("switchyard-batches.db"),
        }
    }
}

pub(super) fn validate_batches(
    ck: &Checker<'_>,
    raw: RawBatches,
) -> Result<BatchSettings, ConfigError> {
    let defaults = BatchSettings::default();
    for (field, value) in [
        ("max_file_bytes", raw.max_file_bytes),
        ("max_lines", raw.max_lines),
        ("lines_in_flight", raw.lines_in_flight),
    ] {
        if value == Some(0) {
            return Err(ck.error(&["batches", field], "must be positive"));
        }
    }
    if raw.path.as_deref().is_some_and(str::is_empty) {
        return Err(ck.error(&["batches", "path"], "must not be empty"));
    }
    Ok(BatchSettings {
        path: raw.path,
        max_file_bytes: raw.max_file_bytes.unwrap_or(defaults.max_file_bytes),
        max_lines: raw.max_lines.unwrap_or(defaults.max_lines),
        lines_in_flight: raw.lines_in_flight.unwrap_or(defaults.lines_in_flight),
    })
}
