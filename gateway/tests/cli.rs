//! `switchyard check` on good and bad files, and every example config.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::process::Command;

fn check(path: &std::path::Path) -> (bool, String, String) {
    // Examples name keys (`env:OPENAI_API_KEY`) no test sets.
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--allow-missing-env"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn check_names_the_field_path_and_line() {
    let bad = support::write_temp_config(
        "backends:\n  small:\n    tier: small\n    sim: {preset: small}\nroutes:\n  auto:\n    strategy:\n      split:\n        weights:\n          small: 1\n          ghost: 2\n",
    );
    let (ok, _, stderr) = check(&bad);
    assert!(!ok);
    assert!(
        stderr.contains("routes.auto.strategy.split.weights.ghost"),
        "{stderr}"
    );
    assert!(stderr.contains(":11:"), "line 11 named: {stderr}");
    assert!(stderr.contains("unknown backend `ghost`"), "{stderr}");

    let typo = support::write_temp_config(
        "backends:\n  small:\n    tier: small\n    sim: {preset: small, jiter: 0.1}\n",
    );
    let (ok, _, stderr) = check(&typo);
    assert!(!ok);
    assert!(
        stderr.contains("backends.small.sim") && stderr.contains("jiter"),
        "{stderr}"
    );
    assert!(stderr.contains(":4:"), "{stderr}");

    for path in [bad, typo] {
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn every_example_config_is_valid() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut seen = 0;
    for entry in walk(&examples) {
        if entry.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let (ok, stdout, stderr) = check(&entry);
            assert!(ok, "{}: {stderr}", entry.display());
            assert!(stdout.contains(": ok"));
            seen += 1;
        }
    }
    assert!(
        seen > 0,
        "no example configs found under {}",
        examples.display()
    );
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn check_warns_of_a_cloud_backend_without_a_price() {
    let config = support::write_temp_config(
        "backends:\n  mine:\n    tier: cloud\n    model: my-own-model\n    openai: {base_url: 'http://127.0.0.1:9/v1'}\n",
    );
    let (ok, stdout, stderr) = check(&config);
    let _ = std::fs::remove_file(&config);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("warning: backend `mine`") && stdout.contains("unpriced"),
        "{stdout}"
    );
}

/// `key-hash` takes the key as an argument, or from standard input (no
/// argument, or `-`) so it stays out of the shell's history; the same key
/// hashes the same either way, and no key at all is an error.
#[test]
fn key_hash_reads_the_key_from_standard_input_too() {
    use std::io::Write;
    let hash = |args: &[&str], stdin: &str| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("key-hash")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).trim().to_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, given, _) = hash(&["sk-test-key"], "");
    assert!(
        ok && given.starts_with("sha256:") && given.len() == 7 + 64,
        "{given}"
    );
    assert_eq!(hash(&[], "sk-test-key\n").1, given);
    assert_eq!(hash(&["-"], "sk-test-key\r\n").1, given);
    let (ok, _, stderr) = hash(&[], "");
    assert!(!ok);
    assert!(stderr.contains("no key"), "{stderr}");
}

