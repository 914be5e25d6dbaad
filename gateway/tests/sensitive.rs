//! Sensitive data and routing: a route, team or key `sensitive:` policy
//! keeps a request holding a card number on local tiers, refuses it, or
//! lets it through, and a cloud stand-in that records every body shows
//! the values never reached it where the policy kept them away.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use serde_json::json;
use support::{GatewayBuilder, key_hash, post_with};

const CARD: &str = "4111 1111 1111 1111";
const EMAIL: &str = "jane.doe@example.com";
const ANSWER: &str = r#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sensitive_requests_stay_local_or_are_refused_and_never_reach_the_cloud() {
    // The cloud answers the three requests its policies let through.
    let (cloud, seen) = support::recording_server(3, ANSWER).await;
    let gateway = GatewayBuilder::new()
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    model: gpt-4o\n    openai: {{base_url: 'http://{cloud}/v1'}}\n"
        ))
        .in_process_sim("local", "small", support::FAST_SIM_FIELDS)
        .route(
            "keep",
            "strategy:\n  split:\n    weights: {cloud: 1}\nfallbacks: [local]\nsensitive: {action: local_only}",
        )
        .route(
            "strict",
            "strategy:\n  split:\n    weights: {cloud: 1}\nsensitive: {action: refuse, detect: [card]}",
        )
        .route("open", "strategy:\n  split:\n    weights: {cloud: 1}\nsensitive: {action: allow}")
        .route(
            "cloudonly",
            "strategy:\n  split:\n    weights: {cloud: 1}\nsensitive: {action: local_only}",
        )
        .section(&format!(
            "auth:\n  keys:\n    - {{name: alice, hash: \"{}\"}}\n    - {{name: bob, hash: \"{}\", sensitive: {{action: refuse, detect: [email]}}}}\n",
            key_hash("sk-alice-sensitive"),
            key_hash("sk-bob-sensitive")
        ))
        .start();
    let ask = |key: &'static str, model: &'static str, text: String| {
        let url = gateway.url("/v1/chat/completions");
        async move {
            let auth = format!("Bearer {key}");
            let body = json!({"model": model, "max_tokens": 4, "messages": [
                {"role": "system", "content": "you are helpful"},
                {"role": "user", "content": text}]});
            post_with(&url, &body, &[("authorization", auth.as_str())]).await
        }
    };
    let alice = "sk-alice-sensitive";

    // Kept local: the fallback serves, the receipt says why and what.
    let kept = ask(alice, "keep", format!("charge my card {CARD} please")).await;
    assert_eq!(kept.status, 200);
    assert_eq!(kept.header("x-switchyard-backend"), Some("local"));
    assert_eq!(kept.header("x-switchyard-reason"), Some("sensitive"));
    assert_eq!(kept.header("x-switchyard-sensitive"), Some("card"));
    // Nothing sensitive: routed as usual, no receipt.
    let plain = ask(alice, "keep", "hello there".into()).await;
    assert_eq!(plain.header("x-switchyard-backend"), Some("cloud"));
    assert_eq!(plain.header("x-switchyard-sensitive"), None);

    // Refused, naming the kind and never the value.
    let refused = ask(alice, "strict", format!("card {CARD}")).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.error()["code"], "sensitive_data");
    let message = refused.error()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("card") && !message.contains("4111"),
        "{message}"
    );
    // The strict route detects only cards: an email goes through.
    assert_eq!(
        ask(alice, "strict", format!("mail {EMAIL}")).await.status,
        200
    );
    // Allowed: served by the cloud, the kinds in the receipt.
    let allowed = ask(alice, "open", format!("mail {EMAIL}")).await;
    assert_eq!(allowed.header("x-switchyard-sensitive"), Some("email"));
    // Local only, and no local backend on the route: refused, not sent.
    let nowhere = ask(alice, "cloudonly", format!("card {CARD}")).await;
    assert_eq!(nowhere.status, 400);
    assert!(
        nowhere.error()["message"]
            .as_str()
            .unwrap()
            .contains("local")
    );
    // Bob's key refuses emails: stricter than the route's allow.
    let bob = ask("sk-bob-sensitive", "open", format!("mail {EMAIL}")).await;
    assert_eq!(bob.status, 400);

    // The cloud saw three bodies: the plain one and the two emails its
    // policies allowed; never the card number.
    let bodies = seen.await.unwrap();
    assert_eq!(bodies.len(), 3);
    assert!(bodies.iter().all(|b| !b.contains("4111")), "{bodies:?}");
    // The refusals are in the ledger, under their kind.
    let refusals = support::ledger_rows(
        &gateway,
        "SELECT status FROM requests WHERE status = 'sensitive_data'",
        3,
        |r| r.get::<_, String>(0),
    )
    .await;
    assert_eq!(refusals.len(), 3);
}

#[test]
fn check_refuses_unknown_actions_and_kinds() {
    for (policy, said) in [
        (
            "{action: hide}",
            "`hide` is not one of local_only, mask, refuse, allow",
        ),
        ("{action: local_only, detect: [cards]}", "cards"),
        ("{action: sometimes}", "sometimes"),
    ] {
        let err = support::check_refuses(&format!(
            "backends:\n  local: {{tier: small, sim: {{preset: small}}}}\nroutes:\n  auto:\n    strategy: {{split: {{weights: {{local: 1}}}}}}\n    sensitive: {policy}\n"
        ));
        assert!(
            err.contains("routes.auto.sensitive") && err.contains(said),
            "{policy}: {err}"
        );
    }
}
