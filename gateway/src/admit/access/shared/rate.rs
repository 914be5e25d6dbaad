//! Requests and tokens per minute in Redis, per key and per team:
//! governor's GCRA, in Lua, so every replica counts against one minute. A
//! request's check waits in a [`RateTicket`] for its first reservation,
//! and both go to Redis in one round trip; a request with no budget to
//! reserve sends it alone.

use std::collections::HashMap;
use std::sync::Arc;

use redis::ScriptInvocation;
use switchyard_policies::{Auth, VirtualKey};

use crate::admit::access::holders::{holders_of, limited_holders};
use crate::admit::access::shared::scripts::{RATE, RateRefusal, Reply};
use crate::admit::access::shared::settler::Settlement;
use crate::admit::access::shared::store::{RedisStore, StateError};

/// A holder's allowances as configured (0: no limit).
#[derive(Debug, Clone, Copy)]
struct Allowance {
    requests_per_minute: u32,
    tokens_per_minute: u32,
}

pub struct SharedRates {
    store: Arc<RedisStore>,
    /// By holder (`key:NAME`, `team:NAME`).
    by_holder: HashMap<String, Allowance>,
}

/// Microseconds one unit of a per-minute allowance earns (0: no limit).
fn unit_us(per_minute: u32) -> f64 {
    if per_minute == 0 {
        0.0
    } else {
        60e6 / f64::from(per_minute)
    }
}

/// One holder's two limiters, as a script takes them.
#[derive(Debug, Clone)]
struct Pair {
    holder: String,
    requests: String,
    tokens: String,
    allowance: Allowance,
}

impl SharedRates {
    pub fn new(store: Arc<RedisStore>, auth: &Auth) -> SharedRates {
        let by_holder = limited_holders(auth)
            .into_iter()
            .map(|(holder, rpm, tpm)| {
                let allowance = Allowance {
                    requests_per_minute: rpm.unwrap_or(0),
                    tokens_per_minute: tpm.unwrap_or(0),
                };
                (holder, allowance)
            })
            .collect();
        SharedRates { store, by_holder }
    }

    /// The Redis store the limits are kept in.
    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    /// The limiter pairs of `key` and its team, where they have limits.
    fn pairs(&self, key: &VirtualKey) -> Vec<Pair> {
        holders_of(key)
            .filter_map(|holder| {
                let allowance = *self.by_holder.get(&holder)?;
                Some(Pair {
                    requests: self.store.key(&format!("rl:{holder}:rpm")),
                    tokens: self.store.key(&format!("rl:{holder}:tpm")),
                    holder,
                    allowance,
                })
            })
            .collect()
    }

    /// The check of one request by `key` with `tokens` estimated; `None`
    /// when neither the key nor its team has a limit.
    pub fn ticket(&self, key: &VirtualKey, tokens: u32) -> Option<RateTicket> {
        let pairs = self.pairs(key);
        (!pairs.is_empty()).then(|| RateTicket {
            store: self.store.clone(),
            pairs,
            tokens,
            done: false,
        })
    }

    /// Counts tokens used beyond the estimate (off the answer's latency).
    pub fn owe(&self, key: &VirtualKey, tokens: u64) {
        let pairs: Vec<Pair> = self
            .pairs(key)
            .into_iter()
            .filter(|p| p.allowance.tokens_per_minute > 0)
            .collect();
        if tokens > 0 && !pairs.is_empty() {
            self.store.settle(Settlement::Rate {
                mode: "debt",
                limiters: limiters(&pairs),
                args: args(&pairs),
                tokens,
            });
        }
    }
}

/// The pairs' limiter keys, requests then tokens for each.
fn limiters(pairs: &[Pair]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|p| [p.requests.clone(), p.tokens.clone()])
        .collect()
}

/// The pairs' ARGV: per pair requests t, requests burst, tokens t, tokens
/// burst.
fn args(pairs: &[Pair]) -> Vec<f64> {
    pairs
        .iter()
        .flat_map(|p| {
            let a = p.allowance;
            [
                unit_us(a.requests_per_minute),
                f64::from(a.requests_per_minute),
                unit_us(a.tokens_per_minute),
                f64::from(a.tokens_per_minute),
            ]
        })
        .collect()
}

