//! Egress to any OpenAI-compatible server: vLLM, llama.cpp's llama-server,
//! Ollama, SGLang, TGI, LM Studio, OpenAI itself.
//!
//! Requests are the canonical types serialized as they are (they are the
//! OpenAI shape, unknown fields included; chat requests by `writer`, byte
//! for byte as serde_json writes them); responses are parsed back into
//! them, so vendor fields such as llama.cpp's `timings` survive.

mod client;
mod convert;
mod reader;
mod writer;

pub use client::OpenAiClient;
pub(crate) use convert::parse_json;
pub(crate) use reader::read_chat_request;
