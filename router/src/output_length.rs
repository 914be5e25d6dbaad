//! How long answers run, learned per route and use-case profile: the
//! expected output a prediction (and the work a request adds to a backend's
//! queue) is made with. A request's own `max_tokens` bounds it.

use std::sync::Mutex;

use switchyard_policies::Profile;

use crate::budgeted::DEFAULT_EXPECTED_OUTPUT;

/// Answers seen before the learned length replaces the default.
const MIN_SAMPLES: u32 = 5;
/// Weight of each new answer in the average.
const ALPHA: f64 = 0.1;

#[derive(Debug, Clone, Copy, Default)]
struct Learned {
    mean: f64,
    samples: u32,
}

/// One slot per route (and one for requests that name a backend) per
/// profile (and one for none).
#[derive(Debug)]
pub struct OutputLengths {
    routes: usize,
    learned: Mutex<Vec<Learned>>,
}

const PROFILE_SLOTS: usize = Profile::ALL.len() + 1;

impl OutputLengths {
    pub fn new(routes: usize) -> Self {
        OutputLengths {
            routes,
            learned: Mutex::new(vec![Learned::default(); (routes + 1) * PROFILE_SLOTS]),
        }
    }

    fn slot(&self, route: Option<usize>, profile: Option<Profile>) -> usize {
        let route = route.filter(|r| *r < self.routes).unwrap_or(self.routes);
        let profile = profile.map_or(0, |p| {
            1 + Profile::ALL.iter().position(|q| *q == p).unwrap_or(0)
        });
        route * PROFILE_SLOTS + profile
    }

    /// Output tokens a request is expected to produce: what answers on its
    /// route and profile have run to, or a typical reply's length until
    /// enough were seen; never more than its own limit.
    pub fn expect(
        &self,
        route: Option<usize>,
        profile: Option<Profile>,
        max_tokens: Option<u32>,
    ) -> u32 {
        let learned =
            self.learned.lock().unwrap_or_else(|p| p.into_inner())[self.slot(route, profile)];
        let typical = if learned.samples >= MIN_SAMPLES {
            learned.mean.round().max(1.0) as u32
        } else {
            DEFAULT_EXPECTED_OUTPUT
        };
        max_tokens.map_or(typical, |limit| typical.min(limit.max(1)))
    }

    /// An answer of `tokens` output tokens on `route` for `profile`.
    pub fn observe(&self, route: Option<usize>, profile: Option<Profile>, tokens: u64) {
        let slot = self.slot(route, profile);
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        let entry = &mut learned[slot];
        let tokens = tokens as f64;
        entry.mean = if entry.samples == 0 {
            tokens
        } else {
            ALPHA * tokens + (1.0 - ALPHA) * entry.mean
        };
        entry.samples = entry.samples.saturating_add(1);
    }

    /// Carries what `from` learned of route `theirs` over to route `mine`.
    pub fn adopt(&self, mine: Option<usize>, from: &OutputLengths, theirs: Option<usize>) {
        let theirs: Vec<Learned> = {
            let learned = from.learned.lock().unwrap_or_else(|p| p.into_inner());
            let start = from.slot(theirs, None);
            learned[start..start + PROFILE_SLOTS].to_vec()
        };
        let start = self.slot(mine, None);
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        learned[start..start + PROFILE_SLOTS].copy_from_slice(&theirs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_teach_the_length_expected_per_route_and_profile() {
        let lengths = OutputLengths::new(2);
        assert_eq!(
            lengths.expect(Some(0), Some(Profile::Chat), None),
            DEFAULT_EXPECTED_OUTPUT
        );
        for _ in 0..10 {
            lengths.observe(Some(0), Some(Profile::Chat), 40);
            lengths.observe(Some(0), Some(Profile::Code), 600);
        }
        assert_eq!(lengths.expect(Some(0), Some(Profile::Chat), None), 40);
        assert_eq!(lengths.expect(Some(0), Some(Profile::Code), None), 600);
        assert_eq!(
            lengths.expect(Some(0), Some(Profile::Code), Some(100)),
            100,
            "bounded by max_tokens"
        );
        assert_eq!(
            lengths.expect(Some(1), Some(Profile::Chat), None),
            DEFAULT_EXPECTED_OUTPUT,
            "another route"
        );
        let reloaded = OutputLengths::new(3);
        reloaded.adopt(Some(2), &lengths, Some(0));
        assert_eq!(reloaded.expect(Some(2), Some(Profile::Code), None), 600);
    }
}
