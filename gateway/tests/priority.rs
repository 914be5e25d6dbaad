//! Priority classes in a backend's queue, end to end: a real gateway in
//! front of a simulator slow enough (600 ms a request, requests sent 100 ms
//! or more apart) that the order in which requests finish shows the order
//! they were served in, on a loaded machine too.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::sync::Arc;
use std::time::Duration;

use support::{GatewayBuilder, chat, post_with};

/// Sends `profiles[i]` (a profile, or "" for none) after `i`'s delay, and
/// returns the labels in the order their answers came.
async fn finishing_order(url: &str, requests: &[(&'static str, &'static str, u64)]) -> Vec<String> {
    let url = Arc::new(url.to_owned());
    let done = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = requests
        .iter()
        .map(|&(label, profile, after_ms)| {
            let (url, done) = (url.clone(), done.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(after_ms)).await;
                let headers: Vec<(&str, &str)> = if profile.is_empty() {
                    Vec::new()
                } else {
                    vec![("x-switchyard-profile", profile)]
                };
                let reply = post_with(&url, &chat("one", "hi"), &headers).await;
                assert_eq!(reply.status, 200, "{label}");
                done.lock().unwrap().push(label.to_owned());
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    // Every task is done: the list is the last reference's.
    Arc::try_unwrap(done).unwrap().into_inner().unwrap()
}

fn slow_gateway(limits: &[&str]) -> (support::Proc, support::Proc) {
    let slow = support::sim(
        "small",
        &["base_ttft_ms=600", "jitter=0", "decode_tokens_per_s=5000"],
    );
    let gateway = GatewayBuilder::new()
        .openai("one", "small", &slow.base_url(), limits)
        .start();
    (slow, gateway)
}

#[tokio::test]
async fn an_interactive_request_goes_ahead_of_queued_batch_lines_and_unattended_ahead_of_batch() {
    // One slot: b0 runs; b1, b2 and u wait; i comes last and is served next,
    // then u, then the batch lines in their order.
    let (_sim, gateway) = slow_gateway(&["max_concurrency: 1", "max_queue: 10"]);
    let order = finishing_order(
        &gateway.url("/v1/chat/completions"),
        &[
            ("b0", "batch", 0),
            ("b1", "batch", 100),
            ("b2", "batch", 200),
            ("u", "unattended", 300),
            ("i", "", 400),
        ],
    )
    .await;
    assert_eq!(order, ["b0", "i", "u", "b1", "b2"]);
}

#[tokio::test]
async fn batch_lines_leave_the_interactive_reserve_free() {
    // Two slots, half kept from batch lines: b0 runs alone while b1 waits,
    // and i, coming later, starts at once in the slot kept for it. (With
    // no reserve, b1 would run beside b0 and finish before i.)
    let (_sim, gateway) = slow_gateway(&[
        "max_concurrency: 2",
        "max_queue: 10",
        "interactive_reserve: 0.5",
    ]);
    let order = finishing_order(
        &gateway.url("/v1/chat/completions"),
        &[("b0", "batch", 0), ("b1", "batch", 100), ("i", "chat", 250)],
    )
    .await;
    assert_eq!(order, ["b0", "i", "b1"]);
}
