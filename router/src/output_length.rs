//! How long answers run, learned per route, backend and use-case profile:
//! the expected output a prediction (and the work a request adds to a
//! backend's queue) is made with. Each backend's own figure, once it has
//! answered enough on the route: models answer the same traffic at
//! different lengths, and a queue costed at another model's length
//! misjudges the wait. A request's own `max_tokens` bounds it.

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

/// One slot per route (and one for requests that name a backend), per
/// backend (and one for the route's answers from any), per profile (and
/// one for none).
#[derive(Debug)]
pub struct OutputLengths {
    routes: usize,
    backends: usize,
    learned: Mutex<Vec<Learned>>,
}

const PROFILE_SLOTS: usize = Profile::ALL.len() + 1;

impl OutputLengths {
    pub fn new(routes: usize, backends: usize) -> Self {
        let slots = (routes + 1) * (backends + 1) * PROFILE_SLOTS;
        OutputLengths {
            routes,
            backends,
            learned: Mutex::new(vec![Learned::default(); slots]),
        }
    }

    /// The first slot of a route's backend (`None`: any backend).
    fn start(&self, route: Option<usize>, backend: Option<usize>) -> usize {
        let route = route.filter(|r| *r < self.routes).unwrap_or(self.routes);
        let backend = backend
            .filter(|b| *b < self.backends)
            .unwrap_or(self.backends);
        (route * (self.backends + 1) + backend) * PROFILE_SLOTS
    }

    fn slot(
        &self,
        route: Option<usize>,
        backend: Option<usize>,
        profile: Option<Profile>,
    ) -> usize {
        let profile = profile.map_or(0, |p| {
            1 + Profile::ALL.iter().position(|q| *q == p).unwrap_or(0)
        });
        self.start(route, backend) + profile
    }

    /// Output tokens a request is expected to produce on `backend`: what
    /// that backend's answers on the route and profile have run to, or the
    /// route's from any backend until it has answered enough, or a typical
    /// reply's length until the route has; never more than its own limit.
    pub fn expect(
        &self,
        route: Option<usize>,
        backend: Option<usize>,
        profile: Option<Profile>,
        max_tokens: Option<u32>,
    ) -> u32 {
        let learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        let own = backend.map(|b| learned[self.slot(route, Some(b), profile)]);
        let any = learned[self.slot(route, None, profile)];
        let typical = match own.filter(|l| l.samples >= MIN_SAMPLES) {
            Some(l) => l.mean.round().max(1.0) as u32,
            None if any.samples >= MIN_SAMPLES => any.mean.round().max(1.0) as u32,
            None => DEFAULT_EXPECTED_OUTPUT,
        };
        max_tokens.map_or(typical, |limit| typical.min(limit.max(1)))
    }

    /// An answer of `tokens` output tokens from `backend` on `route` for
    /// `profile`.
    pub fn observe(
        &self,
        route: Option<usize>,
        backend: usize,
        profile: Option<Profile>,
        tokens: u64,
    ) {
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        for slot in [
            self.slot(route, Some(backend), profile),
            self.slot(route, None, profile),
        ] {
            let entry = &mut learned[slot];
            let tokens = tokens as f64;
            entry.mean = if entry.samples == 0 {
                tokens
            } else {
                ALPHA * tokens + (1.0 - ALPHA) * entry.mean
            };
            entry.samples = entry.samples.saturating_add(1);
        }
    }

    /// Carries what `from` learned of route `theirs` over to route `mine`:
    /// its figure from any backend, and each backend's own when `backends`
    /// (the backends are the same, in the same order).
    pub fn adopt(
        &self,
        mine: Option<usize>,
        from: &OutputLengths,
        theirs: Option<usize>,
        backends: bool,
    ) {
        let mut pairs = vec![(self.start(mine, None), from.start(theirs, None))];
        if backends && self.backends == from.backends {
            pairs.extend(
                (0..self.backends)
                    .map(|b| (self.start(mine, Some(b)), from.start(theirs, Some(b)))),
            );
        }
        let copied: Vec<(usize, Vec<Learned>)> = {
            let learned = from.learned.lock().unwrap_or_else(|p| p.into_inner());
            pairs
                .iter()
                .map(|&(to, at)| (to, learned[at..at + PROFILE_SLOTS].to_vec()))
                .collect()
        };
        let mut learned = self.learned.lock().unwrap_or_else(|p| p.into_inner());
        for (to, slots) in copied {
            learned[to..to + PROFILE_SLOTS].copy_from_slice(&slots);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_teach_the_length_expected_per_route_and_profile() {
        let lengths = OutputLengths::new(2, 2);
        assert_eq!(
            lengths.expect(Some(0), Some(0), Some(Profile::Chat), None),
            DEFAULT_EXPECTED_OUTPUT
        );
        for _ in 0..10 {
            lengths.observe(Some(0), 0, Some(Profile::Chat), 40);
            lengths.observe(Some(0), 0, Some(Profile::Code), 600);
        }
        assert_eq!(
            lengths.expect(Some(0), Some(0), Some(Profile::Chat), None),
            40
        );
        assert_eq!(
            lengths.expect(Some(0), None, Some(Profile::Code), None),
            600
        );
        assert_eq!(
            lengths.expect(Some(0), Some(0), Some(Profile::Code), Some(100)),
            100,
            "bounded by max_tokens"
        );
        assert_eq!(
            lengths.expect(Some(1), Some(0), Some(Profile::Chat), None),
            DEFAULT_EXPECTED_OUTPUT,
            "another route"
        );
        let reloaded = OutputLengths::new(3, 2);
        reloaded.adopt(Some(2), &lengths, Some(0), true);
        assert_eq!(
            reloaded.expect(Some(2), Some(0), Some(Profile::Code), None),
            600
        );
    }

    #[test]
    fn each_backend_answers_at_its_own_length_once_it_has_answered_enough() {
        let lengths = OutputLengths::new(1, 2);
        for _ in 0..10 {
            lengths.observe(Some(0), 0, None, 64);
            lengths.observe(Some(0), 1, None, 32);
        }
        assert_eq!(lengths.expect(Some(0), Some(0), None, None), 64);
        assert_eq!(lengths.expect(Some(0), Some(1), None, None), 32);
        // The route's figure from any backend, for a backend yet unheard.
        let fresh = OutputLengths::new(1, 3);
        fresh.adopt(Some(0), &lengths, Some(0), false);
        let any = fresh.expect(Some(0), Some(2), None, None);
        assert!((32..=64).contains(&any), "{any}");
        assert_eq!(
            fresh.expect(Some(0), Some(0), None, None),
            any,
            "backends not carried over"
        );
    }
}
