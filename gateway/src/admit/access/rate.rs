//! Rate limits per key and per team (governor): requests per minute,
//! checked as a request arrives, and tokens per minute, checked once its
//! size is estimated. A team's limits are shared by all its keys, on top
//! of each key's own.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use switchyard_policies::{Auth, OnUnavailable, VirtualKey};

use crate::admit::access::Caller;
use crate::admit::access::holders::Holder;
use crate::admit::access::shared::{RateRefusal, SharedRates};
use crate::error::GatewayError;

/// One key's or team's limiters.
#[derive(Default)]
struct Limits {
    /// The allowances as configured, to tell whether a reload changed them.
    requests_per_minute: Option<u32>,
    requests: Option<DefaultDirectRateLimiter>,
    tokens: Option<DefaultDirectRateLimiter>,
    /// The tokens-per-minute allowance.
    tokens_per_minute: u32,
    /// Tokens used beyond the estimates that the limiter could not take
    /// yet (it holds at most a minute's worth): paid before the holder's
    /// next request may start, so a request that overran its estimate
    /// makes the next ones wait rather than going uncounted.
    owed: AtomicU32,
}

pub struct RateLimits {
    /// By key name, and by team name. Shared with the next config on
    /// reload for holders whose limits stay the same, so a reload hands
    /// out no fresh minute. With `shared`, the fallback while Redis is
    /// away. (Two maps by plain name, not one by `key:NAME`, so that a
    /// request's three lookups format no names.)
    keys: switchyard_router::NameMap<String, Arc<Limits>>,
    teams: switchyard_router::NameMap<String, Arc<Limits>>,
    clock: DefaultClock,
    /// Limits kept in Redis for every replica.
    shared: Option<SharedRates>,
}

fn per_minute(n: Option<u32>) -> Option<DefaultDirectRateLimiter> {
    n.and_then(NonZeroU32::new)
        .map(|n| RateLimiter::direct(Quota::per_minute(n)))
}

/// A holder's limiters at `rpm` and `tpm`: `old`'s when its allowances are
/// the same; none when it has neither limit.
fn limits(rpm: Option<u32>, tpm: Option<u32>, old: Option<&Arc<Limits>>) -> Option<Arc<Limits>> {
    if rpm.is_none() && tpm.is_none() {
        return None;
    }
    let same = old
        .filter(|old| old.requests_per_minute == rpm && old.tokens_per_minute == tpm.unwrap_or(0));
    Some(same.cloned().unwrap_or_else(|| {
        Arc::new(Limits {
            requests_per_minute: rpm,
            requests: per_minute(rpm),
            tokens: per_minute(tpm),
            tokens_per_minute: tpm.unwrap_or(0),
            owed: AtomicU32::new(0),
        })
    }))
}

impl RateLimits {
    pub fn new(auth: &Auth) -> Self {
        Self::carrying(auth, None)
    }

