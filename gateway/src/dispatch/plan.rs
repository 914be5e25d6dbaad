//! The order of a request's tries: which backend is next, whether a try is
//! a retry or a fallback, what the receipt's reason becomes, and where a
//! refusal or a failure leads. No I/O: dispatch's choices are decided (and
//! unit-tested) here, and carried out in `attempts`.

use std::collections::VecDeque;

use switchyard_router::Reason;

/// The tries left and made for one request.
pub struct Plan {
    targets: VecDeque<usize>,
    tried: Vec<usize>,
    retries: u32,
    retries_used: u32,
}

/// One try: the backend, and where it stands in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Try {
    pub backend: usize,
    /// Nothing is left to try after it.
    pub is_last: bool,
    /// The same backend again after a retryable failure.
    pub retrying: bool,
    /// The request's first backend (retries of it included).
    pub first: bool,
}

/// How a call is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Raced against the next backend.
    Hedged,
    Whole,
    Stream,
    /// Streamed, but held back whole for a cascade's check.
    Collected,
}

/// Why a backend call was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A spent budget; `downgrade`: its policy sends the request to local
    /// backends instead.
    Budget { downgrade: bool },
    /// An open circuit or a full backend: another backend may take it.
    Unavailable,
    /// Refused for the request itself (rate limits, the key's access).
    Refused,
}

/// Where a refusal or a failure leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// The same backend again, as retry number `attempt` (1-based).
    Retry { attempt: u32 },
    /// The next backend in the plan.
    MoveOn,
    /// Local backends instead of the rest (a spent cloud budget).
    Downgrade,
    /// The request fails with this error.
    GiveUp,
}

impl Plan {
    pub fn new(targets: impl IntoIterator<Item = usize>, retries: u32) -> Self {
        Plan {
            targets: targets.into_iter().collect(),
            tried: Vec::new(),
            retries,
            retries_used: 0,
        }
    }

    /// The next try. Moving on from a backend already tried makes the
    /// receipt's reason `fallback`, unless a cascade escalated or a budget
    /// downgraded (those reasons say more); a retry keeps the reason.
    pub fn next(&mut self, reason: &mut Reason) -> Option<Try> {
        let backend = self.targets.pop_front()?;
        let retrying = self.tried.last() == Some(&backend);
        if !retrying {
            self.retries_used = 0;
            if !self.tried.is_empty()
                && !matches!(reason, Reason::CascadeEscalated | Reason::BudgetDowngrade)
            {
                *reason = Reason::Fallback;
            }
            self.tried.push(backend);
        }
        Some(Try {
            backend,
            is_last: self.targets.is_empty(),
            retrying,
            first: self.tried.len() == 1,
        })
    }

    /// The backends tried so far, in order.
    pub fn tried(&self) -> &[usize] {
        &self.tried
    }

    /// The backend after the current one, if any (what a hedge races).
    pub fn upcoming(&self) -> Option<usize> {
        self.targets.front().copied()
    }

    /// Keeps only the backends left to try that `keep` accepts (those
    /// whose context window holds the request, after one refused it).
    pub fn retain(&mut self, keep: impl Fn(usize) -> bool) {
        self.targets.retain(|&b| keep(b));
    }

    /// Local backends take the place of what was left (a spent cloud
    /// budget that downgrades).
    pub fn downgrade_to(&mut self, locals: VecDeque<usize>) {
        self.targets = locals;
    }

    /// Where a refused admission leads.
    pub fn after_refusal(&self, refusal: Refusal, backend_is_cloud: bool, is_last: bool) -> Next {
        match refusal {
            Refusal::Budget { downgrade: true } if backend_is_cloud => Next::Downgrade,
            Refusal::Budget { .. } | Refusal::Refused => Next::GiveUp,
            Refusal::Unavailable if is_last => Next::GiveUp,
            Refusal::Unavailable => Next::MoveOn,
        }
    }

    /// Where a failed call leads: a retryable failure is retried on the
    /// same backend while the route's retries last, then moves on; refused
    /// credentials (`upstream_auth`) are that backend's alone, so they move
    /// on at once; anything else, or the last backend, fails the request.
    pub fn after_failure(
        &mut self,
        backend: usize,
        retryable: bool,
        kind: &str,
        is_last: bool,
    ) -> Next {
        if retryable && self.retries_used < self.retries {
            self.retries_used += 1;
            self.targets.push_front(backend);
            return Next::Retry {
                attempt: self.retries_used,
            };
        }
        if (retryable || kind == "upstream_auth") && !is_last {
            return Next::MoveOn;
        }
        Next::GiveUp
    }
}

