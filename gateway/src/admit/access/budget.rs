//! Spend budgets per key and per team, daily and monthly (UTC). Admission
//! reserves a request's worst-case cost against every budget it falls under,
//! atomically, and settles the actual cost when the request ends; so
//! concurrent requests cannot together overshoot a budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use switchyard_policies::calendar::periods;
use switchyard_policies::{Auth, OnUnavailable, SpendLimit, SpendScope, VirtualKey};

use crate::admit::access::holders::budget_holders;
use crate::admit::access::shared::{RateTicket, Refusal, SharedBudgets, SharedHold, StateError};
use crate::admit::access::{Caller, RateLimits};
use crate::error::Exhausted;
use crate::error::GatewayError;

use crate::ledger::now_ms;

/// Spend in the current day and month, and what is reserved now.
#[derive(Debug, Default)]
struct Window {
    day: i64,
    month: i64,
    /// `[cloud, total]` spend.
    day_spent: [f64; 2],
    month_spent: [f64; 2],
    reserved: [f64; 2],
}

impl Window {
    /// Starts a new day or month when the clock has moved on.
    fn roll(&mut self, now_ms: i64) {
        let (day, month) = periods(now_ms);
        if day != self.day {
            self.day = day;
            self.day_spent = [0.0; 2];
        }
        if month != self.month {
            self.month = month;
            self.month_spent = [0.0; 2];
        }
    }
}

struct Holder {
    limit: SpendLimit,
    /// Shared with the next config on reload: spend (and what requests in
    /// flight hold) carries over to a budget of the same name, under
    /// whatever limit the new config sets.
    window: Arc<Mutex<Window>>,
}

pub struct Budgets {
    holders: HashMap<String, Holder>,
    /// Budgets kept in Redis for every replica; then `holders` are the
    /// fallback while Redis is away, their limits divided by the replica
    /// count.
    shared: Option<Arc<SharedBudgets>>,
}

/// Why a reservation was not made.
pub enum Refused {
    Exhausted(Exhausted),
    /// A shared rate limit, checked with the reservation.
    Limited(GatewayError),
    /// Redis is away and `on_unavailable` is `fail_closed`.
    Unavailable,
}

fn slot(cloud: bool) -> [bool; 2] {
    [cloud, true]
}

impl Budgets {
    pub fn new(auth: &Auth) -> Arc<Self> {
        Self::carrying(auth, None)
    }

    /// The budgets `auth` sets, continuing `previous`'s spend for the
    /// budgets it had.
    pub fn carrying(auth: &Auth, previous: Option<&Budgets>) -> Arc<Self> {
        Self::sharing(auth, previous, None)
    }

    /// As [`Budgets::carrying`], kept in `shared` when given (and in this
    /// process, at `auth`'s limits, while Redis is away).
    pub fn sharing(
        auth: &Auth,
        previous: Option<&Budgets>,
        shared: Option<Arc<SharedBudgets>>,
    ) -> Arc<Self> {
        let holders = budget_holders(auth)
            .map(|(name, limit)| {
                let window = previous
                    .and_then(|b| b.holders.get(&name))
                    .map_or_else(Arc::default, |h| h.window.clone());
                (name, Holder { limit, window })
            })
            .collect();
        Arc::new(Budgets { holders, shared })
    }

