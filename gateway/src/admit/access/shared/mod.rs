//! Budgets and rate limits shared by every replica through Redis
//! (`state: {redis: ...}`). Each check is one Lua script, so it is atomic
//! across replicas; amounts are integer micro-dollars, so no replica's
//! float rounding drifts the shared totals; settlement goes to a task of
//! its own, off the answer's latency.
//!
//! While Redis cannot be reached, `on_unavailable` decides: `fail_closed`
//! refuses what a shared limit covers, `local` enforces every limit divided
//! by the replica count in this process. A probe reconnects by itself.

mod budget;
mod rate;
mod scripts;
mod settler;
mod store;
#[cfg(test)]
mod test_redis;

pub use crate::admit::access::shared::budget::{Refusal, SharedBudgets, SharedHold, SpendSince};
pub use crate::admit::access::shared::rate::{RateTicket, SharedRates};
pub use crate::admit::access::shared::scripts::RateRefusal;
pub use crate::admit::access::shared::store::{RedisStore, StateError};

use switchyard_policies::Auth;

/// `auth` with every rate limit and budget divided by `replicas` (rounded
/// up, at least one request): what one replica enforces alone while Redis
/// is away, so the replicas together stay near the configured limits.
pub fn share_of(auth: &Auth, replicas: u32) -> Auth {
    let n = replicas.max(1);
    let per_minute = |limit: Option<u32>| limit.map(|l| l.div_ceil(n).max(1));
    let usd = |limit: Option<f64>| limit.map(|l| l / f64::from(n));
    let budget = |b: Option<switchyard_policies::SpendLimit>| {
        b.map(|b| switchyard_policies::SpendLimit {
            daily_usd: usd(b.daily_usd),
            monthly_usd: usd(b.monthly_usd),
            ..b
        })
    };
    let mut share = auth.clone();
    for key in &mut share.keys {
        key.requests_per_minute = per_minute(key.requests_per_minute);
        key.tokens_per_minute = per_minute(key.tokens_per_minute);
        key.budget = budget(key.budget);
    }
    for team in &mut share.teams {
        team.requests_per_minute = per_minute(team.requests_per_minute);
        team.tokens_per_minute = per_minute(team.tokens_per_minute);
        team.budget = budget(team.budget);
    }
    share
}
