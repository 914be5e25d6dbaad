//! Budgets in Redis: a reservation holds a request's worst case on every
//! budget it falls under in one script, so replicas together cannot
//! overshoot; settlement releases the hold and counts the actual spend.

use std::collections::HashMap;
use std::sync::Arc;

use switchyard_policies::calendar::periods;
use switchyard_policies::{Auth, SpendLimit, SpendScope};

use crate::admit::access::Exhausted;

use crate::admit::access::holders::budget_holders;
use crate::admit::access::shared::rate::RateTicket;
use crate::admit::access::shared::scripts::{ADMIT, EXISTING, RESERVE, RateRefusal, Reply, SEED};
use crate::admit::access::shared::settler::{HolderKeys, Settlement};
use crate::admit::access::shared::store::{RedisStore, StateError};
use crate::ledger::now_ms;

/// Spend per budget holder since a time (ms): `(kind, name, cloud_usd,
/// total_usd)`, read from the ledger to start a period's shared spend.
pub type SpendSince =
    Arc<dyn Fn(i64) -> anyhow::Result<Vec<(String, String, f64, f64)>> + Send + Sync>;

/// How long seeding a period's shared spend may wait for the ledger.
const SEED_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// What refused a reservation made with a rate check.
pub enum Refusal {
    Budget(Exhausted),
    Rate(RateRefusal),
}

pub struct SharedBudgets {
    store: Arc<RedisStore>,
    /// Each holder's limits as configured (the local fallback has them
    /// divided by the replica count).
    limits: HashMap<String, SpendLimit>,
    spend_since: SpendSince,
    seeding: tokio::sync::Mutex<()>,
}

/// Whole micro-dollars: holds round up, so a hold never covers less than
/// the request could cost.
fn micros_up(usd: f64) -> i64 {
    (usd * 1e6).ceil() as i64
}

fn micros(usd: f64) -> i64 {
    (usd * 1e6).round() as i64
}

impl SharedBudgets {
    pub fn new(store: Arc<RedisStore>, auth: &Auth, spend_since: SpendSince) -> Arc<SharedBudgets> {
        let limits = budget_holders(auth).collect();
        Arc::new(SharedBudgets {
            store,
            limits,
            spend_since,
            seeding: tokio::sync::Mutex::new(()),
        })
    }

    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    fn keys(&self, holder: &str, now: i64) -> HolderKeys {
        let (day, month) = periods(now);
        let store = &self.store;
        HolderKeys {
            spent_today: store.key(&format!("sp:{holder}:d:{day}")),
            spent_month: store.key(&format!("sp:{holder}:m:{month}")),
            reserved: store.key(&format!("rv:{holder}")),
            holds: store.key(&format!("hd:{holder}")),
        }
    }