/// How to call: a cascade that checks this answer collects a stream first;
/// a route that hedges races the first backend with the next (never with
/// a check, and never on a retry).
pub fn mode(streaming: bool, checked: bool, hedged: bool) -> Mode {
    match (streaming, checked, hedged) {
        (_, false, true) => Mode::Hedged,
        (false, _, _) => Mode::Whole,
        (true, false, _) => Mode::Stream,
        (true, true, _) => Mode::Collected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_on_is_a_fallback_and_a_retry_keeps_the_reason() {
        let mut plan = Plan::new([2, 5], 1);
        let mut reason = Reason::Split;
        let first = plan.next(&mut reason).unwrap();
        assert_eq!(
            first,
            Try {
                backend: 2,
                is_last: false,
                retrying: false,
                first: true
            }
        );
        assert_eq!(reason, Reason::Split);
        assert_eq!(
            plan.after_failure(2, true, "upstream_reset", false),
            Next::Retry { attempt: 1 }
        );
        let retry = plan.next(&mut reason).unwrap();
        assert!(retry.retrying && retry.first && retry.backend == 2);
        assert_eq!(reason, Reason::Split, "a retry is not a fallback");
        // Retries spent: the next failure moves on.
        assert_eq!(
            plan.after_failure(2, true, "upstream_reset", false),
            Next::MoveOn
        );
        let second = plan.next(&mut reason).unwrap();
        assert_eq!(second.backend, 5);
        assert!(second.is_last && !second.first && !second.retrying);
        assert_eq!(reason, Reason::Fallback);
        assert_eq!(plan.tried(), &[2, 5]);
        // Retries start again on a new backend, then the last one fails.
        assert_eq!(
            plan.after_failure(5, true, "upstream_reset", true),
            Next::Retry { attempt: 1 }
        );
        plan.next(&mut reason);
        assert_eq!(
            plan.after_failure(5, true, "upstream_reset", true),
            Next::GiveUp
        );
        assert!(plan.next(&mut reason).is_none());
    }

    #[test]
    fn escalation_and_downgrade_keep_their_reason_when_moving_on() {
        for kept in [Reason::CascadeEscalated, Reason::BudgetDowngrade] {
            let mut plan = Plan::new([0, 1], 0);
            let mut reason = Reason::Split;
            plan.next(&mut reason);
            reason = kept;
            plan.next(&mut reason);
            assert_eq!(reason, kept);
        }
    }

    #[test]
    fn refused_credentials_move_on_and_other_client_errors_fail() {
        let mut plan = Plan::new([0, 1], 3);
        let mut reason = Reason::Split;
        plan.next(&mut reason);
        assert_eq!(
            plan.after_failure(0, false, "upstream_auth", false),
            Next::MoveOn
        );
        assert_eq!(
            plan.after_failure(0, false, "upstream_client", false),
            Next::GiveUp
        );
        assert_eq!(
            plan.after_failure(0, false, "upstream_auth", true),
            Next::GiveUp
        );
    }

    #[test]
    fn refusals_downgrade_move_on_or_fail() {
        let plan = Plan::new([0, 1], 0);
        let budget = |downgrade| Refusal::Budget { downgrade };
        assert_eq!(
            plan.after_refusal(budget(true), true, false),
            Next::Downgrade
        );
        assert_eq!(
            plan.after_refusal(budget(true), false, false),
            Next::GiveUp,
            "a local backend's refusal is final"
        );
        assert_eq!(plan.after_refusal(budget(false), true, false), Next::GiveUp);
        assert_eq!(
            plan.after_refusal(Refusal::Unavailable, true, false),
            Next::MoveOn
        );
        assert_eq!(
            plan.after_refusal(Refusal::Unavailable, true, true),
            Next::GiveUp
        );
        assert_eq!(
            plan.after_refusal(Refusal::Refused, true, false),
            Next::GiveUp
        );
    }

    #[test]
    fn a_downgrade_replaces_what_is_left_and_upcoming_is_what_a_hedge_races() {
        let mut plan = Plan::new([0, 1, 2], 0);
        let mut reason = Reason::Split;
        plan.next(&mut reason);
        assert_eq!(plan.upcoming(), Some(1));
        plan.downgrade_to(VecDeque::from([7]));
        assert_eq!(plan.upcoming(), Some(7));
        assert_eq!(plan.next(&mut reason).unwrap().backend, 7);
    }

    #[test]
    fn checks_collect_streams_and_hedges_only_race_unchecked_calls() {
        assert_eq!(mode(true, false, true), Mode::Hedged);
        assert_eq!(mode(false, false, true), Mode::Hedged);
        assert_eq!(mode(true, true, true), Mode::Collected);
        assert_eq!(mode(false, true, false), Mode::Whole);
        assert_eq!(mode(true, false, false), Mode::Stream);
    }
}
