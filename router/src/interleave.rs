//! Splits hold their weights: a route's requests are dealt out to its
//! split's backends in a deterministic interleaving, not drawn at random
//! per request. Each request goes to the backend furthest below its weight
//! of the route's requests so far, so every backend's count stays within
//! one request of its weight times the count: over any 200 requests a 20%
//! backend gets 40, give or take two.
//!
//! A sticky split's session keeps its backend only while that backend is
//! at most [`SLACK`] requests past its weight; past that, this one request
//! goes to the backend furthest below. So with eight sessions on an 80/20
//! split, the session that lands on the 20% backend cannot hold the split
//! at 12%: the others' requests move over to it as far as the share needs,
//! and a session's prefix cache stays warm only as far as the share allows.
//!
//! Counts are per replica and exact (not decayed): the interleaving never
//! lets them drift apart, so there is no old imbalance to forget. They are
//! kept by route name across config rebuilds (a reload, a key made through
//! the admin API) while the route's weights stay the same, so frequent
//! rebuilds do not restart the dealing; new weights start it afresh (old
//! counts against new weights would starve a backend whose share shrank).

use std::sync::{Arc, Mutex};

use crate::split::SplitPolicy;

/// Requests a session's backend may run past its weight before the
/// session's request goes elsewhere: two, so the share over any 200
/// requests stays within 3 points while a session moves seldom when its
/// id already spread it where the weights want.
pub const SLACK: f64 = 2.0;

/// Each route's requests so far per backend.
#[derive(Debug, Default)]
pub struct Interleave {
    routes: Mutex<crate::NameMap<Arc<str>, Dealt>>,
}

#[derive(Debug, Default)]
struct Dealt {
    /// The weights dealt to (`None` before the first request).
    split: Option<SplitPolicy>,
    /// `(backend, requests)`.
    per_backend: Vec<(usize, u64)>,
    total: u64,
}

impl Dealt {
    fn add(&mut self, backend: usize) {
        self.total += 1;
        match self.per_backend.iter_mut().find(|(b, _)| *b == backend) {
            Some((_, n)) => *n += 1,
            None => self.per_backend.push((backend, 1)),
        }
    }

    fn count(&self, backend: usize) -> u64 {
        self.per_backend
            .iter()
            .find(|(b, _)| *b == backend)
            .map_or(0, |(_, n)| *n)
    }
}

impl Interleave {
    /// The backend for `route`'s next request under `split`: `preferred`
    /// (a sticky session's) while it is within [`SLACK`] of its weight, else
    /// the backend furthest below its weight; and whether `preferred` was
    /// passed over. Counted when `count` (explaining a decision is not a
    /// request).
    pub fn deal(
        &self,
        route: &Arc<str>,
        split: &SplitPolicy,
        preferred: Option<usize>,
        count: bool,
    ) -> (usize, bool) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let dealt = dealt(&mut routes, route, split);
        let next = (dealt.total + 1) as f64;
        let over = |backend: usize, weight: f64| (dealt.count(backend) + 1) as f64 - weight * next;
        let kept = preferred.filter(|p| {
            let weight = split
                .share_iter()
                .find(|(b, _)| b == p)
                .map_or(0.0, |(_, w)| w);
            over(*p, weight) <= SLACK
        });
        let chosen = kept.unwrap_or_else(|| {
            split
                .share_iter()
                .map(|(b, w)| (b, over(b, w)))
                // The least over (the furthest below); ties to the first.
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .map_or(0, |(b, _)| b)
        });
        if count {
            dealt.add(chosen);
        }
        (chosen, preferred.is_some_and(|p| p != chosen))
    }
}

impl Interleave {
    /// Counts a request of `route`'s that went to `backend` for another
    /// reason (a sticky session moved to meet its latency budget).
    pub fn record(&self, route: &Arc<str>, split: &SplitPolicy, backend: usize) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        dealt(&mut routes, route, split).add(backend);
    }
}