/// A request's rate check, not yet sent: with its first reservation, or
/// alone ([`RateTicket::check`]). Dropped unsent (the request ended
/// first), it is counted without a check, so every request counts.
pub struct RateTicket {
    store: Arc<RedisStore>,
    pairs: Vec<Pair>,
    tokens: u32,
    done: bool,
}

impl std::fmt::Debug for RateTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateTicket")
            .field(
                "holders",
                &self.pairs.iter().map(|p| &p.holder).collect::<Vec<_>>(),
            )
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl RateTicket {
    /// Adds the limiters' keys (before any other keys).
    pub fn add_keys(&self, invocation: &mut ScriptInvocation<'_>) {
        for limiter in limiters(&self.pairs) {
            invocation.key(limiter);
        }
    }

    /// Adds the check's ARGV: the pair count, each pair's, the tokens.
    pub fn add_args(&self, invocation: &mut ScriptInvocation<'_>) {
        invocation.arg(self.pairs.len());
        for arg in args(&self.pairs) {
            invocation.arg(arg);
        }
        invocation.arg(self.tokens);
    }

    /// How many limiter pairs it checks.
    pub fn pair_count(&self) -> usize {
        self.pairs.len()
    }

    /// The refusal of pair `pair`, naming its holder.
    pub fn refusal(
        &self,
        pair: usize,
        limit: crate::admit::access::shared::scripts::Limit,
    ) -> RateRefusal {
        let holder = self
            .pairs
            .get(pair)
            .map_or_else(String::new, |p| p.holder.clone());
        limit.of(holder)
    }

    /// The check went to Redis (admitted or refused).
    pub fn sent(&mut self) {
        self.done = true;
    }

    /// Sends the check alone.
    pub async fn check(&mut self) -> Result<Result<(), RateRefusal>, StateError> {
        let mut invocation = RATE.prepare_invoke();
        self.add_keys(&mut invocation);
        invocation.arg(0);
        self.add_args(&mut invocation);
        let reply: Vec<i64> = self.store.run(&invocation).await?;
        self.sent();
        match Reply::parse(&reply) {
            Some(Reply::Done) => Ok(Ok(())),
            Some(Reply::Limited { pair, limit }) if pair < self.pairs.len() => {
                Ok(Err(self.refusal(pair, limit)))
            }
            _ => {
                tracing::error!(?reply, "unexpected reply from the rate script");
                Err(StateError::Unavailable)
            }
        }
    }

    /// Gives the check up (Redis is away: the caller counts it locally or
    /// refuses the request); returns its tokens.
    pub fn abandon(&mut self) -> u32 {
        self.done = true;
        self.tokens
    }

    /// Counts it without a check (off the request's path).
    fn count(&mut self) {
        self.done = true;
        self.store.settle(Settlement::Rate {
            mode: "count",
            limiters: limiters(&self.pairs),
            args: args(&self.pairs),
            tokens: u64::from(self.tokens),
        });
    }
}

