//! The configuration reference (`docs/src/configuration/reference.md`) kept
//! complete: every field the config types accept is found by walking them,
//! and each must be listed on the page; every path the page lists must exist.
//!
//! The walk asks the parser itself. A probe document puts an unknown key at
//! a path; the strict types answer with the fields (or variants) they take
//! there, a map answers one level deeper, and a value answers with the type
//! it wanted. No list is kept by hand, so a field added to a `Raw*` type
//! fails this test until the page names it.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::raw::{RawConfig, parse_any};

const PROBE: &str = "__probe__";

/// One step of a path: a struct field or enum variant, a map key, or a
/// list item.
#[derive(Clone)]
enum Step {
    Field(String),
    Key,
    Item,
}

/// The path as the reference writes it: `backends.NAME.url`,
/// `routes.NAME.rules[].backend`.
fn written(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Key => out.push_str(if out.is_empty() { "NAME" } else { ".NAME" }),
            Step::Item => out.push_str("[]"),
        }
    }
    out
}

/// The path as the parser reports it in errors (`routes.NAME.rules[0].x`).
fn reported(path: &[Step]) -> String {
    written(path).replace("[]", "[0]")
}

/// A document with `leaf` at `path`.
fn document(path: &[Step], leaf: Value) -> Value {
    path.iter().rev().fold(leaf, |inner, step| match step {
        Step::Field(name) => json!({ name.as_str(): inner }),
        Step::Key => json!({ "NAME": inner }),
        Step::Item => json!([inner]),
    })
}

/// The names in "expected one of `a`, `b`" or "expected `a`".
fn expected_names(message: &str) -> Vec<String> {
    let Some((_, list)) = message.split_once("expected ") else {
        return Vec::new();
    };
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn probe(path: &[Step], leaf: Value) -> (String, String) {
    // YAML reads JSON: the probe needs no YAML writer.
    let text = document(path, leaf).to_string();
    match parse_any::<RawConfig>(&text, "probe") {
        Ok(_) => (String::new(), String::new()),
        Err(err) => (err.path, err.message),
    }
}

fn walk(path: Vec<Step>, found: &mut BTreeSet<String>, depth: usize) {
    assert!(
        depth < 12,
        "config types nest deeper than expected at {}",
        written(&path)
    );
    let here = reported(&path);
    let inside = if here.is_empty() {
        PROBE.to_owned()
    } else {
        format!("{here}.{PROBE}")
    };
    let (at, message) = probe(&path, json!({ PROBE: 1 }));
    let named = message.starts_with(&format!("unknown field `{PROBE}`"))
        || message.starts_with(&format!("unknown variant `{PROBE}`"));
    if named && (at == inside || at == here) {
        // A struct's fields, or an enum's variants (`{variant: ...}` or a
        // bare `variant`).
        for name in expected_names(&message) {
            let mut next = path.clone();
            next.push(Step::Field(name));
            found.insert(written(&next));
            walk(next, found, depth + 1);
        }
    } else if at == inside || at.starts_with(&format!("{inside}.")) {
        // A map with keys of the user's choosing.
        let mut next = path.clone();
        next.push(Step::Key);
        walk(next, found, depth + 1);
    } else if at == here && message.contains("expected a sequence") {
        let mut next = path.clone();
        next.push(Step::Item);
        walk(next, found, depth + 1);
    }
    // Anything else is a value: the path itself is the field.
}

/// Every field path the config types accept.
fn config_fields() -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    walk(Vec::new(), &mut found, 0);
    found
}

fn reference_page() -> String {
    let page = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/src/configuration/reference.md"
    );
    std::fs::read_to_string(page).unwrap_or_else(|err| panic!("{page}: {err}"))
}

/// The paths the page lists: the first cell of each table row, in backticks.
fn documented(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(path, _)| path.to_owned())
        .collect()
}

#[test]
fn the_walk_finds_fields_at_every_depth() {
    let fields = config_fields();
    for path in [
        "server.listen",
        "server.tls.cert_file",
        "backends.NAME.openai.base_url",
        "routes.NAME.strategy.rules[].when.predicted_fail.min",
        "routes.NAME.strategy",
        "auth.keys[].name",
        "predictors.NAME.weights",
    ] {
        assert!(fields.contains(path), "{path} not found in {fields:#?}");
    }
    assert!(fields.len() > 100, "only {} fields found", fields.len());
}

#[test]
fn the_reference_lists_every_field_and_nothing_else() {
    let fields = config_fields();
    let page = documented(&reference_page());
    let missing: Vec<_> = fields.difference(&page).collect();
    let unknown: Vec<_> = page.difference(&fields).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/src/configuration/reference.md is out of date with the config types.\n\
         Fields the page does not list: {missing:#?}\nPaths the page lists that do not exist: {unknown:#?}"
    );
}

/// Prints the fields, for writing the page: `cargo test -p switchyard-policies
/// print_config_fields -- --ignored --nocapture`.
#[test]
#[ignore = "prints the walk for whoever updates the reference"]
fn print_config_fields() {
    for path in config_fields() {
        println!("{path}");
    }
}
