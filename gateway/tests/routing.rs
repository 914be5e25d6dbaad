//! Routing policies through the running gateway: receipts, profiles, rules,
//! cascades, fallbacks and explanations.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use http::Method;
use serde_json::{Value, json};
use support::{FAST_SIM_FIELDS, GatewayBuilder, chat, post_json, post_with, send};

fn sims() -> GatewayBuilder {
    GatewayBuilder::new()
        .in_process_sim(
            "small",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .in_process_sim("mid", "mid", &format!("preset: mid, {FAST_SIM_FIELDS}"))
        .in_process_sim(
            "large",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
}

#[tokio::test]
async fn rules_route_by_tools_profile_and_header() {
    let gateway = sims()
        .route(
            "auto",
            "strategy:\n  rules:\n    - when: {header: {name: x-team, value: research}}\n      to: large\n    - when: {tools: true}\n      to: mid\n    - when: {profile: [code]}\n      to: mid\n    - to: small",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let plain = post_json(&url, &chat("auto", "hi")).await;
    assert_eq!(plain.header("x-switchyard-backend"), Some("small"));
    assert_eq!(plain.header("x-switchyard-reason"), Some("rule-default"));

    let mut with_tools = chat("auto", "weather?");
    with_tools["tools"] =
        json!([{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}]);
    let reply = post_json(&url, &with_tools).await;
    assert_eq!(
        (
            reply.header("x-switchyard-backend"),
            reply.header("x-switchyard-reason")
        ),
        (Some("mid"), Some("rule"))
    );

    let coded = post_with(
        &url,
        &chat("auto", "hi"),
        &[("x-switchyard-profile", "code")],
    )
    .await;
    assert_eq!(coded.header("x-switchyard-backend"), Some("mid"));
    let mut by_metadata = chat("auto", "hi");
    by_metadata["metadata"] = json!({"profile": "code"});
    assert_eq!(
        post_json(&url, &by_metadata)
            .await
            .header("x-switchyard-backend"),
        Some("mid")
    );

    let research = post_with(&url, &chat("auto", "hi"), &[("x-team", "research")]).await;
    assert_eq!(research.header("x-switchyard-backend"), Some("large"));
}

#[tokio::test]
async fn an_unknown_profile_is_400_naming_the_valid_ones() {
    let gateway = sims().split("auto", &[("small", 1)]).start();
    let url = gateway.url("/v1/chat/completions");
    let reply = post_with(
        &url,
        &chat("auto", "hi"),
        &[("x-switchyard-profile", "turbo")],
    )
    .await;
    assert_eq!(reply.status, 400);
    let error = reply.error();
    assert_eq!(error["param"], "x-switchyard-profile");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("chat, code, agentic, rag, unattended, batch")
    );
    let mut body = chat("auto", "hi");
    body["metadata"] = json!({"profile": "turbo"});
    assert_eq!(
        post_json(&url, &body).await.error()["param"],
        "metadata.profile"
    );
}

#[tokio::test]
async fn cascade_escalates_answers_that_fail_a_check() {
    let gateway = sims()
        .route(
            "auto",
            "strategy:\n  cascade: {order: [small, large], escalate_on: [length, empty]}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");

    let mut short = chat("auto", "hello");
    short["max_tokens"] = json!(200);
    let accepted = post_json(&url, &short).await;
    assert_eq!(accepted.header("x-switchyard-backend"), Some("small"));
    assert_eq!(accepted.header("x-switchyard-reason"), Some("cascade"));

    // Cut at 3 tokens, the small model's answer fails `length`: escalate.
    // (The large model is cut too, but it is the last resort.)
    short["max_tokens"] = json!(3);
    let escalated = post_json(&url, &short).await;
    assert_eq!(escalated.status, 200);
    assert_eq!(escalated.header("x-switchyard-backend"), Some("large"));
    assert_eq!(
        escalated.header("x-switchyard-reason"),
        Some("cascade-escalated")
    );
    assert_eq!(escalated.json()["model"], "large");

    // Streamed: the small answer is checked before anything is sent.
    short["stream"] = json!(true);
    let streamed = post_json(&url, &short).await;
    assert_eq!(streamed.header("x-switchyard-backend"), Some("large"));
    let events = streamed.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let first: Value = serde_json::from_str(&events[0]).unwrap();
    assert_eq!(first["model"], "large");

    short["max_tokens"] = json!(200);
    let kept = post_json(&url, &short).await;
    assert_eq!(kept.header("x-switchyard-backend"), Some("small"));
    assert!(
        kept.events().len() > 3,
        "the checked stream is replayed whole"
    );
}

#[tokio::test]
async fn a_failed_backend_falls_back_before_the_first_byte() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let gateway = GatewayBuilder::new()
        .openai("gone", "small", &format!("http://{closed}/v1"), &[])
        .in_process_sim(
            "large",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
        .route(
            "auto",
            "strategy:\n  split:\n    weights: {gone: 1}\nfallbacks: [large]",
        )
        .start();
    let reply = post_json(&gateway.url("/v1/chat/completions"), &chat("auto", "hi")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("large"));
    assert_eq!(reply.header("x-switchyard-reason"), Some("fallback"));

    // A backend named directly has no fallbacks: its failure is the answer.
    let direct = post_json(&gateway.url("/v1/chat/completions"), &chat("gone", "hi")).await;
    assert_eq!(direct.status, 502);
}

#[tokio::test]
async fn explain_shows_the_decision_without_calling_a_model() {
    let gateway = sims()
        .route("auto", "aliases: [gpt-4o]\nstrategy:\n  rules:\n    - when: {keywords: [theorem]}\n      to: large\n    - to: small")
        .start();
    let url = gateway.url("/v1/route/explain");
    let reply = post_json(&url, &chat("gpt-4o", "Prove this theorem")).await;
    assert_eq!(reply.status, 200);
    let explanation = reply.json();
    assert_eq!(explanation["route"], "auto");
    assert_eq!(explanation["backend"], "large");
    assert_eq!(explanation["reason"], "rule");
    assert_eq!(explanation["rules"][0]["matched"], true);
    assert!(explanation["features"]["signals"]["math"].as_f64().unwrap() > 0.0);
    assert!(explanation["features"]["prompt_tokens"].as_u64().unwrap() > 0);

    let unknown = post_json(&url, &chat("nope", "x")).await;
    assert_eq!(unknown.status, 404);
    let wrong = send(Method::GET, &url, None, Vec::new(), false).await;
    assert_eq!(wrong.status, 405);
}

#[tokio::test]
async fn semantic_rules_can_use_an_encoder_backend() {
    let encoder = support::fast_sim(&[]);
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let gateway = sims()
        .openai("emb", "small", &encoder.base_url(), &[])
        .openai("gone", "small", &format!("http://{closed}/v1"), &[])
        .route(
            "auto",
            "strategy:\n  rules:\n    - when: {similar_to: {examples: [write a python function, fix this bug], threshold: 0.5, encoder: emb}}\n      to: mid\n    - to: small",
        )
        .route(
            "broken",
            "strategy:\n  rules:\n    - when: {similar_to: {examples: [write a python function], threshold: 0.1, encoder: gone}}\n      to: mid\n    - to: small",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let similar = post_json(
        &url,
        &chat("auto", "Write a Python function that sorts a list"),
    )
    .await;
    assert_eq!(similar.header("x-switchyard-backend"), Some("mid"));
    let served = support::get(&encoder.url("/sim/stats")).await.json()["requests"]
        .as_u64()
        .unwrap();
    assert_eq!(served, 2, "examples embedded once, then the request");

    let unrelated = post_json(&url, &chat("auto", "The weather in Lisbon is lovely today")).await;
    assert_eq!(unrelated.header("x-switchyard-backend"), Some("small"));
    let served = support::get(&encoder.url("/sim/stats")).await.json()["requests"]
        .as_u64()
        .unwrap();
    assert_eq!(served, 3, "the examples were not embedded again");

    let explained = post_json(
        &gateway.url("/v1/route/explain"),
        &chat("auto", "fix this bug please"),
    )
    .await
    .json();
    assert!(
        explained["rules"][0]["similarity"].as_f64().unwrap() > 0.5,
        "{explained}"
    );

    // An encoder that cannot be reached makes its rules not match; the request is still served.
    let reply = post_json(&url, &chat("broken", "write a python function")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("small"));
}

/// Drafting off: statically for a prompt class, and once measured
/// acceptance falls below the route's floor; both send the request to the
/// route's draft-less backend, and /metrics shows the acceptance.
#[tokio::test]
async fn drafting_stops_where_acceptance_is_poor() {
    let drafting = |rate: f64| {
        format!(
            "preset: mid, {FAST_SIM_FIELDS}, speculative: {{acceptance_rate: {rate}, draft_tokens: 4}}"
        )
    };
    let gateway = GatewayBuilder::new()
        .in_process_sim("poor-draft", "mid", &drafting(0.2))
        .in_process_sim("good-draft", "mid", &drafting(0.9))
        .in_process_sim("plain", "mid", &format!("preset: mid, {FAST_SIM_FIELDS}"))
        .route(
            "measured",
            "strategy: {split: {weights: {poor-draft: 1}}}\nspeculative: {min_acceptance: 0.5, instead: plain}",
        )
        .route(
            "static",
            "strategy: {split: {weights: {good-draft: 1}}}\nspeculative: {disable_for: [prose], instead: plain}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let code = "Fix this Python bug: def f(x): return x + 1";
    let prose = "Tell me about the weather in spring.";

    let on = post_json(&url, &chat("static", code)).await;
    assert_eq!(on.header("x-switchyard-backend"), Some("good-draft"));
    let off = post_json(&url, &chat("static", prose)).await;
    assert_eq!(off.header("x-switchyard-backend"), Some("plain"));
    assert_eq!(off.header("x-switchyard-reason"), Some("drafting-off"));

    // Poor acceptance is trusted after 256 drafted tokens; from then on the
    // class goes to the draft-less backend but for one re-probe in 16.
    let mut backends = Vec::new();
    for _ in 0..40 {
        let mut body = chat("measured", code);
        body["max_tokens"] = json!(64);
        let reply = post_json(&url, &body).await;
        backends.push(reply.header("x-switchyard-backend").unwrap().to_owned());
    }
    let first_plain = backends.iter().position(|b| b == "plain").unwrap();
    assert!((2..=8).contains(&first_plain), "{backends:?}");
    let drafted_after = backends[first_plain..]
        .iter()
        .filter(|b| *b == "poor-draft")
        .count();
    assert!(
        (1..=3).contains(&drafted_after),
        "re-probes only: {backends:?}"
    );

    let metrics = support::get(&gateway.url("/metrics")).await;
    let text = String::from_utf8(metrics.body.to_vec()).unwrap();
    let ratio: f64 = text
        .lines()
        .find(|l| {
            l.starts_with(r#"switchyard_draft_acceptance_ratio{backend="poor-draft",class="code"}"#)
        })
        .and_then(|l| l.split(' ').next_back()?.parse().ok())
        .unwrap_or_else(|| panic!("{text}"));
    assert!((ratio - 0.2).abs() < 0.05, "{ratio}");
    assert!(text.contains(r#"switchyard_requests_total{backend="plain",outcome="ok"}"#));
}

/// A backend's context window, read from its server (`switchyard sim`
/// reports `max_model_len` as vLLM does): a prompt it cannot hold goes to
/// the route's backend that can, and named directly it is the gateway's
/// own 400, with a refusal row, without a call to the backend.
#[tokio::test]
async fn prompts_go_only_where_they_fit() {
    let small = support::sim("small", support::FAST); // an 8,192-token window
    let gateway = GatewayBuilder::new()
        .openai("small", "small", &small.base_url(), &[])
        .in_process_sim(
            "big",
            "mid",
            &format!("preset: large, {}", support::FAST_SIM_FIELDS),
        )
        .route(
            "auto",
            "strategy:\n  split:\n    weights: {small: 1}\nfallbacks: [big]",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let long = chat("auto", &"many words of a long document ".repeat(2000));
    let mut reply = None;
    // The window is read in the background as the gateway starts.
    assert!(
        support::eventually(async || {
            let answer = post_json(&url, &long).await;
            let moved = answer.header("x-switchyard-reason") == Some("context-fit");
            reply = Some(answer);
            moved
        })
        .await
    );
    let reply = reply.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("x-switchyard-backend"), Some("big"));
    let mut direct = long.clone();
    direct["model"] = json!("small");
    let refused = post_json(&url, &direct).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.error()["code"], "context_length_exceeded");
    assert!(
        refused.error()["message"]
            .as_str()
            .unwrap()
            .contains("the largest context window this model name reaches holds 8192"),
        "the gateway's own refusal: {}",
        refused.error()
    );
    // Refused before any call: a refusal row, not a call's row.
    support::ledger_rows(
        &gateway,
        "SELECT id FROM requests WHERE status = 'context_length_exceeded' AND refusal IS NOT NULL",
        1,
        |r| r.get::<_, i64>(0),
    )
    .await;
}

/// A backend whose window is not known refuses a request as too long for
/// it (`context_length_exceeded`, naming its window): the route's next
/// backend whose window holds it answers (reason `fallback`), and the
/// window is remembered, so the next such request goes there at once.
#[tokio::test]
async fn a_window_refused_upstream_falls_back_and_is_remembered() {
    const REFUSAL: &str = r#"{"error": {"message": "This model's maximum context length is 50 tokens. However, you requested 120 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
    // One call only: a second one to it would find nobody listening.
    let (tiny, seen) = support::canned_server(1, "400 Bad Request", REFUSAL).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  tiny:\n    tier: small\n    openai: {{base_url: 'http://{tiny}/v1'}}\n"
        ))
        .in_process_sim("big", "mid", &format!("preset: large, {FAST_SIM_FIELDS}"))
        .route(
            "auto",
            "strategy:\n  split:\n    weights: {tiny: 1}\nfallbacks: [big]",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("auto", "a question that needs more room than fifty tokens");
    body["max_tokens"] = json!(100);
    let first = post_json(&url, &body).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.header("x-switchyard-backend"), Some("big"));
    assert_eq!(first.header("x-switchyard-reason"), Some("fallback"));
    let second = post_json(&url, &body).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.header("x-switchyard-backend"), Some("big"));
    assert_eq!(second.header("x-switchyard-reason"), Some("context-fit"));
    assert_eq!(seen.await.unwrap().len(), 1, "tiny was asked once");
}

/// An encoder call made to route a request is the caller's: a ledger row
/// on its key (`endpoint` `encoder`, `reason` `routing-encoder`), within
/// its budget; `/v1/route/explain` says which encoders it called.
#[tokio::test]
async fn routing_encoder_calls_are_billed_to_the_key_they_route() {
    let encoder = support::fast_sim(&[]);
    let gateway = sims()
        .backend_yaml(&format!(
            "  emb:\n    tier: cloud\n    model: sim\n    openai: {{base_url: '{}'}}\n    price: {{input_per_mtok: 1000, output_per_mtok: 1000}}\n",
            encoder.base_url()
        ))
        .route(
            "auto",
            "strategy:\n  rules:\n    - when: {similar_to: {examples: [write a python function], threshold: 0.5, encoder: emb}}\n      to: mid\n    - to: small",
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: ivy, hash: '{}'}}\n    - {{name: jo, hash: '{}', budget: {{daily_usd: 0.000001}}}}\n",
            support::key_hash("sk-ivy"),
            support::key_hash("sk-jo")
        ))
        .start();
    let ivy = [("authorization", "Bearer sk-ivy")];
    let reply = post_with(
        &gateway.url("/v1/chat/completions"),
        &chat("auto", "Write a Python function to sort"),
        &ivy,
    )
    .await;
    assert_eq!(reply.header("x-switchyard-backend"), Some("mid"));
    let explained = post_with(
        &gateway.url("/v1/route/explain"),
        &chat("auto", "fix it"),
        &ivy,
    )
    .await
    .json();
    assert_eq!(explained["encoders_called"], json!(["emb"]), "{explained}");
    // Jo's budget cannot hold an encoder call: the rule does not match, the
    // request is still served (by the free default), and no encoder row.
    let jo = post_with(
        &gateway.url("/v1/chat/completions"),
        &chat("auto", "Write a Python function"),
        &[("authorization", "Bearer sk-jo")],
    )
    .await;
    assert_eq!(jo.status, 200);
    assert_eq!(jo.header("x-switchyard-backend"), Some("small"));
    // The examples and the request, then the explained request.
    let rows: Vec<(String, String, f64)> = support::ledger_rows(
        &gateway,
        "SELECT key, reason, cost_usd FROM requests WHERE endpoint = 'encoder'",
        3,
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
    .await;
    assert!(
        rows.iter()
            .all(|(key, reason, cost)| key == "ivy" && reason == "routing-encoder" && *cost > 0.0),
        "{rows:?}"
    );
}

/// A stream held back for a cascade check is held in memory: past the
/// backend's `max_response_bytes` it is dropped with a 502, as a whole
/// answer that large is, rather than held.
#[tokio::test]
async fn a_held_back_stream_is_bounded_by_the_backends_answer_size() {
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  small:\n    tier: small\n    sim: {{preset: small, {FAST_SIM_FIELDS}}}\n    max_response_bytes: 2000\n"
        ))
        .in_process_sim(
            "large",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
        .route(
            "auto",
            "strategy:\n  cascade: {order: [small, large], escalate_on: [empty]}",
        )
        .start();
    let url = gateway.url("/v1/chat/completions");
    let mut body = chat("auto", "tell me a long story");
    body["stream"] = json!(true);
    body["max_tokens"] = json!(5);
    let short = post_json(&url, &body).await;
    assert_eq!(short.header("x-switchyard-backend"), Some("small"));
    body["max_tokens"] = json!(400);
    let long = post_json(&url, &body).await;
    assert_eq!(long.status, 502);
    assert_eq!(long.error()["type"], "upstream_error");
}

