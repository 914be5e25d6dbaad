//! Budget decisions made at the same moment, and where each reserves.

use switchyard_policies::Config;

use super::name;
use crate::{Reason, RequestView, Router};

/// A server that decodes one request at a time (a 64-token answer takes
/// 1.28 s, over the routes' 1 s budget when it waits behind another), the
/// cloud, and a free server too small for long prompts.
const ONE_SLOT: &str = "
backends:
  local:
    tier: small
    openai: {base_url: 'http://127.0.0.1:9/v1'}
    latency: {ttft_ms: 40, prefill_tokens_per_s: 100000, decode_tokens_per_s: 50, concurrency: 1}
    price: {input_per_mtok: 0.01, output_per_mtok: 0.01}
  narrow:
    tier: small
    openai: {base_url: 'http://127.0.0.1:9/v1'}
    latency: {ttft_ms: 40, prefill_tokens_per_s: 100000, decode_tokens_per_s: 50, concurrency: 8}
    context_window: 1000
  cloud:
    tier: cloud
    model: gpt-4o
    openai: {base_url: 'http://127.0.0.1:9/v1'}
    latency: {ttft_ms: 150, prefill_tokens_per_s: 100000, decode_tokens_per_s: 500, concurrency: 64}
routes:
  chat:
    budget: {ttft_ms: 1000}
    strategy:
      cheapest_within_budget: {candidates: [local, cloud]}
  long:
    budget: {ttft_ms: 1000}
    strategy:
      cheapest_within_budget: {candidates: [narrow, local, cloud]}
";

/// A short request on `chat`, whose 64-token answer takes `local` 1.28 s.
fn short() -> RequestView<'static> {
    RequestView {
        model: "chat",
        prompt_tokens: 20,
        max_tokens: Some(64),
        last_user_text: "hello",
        ..Default::default()
    }
}

/// Requests decided at the same moment on a one-slot server: only one
/// goes there, each later one seeing the choices before it as work ahead.
/// Two decisions that read the queue before either reserved a place both
/// chose it, and one waited seconds over its budget behind the other.
#[test]
fn decisions_made_at_once_do_not_share_one_free_slot() {
    let config = Config::from_yaml(ONE_SLOT, "test").unwrap();
    let view = short();
    // Each round on a new router: the first decision finds the slot free.
    for round in 0..50 {
        let router = Router::new(&config);
        let together = std::sync::Barrier::new(8);
        let local = std::thread::scope(|s| {
            let deciding: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        together.wait();
                        router.decide(&view, 0.5).unwrap().primary()
                    })
                })
                .collect();
            deciding
                .into_iter()
                .map(|d| d.join().unwrap())
                .filter(|&backend| name(&router, backend) == "local")
                .count()
        });
        assert_eq!(local, 1, "round {round}: {local} of 8 went to the one slot");
    }
}

/// A budget decision moved off its cheapest choice for its context is
/// work ahead where it goes: the next decision there sees it queued.
#[test]
fn a_decision_moved_for_its_context_is_counted_where_it_goes() {
    let router = Router::new(&Config::from_yaml(ONE_SLOT, "test").unwrap());
    let short = short();
    // 2,000 prompt tokens do not fit `narrow` (the cheapest): on to `local`.
    let moved = router
        .decide(
            &RequestView {
                model: "long",
                prompt_tokens: 2_000,
                ..short.clone()
            },
            0.5,
        )
        .unwrap();
    assert_eq!(
        (name(&router, moved.primary()), moved.reason),
        ("local", Reason::ContextFit)
    );
    let next = router.decide(&short, 0.5).unwrap();
    assert_eq!(name(&router, next.primary()), "cloud", "{next:?}");
}
