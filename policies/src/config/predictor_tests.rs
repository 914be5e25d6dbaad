//! Predictors and the routes that consult them: the shapes that validate
//! and the mistakes `check` names.

use super::tests::error_of;
use super::*;

const TWO_SIMS: &str = "
backends:
  small: {tier: small, sim: {preset: small}}
  large: {tier: cloud, sim: {preset: large}}
";

#[test]
fn predictors_and_the_routes_that_use_them_validate() {
    let text = format!(
        "{TWO_SIMS}predictors:
  fails: {{backend: small, weights: w.json, learn_from: [careful]}}
routes:
  learned:
    strategy:
      learned: {{predictor: fails, easy: small, hard: large, escalate_on: [length], explore: 0.1}}
  careful:
    strategy: {{cascade: {{order: [small, large]}}}}
  share:
    strategy: {{target_share: {{hard: large, easy: small, share: 0.2, by: fails}}}}
  rules:
    strategy:
      rules:
        - when: {{predicted_fail: {{min: 0.7}}}}
          to: large
        - to: small
"
    );
    let config = Config::from_yaml(&text, "test.yaml").unwrap();
    let p = &config.predictors["fails"];
    assert_eq!(p.weights.as_deref(), Some("w.json"));
    assert_eq!(p.learning_rate, 0.05);
    match &config.routes["learned"].strategy {
        RouteStrategy::Learned {
            threshold,
            checks,
            explore,
            ..
        } => {
            assert_eq!((*threshold, *explore), (0.5, 0.1));
            assert_eq!(checks, &[CascadeCheck::Length]);
        }
        other => panic!("{other:?}"),
    }
    // The only predictor is the one an unnamed condition reads.
    match &config.routes["rules"].strategy {
        RouteStrategy::Rules { rules } => {
            assert_eq!(
                rules[0].when.predicted_fail.as_ref().unwrap().predictor,
                "fails"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn predictor_mistakes_are_named() {
    let cases = [
        (
            "routes:\n  r:\n    strategy:\n      learned: {predictor: nope, easy: small, hard: large}\n",
            "unknown predictor `nope`",
        ),
        (
            "predictors:\n  p: {backend: small}\nroutes:\n  r:\n    strategy:\n      learned: {predictor: p, easy: large, hard: small}\n",
            "`easy` must be the backend",
        ),
        (
            "predictors:\n  p: {backend: small}\nroutes:\n  r:\n    strategy:\n      learned: {predictor: p, easy: small, hard: large, threshold: 2}\n",
            "a probability from 0 to 1",
        ),
        (
            "predictors:\n  p: {backend: small, learn_from: [r]}\nroutes:\n  r:\n    strategy: {split: {weights: {small: 1}}}\n",
            "not a cascade",
        ),
        (
            "predictors:\n  p: {backend: small, learn_from: [r]}\nroutes:\n  r:\n    strategy: {cascade: {order: [large, small]}}\n",
            "does not try `small` first",
        ),
        (
            "predictors:\n  p: {backend: nope}\n",
            "unknown backend `nope`",
        ),
        (
            "predictors:\n  p: {backend: small}\nroutes:\n  r:\n    strategy:\n      learned: {predictor: p, easy: small, hard: small}\n",
            "`hard` must differ",
        ),
        (
            "predictors:\n  p: {backend: large}\nroutes:\n  r:\n    strategy: {target_share: {hard: large, easy: small, share: 0.2, by: p}}\n",
            "predicts `large`'s failures",
        ),
        (
            "predictors:\n  p: {backend: large}\nroutes:\n  r:\n    strategy: {target_share: {hard: large, easy: {small: 1}, share: 0.2, by: p}}\n",
            "not those of `easy` (`small`)",
        ),
        (
            "predictors:\n  p: {backend: small, learn_from: [r]}\nroutes:\n  r:\n    strategy:\n      learned: {predictor: p, easy: small, hard: large}\n",
            "checks no answer",
        ),
        (
            "predictors:\n  p: {backend: small}\nroutes:\n  r:\n    strategy:\n      rules:\n        - when: {predicted_fail: {min: 0.8, max: 0.2}}\n          to: large\n        - to: small\n",
            "min is above max",
        ),
        (
            "routes:\n  r:\n    strategy:\n      rules:\n        - when: {predicted_fail: {min: 0.5}}\n          to: large\n        - to: small\n",
            "name the `predictor`",
        ),
    ];
    for (tail, message) in cases {
        let err = error_of(&format!("{TWO_SIMS}{tail}"));
        assert!(err.message.contains(message), "{tail}: {err}");
    }
}
