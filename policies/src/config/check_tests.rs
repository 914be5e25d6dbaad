//! What `check` says about a bad file: one field-path style, the
//! offending line, types in words; and the health checks' settings.

use crate::Config;

/// Every error names its field one way (`auth.keys[0].budget`), points at
/// the offending line itself, and says types in words.
#[test]
fn errors_name_fields_one_way_at_their_own_line_in_plain_words() {
    let keys = |budget: &str| {
        format!(
            "backends:\n  small:\n    tier: small\n    sim:\n      preset: small\nauth:\n  keys:\n    - name: a\n      hash: \"sha256:{}\"\n      budget:\n        daily_usd: {budget}\n",
            "1".repeat(64)
        )
    };
    // A validation error and a parse error: the same path style, the same line.
    let checked = Config::from_yaml(&keys("-1"), "t").unwrap_err();
    let parsed = Config::from_yaml(&keys("x"), "t").unwrap_err();
    assert_eq!(checked.path, "auth.keys[0].budget.daily_usd");
    assert_eq!(parsed.path, "auth.keys[0].budget.daily_usd");
    assert_eq!((checked.line, parsed.line), (Some(11), Some(11)));
    assert!(
        parsed.message.ends_with("expected a number"),
        "{}",
        parsed.message
    );
    let err = Config::from_yaml(
        "server:\n  max_body_bytes: -5\nbackends:\n  small: {tier: small, sim: {preset: small}}\n",
        "t",
    )
    .unwrap_err();
    assert!(
        err.message.ends_with("expected a whole number, 0 or more"),
        "{}",
        err.message
    );
    let err = Config::from_yaml(
        "backends:\n  small:\n    tier: small\n    sim:\n      preset: huge\n",
        "t",
    )
    .unwrap_err();
    assert_eq!(
        (err.path.as_str(), err.line),
        ("backends.small.sim.preset", Some(5))
    );
}

#[test]
fn health_checks_are_checked() {
    let yaml = |check: &str| {
        format!(
            "backends:\n  local:\n    tier: small\n    openai: {{base_url: 'http://127.0.0.1:9/v1'}}\n    health_check: {check}\n"
        )
    };
    let config = Config::from_yaml(&yaml("{interval_ms: 500}"), "t").unwrap();
    let check = config.backends["local"].health_check.clone().unwrap();
    assert_eq!(
        (check.interval.as_millis(), check.timeout.as_millis()),
        (500, 500)
    );
    assert_eq!(
        (check.unhealthy_after, check.healthy_after, check.url),
        (2, 2, None)
    );
    for (check, field) in [
        ("{interval_ms: 50}", "interval_ms"),
        ("{unhealthy_after: 0}", "unhealthy_after"),
        ("{url: 'ftp://x'}", "url"),
        ("{every: 5}", "every"),
    ] {
        let err = Config::from_yaml(&yaml(check), "t")
            .unwrap_err()
            .to_string();
        assert!(err.contains(field), "{check}: {err}");
    }
}

#[test]
fn a_route_may_end_in_a_wildcard_and_nowhere_else() {
    let yaml = |route: &str| {
        format!(
            "backends:\n  small: {{tier: small, sim: {{preset: small}}}}\nroutes:\n  \"{route}\":\n    strategy: {{split: {{weights: {{small: 1}}}}}}\n"
        )
    };
    assert!(Config::from_yaml(&yaml("openai/*"), "t").is_ok());
    for bad in ["*", "open*ai", "openai/*/x", "openai*"] {
        let err = Config::from_yaml(&yaml(bad), "t").unwrap_err();
        assert!(err.path.starts_with("routes"), "{bad}: {err}");
    }
}
