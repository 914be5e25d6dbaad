//! The embedded default's `auto` route: the fifth of requests its
//! compiled-in predictor ranks hardest go to the cloud tier, the rest split
//! evenly between small and mid, and each receipt says which score and
//! threshold placed the request.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::collections::BTreeMap;

use serde_json::json;
use support::{chat, post_json};

/// Tasks of the routing-quality benchmark's kinds where the small tier's
/// answer was wrong and the large tier's right: the label the compiled-in
/// predictor learned.
const HARD: [&str; 4] = [
    "Write a Python function `second_largest(numbers)` that returns the second largest distinct value in the list `numbers`, or None if there is none. Reply with only the code, in one ```python block.",
    "One notebook costs 12 dollars. Dara buys 7 notebooks. How many dollars does Dara pay? End your reply with a line of the form `Answer: N`, N a whole number.",
    "Write a Python function `add_tax(price)` that returns `price` plus 5 percent, as a float. Reply with only the code, in one ```python block.",
    "Which month comes after August? Reply with only the month's name.",
];

/// Tasks the small tier answered as well as the large one.
const EASY: [&str; 4] = [
    "What is the capital of Egypt? Reply with only the city's name.",
    "What is the capital of Peru? Reply with only the city's name.",
    "What is the capital of Norway? Reply with only the city's name.",
    "How many times does the letter 'e' occur in the word 'mangozebra'? Reply with only the number.",
];

#[tokio::test]
async fn the_default_auto_route_sends_the_hardest_fifth_to_the_cloud_tier() {
    let gateway = support::default_gateway();
    let url = gateway.url("/v1/chat/completions");
    // One hard request in five, in waves of ten at a time.
    let prompts: Vec<(bool, &str)> = (0..200)
        .map(|i| {
            if i % 5 == 0 {
                (true, HARD[i / 5 % HARD.len()])
            } else {
                (false, EASY[i % EASY.len()])
            }
        })
        .collect();
    let mut served = Vec::new();
    for wave in prompts.chunks(10) {
        let replies = wave.iter().map(|(_, prompt)| {
            let mut body = chat("auto", prompt);
            body["max_tokens"] = json!(1);
            let url = url.clone();
            async move { post_json(&url, &body).await }
        });
        for reply in futures_util::future::join_all(replies).await {
            assert_eq!(reply.status, 200);
            let backend = reply.header("x-switchyard-backend").unwrap().to_owned();
            let reason = reply.header("x-switchyard-reason").unwrap().to_owned();
            served.push((backend, reason));
        }
    }
    // The threshold follows the traffic once it has seen some: judge the
    // requests after the first fifty.
    let mut hard_to_large = 0;
    let mut easy_to = BTreeMap::<String, usize>::new();
    for ((hard, _), (backend, reason)) in prompts.iter().zip(&served).skip(50) {
        let placed = if backend == "large" {
            "target-share-hard (predicted-fail "
        } else {
            "target-share-easy (predicted-fail "
        };
        assert!(reason.starts_with(placed), "{backend}: {reason}");
        assert!(reason.contains(" threshold 0."), "{reason}");
        if *hard {
            hard_to_large += usize::from(backend == "large");
        } else {
            *easy_to.entry(backend.clone()).or_default() += 1;
        }
    }
    assert!(
        hard_to_large >= 27,
        "{hard_to_large} of 30 hard requests went to large"
    );
    let easy_large = easy_to.get("large").copied().unwrap_or(0);
    assert!(
        easy_large <= 6,
        "{easy_large} of 120 easy requests went to large: {easy_to:?}"
    );
    // The rest split evenly between the local tiers.
    let (small, mid) = (easy_to["small"], easy_to["mid"]);
    assert!(small.abs_diff(mid) <= 12, "small {small}, mid {mid}");
}
