//! Vertex AI: Gemini models through `generateContent` and
//! `streamGenerateContent`, and Anthropic's Claude models through
//! `rawPredict` and `streamRawPredict`, at a project's location, with
//! OAuth2 access tokens from a service account or the metadata server.

mod client;
mod oauth;

pub use client::{DEFAULT_ANTHROPIC_VERSION, VertexClient, host_for};
pub use oauth::{Google, Tokens};
