//! The simulator's prefix cache: like a real engine's KV cache, it holds
//! fixed-size blocks of prompt tokens, each named by a hash chained on the
//! previous block, and evicts least-recently-used blocks past its capacity.

use moka::sync::Cache;
use switchyard_policies::SimParams;

const BLOCK: usize = SimParams::PREFIX_BLOCK_TOKENS;

pub struct PrefixCache {
    blocks: Cache<u64, ()>,
}

impl PrefixCache {
    pub fn new(capacity_blocks: u64) -> Self {
        PrefixCache {
            blocks: Cache::new(capacity_blocks),
        }
    }

    /// Tokens of `prompt` already cached as a prefix; then caches all of
    /// `prompt`'s whole blocks, as serving the request would.
    pub fn lookup_and_insert(&self, prompt: &[u32]) -> usize {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut cached_blocks = 0;
        let mut still_hitting = true;
        for (i, block) in prompt.chunks_exact(BLOCK).enumerate() {
            for token in block {
                for b in token.to_le_bytes() {
                    hash ^= u64::from(b);
                    hash = hash.wrapping_mul(0x0100_0000_01b3);
                }
            }
            if still_hitting && self.blocks.contains_key(&hash) {
                cached_blocks = i + 1;
            } else {
                still_hitting = false;
            }
            self.blocks.insert(hash, ());
        }
        cached_blocks * BLOCK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_prefixes_hit_and_divergent_ones_stop() {
        let cache = PrefixCache::new(1000);
        let prompt: Vec<u32> = (0..100).collect();
        assert_eq!(cache.lookup_and_insert(&prompt), 0);
        assert_eq!(cache.lookup_and_insert(&prompt), 96);
        let mut other = prompt.clone();
        other[40] = 9999; // inside the third block
        assert_eq!(cache.lookup_and_insert(&other), 32);
    }
}
