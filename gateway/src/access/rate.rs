//! Per-key rate limits (governor): requests per minute, checked as a request
//! arrives, and tokens per minute, checked once its size is estimated.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use switchyard_policies::Auth;

use crate::error::GatewayError;

#[derive(Default)]
struct KeyLimits {
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
}

pub struct RateLimits {
    by_key: HashMap<String, KeyLimits>,
    clock: DefaultClock,
}

fn per_minute(n: Option<u32>) -> Option<DefaultDirectRateLimiter> {
    n.and_then(NonZeroU32::new)
        .map(|n| RateLimiter::direct(Quota::per_minute(n)))
}

impl RateLimits {
    pub fn new(auth: &Auth) -> Self {
        let by_key = auth
            .keys
            .iter()
            .map(|k| {
                let limits = KeyLimits {
                    requests: per_minute(k.requests_per_minute),
                    tokens: per_minute(k.tokens_per_minute),
                };
                (k.name.clone(), limits)
            })
            .collect();
        RateLimits {
            by_key,
            clock: DefaultClock::default(),
        }
    }

    fn limited(&self, key: &str, what: &str, wait: Duration) -> GatewayError {
        GatewayError::RateLimited {
            message: format!("key `{key}` is over its {what} limit"),
            retry_after: wait,
        }
    }

    /// Counts one request against the key's requests-per-minute.
    pub fn check_request(&self, key: &str) -> Result<(), GatewayError> {
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

    /// Counts `tokens` (estimated before the call) against tokens-per-minute.
    /// A request larger than the whole minute's allowance is refused outright.
    pub fn check_tokens(&self, key: &str, tokens: u32) -> Result<(), GatewayError> {
        let Some(limiter) = self.by_key.get(key).and_then(|l| l.tokens.as_ref()) else {
            return Ok(());
        };
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

    /// Counts tokens used beyond the estimate, so the next requests pay for
    /// them (governor cannot refund an over-estimate).
    pub fn settle_tokens(&self, key: &str, estimated: u32, actual: u64) {
        let extra = u32::try_from(actual.saturating_sub(u64::from(estimated))).unwrap_or(u32::MAX);
        if let (Some(limiter), Some(n)) = (
            self.by_key.get(key).and_then(|l| l.tokens.as_ref()),
            NonZeroU32::new(extra),
        ) {
            let _ = limiter.check_n(n);
        }
    }
}