impl Drop for RateTicket {
    fn drop(&mut self) {
        if !self.done {
            self.count();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::time::Duration;

    use governor::clock::{Clock, FakeRelativeClock};
    use governor::{Quota, RateLimiter};

    use super::super::scripts::{Limit, OWE};
    use super::super::test_redis::{connect, redis};
    use super::*;

    /// Tokens used beyond the estimate are owed in full: two minutes' worth
    /// keep the next request waiting, and the refusal says why.
    #[tokio::test]
    async fn tokens_beyond_the_estimate_are_owed() {
        let Some(server) = redis() else { return };
        let mut connection = connect(&server).await;
        let tpm = 1000u32;
        let mut owe = OWE.prepare_invoke();
        owe.key("rpm").key("tpm").arg(1).arg("debt").arg(1);
        owe.arg(0).arg(0).arg(unit_us(tpm)).arg(tpm).arg(2000);
        let _: i64 = owe.invoke_async(&mut connection).await.unwrap();
        let mut admit = RATE.prepare_invoke();
        admit.key("rpm").key("tpm").arg(0).arg(1);
        admit.arg(0).arg(0).arg(unit_us(tpm)).arg(tpm).arg(1);
        let reply: Vec<i64> = admit.invoke_async(&mut connection).await.unwrap();
        match Reply::parse(&reply) {
            Some(Reply::Limited {
                pair: 0,
                limit: Limit::Tokens { wait, owed: true },
            }) => assert!(
                wait > Duration::from_secs(55) && wait <= Duration::from_secs(61),
                "{wait:?}"
            ),
            other => panic!("{other:?}"),
        }
    }

    /// What a limiter said: admitted, refused with a wait (ms), or never.
    #[derive(Debug, PartialEq)]
    enum Said {
        Admitted,
        Wait(u64),
        TooLarge,
    }

    /// The script and governor, fed the same tokens at the same times,
    /// agree on every answer, and on how long a refusal must wait (to the
    /// millisecond: the script counts in whole microseconds).
    #[tokio::test]
    async fn the_script_counts_as_governor_does() {
        let Some(server) = redis() else { return };
        let mut connection = connect(&server).await;
        let per_minute = 1000u32;
        let clock = FakeRelativeClock::default();
        let governor = RateLimiter::direct_with_clock(
            Quota::per_minute(NonZeroU32::new(per_minute).unwrap()),
            clock.clone(),
        );
        let start_us: u64 = 1_800_000_000_000_000;
        let mut elapsed = Duration::ZERO;
        let mut seen = Vec::new();
        // (ms since the previous check, tokens)
        let steps = [
            (0, 500),
            (0, 400),
            (0, 200),
            (100, 10),
            (10_000, 300),
            (0, 1),
            (5, 1500),
            (61_000, 1000),
            (0, 1),
            (59, 1),
            (1, 1),
            (30_000, 499),
            (0, 2),
            (120_000, 1),
        ];
        for (i, (after_ms, tokens)) in steps.into_iter().enumerate() {
            elapsed += Duration::from_millis(after_ms);
            clock.advance(Duration::from_millis(after_ms));
            let expected = match governor.check_n(NonZeroU32::new(tokens).unwrap()) {
                Ok(Ok(())) => Said::Admitted,
                Ok(Err(not_until)) => {
                    Said::Wait(not_until.wait_time_from(clock.now()).as_millis() as u64)
                }
                Err(_) => Said::TooLarge,
            };
            let now = start_us + elapsed.as_micros() as u64;
            let mut invocation = RATE.prepare_invoke();
            invocation
                .key("rpm")
                .key("tpm")
                .arg(now)
                .arg(1)
                .arg(0)
                .arg(0)
                .arg(unit_us(per_minute))
                .arg(per_minute)
                .arg(tokens);
            let reply: Vec<i64> = invocation.invoke_async(&mut connection).await.unwrap();
            let said = match Reply::parse(&reply) {
                Some(Reply::Done) => Said::Admitted,
                Some(Reply::Limited {
                    pair: 0,
                    limit: Limit::Tokens { wait, .. },
                }) => Said::Wait(wait.as_millis() as u64),
                Some(Reply::Limited {
                    pair: 0,
                    limit: Limit::TooLarge,
                }) => Said::TooLarge,
                other => panic!("step {i}: {other:?}"),
            };
            match (&said, &expected) {
                (Said::Wait(a), Said::Wait(b)) => {
                    assert!(a.abs_diff(*b) <= 1, "step {i}: {said:?} vs {expected:?}")
                }
                _ => assert_eq!(said, expected, "step {i}"),
            }
            seen.push(said);
        }
        // The steps cover every kind of answer.
        assert!(seen.contains(&Said::Admitted) && seen.contains(&Said::TooLarge));
        assert!(seen.iter().any(|s| matches!(s, Said::Wait(_))));
    }
}
