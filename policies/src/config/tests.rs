use std::time::Duration;

use super::*;

const GOOD: &str = "
server:
  listen: 127.0.0.1:9000
backends:
  small:
    tier: small
    sim: {preset: small, decode_tokens_per_s: 50}
  cloud:
    tier: cloud
    model: gpt-4o-mini
    openai:
      base_url: https://api.openai.com/v1/
      api_key: env:OPENAI_API_KEY
    timeouts: {first_byte_ms: 500}
routes:
  auto:
    strategy:
      split:
        weights: {small: 80, cloud: 20}
";

pub(super) fn error_of(text: &str) -> ConfigError {
    Config::from_yaml(text, "test.yaml").unwrap_err()
}

#[test]
fn a_good_config_validates() {
    let config = Config::from_yaml(GOOD, "test.yaml").unwrap();
    assert_eq!(config.server.listen.port(), 9000);
    let cloud = &config.backends["cloud"];
    assert_eq!(cloud.upstream_model, "gpt-4o-mini");
    assert_eq!(cloud.timeouts.first_byte, Duration::from_millis(500));
    match &cloud.adapter {
        BackendAdapter::OpenAi(o) => {
            assert_eq!(o.base_url, "https://api.openai.com/v1");
            assert_eq!(o.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        }
        other => panic!("unexpected {other:?}"),
    }
    match &config.backends["small"].adapter {
        BackendAdapter::Sim(p) => {
            assert_eq!(p.decode_tokens_per_s, 50.0);
            assert_eq!(p.context_window, SimPreset::Small.params().context_window);
        }
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(config.model_names(), ["auto", "cloud", "small"]);
}

#[test]
fn unknown_fields_are_named_with_their_line() {
    let err = error_of(&GOOD.replace("tier: cloud", "tier: cloud\n    tmeouts: {}"));
    assert_eq!(err.path, "backends.cloud.tmeouts");
    assert_eq!(err.line, Some(10));
    assert!(err.message.contains("unknown field `tmeouts`"), "{err}");
}

#[test]
fn routes_must_name_known_backends_with_usable_weights() {
    let err = error_of(&GOOD.replace("cloud: 20}", "clod: 20}"));
    assert_eq!(err.path, "routes.auto.strategy.split.weights.clod");
    assert!(err.message.contains("known: cloud, small"), "{err}");
    assert_eq!(err.line, Some(19));

    let err = error_of(&GOOD.replace("{small: 80, cloud: 20}", "{small: 0, cloud: 0}"));
    assert!(err.message.contains("sum to more than 0"), "{err}");
    let err = error_of(&GOOD.replace("{small: 80, cloud: 20}", "{small: -1, cloud: 2}"));
    assert_eq!(err.path, "routes.auto.strategy.split.weights.small");
    let err = error_of(&GOOD.replace("{small: 80, cloud: 20}", "{}"));
    assert!(err.message.contains("at least one"), "{err}");
}

#[test]
fn backend_shapes_are_checked() {
    let err = error_of(&GOOD.replace("api_key: env:OPENAI_API_KEY", "api_key: sk-live-123"));
    assert_eq!(err.path, "backends.cloud.openai.api_key");
    assert!(
        !err.to_string().contains("sk-live-123"),
        "a pasted key is never echoed"
    );
    let err = error_of(&GOOD.replace("https://api.openai.com/v1/", "api.openai.com"));
    assert_eq!(err.path, "backends.cloud.openai.base_url");
    let err = error_of(&GOOD.replace("    sim: {preset: small, decode_tokens_per_s: 50}\n", ""));
    assert!(err.message.contains("set one of"), "{err}");
    let err = error_of(&GOOD.replace("decode_tokens_per_s: 50", "jitter: 1.5"));
    assert_eq!(err.path, "backends.small.sim.jitter");
    let err = error_of(&GOOD.replace("tier: small", "tier: tiny"));
    assert_eq!(err.path, "backends.small.tier");
    let err = error_of("backends: {}\n");
    assert_eq!(err.path, "backends");
}

#[test]
fn a_route_cannot_share_a_backend_name() {
    let text = GOOD.replace("  auto:\n", "  small:\n");
    let err = error_of(&text);
    assert_eq!(err.path, "routes.small");
}

#[test]
fn syntax_errors_have_a_line() {
    let err = error_of("backends:\n  small: [unclosed\n");
    assert!(err.line.is_some(), "{err}");
}

#[test]
fn sim_overrides_validate() {
    let params = sim_params_from_yaml(
        "preset: mid\nfaults: {stall_rate: 0.05, stall_ms: 2000}\n",
        "--set",
    )
    .unwrap();
    assert_eq!(params.faults.stall, Duration::from_millis(2000));
    assert!(params.speculative.is_some());
    assert!(sim_params_from_yaml("max_concurrency: 0\n", "--set").is_err());
}

fn with_strategy(strategy: &str) -> String {
    GOOD.replace(
        "    strategy:\n      split:\n        weights: {small: 80, cloud: 20}\n",
        strategy,
    )
}

#[test]
fn target_share_rules_and_cascade_validate() {
    let config = Config::from_yaml(
        &with_strategy(
            "    aliases: [gpt-4o]\n    profile: code\n    fallbacks: [cloud]\n    strategy:\n      target_share: {hard: cloud, easy: small, share: 0.2}\n",
        ),
        "t",
    )
    .unwrap();
    let route = &config.routes["auto"];
    assert_eq!(route.aliases, ["gpt-4o"]);
    assert_eq!(route.profile, Some(crate::Profile::Code));
    assert_eq!(route.fallbacks, ["cloud"]);
    assert!(matches!(
        route.strategy,
        RouteStrategy::TargetShare { window: 2000, .. }
    ));
    assert_eq!(config.model_names(), ["auto", "gpt-4o", "cloud", "small"]);

    // `easy` may split the rest between backends by weight.
    let split_easy = "    strategy:\n      target_share: {hard: cloud, easy: {small: 3, cloud: 1}, share: 0.2}\n";
    let config = Config::from_yaml(&with_strategy(split_easy), "t").unwrap();
    let RouteStrategy::TargetShare { easy, .. } = &config.routes["auto"].strategy else {
        panic!("target share")
    };
    assert_eq!(
        easy,
        &[("cloud".to_owned(), 1.0), ("small".to_owned(), 3.0)]
    );

    let rules = "    strategy:\n      rules:\n        - when: {tools: true}\n          to: cloud\n        - when: {regex: '(?i)prove', min_prompt_tokens: 10}\n          to: cloud\n        - to: small\n";
    let config = Config::from_yaml(&with_strategy(rules), "t").unwrap();
    let RouteStrategy::Rules { rules } = &config.routes["auto"].strategy else {
        panic!("rules")
    };
    assert_eq!(rules.len(), 3);
    assert!(rules[1].when.regex.as_ref().unwrap().0.is_match("PROVE it"));

    let cascade = "    strategy:\n      cascade: {order: [small, cloud], escalate_on: [length, invalid_tool_json]}\n";
    let config = Config::from_yaml(&with_strategy(cascade), "t").unwrap();
    assert!(
        matches!(&config.routes["auto"].strategy, RouteStrategy::Cascade { checks, .. } if checks.len() == 2)
    );
}

#[test]
fn bad_routes_are_named() {
    let share = "    strategy:\n      target_share: {hard: cloud, easy: small, share: 20}\n";
    assert_eq!(
        error_of(&with_strategy(share)).path,
        "routes.auto.strategy.target_share.share"
    );
    let ghost = "    strategy:\n      target_share: {hard: cloud, easy: {small: 1, ghost: 1}, share: 0.2}\n";
    let err = error_of(&with_strategy(ghost));
    assert_eq!(err.path, "routes.auto.strategy.target_share.easy.ghost");
    assert!(err.message.contains("unknown backend"), "{err}");
    let nothing =
        "    strategy:\n      target_share: {hard: cloud, easy: {small: 0}, share: 0.2}\n";
    assert_eq!(
        error_of(&with_strategy(nothing)).path,
        "routes.auto.strategy.target_share.easy"
    );

    let shadowed = "    strategy:\n      rules:\n        - when: {tools: true}\n          to: cloud\n        - when: {tools: true, min_prompt_tokens: 100}\n          to: small\n        - to: small\n";
    let err = error_of(&with_strategy(shadowed));
    assert_eq!(err.path, "routes.auto.strategy.rules[1]");
    assert!(err.message.contains("rule 0"), "{err}");

    let catch_all_first = "    strategy:\n      rules:\n        - to: small\n        - when: {tools: true}\n          to: cloud\n";
    assert_eq!(
        error_of(&with_strategy(catch_all_first)).path,
        "routes.auto.strategy.rules[1]"
    );

    let no_default =
        "    strategy:\n      rules:\n        - when: {tools: true}\n          to: cloud\n";
    assert!(
        error_of(&with_strategy(no_default))
            .message
            .contains("without `when`")
    );

    let bad_regex = "    strategy:\n      rules:\n        - when: {regex: '(unclosed'}\n          to: cloud\n        - to: small\n";
    assert_eq!(
        error_of(&with_strategy(bad_regex)).path,
        "routes.auto.strategy.rules[0].when.regex"
    );

    let ghost_encoder = "    strategy:\n      rules:\n        - when: {similar_to: {examples: [hi], encoder: ghost}}\n          to: cloud\n        - to: small\n";
    let err = error_of(&with_strategy(ghost_encoder));
    assert_eq!(err.path, "routes.auto.strategy.rules[0].when.similar_to");
    assert!(err.message.contains("unknown backend `ghost`"), "{err}");

    let short_cascade = "    strategy:\n      cascade: {order: [small]}\n";
    assert_eq!(
        error_of(&with_strategy(short_cascade)).path,
        "routes.auto.strategy.cascade.order"
    );

    let clash = "    aliases: [small]\n    strategy:\n      split:\n        weights: {small: 1}\n";
    assert!(
        error_of(&with_strategy(clash))
            .message
            .contains("backend `small`")
    );

    let ghost_fallback =
        "    fallbacks: [ghost]\n    strategy:\n      split:\n        weights: {small: 1}\n";
    assert_eq!(
        error_of(&with_strategy(ghost_fallback)).path,
        "routes.auto.fallbacks.ghost"
    );

    let unknown_strategy = "    strategy:\n      fastest: {}\n";
    assert!(
        error_of(&with_strategy(unknown_strategy))
            .path
            .starts_with("routes.auto.strategy")
    );
}

const HASH: &str = "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

#[test]
fn accounting_sections_validate() {
    let text = format!(
        "{GOOD}accounting: {{reference_model: gpt-4o}}\nledger: {{path: /tmp/l.db, durability: strict, flush_ms: 50}}\nauth:\n  teams:\n    research: {{budget: {{monthly_usd: 100, scope: total}}}}\n  keys:\n    - name: alice\n      hash: {HASH}\n      team: research\n      budget: {{daily_usd: 5, on_exhausted: downgrade}}\n      requests_per_minute: 60\n"
    );
    let config = Config::from_yaml(&text, "t").unwrap();
    assert_eq!(config.ledger.durability, Durability::Strict);
    assert_eq!(config.ledger.flush, Duration::from_millis(50));
    assert_eq!(config.reference.as_ref().unwrap().price.output, 10.0);
    let alice = &config.auth.keys[0];
    assert_eq!(alice.hash[0], 0x9f);
    assert_eq!(alice.budget.unwrap().on_exhausted, OnExhausted::Downgrade);
    assert_eq!(
        config.auth.teams[0].budget.unwrap().scope,
        SpendScope::Total
    );
    assert!(matches!(
        config.backends["cloud"].pricing,
        crate::Pricing::Tokens(_)
    ));
    assert_eq!(config.backends["small"].pricing, crate::Pricing::Free);
}

#[test]
fn bad_accounting_is_named() {
    let with = |extra: &str| format!("{GOOD}{extra}");
    let err = error_of(&with(
        "auth:\n  keys:\n    - {name: a, hash: 'sha256:zz'}\n",
    ));
    assert_eq!(err.path, "auth.keys[0].hash");
    let err = error_of(&with(&format!(
        "auth:\n  keys:\n    - {{name: a, hash: '{HASH}', team: ghosts}}\n"
    )));
    assert_eq!(err.path, "auth.keys[0].team");
    let err = error_of(&with(&format!(
        "auth:\n  keys:\n    - {{name: a, hash: '{HASH}', budget: {{scope: all, daily_usd: 1}}}}\n"
    )));
    assert_eq!(err.path, "auth.keys[0].budget.scope");
    let err = error_of(&with("ledger: {durability: eventually}\n"));
    assert_eq!(err.path, "ledger.durability");
    let priced = GOOD.replace(
        "    sim: {preset: small, decode_tokens_per_s: 50}\n",
        "    sim: {preset: small}\n    price: {usd_per_hour: 1, input_per_mtok: 2}\n",
    );
    let err = error_of(&priced);
    assert_eq!(err.path, "backends.small.price");
    let negative = GOOD.replace(
        "    sim: {preset: small, decode_tokens_per_s: 50}\n",
        "    sim: {preset: small}\n    price: {input_per_mtok: -1, output_per_mtok: 2}\n",
    );
    assert_eq!(
        error_of(&negative).path,
        "backends.small.price.input_per_mtok"
    );
}

#[test]
fn a_cloud_model_without_a_price_is_served_with_a_warning() {
    let config = Config::from_yaml(
        &GOOD.replace("model: gpt-4o-mini", "model: my-own-cloud-model"),
        "t",
    )
    .unwrap();
    assert_eq!(config.backends["cloud"].pricing, crate::Pricing::Unpriced);
    let warnings = config.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("backend `cloud`") && warnings[0].contains("unpriced"));
    assert!(Config::from_yaml(GOOD, "t").unwrap().warnings().is_empty());
}

#[test]
fn backend_tls_takes_roots_a_private_ca_and_a_client_certificate_whole() {
    let with = |tls: &str| GOOD.replace("tier: cloud", &format!("tier: cloud\n    tls: {tls}"));
    let config = Config::from_yaml(
        &with("{roots: platform, ca_file: ca.pem, cert_file: me.pem, key_file: me.key}"),
        "test.yaml",
    )
    .unwrap();
    let tls = &config.backends["cloud"].tls;
    assert_eq!(tls.roots, crate::TrustRoots::Platform);
    assert_eq!(tls.ca_file.as_deref(), Some("ca.pem"));
    assert_eq!(
        tls.client_cert.as_ref().map(|c| c.key_file.as_str()),
        Some("me.key")
    );
    assert_eq!(config.backends["small"].tls, crate::BackendTls::default());
    let err = error_of(&with("{cert_file: me.pem}"));
    assert_eq!(err.path, "backends.cloud.tls");
    assert!(
        err.message.contains("cert_file and key_file come together"),
        "{err}"
    );
    let err = error_of(&with("{roots: none}"));
    assert!(err.message.contains("unknown variant `none`"), "{err}");
}

#[test]
fn server_crl_files_are_read_only_beside_a_client_ca() {
    let with = |tls: &str| {
        GOOD.replace(
            "listen: 127.0.0.1:9000",
            &format!("listen: 127.0.0.1:9000\n  tls: {tls}"),
        )
    };
    let config = Config::from_yaml(
        &with("{cert_file: c.pem, key_file: c.key, client_ca_file: ca.pem, crl_files: [a.crl, b.pem]}"),
        "test.yaml",
    )
    .unwrap();
    let tls = config.server.tls.unwrap();
    assert_eq!(tls.crl_files, ["a.crl", "b.pem"]);
    let config =
        Config::from_yaml(&with("{cert_file: c.pem, key_file: c.key}"), "test.yaml").unwrap();
    assert!(config.server.tls.unwrap().crl_files.is_empty());
    let err = error_of(&with(
        "{cert_file: c.pem, key_file: c.key, crl_files: [a.crl]}",
    ));
    assert_eq!(err.path, "server.tls.crl_files");
    assert!(err.message.contains("client_ca_file"), "{err}");
}

#[test]
fn telemetry_is_off_unless_configured_and_checked_when_it_is() {
    assert_eq!(
        Config::from_yaml(GOOD, "test.yaml").unwrap().telemetry,
        None
    );
    let on = format!(
        "{GOOD}telemetry:\n  otlp: {{endpoint: \"http://127.0.0.1:4318\", headers: {{authorization: Bearer x}}, timeout_ms: 500}}\n  sample_ratio: 0.25\n"
    );
    let telemetry = Config::from_yaml(&on, "test.yaml")
        .unwrap()
        .telemetry
        .unwrap();
    assert_eq!(telemetry.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
    assert_eq!(telemetry.headers["authorization"], "Bearer x");
    assert_eq!(telemetry.timeout, Some(Duration::from_millis(500)));
    assert_eq!(telemetry.sample_ratio, 0.25);
    assert!(!telemetry.capture_content);
    for (bad, path) in [
        ("  sample_ratio: 1.5\n", "telemetry.sample_ratio"),
        (
            "  otlp: {endpoint: \"collector:4317\"}\n",
            "telemetry.otlp.endpoint",
        ),
        (
            "  otlp: {headers: {\"bad header\": x}}\n",
            "telemetry.otlp.headers",
        ),
        ("  otlp: {timeout_ms: 0}\n", "telemetry.otlp.timeout_ms"),
        ("  queue: 0\n", "telemetry.queue"),
    ] {
        let err = error_of(&format!("{GOOD}telemetry:\n{bad}"));
        assert_eq!(err.path, path, "{err}");
    }
}

#[test]
fn shared_state_is_off_unless_configured_and_checked_when_it_is() {
    assert_eq!(
        Config::from_yaml(GOOD, "test.yaml").unwrap().state,
        crate::SharedState::default()
    );
    let on = format!(
        "{GOOD}state:\n  redis: {{url: \"env:REDIS_URL\", key_prefix: prod, on_unavailable: local, replicas: 3}}\n"
    );
    let redis = Config::from_yaml(&on, "test.yaml")
        .unwrap()
        .state
        .redis
        .unwrap();
    assert_eq!(redis.url, crate::Secretive::Env("REDIS_URL".into()));
    assert_eq!(redis.key_prefix, "prod");
    assert_eq!(redis.on_unavailable, crate::OnUnavailable::Local);
    assert_eq!(redis.replicas, 3);
    assert_eq!(redis.timeout, Duration::from_millis(250));
    assert_eq!(redis.hold_ttl, Duration::from_secs(30));
    for (bad, path) in [
        ("{url: 'http://redis:6379'}", "state.redis.url"),
        ("{url: 'env:'}", "state.redis.url"),
        ("{key_prefix: x}", "state.redis"),
        (
            "{url: 'redis://a', key_prefix: '{x}'}",
            "state.redis.key_prefix",
        ),
        (
            "{url: 'redis://a', on_unavailable: open}",
            "state.redis.on_unavailable",
        ),
        ("{url: 'redis://a', pool_size: 0}", "state.redis.pool_size"),
        (
            "{url: 'redis://a', timeout_ms: 0}",
            "state.redis.timeout_ms",
        ),
        ("{url: 'redis://a', replicas: 0}", "state.redis.replicas"),
        (
            "{url: 'redis://a', hold_ttl_ms: 500}",
            "state.redis.hold_ttl_ms",
        ),
    ] {
        let err = error_of(&format!("{GOOD}state:\n  redis: {bad}\n"));
        assert_eq!(err.path, path, "{bad}: {err}");
    }
}

#[test]
fn widenings_of_access_are_each_named() {
    let auth = |yaml: &str| {
        let text = format!("backends:\n  local: {{tier: small, sim: {{preset: small}}}}\n{yaml}");
        Config::from_yaml(&text, "test.yaml").unwrap().auth
    };
    let hash = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
    let running = auth(&format!(
        "auth:\n  admin_key_hash: '{hash}'\n  teams:\n    t: {{requests_per_minute: 10}}\n  keys:\n    - {{name: a, hash: '{hash}', team: t, budget: {{daily_usd: 1}}, may_name_backends: false}}\n"
    ));
    let words = |next: &Auth| -> Vec<String> {
        running
            .widenings(next)
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert!(words(&running).is_empty(), "the same config widens nothing");
    assert_eq!(running.widenings(&auth("")), [super::Widening::AuthRemoved]);
    assert!(words(&auth("auth: {disabled: true}\n")).is_empty(), "meant");
    let loose = auth(&format!(
        "auth:\n  keys:\n    - {{name: a, hash: '{hash}'}}\n"
    ));
    assert_eq!(
        words(&loose),
        [
            "the admin key is removed",
            "key `a` loses its budget",
            "key `a` may now name backends",
            "key `a` leaves team `t` and its limits",
            "team `t` and its limits are removed",
        ]
    );
}

#[test]
fn a_key_hash_with_a_non_ascii_character_is_an_error_not_a_panic() {
    let hash = format!("sha256:a\u{e9}{}", "a".repeat(61));
    let text = format!(
        "backends:\n  local: {{tier: small, sim: {{preset: small}}}}\nauth:\n  admin_key_hash: '{hash}'\n"
    );
    let err = error_of(&text);
    assert!(err.to_string().contains("64 hex digits"), "{err}");
}

#[test]
fn the_interactive_reserve_is_a_share_of_a_local_backends_slots_never_the_last() {
    let reserve = |limits: &str| {
        let config = Config::from_yaml(
            &GOOD.replace(
                "    sim: {preset: small, decode_tokens_per_s: 50}\n",
                &format!("    sim: {{preset: small}}\n    {limits}\n"),
            ),
            "test.yaml",
        )
        .unwrap();
        config.backends["small"].interactive_reserve
    };
    assert_eq!(reserve("max_concurrency: 4"), 1, "a quarter by default");
    assert_eq!(
        reserve("max_concurrency: 4\n    interactive_reserve: 0.5"),
        2
    );
    assert_eq!(reserve("max_concurrency: 1"), 0);
    assert_eq!(
        reserve("max_concurrency: 2\n    interactive_reserve: 1"),
        1,
        "never the last slot"
    );
    assert_eq!(
        reserve("interactive_reserve: 0.5"),
        0,
        "no limit, nothing to keep"
    );
    let err = error_of(&GOOD.replace(
        "decode_tokens_per_s: 50}",
        "decode_tokens_per_s: 50}\n    interactive_reserve: 1.5",
    ));
    assert_eq!(err.path, "backends.small.interactive_reserve");
}
