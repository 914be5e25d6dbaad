//! A prompt's prefix chain: the canonical prompt (tools, system, messages in
//! order, each as the gateway feeds it in) cut into fixed-size blocks, each
//! block's hash seeded with the hash before it, so one hash names the whole
//! prefix up to the end of its block. Two prompts share a cached prefix
//! exactly as far as their chains agree.

use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Bytes per block: about 64 tokens of English or code.
pub const BLOCK_BYTES: usize = 256;
/// Between segments, so `["ab", "c"]` and `["a", "bc"]` differ.
const SEPARATOR: u8 = 0x1e;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefixChain {
    hashes: Vec<u64>,
    bytes: usize,
    /// Blocks covering the stable part: tools and system (see
    /// [`ChainBuilder::mark_stable`]).
    stable_blocks: usize,
}

impl PrefixChain {
    pub fn hashes(&self) -> &[u64] {
        &self.hashes
    }

    pub(super) fn hashes_mut(&mut self) -> &mut [u64] {
        &mut self.hashes
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// Full blocks up to the end of the stable part (tools and system).
    pub fn stable_blocks(&self) -> usize {
        self.stable_blocks
    }

    /// The hash naming the first `blocks` blocks.
    pub fn hash_at(&self, blocks: usize) -> Option<u64> {
        blocks
            .checked_sub(1)
            .and_then(|i| self.hashes.get(i).copied())
    }

    /// The share of `prompt_tokens` that `blocks` blocks cover.
    pub fn tokens_in(&self, blocks: usize, prompt_tokens: u32) -> u32 {
        if self.bytes == 0 {
            return 0;
        }
        let covered = (blocks * BLOCK_BYTES).min(self.bytes) as f64 / self.bytes as f64;
        (covered * f64::from(prompt_tokens)) as u32
    }
}

/// Feeds segments of the canonical prompt into blocks.
#[derive(Debug, Default)]
pub struct ChainBuilder {
    block: Vec<u8>,
    chain: PrefixChain,
}

impl ChainBuilder {
    pub fn new() -> Self {
        ChainBuilder {
            block: Vec::with_capacity(BLOCK_BYTES),
            chain: PrefixChain::default(),
        }
    }

    pub fn segment(&mut self, bytes: &[u8]) -> &mut Self {
        self.push(bytes);
        self.end_segment()
    }

    /// Feeds one field of a segment, made of `parts` one after the other:
    /// a segment of several fields is fed field by field, then closed by
    /// [`Self::end_segment`], with no copy of it made first. Each field goes
    /// in after its length, so no field's bytes (text may hold any byte) can
    /// pass for the end of a field or of a segment, as long as the caller
    /// feeds each kind of segment a fixed number of fields.
    pub fn field(&mut self, parts: &[&[u8]]) -> &mut Self {
        let len = parts.iter().map(|p| p.len()).sum::<usize>();
        self.push(&u64::try_from(len).unwrap_or(u64::MAX).to_le_bytes());
        for part in parts {
            self.push(part);
        }
        self
    }

    /// Closes the segment its fields were fed into.
    pub fn end_segment(&mut self) -> &mut Self {
        self.push(&[SEPARATOR]);
        self
    }

    /// Marks everything fed so far as the stable part of the prompt.
    pub fn mark_stable(&mut self) -> &mut Self {
        self.chain.stable_blocks = self.chain.hashes.len();
        self
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.chain.bytes += bytes.len();
        while !bytes.is_empty() {
            let room = BLOCK_BYTES - self.block.len();
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            self.block.extend_from_slice(now);
            bytes = rest;
            if self.block.len() == BLOCK_BYTES {
                self.seal();
            }
        }
    }

    fn seal(&mut self) {
        let previous = self.chain.hashes.last().copied().unwrap_or(0);
        self.chain
            .hashes
            .push(xxh3_64_with_seed(&self.block, previous));
        self.block.clear();
    }

    /// The chain; a last partial block counts too, so identical prompts
    /// match to the end.
    pub fn finish(mut self) -> PrefixChain {
        if !self.block.is_empty() {
            self.seal();
        }
        self.chain
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(segments: &[&str]) -> PrefixChain {
        let mut b = ChainBuilder::new();
        for s in segments {
            b.segment(s.as_bytes());
        }
        b.finish()
    }

    #[test]
    fn fields_cannot_pass_for_their_own_boundaries() {
        let fields = |fields: &[&[&[u8]]]| {
            let mut b = ChainBuilder::new();
            for field in fields {
                b.field(field);
            }
            b.end_segment();
            b.finish()
        };
        // The same bytes split into fields differently, or into parts.
        assert_ne!(fields(&[&[b"ab"], &[b"c"]]), fields(&[&[b"a"], &[b"bc"]]));
        assert_eq!(fields(&[&[b"a", b"bc"]]), fields(&[&[b"abc"]]));
        // A field holding what a boundary would look like is still one field.
        let mut fake = 1u64.to_le_bytes().to_vec();
        fake.push(b'x');
        assert_ne!(fields(&[&[b""], &[b"x"]]), fields(&[&[&fake]]));
    }

    #[test]
    fn shared_prefixes_share_hashes_as_far_as_they_agree() {
        let system = "You are a careful agent. ".repeat(40); // ~1 KB: 3+ blocks
        let a = chain(&[&system, "first question"]);
        let b = chain(&[&system, "a different question"]);
        let shared = a
            .hashes()
            .iter()
            .zip(b.hashes())
            .take_while(|(x, y)| x == y)
            .count();
        assert_eq!(shared, system.len() / BLOCK_BYTES);
        assert_ne!(a.hashes().last(), b.hashes().last());
        // Same text, same chain.
        assert_eq!(a, chain(&[&system, "first question"]));
        // A different start changes every hash after it.
        let c = chain(&["other tools", &system, "first question"]);
        assert!(a.hashes().iter().zip(c.hashes()).all(|(x, y)| x != y));
    }

    #[test]
    fn segment_boundaries_matter() {
        assert_ne!(chain(&["ab", "c"]), chain(&["a", "bc"]));
    }

    #[test]
    fn tokens_scale_with_the_blocks_covered() {
        let c = chain(&[&"x".repeat(BLOCK_BYTES * 4)]);
        assert_eq!(c.tokens_in(2, 1000), 499);
        assert_eq!(c.tokens_in(9, 1000), 1000);
        assert_eq!(c.tokens_in(0, 1000), 0);
    }
}