/// A learned route with no weights file starts at p = 0.5 and tries small
/// first; every answer cut at the token limit escalates and teaches the
/// predictor, until the same prompt goes straight to large.
#[tokio::test]
async fn a_learned_route_learns_from_its_own_escalations() {
    let gateway = sims()
        .route(
            "learned",
            "strategy:\n  learned: {predictor: small-fails, threshold: 0.6, easy: small, hard: large, escalate_on: [length]}",
        )
        .section("predictors:\n  small-fails: {backend: small, learning_rate: 0.5}")
        .section(&format!(
            "auth:\n  admin_key_hash: \"{}\"",
            support::key_hash("sk-admin-learned")
        ))
        .start();
    let admin = [("authorization", "Bearer sk-admin-learned")];
    let url = gateway.url("/v1/chat/completions");
    let mut request = chat("learned", "Compute 7311 * 8506 and explain each step");
    request["max_tokens"] = json!(3);
    let first = post_json(&url, &request).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.header("x-switchyard-reason"),
        Some("cascade-escalated")
    );
    assert_eq!(first.header("x-switchyard-predicted-fail"), Some("0.500"));
    let mut reasons = Vec::new();
    for _ in 0..10 {
        let reply = post_json(&url, &request).await;
        assert_eq!(reply.status, 200);
        reasons.push(reply.header("x-switchyard-reason").unwrap().to_owned());
        if reasons.last().unwrap() == "learned-hard" {
            assert_eq!(reply.header("x-switchyard-backend"), Some("large"));
            let p: f64 = reply
                .header("x-switchyard-predicted-fail")
                .unwrap()
                .parse()
                .unwrap();
            assert!(p >= 0.6, "{p}");
            break;
        }
    }
    assert_eq!(
        reasons.last().map(String::as_str),
        Some("learned-hard"),
        "{reasons:?}"
    );
    // Explaining names the predictor and how many outcomes it learnt from.
    let explained = post_json(&gateway.url("/v1/route/explain"), &request)
        .await
        .json();
    assert_eq!(explained["strategy"], "learned");
    let version = explained["predictor"].as_str().unwrap();
    let updates: usize = version.rsplit('+').next().unwrap().parse().unwrap();
    assert_eq!(updates, reasons.len(), "{version}");
    assert!(explained["features"]["predicted_fail"].as_f64().unwrap() >= 0.6);
    // What it learnt can be saved as a weights file and pinned in a config.
    let listed = support::get_with(&gateway.url("/admin/predictors"), &admin)
        .await
        .json();
    assert_eq!(listed["predictors"][0]["updates"], reasons.len() as u64);
    let file = support::get_with(&gateway.url("/admin/predictors?name=small-fails"), &admin).await;
    assert_eq!(file.status, 200);
    let weights =
        switchyard_router::learned::Weights::from_json(std::str::from_utf8(&file.body).unwrap())
            .unwrap();
    assert!(version.starts_with("small-fails@"));
    assert!(weights.bias > 0.0, "{}", weights.bias);
}

