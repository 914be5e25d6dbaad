//! Budgets and rate limits for a config: in this process, or shared
//! through Redis (`state.redis`) with this process's share as the
//! fallback; budgets seeded from the ledger.

use std::sync::Arc;

use switchyard_policies::Config;
use switchyard_policies::calendar::period_starts;

use crate::admit::access::shared::{RedisStore, SharedBudgets, SharedRates, SpendSince, share_of};

use crate::admit::access::{Budgets, RateLimits};
use crate::ledger::{Ledger, now_ms};

/// What admission checks against, carried over from the running config's.
pub struct Access {
    pub budgets: Arc<Budgets>,
    pub rates: Arc<RateLimits>,
    /// Kept across reloads, like the ledger.
    pub shared_state: Option<Arc<RedisStore>>,
}

/// The running config's access state, to carry over on reload.
pub struct Previous<'a> {
    pub budgets: &'a Budgets,
    pub rates: &'a RateLimits,
    pub shared_state: Option<&'a Arc<RedisStore>>,
}

pub fn assemble(
    config: &Config,
    previous: Option<Previous<'_>>,
    ledger: &Arc<Ledger>,
) -> anyhow::Result<Access> {
    let shared_state = match (&previous, &config.state.redis) {
        (Some(p), _) => p.shared_state.cloned(),
        (None, Some(redis)) => Some(RedisStore::open(redis)?),
        (None, None) => None,
    };
    // With shared state, this process's own counters are the fallback
    // while Redis is away: its share of each limit.
    let local_auth = match &shared_state {
        Some(store) => share_of(&config.auth, store.replicas),
        None => config.auth.clone(),
    };
    let carried = previous.as_ref().map(|p| p.budgets);
    let budgets = Budgets::sharing(
        &local_auth,
        carried,
        shared_state
            .as_ref()
            .map(|store| SharedBudgets::new(store.clone(), &config.auth, ledger_spend(ledger))),
    );
    seed_budgets(&budgets, ledger, carried)?;
    let rates = Arc::new(RateLimits::sharing(
        &local_auth,
        previous.as_ref().map(|p| p.rates),
        shared_state
            .as_ref()
            .map(|store| SharedRates::new(store.clone(), &config.auth)),
    ));
    Ok(Access {
        budgets,
        rates,
        shared_state,
    })
}

/// Reads spend per holder from the ledger (blocking), for Redis to start
/// a period's shared spend from.
fn ledger_spend(ledger: &Arc<Ledger>) -> SpendSince {
    let ledger = ledger.clone();
    Arc::new(move |since_ms| ledger.spend_since(since_ms))
}

/// Starts budgets from what the ledger says was spent today and this month,
/// so a restart does not hand out a budget twice.
/// (With the ledger in PostgreSQL: what every replica spent.)
fn seed_budgets(
    budgets: &Budgets,
    ledger: &Ledger,
    carried: Option<&Budgets>,
) -> anyhow::Result<()> {
    // A reload that adds no budget reads nothing (and so works while a
    // PostgreSQL ledger is away).
    if !budgets.has_new_holders(carried) {
        return Ok(());
    }
    let (day_start, month_start) = period_starts(now_ms());
    budgets.load(
        &ledger.spend_since(day_start)?,
        &ledger.spend_since(month_start)?,
        carried,
    );
    Ok(())
}
