//! Predictors' labelled outcomes, appended to a file
//! (`predictors.*.record`) for `switchyard train-router --from` to learn
//! from offline: the traffic's own labels, without the prompts. A line holds
//! the features the predictor saw (the dense ones, and the n-gram
//! embedding's non-zero slots: hashed trigrams, not text) and whether the
//! answer failed its checks.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

use switchyard_policies::Config;
use switchyard_router::learned::{FEATURE_SET, Sample};

/// Lines waiting for the writer; beyond this, outcomes are dropped (and
/// counted) rather than slow a request.
const QUEUE: usize = 4096;

pub struct OutcomeLog {
    pub path: PathBuf,
    lines: SyncSender<String>,
    dropped: AtomicU64,
}

impl OutcomeLog {
    /// Opens `path` for appending, with a thread of its own that writes.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|err| {
                anyhow::anyhow!("cannot open {} to record outcomes: {err}", path.display())
            })?;
        let (lines, received) = sync_channel::<String>(QUEUE);
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("outcome-log".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::new(file);
                while let Ok(line) = received.recv() {
                    let mut result = writeln!(out, "{line}");
                    // Write what is queued, then flush once.
                    while let Ok(more) = received.try_recv() {
                        result = result.and_then(|()| writeln!(out, "{more}"));
                    }
                    if let Err(err) = result.and_then(|()| out.flush()) {
                        tracing::warn!(file = %shown, error = %err, "cannot record predictor outcomes");
                    }
                }
            })?;
        Ok(OutcomeLog {
            path: path.to_owned(),
            lines,
            dropped: AtomicU64::new(0),
        })
    }

    pub fn record(&self, route: &str, sample: &Sample, failed: bool) {
        let ngram: serde_json::Map<String, serde_json::Value> = sample
            .ngram
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != 0.0)
            .map(|(i, v)| (i.to_string(), serde_json::Value::from(*v)))
            .collect();
        let line = serde_json::json!({
            "features": FEATURE_SET,
            "route": route,
            "sample": {"dense": sample.dense.to_vec(), "ngram": ngram},
            "failed": failed,
        })
        .to_string();
        if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
            self.lines.try_send(line)
        {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Each predictor's outcome file (by predictor index), opened once: one a
/// previous config's app (`previous`) had open stays open, and predictors
/// naming one file share its writer, so lines never interleave.
pub fn logs_for(
    config: &Config,
    previous: &[Option<Arc<OutcomeLog>>],
) -> anyhow::Result<Vec<Option<Arc<OutcomeLog>>>> {
    let mut logs: Vec<Option<Arc<OutcomeLog>>> = Vec::new();
    for p in config.predictors.values() {
        let Some(path) = p.record.as_deref().map(Path::new) else {
            logs.push(None);
            continue;
        };
        let open = previous
            .iter()
            .chain(&logs)
            .flatten()
            .find(|log| log.path == path)
            .cloned();
        let log = match open {
            Some(log) => log,
            None => Arc::new(OutcomeLog::open(path)?),
        };
        logs.push(Some(log));
    }
    Ok(logs)
}
