//! Per-key rate limits (governor): requests per minute, checked as a request
//! arrives, and tokens per minute, checked once its size is estimated.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use switchyard_policies::Auth;

use super::Caller;
use super::shared::{RateRefusal, SharedRates};

use crate::error::GatewayError;

#[derive(Default)]
struct KeyLimits {
    /// The allowances as configured, to tell whether a reload changed them.
    requests_per_minute: Option<u32>,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
    /// The tokens-per-minute allowance.
    tokens_per_minute: u32,
    /// Tokens used beyond the estimates that the limiter could not take
    /// yet (it holds at most a minute's worth): paid before the key's next
    /// request may start, so a request that overran its estimate makes the
    /// next ones wait rather than going uncounted.
    owed: AtomicU32,
}

pub struct RateLimits {
    /// Shared with the next config on reload for keys whose limits stay
    /// the same, so a reload hands out no fresh minute. With `shared`,
    /// the fallback while Redis is away.
    by_key: HashMap<String, Arc<KeyLimits>>,
    clock: DefaultClock,
    /// Limits kept in Redis for every replica.
    shared: Option<SharedRates>,
}

fn per_minute(n: Option<u32>) -> Option<DefaultDirectRateLimiter> {
    n.and_then(NonZeroU32::new)
        .map(|n| RateLimiter::direct(Quota::per_minute(n)))
}

impl RateLimits {
    pub fn new(auth: &Auth) -> Self {
        Self::carrying(auth, None)
    }

    /// The limits `auth` sets, continuing `previous`'s limiters for keys
    /// whose allowances are unchanged.
    pub fn carrying(auth: &Auth, previous: Option<&RateLimits>) -> Self {
        Self::sharing(auth, previous, None)
    }

    /// As [`RateLimits::carrying`], kept in `shared` when given (and here,
    /// at `auth`'s limits, while Redis is away).
    pub fn sharing(
        auth: &Auth,
        previous: Option<&RateLimits>,
        shared: Option<SharedRates>,
    ) -> Self {
        let by_key = auth
            .keys
            .iter()
            .map(|k| {
                let same = previous
                    .and_then(|p| p.by_key.get(&k.name))
                    .filter(|old| {
                        old.requests_per_minute == k.requests_per_minute
                            && old.tokens_per_minute == k.tokens_per_minute.unwrap_or(0)
                    })
                    .cloned();
                let limits = same.unwrap_or_else(|| {
                    Arc::new(KeyLimits {
                        requests_per_minute: k.requests_per_minute,
                        requests: per_minute(k.requests_per_minute),
                        tokens: per_minute(k.tokens_per_minute),
                        tokens_per_minute: k.tokens_per_minute.unwrap_or(0),
                        owed: AtomicU32::new(0),
                    })
                });
                (k.name.clone(), limits)
            })
            .collect();
        RateLimits {
            by_key,
            clock: DefaultClock::default(),
            shared,
        }
    }

    fn limited(&self, key: &str, what: &str, wait: Duration) -> GatewayError {
        GatewayError::RateLimited {
            message: format!("key `{key}` is over its {what} limit"),
            retry_after: wait,
        }
    }

    /// Counts one request against the key's requests-per-minute. Shared
    /// limits count it in [`RateLimits::admit`] instead, with its tokens,
    /// in one Redis call.
    pub fn check_request(&self, key: &str) -> Result<(), GatewayError> {
        if self.shared.is_some() {
            return Ok(());
        }
        self.check_local_request(key)
    }

    fn check_local_request(&self, key: &str) -> Result<(), GatewayError> {
        let Some(limiter) = self.by_key.get(key).and_then(|l| l.requests.as_ref()) else {
            return Ok(());
        };
        limiter.check().map_err(|not_until| {
            self.limited(
                key,
                "requests-per-minute",
                not_until.wait_time_from(self.clock.now()),
            )
        })
    }

    /// Counts a routed request against the caller's limits: here its
    /// `tokens` (estimated before the call; its request was counted as it
    /// arrived). Shared limits count the request and its tokens in Redis,
    /// with the request's first reservation ([`Budgets::hold`]).
    ///
    /// [`Budgets::hold`]: super::Budgets::hold
    pub fn admit(&self, caller: &Caller, tokens: u32) -> Result<(), GatewayError> {
        let key = &caller.key.name;
        let Some(shared) = &self.shared else {
            return self.check_tokens(key, tokens);
        };
        if let Some(ticket) = shared.ticket(key, tokens) {
            *caller.rate_check.lock().unwrap_or_else(|p| p.into_inner()) = Some(ticket);
        }
        Ok(())
    }

    /// What a shared limiter's refusal tells the caller.
    pub fn refusal(&self, key: &str, refusal: RateRefusal) -> GatewayError {
        match refusal {
            RateRefusal::Requests { wait } => self.limited(key, "requests-per-minute", wait),
            RateRefusal::Tokens { wait, owed: false } => {
                self.limited(key, "tokens-per-minute", wait)
            }
            RateRefusal::Tokens { wait, owed: true } => self.limited(
                key,
                "tokens-per-minute (earlier requests used more than estimated)",
                wait,
            ),
            RateRefusal::TooLarge => self.limited(
                key,
                "tokens-per-minute (this request alone exceeds it)",
                Duration::from_secs(60),
            ),
        }
    }

