//! Choosing a replica of one backend: by cache affinity (the longest cached
//! prefix, unless that replica is loaded beyond the others by more than a
//! set margin, as cache-aware balancers do), round robin, or least loaded.

use std::sync::atomic::{AtomicUsize, Ordering};

use switchyard_policies::Balance;

/// One replica as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaLoad {
    pub cached_blocks: usize,
    pub in_flight: u32,
    /// How full the replica's cache is thought to be, in blocks.
    pub held_blocks: u64,
}

/// The replica to use (an index into `replicas`, which is not empty).
/// `spread` (a hash of the prompt's start) breaks ties, so prompts no
/// replica holds yet spread over the replicas, each always to the same one.
pub fn choose_replica(
    replicas: &[ReplicaLoad],
    balance: Balance,
    max_imbalance: u32,
    spread: u64,
    turn: &AtomicUsize,
) -> usize {
    let least = replicas.iter().map(|r| r.in_flight).min().unwrap_or(0);
    let best_of = |eligible: &dyn Fn(&ReplicaLoad) -> bool,
                   key: &dyn Fn(&ReplicaLoad) -> (usize, u32, u64)| {
        let best = replicas.iter().filter(|r| eligible(r)).map(key).max()?;
        let tied: Vec<usize> = (0..replicas.len())
            .filter(|&i| eligible(&replicas[i]) && key(&replicas[i]) == best)
            .collect();
        Some(tied[(spread % tied.len() as u64) as usize])
    };
    let least_loaded = || best_of(&|_| true, &|r| (0, u32::MAX - r.in_flight, 0)).unwrap_or(0);
    match balance {
        Balance::RoundRobin => turn.fetch_add(1, Ordering::Relaxed) % replicas.len().max(1),
        Balance::LeastLoaded => least_loaded(),
        // Longest cached prefix among replicas within the load margin; then
        // least loaded; then the emptiest cache, so new prompts spread the
        // way their caches have room.
        Balance::CacheAffinity => best_of(&|r| r.in_flight <= least + max_imbalance, &|r| {
            (
                r.cached_blocks,
                u32::MAX - r.in_flight,
                u64::MAX - r.held_blocks,
            )
        })
        .unwrap_or_else(least_loaded),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(cached_blocks: usize, in_flight: u32) -> ReplicaLoad {
        ReplicaLoad {
            cached_blocks,
            in_flight,
            held_blocks: 0,
        }
    }

    #[test]
    fn affinity_prefers_the_cache_until_the_load_gap_is_too_wide() {
        let turn = AtomicUsize::new(0);
        let pick = |r: &[ReplicaLoad]| choose_replica(r, Balance::CacheAffinity, 2, 0, &turn);
        assert_eq!(pick(&[load(0, 0), load(12, 1)]), 1);
        assert_eq!(pick(&[load(0, 0), load(12, 2)]), 1);
        // Three more in flight than the idle replica: balance instead.
        assert_eq!(pick(&[load(0, 0), load(12, 3)]), 0);
        // Nothing cached anywhere: the least loaded.
        assert_eq!(pick(&[load(0, 2), load(0, 1)]), 1);
        // Ties spread by the prompt's hash, the same way every time.
        let tie = [load(0, 0), load(0, 0), load(0, 0)];
        let spread: Vec<usize> = (0..6)
            .map(|h| choose_replica(&tie, Balance::CacheAffinity, 2, h, &turn))
            .collect();
        assert_eq!(spread, [0, 1, 2, 0, 1, 2]);
        // A new prompt goes where the cache has most room.
        let mut fuller = tie;
        fuller[0].held_blocks = 90;
        fuller[2].held_blocks = 40;
        assert_eq!(
            choose_replica(&fuller, Balance::CacheAffinity, 2, 0, &turn),
            1
        );
    }

    #[test]
    fn round_robin_and_least_loaded() {
        let turn = AtomicUsize::new(0);
        let picks: Vec<usize> = (0..4)
            .map(|_| choose_replica(&[load(9, 0), load(0, 0)], Balance::RoundRobin, 2, 7, &turn))
            .collect();
        assert_eq!(picks, [0, 1, 0, 1]);
        assert_eq!(
            choose_replica(&[load(9, 3), load(0, 1)], Balance::LeastLoaded, 2, 7, &turn),
            1
        );
    }
}
