//! A circuit breaker per backend: after `failures` consecutive upstream
//! failures it opens and the backend is skipped (its route falls back) for
//! `cooldown`; then one probe request is let through, and its outcome closes
//! or reopens the circuit.
//!
//! Only the backend's faults count (connection failures, timeouts, 5xx,
//! malformed answers, refused gateway credentials); the record that reports
//! them decides which. A fault a request could have caused itself (a prompt
//! that crashes or stalls the server) is attributed to the caller's key, and
//! such faults open the circuit only once they come from more than one key:
//! one tenant's requests cannot take a shared backend away from the rest.
//! A connection failure is nobody's request's doing and counts for all.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use switchyard_policies::BreakerSettings;

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Closed {
        failures: u32,
        /// The key the run of failures started with (a hash of its name).
        first_key: Option<u64>,
        /// The run holds failures from more than one key, or one that no
        /// request could have caused.
        spread: bool,
    },
    Open {
        until: Instant,
        /// Opened by failed health checks (which may close it again), not
        /// by requests' failures (which only a probe request closes).
        by_checks: bool,
    },
    /// A probe is out since `since`; others wait for its outcome.
    HalfOpen { since: Instant },
}

const CLOSED: State = State::Closed {
    failures: 0,
    first_key: None,
    spread: false,
};

/// Who a backend fault is laid to.
#[derive(Debug, Clone, Copy)]
pub enum Blame<'a> {
    /// Nothing a request did (the backend could not be reached), or no key
    /// to tell callers apart (auth is off).
    Backend,
    /// Possibly the request of this key.
    Key(&'a str),
}

pub struct Breaker {
    settings: BreakerSettings,
    state: Mutex<State>,
    /// What the active health checks found, when the backend has them.
    health: Mutex<Health>,
    /// For `/metrics`; kept by the breaker that replaces this one on a
    /// config reload, so the counters never go back.
    transitions: Arc<Transitions>,
}

/// Times a circuit opened (a failed probe reopening it included), and
/// closed again after being open.
#[derive(Default)]
struct Transitions {
    opened: AtomicU64,
    closed: AtomicU64,
}

impl Breaker {
    pub fn new(settings: BreakerSettings) -> Self {
        Breaker {
            settings,
            state: Mutex::new(CLOSED),
            health: Mutex::new(Health::default()),
            transitions: Arc::default(),
        }
    }

