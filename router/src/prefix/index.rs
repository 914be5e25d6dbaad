//! Which prefix chains each replica has recently served, as a bounded,
//! aging set of block hashes per replica: sized from the replica's KV
//! capacity and expired after the time its cache (or a provider's prompt
//! cache) keeps an idle prefix, so it approximates what the replica still
//! holds. Behind a trait so replicas of the gateway can share one (Redis).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moka::notification::RemovalCause;
use moka::sync::Cache;

use super::chain::{BLOCK_BYTES, PrefixChain};

/// One replica's cache, as configured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicaCache {
    /// Tokens of KV cache the replica has.
    pub kv_tokens: u64,
    /// How long an unused prefix stays.
    pub ttl: Duration,
}

pub trait PrefixIndex: Send + Sync {
    /// Leading blocks of `chain` that `replica` is thought to hold.
    fn cached_blocks(&self, replica: usize, chain: &PrefixChain) -> usize;
    /// `replica` has just processed `chain`: it holds all of it now.
    fn served(&self, replica: usize, chain: &PrefixChain);
    /// Blocks `replica` is thought to hold in all: how full its cache is.
    fn held_blocks(&self, replica: usize) -> u64;
}

/// The index in this process.
pub struct LocalPrefixIndex {
    replicas: Vec<ReplicaBlocks>,
}

/// Cloning shares the cache (moka's handles are shared), which is how a
/// replica's entries outlive a config reload.
#[derive(Clone)]
struct ReplicaBlocks {
    settings: ReplicaCache,
    /// Hashed by foldhash (seeded per cache) rather than moka's default
    /// SipHash: a key is a chain hash already, and SipHash cost about 150
    /// instructions a lookup, three lookups a request.
    blocks: Cache<u64, (), foldhash::quality::RandomState>,
    /// Blocks inserted and not yet evicted (moka's own count lags).
    held: Arc<AtomicU64>,
}

/// Tokens per block, for sizing: about four bytes per token.
const BLOCK_TOKENS: u64 = (BLOCK_BYTES / 4) as u64;

impl LocalPrefixIndex {
    /// One cache per replica, numbered as given.
    pub fn new(replicas: impl IntoIterator<Item = ReplicaCache>) -> Self {
        LocalPrefixIndex {
            replicas: replicas
                .into_iter()
                .map(|r| {
                    let held = Arc::new(AtomicU64::new(0));
                    let evicted = held.clone();
                    let blocks = Cache::builder()
                        .max_capacity((r.kv_tokens / BLOCK_TOKENS).max(1))
                        .time_to_idle(r.ttl)
                        .eviction_listener(move |_, _, cause| {
                            if cause != RemovalCause::Replaced {
                                evicted.fetch_sub(1, Ordering::Relaxed);
                            }
                        })
                        .build_with_hasher(foldhash::quality::RandomState::default());
                    ReplicaBlocks {
                        settings: r,
                        blocks,
                        held,
                    }
                })
                .collect(),
        }
    }
}

impl LocalPrefixIndex {
    /// Replica `replica` keeps what `from` knew of `theirs` (the same
    /// server under a previous config), unless its cache was resized or its
    /// TTL changed, when it starts empty.
    pub fn adopt(&mut self, replica: usize, from: &LocalPrefixIndex, theirs: usize) {
        if let (Some(mine), Some(old)) = (self.replicas.get_mut(replica), from.replicas.get(theirs))
            && mine.settings == old.settings
        {
            mine.clone_from(old);
        }
    }
}

impl PrefixIndex for LocalPrefixIndex {
    fn cached_blocks(&self, replica: usize, chain: &PrefixChain) -> usize {
        let Some(replica) = self.replicas.get(replica) else {
            return 0;
        };
        // A chain hash implies its whole prefix, so the longest present
        // hash counts; blocks evicted from the middle end the run early,
        // which errs towards predicting less cached.
        chain
            .hashes()
            .iter()
            .take_while(|h| replica.blocks.contains_key(*h))
            .count()
    }

    fn served(&self, replica: usize, chain: &PrefixChain) {
        if let Some(replica) = self.replicas.get(replica) {
            for hash in chain.hashes() {
                if replica.blocks.entry(*hash).or_insert(()).is_fresh() {
                    replica.held.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }

    fn held_blocks(&self, replica: usize) -> u64 {
        self.replicas
            .get(replica)
            .map_or(0, |r| r.held.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain::ChainBuilder;
    use super::*;

    fn chain(text: &str) -> PrefixChain {
        let mut b = ChainBuilder::new();
        b.segment(text.as_bytes());
        b.finish()
    }

    #[test]
    fn a_served_prefix_is_found_on_its_replica_only() {
        let cache = ReplicaCache {
            kv_tokens: 65_536,
            ttl: Duration::from_secs(60),
        };
        let index = LocalPrefixIndex::new([cache, cache]);
        let system = "system prompt ".repeat(100);
        let first = chain(&format!("{system} question one"));
        let second = chain(&format!("{system} question two"));
        assert_eq!(index.cached_blocks(0, &second), 0);
        index.served(0, &first);
        let shared = system.len() / BLOCK_BYTES;
        assert_eq!(index.cached_blocks(0, &second), shared);
        assert_eq!(index.cached_blocks(1, &second), 0);
        assert_eq!(index.cached_blocks(0, &first), first.len());
        assert_eq!(index.cached_blocks(9, &first), 0);
        assert_eq!(index.held_blocks(0), second.len() as u64);
        assert_eq!(index.held_blocks(1), 0);
    }

    #[test]
    fn capacity_bounds_what_a_replica_is_thought_to_hold() {
        let index = LocalPrefixIndex::new([ReplicaCache {
            kv_tokens: BLOCK_TOKENS * 8,
            ttl: Duration::from_secs(60),
        }]);
        for i in 0..50 {
            index.served(0, &chain(&format!("{i} {}", "x".repeat(BLOCK_BYTES * 4))));
        }
        index.replicas[0].blocks.run_pending_tasks();
        assert!(index.replicas[0].blocks.entry_count() <= 8);
        assert!(index.held_blocks(0) <= 8, "{}", index.held_blocks(0));
    }
}
