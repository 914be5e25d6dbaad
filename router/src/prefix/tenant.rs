//! Whose cached prefixes a request may count on: on a backend whose
//! prefixes are shared per key or per team, every chain hash is salted
//! with the tenant's secret, so one tenant's prompts never match (and so
//! never show up in the receipts of) another's.

use std::borrow::Cow;

use switchyard_policies::CacheShare;
use xxhash_rust::xxh3::xxh3_64_with_seed;

use super::chain::PrefixChain;

/// A caller's salts. The gateway derives them from secrets tenants do not
/// know (a key's stored hash), so no tenant can compute another's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tenant {
    /// 0 when there is no key (auth off): everyone is one caller.
    pub key: u64,
    /// The team's salt, or the key's when it has no team.
    pub team: u64,
}

impl Tenant {
    /// The salt for a backend that shares prefixes as `share` says; 0
    /// (unsalted) when they are shared with everyone.
    pub fn salt(self, share: CacheShare) -> u64 {
        match share {
            CacheShare::Everyone => 0,
            CacheShare::Team => self.team,
            CacheShare::Key => self.key,
        }
    }
}

impl PrefixChain {
    /// The chain as a tenant with `salt` sees it: itself when unsalted.
    pub fn salted(&self, salt: u64) -> Cow<'_, PrefixChain> {
        if salt == 0 {
            return Cow::Borrowed(self);
        }
        let mut chain = self.clone();
        for hash in chain.hashes_mut() {
            *hash = xxh3_64_with_seed(&hash.to_le_bytes(), salt);
        }
        Cow::Owned(chain)
    }
}

#[cfg(test)]
mod tests {
    use super::super::chain::ChainBuilder;
    use super::*;

    fn chain(text: &str) -> PrefixChain {
        let mut builder = ChainBuilder::new();
        builder.segment(text.as_bytes());
        builder.finish()
    }

    #[test]
    fn tenants_agree_only_where_they_share() {
        let text = "a shared system prompt ".repeat(64);
        let (alice, bob) = (Tenant { key: 1, team: 10 }, Tenant { key: 2, team: 10 });
        let plain = chain(&text);
        let seen = |tenant: Tenant, share| plain.salted(tenant.salt(share)).into_owned();
        assert_eq!(seen(alice, CacheShare::Everyone), plain);
        assert_eq!(seen(alice, CacheShare::Team), seen(bob, CacheShare::Team));
        assert_ne!(seen(alice, CacheShare::Key), seen(bob, CacheShare::Key));
        let salted = seen(alice, CacheShare::Key);
        assert_eq!(salted.len(), plain.len());
        assert!(
            salted
                .hashes()
                .iter()
                .zip(plain.hashes())
                .all(|(a, b)| a != b)
        );
    }
}