    /// A closed breaker with `settings` that goes on counting where
    /// `previous` (the backend's breaker under the config it replaces) left off.
    pub fn continuing(settings: BreakerSettings, previous: &Breaker) -> Self {
        Breaker {
            transitions: previous.transitions.clone(),
            ..Breaker::new(settings)
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
            State::Open { until, .. } if now < until => false,
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
        let mut state = self.lock();
        if !matches!(*state, State::Closed { .. }) {
            self.transitions.closed.fetch_add(1, Ordering::Relaxed);
        }
        *state = CLOSED;
    }

    /// A call that said nothing about the backend's health (the caller's
    /// bad request, a client that left): a probe that ended so frees the
    /// way for the next request to probe, rather than holding the circuit
    /// half-open until the cooldown passes.
    pub fn inconclusive(&self) {
        let mut state = self.lock();
        if let State::HalfOpen { .. } = *state {
            *state = State::Open {
                until: Instant::now(),
                by_checks: false,
            };
        }
    }

    pub fn failure(&self, blame: Blame<'_>) {
        let mut state = self.lock();
        let open = State::Open {
            until: Instant::now() + self.settings.cooldown,
            by_checks: false,
        };
        let was_open = matches!(*state, State::Open { .. });
        *state = match *state {
            State::Closed {
                failures,
                first_key,
                spread,
            } => {
                let (first_key, spread) = match blame {
                    Blame::Backend => (first_key, true),
                    Blame::Key(name) => {
                        let key = key_hash(name);
                        (
                            first_key.or(Some(key)),
                            spread || first_key.is_some_and(|first| first != key),
                        )
                    }
                };
                let failures = failures + 1;
                if failures >= self.settings.failures && spread {
                    open
                } else {
                    State::Closed {
                        failures,
                        first_key,
                        spread,
                    }
                }
            }
            // A failed probe reopens.
            State::Open { .. } | State::HalfOpen { .. } => open,
        };
        if !was_open && matches!(*state, State::Open { .. }) {
            self.transitions.opened.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How many times the circuit opened, and closed again.
    pub fn transitions(&self) -> (u64, u64) {
        (
            self.transitions.opened.load(Ordering::Relaxed),
            self.transitions.closed.load(Ordering::Relaxed),
        )
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

/// The active health checks' view of a backend, for `/readyz`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Health {
    /// `unchecked` (no answer yet), `healthy` or `unhealthy`.
    pub state: &'static str,
    pub failures_in_a_row: u32,
    pub answers_in_a_row: u32,
    /// The last failed check's cause.
    pub last_error: Option<String>,
    /// When the last check ended, Unix milliseconds.
    pub checked_ms: Option<i64>,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            state: "unchecked",
            failures_in_a_row: 0,
            answers_in_a_row: 0,
            last_error: None,
            checked_ms: None,
        }
    }
}

impl Breaker {
    /// An active health check's outcome: `unhealthy_after` failures in a
    /// row open the circuit and hold it open (each failed check pushes the
    /// reopening `hold` further off), and `healthy_after` answers in a row
    /// close it again. A circuit opened by requests' failures is not closed
    /// by a check: the server answering its cheap question does not mean
    /// requests succeed.
    pub fn checked(
        &self,
        outcome: Result<(), String>,
        (unhealthy_after, healthy_after): (u32, u32),
        hold: std::time::Duration,
        now_ms: i64,
    ) {
        let mut health = self.health.lock().unwrap_or_else(|p| p.into_inner());
        health.checked_ms = Some(now_ms);
        match outcome {
            Err(err) => {
                health.failures_in_a_row += 1;
                health.answers_in_a_row = 0;
                health.last_error = Some(err);
                if health.failures_in_a_row >= unhealthy_after {
                    health.state = "unhealthy";
                    let mut state = self.lock();
                    let held = Instant::now() + hold;
                    *state = match *state {
                        // Requests' failures opened it: their cooldown
                        // stands, or the checks' hold if that is longer.
                        State::Open {
                            until,
                            by_checks: false,
                        } => State::Open {
                            until: until.max(held),
                            by_checks: false,
                        },
                        State::Open { .. } => State::Open {
                            until: held,
                            by_checks: true,
                        },
                        State::Closed { .. } | State::HalfOpen { .. } => {
                            self.transitions.opened.fetch_add(1, Ordering::Relaxed);
                            State::Open {
                                until: held,
                                by_checks: true,
                            }
                        }
                    };
                }
            }
            Ok(()) => {
                health.answers_in_a_row += 1;
                health.failures_in_a_row = 0;
                match health.state {
                    "unhealthy" if health.answers_in_a_row >= healthy_after => {
                        health.state = "healthy";
                        drop(health);
                        // Only what the checks opened: a server that lists
                        // its models may still fail to generate.
                        let opened_by_checks = matches!(
                            *self.lock(),
                            State::Open {
                                by_checks: true,
                                ..
                            }
                        );
                        if opened_by_checks {
                            self.success();
                        }
                    }
                    "unhealthy" => {}
                    _ => health.state = "healthy",
                }
            }
        }
    }

    /// The health checks' view (`unchecked` for a backend without them).
    pub fn health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn key_hash(name: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    name.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn health_checks_open_after_failures_in_a_row_and_close_after_answers() {
        let breaker = Breaker::new(BreakerSettings::default());
        let hold = std::time::Duration::from_secs(60);
        let fail = || Err("connection refused".to_owned());
        breaker.checked(Ok(()), (2, 2), hold, 1);
        assert_eq!(breaker.health().state, "healthy");
        breaker.checked(fail(), (2, 2), hold, 2);
        assert!(breaker.allow(), "one failure is not enough");
        breaker.checked(fail(), (2, 2), hold, 3);
        assert!(!breaker.allow());
        assert_eq!(breaker.state(), "open");
        let health = breaker.health();
        assert_eq!((health.state, health.failures_in_a_row), ("unhealthy", 2));
        assert_eq!(health.last_error.as_deref(), Some("connection refused"));
        breaker.checked(Ok(()), (2, 2), hold, 4);
        assert_eq!(breaker.state(), "open", "one answer is not enough");
        breaker.checked(Ok(()), (2, 2), hold, 5);
        assert_eq!(
            (breaker.state(), breaker.health().state),
            ("closed", "healthy")
        );
        assert_eq!(breaker.transitions(), (1, 1));
    }

    #[test]
    fn opens_after_failures_and_recovers_through_a_probe() {
        let breaker = Breaker::new(BreakerSettings {
            failures: 3,
            cooldown: Duration::from_millis(30),
        });
        breaker.failure(Blame::Backend);
        breaker.failure(Blame::Backend);
        assert!(breaker.allow(), "two failures: still closed");
        breaker.success();
        assert_eq!(breaker.transitions(), (0, 0), "it never opened");
        for _ in 0..3 {
            breaker.failure(Blame::Backend);
        }
        assert_eq!(breaker.state(), "open");
        assert!(!breaker.allow());
        std::thread::sleep(Duration::from_millis(40));
        assert!(breaker.allow(), "the probe goes through");
        assert!(!breaker.allow(), "only one probe at a time");
        breaker.failure(Blame::Backend);
        assert_eq!(breaker.state(), "open", "a failed probe reopens");
        std::thread::sleep(Duration::from_millis(40));
        assert!(breaker.allow());
        breaker.success();
        assert_eq!(breaker.state(), "closed");
        assert!(breaker.allow() && breaker.allow());
        assert_eq!(breaker.transitions(), (2, 1), "opened, reopened, closed");
    }

    fn three_failures() -> Breaker {
        Breaker::new(BreakerSettings {
            failures: 3,
            cooldown: Duration::from_millis(30),
        })
    }

    #[test]
    fn one_keys_faults_alone_never_open_it() {
        let breaker = three_failures();
        for _ in 0..10 {
            breaker.failure(Blame::Key("mallory"));
        }
        assert_eq!(breaker.state(), "closed", "one tenant cannot trip it");
        breaker.failure(Blame::Key("alice"));
        assert_eq!(breaker.state(), "open", "a second key's fault confirms it");
        let breaker = three_failures();
        breaker.failure(Blame::Key("mallory"));
        breaker.failure(Blame::Key("mallory"));
        breaker.failure(Blame::Backend);
        assert_eq!(
            breaker.state(),
            "open",
            "an unreachable backend is nobody's doing"
        );
    }

    #[test]
    fn an_inconclusive_probe_lets_the_next_one_through() {
        let breaker = three_failures();
        for _ in 0..3 {
            breaker.failure(Blame::Backend);
        }
        std::thread::sleep(Duration::from_millis(40));
        assert!(breaker.allow(), "the probe");
        assert!(!breaker.allow());
        breaker.inconclusive();
        assert!(
            breaker.allow(),
            "the probe's 400 said nothing; another may probe"
        );
    }
}
