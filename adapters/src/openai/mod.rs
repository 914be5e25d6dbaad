//! Egress to any OpenAI-compatible server: vLLM, llama.cpp's llama-server,
//! Ollama, SGLang, TGI, LM Studio, OpenAI itself.
//!
//! Requests are the canonical types serialized as they are (they are the
//! OpenAI shape, unknown fields included); responses are parsed back into
//! them, so vendor fields such as llama.cpp's `timings` survive.

mod client;
mod convert;
mod reader;

pub use client::OpenAiClient;
pub(crate) use convert::parse_json;
pub(crate) use reader::read_chat_request;