    /// Holds `amount` USD on `holders` (sorted names), with `ticket`'s rate
    /// check in the same round trip when given; or says what refused.
    /// `Err` when Redis cannot be asked.
    pub async fn reserve(
        self: &Arc<Self>,
        holders: &[String],
        cloud: bool,
        amount: f64,
        mut ticket: Option<&mut RateTicket>,
    ) -> Result<Result<SharedHold, Refusal>, StateError> {
        let now = now_ms();
        let keys: Vec<HolderKeys> = holders.iter().map(|h| self.keys(h, now)).collect();
        let rid = self.store.next_id();
        let held = micros_up(amount);
        let member = format!("{rid}|{}|{held}", u8::from(cloud));
        let ttl_us = u64::try_from(self.store.hold_ttl.as_micros()).unwrap_or(u64::MAX);
        for _attempt in 0..2 {
            if !self.store.is_up() {
                return Err(StateError::Unavailable);
            }
            let mut invocation = match ticket {
                Some(_) => ADMIT.prepare_invoke(),
                None => RESERVE.prepare_invoke(),
            };
            if let Some(ticket) = &ticket {
                ticket.add_keys(&mut invocation);
            }
            for k in &keys {
                invocation
                    .key(&k.spent_today)
                    .key(&k.spent_month)
                    .key(&k.reserved)
                    .key(&k.holds);
            }
            invocation.arg(0);
            if let Some(ticket) = &ticket {
                ticket.add_args(&mut invocation);
            }
            invocation
                .arg(&member)
                .arg(u8::from(cloud))
                .arg(held)
                .arg(ttl_us);
            for holder in holders {
                let limit = &self.limits[holder];
                let field = if limit.scope == SpendScope::Cloud {
                    "c"
                } else {
                    "t"
                };
                invocation
                    .arg(field)
                    .arg(limit.daily_usd.map_or(-1, micros))
                    .arg(limit.monthly_usd.map_or(-1, micros));
            }
            // Until the reply says otherwise, the hold may exist: dropped
            // (the caller went away, or Redis did not answer in time), this
            // guard releases it through the settler.
            let mut guard = SharedHold {
                store: self.store.clone(),
                marker: self.store.key(&format!("st:{rid}")),
                member: member.clone(),
                holders: keys.clone(),
                cloud,
                amount: held,
                settled: false,
            };
            // Counted by this call, or given up with it: never counted
            // again when the ticket drops.
            if let Some(ticket) = ticket.as_deref_mut() {
                ticket.sent();
            }
            let reply: Vec<i64> = self.store.run(&invocation).await?;
            let parsed = Reply::parse(&reply);
            if !matches!(parsed, Some(Reply::Done)) {
                guard.settled = true; // no hold was taken
            }
            match parsed {
                Some(Reply::Done) => {
                    self.store.settler().track(
                        &guard.marker,
                        keys.iter().map(|k| k.holds.clone()).collect(),
                        &member,
                    );
                    return Ok(Ok(guard));
                }
                Some(Reply::Unseeded(unseeded)) => {
                    // One seed at a time in this process: the requests that
                    // arrive together at a new day (or after Redis restarted
                    // empty) wait for the first one's, rather than each
                    // reading the ledger.
                    let _one_at_a_time = self.seeding.lock().await;
                    if !self.seeded(&keys, &unseeded).await? {
                        self.seed(holders, &keys, &unseeded, now).await?;
                    }
                }
                Some(Reply::Exhausted {
                    holder,
                    period,
                    cap,
                    committed,
                }) if holder < holders.len() => {
                    let holder = &holders[holder];
                    return Ok(Err(Refusal::Budget(Exhausted {
                        holder: holder.clone(),
                        on_exhausted: self.limits[holder].on_exhausted,
                        period,
                        limit_usd: cap as f64 / 1e6,
                        committed_usd: committed as f64 / 1e6,
                        request_usd: amount,
                    })));
                }
                Some(Reply::Limited { pair, limit })
                    if ticket.as_ref().is_some_and(|t| pair < t.pair_count()) =>
                {
                    let refusal = ticket.as_ref().map(|t| t.refusal(pair, limit));
                    return Ok(Err(Refusal::Rate(refusal.ok_or(StateError::Rejected)?)));
                }
                _ => {
                    tracing::error!(?reply, "unexpected reply from the reserve script");
                    return Err(StateError::Rejected);
                }
            }
        }
        // Seeded, and yet unseeded: the keys expired between the calls.
        Err(StateError::Unavailable)
    }

    /// Whether the periods of the `unseeded` holders have been started
    /// since (by another request, or another replica).
    async fn seeded(&self, keys: &[HolderKeys], unseeded: &[usize]) -> Result<bool, StateError> {
        let mut invocation = EXISTING.prepare_invoke();
        for k in unseeded.iter().filter_map(|&i| keys.get(i)) {
            invocation.key(&k.spent_today).key(&k.spent_month);
        }
        let existing: usize = self.store.run(&invocation).await?;
        Ok(existing == 2 * unseeded.len())
    }

    /// Starts this day's and month's spend of `unseeded` holders from the
    /// ledger (unless another replica just did).
    async fn seed(
        &self,
        holders: &[String],
        keys: &[HolderKeys],
        unseeded: &[usize],
        now: i64,
    ) -> Result<(), StateError> {
        let (day_start, month_start) = switchyard_policies::calendar::period_starts(now);
        let read = self.spend_since.clone();
        let reading = tokio::task::spawn_blocking(move || {
            Ok::<_, anyhow::Error>((read(day_start)?, read(month_start)?))
        });
        // A ledger that does not answer soon is treated as Redis away:
        // the request falls back (or is refused), it does not hang.
        let spent = tokio::time::timeout(SEED_TIMEOUT, reading)
            .await
            .map_err(|_| {
                tracing::error!("the ledger did not answer within 2 s to seed shared budgets");
                StateError::Unavailable
            })?
            .map_err(|_| StateError::Unavailable)?;
        let (day, month) = spent.map_err(|err| {
            tracing::error!(%err, "cannot read the ledger to seed shared budgets");
            StateError::Unavailable
        })?;
        let find = |rows: &[(String, String, f64, f64)], holder: &str| {
            rows.iter()
                .find(|(kind, name, _, _)| {
                    holder.split_once(':') == Some((kind.as_str(), name.as_str()))
                })
                .map_or((0, 0), |(_, _, cloud, total)| {
                    (micros(*cloud), micros(*total))
                })
        };
        let mut invocation = SEED.prepare_invoke();
        for &i in unseeded {
            let (Some(holder), Some(k)) = (holders.get(i), keys.get(i)) else {
                continue;
            };
            let (day_cloud, day_total) = find(&day, holder);
            let (month_cloud, month_total) = find(&month, holder);
            invocation.key(&k.spent_today).key(&k.spent_month);
            invocation
                .arg(day_cloud)
                .arg(day_total)
                .arg(month_cloud)
                .arg(month_total);
        }
        self.store.run::<i64>(&invocation).await?;
        Ok(())
    }
}

