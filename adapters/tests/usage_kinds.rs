//! Usage as providers report it, whole and streamed, split into the kinds
//! tokens are billed as: every reported token lands in exactly one kind,
//! and the cost is the price table applied to those kinds by hand.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use proptest::prelude::*;
use serde_json::json;
use switchyard_adapters::anthropic::{
    EventsToChunks, MessagesUsage, usage_from_chat, usage_to_chat,
};
use switchyard_adapters::types::{Usage, UsageDetails};
use switchyard_policies::{TokenCounts, TokenPrice};

const PRICE: TokenPrice = TokenPrice {
    input: 3.0,
    cached_input: 0.3,
    cache_write: 3.75,
    output: 15.0,
    reasoning: 20.0,
};

/// The price of each kind, written out rather than through `TokenPrice::cost`.
fn by_hand(input: u64, cached: u64, write: u64, output: u64, reasoning: u64) -> f64 {
    (input as f64 * 3.0
        + cached as f64 * 0.3
        + write as f64 * 3.75
        + (output - reasoning) as f64 * 15.0
        + reasoning as f64 * 20.0)
        / 1e6
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

/// The usage chunk an Anthropic event stream ends with, as the gateway's
/// ledger sees it: `message_start` carries the prompt side (and a first
/// output count), `message_delta` the final output count.
fn streamed(anthropic: &MessagesUsage) -> Usage {
    let mut events = EventsToChunks::default();
    let start = json!({"type": "message_start", "message": {
        "id": "msg_1", "model": "claude", "usage": {
            "input_tokens": anthropic.input_tokens,
            "cache_read_input_tokens": anthropic.cache_read_input_tokens,
            "cache_creation_input_tokens": anthropic.cache_creation_input_tokens,
            "output_tokens": 1}}});
    events.on_event(Some("message_start"), &start).unwrap();
    let delta = json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": anthropic.output_tokens}});
    let chunks = events.on_event(Some("message_delta"), &delta).unwrap();
    chunks
        .into_iter()
        .find_map(|c| c.usage.map(|usage| *usage))
        .expect("message_delta ends with a usage chunk")
}

/// OpenAI's shape: `prompt_tokens` is every prompt token, cached ones
/// among them; `completion_tokens` includes reasoning.
fn openai(prompt: u64, cached: u64, completion: u64, reasoning: u64) -> Usage {
    Usage {
        prompt_tokens_details: Some(UsageDetails {
            cached_tokens: Some(cached),
            ..UsageDetails::default()
        }),
        completion_tokens_details: Some(UsageDetails {
            reasoning_tokens: Some(reasoning),
            ..UsageDetails::default()
        }),
        ..Usage::new(prompt, completion)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn anthropic_usage_bills_each_token_once(
        input in 0u64..200_000,
        read in 0u64..200_000,
        write in 0u64..200_000,
        output in 0u64..64_000,
    ) {
        let anthropic = MessagesUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
        };
        let want = TokenCounts {
            input,
            cached_input: read,
            cache_write: write,
            output,
            reasoning: 0,
        };
        for usage in [usage_to_chat(&anthropic), streamed(&anthropic)] {
            let counts = usage.token_counts();
            prop_assert_eq!(counts, want);
            prop_assert_eq!(counts.prompt(), input + read + write);
            prop_assert_eq!(counts.prompt() + counts.output, usage.prompt_tokens + usage.completion_tokens);
            prop_assert!(close(PRICE.cost(&counts), by_hand(input, read, write, output, 0)));
            // Back to Anthropic's words unchanged (an Anthropic client of an
            // Anthropic backend sees what the backend said).
            prop_assert_eq!(usage_from_chat(&usage), anthropic.clone());
        }
    }

    #[test]
    fn openai_usage_bills_each_token_once(
        prompt in 0u64..200_000,
        cached_share in 0.0f64..=1.0,
        completion in 0u64..64_000,
        reasoning_share in 0.0f64..=1.0,
    ) {
        let cached = (prompt as f64 * cached_share) as u64;
        let reasoning = (completion as f64 * reasoning_share) as u64;
        let counts = openai(prompt, cached, completion, reasoning).token_counts();
        prop_assert_eq!(counts, TokenCounts {
            input: prompt - cached,
            cached_input: cached,
            cache_write: 0,
            output: completion,
            reasoning,
        });
        prop_assert_eq!(counts.prompt(), prompt);
        prop_assert!(close(
            PRICE.cost(&counts),
            by_hand(prompt - cached, cached, 0, completion, reasoning)
        ));
    }

    /// Details that overstate their whole (a backend bug) never make more
    /// tokens than were reported, nor fewer.
    #[test]
    fn overstated_details_are_clamped(
        prompt in 0u64..10_000,
        cached in 0u64..20_000,
        write in 0u64..20_000,
        completion in 0u64..10_000,
        reasoning in 0u64..20_000,
    ) {
        let mut usage = openai(prompt, cached, completion, reasoning);
        usage.extra.insert("cache_creation_input_tokens".into(), json!(write));
        let counts = usage.token_counts();
        prop_assert_eq!(counts.prompt(), prompt);
        prop_assert_eq!(counts.output, completion);
        prop_assert!(counts.reasoning <= counts.output);
    }
}

/// The case that was billed twice: a cache write of 2,000 tokens priced
/// once as input and again as cache write.
#[test]
fn anthropic_cache_write_is_not_also_input() {
    let usage = usage_to_chat(&MessagesUsage {
        input_tokens: 100,
        output_tokens: 50,
        cache_read_input_tokens: 0,
        cache_creation_input_tokens: 2_000,
    });
    let counts = usage.token_counts();
    assert_eq!(counts.input, 100);
    assert_eq!(counts.cache_write, 2_000);
    assert!(close(PRICE.cost(&counts), by_hand(100, 0, 2_000, 50, 0)));
}
