//! A circuit breaker per backend: after `failures` consecutive upstream
//! failures it opens and the backend is skipped (its route falls back) for
//! `cooldown`; then one probe request is let through, and its outcome closes
//! or reopens the circuit.

use std::sync::Mutex;
use std::time::Instant;

use switchyard_policies::BreakerSettings;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// A probe is out since `since`; others wait for its outcome.
    HalfOpen {
        since: Instant,
    },
}

pub struct Breaker {
    settings: BreakerSettings,
    state: Mutex<State>,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Self {
        Breaker {
            settings,
            state: Mutex::new(State::Closed { failures: 0 }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a request may go to the backend now.
    pub fn allow(&self) -> bool {
        let now = Instant::now();
        let mut state = self.lock();
        match *state {
            State::Closed { .. } => true,
            State::Open { until } if now < until => false,
            // A probe that never reported (its client left) does not hold
            // the circuit half-open for ever.
            State::HalfOpen { since } if now.duration_since(since) < self.settings.cooldown => {
                false
            }
            State::Open { .. } | State::HalfOpen { .. } => {
                *state = State::HalfOpen { since: now };
                true
            }
        }
    }

    pub fn success(&self) {
        *self.lock() = State::Closed { failures: 0 };
    }

    pub fn failure(&self) {
        let mut state = self.lock();
        let open = State::Open {
            until: Instant::now() + self.settings.cooldown,
        };
        *state = match *state {
            State::Closed { failures } if failures + 1 < self.settings.failures => State::Closed {
                failures: failures + 1,
            },
            _ => open,
        };
    }

    /// `closed`, `open` or `half-open`, for logs and tests.
    pub fn state(&self) -> &'static str {
        match *self.lock() {
            State::Closed { .. } => "closed",
            State::Open { .. } => "open",
            State::HalfOpen { .. } => "half-open",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn opens_after_failures_and_recovers_through_a_probe() {
        let breaker = Breaker::new(BreakerSettings {
            failures: 3,
            cooldown: Duration::from_millis(30),
        });
        breaker.failure();
        breaker.failure();
        assert!(breaker.allow(), "two failures: still closed");
        breaker.success();
        for _ in 0..3 {
            breaker.failure();
        }
        assert_eq!(breaker.state(), "open");
        assert!(!breaker.allow());
        std::thread::sleep(Duration::from_millis(40));
        assert!(breaker.allow(), "the probe goes through");
        assert!(!breaker.allow(), "only one probe at a time");
        breaker.failure();
        assert_eq!(breaker.state(), "open", "a failed probe reopens");
        std::thread::sleep(Duration::from_millis(40));
        assert!(breaker.allow());
        breaker.success();
        assert_eq!(breaker.state(), "closed");
        assert!(breaker.allow() && breaker.allow());
    }
}
