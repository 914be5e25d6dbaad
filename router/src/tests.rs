//! The router end to end, from a config.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use switchyard_policies::{Config, Profile};

use crate::latency::LatencyStore;
use crate::{Reason, RequestView, RouteError, Router};

mod decided_together;

const CONFIG: &str = "
backends:
  small: {tier: small, sim: {preset: small}}
  mid: {tier: mid, sim: {preset: mid}}
  large: {tier: cloud, sim: {preset: large}, price: {input_per_mtok: 2.5, cached_input_per_mtok: 1.25, output_per_mtok: 10}}
routes:
  auto:
    aliases: [gpt-4o]
    strategy:
      split:
        weights: {small: 40, mid: 40, large: 20}
    fallbacks: [large]
  share:
    strategy:
      target_share: {hard: large, easy: small, share: 0.2, window: 500}
  ruled:
    profile: chat
    strategy:
      rules:
        - when: {header: {name: x-team, value: research}}
          to: large
        - when: {tools: true}
          to: mid
        - when: {profile: [code]}
          to: mid
        - when: {similar_to: {examples: [prove this theorem, solve this equation], threshold: 0.45}}
          to: large
        - to: small
  cascade:
    strategy:
      cascade: {order: [small, large]}
";

fn router() -> Router {
    Router::new(&Config::from_yaml(CONFIG, "test").unwrap())
}

fn view(model: &str) -> RequestView<'_> {
    RequestView {
        model,
        prompt_tokens: 20,
        turns: 1,
        last_user_text: "hello",
        ..Default::default()
    }
}

fn name(router: &Router, index: usize) -> &str {
    &router.backends()[index]
}

#[test]
fn split_of_10000_sessions_holds_its_weights() {
    let router = router();
    for seed in [11, 23, 1979] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (mut large, mut moved) = (0, 0);
        for _ in 0..10_000 {
            let session = format!("s-{}", rng.random::<u64>());
            let v = RequestView {
                session: Some(&session),
                ..view("auto")
            };
            let d = router.decide(&v, rng.random()).unwrap();
            moved += usize::from(d.reason == Reason::StickyShare);
            assert!(matches!(
                d.reason,
                Reason::SplitSticky | Reason::StickyShare
            ));
            large += usize::from(name(&router, d.primary()) == "large");
        }
        let share = large as f64 / 10_000.0;
        assert!((share - 0.2).abs() <= 0.001, "seed {seed}: {share}");
        // The price of holding the weights in every 200 requests: a
        // session's request moves when its backend is two requests past
        // its weight. With every request a new session, their ids' draw is
        // a random walk the interleave keeps within the slack, and about
        // one request in ten moves; sessions that keep sending move far
        // less (`interleave`'s tests).
        assert!(moved < 1_200, "seed {seed}: {moved} of 10,000 moved");
    }
}

#[test]
fn split_without_sessions_converges_too() {
    let router = router();
    let mut rng = StdRng::seed_from_u64(5);
    let local = (0..10_000)
        .filter(|_| {
            let d = router.decide(&view("gpt-4o"), rng.random()).unwrap();
            name(&router, d.primary()) != "large"
        })
        .count();
    assert!((local as f64 / 10_000.0 - 0.8).abs() <= 0.02, "{local}");
}

#[test]
fn fallbacks_follow_the_choice_once() {
    let router = router();
    // The split deals mid, small, large, ... (each to the backend furthest
    // below its weight); `large` is also the fallback.
    for want in ["mid", "small", "large", "mid", "small"] {
        let d = router.decide(&view("auto"), 0.5).unwrap();
        let order: Vec<&str> = d.targets.iter().map(|t| name(&router, *t)).collect();
        if want == "large" {
            assert_eq!(
                order,
                ["large"],
                "a fallback equal to the choice is not tried twice"
            );
        } else {
            assert_eq!(order, [want, "large"]);
        }
    }
}

#[test]
fn target_share_routes_the_hardest_fifth() {
    let router = router();
    let mut rng = StdRng::seed_from_u64(3);
    let texts = [
        "hi",
        "thanks",
        "prove this theorem step by step",
        "refactor this python code",
        "what time is it",
    ];
    let mut hard = 0;
    for i in 0..3000 {
        let text = texts[rng.random_range(0..texts.len())];
        let v = RequestView {
            prompt_tokens: rng.random_range(5..3000),
            last_user_text: text,
            ..view("share")
        };
        let d = router.decide(&v, rng.random()).unwrap();
        if i >= 1000 && d.reason == Reason::TargetShareHard {
            hard += 1;
        }
    }
    assert!((hard as f64 / 2000.0 - 0.2).abs() < 0.03, "{hard}");
}

