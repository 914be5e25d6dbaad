//! Keys already found by their SHA-256, remembered by a tag, so that a
//! caller's every request does not hash its key again: SHA-256 of the key
//! and its comparison with every stored hash took about 3,600 of a
//! request's instructions under callgrind (which runs SHA-256 without the
//! CPU's SHA extensions).
//!
//! The tag is the 128-bit SipHash-2-4 of the presented key under a random
//! 128-bit key drawn for each key store: a keyed pseudorandom function, so
//! no caller can compute a tag, and none is ever shown. A string that is
//! not a key meets one of the N remembered tags with a chance of N in
//! 2^128 a try. Only strings that matched a stored hash are remembered, by
//! tag and position, never as text; as SHA-256 has no known collisions,
//! that is one string per configured key, and the table never holds more
//! tags than the store has keys. A new key store (a reload, a key made,
//! changed or revoked) starts with none.

use std::sync::Arc;

use arc_swap::ArcSwap;
use siphasher::sip128::SipHasher24;

pub struct Verified {
    hasher: SipHasher24,
    /// (tag, position in the store's keys), sorted by tag. Read by every
    /// request, written about once per key (two first requests at once may
    /// both write the same entry): each write copies the list, so a read
    /// takes no lock that the workers would pass between them.
    tags: ArcSwap<Vec<(u128, usize)>>,
    /// The store's number of keys: no more tags than that are kept.
    most: usize,
}

impl Verified {
    pub fn new(keys: usize) -> Verified {
        Verified {
            hasher: SipHasher24::new_with_key(&rand::random()),
            tags: ArcSwap::from_pointee(Vec::new()),
            most: keys,
        }
    }

    /// The presented key's tag.
    pub fn tag(&self, presented: &str) -> u128 {
        self.hasher.hash(presented.as_bytes()).as_u128()
    }

    /// The position of the key that a string with this tag matched before.
    pub fn find(&self, tag: u128) -> Option<usize> {
        let tags = self.tags.load();
        tags.binary_search_by_key(&tag, |&(t, _)| t)
            .ok()
            .map(|i| tags[i].1)
    }

    /// Remembers that a string with this tag matched the key at `position`.
    pub fn remember(&self, tag: u128, position: usize) {
        self.tags.rcu(|tags| {
            let mut tags = Vec::clone(tags);
            if tags.len() < self.most
                && let Err(at) = tags.binary_search_by_key(&tag, |&(t, _)| t)
            {
                tags.insert(at, (tag, position));
            }
            Arc::new(tags)
        });
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tags.load().len()
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
    }

    #[test]
    fn remembers_no_more_tags_than_keys() {
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
