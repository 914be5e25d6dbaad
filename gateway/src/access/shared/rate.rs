//! Requests and tokens per minute in Redis: governor's GCRA, in one
//! script per request for both limits, so every replica counts against
//! one minute.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use switchyard_policies::Auth;

use super::settler::{Settlement, rate_script};
use super::store::{RedisStore, StateError};

/// A key's allowances as configured.
#[derive(Debug, Clone, Copy)]
pub struct Allowance {
    pub requests_per_minute: Option<u32>,
    pub tokens_per_minute: Option<u32>,
}

pub struct SharedRates {
    store: Arc<RedisStore>,
    by_key: HashMap<String, Allowance>,
}

/// Why a shared limiter refused.
#[derive(Debug, PartialEq)]
pub enum RateRefusal {
    Requests {
        wait: Duration,
    },
    Tokens {
        wait: Duration,
        owed: bool,
    },
    /// The request alone asks for more than a minute's tokens.
    TooLarge,
}

/// Microseconds one unit of a per-minute allowance earns.
fn unit_us(per_minute: Option<u32>) -> f64 {
    per_minute
        .filter(|n| *n > 0)
        .map_or(0.0, |n| 60e6 / f64::from(n))
}

impl SharedRates {
    pub fn new(store: Arc<RedisStore>, auth: &Auth) -> SharedRates {
        let by_key = auth
            .keys
            .iter()
            .map(|k| {
                let allowance = Allowance {
                    requests_per_minute: k.requests_per_minute,
                    tokens_per_minute: k.tokens_per_minute,
                };
                (k.name.clone(), allowance)
            })
            .collect();
        SharedRates { store, by_key }
    }

    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    /// Whether `key` has any limit here.
    pub fn limits(&self, key: &str) -> bool {
        self.by_key.get(key).is_some_and(|a| {
            a.requests_per_minute.is_some_and(|n| n > 0)
                || a.tokens_per_minute.is_some_and(|n| n > 0)
        })
    }

    fn limiter(&self, key: &str, what: &str) -> String {
        self.store.key(&format!("rl:{key}:{what}"))
    }

    /// Counts one request and its estimated `tokens` against `key`'s
    /// limits, at `now_us` (0: Redis's clock).
    pub async fn admit(
        &self,
        key: &str,
        tokens: u32,
        now_us: u64,
    ) -> Result<Result<(), RateRefusal>, StateError> {
        let Some(allowance) = self.by_key.get(key) else {
            return Ok(Ok(()));
        };
        let mut invocation = rate_script().prepare_invoke();
        invocation
            .key(self.limiter(key, "rpm"))
            .key(self.limiter(key, "tpm"))
            .arg(now_us)
            .arg(unit_us(allowance.requests_per_minute))
            .arg(allowance.requests_per_minute.unwrap_or(0))
            .arg(unit_us(allowance.tokens_per_minute))
            .arg(allowance.tokens_per_minute.unwrap_or(0))
            .arg(tokens)
            .arg("admit");
        let reply: Vec<i64> = self.store.run(&invocation).await?;
        let wait = |us: i64| Duration::from_micros(u64::try_from(us).unwrap_or(0));
        Ok(match reply.as_slice() {
            [1, ..] => Ok(()),
            [0, 1, us, ..] => Err(RateRefusal::Requests { wait: wait(*us) }),
            [0, 2, us, owed] => Err(RateRefusal::Tokens {
                wait: wait(*us),
                owed: *owed == 1,
            }),
            [-1, ..] => Err(RateRefusal::TooLarge),
            _ => {
                tracing::error!(?reply, "unexpected reply from the rate script");
                return Err(StateError::Unavailable);
            }
        })
    }

    /// Counts tokens used beyond the estimate (off the answer's latency).
    pub fn owe(&self, key: &str, tokens: u64) {
        let Some(per_minute) = self.by_key.get(key).and_then(|a| a.tokens_per_minute) else {
            return;
        };
        if tokens > 0 && per_minute > 0 {
            self.store.settle(Settlement::TokenDebt {
                limiter: self.limiter(key, "tpm"),
                t_us: unit_us(Some(per_minute)),
                tokens,
            });
        }
    }
}
