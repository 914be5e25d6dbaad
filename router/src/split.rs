//! Weighted split: targets get requests in proportion to their weights.

/// Targets with their cumulative weight share, ready to pick from.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitPolicy {
    /// `(target, upper bound of its slice of [0, 1))`, ascending.
    slices: Vec<(usize, f64)>,
}

impl SplitPolicy {
    /// Builds a split from `(target, weight)` pairs. Zero weights are left
    /// out; `None` when no weight is positive or any is negative or not finite.
    pub fn new(weights: impl IntoIterator<Item = (usize, f64)>) -> Option<Self> {
        let weights: Vec<(usize, f64)> = weights.into_iter().collect();
        if weights.iter().any(|(_, w)| !w.is_finite() || *w < 0.0) {
            return None;
        }
        let total: f64 = weights.iter().map(|(_, w)| w).sum();
        if total <= 0.0 {
            return None;
        }
        let mut upper = 0.0;
        let slices = weights
            .into_iter()
            .filter(|(_, w)| *w > 0.0)
            .map(|(target, w)| {
                upper += w / total;
                (target, upper)
            })
            .collect();
        Some(SplitPolicy { slices })
    }

    /// Everything to one target.
    pub fn single(target: usize) -> Self {
        SplitPolicy {
            slices: vec![(target, 1.0)],
        }
    }

    /// The target whose slice holds `unit`, a number in `[0, 1)`.
    pub fn pick(&self, unit: f64) -> usize {
        self.slices
            .iter()
            .find(|(_, upper)| unit < *upper)
            .or(self.slices.last())
            .map(|(target, _)| *target)
            .unwrap_or(0)
    }

    /// Each target's share, for reports and receipts.
    pub fn shares(&self) -> Vec<(usize, f64)> {
        self.share_iter().collect()
    }

    /// Each target's share, without collecting them (a split's dealing
    /// reads them on every request).
    pub fn share_iter(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        let mut lower = 0.0;
        self.slices.iter().map(move |&(target, upper)| {
            let share = upper - lower;
            lower = upper;
            (target, share)
        })
    }
}

/// A stable number in `[0, 1)` for a key such as a session id, so the same
/// session lands on the same target in every replica and every run.
pub fn unit_from_key(key: &str) -> f64 {
    // FNV-1a then a splitmix64 finaliser to spread nearby keys.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    fn share_of(policy: &SplitPolicy, target: usize, picks: impl Iterator<Item = f64>) -> f64 {
        let (mut hits, mut n) = (0, 0);
        for unit in picks {
            n += 1;
            hits += usize::from(policy.pick(unit) == target);
        }
        hits as f64 / n as f64
    }

    #[test]
    fn random_draws_converge_to_the_weights() {
        let policy = SplitPolicy::new([(0, 40.0), (1, 40.0), (2, 20.0)]).unwrap();
        for seed in [1, 7, 42] {
            let mut rng = StdRng::seed_from_u64(seed);
            let share = share_of(&policy, 2, (0..10_000).map(|_| rng.random::<f64>()));
            assert!((share - 0.2).abs() < 0.02, "seed {seed}: {share}");
        }
    }

    #[test]
    fn distinct_sessions_converge_to_the_weights() {
        let policy = SplitPolicy::new([(0, 80.0), (1, 20.0)]).unwrap();
        let share = share_of(
            &policy,
            1,
            (0..10_000).map(|i| unit_from_key(&format!("session-{i}"))),
        );
        assert!((share - 0.2).abs() < 0.02, "{share}");
    }

    #[test]
    fn sessions_are_sticky() {
        let policy = SplitPolicy::new([(0, 1.0), (1, 1.0)]).unwrap();
        let first = policy.pick(unit_from_key("abc"));
        assert!((0..100).all(|_| policy.pick(unit_from_key("abc")) == first));
    }

    #[test]
    fn rejects_weights_that_cannot_split() {
        assert!(SplitPolicy::new([(0, 0.0)]).is_none());
        assert!(SplitPolicy::new([(0, -1.0), (1, 2.0)]).is_none());
        assert!(SplitPolicy::new([(0, f64::NAN)]).is_none());
        let only_one = SplitPolicy::new([(0, 0.0), (3, 5.0)]).unwrap();
        assert_eq!(only_one.pick(0.0), 3);
        assert_eq!(only_one.shares(), vec![(3, 1.0)]);
    }
}
