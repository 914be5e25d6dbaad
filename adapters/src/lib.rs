//! Switchyard's adapters: the canonical request and response types, the wire
//! formats, the upstream clients, and the model-server simulator.

pub mod anthropic;
pub mod azure;
pub mod bedrock;
pub mod body;
pub mod boxed;
pub mod credentials;
pub mod decimal;
pub mod engine_metrics;
pub mod error;
pub mod gemini;
pub mod json;
pub mod media;
pub mod openai;
pub mod percent;
pub mod provider;
pub mod responses;
pub mod sim;
pub mod sse;
pub mod timer;
pub mod tokens;
pub mod translate;
pub mod types;
pub mod upstream;
pub mod vertex;

pub use error::{AdapterError, Fault, TimeoutPhase};
pub use provider::{ChatStream, CompletionStream, EventStream, Provider};
