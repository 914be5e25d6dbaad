use super::*;
use crate::features::{Features, RequestView};

fn sample(text: &str) -> Sample {
    let view = RequestView {
        last_user_text: text,
        prompt_tokens: (text.len() / 4) as u32,
        turns: 1,
        ..Default::default()
    };
    Sample::of(&view, &Features::of(&view, None), None)
}

/// Prompts whose wording decides the label: capitals and letters are easy,
/// multiplying large numbers and sorting are hard.
fn separable(n: usize, seed: u64) -> Vec<(Sample, bool)> {
    let easy = ["capital of", "the letter", "what colour is", "say hello to"];
    let hard = ["multiply", "sort these words", "integrate", "prove that"];
    let mut x = seed;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as usize
    };
    (0..n)
        .map(|i| {
            let label = i % 2 == 0;
            let words = if label { &hard } else { &easy };
            let text = format!(
                "Please {} item {} and {}",
                words[next() % 4],
                next() % 1000,
                ["quickly", "carefully", "now"][next() % 3]
            );
            (sample(&text), label)
        })
        .collect()
}

#[test]
fn a_separable_set_is_learnt_almost_perfectly() {
    let examples = separable(400, 1);
    let (weights, validation) = train(&examples, &TrainOptions::default());
    let right = examples
        .iter()
        .filter(|(s, y)| (weights.predict(s) >= 0.5) == *y)
        .count();
    assert!(right as f64 / examples.len() as f64 >= 0.98, "{right}/400");
    assert!(validation.auc.unwrap() > 0.98, "{validation:?}");
    // Unseen prompts of the same kinds.
    let unseen = separable(100, 99);
    let right = unseen
        .iter()
        .filter(|(s, y)| (weights.predict(s) >= 0.5) == *y)
        .count();
    assert!(right >= 95, "{right}/100");
}

#[test]
fn training_is_deterministic_for_a_seed() {
    let examples = separable(120, 3);
    let options = TrainOptions::default();
    let a = train(&examples, &options).0.to_json();
    assert_eq!(a, train(&examples, &options).0.to_json());
    let other = TrainOptions { seed: 8, ..options };
    assert_ne!(a, train(&examples, &other).0.to_json());
}

#[test]
fn weights_read_back_bit_for_bit_and_decide_the_same() {
    let mut weights = Weights::default();
    let mut x: u64 = 42;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Any finite f64, over many magnitudes.
        f64::from_bits((x >> 2) | 0x3000_0000_0000_0000) * if x & 1 == 0 { 1.0 } else { -1.0 }
    };
    weights.bias = next();
    weights.dense.iter_mut().for_each(|w| *w = next());
    weights.ngram.iter_mut().for_each(|w| *w = next());
    weights.about.label = Some("fail".into());
    let back = Weights::from_json(&weights.to_json()).unwrap();
    assert_eq!(back, weights);
    assert_eq!(back.version(), weights.version());
    let s = sample("Compute 12 * 34 and reply with the number.");
    assert_eq!(back.logit(&s).to_bits(), weights.logit(&s).to_bits());
}

#[test]
fn a_file_from_another_feature_set_or_format_is_refused() {
    let text = Weights::default().to_json();
    let other = text.replace("\"features\": \"v1\"", "\"features\": \"v0\"");
    let err = Weights::from_json(&other).unwrap_err();
    assert!(err.contains("v0") && err.contains("v1"), "{err}");
    let err = Weights::from_json(&text.replace(FORMAT, "other/1")).unwrap_err();
    assert!(err.contains("other/1"), "{err}");
    let mut short: serde_json::Value = serde_json::from_str(&text).unwrap();
    short["ngram"].as_array_mut().unwrap().pop();
    let err = Weights::from_json(&short.to_string()).unwrap_err();
    assert!(err.contains("511"), "{err}");
    let unknown = text.replace("\"score\"", "\"colour\"");
    assert!(Weights::from_json(&unknown).unwrap_err().contains("colour"));
}

#[test]
fn an_online_step_moves_the_prediction_toward_the_outcome() {
    let predictor = Predictor::new("p", 0, Weights::default(), 0.1);
    let s = sample("Convert 12 miles per hour to kilometres per hour.");
    assert_eq!(predictor.predict(&s), 0.5);
    predictor.learn(&s, true);
    let up = predictor.predict(&s);
    assert!(up > 0.5, "{up}");
    predictor.learn(&s, false);
    assert!(predictor.predict(&s) < up);
    assert!(
        predictor.version().ends_with("+2"),
        "{}",
        predictor.version()
    );
    // A rate of 0 never moves.
    let frozen = Predictor::new("f", 0, Weights::default(), 0.0);
    frozen.learn(&s, true);
    assert_eq!(frozen.predict(&s), 0.5);
}

#[test]
fn every_feature_stays_between_0_and_1() {
    for text in [
        "",
        "hi",
        "```python\ndef f(x):\n    return {x: [1, 2, 3]}\n```\nWhy? Why not?",
        &"123456789012345678 + 99 = ? ".repeat(200),
    ] {
        let s = sample(text);
        for (name, v) in DENSE.iter().zip(s.dense) {
            assert!((0.0..=1.0).contains(&v), "{name} = {v} for {text:?}");
        }
    }
}
