//! Who is calling and what they may spend: virtual keys (stored as hashes,
//! compared in constant time), per-key rate limits, and spend budgets with
//! reservations so concurrent requests cannot overshoot.

mod assemble;
mod budget;
mod holders;
mod keys;
mod layer;
mod rate;
mod shared;
mod verified;

pub use crate::admit::access::assemble::{Previous, assemble};
pub use crate::admit::access::budget::{Budgets, Refused, Reservation};
pub use crate::admit::access::keys::{
    Caller, KeyStore, X_API_KEY, X_GOOG_API_KEY, hash_key, hash_text,
};
pub use crate::admit::access::layer::AuthLayer;
pub use crate::admit::access::rate::RateLimits;
pub use crate::admit::access::shared::RedisStore;
pub use crate::error::Exhausted;
