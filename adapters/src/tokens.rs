//! Token counting with tiktoken's `cl100k_base`, the encoding most
//! OpenAI-compatible tooling assumes when a backend reports nothing.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::types::ChatRequest;

/// Tokens the chat template adds per message, as OpenAI documents for its
/// chat models.
const TOKENS_PER_MESSAGE: usize = 3;
/// Tokens that prime the assistant's reply.
const REPLY_PRIMER_TOKENS: usize = 3;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    // The encoding ships inside tiktoken-rs; loading can only fail if the
    // crate's embedded data is corrupt, in which case we count by bytes.
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

/// Loads the encoding now rather than on the first request.
pub fn warm_up() {
    let _ = bpe();
}

/// Token ids of a text.
pub fn encode(text: &str) -> Vec<u32> {
    match bpe() {
        Some(bpe) => bpe.encode_ordinary(text),
        None => text.bytes().map(u32::from).collect(),
    }
}

/// Tokens in a text.
pub fn count(text: &str) -> usize {
    match bpe() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

/// Prompt tokens of a chat request: message texts, tool-call arguments and
/// tool definitions, plus the template's per-message overhead.
pub fn count_chat_prompt(req: &ChatRequest) -> usize {
    let (text, overhead) = prompt_text_and_overhead(req);
    count(&text) + overhead
}

/// The text a chat request's prompt is made of, in order, and the tokens
/// the chat template adds around it. Used for counting and prefix hashing.
pub fn prompt_text_and_overhead(req: &ChatRequest) -> (String, usize) {
    let mut text = String::new();
    if let Some(tools) = &req.tools {
        for tool in tools {
            text.push_str(&serde_json::to_string(&tool.function).unwrap_or_default());
        }
    }
    for message in &req.messages {
        text.push_str(&message.text());
        for call in message.tool_calls.iter().flatten() {
            text.push_str(&call.function.name);
            text.push_str(&call.function.arguments);
        }
    }
    let overhead = req.messages.len() * TOKENS_PER_MESSAGE + REPLY_PRIMER_TOKENS;
    (text, overhead)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_like_cl100k() {
        assert_eq!(count("hello world"), 2);
        assert_eq!(encode("hello world").len(), 2);
    }
}
