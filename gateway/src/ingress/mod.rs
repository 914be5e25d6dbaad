//! Ingress: a request's first stage. `paths` picks the endpoint by path;
//! each dialect module (chat, completions, embeddings, messages, responses)
//! decodes its wire format into the canonical request and encodes answers
//! back, and does nothing else: admission, routing, dispatch and settlement
//! are the stages below, reached through `dispatch::pipeline`.
//!
//! May import: the stages it runs (admit, route, dispatch, settle), state,
//! http, error, telemetry; `paths` hands admin paths to `admin`. Only the
//! edge (`http::stack`) imports ingress.

pub mod chat;
pub mod completions;
pub mod embeddings;
pub mod gemini;
pub mod gemini_paths;
pub mod messages;
pub mod paths;
pub mod responses;
pub mod responses_native;
