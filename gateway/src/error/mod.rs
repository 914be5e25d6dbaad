//! The one edge where every failure becomes an HTTP answer: status, an
//! OpenAI-shaped body `{"error":{"message","type","param","code"}}` (or
//! Anthropic's on its endpoint), and a low-cardinality kind for logs and
//! metrics. `kinds` says what failed, `shape` how it is shown, `upstream`
//! how a backend's failure is shown without repeating what it said.

mod dialect;
mod exhausted;
mod kinds;
mod shape;
mod upstream;

#[cfg(test)]
mod tests;

pub use crate::error::dialect::{Dialect, gemini_method};
pub use crate::error::exhausted::Exhausted;
pub use crate::error::kinds::{ErrorNote, GatewayError};
pub use crate::error::upstream::credentials_refused;
