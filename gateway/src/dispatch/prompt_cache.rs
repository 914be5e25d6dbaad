//! Provider prompt caching, from the prefix index: `prompt_cache_key` for
//! OpenAI backends, and `cache_control` breakpoints for Anthropic backends
//! on a long stable prefix (tools and system) that this backend was sent
//! within the provider's cache lifetime. Markers or keys the client set are
//! never touched.

use std::any::Any;
use std::sync::Arc;

use serde_json::json;
use switchyard_adapters::types::{ChatRequest, Content, ContentPart, Extra, Fields};
use switchyard_router::prefix::PrefixChain;

use crate::route::prefix::stable_messages;

/// Anthropic caches prompts of at least this many tokens (Sonnet and Opus;
/// Haiku needs more, and simply does not cache shorter ones).
const MIN_CACHEABLE_TOKENS: u32 = 1024;

/// What a backend does with a prompt's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptCache {
    None,
    /// OpenAI: `prompt_cache_key` routes requests with one prefix together.
    OpenAiKey,
    /// Anthropic: `cache_control` breakpoints.
    AnthropicMarkers,
}

/// Adds the key to a request's extra fields, unless the client set one.
pub fn openai_key(extra: &mut Fields, chain: &PrefixChain) {
    let blocks = chain.stable_blocks().max(1);
    if let Some(hash) = chain.hash_at(blocks.min(chain.len())) {
        extra
            .entry("prompt_cache_key")
            .or_insert_with(|| json!(format!("sy-{hash:016x}")));
    }
}

/// Marks the end of the stable prefix with an ephemeral breakpoint when
/// the request has no markers, the stable part is long enough to cache, and
/// the backend was sent it recently (`cached_blocks` covers it), so the
/// cache write is followed by reads.
pub fn anthropic_markers(
    req: &mut dyn Any,
    chain: &PrefixChain,
    prompt_tokens: u32,
    cached_blocks: usize,
) -> bool {
    let Some(req) = req.downcast_mut::<ChatRequest>() else {
        return false;
    };
    let stable = chain.stable_blocks();
    if stable == 0
        || cached_blocks < stable
        || chain.tokens_in(stable, prompt_tokens) < MIN_CACHEABLE_TOKENS
        || has_markers(req)
    {
        return false;
    }
    let marker = json!({"type": "ephemeral"});
    let stable_messages = stable_messages(req);
    match req.messages[..stable_messages].last_mut() {
        Some(message) => {
            let mut parts = match message.content.take() {
                Some(Content::Text(text)) => vec![ContentPart {
                    kind: "text".into(),
                    text: Some(text),
                    extra: Extra::new(),
                }],
                Some(Content::Parts(parts)) => parts,
                None => Vec::new(),
            };
            if let Some(last) = parts.last_mut() {
                last.extra.insert("cache_control".into(), marker);
            }
            message.content = Some(Content::Parts(parts));
            true
        }
        // Tools alone are the stable part: mark the last tool.
        // The request's own copy of the tools, made here: the original's
        // are shared with every other try's copy.
        None => match req.tools.as_mut().and_then(|t| Arc::make_mut(t).last_mut()) {
            Some(tool) => {
                tool.extra.insert("cache_control".into(), marker);
                true
            }
            None => false,
        },
    }
}

fn has_markers(req: &ChatRequest) -> bool {
    let marked = |extra: &Extra| extra.contains_key("cache_control");
    req.tool_defs().iter().any(|t| marked(&t.extra))
        || req.messages.iter().any(|m| {
            marked(&m.extra)
                || matches!(&m.content, Some(Content::Parts(parts)) if parts.iter().any(|p| marked(&p.extra)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::prefix::chat_chain;

    fn request(system: &str, marked: bool) -> ChatRequest {
        let mut system_block = json!({"type": "text", "text": system});
        if marked {
            system_block["cache_control"] = json!({"type": "ephemeral"});
        }
        serde_json::from_value(json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": [system_block]},
                {"role": "user", "content": "hi"}
            ]
        }))
        .unwrap()
    }

    #[test]
    fn a_long_stable_prefix_seen_before_gets_one_breakpoint() {
        let system = "Follow the house rules carefully. ".repeat(200); // ~1.4k tokens
        let mut req = request(&system, false);
        let chain = chat_chain(&req);
        let prompt_tokens = 1500;
        // Not seen on this backend yet: no marker (a write nobody reads).
        assert!(!anthropic_markers(&mut req, &chain, prompt_tokens, 0));
        assert!(!has_markers(&req));
        // Seen: the system block is marked.
        assert!(anthropic_markers(
            &mut req,
            &chain,
            prompt_tokens,
            chain.stable_blocks()
        ));
        let Some(Content::Parts(parts)) = &req.messages[0].content else {
            panic!("parts")
        };
        assert_eq!(
            parts[0].extra["cache_control"],
            json!({"type": "ephemeral"})
        );
    }

    /// A request's copies share its tools; the copy that is marked takes its
    /// own, and the original (which the next try copies) stays unmarked.
    #[test]
    fn marking_a_copys_tools_leaves_the_originals_alone() {
        let description = "Reads a file from the workspace and returns its lines. ".repeat(150);
        let original: ChatRequest = serde_json::from_value(json!({
            "model": "m",
            "tools": [{"type": "function", "function": {"name": "read", "description": description, "parameters": {"type": "object"}}}],
            "messages": [{"role": "user", "content": "hi"}]
        }))
        .unwrap();
        let chain = chat_chain(&original);
        let mut copy = original.clone();
        assert!(anthropic_markers(
            &mut copy,
            &chain,
            2000,
            chain.stable_blocks()
        ));
        assert!(has_markers(&copy));
        assert!(!has_markers(&original));
    }

    #[test]
    fn client_markers_and_short_prefixes_are_left_alone() {
        let system = "Follow the house rules carefully. ".repeat(200);
        let mut marked = request(&system, true);
        let chain = chat_chain(&marked);
        let before = marked.clone();
        assert!(!anthropic_markers(&mut marked, &chain, 1500, 99));
        assert_eq!(marked, before);

        let mut short = request("be brief", false);
        let chain = chat_chain(&short);
        assert!(!anthropic_markers(&mut short, &chain, 20, 99));
    }

    #[test]
    fn the_openai_key_names_the_stable_prefix_and_never_replaces_the_clients() {
        let system = "Follow the house rules carefully. ".repeat(200);
        let chain = chat_chain(&request(&system, false));
        let other_question = {
            let mut r = request(&system, false);
            r.messages[1] = switchyard_adapters::types::Message::new(
                switchyard_adapters::types::Role::User,
                Content::Text("something else".into()),
            );
            chat_chain(&r)
        };
        let (mut a, mut b) = (Extra::new(), Extra::new());
        openai_key(&mut a, &chain);
        openai_key(&mut b, &other_question);
        assert_eq!(a["prompt_cache_key"], b["prompt_cache_key"]);
        let mut mine = Extra::new();
        mine.insert("prompt_cache_key".into(), json!("client"));
        openai_key(&mut mine, &chain);
        assert_eq!(mine["prompt_cache_key"], json!("client"));
    }
}
