//! Canonical request and response types, shaped like OpenAI's wire format.
//!
//! Every type keeps the fields it does not model in `extra` (written with
//! `#[serde(flatten)]`; read by `with_extra!` on the hot chat types), so
//! vendor extensions (`cache_prompt`, `id_slot`, `prompt_cache_key`,
//! ...) pass through the gateway untouched.

mod canonical;
mod chat;
mod completion;
mod embedding;
mod extra;
mod spec_fields;
mod texts;
mod timings;
mod usage;
pub(crate) mod with_extra;

pub use canonical::{CanonicalChunk, CanonicalRequest, CanonicalResponse};
pub use chat::{
    ANSWER_OBJECT, CHUNK_OBJECT, ChatChunk, ChatRequest, ChatResponse, Choice, ChunkChoice,
    Content, ContentPart, Delta, FunctionCall, FunctionCallDelta, FunctionDef, Message, Role,
    StreamOptions, Tool, ToolCall, ToolCallDelta,
};
pub use completion::{CompletionChoice, CompletionRequest, CompletionResponse};
pub use embedding::{Embedding, EmbeddingRequest, EmbeddingResponse, EmbeddingUsage};
pub use spec_fields::fill_chat_answer;
pub use texts::{ChunkTexts, OutputTexts, PromptTexts, slot, slot_choice};
pub use timings::Timings;
pub use usage::{Usage, UsageDetails};

pub use extra::Extra;

/// A JSON object's fields, edited in place (an `Extra` derefs to one).
pub type Fields = serde_json::Map<String, serde_json::Value>;

/// Seconds since the Unix epoch, for `created` fields.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