impl SharedBudgets {
    /// Counts `actual` USD spent on `holders` without a hold: a request
    /// served from this process's share while Redis was away. Sent
    /// through the settler, so it lands when Redis is back.
    pub fn record_spend(&self, holders: &[String], cloud: bool, actual: f64) {
        let now = now_ms();
        self.store.settle(Settlement::Budget {
            marker: self.store.key(&format!("st:{}", self.store.next_id())),
            member: String::from("-"),
            holders: holders.iter().map(|h| self.keys(h, now)).collect(),
            cloud,
            amount: 0,
            actual: micros(actual),
            unsure_since: None,
        });
    }
}

/// A request's hold on shared budgets; settled (or dropped, which
/// releases it) through the settler.
pub struct SharedHold {
    store: Arc<RedisStore>,
    marker: String,
    member: String,
    holders: Vec<HolderKeys>,
    cloud: bool,
    amount: i64,
    settled: bool,
}

impl SharedHold {
    pub fn settle(&mut self, actual: f64) {
        if !self.settled {
            self.settled = true;
            self.store.settle(Settlement::Budget {
                marker: self.marker.clone(),
                member: self.member.clone(),
                holders: std::mem::take(&mut self.holders),
                cloud: self.cloud,
                amount: self.amount,
                actual: micros(actual),
                unsure_since: None,
            });
        }
    }
}

impl Drop for SharedHold {
    fn drop(&mut self) {
        self.settle(0.0);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use switchyard_policies::{OnExhausted, OnUnavailable, RedisState, Secretive, SpendScope};

    use super::super::test_redis::{connect, redis};
    use super::*;

    /// Requests arriving together at a budget's first use read the
    /// ledger once between them (a day and a month), not once each, and
    /// each gets its hold.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_first_uses_seed_once() {
        let Some(server) = redis() else { return };
        connect(&server).await; // until it listens
        let store = RedisStore::open(&RedisState {
            url: Secretive::Literal(format!("redis://127.0.0.1:{}", server.1)),
            key_prefix: "seed-once".into(),
            pool_size: 2,
            timeout: Duration::from_secs(2),
            on_unavailable: OnUnavailable::FailClosed,
            replicas: 1,
            hold_ttl: Duration::from_secs(30),
        })
        .unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        let spend_since: SpendSince = Arc::new(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50)); // a ledger takes a while
            Ok(vec![("key".into(), "k".into(), 0.25, 0.25)])
        });
        let limit = SpendLimit {
            daily_usd: Some(100.0),
            monthly_usd: None,
            scope: SpendScope::Cloud,
            on_exhausted: OnExhausted::Refuse,
        };
        let budgets = Arc::new(SharedBudgets {
            store: store.clone(),
            limits: HashMap::from([("key:k".to_owned(), limit)]),
            spend_since,
            seeding: tokio::sync::Mutex::new(()),
        });
        let holders = vec!["key:k".to_owned()];
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (budgets, holders) = (budgets.clone(), holders.clone());
                tokio::spawn(async move { budgets.reserve(&holders, true, 0.01, None).await })
            })
            .collect();
        for task in tasks {
            assert!(matches!(task.await.unwrap(), Ok(Ok(_))));
        }
        assert_eq!(
            reads.load(Ordering::Relaxed),
            2,
            "one day and one month read"
        );
        let day = budgets.keys("key:k", now_ms()).spent_today;
        let mut connection = store.connection();
        let seeded: i64 = redis::cmd("HGET")
            .arg(&day)
            .arg("c")
            .query_async(&mut connection)
            .await
            .unwrap();
        assert_eq!(seeded, 250_000, "the ledger's $0.25");
    }
}