    /// The limits `auth` sets, continuing `previous`'s limiters for
    /// holders whose allowances are unchanged.
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
        let keys = auth.keys.iter().filter_map(|k| {
            let old = previous.and_then(|p| p.keys.get(&k.name));
            let limits = limits(k.requests_per_minute, k.tokens_per_minute, old)?;
            Some((k.name.clone(), limits))
        });
        let teams = auth.teams.iter().filter_map(|t| {
            let old = previous.and_then(|p| p.teams.get(&t.name));
            let limits = limits(t.requests_per_minute, t.tokens_per_minute, old)?;
            Some((t.name.clone(), limits))
        });
        RateLimits {
            keys: keys.collect(),
            teams: teams.collect(),
            clock: DefaultClock::default(),
            shared,
        }
    }

    /// Says "key `alice`" or "team `research`" is over its limit.
    fn limited(&self, holder: Holder<'_>, what: &str, wait: Duration) -> GatewayError {
        GatewayError::RateLimited {
            message: format!(
                "{} `{}` is over its {what} limit",
                holder.kind(),
                holder.name()
            ),
            retry_after: wait,
        }
    }

    /// The holders of `key` with limits here, with their limiters.
    fn limits_of<'a>(
        &'a self,
        key: &'a VirtualKey,
    ) -> impl Iterator<Item = (Holder<'a>, &'a Limits)> + 'a {
        let own = self
            .keys
            .get(&key.name)
            .map(|l| (Holder::Key(&key.name), &**l));
        let team = key.team.as_deref().and_then(|team| {
            let limits = self.teams.get(team)?;
            Some((Holder::Team(team), &**limits))
        });
        own.into_iter().chain(team)
    }

    /// Whether the limits are kept in Redis, shared by every replica.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Counts one request against the key's and its team's requests per
    /// minute. Shared limits count a routed request in [`Budgets::hold`]
    /// instead, with its tokens and reservation, in one Redis call, and
    /// any other in [`Self::check_unrouted`].
    ///
    /// [`Budgets::hold`]: crate::admit::access::Budgets::hold
    pub fn check_request(&self, key: &VirtualKey) -> Result<(), GatewayError> {
        if self.shared.is_some() {
            return Ok(());
        }
        self.check_local_request(key)
    }

    /// Counts a request that no routing admits (token counting, model
    /// lists, route explanations, which can make billed encoder calls)
    /// against the key's requests per minute: in Redis when limits are
    /// shared, as a routed request's first reservation would; while Redis
    /// is away, as `on_unavailable` says.
    pub async fn check_unrouted(&self, key: &VirtualKey) -> Result<(), GatewayError> {
        let Some(shared) = &self.shared else {
            return self.check_local_request(key);
        };
        let Some(mut ticket) = shared.ticket(key, 0) else {
            return Ok(());
        };
        match ticket.check().await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(refusal)) => Err(self.refusal(refusal)),
            Err(_) => {
                let store = shared.store();
                store.fell_back();
                ticket.abandon();
                match store.on_unavailable {
                    OnUnavailable::FailClosed => {
                        Err(GatewayError::SharedStateUnavailable { what: "rate limit" })
                    }
                    OnUnavailable::Local => self.check_local_request(key),
                }
            }
        }
    }

    fn check_local_request(&self, key: &VirtualKey) -> Result<(), GatewayError> {
        for (holder, limits) in self.limits_of(key) {
            if let Some(limiter) = &limits.requests {
                limiter.check().map_err(|not_until| {
                    self.limited(
                        holder,
                        "requests-per-minute",
                        not_until.wait_time_from(self.clock.now()),
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Counts a routed request against the caller's limits: here its
    /// `tokens` (estimated before the call; its request was counted as it
    /// arrived). Shared limits count the request and its tokens in Redis,
    /// with the request's first reservation ([`Budgets::hold`]).
    ///
    /// [`Budgets::hold`]: crate::admit::access::Budgets::hold
    pub fn admit(&self, caller: &Caller, tokens: u32) -> Result<(), GatewayError> {
        let Some(shared) = &self.shared else {
            return self.check_tokens(&caller.key, tokens);
        };
        if let Some(ticket) = shared.ticket(&caller.key, tokens) {
            *caller.rate_check.lock().unwrap_or_else(|p| p.into_inner()) = Some(ticket);
        }
        Ok(())
    }

    /// What a shared limiter's refusal tells the caller.
    pub fn refusal(&self, refusal: RateRefusal) -> GatewayError {
        match refusal {
            RateRefusal::Requests { holder, wait } => {
                self.limited(Holder::parse(&holder), "requests-per-minute", wait)
            }
            RateRefusal::Tokens {
                holder,
                wait,
                owed: false,
            } => self.limited(Holder::parse(&holder), "tokens-per-minute", wait),
            RateRefusal::Tokens {
                holder,
                wait,
                owed: true,
            } => self.limited(
                Holder::parse(&holder),
                "tokens-per-minute (earlier requests used more than estimated)",
                wait,
            ),
            RateRefusal::TooLarge { holder } => self.limited(
                Holder::parse(&holder),
                "tokens-per-minute (this request alone exceeds it)",
                Duration::from_secs(60),
            ),
        }
    }

    /// While Redis is away (`on_unavailable: local`): the request and its
    /// tokens against this process's share of the limits.
    pub fn check_here(&self, key: &VirtualKey, tokens: u32) -> Result<(), GatewayError> {
        self.check_local_request(key)?;
        self.check_tokens(key, tokens)
    }

    /// Counts `tokens` (estimated before the call) against the key's and
    /// its team's tokens per minute. A request larger than a whole
    /// minute's allowance is refused outright.
    pub fn check_tokens(&self, key: &VirtualKey, tokens: u32) -> Result<(), GatewayError> {
        for (holder, limits) in self.limits_of(key) {
            let Some(limiter) = &limits.tokens else {
                continue;
            };
            self.repay(holder, limits, limiter)?;
            let Some(n) = NonZeroU32::new(tokens) else {
                continue;
            };
            match limiter.check_n(n) {
                Ok(Ok(())) => {}
                Ok(Err(not_until)) => {
                    return Err(self.limited(
                        holder,
                        "tokens-per-minute",
                        not_until.wait_time_from(self.clock.now()),
                    ));
                }
                Err(_) => {
                    return Err(self.limited(
                        holder,
                        "tokens-per-minute (this request alone exceeds it)",
                        Duration::from_secs(60),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Counts tokens used beyond the estimate, all of them: what a
    /// limiter cannot take now is owed, and paid before the holder's next
    /// request starts (governor cannot refund an over-estimate).
    pub fn settle_tokens(&self, key: &VirtualKey, estimated: u32, actual: u64) {
        let beyond = actual.saturating_sub(u64::from(estimated));
        if let Some(shared) = &self.shared {
            shared.owe(key, beyond);
            return;
        }
        let extra = u32::try_from(beyond).unwrap_or(u32::MAX);
        if extra == 0 {
            return;
        }
        for (holder, limits) in self.limits_of(key) {
            if let Some(limiter) = &limits.tokens {
                owe(&limits.owed, extra);
                let _ = self.repay(holder, limits, limiter);
            }
        }
    }

    /// Takes what the holder owes from its limiter, a minute's allowance
    /// at a time; refuses while some is still owed.
    fn repay(
        &self,
        holder: Holder<'_>,
        limits: &Limits,
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
                        holder,
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

/// Adds to what a holder owes, saturating rather than wrapping.
fn owe(owed: &AtomicU32, tokens: u32) {
    let _ = owed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |o| {
        Some(o.saturating_add(tokens))
    });
}

#[cfg(test)]
mod tests {
    use switchyard_policies::{Team, VirtualKey};

    use super::*;

    fn key(team: Option<&str>, tokens_per_minute: Option<u32>) -> VirtualKey {
        VirtualKey {
            name: "k".into(),
            hash: [0; 32],
            team: team.map(Into::into),
            budget: None,
            requests_per_minute: None,
            tokens_per_minute,
            may_name_backends: true,
            models: None,
            expires_at_ms: None,
            from_api: false,
            sensitive: None,
            mcp: None,
        }
    }

    fn limits(tokens_per_minute: u32) -> (RateLimits, VirtualKey) {
        let key = key(None, Some(tokens_per_minute));
        let auth = Auth {
            keys: vec![key.clone()],
            teams: vec![],
            admin_key_hash: None,
            disabled: false,
            metrics_key_hash: None,
            metrics_key_labels: true,
            stored_keys_exist: false,
        };
        (RateLimits::new(&auth), key)
    }

    #[test]
    fn tokens_used_past_the_limit_are_owed_not_forgotten() {
        let (rates, k) = limits(1000);
        assert!(rates.check_tokens(&k, 100).is_ok());
        // The request used 5,000 tokens: five minutes' worth.
        rates.settle_tokens(&k, 100, 5000);
        let refused = rates.check_tokens(&k, 10).unwrap_err();
        assert!(
            refused.to_string().contains("more than estimated"),
            "{refused}"
        );
    }

    #[test]
    fn an_overrun_within_the_allowance_is_taken_at_once() {
        let (rates, k) = limits(1000);
        assert!(rates.check_tokens(&k, 100).is_ok());
        rates.settle_tokens(&k, 100, 300);
        assert!(rates.check_tokens(&k, 600).is_ok(), "100 + 200 + 600 fit");
        assert!(rates.check_tokens(&k, 200).is_err(), "1,100 do not");
    }

    /// A team's limit is shared by its keys, each of which has none of its
    /// own here; the refusal names the team.
    #[test]
    fn a_teams_limit_is_shared_by_its_keys() {
        let mut a = key(Some("t"), None);
        a.name = "a".into();
        let mut b = key(Some("t"), None);
        b.name = "b".into();
        let auth = Auth {
            keys: vec![a.clone(), b.clone()],
            teams: vec![Team {
                name: "t".into(),
                budget: None,
                requests_per_minute: Some(2),
                tokens_per_minute: None,
                models: None,
                sensitive: None,
            }],
            admin_key_hash: None,
            disabled: false,
            metrics_key_hash: None,
            metrics_key_labels: true,
            stored_keys_exist: false,
        };
        let rates = RateLimits::new(&auth);
        assert!(rates.check_request(&a).is_ok());
        assert!(rates.check_request(&b).is_ok());
        let refused = rates.check_request(&a).unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("team `t` is over its requests-per-minute limit"),
            "{refused}"
        );
    }
}
