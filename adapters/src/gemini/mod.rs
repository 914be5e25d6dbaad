//! The Gemini API dialect (`generateContent`), spoken natively: requests
//! translated from the canonical (OpenAI-shaped) chat types, answers and
//! SSE streams translated back, `usageMetadata` mapped into the ledger's
//! usage kinds.

mod client;
mod from_gemini;
mod to_gemini;

#[cfg(test)]
mod tests;

pub use client::{API_VERSION, GeminiClient};
pub use from_gemini::{EventsToChunks, chat_from_generate, finish_reason, usage_to_chat};
pub use to_gemini::generate_request;
