//! A backend's speeds and error rate against its own baseline: a recent
//! average (about the last ten calls) and a long one (about the last
//! hundred). Decode speed is compared at one context-length bucket, so a
//! backend that has become slower (or faster) than it was is noticed
//! without the drift being hidden by a change in the traffic's prompt
//! lengths.

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

/// The share of calls that failed, recent and baseline averaged as for
/// speeds (a share can be 0, so it is compared by difference, not ratio).
#[derive(Debug, Clone, Copy, Default)]
pub struct ShareDrift {
    recent: f64,
    baseline: f64,
    samples: u32,
}

impl ShareDrift {
    pub fn observe(&mut self, happened: bool) {
        let x = f64::from(u8::from(happened));
        if self.samples == 0 {
            (self.recent, self.baseline) = (x, x);
        } else {
            self.recent += RECENT_ALPHA * (x - self.recent);
            self.baseline += BASELINE_ALPHA * (x - self.baseline);
        }
        self.samples = self.samples.saturating_add(1);
    }

    /// Recent and baseline shares, once enough calls were seen.
    pub fn shares(&self) -> Option<(f64, f64)> {
        (self.samples >= MIN_SAMPLES).then_some((self.recent, self.baseline))
    }
}

/// What a backend's drift figures say now (each `None` until known).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Drifts {
    /// Recent decode speed over its baseline, at one context length.
    pub decode: Option<f64>,
    /// Recent prefill speed over its baseline.
    pub prefill: Option<f64>,
    /// The recent and baseline shares of calls that failed upstream.
    pub errors: Option<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rise_in_failures_shows_against_the_baseline() {
        let mut errors = ShareDrift::default();
        for _ in 0..60 {
            errors.observe(false);
        }
        assert_eq!(errors.shares(), Some((0.0, 0.0)));
        for i in 0..10 {
            errors.observe(i % 2 == 0);
        }
        let (recent, baseline) = errors.shares().unwrap();
        assert!(recent > 0.3 && baseline < 0.15, "{recent} {baseline}");
    }

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