/// An `env:NAME` with nothing in it stops `serve`, so `check` refuses it
/// too, naming the field and the variable; `--allow-missing-env` makes it
/// a warning, and a set variable passes. `--config FILE` works as the
/// positional file does.
#[test]
fn check_refuses_an_unset_environment_variable_unless_told() {
    let config = support::write_temp_config(
        "backends:\n  cloud:\n    tier: cloud\n    model: gpt-4o-mini\n    openai: {base_url: 'https://api.openai.com/v1', api_key: 'env:SY_TEST_CHECK_KEY'}\n",
    );
    let run = |args: &[&str], key: Option<&str>| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        command.arg("check").args(args).arg(&config);
        command.env_remove("SY_TEST_CHECK_KEY");
        if let Some(key) = key {
            command.env("SY_TEST_CHECK_KEY", key);
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let (ok, text) = run(&[], None);
    assert!(!ok);
    assert!(
        text.contains("backends.cloud.openai.api_key: env:SY_TEST_CHECK_KEY is not set"),
        "{text}"
    );
    let (ok, text) = run(&["--allow-missing-env"], None);
    assert!(
        ok && text.contains("warning: backends.cloud.openai.api_key"),
        "{text}"
    );
    let (ok, text) = run(&["--config"], Some("sk-test"));
    assert!(ok && !text.contains("not set"), "{text}");
    let _ = std::fs::remove_file(config);
}

/// The older forms keep working beside the shared ones: `explain FILE` and
/// `explain --request FILE`, JSON by default and a table or CSV on asking;
/// `sim --profile` beside `sim --preset`.
#[test]
fn explain_and_sim_take_the_old_forms_and_the_shared_flags() {
    let request = support::unique_path("explain-request.json");
    std::fs::write(
        &request,
        r#"{"model": "auto", "messages": [{"role": "user", "content": "hi"}]}"#,
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let path = request.to_str().unwrap();
    let positional: serde_json::Value = serde_json::from_str(&run(&["explain", path])).unwrap();
    let flagged: serde_json::Value =
        serde_json::from_str(&run(&["explain", "--request", path])).unwrap();
    assert_eq!(positional["route"], "auto");
    assert_eq!(positional["route"], flagged["route"]);
    let table = run(&["explain", path, "--format", "table"]);
    assert!(
        table.lines().next().unwrap().starts_with("field"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("route") && l.ends_with("auto")),
        "{table}"
    );
    let csv = run(&["explain", "--request", path, "--format", "csv"]);
    assert!(csv.lines().any(|l| l == "route,auto"), "{csv}");
    let _ = std::fs::remove_file(&request);
    for flag in ["--profile", "--preset"] {
        let sim = support::Proc::spawn(
            &[
                "sim".into(),
                "--listen".into(),
                "127.0.0.1:0".into(),
                flag.into(),
                "mid".into(),
            ],
            None,
        );
        assert!(!sim.url("/").is_empty());
    }
}

/// Money budgets where a reader looks for money: `spend --budgets` shows
/// each key's and team's limit, what the ledger says was spent today and
/// this month, and what remains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_budgets_show_limits_spent_and_remaining() {
    let gateway = support::priced("")
        .section(&format!(
            "auth:\n  teams:\n    ops: {{budget: {{monthly_usd: 100, scope: total}}}}\n  keys:\n    - {{name: alice, hash: \"{}\", team: ops, budget: {{daily_usd: 5}}}}\n",
            support::key_hash("sk-alice-budgets")
        ))
        .start();
    let reply = support::post_with(
        &gateway.url("/v1/chat/completions"),
        &support::short("hello", "auto"),
        &[("authorization", "Bearer sk-alice-budgets")],
    )
    .await;
    assert_eq!(reply.status, 200);
    support::ledger_rows(&gateway, "SELECT id FROM requests", 1, |r| {
        r.get::<_, i64>(0)
    })
    .await;
    let json: serde_json::Value = serde_json::from_str(&support::report(
        Some(&gateway.dir),
        gateway.config_path(),
        &["spend", "--budgets", "--format", "json"],
    ))
    .unwrap();
    let budgets = json["budgets"].as_array().unwrap();
    let names: Vec<&str> = budgets
        .iter()
        .map(|b| b["budget"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["key:alice", "team:ops"]);
    let alice = &budgets[0];
    assert_eq!(
        (&alice["scope"], &alice["daily_usd"]),
        (&serde_json::json!("cloud"), &serde_json::json!(5.0))
    );
    let spent = alice["spent_today_usd"].as_f64().unwrap();
    assert!(spent > 0.0, "{alice}");
    let remaining = alice["remaining_usd"].as_f64().unwrap();
    assert!((remaining - (5.0 - spent)).abs() < 1e-9, "{alice}");
    assert_eq!(
        budgets[1]["spent_this_month_usd"],
        alice["spent_this_month_usd"]
    );
    let table = support::report(
        Some(&gateway.dir),
        gateway.config_path(),
        &["spend", "--budgets"],
    );
    assert!(
        table.starts_with("budget") && table.contains("key:alice"),
        "{table}"
    );
}