#[test]
fn rules_pick_the_first_match() {
    let router = router();
    let pick = |v: RequestView<'_>| {
        let d = router.decide(&v, 0.5).unwrap();
        (name(&router, d.primary()).to_owned(), d.reason, d.rule)
    };
    assert_eq!(
        pick(view("ruled")),
        ("small".into(), Reason::RuleDefault, Some(4))
    );
    assert_eq!(
        pick(RequestView {
            tool_count: 2,
            ..view("ruled")
        }),
        ("mid".into(), Reason::Rule, Some(1))
    );
    assert_eq!(
        pick(RequestView {
            profile: Some(Profile::Code),
            ..view("ruled")
        })
        .2,
        Some(2)
    );
    let research = RequestView {
        headers: vec![("x-team", "research")],
        tool_count: 1,
        ..view("ruled")
    };
    assert_eq!(pick(research).2, Some(0));
    let proof = RequestView {
        last_user_text: "Please prove this theorem about primes",
        ..view("ruled")
    };
    assert_eq!(pick(proof), ("large".into(), Reason::Rule, Some(3)));
    assert_eq!(router.header_names(), ["x-team"]);
}

#[test]
fn cascades_list_their_order_and_direct_names_bypass() {
    let router = router();
    let d = router.decide(&view("cascade"), 0.5).unwrap();
    let order: Vec<&str> = d.targets.iter().map(|t| name(&router, *t)).collect();
    assert_eq!(order, ["small", "large"]);
    assert!(router.cascade(&d).is_some());
    let direct = router.decide(&view("mid"), 0.5).unwrap();
    assert_eq!((direct.reason, direct.route), (Reason::Direct, None));
}

#[test]
fn unknown_models_list_the_known_ones() {
    let Err(RouteError::UnknownModel { model, available }) = router().decide(&view("gpt-9"), 0.5)
    else {
        panic!("gpt-9 is no model here");
    };
    assert_eq!(model, "gpt-9");
    assert_eq!(
        available,
        [
            "auto", "gpt-4o", "cascade", "ruled", "share", "large", "mid", "small"
        ]
    );
}

#[test]
fn explain_shows_the_workings_without_side_effects() {
    let router = router();
    let v = RequestView {
        tool_count: 1,
        ..view("ruled")
    };
    let explanation = router.explain(&v, 0.5).unwrap();
    assert_eq!(explanation.backend, "mid");
    assert_eq!(explanation.rule, Some(1));
    assert_eq!(explanation.rules.len(), 5);
    assert!(explanation.rules[1].matched && !explanation.rules[0].matched);
    assert!(explanation.rules[3].similarity.is_some());
    let json = serde_json::to_value(&explanation).unwrap();
    assert_eq!(json["reason"], "rule");
    assert_eq!(json["features"]["profile"], "chat");
    let before = router.explain(&view("share"), 0.5).unwrap().share_threshold;
    for _ in 0..100 {
        router.explain(&view("share"), 0.5).unwrap();
    }
    assert_eq!(
        router.explain(&view("share"), 0.5).unwrap().share_threshold,
        before
    );
}

const BUDGETED: &str = "
backends:
  local:
    tier: mid
    openai: {base_url: 'http://127.0.0.1:9/v1'}
    latency: {ttft_ms: 50, prefill_tokens_per_s: 500, decode_tokens_per_s: 40, concurrency: 4}
  cloud:
    tier: cloud
    model: gpt-4o
    openai: {base_url: 'http://127.0.0.1:9/v1'}
    latency: {ttft_ms: 300, prefill_tokens_per_s: 10000, decode_tokens_per_s: 80, concurrency: 64}
routes:
  chat:
    profile: chat
    strategy:
      cheapest_within_budget: {candidates: [local, cloud]}
  quick:
    strategy:
      fastest: {candidates: [local, cloud]}
";

