//! The ledger's reports of speed, read as an operator would: budget
//! attainment (`switchyard budgets`, `/admin/budgets`) and agent task time
//! (`switchyard sessions`, `/admin/sessions`), from a gateway's own ledger.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::{GatewayBuilder, get, get_with, post_with, priced, short};

/// The YAML section for a ledger of the test's own, and the admin key
/// `sk-admin`.
fn ledger_section() -> String {
    let ledger = support::unique_path("ledger.db");
    let admin = support::key_hash("sk-admin");
    format!(
        "ledger: {{path: '{}'}}\nauth:\n  admin_key_hash: '{admin}'\n",
        ledger.display()
    )
}

#[tokio::test]
async fn budget_attainment_per_profile_from_the_ledger() {
    let builder = priced("").section(&ledger_section());
    let config = support::write_temp_config(&builder.yaml());
    let mut gateway = builder.start();
    let url = gateway.url("/v1/chat/completions");
    // Streamed, so first tokens are measured: two chat answers locally,
    // one batch job on the priced cloud tier (nobody waits for it: paying
    // for cloud speed there is over-serving it).
    for (model, profile) in [("local", "chat"), ("local", "chat"), ("cloud", "batch")] {
        let mut body = short("hi", model);
        body["stream"] = json!(true);
        let reply = post_with(&url, &body, &[("x-switchyard-profile", profile)]).await;
        assert_eq!(reply.status, 200);
    }
    assert_eq!(get(&gateway.url("/admin/budgets")).await.status, 401);
    // Until the three rows are committed (in groups, after the answers).
    let mut report = Value::Null;
    let complete = support::eventually(async || {
        report = get_with(
            &gateway.url("/admin/budgets?by=profile&since=1d"),
            &[("authorization", "Bearer sk-admin")],
        )
        .await
        .json();
        report["total"]["requests"] == 3
    })
    .await;
    assert!(complete, "{report}");
    let line = |group: &str| {
        report["lines"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["group"] == group)
            .cloned()
            .unwrap()
    };
    let chat = line("chat");
    assert_eq!(chat["requests"], 2);
    assert_eq!(chat["ttft_measured"], 2);
    assert_eq!(chat["within_ttft_share"], 1.0, "{report}");
    assert_eq!(chat["over_served"], 0);
    let batch = line("batch");
    assert_eq!(batch["over_served"], 1);
    assert!(batch["over_served_usd"].as_f64().unwrap() > 0.0);
    assert_eq!(report["total"]["requests"], 3);
    gateway.terminate();

    let table = support::report(None, &config, &["budgets", "--by", "backend"]);

    assert!(table.starts_with("backend  requests"), "{table}");
    for group in ["cloud", "local", "total"] {
        assert!(table.lines().any(|l| l.starts_with(group)), "{table}");
    }
}

/// The worked example: an agent's task of four turns of 200 tokens at 50
/// tokens/s (4 s each), its tools taking 300 ms between turns: about 17 s,
/// of which 0.9 s is tool time. The report must find each gap within 10 ms.
#[tokio::test]
async fn agent_task_time_splits_model_time_from_tool_time() {
    let builder = GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            "preset: small, base_ttft_ms: 5, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 50, default_max_tokens: 100000, jitter: 0",
        )
        .split("agent", &[("local", 1)])
        .section(&ledger_section());
    let config = support::write_temp_config(&builder.yaml());
    let mut gateway = builder.start();
    let url = gateway.url("/v1/chat/completions");
    let mut messages = vec![json!({"role": "user", "content": "Fix the failing test"})];
    // What the client saw: its calls' time, and the time between a reply
    // and its next call (the tool's). The gateway's figures are held to
    // these, not to the clock: on a loaded machine a 300 ms sleep may take
    // longer, and the report must follow what happened.
    let (mut client_model_ms, mut client_gap_ms) = (0.0, 0.0);
    let mut replied: Option<std::time::Instant> = None;
    for turn in 0..4 {
        let mut body =
            json!({"model": "agent", "messages": messages, "max_tokens": 200, "stream": true});
        body["seed"] = json!(turn);
        let started = std::time::Instant::now();
        if let Some(replied) = replied {
            client_gap_ms += started.duration_since(replied).as_secs_f64() * 1000.0;
        }
        let reply = post_with(&url, &body, &[("x-session-id", "task-1")]).await;
        replied = Some(std::time::Instant::now());
        client_model_ms += started.elapsed().as_secs_f64() * 1000.0;
        assert_eq!(reply.status, 200);
        if turn < 3 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": format!("call_{turn}"), "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}]}));
            messages.push(json!({"role": "tool", "tool_call_id": format!("call_{turn}"), "content": "1 failed"}));
        }
    }
    // Other sessions, to be told apart: as Claude Code and Codex CLI name
    // theirs.
    post_with(
        &url,
        &short("hi", "agent"),
        &[("x-claude-code-session-id", "task-2")],
    )
    .await;
    post_with(&url, &short("hi", "agent"), &[("session-id", "task-3")]).await;
    gateway.terminate();

    let report: Value = serde_json::from_str(&support::report(
        None,
        &config,
        &["sessions", "--format", "json"],
    ))
    .unwrap();
    let task = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session"] == "task-1")
        .unwrap()
        .clone();
    assert_eq!(task["calls"], 4);
    assert_eq!(task["tool_result_calls"], 3);
    assert_eq!(task["route"], "agent");
    assert_eq!(task["output_tokens"], 800, "{task}");
    // The gateway sees a call end before the client has its last byte, and
    // the next begin after the client sent it: its gaps are the client's
    // plus those deliveries (milliseconds on loopback, more when the
    // machine is busy), and its model time the client's less them.
    let gap = task["gap_ms"].as_f64().unwrap();
    assert!(
        client_gap_ms >= 900.0,
        "three 300 ms sleeps: {client_gap_ms}"
    );
    assert!(
        gap >= client_gap_ms - 3.0 && gap <= client_gap_ms + 150.0,
        "tool time {gap} against {client_gap_ms} seen by the client"
    );
    let model = task["model_ms"].as_f64().unwrap();
    assert!(
        model <= client_model_ms + 3.0 && model >= client_model_ms - 150.0,
        "{model} against {client_model_ms} seen by the client"
    );
    assert!(model > 16_000.0, "800 tokens at 50 tokens/s: {model}");
    let wall = task["wall_ms"].as_f64().unwrap();
    assert!((wall - model - gap).abs() < 1e-6);
    assert_eq!(report["total"]["sessions"], 3);
    let sessions: Vec<&str> = report["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["session"].as_str().unwrap())
        .collect();
    assert!(
        sessions.contains(&"task-2") && sessions.contains(&"task-3"),
        "{sessions:?}"
    );
    assert_eq!(report["routes"][0]["route"], "agent");
    assert_eq!(report["routes"][0]["session"], "route:agent");
    assert_eq!(
        report["profiles"][0]["profile"], "-",
        "no profile was named"
    );
}
