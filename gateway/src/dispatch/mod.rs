//! Dispatch: carrying out a decision. `pipeline` is the one path every model
//! call takes (read, decode, admit, route, try backends in order with
//! fallbacks and cascade escalation, answer); `hedge` races a second
//! backend, `stream` relays chunks, `response_cache` and `prompt_cache`
//! answer or shape a call from what was seen before, `engine` sets an
//! engine's own request fields.
//!
//! May import: admit, route, settle, state, http, error.

pub mod attempts;
pub mod endpoint;
pub mod engine;
pub mod hedge;
pub mod hedge_spend;
pub mod pipeline;
pub mod prompt_cache;
pub mod request_context;
pub mod response_cache;
pub mod response_store;
pub mod stream;
