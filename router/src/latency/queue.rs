//! The work ahead of a new request on one backend: the requests this
//! gateway has running there or waiting for a slot, each with its predicted
//! service time, and what the engine itself reports (other clients, other
//! gateway replicas). A new request's wait is when the backend's slots,
//! serving that work in order, first have room for it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// What the engine reports it is doing (llama.cpp `requests_processing` and
/// `requests_deferred`, vLLM `num_requests_running` and `_waiting`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineLoad {
    pub running: u32,
    pub waiting: u32,
}

/// A running request is expected to need at least this share of its
/// predicted service time again, however long it has run already (it has
/// overrun its prediction, and is still going).
const OVERRUN_FLOOR: f64 = 0.1;

#[derive(Debug, Clone)]
struct Work {
    id: u64,
    /// When it got a slot; `None` while it waits for one.
    running_since: Option<Instant>,
    service_ms: f64,
    /// A request routed here and not yet admitted: counted as work ahead
    /// until then, so requests decided at the same moment see each other,
    /// and forgotten past this instant if it never is (refused, answered
    /// from a cache).
    reserved_until: Option<Instant>,
    /// The most requests running here at once since it got its slot, until
    /// its first token; `None` once that came.
    peak_running: Option<u32>,
}

/// How long a decision's reservation waits for its admission.
pub const RESERVATION: Duration = Duration::from_secs(2);
/// The most reservations a backend holds at once.
const MAX_RESERVATIONS: usize = 256;

#[derive(Debug, Clone, Default)]
pub struct Queue {
    work: Vec<Work>,
    next_id: u64,
    /// The engine's last report, and until when it is trusted.
    engine: Option<(EngineLoad, Instant)>,
}

impl Queue {
    /// A request that will need `service_ms` of the backend's time; it
    /// waits for a slot until [`Queue::running`].
    pub fn add(&mut self, service_ms: f64) -> u64 {
        self.push(service_ms, None)
    }

    /// A request just routed here: work ahead until `now` plus
    /// [`RESERVATION`], unless [`Queue::admit`] takes it over first.
    pub fn reserve(&mut self, service_ms: f64, now: Instant) {
        self.work
            .retain(|w| w.reserved_until.is_none_or(|until| until > now));
        // Decisions far outrunning admissions (a flood answered from a
        // cache) do not grow the list without bound.
        if self
            .work
            .iter()
            .filter(|w| w.reserved_until.is_some())
            .count()
            < MAX_RESERVATIONS
        {
            self.push(service_ms, Some(now + RESERVATION));
        }
    }

    /// A request admitted here: it takes over the oldest reservation still
    /// standing (its own, as a rule: decisions are admitted in the order
    /// made), or is added.
    pub fn admit(&mut self, service_ms: f64, now: Instant) -> u64 {
        let reserved = self
            .work
            .iter_mut()
            .find(|w| w.reserved_until.is_some_and(|until| until > now));
        match reserved {
            Some(work) => {
                work.reserved_until = None;
                work.service_ms = service_ms;
                work.id
            }
            None => self.add(service_ms),
        }
    }

    fn push(&mut self, service_ms: f64, reserved_until: Option<Instant>) -> u64 {
        self.next_id += 1;
        self.work.push(Work {
            id: self.next_id,
            running_since: None,
            service_ms,
            reserved_until,
            peak_running: None,
        });
        self.next_id
    }

    /// The work that stands at `now`: everything but lapsed reservations.
    fn standing(&self, now: Instant) -> impl Iterator<Item = &Work> {
        self.work
            .iter()
            .filter(move |w| w.reserved_until.is_none_or(|until| until > now))
    }

    pub fn running(&mut self, id: u64, now: Instant) {
        let Some(work) = self.work.iter_mut().find(|w| w.id == id) else {
            return;
        };
        work.running_since = Some(now);
        work.peak_running = Some(0);
        // Every request still waiting for its first token now runs beside
        // one more: which of two started together the backend serves first
        // is not the order they got their slots in.
        let running = u32::try_from(self.running_count()).unwrap_or(u32::MAX);
        for w in &mut self.work {
            if let Some(peak) = &mut w.peak_running {
                *peak = (*peak).max(running);
            }
        }
    }

    /// The most requests that ran here at once (itself included) between
    /// the request getting its slot and now, its first token; from now on
    /// it is no longer followed.
    pub fn first_token(&mut self, id: u64) -> Option<u32> {
        self.work
            .iter_mut()
            .find(|w| w.id == id)
            .and_then(|w| w.peak_running.take())
    }

    pub fn remove(&mut self, id: u64) {
        self.work.retain(|w| w.id != id);
    }

    /// The engine's report, trusted for `fresh_for` (two scrape intervals:
    /// past that, the scrape has stopped).
    pub fn set_engine_load(&mut self, load: EngineLoad, now: Instant, fresh_for: Duration) {
        self.engine = Some((load, now + fresh_for));
    }

    /// Requests this gateway has at the backend or waiting for it.
    pub fn len(&self) -> usize {
        self.work.len()
    }

    pub fn running_count(&self) -> usize {
        self.work
            .iter()
            .filter(|w| w.running_since.is_some())
            .count()
    }

    /// Requests the engine has beyond this gateway's running ones (other
    /// clients', other gateway replicas'): running, and waiting inside the
    /// engine. Ours count among the engine's running first, then among its
    /// waiting.
    fn engine_extra(&self, ours_running: usize, now: Instant) -> (usize, usize) {
        match self.engine {
            Some((load, until)) if now <= until => {
                let (running, waiting) = (load.running as usize, load.waiting as usize);
                let others = (running + waiting).saturating_sub(ours_running);
                let others_running = running.saturating_sub(ours_running);
                (others_running, others - others_running)
            }
            _ => (0, 0),
        }
    }

