//! The state shadow traffic runs on: each route's lane (its candidate, its
//! sample, the copies it may hold waiting and running), and what every
//! config shares (the copies' tasks, each route's spend today), carried
//! across reloads like hedged spend. Apart from `shadow` so the running
//! config does not import the request path.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::BoxFuture;
use switchyard_policies::{Config, Profile};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::dispatch::daily_spend::DailySpend;
use crate::metrics::Metrics;

/// Copies in flight at once for a candidate with no `max_concurrency`.
const DEFAULT_RUNNING: usize = 4;

/// One route's shadow.
pub struct ShadowLane {
    pub route: Arc<str>,
    pub candidate: usize,
    pub candidate_name: Arc<str>,
    sample: f64,
    profiles: Vec<Profile>,
    daily_usd: Option<f64>,
    /// Copies taken: waiting for a turn or running (`max_concurrency`
    /// plus `queue`).
    taken: Arc<Semaphore>,
    /// Turns to run, `max_running` of them.
    running: Arc<Semaphore>,
    max_running: usize,
    queue: usize,
    /// Copies waiting for a turn or calling the candidate, for counting
    /// those a shutdown cuts off.
    pending: Arc<AtomicU64>,
}

impl ShadowLane {
    /// Whether this request (of profile `profile`) is one to copy: in the
    /// lane's profiles and inside its sample.
    pub fn samples(&self, profile: Option<Profile>) -> bool {
        let in_profiles =
            self.profiles.is_empty() || profile.is_some_and(|p| self.profiles.contains(&p));
        in_profiles && self.sample > 0.0 && rand::random::<f64>() < self.sample
    }

    /// Copies calling the candidate now.
    pub fn running_now(&self) -> usize {
        self.max_running
            .saturating_sub(self.running.available_permits())
    }
}

/// A copy's place in its lane, from being taken until its call is over.
pub struct Ticket {
    /// Its place among the lane's copies waiting or running.
    place: Option<OwnedSemaphorePermit>,
    running: Arc<Semaphore>,
    pending: Arc<AtomicU64>,
    /// The spend reserved for it, settled when its cost is known.
    pub(crate) reserved_usd: f64,
}

impl Ticket {
    /// Waits for a turn to run; the turn ends when the permit is dropped.
    pub async fn turn(&self) -> Option<OwnedSemaphorePermit> {
        self.running.clone().acquire_owned().await.ok()
    }

    /// The copy's call is over: its place is free for the next, while it
    /// waits to compare with the served answer.
    pub fn called(&mut self) {
        if self.place.take().is_some() {
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.called();
    }
}

/// What every config's shadows share: the running copies, and each
/// route's shadow spend today (by route name).
#[derive(Default)]
pub struct ShadowCopies {
    tasks: Mutex<JoinSet<()>>,
    spend: DailySpend,
    closing: AtomicBool,
}

/// Each route's lane (by route index).
pub struct ShadowLanes {
    lanes: Vec<Option<ShadowLane>>,
    pub(crate) copies: Arc<ShadowCopies>,
}

impl ShadowLanes {
    /// The lanes of `config`'s routes; `previous`: what the running
    /// config's copies share, carried over.
    /// A route whose candidate and limits stay keeps its lane's places, so
    /// copies running across a reload still count against them.
    pub fn new(config: &Config, previous: Option<&ShadowLanes>) -> Self {
        let backend_index = |name: &str| config.backends.keys().position(|b| b == name);
        let kept = |route: &str, candidate: &str, running: usize, queue: usize| {
            previous?.lanes.iter().flatten().find(|l| {
                &*l.route == route
                    && &*l.candidate_name == candidate
                    && (l.max_running, l.queue) == (running, queue)
            })
        };
        let lanes = config
            .routes
            .values()
            .map(|route| {
                let shadow = route.shadow.as_ref()?;
                let candidate = backend_index(&shadow.backend)?;
                let running = shadow
                    .max_concurrency
                    .or(config.backends.get(&shadow.backend)?.max_concurrency)
                    .unwrap_or(DEFAULT_RUNNING);
                let (taken, turns, pending) =
                    match kept(&route.name, &shadow.backend, running, shadow.queue) {
                        Some(old) => (old.taken.clone(), old.running.clone(), old.pending.clone()),
                        None => (
                            Arc::new(Semaphore::new(running + shadow.queue)),
                            Arc::new(Semaphore::new(running)),
                            Arc::new(AtomicU64::new(0)),
                        ),
                    };
                Some(ShadowLane {
                    route: Arc::from(route.name.as_str()),
                    candidate,
                    candidate_name: Arc::from(shadow.backend.as_str()),
                    sample: shadow.sample,
                    profiles: shadow.profiles.clone(),
                    daily_usd: shadow.daily_usd,
                    taken,
                    running: turns,
                    max_running: running,
                    queue: shadow.queue,
                    pending,
                })
            })
            .collect();
        ShadowLanes {
            lanes,
            copies: previous.map(|p| p.copies.clone()).unwrap_or_default(),
        }
    }