    /// Whether budgets live in Redis.
    pub fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// Reserves `amount` USD for a backend call: in Redis when budgets are
    /// shared, with the request's rate check if it still waits (one round
    /// trip for both); in this process while Redis is away, if allowed;
    /// else here.
    pub async fn hold(
        self: &Arc<Self>,
        rates: &RateLimits,
        caller: &Caller,
        cloud: bool,
        amount: f64,
    ) -> Result<Reservation, Refused> {
        let key = &caller.key;
        let local = || self.reserve(key, cloud, amount).map_err(Refused::Exhausted);
        let Some(shared) = &self.shared else {
            return local();
        };
        let mut ticket = caller.take_rate_check();
        let names = self.applicable(key, cloud);
        let outcome = match (&mut ticket, names.is_empty()) {
            (None, true) => return local(),
            (Some(ticket), true) => ticket
                .check()
                .await
                .map(|checked| checked.map(|()| None).map_err(Refusal::Rate)),
            (ticket, false) => shared
                .reserve(&names, cloud, amount, ticket.as_mut())
                .await
                .map(|held| held.map(Some)),
        };
        match outcome {
            Ok(Ok(Some(hold))) => Ok(Reservation::Shared(hold)),
            Ok(Ok(None)) => local(),
            Ok(Err(Refusal::Budget(exhausted))) => Err(Refused::Exhausted(exhausted)),
            Ok(Err(Refusal::Rate(refusal))) => Err(Refused::Limited(rates.refusal(refusal))),
            Err(StateError::Unavailable | StateError::Rejected) => {
                let store = shared.store();
                store.fell_back();
                // Counted here or refused: not in Redis when it returns.
                let tokens = ticket.as_mut().map(RateTicket::abandon);
                match store.on_unavailable {
                    OnUnavailable::FailClosed => Err(Refused::Unavailable),
                    OnUnavailable::Local => {
                        if let Some(tokens) = tokens {
                            rates.check_here(key, tokens).map_err(Refused::Limited)?;
                        }
                        // Spent from this process's share, and added to
                        // Redis's count once it answers.
                        match local()? {
                            Reservation::Local(hold) if !names.is_empty() => {
                                Ok(Reservation::Fallback {
                                    hold,
                                    shared: shared.clone(),
                                    holders: names,
                                    cloud,
                                })
                            }
                            other => Ok(other),
                        }
                    }
                }
            }
        }
    }

    /// Seeds spend from the ledger after a restart: `(kind, name, cloud,
    /// total)` rows for the day and for the month. Budgets `carried` over
    /// from a previous config already know their spend (including rows the
    /// ledger may not have yet) and are left alone.
    pub fn load(
        &self,
        day: &[(String, String, f64, f64)],
        month: &[(String, String, f64, f64)],
        carried: Option<&Budgets>,
    ) {
        let now = now_ms();
        for (rows, monthly) in [(day, false), (month, true)] {
            for (kind, name, cloud, total) in rows {
                let name = format!("{kind}:{name}");
                if carried.is_some_and(|b| b.holders.contains_key(&name)) {
                    continue;
                }
                if let Some(holder) = self.holders.get(&name) {
                    let mut w = holder.window.lock().unwrap_or_else(|p| p.into_inner());
                    w.roll(now);
                    if monthly {
                        w.month_spent = [*cloud, *total];
                    } else {
                        w.day_spent = [*cloud, *total];
                    }
                }
            }
        }
    }

    /// Whether any budget here is not one `carried` over from a previous
    /// config (and so needs its spend from the ledger).
    pub fn has_new_holders(&self, carried: Option<&Budgets>) -> bool {
        self.holders
            .keys()
            .any(|name| !carried.is_some_and(|b| b.holders.contains_key(name)))
    }

    /// The budgets a request by `key` to a cloud (or local) backend falls under.
    fn applicable(&self, key: &VirtualKey, cloud: bool) -> Vec<String> {
        if self.holders.is_empty() {
            // No budgets configured: nothing to name (nor to format per request).
            return Vec::new();
        }
        let mut names: Vec<String> = std::iter::once(format!("key:{}", key.name))
            .chain(key.team.iter().map(|t| format!("team:{t}")))
            .filter(|name| {
                self.holders
                    .get(name)
                    .is_some_and(|h| cloud || h.limit.scope == SpendScope::Total)
            })
            .collect();
        // A fixed lock order, so two reservations never wait on each other.
        names.sort();
        names
    }

    /// Whether any budget holds requests by `key` to a cloud (or local)
    /// backend.
    pub fn applies(&self, key: &VirtualKey, cloud: bool) -> bool {
        !self.applicable(key, cloud).is_empty()
    }