#[test]
fn the_cheapest_backend_within_budget_serves_and_long_prompts_move_off_slow_prefill() {
    let router = Router::new(&Config::from_yaml(BUDGETED, "test").unwrap());
    let short = RequestView {
        model: "chat",
        prompt_tokens: 50,
        last_user_text: "hi",
        ..Default::default()
    };
    let d = router.decide(&short, 0.5).unwrap();
    assert_eq!(
        (name(&router, d.primary()), d.reason),
        ("local", Reason::WithinBudget)
    );
    assert!(d.predicted_ttft_ms < 300.0, "{}", d.predicted_ttft_ms);
    // 4,000 prompt tokens at 500 tokens/s is 8 s of prefill: over the chat budget.
    let long = RequestView {
        prompt_tokens: 4000,
        ..short.clone()
    };
    let d = router.decide(&long, 0.5).unwrap();
    assert_eq!(
        (name(&router, d.primary()), d.reason),
        ("cloud", Reason::WithinBudget)
    );
    let order: Vec<&str> = d.targets.iter().map(|t| name(&router, *t)).collect();
    assert_eq!(
        order,
        ["cloud", "local"],
        "the other candidate is the fallback"
    );
    // A budget nobody meets: the fastest, said so.
    let huge = RequestView {
        prompt_tokens: 40_000,
        ..short.clone()
    };
    assert_eq!(
        router.decide(&huge, 0.5).unwrap().reason,
        Reason::BudgetUnmeetable
    );
    let fastest = router
        .decide(
            &RequestView {
                model: "quick",
                ..short
            },
            0.5,
        )
        .unwrap();
    assert_eq!(
        (name(&router, fastest.primary()), fastest.reason),
        ("cloud", Reason::Fastest)
    );
}

/// A 50-token prompt answered in 6 s, its first token after 3.
fn one_slow_answer(router: &Router, backend: usize) {
    use crate::latency::Observation;
    use std::time::Duration;
    let slow = Observation {
        prompt_tokens: 50,
        output_tokens: 100,
        ttft: Some(Duration::from_secs(3)),
        total: Duration::from_secs(6),
        ..Observation::default()
    };
    router.latency().observe(backend, &slow);
}

#[test]
fn a_backend_that_becomes_slow_loses_traffic_within_a_few_requests() {
    let router = Router::new(&Config::from_yaml(BUDGETED, "test").unwrap());
    let view = RequestView {
        model: "chat",
        prompt_tokens: 50,
        last_user_text: "hi",
        ..Default::default()
    };
    let local = router.backends().iter().position(|b| b == "local").unwrap();
    let mut moved_after = None;
    for n in 1..=20 {
        one_slow_answer(&router, local);
        if name(&router, router.decide(&view, 0.5).unwrap().primary()) == "cloud" {
            moved_after = Some(n);
            break;
        }
    }
    let n = moved_after.expect("traffic moved off the slow backend");
    assert!(n <= 10, "moved after {n} slow requests");
}

fn long(model: &str, prompt_tokens: u32) -> RequestView<'_> {
    RequestView {
        prompt_tokens,
        max_tokens: Some(1000),
        ..view(model)
    }
}

/// Simulator windows: small 8,192, mid 32,768, large 128,000 tokens.
#[test]
fn no_strategy_sends_a_prompt_where_it_cannot_fit() {
    // A router whose split deals `small` next (it dealt `mid` first).
    let dealing_small = || {
        let router = router();
        router.decide(&view("auto"), 0.5).unwrap();
        router
    };
    let router = dealing_small();
    // 20,000 tokens do not fit on `small`, so the split's next most likely
    // backend that fits takes it.
    let split = router.decide(&long("auto", 20_000), 0.9).unwrap();
    assert_eq!(name(&router, split.primary()), "mid");
    assert_eq!(split.reason, Reason::ContextFit);
    assert!(split.targets.iter().all(|&b| name(&router, b) != "small"));
    // What fits where it was drawn keeps its reason.
    let fits = dealing_small().decide(&long("auto", 2_000), 0.9).unwrap();
    assert_eq!(
        (name(&router, fits.primary()), fits.reason),
        ("small", Reason::Split)
    );
    let cascade = router.decide(&long("cascade", 20_000), 0.5).unwrap();
    assert_eq!(
        cascade
            .targets
            .iter()
            .map(|&b| name(&router, b))
            .collect::<Vec<_>>(),
        ["large"]
    );
    let share = router.decide(&long("share", 100_000), 0.5).unwrap();
    assert_eq!(name(&router, share.primary()), "large");
    // Only the largest holds 100,000; nothing holds 200,000.
    let huge = router.decide(&long("auto", 200_000), 0.9).unwrap_err();
    assert_eq!(
        huge,
        RouteError::ContextTooLong {
            needed: 201_000,
            largest_window: 128_000
        }
    );
    // A backend named directly has nowhere else to go.
    assert!(matches!(
        router.decide(&long("small", 10_000), 0.5),
        Err(RouteError::ContextTooLong {
            largest_window: 8192,
            ..
        })
    ));
}

