//! Config reload without a restart: a changed file (watched), SIGHUP and
//! `POST /admin/reload` swap the config in while requests run; an invalid
//! file changes nothing and is counted; what was spent carries over.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::{FAST_SIM_FIELDS, GatewayBuilder, Proc, chat, metric, post_with};

fn split_gateway(local: u32, cloud: u32) -> GatewayBuilder {
    GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .in_process_sim(
            "cloud",
            "cloud",
            &format!("preset: large, {FAST_SIM_FIELDS}"),
        )
        .split("auto", &[("local", local), ("cloud", cloud)])
}

const APPLIED: &str = "switchyard_config_reloads_total{outcome=\"applied\"}";
const FAILED: &str = "switchyard_config_reloads_total{outcome=\"failed\"}";

/// Requests `auto` from `clients` loops until `stop`; returns, per request,
/// whether it started after `reloaded` was set, its status and backend.
async fn load(
    gateway: &Proc,
    clients: usize,
    stop: Arc<AtomicBool>,
    reloaded: Arc<AtomicBool>,
) -> Vec<(bool, u16, String)> {
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (url, stop, reloaded) = (
            gateway.url("/v1/chat/completions"),
            stop.clone(),
            reloaded.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let after = reloaded.load(Ordering::Acquire);
                let reply = post_with(&url, &chat("auto", "hi"), &[]).await;
                let backend = reply
                    .header("x-switchyard-backend")
                    .unwrap_or("-")
                    .to_owned();
                seen.push((after, reply.status.as_u16(), backend));
            }
            seen
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("client task"));
    }
    all
}

