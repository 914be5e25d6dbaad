//! The model-server simulator: an OpenAI-compatible backend inside the
//! binary, with realistic timing (prefill, context-dependent decode,
//! speculation, queueing), a prefix cache and injectable faults. It backs
//! the embedded default config and `switchyard sim`.

mod chat;
mod completion;
mod embed;
mod embeddings;
mod engine;
mod prefix;
mod script;
mod text;
mod timing;
mod tool_choice;

pub use engine::SimBackend;
