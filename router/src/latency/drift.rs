//! A backend's decode speed against its own baseline: a recent average
//! (about the last ten calls) and a long one (about the last hundred),
//! each at one context-length bucket, so a backend that has become slower
//! (or faster) than it was is noticed without the drift being hidden by a
//! change in the traffic's prompt lengths.

/// Weight of each call in the recent average, and in the baseline.
const RECENT_ALPHA: f64 = 0.2;
const BASELINE_ALPHA: f64 = 0.02;
/// Calls before the comparison means anything.
const MIN_SAMPLES: u32 = 30;

#[derive(Debug, Clone, Copy, Default)]
pub struct Drift {
    recent: f64,
    baseline: f64,
    samples: u32,
}

impl Drift {
    pub fn observe(&mut self, rate: f64) {
        if !rate.is_finite() || rate <= 0.0 {
            return;
        }
        if self.samples == 0 {
            (self.recent, self.baseline) = (rate, rate);
        } else {
            self.recent += RECENT_ALPHA * (rate - self.recent);
            self.baseline += BASELINE_ALPHA * (rate - self.baseline);
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// Recent over baseline, once enough calls were seen.
    pub fn ratio(&self) -> Option<f64> {
        (self.samples >= MIN_SAMPLES && self.baseline > 0.0).then(|| self.recent / self.baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowdown_shows_against_the_baseline_and_fades_into_it() {
        let mut drift = Drift::default();
        for _ in 0..60 {
            drift.observe(100.0);
        }
        assert_eq!(drift.ratio(), Some(1.0));
        for _ in 0..15 {
            drift.observe(60.0);
        }
        let slower = drift.ratio().unwrap();
        assert!(slower < 0.7, "{slower}");
        // Kept up for long, the new speed becomes the baseline.
        for _ in 0..400 {
            drift.observe(60.0);
        }
        assert!((drift.ratio().unwrap() - 1.0).abs() < 0.01);
    }
}
