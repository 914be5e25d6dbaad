//! The shared view of what each backend replica holds in its prefix (KV)
//! cache, and cache-aware choice among replicas.

mod chain;
mod choose;
mod index;
mod tenant;

pub use chain::{BLOCK_BYTES, ChainBuilder, PrefixChain};
pub use choose::{ReplicaLoad, choose_replica};
pub use index::{LocalPrefixIndex, PrefixIndex, ReplicaCache};
pub use tenant::Tenant;
