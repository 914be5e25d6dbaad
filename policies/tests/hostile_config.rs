//! The config loader fed arbitrary text, and valid configs with a field
//! changed to an arbitrary value: an error naming the problem is a fine
//! answer, a panic never is.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use proptest::prelude::*;
use switchyard_policies::Config;

const BASE: &str = "
server: {listen: 127.0.0.1:8080, max_body_bytes: 1000}
backends:
  small: {tier: small, sim: {preset: small}, context_window: 4096}
  cloud: {tier: cloud, model: gpt-4o, openai: {base_url: 'https://api.openai.com/v1'}, price: {input_per_mtok: 1, output_per_mtok: 2, service_tiers: {flex: 0.5}}}
routes:
  auto: {strategy: {split: {weights: {small: 80, cloud: 20}}}, fallbacks: [cloud]}
auth:
  keys:
    - {name: a, hash: 'sha256:0000000000000000000000000000000000000000000000000000000000000000', budget: {daily_usd: 1}}
limits: {max_n: 4}
";

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_text(text in ".{0,400}") {
        let _ = Config::from_yaml(&text, "fuzz.yaml");
    }

    /// One scalar of the valid config replaced by an arbitrary one.
    #[test]
    fn a_valid_config_with_one_value_changed(which in 0usize..40, value in prop_oneof![
        Just("-1".to_owned()), Just("0".to_owned()), Just("1e400".to_owned()), Just("''".to_owned()),
        Just("[]".to_owned()), Just("{}".to_owned()), Just("null".to_owned()), "[a-z0-9:/._-]{0,20}",
    ]) {
        let mut seen = 0;
        let changed: String = BASE
            .split_inclusive([',', '}', '\n'])
            .map(|part| match part.split_once(": ") {
                Some((name, rest)) if !rest.trim_start().starts_with('{') => {
                    seen += 1;
                    if seen == which {
                        let end = &rest[rest.trim_end_matches([',', '}', '\n']).len()..];
                        format!("{name}: {value}{end}")
                    } else {
                        part.to_owned()
                    }
                }
                _ => part.to_owned(),
            })
            .collect();
        let _ = Config::from_yaml(&changed, "fuzz.yaml").map(|c| c.warnings());
    }
}

#[test]
fn the_base_config_is_valid() {
    Config::from_yaml(BASE, "base.yaml").unwrap();
}