/// Weights come from the file a config names; a file that is not weights
/// stops the gateway from starting, naming the file.
#[tokio::test]
async fn predictors_read_their_weights_file() {
    let weights = switchyard_router::learned::Weights {
        bias: 3.0,
        ..Default::default()
    };
    let file = support::unique_path("weights.json");
    std::fs::write(&file, weights.to_json()).unwrap();
    let route = "strategy:\n  target_share: {hard: large, easy: small, share: 0.5, by: p}";
    let gateway = sims()
        .route("share", route)
        .route(
            "rules",
            "strategy:\n  rules:\n    - when: {predicted_fail: {min: 0.9}}\n      to: large\n    - to: small",
        )
        .section(&format!("predictors:\n  p: {{backend: small, weights: {}}}", file.display()))
        .start();
    let reply = post_json(
        &gateway.url("/v1/chat/completions"),
        &chat("rules", "hello"),
    )
    .await;
    assert_eq!(reply.header("x-switchyard-backend"), Some("large"));
    assert_eq!(reply.header("x-switchyard-predicted-fail"), Some("0.953"));
    let explained = post_json(&gateway.url("/v1/route/explain"), &chat("share", "hello"))
        .await
        .json();
    assert!(
        explained["predictor"]
            .as_str()
            .unwrap()
            .starts_with(&format!("p@{}+0", weights.version()))
    );

    std::fs::write(&file, "{\"format\": \"something else\"}").unwrap();
    let config = support::write_temp_config(&format!(
        "backends:\n  small: {{tier: small, sim: {{preset: small}}}}\npredictors:\n  p: {{backend: small, weights: {}}}\n",
        file.display()
    ));
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("check")
        .arg(&config)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("predictors.p.weights") && stderr.contains(&file.display().to_string()),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&file);
}

