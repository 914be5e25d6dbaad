//! Settlement off the answer's latency: reservations ending and tokens
//! used beyond their estimates go to one task, which sends them to Redis
//! in batches (one script call each), keeps what Redis could not take
//! until it can (settlement is idempotent), and renews the holds of
//! requests still running so they outlive their ttl only while their
//! replica does.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::admit::access::shared::scripts::{OWE, RENEW, SETTLE};
use crate::admit::access::shared::store::{RedisStore, StateError};

/// The keys of one budget in the current day and month.
#[derive(Debug, Clone)]
pub struct HolderKeys {
    pub spent_today: String,
    pub spent_month: String,
    pub reserved: String,
    pub holds: String,
}

pub enum Settlement {
    /// A reservation ended: its hold is released and `actual` counted.
    Budget {
        marker: String,
        member: String,
        holders: Vec<HolderKeys>,
        cloud: bool,
        amount: i64,
        actual: i64,
        /// When a send of it ended with no answer: Redis may have applied
        /// it. Its marker keeps a resend from counting twice only for
        /// [`MARKER_LIFE`].
        unsure_since: Option<std::time::Instant>,
    },
    /// Rate limiters moved on without a check (`owe.lua`'s `debt` or
    /// `count`): tokens a request used beyond its estimate, or a
    /// request that ended before its check was sent.
    Rate {
        mode: &'static str,
        /// The requests and tokens limiters of each holder.
        limiters: Vec<String>,
        /// Per holder: requests t, requests burst, tokens t, tokens burst.
        args: Vec<f64>,
        tokens: u64,
    },
}

/// How long a settlement's marker lives in Redis (`settle.lua`'s PX).
const MARKER_LIFE: Duration = Duration::from_secs(3600);
/// A settlement whose outcome is unknown is resent only this long after:
/// later its marker may be gone, and a resend could count it twice. It is
/// dropped and counted instead (the ledger has its row; the next seed of
/// the budget from the ledger counts it).
const RESEND_WITHIN: Duration = MARKER_LIFE.saturating_sub(Duration::from_secs(300));

/// Settlements waiting for Redis, at most: past it new ones are dropped
/// and counted (the ledger still has their rows).
const BACKLOG: usize = 100_000;
/// Settlements per script call.
const BATCH: usize = 256;
/// How long settlements gather before a batch goes: spend reaches Redis
/// this much later, and holds last this much longer (they only ever
/// cover more than the spend).
const GATHER: Duration = Duration::from_millis(10);

pub struct Settler {
    queue: mpsc::Sender<Settlement>,
    /// Holds of requests in flight, by reservation: renewed every third
    /// of the hold ttl.
    live: Mutex<HashMap<String, (Vec<String>, String)>>,
    pub dropped: AtomicU64,
}

impl Settler {
    pub fn start(store: Weak<RedisStore>, hold_ttl: Duration) -> Settler {
        let (queue, inbox) = mpsc::channel(BACKLOG);
        tokio::spawn(run(store.clone(), inbox));
        tokio::spawn(renew(store, hold_ttl));
        Settler {
            queue,
            live: Mutex::default(),
            dropped: AtomicU64::new(0),
        }
    }

    pub fn send(&self, settlement: Settlement) {
        if let Settlement::Budget { marker, .. } = &settlement {
            self.live
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(marker);
        }
        if self.queue.try_send(settlement).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::error!("settlement backlog full: a settlement was dropped");
        }
    }

    /// Renews `member` in `holds` until its reservation settles.
    pub fn track(&self, marker: &str, holds: Vec<String>, member: &str) {
        self.live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(marker.to_owned(), (holds, member.to_owned()));
    }
}

async fn run(store: Weak<RedisStore>, mut inbox: mpsc::Receiver<Settlement>) {
    let mut waiting: VecDeque<Settlement> = VecDeque::new();
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        if waiting.is_empty() {
            if inbox.recv_many(&mut batch, BATCH).await == 0 {
                return; // the store is gone
            }
            // A moment for more to arrive: one script call for many
            // requests, and fewer calls queued in Redis ahead of the next
            // request's admission.
            tokio::time::sleep(GATHER).await;
            while batch.len() < BATCH
                && let Ok(s) = inbox.try_recv()
            {
                batch.push(s);
            }
            waiting.extend(batch.drain(..));
        } else {
            // Redis was away: take what arrived, then try again shortly.
            while waiting.len() < BACKLOG
                && let Ok(s) = inbox.try_recv()
            {
                waiting.push_back(s);
            }
        }
        let Some(store) = store.upgrade() else { return };
        let stale = drop_stale(&mut waiting, std::time::Instant::now());
        if stale > 0 {
            store.settler().dropped.fetch_add(stale, Ordering::Relaxed);
            tracing::error!(
                settlements = stale,
                "budget settlements whose outcome is unknown are too old to resend safely: dropped (the ledger has their rows)"
            );
        }
        while !waiting.is_empty() {
            let take = waiting.len().min(BATCH);
            let chunk: Vec<Settlement> = waiting.drain(..take).collect();
            match send(&store, chunk).await {
                Ok(()) => {}
                // Redis answered with an error: retrying would block every
                // settlement behind these.
                Err((StateError::Rejected, unsent)) => {
                    store
                        .settler()
                        .dropped
                        .fetch_add(unsent.len() as u64, Ordering::Relaxed);
                    tracing::error!(
                        settlements = unsent.len(),
                        "Redis refused settlements: dropped (the ledger has their rows)"
                    );
                }
                Err((StateError::Unavailable, unsent)) => {
                    // Back at the front, in order: retried when Redis answers.
                    for s in unsent.into_iter().rev() {
                        waiting.push_front(s);
                    }
                    drop(store);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    break;
                }
            }
        }
    }
}

