//! Capacity: a request's slot in the gateway and in its backend (waiting in
//! the backend's bounded queue), and the replica it goes to, chosen by the
//! prompt's prefix chain. The last part of admission, taken per backend
//! call (a fallback or a hedge takes its own).

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use switchyard_adapters::Provider;
use switchyard_policies::Balance;
use switchyard_router::latency::{LatencyStore, LocalLatency, Shape};
use switchyard_router::prefix::{PrefixChain, PrefixIndex, ReplicaLoad, Tenant, choose_replica};
use tokio::sync::OwnedSemaphorePermit;

use crate::admit::priority::{Class, Slot};
use crate::error::GatewayError;
use crate::state::app::App;

/// A request's place in its backend's latency model: work ahead of later
/// requests from when it starts waiting for a slot until it is dropped.
pub(crate) struct WorkTicket {
    pub(crate) latency: Arc<LocalLatency>,
    pub(crate) backend: usize,
    pub(crate) id: u64,
}

impl Drop for WorkTicket {
    fn drop(&mut self) {
        self.latency.finished(self.backend, self.id);
    }
}

/// Slots a request holds while it runs (its whole stream, when streaming).
pub struct Admission {
    pub(crate) _gateway: OwnedSemaphorePermit,
    pub(crate) _backend: Option<Slot>,
    /// `None` once the backend's part is given back
    /// ([`Admission::backend_done`]).
    pub(crate) work: Option<WorkTicket>,
    pub(crate) in_flight: Arc<AtomicU32>,
    pub(crate) replica_in_flight: Arc<AtomicU32>,
    /// Requests the backend was serving when this one started, itself
    /// included: how many share its hourly cost.
    pub sharing: u32,
    /// How long it waited in the gateway for the backend's slot.
    pub waited: Duration,
    /// Requests running on the backend's hardware when it got its slot,
    /// itself included: the load its speeds are measured under.
    pub load: u32,
    /// The replica chosen, and its client.
    pub provider: Arc<dyn Provider>,
    /// The replica's (or its slot's) number in the prefix index.
    pub replica: usize,
    /// The llama.cpp slot to send the request to (`id_slot`), for backends
    /// that declare their slots.
    pub slot: Option<u32>,
    /// Leading blocks of the prompt's prefix chain the replica is thought
    /// to hold.
    pub cached_blocks: usize,
    /// The prompt's prefix chain as this backend's cache keys it for the
    /// caller: salted, or the request's own where the backend shares
    /// prefixes with everyone. The record tells the index what was served
    /// with it, and `prepared` keys a prompt cache with it.
    pub prefix: Option<Arc<PrefixChain>>,
}

impl Admission {
    /// Its id in the backend's latency model, while it is there.
    pub fn work_id(&self) -> Option<u64> {
        self.work.as_ref().map(|w| w.id)
    }