    /// How long a new request waits for one of `slots` slots, with
    /// `typical_ms` the service time of a request known only by count.
    pub fn wait_ms(&self, slots: u32, typical_ms: f64, now: Instant) -> f64 {
        let slots = slots.max(1) as usize;
        let ours_running = self.running_count();
        let (extra_running, extra_waiting) = self.engine_extra(ours_running, now);
        if self.standing(now).count() + extra_running + extra_waiting < slots {
            return 0.0;
        }
        // Time left of what holds the slots now (another client's request
        // is taken to be half done) ...
        let mut holding: Vec<f64> = self
            .standing(now)
            .filter_map(|w| {
                let since = w.running_since?;
                let ran = now.saturating_duration_since(since).as_secs_f64() * 1000.0;
                Some((w.service_ms - ran).max(w.service_ms * OVERRUN_FLOOR))
            })
            .chain(std::iter::repeat_n(typical_ms / 2.0, extra_running))
            .collect();
        // ... then, in order, what waits: inside the engine first (it was
        // sent before anything still queued here), then here.
        let waiting = std::iter::repeat_n(typical_ms, extra_waiting).chain(
            self.standing(now)
                .filter(|w| w.running_since.is_none())
                .map(|w| w.service_ms),
        );
        // More running than slots (a report and a count out of step): the
        // soonest to finish hold them.
        holding.sort_by(f64::total_cmp);
        let mut queue: Vec<f64> = holding.split_off(holding.len().min(slots));
        queue.extend(waiting);
        let mut free: BinaryHeap<Reverse<Millis>> =
            holding.into_iter().map(|ms| Reverse(Millis(ms))).collect();
        while free.len() < slots {
            free.push(Reverse(Millis(0.0)));
        }
        for service in queue {
            if let Some(Reverse(Millis(at))) = free.pop() {
                free.push(Reverse(Millis(at + service)));
            }
        }
        free.peek().map_or(0.0, |Reverse(Millis(at))| *at)
    }
}

/// Milliseconds, ordered (never NaN: service times are finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Millis(f64);

impl Eq for Millis {}

impl PartialOrd for Millis {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Millis {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_slot_means_no_wait() {
        let mut queue = Queue::default();
        let now = Instant::now();
        let id = queue.add(1000.0);
        queue.running(id, now);
        assert_eq!(queue.wait_ms(2, 500.0, now), 0.0);
    }

    #[test]
    fn the_wait_is_when_the_slots_first_have_room() {
        let start = Instant::now();
        let mut queue = Queue::default();
        // One slot: a request 400 ms into a 1000 ms service, two waiting
        // of 300 ms each.
        let running = queue.add(1000.0);
        queue.running(running, start);
        queue.add(300.0);
        queue.add(300.0);
        let now = start + Duration::from_millis(400);
        assert!((queue.wait_ms(1, 500.0, now) - 1200.0).abs() < 1e-6);
        // Two slots: the free one serves both waiting requests (done at
        // 300, then 600) while the running one has 600 left: a new one
        // starts at 600.
        assert!((queue.wait_ms(2, 500.0, now) - 600.0).abs() < 1e-6);
        // An overrun request is still expected to take a tenth of its time.
        let late = start + Duration::from_millis(5000);
        assert!((queue.wait_ms(1, 500.0, late) - 700.0).abs() < 1e-6);
        queue.remove(running);
        assert!((queue.wait_ms(1, 500.0, late) - 600.0).abs() < 1e-6);
    }

    #[test]
    fn a_reservation_counts_until_admitted_or_lapsed() {
        let now = Instant::now();
        let mut queue = Queue::default();
        // Two decisions at once: the second sees the first's reservation.
        queue.reserve(1000.0, now);
        assert!((queue.wait_ms(1, 500.0, now) - 1000.0).abs() < 1e-6);
        // Admitted, it takes the reservation over: still one ahead.
        let first = queue.admit(900.0, now);
        assert_eq!(queue.len(), 1);
        assert!((queue.wait_ms(1, 500.0, now) - 900.0).abs() < 1e-6);
        queue.remove(first);
        // One never admitted is forgotten once it lapses.
        queue.reserve(1000.0, now);
        let later = now + RESERVATION + Duration::from_millis(1);
        assert_eq!(queue.wait_ms(1, 500.0, later), 0.0);
        assert_ne!(queue.admit(100.0, later), first);
    }

    #[test]
    fn the_engines_other_work_counts_while_its_report_is_fresh() {
        let now = Instant::now();
        let mut queue = Queue::default();
        let fresh_for = Duration::from_secs(2);
        let load = |running, waiting| EngineLoad { running, waiting };
        queue.set_engine_load(load(1, 2), now, fresh_for);
        // One slot held by another client's request (half of 400 left),
        // two more of theirs waiting.
        assert!((queue.wait_ms(1, 400.0, now) - 1000.0).abs() < 1e-6);
        let later = now + fresh_for + Duration::from_secs(1);
        assert_eq!(queue.wait_ms(1, 400.0, later), 0.0);
        // Requests of ours the engine counts are not waited for twice: two
        // running here, the engine running one of them and holding the
        // other back, leaves nobody else's.
        let mut ours = Queue::default();
        for _ in 0..2 {
            let id = ours.add(1000.0);
            ours.running(id, now);
        }
        ours.set_engine_load(load(1, 1), now, fresh_for);
        assert_eq!(ours.engine_extra(2, now), (0, 0));
    }
}