/// Drops the budget settlements whose outcome has been unknown for longer
/// than a resend is safe; how many.
fn drop_stale(waiting: &mut VecDeque<Settlement>, now: std::time::Instant) -> u64 {
    let before = waiting.len();
    waiting.retain(|s| {
        !matches!(s, Settlement::Budget { unsure_since: Some(t), .. }
            if now.saturating_duration_since(*t) > RESEND_WITHIN)
    });
    (before - waiting.len()) as u64
}

/// One script call for the chunk's budget settlements, one for its rate
/// settlements; on failure, what is still to send (budget settlements are
/// idempotent, rate settlements are not, so a sent part is not resent).
async fn send(
    store: &std::sync::Arc<RedisStore>,
    chunk: Vec<Settlement>,
) -> Result<(), (StateError, Vec<Settlement>)> {
    let (budgets, rates): (Vec<Settlement>, Vec<Settlement>) = chunk
        .into_iter()
        .partition(|s| matches!(s, Settlement::Budget { .. }));
    if !budgets.is_empty() {
        let mut settle = SETTLE.prepare_invoke();
        settle.arg(budgets.len());
        for s in &budgets {
            if let Settlement::Budget {
                marker,
                member,
                holders,
                cloud,
                amount,
                actual,
                ..
            } = s
            {
                settle.key(marker);
                settle
                    .arg(member)
                    .arg(u8::from(*cloud))
                    .arg(*amount)
                    .arg(*actual)
                    .arg(holders.len());
                for h in holders {
                    settle
                        .key(&h.spent_today)
                        .key(&h.spent_month)
                        .key(&h.reserved)
                        .key(&h.holds);
                }
            }
        }
        if let Err(err) = store.run::<i64>(&settle).await {
            let mut unsent = budgets;
            if err == StateError::Unavailable {
                // Sent, perhaps applied: a resend relies on the markers.
                let now = std::time::Instant::now();
                for s in &mut unsent {
                    if let Settlement::Budget { unsure_since, .. } = s {
                        unsure_since.get_or_insert(now);
                    }
                }
            }
            unsent.extend(rates);
            return Err((err, unsent));
        }
    }
    if !rates.is_empty() {
        let mut owe = OWE.prepare_invoke();
        owe.arg(rates.len());
        for s in &rates {
            if let Settlement::Rate {
                mode,
                limiters,
                args,
                tokens,
            } = s
            {
                for limiter in limiters {
                    owe.key(limiter);
                }
                owe.arg(*mode).arg(limiters.len() / 2);
                for arg in args {
                    owe.arg(*arg);
                }
                owe.arg(*tokens);
            }
        }
        store.run::<i64>(&owe).await.map_err(|err| (err, rates))?;
    }
    Ok(())
}

/// Every third of the hold ttl, renews the holds of requests in flight.
async fn renew(store: Weak<RedisStore>, hold_ttl: Duration) {
    let every = hold_ttl / 3;
    loop {
        tokio::time::sleep(every).await;
        let Some(store) = store.upgrade() else { return };
        let live: Vec<(String, String)> = store
            .settler()
            .live
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .flat_map(|(holds, member)| holds.iter().map(|h| (h.clone(), member.clone())))
            .collect();
        for chunk in live.chunks(BATCH) {
            let mut invocation = RENEW.prepare_invoke();
            invocation.arg(u64::try_from(hold_ttl.as_micros()).unwrap_or(u64::MAX));
            for (holds, member) in chunk {
                invocation.key(holds).arg(member);
            }
            // Redis away: the holds may lapse, and their budget frees up
            // early (settlement still counts the spend).
            let _ = store.run::<i64>(&invocation).await;
        }
    }
}

#[cfg(test)]
mod stale_tests {
    use super::*;

    fn budget(unsure_since: Option<std::time::Instant>) -> Settlement {
        Settlement::Budget {
            marker: "m".into(),
            member: "r".into(),
            holders: Vec::new(),
            cloud: true,
            amount: 1,
            actual: 1,
            unsure_since,
        }
    }

    /// A settlement Redis may have applied is resent only while its marker
    /// still guards it; one never sent, or sent and refused, waits on.
    #[test]
    fn only_settlements_unsure_for_too_long_are_dropped() {
        let now = std::time::Instant::now() + MARKER_LIFE;
        let mut waiting: VecDeque<Settlement> = [
            budget(None),
            budget(Some(now - Duration::from_secs(60))),
            budget(Some(now - MARKER_LIFE)),
        ]
        .into();
        assert_eq!(drop_stale(&mut waiting, now), 1);
        assert_eq!(waiting.len(), 2);
        assert!(RESEND_WITHIN < MARKER_LIFE);
    }
}