    /// The backend is done with the request (its stream ended): its slot,
    /// its place in the latency model's queue and its count among the
    /// backend's requests in flight go now. The gateway's own permit is
    /// kept until the request is over (its row handed over, its reply
    /// sent).
    pub fn backend_done(&mut self) {
        self._backend = None;
        if self.work.take().is_some() {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            self.replica_in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        self.backend_done();
    }
}

impl App {
    /// Takes a slot in the gateway and in the backend (waiting in the
    /// backend's bounded queue), or says it is full; then picks the
    /// backend's replica, by the prompt's prefix chain when there is one.
    /// `class`: its place in the backend's queue.
    pub async fn admit(
        &self,
        backend_index: usize,
        (shape, class): (&Shape, Class),
        prefix: Option<&Arc<PrefixChain>>,
        tenant: Tenant,
    ) -> Result<Admission, GatewayError> {
        // The chain as this backend's cache keys it for this caller: the
        // request's own when unsalted.
        let salted =
            prefix.map(
                |chain| match self.router.chain_for(backend_index, chain, tenant) {
                    Cow::Borrowed(_) => chain.clone(),
                    Cow::Owned(salted) => Arc::new(salted),
                },
            );
        let prefix = salted.as_deref();
        let gateway =
            self.in_flight
                .clone()
                .try_acquire_owned()
                .map_err(|_| GatewayError::Overloaded {
                    what: "the gateway is at its concurrent request limit".into(),
                })?;
        let backend = &self.backends[backend_index];
        // The latency model counts it as work ahead of later requests from
        // now: while it waits for a slot, the wait it causes is as real.
        let latency = self.router.latency();
        let work = WorkTicket {
            latency: latency.clone(),
            backend: backend_index,
            id: latency.started(backend_index, shape),
        };
        // Without a limit there is no slot to wait for, nor a clock to read.
        let (backend_permit, waited) = match &backend.limit {
            None => (None, Duration::ZERO),
            Some(limit) => {
                let arrived = Instant::now();
                let permit = backend.wait_for_slot(limit, class).await?;
                (Some(permit), arrived.elapsed())
            }
        };
        let load = latency.running(backend_index, work.id);
        let sharing = backend.in_flight.fetch_add(1, Ordering::AcqRel) + 1;
        let (replica, slot, cached_blocks) = self.choose_replica(backend_index, prefix);
        let chosen = &backend.replicas[replica];
        chosen.in_flight.fetch_add(1, Ordering::AcqRel);
        let per = self.router.slots_per_replica(backend_index);
        Ok(Admission {
            _gateway: gateway,
            _backend: backend_permit,
            work: Some(work),
            in_flight: backend.in_flight.clone(),
            replica_in_flight: chosen.in_flight.clone(),
            sharing,
            waited,
            load,
            provider: chosen.provider.clone(),
            replica: self.router.replicas(backend_index).start + replica * per + slot,
            slot: backend.slots.map(|_| slot as u32),
            cached_blocks,
            prefix: salted,
        })
    }

    /// The replica (and, for llama.cpp backends with slots, the slot) for
    /// a prompt: by the backend's balance over what each is thought to
    /// hold. Returns the replica, the slot and the blocks cached there.
    fn choose_replica(
        &self,
        backend_index: usize,
        prefix: Option<&PrefixChain>,
    ) -> (usize, usize, usize) {
        let backend = &self.backends[backend_index];
        let index = self.router.prefix_index();
        let per = self.router.slots_per_replica(backend_index);
        // One replica with one slot (no slots declared, or one), most
        // backends: nothing to choose between, so no list of loads to make.
        if backend.replicas.len() == 1 && per == 1 {
            let id = self.router.replicas(backend_index).start;
            return (
                0,
                0,
                prefix.map_or(0, |chain| index.cached_blocks(id, chain)),
            );
        }
        // Per slot (or per replica when it has no slots): cached and held blocks.
        let slots: Vec<ReplicaLoad> = self
            .router
            .replicas(backend_index)
            .map(|id| ReplicaLoad {
                cached_blocks: prefix.map_or(0, |chain| index.cached_blocks(id, chain)),
                in_flight: 0,
                held_blocks: index.held_blocks(id),
            })
            .collect();
        // Spread by the prompt's first block: a new prompt lands where
        // others that start like it went.
        let spread = prefix.and_then(|c| c.hash_at(1)).unwrap_or(0);
        let replica = if backend.replicas.len() == 1 {
            0
        } else {
            let loads: Vec<ReplicaLoad> = backend
                .replicas
                .iter()
                .zip(slots.chunks(per))
                .map(|(replica, slots)| ReplicaLoad {
                    cached_blocks: slots.iter().map(|s| s.cached_blocks).max().unwrap_or(0),
                    in_flight: replica.in_flight.load(Ordering::Acquire),
                    held_blocks: slots.iter().map(|s| s.held_blocks).sum(),
                })
                .collect();
            choose_replica(
                &loads,
                backend.balance,
                backend.max_imbalance,
                spread,
                &backend.turn,
            )
        };
        let own = &slots[replica * per..(replica + 1) * per];
        let slot = if per == 1 {
            0
        } else {
            choose_replica(own, Balance::CacheAffinity, 0, spread, &backend.turn)
        };
        (replica, slot, own[slot].cached_blocks)
    }
}