    /// While Redis is away (`on_unavailable: local`): the request and its
    /// tokens against this process's share of the limits.
    pub fn check_here(&self, key: &str, tokens: u32) -> Result<(), GatewayError> {
        self.check_local_request(key)?;
        self.check_tokens(key, tokens)
    }

    /// Counts `tokens` (estimated before the call) against tokens-per-minute.
    /// A request larger than the whole minute's allowance is refused outright.
    pub fn check_tokens(&self, key: &str, tokens: u32) -> Result<(), GatewayError> {
        let Some((limits, limiter)) = self
            .by_key
            .get(key)
            .and_then(|l| Some((l, l.tokens.as_ref()?)))
        else {
            return Ok(());
        };
        self.repay(key, limits, limiter)?;
        let Some(n) = NonZeroU32::new(tokens) else {
            return Ok(());
        };
        match limiter.check_n(n) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(not_until)) => Err(self.limited(
                key,
                "tokens-per-minute",
                not_until.wait_time_from(self.clock.now()),
            )),
            Err(_) => Err(self.limited(
                key,
                "tokens-per-minute (this request alone exceeds it)",
                Duration::from_secs(60),
            )),
        }
    }

    /// Counts tokens used beyond the estimate, all of them: what the
    /// limiter cannot take now is owed, and paid before the key's next
    /// request starts (governor cannot refund an over-estimate).
    pub fn settle_tokens(&self, key: &str, estimated: u32, actual: u64) {
        if let Some(shared) = &self.shared {
            shared.owe(key, actual.saturating_sub(u64::from(estimated)));
            return;
        }
        let extra = u32::try_from(actual.saturating_sub(u64::from(estimated))).unwrap_or(u32::MAX);
        if let Some(limits) = self.by_key.get(key)
            && let Some(limiter) = &limits.tokens
            && extra > 0
        {
            owe(&limits.owed, extra);
            let _ = self.repay(key, limits, limiter);
        }
    }

    /// Takes what the key owes from its limiter, a minute's allowance at a
    /// time; refuses while some is still owed.
    fn repay(
        &self,
        key: &str,
        limits: &KeyLimits,
        limiter: &DefaultDirectRateLimiter,
    ) -> Result<(), GatewayError> {
        loop {
            // Claimed before it is paid, so two requests repaying at once
            // never pay (and subtract) the same tokens twice.
            let cap = limits.tokens_per_minute;
            let Ok(owed) = limits
                .owed
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |owed| {
                    (owed > 0).then(|| owed - owed.min(cap))
                })
            else {
                return Ok(());
            };
            let Some(n) = NonZeroU32::new(owed.min(cap)) else {
                return Ok(());
            };
            match limiter.check_n(n) {
                Ok(Ok(())) => {}
                Ok(Err(not_until)) => {
                    owe(&limits.owed, n.get());
                    return Err(self.limited(
                        key,
                        "tokens-per-minute (earlier requests used more than estimated)",
                        not_until.wait_time_from(self.clock.now()),
                    ));
                }
                // Never more than the allowance is asked for at once.
                Err(_) => {
                    owe(&limits.owed, n.get());
                    return Ok(());
                }
            }
        }
    }
}

/// Adds to what a key owes, saturating rather than wrapping.
fn owe(owed: &AtomicU32, tokens: u32) {
    let _ = owed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
        Some(o.saturating_add(tokens))
    });
}

#[cfg(test)]
mod tests {
    use switchyard_policies::VirtualKey;

    use super::*;

    fn limits(tokens_per_minute: u32) -> RateLimits {
        RateLimits::new(&Auth {
            keys: vec![VirtualKey {
                name: "k".into(),
                hash: [0; 32],
                team: None,
                budget: None,
                requests_per_minute: None,
                tokens_per_minute: Some(tokens_per_minute),
                may_name_backends: true,
            }],
            teams: vec![],
            admin_key_hash: None,
        })
    }

    #[test]
    fn tokens_used_past_the_limit_are_owed_not_forgotten() {
        let rates = limits(1000);
        assert!(rates.check_tokens("k", 100).is_ok());
        // The request used 5,000 tokens: five minutes' worth.
        rates.settle_tokens("k", 100, 5000);
        let refused = rates.check_tokens("k", 10).unwrap_err();
        assert!(
            refused.to_string().contains("more than estimated"),
            "{refused}"
        );
    }

    #[test]
    fn an_overrun_within_the_allowance_is_taken_at_once() {
        let rates = limits(1000);
        assert!(rates.check_tokens("k", 100).is_ok());
        rates.settle_tokens("k", 100, 300);
        assert!(rates.check_tokens("k", 600).is_ok(), "100 + 200 + 600 fit");
        assert!(rates.check_tokens("k", 200).is_err(), "1,100 do not");
    }
}
