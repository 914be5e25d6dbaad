//! Who is calling and what they may spend: virtual keys (stored as hashes,
//! compared in constant time), per-key rate limits, and spend budgets with
//! reservations so concurrent requests cannot overshoot.

mod assemble;
mod budget;
mod keys;
mod layer;
mod rate;
mod shared;

pub use assemble::{Previous, assemble};
pub use budget::{Budgets, Exhausted, Refused, Reservation, civil_from_days, period_starts};
pub use keys::{Caller, KeyStore, X_API_KEY, hash_key};
pub use layer::AuthLayer;
pub use rate::RateLimits;
pub use shared::RedisStore;
