//! The detectors measured on the labelled corpus the project generates
//! (`scripts/sensitive-corpus.sh`: Faker in 14 locales, values written as
//! people write them, look-alikes, and a thousand hard negatives): the
//! precision and recall of each kind, which the docs page shows. The table
//! the docs include (`tests/data/sensitive-figures.md`) must be the one
//! measured here; `SWITCHYARD_BLESS=1` rewrites it after a detector
//! changes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use std::collections::BTreeMap;

use serde::Deserialize;
use switchyard_router::sensitive::{Finding, Kind, scan};

#[derive(Deserialize)]
struct Line {
    text: String,
    spans: Vec<Span>,
}

#[derive(Deserialize)]
struct Span {
    kind: String,
    start: usize,
    end: usize,
}

#[derive(Default)]
struct Tally {
    labelled: usize,
    found: usize,
    findings: usize,
    right: usize,
}

/// A finding and a labelled value agree: the same kind, overlapping.
fn agree(finding: &Finding, span: &Span) -> bool {
    finding.kind.as_str() == span.kind && finding.start < span.end && span.start < finding.end
}

/// The corpus's lines, each with what the detectors find in it.
fn scanned() -> impl Iterator<Item = (Line, Vec<Finding>)> {
    include_str!("data/sensitive-corpus.jsonl")
        .lines()
        .map(|line| {
            let line: Line = serde_json::from_str(line).unwrap();
            let findings = scan(&line.text);
            (line, findings)
        })
}

fn measure() -> (BTreeMap<&'static str, Tally>, usize, usize) {
    let mut tallies: BTreeMap<&'static str, Tally> = Kind::ALL
        .iter()
        .map(|k| (k.as_str(), Tally::default()))
        .collect();
    let (mut negatives, mut flagged_negatives) = (0, 0);
    for (line, findings) in scanned() {
        if line.spans.is_empty() {
            negatives += 1;
            flagged_negatives += usize::from(!findings.is_empty());
        }
        for span in &line.spans {
            let tally = tallies.get_mut(span.kind.as_str()).expect("a known kind");
            tally.labelled += 1;
            tally.found += usize::from(findings.iter().any(|f| agree(f, span)));
        }
        for finding in &findings {
            let tally = tallies.get_mut(finding.kind.as_str()).unwrap();
            tally.findings += 1;
            tally.right += usize::from(line.spans.iter().any(|s| agree(finding, s)));
        }
    }
    (tallies, negatives, flagged_negatives)
}

fn table() -> String {
    let (tallies, negatives, flagged) = measure();
    let ratio = |a: usize, b: usize| {
        if b == 0 {
            "-".to_owned()
        } else {
            format!("{:.2}", a as f64 / b as f64)
        }
    };
    let mut out = String::from(
        "| kind | values | found | recall | findings | right | precision |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut all = Tally::default();
    for (kind, t) in &tallies {
        out += &format!(
            "| `{kind}` | {} | {} | {} | {} | {} | {} |\n",
            t.labelled,
            t.found,
            ratio(t.found, t.labelled),
            t.findings,
            t.right,
            ratio(t.right, t.findings)
        );
        all.labelled += t.labelled;
        all.found += t.found;
        all.findings += t.findings;
        all.right += t.right;
    }
    out += &format!(
        "| all | {} | {} | {} | {} | {} | {} |\n\nHard negatives (lines holding no value): {negatives}, of which {flagged} had a finding ({}).\n",
        all.labelled,
        all.found,
        ratio(all.found, all.labelled),
        all.findings,
        all.right,
        ratio(all.right, all.findings),
        ratio(flagged, negatives)
    );
    out
}

#[test]
fn the_docs_show_the_figures_measured_on_the_corpus() {
    let measured = table();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/sensitive-figures.md"
    );
    if std::env::var_os("SWITCHYARD_BLESS").is_some() {
        std::fs::write(path, &measured).unwrap();
    }
    let documented = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        documented, measured,
        "the docs' detector figures are not what the corpus measures; rerun with SWITCHYARD_BLESS=1 and read the change"
    );
}

#[test]
fn findings_are_mostly_right_and_most_values_are_found() {
    let (tallies, _, _) = measure();
    let sum = |f: fn(&Tally) -> usize| tallies.values().map(f).sum::<usize>() as f64;
    let precision = sum(|t| t.right) / sum(|t| t.findings);
    let recall = sum(|t| t.found) / sum(|t| t.labelled);
    assert!(precision >= 0.9, "precision {precision:.3}");
    assert!(recall >= 0.8, "recall {recall:.3}");
}

/// What a detector got wrong, to read when changing one:
/// `cargo test -p switchyard-router --test sensitive_corpus -- --ignored --nocapture`.
#[test]
#[ignore = "prints the detectors' misses and false findings"]
fn print_mistakes() {
    for (line, findings) in scanned() {
        for span in &line.spans {
            if !findings.iter().any(|f| agree(f, span)) {
                println!(
                    "missed {}: {:?}",
                    span.kind,
                    &line.text[span.start..span.end]
                );
            }
        }
        for f in &findings {
            if !line.spans.iter().any(|s| agree(f, s)) {
                println!(
                    "false {}: {:?}",
                    f.kind.as_str(),
                    &line.text[f.start..f.end]
                );
            }
        }
    }
}