/// A predictor with `record:` appends the outcomes it learns from
/// (features, not prompts), and `switchyard train-router` learns from that
/// file: the traffic's own labels, offline.
#[tokio::test]
async fn recorded_outcomes_train_a_predictor_offline() {
    let record = support::unique_path("outcomes.jsonl");
    let gateway = sims()
        .route(
            "learned",
            "strategy:\n  learned: {predictor: p, threshold: 0.99, easy: small, hard: large, escalate_on: [length]}",
        )
        .section(&format!(
            "predictors:\n  p: {{backend: small, learning_rate: 0, record: {}}}",
            record.display()
        ))
        .start();
    let url = gateway.url("/v1/chat/completions");
    for i in 0..24 {
        // Long answers cut at 3 tokens fail; short questions pass.
        let (text, max_tokens) = if i % 2 == 0 {
            (format!("Write a long essay about rivers, part {i}"), 3)
        } else {
            (format!("Say hi to number {i}"), 400)
        };
        let mut request = chat("learned", &text);
        request["max_tokens"] = json!(max_tokens);
        assert_eq!(post_json(&url, &request).await.status, 200);
    }
    let written = support::eventually(async || {
        std::fs::read_to_string(&record).is_ok_and(|text| text.lines().count() == 24)
    })
    .await;
    assert!(written, "24 outcomes recorded");
    let lines = std::fs::read_to_string(&record).unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["features"], "v1");
    assert_eq!(first["route"], "learned");
    assert_eq!(first["failed"], true);
    assert!(!lines.contains("rivers"), "no prompt text is recorded");
    drop(gateway);

    let weights = support::unique_path("weights.json");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["train-router", "--from"])
        .arg(&record)
        .arg("--out")
        .arg(&weights)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("trained on 24 examples (12 failed)"),
        "{stdout}"
    );
    let trained =
        switchyard_router::learned::Weights::from_json(&std::fs::read_to_string(&weights).unwrap())
            .unwrap();
    assert_ne!(trained, switchyard_router::learned::Weights::default());

    // Trained under the config that will use the weights, which names the
    // file not written yet: training reads no weights, then `check` finds
    // the new file.
    let dir = support::unique_path("train-config");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("switchyard.yaml");
    let yaml = sims()
        .route(
            "learned",
            "strategy:\n  learned: {predictor: p, threshold: 0.5, easy: small, hard: large}",
        )
        .section("predictors:\n  p: {backend: small, weights: weights.json}")
        .yaml();
    std::fs::write(&config, yaml).unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap()
    };
    let trained_here = run(&[
        "train-router",
        "--from",
        record.to_str().unwrap(),
        "--out",
        dir.join("weights.json").to_str().unwrap(),
        "--model",
        "learned",
    ]);
    assert!(
        trained_here.status.success(),
        "{}",
        String::from_utf8_lossy(&trained_here.stderr)
    );
    let checked = run(&["check"]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let _ = std::fs::remove_file(&record);
    let _ = std::fs::remove_file(&weights);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The policy as written: an 80/20 split sends 20% to the cloud whatever
/// the sessions. 200 requests from eight sticky sessions find 20% +- 3
/// points on the cloud backend (the sessions' ids alone would put one of
/// eight, or none, or three, there).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_80_20_split_holds_20_percent_over_eight_sessions() {
    let gateway = GatewayBuilder::new()
        .in_process_sim("local", "small", support::FAST_SIM_FIELDS)
        .in_process_sim("cloud", "cloud", support::FAST_SIM_FIELDS)
        .split("auto", &[("local", 80), ("cloud", 20)])
        .start();
    let mut on_cloud = 0;
    let mut reasons = std::collections::BTreeMap::new();
    for i in 0..200 {
        let session = format!("session-{}", i % 8);
        let reply = post_with(
            &gateway.url("/v1/chat/completions"),
            &support::short("hello", "auto"),
            &[("x-session-id", session.as_str())],
        )
        .await;
        assert_eq!(reply.status, 200);
        on_cloud += usize::from(reply.header("x-switchyard-backend") == Some("cloud"));
        *reasons
            .entry(reply.header("x-switchyard-reason").unwrap().to_owned())
            .or_insert(0) += 1;
    }
    assert!(
        (34..=46).contains(&on_cloud),
        "{on_cloud} of 200 on the cloud: {reasons:?}"
    );
    // Stickiness still holds where the share allows it.
    assert!(
        reasons.get("split-sticky").copied().unwrap_or(0) > 100,
        "{reasons:?}"
    );
}

