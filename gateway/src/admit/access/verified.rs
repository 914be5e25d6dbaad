//! Keys already found by their SHA-256, remembered by a tag, so that a
//! caller's every request does not hash its key again: SHA-256 of the key
//! was about 3,600 of a request's 126,000 instructions, its tag about 300.
//!
//! The tag is two SipHash values of the presented key under this store's
//! random keys (std's `RandomState`, seeded from the operating system):
//! 128 bits no caller can compute or see, so a string that is not a key
//! meets a remembered tag only by a 2^-128 chance. Only keys that matched
//! a stored hash are remembered, by tag and position, never as text, and
//! at most one tag per configured key. A new key store (a reload, a key
//! made or revoked) starts with none.

use std::hash::BuildHasher;
use std::sync::RwLock;

pub struct Verified {
    seeds: std::collections::hash_map::RandomState,
    /// (tag, position in the store's keys), sorted by tag.
    tags: RwLock<Vec<(u128, usize)>>,
    /// The store's number of keys: no more tags than that are kept.
    most: usize,
}

impl Verified {
    pub fn new(keys: usize) -> Verified {
        Verified {
            seeds: std::collections::hash_map::RandomState::new(),
            tags: RwLock::new(Vec::new()),
            most: keys,
        }
    }

    /// The presented key's tag: the same input hashed twice, each time
    /// after a different first byte, gives two independent 64-bit values.
    pub fn tag(&self, presented: &str) -> u128 {
        let high = self.seeds.hash_one((0u8, presented));
        let low = self.seeds.hash_one((1u8, presented));
        (u128::from(high) << 64) | u128::from(low)
    }

    /// The position of the key that a string with this tag matched before.
    pub fn find(&self, tag: u128) -> Option<usize> {
        let tags = self.tags.read().unwrap_or_else(|p| p.into_inner());
        tags.binary_search_by_key(&tag, |&(t, _)| t)
            .ok()
            .map(|i| tags[i].1)
    }

    /// Remembers that a string with this tag matched the key at `position`.
    pub fn remember(&self, tag: u128, position: usize) {
        let mut tags = self.tags.write().unwrap_or_else(|p| p.into_inner());
        if tags.len() >= self.most {
            return;
        }
        if let Err(at) = tags.binary_search_by_key(&tag, |&(t, _)| t) {
            tags.insert(at, (tag, position));
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tags.read().unwrap().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_by_key_and_by_store() {
        let one = Verified::new(4);
        let other = Verified::new(4);
        assert_eq!(one.tag("sk-alice"), one.tag("sk-alice"));
        assert_ne!(one.tag("sk-alice"), one.tag("sk-alicf"));
        assert_ne!(one.tag("sk-alice"), other.tag("sk-alice"));
        let tag = one.tag("sk-alice");
        assert_ne!(tag >> 64, tag & u128::from(u64::MAX), "two halves");
    }

    #[test]
    fn remembers_at_most_one_tag_per_key() {
        let verified = Verified::new(2);
        let (a, b, c) = (verified.tag("a"), verified.tag("b"), verified.tag("c"));
        assert_eq!(verified.find(a), None);
        verified.remember(a, 0);
        verified.remember(a, 0);
        verified.remember(b, 1);
        verified.remember(c, 1);
        assert_eq!(verified.len(), 2);
        assert_eq!(verified.find(a), Some(0));
        assert_eq!(verified.find(b), Some(1));
        assert_eq!(verified.find(c), None);
    }
}