    /// Reserves `amount` USD for a request, or says which budget is spent.
    pub fn reserve(
        self: &Arc<Self>,
        key: &VirtualKey,
        cloud: bool,
        amount: f64,
    ) -> Result<Reservation, Exhausted> {
        let names = self.applicable(key, cloud);
        let now = now_ms();
        let mut guards = Vec::with_capacity(names.len());
        for name in &names {
            let holder = &self.holders[name];
            let mut window = holder.window.lock().unwrap_or_else(|p| p.into_inner());
            window.roll(now);
            let i = usize::from(holder.limit.scope == SpendScope::Total);
            for (period, spent, cap) in [
                ("daily", window.day_spent, holder.limit.daily_usd),
                ("monthly", window.month_spent, holder.limit.monthly_usd),
            ] {
                let committed = spent[i] + window.reserved[i];
                if let Some(cap) = cap
                    && committed + amount > cap + 1e-12
                {
                    return Err(Exhausted {
                        holder: name.clone(),
                        on_exhausted: holder.limit.on_exhausted,
                        period,
                        limit_usd: cap,
                        committed_usd: committed,
                        request_usd: amount,
                    });
                }
            }
            guards.push(window);
        }
        for window in &mut guards {
            for (i, counts) in slot(cloud).into_iter().enumerate() {
                if counts {
                    window.reserved[i] += amount;
                }
            }
        }
        Ok(Reservation::Local(LocalHold {
            budgets: self.clone(),
            holders: names,
            cloud,
            amount,
            settled: false,
        }))
    }

    fn release(&self, holders: &[String], cloud: bool, reserved: f64, spent: f64) {
        let now = now_ms();
        for name in holders {
            let Some(holder) = self.holders.get(name) else {
                continue;
            };
            let mut window = holder.window.lock().unwrap_or_else(|p| p.into_inner());
            window.roll(now);
            for (i, counts) in slot(cloud).into_iter().enumerate() {
                if counts {
                    window.reserved[i] = (window.reserved[i] - reserved).max(0.0);
                    window.day_spent[i] += spent;
                    window.month_spent[i] += spent;
                }
            }
        }
    }

    /// What each budget has left now (its limit less what is spent and
    /// held by requests in flight), per period it limits:
    /// `(holder, period, remaining_usd)`, by holder name.
    /// Empty when budgets are shared: the numbers are in Redis, and this
    /// process's are only its fallback share.
    pub fn remaining(&self) -> Vec<(&str, &'static str, f64)> {
        if self.shared.is_some() {
            return Vec::new();
        }
        let now = now_ms();
        let mut out = Vec::new();
        for (name, holder) in &self.holders {
            let mut window = holder.window.lock().unwrap_or_else(|p| p.into_inner());
            window.roll(now);
            let i = usize::from(holder.limit.scope == SpendScope::Total);
            for (period, spent, cap) in [
                ("daily", window.day_spent, holder.limit.daily_usd),
                ("monthly", window.month_spent, holder.limit.monthly_usd),
            ] {
                if let Some(cap) = cap {
                    out.push((name.as_str(), period, cap - spent[i] - window.reserved[i]));
                }
            }
        }
        out.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        out
    }

    /// Spend today per holder as `(cloud, total)`, for tests and reports.
    pub fn spent_today(&self, holder: &str) -> Option<[f64; 2]> {
        let holder = self.holders.get(holder)?;
        Some(
            holder
                .window
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .day_spent,
        )
    }
}

/// A request's hold on its budgets. Settle it with the actual cost; dropped
/// unsettled (the request never reached a backend), it frees the hold.
pub enum Reservation {
    Local(LocalHold),
    Shared(SharedHold),
    /// Held in this process's share while Redis was away; its spend goes
    /// to Redis too, when it is back.
    Fallback {
        hold: LocalHold,
        shared: Arc<SharedBudgets>,
        holders: Vec<String>,
        cloud: bool,
    },
}

impl Reservation {
    pub fn settle(&mut self, actual: f64) {
        match self {
            Reservation::Local(hold) => hold.settle(actual),
            Reservation::Shared(hold) => hold.settle(actual),
            Reservation::Fallback {
                hold,
                shared,
                holders,
                cloud,
            } => {
                if !hold.settled && actual > 0.0 {
                    shared.record_spend(holders, *cloud, actual);
                }
                hold.settle(actual);
            }
        }
    }
}