fn local_share(seen: &[(bool, u16, String)], after: bool) -> (f64, usize) {
    let phase: Vec<_> = seen.iter().filter(|(a, _, _)| *a == after).collect();
    let local = phase.iter().filter(|(_, _, b)| b == "local").count();
    (local as f64 / phase.len().max(1) as f64, phase.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_split_changed_in_the_file_applies_under_load_and_no_request_fails() {
    let gateway = split_gateway(80, 20).start();
    let (stop, reloaded) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    // The load runs while the file changes under it.
    let load = load(&gateway, 8, stop.clone(), reloaded.clone());
    let change = async {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let yaml = std::fs::read_to_string(gateway.config_path()).expect("config");
        let yaml = yaml.replace("local: 80, cloud: 20", "local: 50, cloud: 50");
        std::fs::write(gateway.config_path(), yaml).expect("rewrite config");
        assert!(
            support::eventually(async || metric(&gateway, APPLIED).await == 1.0).await,
            "the file watch reloaded the config"
        );
        reloaded.store(true, Ordering::Release);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        stop.store(true, Ordering::Release);
    };
    let (running, ()) = tokio::join!(load, change);
    let failed: Vec<_> = running
        .iter()
        .filter(|(_, status, _)| *status != 200)
        .collect();
    assert!(
        failed.is_empty(),
        "requests failed across the reload: {failed:?}"
    );
    let (before, n_before) = local_share(&running, false);
    let (after, n_after) = local_share(&running, true);
    assert!(
        n_before >= 100 && n_after >= 100,
        "{n_before} before, {n_after} after"
    );
    // Binomial spread at these counts is a few points; 10 is far outside it.
    assert!(
        (before - 0.8).abs() < 0.1,
        "before the reload {before:.2} went local"
    );
    assert!(
        (after - 0.5).abs() < 0.1,
        "after the reload {after:.2} went local"
    );
    assert_eq!(metric(&gateway, FAILED).await, 0.0);
}

fn keys() -> String {
    format!(
        "auth:\n  admin_key_hash: '{}'\n  keys:\n    - {{name: capped, hash: '{}', budget: {{daily_usd: 0.0005}}}}\n    - {{name: paced, hash: '{}', requests_per_minute: 2}}\n",
        support::key_hash("sk-admin"),
        support::key_hash("sk-capped"),
        support::key_hash("sk-paced"),
    )
}

fn hang_up(gateway: &Proc) {
    let status = std::process::Command::new("kill")
        .args(["-HUP", &gateway.pid().to_string()])
        .status()
        .expect("kill -HUP");
    assert!(status.success());
}

async fn ask(gateway: &Proc, key: &str, model: &str) -> u16 {
    let body = serde_json::json!({
        "model": model, "max_tokens": 20,
        "messages": [{"role": "user", "content": "hi"}],
    });
    let auth = format!("Bearer {key}");
    let reply = post_with(
        &gateway.url("/v1/chat/completions"),
        &body,
        &[("authorization", &auth)],
    )
    .await;
    reply.status.as_u16()
}

#[tokio::test]
async fn spend_and_rate_limits_carry_over_a_sighup_reload() {
    let gateway = split_gateway(80, 20)
        .server("watch_config: false")
        .section(&keys())
        // Rows reach the ledger a minute later: within the test, the
        // budget cannot learn its spend from the ledger again, only carry it.
        .section("ledger: {flush_ms: 60000}")
        .start();
    // The budget ($0.0005) holds one worst case of this request ($0.00038)
    // but not a second once one (about $0.0002) is spent; the rate limit
    // allows two a minute.
    assert_eq!(ask(&gateway, "sk-capped", "cloud").await, 200);
    assert_eq!(ask(&gateway, "sk-paced", "local").await, 200);
    assert_eq!(ask(&gateway, "sk-paced", "local").await, 200);
    let yaml = std::fs::read_to_string(gateway.config_path()).expect("config");
    std::fs::write(
        gateway.config_path(),
        yaml.replace("local: 80, cloud: 20", "local: 50, cloud: 50"),
    )
    .expect("rewrite config");
    hang_up(&gateway);
    assert!(
        support::eventually(async || metric(&gateway, APPLIED).await == 1.0).await,
        "SIGHUP reloaded the config"
    );
    assert_eq!(
        ask(&gateway, "sk-capped", "cloud").await,
        429,
        "the budget's spend carried over"
    );
    assert_eq!(
        ask(&gateway, "sk-paced", "local").await,
        429,
        "the key's minute carried over"
    );
}

#[tokio::test]
async fn an_invalid_file_changes_nothing_and_says_where_it_is_wrong() {
    let log = support::unique_path("reload.log");
    let gateway = split_gateway(1, 0)
        .server("watch_config: false")
        .section(&keys())
        .start_logging("info", Some(&log));
    let admin = [("authorization", "Bearer sk-admin")];
    let reload = async |headers: &[(&str, &str)]| {
        post_with(
            &gateway.url("/admin/reload"),
            &serde_json::json!({}),
            headers,
        )
        .await
    };
    let good = std::fs::read_to_string(gateway.config_path()).expect("config");
    let bad = good.replace("jitter: 0", "jitter: lots");
    assert_ne!(good, bad);
    std::fs::write(gateway.config_path(), &bad).expect("rewrite config");
    hang_up(&gateway);
    assert!(
        support::eventually(async || metric(&gateway, FAILED).await == 1.0).await,
        "the failed reload is counted"
    );
    let logged = std::fs::read_to_string(&log).expect("log");
    let line = bad
        .lines()
        .position(|l| l.contains("jitter: lots"))
        .expect("bad line")
        + 1;
    assert!(
        logged.contains(&format!(":{line}: `backends.local.sim.jitter`")),
        "the log names the field and its line {line}:\n{logged}"
    );
    // Still serving the running config.
    assert_eq!(ask(&gateway, "sk-paced", "auto").await, 200);
    // The admin API says the same, in the OpenAI error shape.
    let refused = reload(&admin).await;
    assert_eq!(refused.status, 422);
    assert_eq!(refused.error()["code"], "invalid_config");
    assert!(
        refused.error()["message"]
            .as_str()
            .unwrap_or("")
            .contains("backends.local.sim.jitter")
    );
    assert_eq!(metric(&gateway, FAILED).await, 2.0);
    // Only for the admin key.
    // Fixed, and with a setting only a restart applies.
    let fixed = good.replace(
        "watch_config: false",
        "watch_config: false\n  max_connections: 500",
    );
    assert_ne!(fixed, good);
    std::fs::write(gateway.config_path(), fixed).expect("fix");
    assert_eq!(
        reload(&[("authorization", "Bearer sk-paced")]).await.status,
        401
    );
    assert_eq!(reload(&[]).await.status, 401);
    let applied = reload(&admin).await;
    assert_eq!(applied.status, 200, "{:?}", applied.body);
    let answer = applied.json();
    assert_eq!(answer["changed"], true, "{answer}");
    assert_eq!(
        answer["restart_needed"],
        serde_json::json!(["server.max_connections"])
    );
    assert_eq!(metric(&gateway, APPLIED).await, 1.0);
    let _ = std::fs::remove_file(&log);
}

/// A route's response cache outlives a reload that renumbers the backends
/// (a new one sorts first): a hit is still the backend that gave it.
#[tokio::test]
async fn a_response_cache_kept_by_a_reload_names_its_backends_right() {
    let gateway = GatewayBuilder::new()
        .server("watch_config: false")
        .in_process_sim(
            "mlocal",
            "small",
            &format!("preset: small, {FAST_SIM_FIELDS}"),
        )
        .route(
            "cached",
            "strategy: {split: {weights: {mlocal: 1}}}\nresponse_cache: {ttl_s: 60}",
        )
        .start();
    let ask = async || {
        let body = serde_json::json!({
            "model": "cached", "temperature": 0, "max_tokens": 16,
            "messages": [{"role": "user", "content": "Name three rivers."}],
        });
        let reply = post_with(&gateway.url("/v1/chat/completions"), &body, &[]).await;
        assert_eq!(reply.status, 200, "{:?}", reply.body);
        (
            reply.header("x-switchyard-cache").unwrap_or("-").to_owned(),
            reply
                .header("x-switchyard-backend")
                .unwrap_or("-")
                .to_owned(),
        )
    };
    assert_eq!(ask().await.0, "miss");
    let yaml = std::fs::read_to_string(gateway.config_path()).expect("config");
    let renumbered = yaml.replace(
        "backends:\n",
        &format!(
            "backends:\n  afirst:\n    tier: small\n    sim: {{preset: small, {FAST_SIM_FIELDS}}}\n"
        ),
    );
    std::fs::write(gateway.config_path(), &renumbered).expect("rewrite config");
    hang_up(&gateway);
    assert!(support::eventually(async || metric(&gateway, APPLIED).await == 1.0).await);
    assert_eq!(ask().await, ("hit".to_owned(), "mlocal".to_owned()));
}

/// A reload never opens access by accident: a file that loses its `auth`
/// section (a half-written file, a templating slip) is refused until it says
/// `auth: {disabled: true}`; one that drops a key's budget waits for an
/// explicit `POST /admin/reload?widen=true`.
#[tokio::test]
async fn a_reload_that_widens_access_is_held_back_until_it_is_meant() {
    let gateway = split_gateway(80, 20).section(&keys()).start();
    let yaml = std::fs::read_to_string(gateway.config_path()).expect("config");
    let anonymous = async || ask(&gateway, "", "local").await;
    assert_eq!(anonymous().await, 401);

    // The auth section gone: the watcher refuses it, keys still count.
    std::fs::write(gateway.config_path(), yaml.replace(&keys(), "")).expect("rewrite");
    assert!(
        support::eventually(async || metric(&gateway, FAILED).await == 1.0).await,
        "the widening reload was refused"
    );
    assert_eq!(anonymous().await, 401, "authentication stays on");
    let admin = [("authorization", "Bearer sk-admin")];
    let forced = post_with(
        &gateway.url("/admin/reload?widen=true"),
        &serde_json::json!({}),
        &admin,
    )
    .await;
    assert_eq!(
        forced.status, 422,
        "not even an explicit reload drops every key"
    );
    assert!(String::from_utf8_lossy(&forced.body).contains("disabled: true"));

    // A key's budget dropped: held back from the watcher, applied on request.
    let uncapped = yaml.replace(", budget: {daily_usd: 0.0005}", "");
    std::fs::write(gateway.config_path(), &uncapped).expect("rewrite");
    assert!(support::eventually(async || metric(&gateway, FAILED).await == 2.0).await);
    let plain = post_with(
        &gateway.url("/admin/reload"),
        &serde_json::json!({}),
        &admin,
    )
    .await;
    assert_eq!(plain.status, 422);
    assert!(String::from_utf8_lossy(&plain.body).contains("key `capped` loses its budget"));
    let meant = post_with(
        &gateway.url("/admin/reload?widen=true"),
        &serde_json::json!({}),
        &admin,
    )
    .await;
    assert_eq!(
        meant.status,
        200,
        "{}",
        String::from_utf8_lossy(&meant.body)
    );

    // Authentication off, said outright: applied.
    std::fs::write(
        gateway.config_path(),
        yaml.replace(&keys(), "auth: {disabled: true}\n"),
    )
    .expect("rewrite");
    assert!(
        support::eventually(async || anonymous().await == 200).await,
        "auth: {{disabled: true}} turned authentication off"
    );
}
