//! Target share: send the hardest X% of requests (by complexity score) to
//! one backend. The score threshold is the (1 - X) quantile of the last
//! `window` scores, recomputed as traffic flows, so the share holds when the
//! mix of easy and hard requests shifts.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Where the hard/easy line lies now. Live state behind a trait so replicas
/// can share it (the scale-out work backs it with Redis).
pub trait ShareTracker: Send + Sync {
    /// Records `score` and says whether this request is among the hardest
    /// `share`. `unit` (uniform in [0, 1)) breaks ties at the threshold.
    fn is_hard(&self, score: f64, unit: f64) -> bool;

    /// The score above which requests count as hard now.
    fn threshold(&self) -> f64;
}

/// The threshold from a sliding window of recent scores, in this process.
pub struct WindowTracker {
    share: f64,
    window: usize,
    /// Recompute the threshold after this many new scores.
    every: usize,
    state: Mutex<Window>,
}

struct Window {
    scores: VecDeque<f64>,
    since_recompute: usize,
    threshold: f64,
    /// Probability of "hard" for a score exactly at the threshold, so that
    /// ties (many equal scores) still split in the right proportion.
    at_threshold: f64,
}

/// Scores seen before the threshold is trusted; until then a prior applies.
const WARM_UP: usize = 20;

impl WindowTracker {
    pub fn new(share: f64, window: usize) -> Self {
        WindowTracker {
            share,
            window,
            every: (window / 50).max(1),
            state: Mutex::new(Window {
                scores: VecDeque::with_capacity(window),
                since_recompute: 0,
                // Prior: scores spread over [0, 1).
                threshold: 1.0 - share,
                at_threshold: 0.0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        // A panic while holding the lock leaves a consistent window (each
        // step is a single push/pop), so keep going with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn recompute(&self, w: &mut Window) {
        let mut sorted: Vec<f64> = w.scores.iter().copied().collect();
        let n = sorted.len();
        let hard = ((n as f64) * self.share).round() as usize;
        if hard == 0 {
            w.threshold = f64::INFINITY;
            w.at_threshold = 0.0;
            return;
        }
        let index = n - hard; // the smallest score in the hard set
        let (_, pivot, _) = sorted.select_nth_unstable_by(index, f64::total_cmp);
        let threshold = *pivot;
        let above = w.scores.iter().filter(|&&s| s > threshold).count();
        let equal = w.scores.iter().filter(|&&s| s == threshold).count();
        w.threshold = threshold;
        w.at_threshold = ((hard - above.min(hard)) as f64 / equal.max(1) as f64).clamp(0.0, 1.0);
    }
}

impl ShareTracker for WindowTracker {
    fn is_hard(&self, score: f64, unit: f64) -> bool {
        let mut w = self.lock();
        if w.scores.len() == self.window {
            w.scores.pop_front();
        }
        w.scores.push_back(score);
        w.since_recompute += 1;
        if w.scores.len() >= WARM_UP && w.since_recompute >= self.every {
            w.since_recompute = 0;
            self.recompute(&mut w);
        }
        score > w.threshold || (score == w.threshold && unit < w.at_threshold)
    }

    fn threshold(&self) -> f64 {
        self.lock().threshold
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn share_over(
        tracker: &WindowTracker,
        rng: &mut StdRng,
        n: usize,
        scores: impl Fn(&mut StdRng) -> f64,
    ) -> f64 {
        let hard = (0..n).filter(|_| {
            let score = scores(rng);
            tracker.is_hard(score, rng.random())
        });
        hard.count() as f64 / n as f64
    }

    #[test]
    fn holds_the_share_through_a_shift_in_difficulty() {
        for seed in [1, 2, 3] {
            let mut rng = StdRng::seed_from_u64(seed);
            let tracker = WindowTracker::new(0.2, 2000);
            let easy = share_over(&tracker, &mut rng, 4000, |r| r.random_range(0.0..0.5));
            assert!(
                (easy - 0.2).abs() < 0.03,
                "seed {seed}: easy traffic {easy}"
            );
            // Easy traffic becomes hard: at first far more than 20% look hard...
            let shifted = share_over(&tracker, &mut rng, 2000, |r| r.random_range(0.4..1.0));
            assert!(shifted > 0.2, "seed {seed}: {shifted}");
            // ...and after 2,000 requests the share is back.
            let after = share_over(&tracker, &mut rng, 2000, |r| r.random_range(0.4..1.0));
            assert!(
                (after - 0.2).abs() < 0.03,
                "seed {seed}: after the shift {after}"
            );
        }
    }

    #[test]
    fn ties_split_in_proportion() {
        let mut rng = StdRng::seed_from_u64(9);
        let tracker = WindowTracker::new(0.2, 500);
        // Every request scores the same: the tie-break alone makes the share.
        let share = share_over(&tracker, &mut rng, 5000, |_| 0.3);
        assert!((share - 0.2).abs() < 0.03, "{share}");
    }
}
