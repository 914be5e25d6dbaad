//! The Gemini API dialect (`generateContent`), both ways. Egress: a
//! backend spoken to natively, requests translated from the canonical
//! (OpenAI-shaped) chat types and answers and SSE streams back, its
//! `usageMetadata` mapped into the ledger's usage kinds. Ingress: Gemini
//! CLI and the google-genai SDKs served by any backend.

mod client;
mod from_chat;
mod from_gemini;
mod to_chat;
mod to_gemini;

#[cfg(test)]
mod tests;

pub(crate) use client::segment as segment_for_path;
pub use client::{API_VERSION, GeminiClient};
pub use from_chat::{
    GenerateStream, finish_to_gemini, generate_response_from_chat, usage_metadata,
};
pub use from_gemini::{EventsToChunks, chat_from_generate, finish_reason, usage_to_chat};
pub use to_chat::chat_request_from_generate;
pub use to_gemini::generate_request;
