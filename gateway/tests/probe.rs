//! `switchyard probe` against simulated backends: the report, the plot, the
//! use-case table, and a hints file a config can start its latency model from.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::process::Command;

fn switchyard(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

const BACKENDS: &str = "backends:
  small:
    tier: small
    sim: {preset: small, base_ttft_ms: 5, prefill_tokens_per_s: 200000, decode_tokens_per_s: 3000, decode_halving_context: 4000, jitter: 0}
  mid:
    tier: mid
    sim: {preset: mid, base_ttft_ms: 5, prefill_tokens_per_s: 100000, decode_tokens_per_s: 2000, jitter: 0, speculative: {acceptance_rate: 0.8, draft_tokens: 4}}
  cloud:
    tier: cloud
    sim: {preset: large}
    price: {input_per_mtok: 2.5, output_per_mtok: 10}
";

#[test]
fn probe_writes_a_report_a_plot_and_hints_a_config_can_use() {
    let dir = support::unique_path("probe");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("switchyard.yaml");
    std::fs::write(&config, BACKENDS).unwrap();
    let out = dir.join("report");
    let (ok, stdout, stderr) = switchyard(&[
        "probe",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--lengths",
        "64,512,2048",
        "--output-tokens",
        "24",
    ]);
    assert!(ok, "{stderr}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert_eq!(stdout.trim_end().lines().next(), report.lines().next());
    // Cloud calls cost money: probed only when named.
    assert!(report.contains("## small") && report.contains("## mid"));
    assert!(!report.contains("## cloud"), "{report}");
    for use_case in [
        "| chat |",
        "| code |",
        "| agentic |",
        "| rag |",
        "| batch |",
    ] {
        assert_eq!(
            report.matches(use_case).count(),
            2,
            "{use_case} per backend"
        );
    }
    // The small sim's window is 8,192 tokens: 32k is past it.
    assert!(report.contains("past the context window"), "{report}");
    assert!(
        report.contains("x faster"),
        "prefix reuse measured: {report}"
    );
    // The mid sim drafts; the small one does not.
    assert!(report.contains("no drafting reported"));
    let drafted = report
        .lines()
        .filter(|l| l.starts_with("| code prompt |") && l.ends_with("% |"))
        .count();
    assert_eq!(drafted, 1, "{report}");
    let svg = std::fs::read_to_string(out.join("small.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("<polyline") && svg.contains("<circle"));

    let hints = std::fs::read_to_string(out.join("latency-hints.yaml")).unwrap();
    assert!(
        hints.contains("small:") && hints.contains("decode_tokens_per_s:"),
        "{hints}"
    );
    // A config that names the hints file starts its latency model from it.
    let with_hints = dir.join("with-hints.yaml");
    std::fs::write(
        &with_hints,
        format!("{BACKENDS}latency_hints: report/latency-hints.yaml\n"),
    )
    .unwrap();
    let (ok, stdout, stderr) = switchyard(&["check", with_hints.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("latency hint: decode"), "{stdout}");

    // Hints for a backend the config lacks are an error naming it.
    std::fs::write(out.join("latency-hints.yaml"), "ghost:\n  ttft_ms: 10\n").unwrap();
    let (ok, _, stderr) = switchyard(&["check", with_hints.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        stderr.contains("ghost") && stderr.contains("no such backend"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn probe_refuses_an_unknown_backend() {
    let (ok, _, stderr) = switchyard(&["probe", "--backend", "ghost", "--out", "/nonexistent/x"]);
    assert!(!ok);
    assert!(
        stderr.contains("no backend `ghost`") && stderr.contains("small"),
        "{stderr}"
    );
}