    pub fn lane(&self, route: usize) -> Option<&ShadowLane> {
        self.lanes.get(route)?.as_ref()
    }

    /// A place on `lane` for a copy that may cost `estimate_usd` at worst,
    /// or why not (`shutdown`, `queue_full`, `over_budget`), as the copies
    /// metric names it.
    pub fn take(&self, lane: &ShadowLane, estimate_usd: f64) -> Result<Ticket, &'static str> {
        if self.copies.closing.load(Ordering::Acquire) {
            return Err("shutdown");
        }
        let taken = lane
            .taken
            .clone()
            .try_acquire_owned()
            .map_err(|_| "queue_full")?;
        // A cap reached is reached even for a copy whose worst case is $0.
        if let Some(cap) = lane.daily_usd
            && (self.copies.spend.spent_today(&lane.route) >= cap
                || !self.copies.spend.take(&lane.route, estimate_usd, cap))
        {
            return Err("over_budget");
        }
        lane.pending.fetch_add(1, Ordering::AcqRel);
        Ok(Ticket {
            place: Some(taken),
            running: lane.running.clone(),
            pending: lane.pending.clone(),
            reserved_usd: estimate_usd,
        })
    }

    /// Settles a copy's reserved spend on `route` to what it cost.
    pub fn settle(&self, route: usize, reserved_usd: f64, cost_usd: f64) {
        if let Some(lane) = self.lane(route)
            && lane.daily_usd.is_some()
        {
            self.copies
                .spend
                .adjust(&lane.route, cost_usd - reserved_usd);
        }
    }

    /// Runs a copy beside the requests; a shutdown waits for it (up to its
    /// grace).
    pub fn spawn(&self, copy: BoxFuture<'static, ()>) {
        let mut tasks = self.copies.tasks.lock().unwrap_or_else(|p| p.into_inner());
        // Finished copies are reaped as new ones come, so the set holds
        // only what runs.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(copy);
    }

    /// Takes no more copies (the gateway is shutting down).
    pub fn close(&self) {
        self.copies.closing.store(true, Ordering::Release);
    }

    /// At shutdown: lets the copies taken finish until `deadline`, then
    /// cuts off the rest (a running call's row is written as cancelled, as
    /// for a client that leaves; a copy waiting to compare is written
    /// without the comparison) and counts those still waiting or calling.
    pub async fn finish(&self, deadline: Instant, metrics: &Metrics) {
        self.close();
        let mut tasks =
            std::mem::take(&mut *self.copies.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        let all_done = async { while tasks.join_next().await.is_some() {} };
        if tokio::time::timeout_at(deadline.into(), all_done)
            .await
            .is_ok()
        {
            return;
        }
        for lane in self.lanes.iter().flatten() {
            let cut = lane.pending.load(Ordering::Acquire);
            if cut > 0 {
                metrics.shadow_copies(&lane.route, &lane.candidate_name, "shutdown", cut);
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}
