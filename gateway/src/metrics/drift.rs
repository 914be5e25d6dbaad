//! A backend's speeds and error rate against its own baseline, as the
//! latency model tracks them: gauges, and a log line when one moves past
//! its threshold (at warn) or comes back (at info).

use std::sync::atomic::Ordering;

use switchyard_router::latency::Drifts;

use crate::metrics::Metrics;
use crate::metrics::families::{BackendLabel, ErrorWindow};

/// How far (as a share) a recent speed may move from its baseline before
/// it is reported as drift, and how near it must come back before the
/// drift is reported over (apart, so a speed near the threshold does not
/// flip the report on every call).
pub const DRIFT_THRESHOLD: f64 = 0.3;
const DRIFT_CLEARED: f64 = 0.2;
/// The same for the share of calls that fail: points above the baseline.
const ERROR_RISE: f64 = 0.1;
const ERROR_CLEARED: f64 = 0.05;

impl Metrics {
    /// A backend's drift figures, as far as known.
    pub fn set_drifts(&self, backend: usize, drifts: &Drifts) {
        let Some(b) = self.backends.get(backend) else {
            return;
        };
        // Made once, when first set: the family's lookup hashes the label
        // under a lock on every call.
        let gauge = |which: usize| {
            b.drift[which].get_or_init(|| {
                let f = &self.families;
                let one = || BackendLabel {
                    backend: b.name.clone(),
                };
                match which {
                    0 => f.decode_drift.get_or_create_owned(&one()),
                    1 => f.prefill_drift.get_or_create_owned(&one()),
                    _ => f.error_share.get_or_create_owned(&ErrorWindow {
                        backend: b.name.clone(),
                        window: if which == 2 { "recent" } else { "baseline" },
                    }),
                }
            })
        };
        if let Some(ratio) = drifts.decode {
            gauge(0).set(ratio);
            self.flag(
                backend,
                0,
                (ratio - 1.0).abs(),
                (DRIFT_THRESHOLD, DRIFT_CLEARED),
                || format!("decode speed {:+.0}%", (ratio - 1.0) * 100.0),
            );
        }
        if let Some(ratio) = drifts.prefill {
            gauge(1).set(ratio);
            self.flag(
                backend,
                1,
                (ratio - 1.0).abs(),
                (DRIFT_THRESHOLD, DRIFT_CLEARED),
                || format!("prefill speed {:+.0}%", (ratio - 1.0) * 100.0),
            );
        }
        if let Some((recent, baseline)) = drifts.errors {
            gauge(2).set(recent);
            gauge(3).set(baseline);
            self.flag(
                backend,
                2,
                recent - baseline,
                (ERROR_RISE, ERROR_CLEARED),
                || {
                    format!(
                        "failed calls {:.0}% against {:.0}% before",
                        recent * 100.0,
                        baseline * 100.0
                    )
                },
            );
        }
    }

    /// Notes whether figure `which` of `backend` is `moved` past its
    /// threshold, logging when that changes.
    fn flag(
        &self,
        backend: usize,
        which: usize,
        moved: f64,
        (threshold, cleared): (f64, f64),
        change: impl FnOnce() -> String,
    ) {
        let Some(b) = self.backends.get(backend) else {
            return;
        };
        let was = b.drifting[which].load(Ordering::Relaxed);
        let drifting = if was {
            moved >= cleared
        } else {
            moved >= threshold
        };
        if b.drifting[which].swap(drifting, Ordering::Relaxed) != drifting {
            let change = change();
            if drifting {
                tracing::warn!(backend = %b.name, %change, "backend drifted from its baseline");
            } else {
                tracing::info!(backend = %b.name, %change, "backend back near its baseline");
            }
        }
    }
}