/// A hold on this process's budgets.
pub struct LocalHold {
    budgets: Arc<Budgets>,
    holders: Vec<String>,
    cloud: bool,
    amount: f64,
    settled: bool,
}

impl LocalHold {
    pub fn settle(&mut self, actual: f64) {
        if !self.settled {
            self.settled = true;
            self.budgets
                .release(&self.holders, self.cloud, self.amount, actual);
        }
    }
}

impl Drop for LocalHold {
    fn drop(&mut self) {
        if !self.settled {
            self.budgets
                .release(&self.holders, self.cloud, self.amount, 0.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policies::OnExhausted;
    use switchyard_policies::Team;

    fn key(budget: SpendLimit) -> (Arc<Budgets>, VirtualKey) {
        let key = VirtualKey {
            name: "k".into(),
            hash: [0; 32],
            team: Some("t".into()),
            budget: Some(budget),
            requests_per_minute: None,
            tokens_per_minute: None,
            may_name_backends: true,
            models: None,
            expires_at_ms: None,
            from_api: false,
            sensitive: None,
            mcp: None,
        };
        let team = Team {
            name: "t".into(),
            budget: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            models: None,
            sensitive: None,
        };
        (
            Budgets::new(&Auth {
                keys: vec![key.clone()],
                teams: vec![team],
                admin_key_hash: None,
                disabled: false,
                metrics_key_hash: None,
                metrics_key_labels: true,
                stored_keys_exist: false,
            }),
            key,
        )
    }

    const DAILY_ONE: SpendLimit = SpendLimit {
        daily_usd: Some(1.0),
        monthly_usd: None,
        scope: SpendScope::Cloud,
        on_exhausted: OnExhausted::Refuse,
    };

    #[test]
    fn reservations_cannot_overshoot_together() {
        let (budgets, key) = key(DAILY_ONE);
        let held: Vec<Reservation> = (0..3)
            .filter_map(|_| budgets.reserve(&key, true, 0.4).ok())
            .collect();
        assert_eq!(held.len(), 2, "a third 0.4 would pass 1.0");
        drop(held); // released unsettled: nothing spent
        let mut r = budgets.reserve(&key, true, 0.4).unwrap();
        r.settle(0.3);
        assert_eq!(budgets.spent_today("key:k"), Some([0.3, 0.3]));
        assert!(budgets.reserve(&key, true, 0.7).is_ok());
        assert!(budgets.reserve(&key, true, 0.71).is_err());
    }

    #[test]
    fn a_refusal_gives_the_numbers() {
        let (budgets, key) = key(DAILY_ONE);
        budgets.reserve(&key, true, 0.9905).unwrap().settle(0.9905);
        let refused = budgets.reserve(&key, true, 0.04).err().unwrap();
        assert_eq!(
            refused.to_string(),
            "budget `key:k` cannot cover this request: it may cost up to $0.04, and $0.0095 of its $1.00 daily limit remains (the rest is spent or held by requests in flight); ask for fewer tokens or wait for the next period"
        );
        budgets.reserve(&key, true, 0.0095).unwrap().settle(0.0095);
        let spent = budgets.reserve(&key, true, 0.04).err().unwrap();
        assert!(
            spent
                .to_string()
                .starts_with("budget `key:k` is spent: $1.00 of its $1.00 daily limit"),
            "{spent}"
        );
    }

    #[test]
    fn cloud_budgets_never_block_local_requests() {
        let (budgets, key) = key(DAILY_ONE);
        budgets.reserve(&key, true, 1.0).unwrap().settle(1.0);
        assert!(budgets.reserve(&key, true, 0.01).is_err());
        assert!(budgets.reserve(&key, false, 5.0).is_ok());
        let total = SpendLimit {
            scope: SpendScope::Total,
            ..DAILY_ONE
        };
        let (budgets, key) = self::key(total);
        budgets.reserve(&key, false, 1.0).unwrap().settle(1.0);
        assert!(
            budgets.reserve(&key, false, 0.01).is_err(),
            "a total budget counts local spend"
        );
    }
}
