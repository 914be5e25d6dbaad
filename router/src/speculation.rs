//! Speculative-decoding acceptance per backend and prompt class: how many
//! drafted tokens the target model kept. Drafting pays only when most drafts
//! are kept, and that depends on what is written (code far more than prose),
//! so a route may stop drafting for a class whose acceptance is poor.

use std::sync::{Arc, Mutex};

use switchyard_policies::PromptClass;

/// Drafted tokens seen before acceptance is trusted.
const TRUSTED_AFTER_DRAFTED: u64 = 256;
/// While drafting is off for a class, one request in this many still drafts,
/// so a recovery is noticed.
const REPROBE_EVERY: u32 = 16;
/// Weight of the newest request in the recent acceptance rate.
const RECENT_WEIGHT: f64 = 0.2;

/// One backend's figures for one prompt class.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ClassAcceptance {
    /// Requests that drafted anything.
    pub requests: u64,
    pub drafted: u64,
    pub accepted: u64,
    /// Acceptance over recent requests, weighted towards the newest.
    pub recent: Option<f64>,
    #[serde(skip)]
    skipped: u32,
}

impl ClassAcceptance {
    /// Accepted / drafted over all requests.
    pub fn rate(&self) -> Option<f64> {
        (self.drafted > 0).then(|| self.accepted as f64 / self.drafted as f64)
    }
}

pub struct SpeculationStats {
    /// Per backend; shared with the next config on reload.
    cells: Vec<Arc<[Mutex<ClassAcceptance>; 2]>>,
}

impl SpeculationStats {
    pub fn new(backends: usize) -> Self {
        SpeculationStats {
            cells: (0..backends)
                .map(|_| Arc::new([Mutex::default(), Mutex::default()]))
                .collect(),
        }
    }

    /// Backend `backend` keeps `from`'s figures for `theirs` (the same
    /// backend under a previous config).
    pub fn adopt(&mut self, backend: usize, from: &SpeculationStats, theirs: usize) {
        if let (Some(mine), Some(cells)) = (self.cells.get_mut(backend), from.cells.get(theirs)) {
            mine.clone_from(cells);
        }
    }

    fn with<T>(
        &self,
        backend: usize,
        class: PromptClass,
        f: impl FnOnce(&mut ClassAcceptance) -> T,
    ) -> Option<T> {
        let cell = self.cells.get(backend)?.get(class.index())?;
        let mut cell = cell.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&mut cell))
    }

    /// One request's drafts (llama.cpp `timings.draft_n` and
    /// `draft_n_accepted`).
    pub fn observe(&self, backend: usize, class: PromptClass, drafted: u64, accepted: u64) {
        if drafted == 0 {
            return;
        }
        let accepted = accepted.min(drafted);
        self.with(backend, class, |c| {
            c.requests += 1;
            c.drafted += drafted;
            c.accepted += accepted;
            let rate = accepted as f64 / drafted as f64;
            c.recent = Some(match c.recent {
                None => rate,
                Some(r) => r + RECENT_WEIGHT * (rate - r),
            });
        });
    }

    pub fn get(&self, backend: usize, class: PromptClass) -> ClassAcceptance {
        self.with(backend, class, |c| *c).unwrap_or_default()
    }

    /// Whether this request should draft, given the route's floor: yes
    /// until enough drafts were seen, yes while recent acceptance meets the
    /// floor, and otherwise only as an occasional re-probe.
    pub fn should_draft(&self, backend: usize, class: PromptClass, min_acceptance: f64) -> bool {
        self.with(backend, class, |c| {
            let poor =
                c.drafted >= TRUSTED_AFTER_DRAFTED && c.recent.is_some_and(|r| r < min_acceptance);
            if !poor {
                return true;
            }
            c.skipped += 1;
            if c.skipped >= REPROBE_EVERY {
                c.skipped = 0;
                return true;
            }
            false
        })
        .unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poor_acceptance_stops_drafting_for_that_class_only() {
        let stats = SpeculationStats::new(1);
        for _ in 0..20 {
            stats.observe(0, PromptClass::Prose, 32, 4);
            stats.observe(0, PromptClass::Code, 32, 28);
        }
        assert!(stats.should_draft(0, PromptClass::Code, 0.5));
        let drafted: Vec<bool> = (0..32)
            .map(|_| stats.should_draft(0, PromptClass::Prose, 0.5))
            .collect();
        // Off, but re-probed once per REPROBE_EVERY requests.
        assert_eq!(drafted.iter().filter(|d| **d).count(), 2);
        let prose = stats.get(0, PromptClass::Prose);
        assert_eq!((prose.drafted, prose.accepted), (640, 80));
        assert_eq!(prose.rate(), Some(0.125));
    }

    #[test]
    fn a_recovery_turns_drafting_back_on() {
        let stats = SpeculationStats::new(1);
        for _ in 0..20 {
            stats.observe(0, PromptClass::Prose, 32, 4);
        }
        assert!(!stats.should_draft(0, PromptClass::Prose, 0.5));
        for _ in 0..10 {
            stats.observe(0, PromptClass::Prose, 32, 30);
        }
        assert!(stats.should_draft(0, PromptClass::Prose, 0.5));
    }

    #[test]
    fn too_few_drafts_are_not_judged() {
        let stats = SpeculationStats::new(1);
        stats.observe(0, PromptClass::Prose, 16, 0);
        assert!(stats.should_draft(0, PromptClass::Prose, 0.9));
        // Unknown backends draft (nothing is known against them).
        assert!(stats.should_draft(7, PromptClass::Code, 0.9));
    }
}
