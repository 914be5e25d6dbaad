//! Switchyard's router: request features, classification and target
//! selection. Pure logic, apart from any I/O so it can be tested and
//! benchmarked alone; live state (target-share windows) sits behind small
//! traits. The gateway turns a request into the `RequestView` used here.

mod budgeted;
mod cascade;
mod conditions;
mod decision;
mod embed;
mod explain;
mod features;
mod interleave;
pub mod latency;
pub mod learned;
mod output_length;
pub mod prefix;
mod router;
pub mod sensitive;
mod signals;
pub mod speculation;
mod split;
mod sticky_share;
mod target_share;

pub use budgeted::budget_for;
pub use cascade::{AnswerSummary, failed_check};
pub use decision::{Decision, Learning, Reason};
pub use explain::{Explanation, RuleTrace};
pub use features::{Features, RequestView};
pub use output_length::OutputLengths;
pub use router::{RouteError, Router, Target};
pub use signals::Signals;
pub use split::{SplitPolicy, unit_from_key};
pub use target_share::{ShareTracker, WindowTracker};

/// A map keyed by names from the config (models, routes, key holders) and
/// read several times on every request. Hashed by foldhash rather than
/// std's SipHash: about 630 fewer instructions a request (callgrind,
/// 152,448 to 151,814). SipHash resists keys chosen to collide; nothing a
/// caller sends is inserted here, so that buys nothing.
pub type NameMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

#[cfg(test)]
mod tests;