/// A wildcard route: `openai/*` takes every model name under `openai/`,
/// sends the provider the part the `*` stands for, and prices the call at
/// the built-in list's price of that model; exact names still win.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_route_passes_the_providers_model_name_through() {
    const ANSWER: &str = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000000,"completion_tokens":1000000,"total_tokens":2000000}}"#;
    let (server, seen) = support::recording_server(3, ANSWER).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  openai:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{server}/v1'}}\n"
        ))
        .in_process_sim("local", "small", FAST_SIM_FIELDS)
        .route("openai/*", "strategy:\n  split:\n    weights: {openai: 1}")
        .route("openai/special", "strategy:\n  split:\n    weights: {local: 1}")
        .start();
    // Each call carries its model name as its request id (`/` is not
    // kept in one, so `.`): the ledger's rows are found by it, since a row
    // may be written after the next call's.
    let ask = |model: &'static str| {
        let url = gateway.url("/v1/chat/completions");
        let id = model.replace('/', ".");
        async move { post_with(&url, &chat(model, "hi"), &[("x-request-id", &id)]).await }
    };
    for model in [
        "openai/gpt-4o-mini",
        "openai/gpt-4o",
        "openai/not-on-the-list",
    ] {
        let reply = ask(model).await;
        assert_eq!(reply.status, 200, "{model}");
        assert_eq!(reply.header("x-switchyard-route"), Some("openai/*"));
        assert_eq!(reply.header("x-switchyard-backend"), Some("openai"));
    }
    // Exact names win over the wildcard; the bare prefix is no model.
    assert_eq!(
        ask("openai/special").await.header("x-switchyard-backend"),
        Some("local")
    );
    assert_eq!(ask("openai/").await.status, 404);
    let sent: Vec<String> = seen
        .await
        .unwrap()
        .iter()
        .map(|r| support::body_of(r)["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent, ["gpt-4o-mini", "gpt-4o", "not-on-the-list"]);
    // A million tokens each way: gpt-4o-mini's list price is $0.15 + $0.60,
    // gpt-4o's $2.50 + $10; a model not on the list is unpriced.
    let rows = support::ledger_rows(
        &gateway,
        "SELECT client_request_id, cost_usd, unpriced FROM requests WHERE backend = 'openai' ORDER BY client_request_id",
        3,
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, f64>(1)?, r.get::<_, bool>(2)?)),
    )
    .await;
    assert_eq!(rows[0].0, "openai.gpt-4o");
    assert!((rows[0].1 - 12.5).abs() < 1e-9, "{rows:?}");
    assert_eq!(rows[1].0, "openai.gpt-4o-mini");
    assert!((rows[1].1 - 0.75).abs() < 1e-9, "{rows:?}");
    assert_eq!(rows[2], ("openai.not-on-the-list".to_owned(), 0.0, true));
}
