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