/// The route's counts, made on its first request (the map is as large as
/// the config's routes: an entry per name ever configured).
/// Started afresh when the route's weights are not those it was dealt to.
fn dealt<'a>(
    routes: &'a mut crate::NameMap<Arc<str>, Dealt>,
    route: &Arc<str>,
    split: &SplitPolicy,
) -> &'a mut Dealt {
    let dealt = routes.entry(route.clone()).or_default();
    if dealt.split.as_ref() != Some(split) {
        *dealt = Dealt {
            split: Some(split.clone()),
            ..Dealt::default()
        };
    }
    dealt
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::split::unit_from_key;

    /// The largest gap, over every window of `window` requests, between a
    /// backend's count and its weight's.
    fn worst_window(picks: &[usize], backend: usize, weight: f64, window: usize) -> f64 {
        picks
            .windows(window)
            .map(|w| {
                let n = w.iter().filter(|b| **b == backend).count() as f64;
                (n - weight * window as f64).abs()
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn a_plain_split_is_dealt_to_its_weights_in_every_window() {
        let a: Arc<str> = Arc::from("a");
        let deal = Interleave::default();
        let split = SplitPolicy::new([(0, 40.0), (1, 40.0), (2, 20.0)]).unwrap();
        let picks: Vec<usize> = (0..2000)
            .map(|_| deal.deal(&a, &split, None, true).0)
            .collect();
        for (backend, weight) in [(0, 0.4), (1, 0.4), (2, 0.2)] {
            let gap = worst_window(&picks, backend, weight, 200);
            assert!(
                gap <= 2.0,
                "backend {backend}: {gap} requests off in some 200"
            );
        }
    }

    #[test]
    fn eight_sessions_on_80_20_hold_20_percent_in_every_200() {
        let split = SplitPolicy::new([(0, 80.0), (1, 20.0)]).unwrap();
        // Whatever ids the eight sessions have: several sets of them.
        for set in 0..20 {
            let a: Arc<str> = Arc::from("a");
            let deal = Interleave::default();
            let sessions: Vec<usize> = (0..8)
                .map(|i| split.pick(unit_from_key(&format!("set-{set}-session-{i}"))))
                .collect();
            let picks: Vec<usize> = (0..1000)
                .map(|i| deal.deal(&a, &split, Some(sessions[i % 8]), true).0)
                .collect();
            let gap = worst_window(&picks, 1, 0.2, 200);
            assert!(
                gap <= 6.0,
                "set {set} ({sessions:?}): {gap} requests off 40 in some 200"
            );
        }
    }

    #[test]
    fn sessions_where_the_weights_want_them_keep_their_backend() {
        let split = SplitPolicy::new([(0, 80.0), (1, 20.0)]).unwrap();
        let a: Arc<str> = Arc::from("a");
        let deal = Interleave::default();
        // Four sessions on 0 and one on 1, taking turns: already 80/20.
        let sessions = [0, 0, 0, 0, 1];
        let moved = (0..1000)
            .filter(|i| deal.deal(&a, &split, Some(sessions[i % 5]), true).1)
            .count();
        assert_eq!(moved, 0);
    }

    #[test]
    fn explaining_counts_nothing_and_routes_are_dealt_apart() {
        let split = SplitPolicy::new([(0, 50.0), (1, 50.0)]).unwrap();
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("a"), Arc::from("b"));
        let deal = Interleave::default();
        assert_eq!(deal.deal(&a, &split, None, false), (0, false));
        assert_eq!(deal.deal(&a, &split, None, true), (0, false));
        assert_eq!(deal.deal(&a, &split, None, true), (1, false));
        assert_eq!(deal.deal(&b, &split, None, true), (0, false));
    }

    #[test]
    fn new_weights_deal_afresh() {
        let a: Arc<str> = Arc::from("a");
        let deal = Interleave::default();
        let even = SplitPolicy::new([(0, 50.0), (1, 50.0)]).unwrap();
        for _ in 0..100 {
            deal.deal(&a, &even, Some(0), true);
        }
        // Backend 0 had far more than a tenth: under 90/10 it still gets
        // its tenth from the start.
        let tilted = SplitPolicy::new([(0, 10.0), (1, 90.0)]).unwrap();
        let zeros = (0..20)
            .filter(|_| deal.deal(&a, &tilted, None, true).0 == 0)
            .count();
        assert_eq!(zeros, 2);
    }
}
