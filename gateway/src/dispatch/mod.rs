//! Dispatch: carrying out a decision. `pipeline` is the one path every model
//! call takes (read, decode, admit, route, dispatch, answer with receipts);
//! `endpoint` says what it needs of a dialect and of a request type;
//! `attempts` tries the decision's backends in the order `plan` keeps
//! (retries, fallbacks, cascade escalation, budget downgrades); `hedge`
//! races a second backend, `stream` relays chunks, `response_cache` and
//! `prompt_cache` answer or shape a call from what was seen before, `engine`
//! sets an engine's own request fields; `shadow` sends a sampled copy of a
//! route's request to its candidate backend and compares the answers.
//! `guardrails` asks a route's hooks before and after the call.
//! `masking` masks a request's sensitive values for a backend that is not
//! local and restores them in its answer.
//! `daily_spend`, `response_store` and `shadow_lanes` are the state the
//! running config holds for them.
//!
//! May import: admit (each call is admitted), route (the decision, the
//! receipts), settle (each call is recorded), state, ledger, telemetry,
//! http, error. Not ingress: dialects implement `endpoint`'s traits.

pub mod attempts;
pub mod daily_spend;
pub mod endpoint;
pub mod engine;
pub mod guardrail_hooks;
pub mod guardrails;
pub mod hedge;
pub mod masking;
pub mod pipeline;
pub mod plan;
pub mod prompt_cache;
pub mod response_cache;
pub mod response_store;
pub mod shadow;
pub mod shadow_lanes;
pub mod stream;