#[test]
fn a_window_read_from_the_server_counts_from_then_on() {
    let router = router();
    let mid = router.backends().iter().position(|b| b == "mid").unwrap();
    let at_mid = |router: &Router| {
        // unit 0.5: the split draws mid.
        router.decide(&long("auto", 4_000), 0.5).unwrap().primary()
    };
    assert_eq!(at_mid(&router), mid);
    router.set_context_window(mid, 4_096);
    assert_ne!(at_mid(&router), mid, "4,000 + 1,000 tokens no longer fit");
    assert_eq!(router.context_window(mid), Some(4_096));
}

#[test]
fn a_rule_decides_where_a_request_may_go_even_when_it_does_not_fit() {
    let router = router();
    // The default rule sends to small (8,192 tokens); the other rules'
    // targets are not candidates, and the route has no fallbacks.
    let refused = router.decide(&long("ruled", 20_000), 0.5).unwrap_err();
    assert!(
        matches!(refused, RouteError::ContextTooLong { .. }),
        "{refused:?}"
    );
}

#[test]
fn a_batch_fits_by_its_longest_input() {
    let router = router();
    let batch = RequestView {
        sequence_tokens: Some(1_000),
        ..long("small", 100_000)
    };
    assert_eq!(
        name(&router, router.decide(&batch, 0.5).unwrap().primary()),
        "small"
    );
}

#[test]
fn a_reloaded_router_keeps_what_it_learned_of_backends_that_remain() {
    let old_config = Config::from_yaml(BUDGETED, "test").unwrap();
    let old = Router::new(&old_config);
    let local = old.backends().iter().position(|b| b == "local").unwrap();
    let view = RequestView {
        model: "chat",
        prompt_tokens: 50,
        last_user_text: "hi",
        ..Default::default()
    };
    for _ in 0..20 {
        one_slow_answer(&old, local);
    }
    assert_eq!(
        name(&old, old.decide(&view, 0.5).unwrap().primary()),
        "cloud"
    );
    // The same config again: the slow backend is still known to be slow.
    let carried = Router::carrying(&old_config, Some((&old, &old_config)));
    assert_eq!(
        name(&carried, carried.decide(&view, 0.5).unwrap().primary()),
        "cloud"
    );
    // Without the previous router, it starts from its hints again.
    let fresh = Router::new(&old_config);
    assert_eq!(
        name(&fresh, fresh.decide(&view, 0.5).unwrap().primary()),
        "local"
    );
}

#[test]
fn a_session_moves_off_its_backend_while_its_queue_would_break_the_budget() {
    use crate::latency::{LatencyStore, Shape};
    let config = BUDGETED.to_owned()
        + "  sticky:\n    profile: chat\n    strategy:\n      split: {weights: {local: 1, cloud: 1}, sticky: true}\n";
    let router = Router::new(&Config::from_yaml(&config, "test").unwrap());
    let session = (0..100)
        .map(|i| format!("s-{i}"))
        .find(|s| {
            let v = RequestView {
                session: Some(s),
                ..view("sticky")
            };
            name(&router, router.decide(&v, 0.5).unwrap().primary()) == "local"
        })
        .unwrap();
    let v = RequestView {
        session: Some(&session),
        ..view("sticky")
    };
    assert_eq!(router.decide(&v, 0.5).unwrap().reason, Reason::SplitSticky);
    // Six long answers running on local's four slots (more than fit: the
    // soonest to finish hold them, the rest are waited for).
    let local = router.backends().iter().position(|b| b == "local").unwrap();
    let long = Shape {
        prompt_tokens: 50,
        output_tokens: 1000,
        ..Shape::default()
    };
    let work: Vec<u64> = (0..6)
        .map(|_| {
            let id = router.latency().started(local, &long);
            router.latency().running(local, id);
            id
        })
        .collect();
    let moved = router.decide(&v, 0.5).unwrap();
    assert_eq!(
        (name(&router, moved.primary()), moved.reason),
        ("cloud", Reason::StickyMoved)
    );
    for id in work {
        router.latency().finished(local, id);
    }
    assert_eq!(router.decide(&v, 0.5).unwrap().reason, Reason::SplitSticky);
}
