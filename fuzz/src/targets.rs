//! What each fuzz target does with its input: every parser that reads
//! outside input, and what the gateway does next with what it parsed.
//! None may panic or hang, whatever it is given; an error is a fine answer.
//!
//! Shared by the cargo-fuzz targets (`fuzz/fuzz_targets/`) and by the
//! workspace test that replays the committed corpus on every CI run
//! (`gateway/tests/fuzz_corpus.rs`), so it uses only the workspace's crates.

use serde_json::Value;
use switchyard_adapters::anthropic::{
    EventsToChunks, MessageStream, MessagesRequest, chat_from_messages, messages_from_chat,
};
use switchyard_adapters::json::from_bytes;
use switchyard_adapters::responses::chat_from_responses;
use switchyard_adapters::sse::SseParser;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{
    ChatChunk, ChatRequest, CompletionRequest, EmbeddingRequest, Timings,
};
use switchyard_policies::Config;

/// A target: takes any bytes, and must not panic.
pub type Target = fn(&[u8]);

/// Every target, by the name of its corpus directory.
pub const TARGETS: [(&str, Target); 8] = [
    ("chat_body", chat_body),
    ("completion_body", completion_body),
    ("embedding_body", embedding_body),
    ("anthropic_messages", anthropic_messages),
    ("responses_body", responses_body),
    ("upstream_sse", upstream_sse),
    ("llama_timings", llama_timings),
    ("config_yaml", config_yaml),
];

/// An OpenAI chat body: parsed as the gateway parses it, its prompt sized
/// (estimated and counted) and translated to Anthropic Messages.
pub fn chat_body(data: &[u8]) {
    if let Ok(chat) = from_bytes::<ChatRequest>(data) {
        let _ = tokens::estimate_chat_prompt(&chat);
        let _ = tokens::count_chat_prompt(&chat);
        let _ = messages_from_chat(chat);
    }
}

/// A legacy completions body.
pub fn completion_body(data: &[u8]) {
    let _ = from_bytes::<CompletionRequest>(data);
}

/// An embeddings body and the texts it asks for.
pub fn embedding_body(data: &[u8]) {
    if let Ok(request) = from_bytes::<EmbeddingRequest>(data) {
        let _ = request.texts();
    }
}

/// An Anthropic Messages body: translated to chat, sized, and back.
pub fn anthropic_messages(data: &[u8]) {
    if let Ok(messages) = from_bytes::<MessagesRequest>(data)
        && let Ok(chat) = chat_from_messages(messages)
    {
        let _ = tokens::estimate_chat_prompt(&chat);
        let _ = messages_from_chat(chat);
    }
}

/// A Responses body, translated to chat.
pub fn responses_body(data: &[u8]) {
    if let Ok(value) = from_bytes::<Value>(data)
        && let Ok(chat) = chat_from_responses(&value)
    {
        let _ = tokens::estimate_chat_prompt(&chat);
    }
}

/// An upstream event stream, cut into pieces where the input says (its
/// first byte sets the piece size): the SSE parser, then each event as an
/// Anthropic event turned into chat chunks, and as a chat chunk turned into
/// Anthropic events.
pub fn upstream_sse(data: &[u8]) {
    let Some((&size, stream)) = data.split_first() else {
        return;
    };
    let mut parser = SseParser::new();
    let mut anthropic = EventsToChunks::default();
    let mut messages = MessageStream::new("fuzz", 0);
    for piece in stream.chunks(usize::from(size).max(1)) {
        for event in parser.feed(piece) {
            if let Ok(value) = serde_json::from_str::<Value>(&event.data) {
                let _ = anthropic.on_event(event.event.as_deref(), &value);
            }
            if let Ok(chunk) = serde_json::from_str::<ChatChunk>(&event.data) {
                let _ = messages.on_chunk(&chunk);
            }
        }
    }
    let _ = messages.finish();
}

/// llama.cpp's `timings` object and the rates read from it.
pub fn llama_timings(data: &[u8]) {
    if let Ok(timings) = from_bytes::<Timings>(data) {
        let _ = (
            timings.prompt_rate(),
            timings.predicted_rate(),
            timings.drafts(),
        );
    }
}

/// A config file: parsed and validated whole.
pub fn config_yaml(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_yaml(text, "fuzz");
    }
}
