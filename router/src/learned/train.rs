//! Offline training: logistic regression by AdaGrad over shuffled epochs,
//! deterministic for a seed, with a held-out fifth to say how well it does.

use super::features::{DENSE, Sample};
use super::model::Weights;
use crate::embed::DIMENSIONS;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainOptions {
    pub epochs: u32,
    pub learning_rate: f64,
    pub l2: f64,
    pub seed: u64,
    /// Weigh each class by the inverse of its share, so a rare label is not
    /// learnt away.
    pub balance: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            epochs: 40,
            learning_rate: 0.2,
            l2: 1e-3,
            seed: 7,
            balance: true,
        }
    }
}

/// How a model trained on four fifths did on the fifth it did not see.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Validation {
    pub examples: usize,
    pub positives: usize,
    /// Area under the ROC curve (0.5: no better than chance); `None` when
    /// the held-out fifth has one class only.
    pub auc: Option<f64>,
    pub log_loss: f64,
    /// At p >= 0.5.
    pub accuracy: f64,
}

/// splitmix64: a small, well-known generator, so the router needs no
/// random-number crate and a seed gives the same order everywhere.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// Fits weights to `examples` (a sample and whether the small tier failed).
pub fn fit(examples: &[(Sample, bool)], options: &TrainOptions) -> Weights {
    let mut weights = Weights::default();
    let positives = examples.iter().filter(|(_, y)| *y).count();
    let negatives = examples.len() - positives;
    let class_weight = |label: bool| -> f64 {
        if !options.balance || positives == 0 || negatives == 0 {
            return 1.0;
        }
        let n = examples.len() as f64;
        let count = if label { positives } else { negatives } as f64;
        n / (2.0 * count)
    };
    // AdaGrad: each weight's step shrinks with the gradients it has seen,
    // so rare trigrams still learn while common features settle.
    let mut seen_bias = 1e-8;
    let mut seen_dense = [1e-8; DENSE.len()];
    let mut seen_ngram = vec![1e-8; DIMENSIONS];
    let mut order: Vec<usize> = (0..examples.len()).collect();
    let mut rng = SplitMix(options.seed);
    let rate = options.learning_rate;
    for _ in 0..options.epochs {
        rng.shuffle(&mut order);
        for &i in &order {
            let (sample, label) = &examples[i];
            let error =
                (weights.predict(sample) - if *label { 1.0 } else { 0.0 }) * class_weight(*label);
            seen_bias += error * error;
            weights.bias -= rate * error / f64::sqrt(seen_bias);
            for ((w, seen), x) in weights
                .dense
                .iter_mut()
                .zip(seen_dense.iter_mut())
                .zip(&sample.dense)
            {
                let g = error * x + options.l2 * *w;
                *seen += g * g;
                *w -= rate * g / seen.sqrt();
            }
            for ((w, seen), x) in weights
                .ngram
                .iter_mut()
                .zip(seen_ngram.iter_mut())
                .zip(&sample.ngram)
            {
                let g = error * f64::from(*x) + options.l2 * *w;
                *seen += g * g;
                *w -= rate * g / seen.sqrt();
            }
        }
    }
    weights
}

/// Trains on a seeded four fifths and scores the rest, then fits the
/// weights it returns on every example.
pub fn train(examples: &[(Sample, bool)], options: &TrainOptions) -> (Weights, Validation) {
    let mut order: Vec<usize> = (0..examples.len()).collect();
    SplitMix(options.seed ^ 0x5EED).shuffle(&mut order);
    let held = examples.len() / 5;
    let (held_out, kept) = order.split_at(held);
    let pick = |ids: &[usize]| -> Vec<(Sample, bool)> {
        ids.iter().map(|&i| examples[i].clone()).collect()
    };
    let partial = fit(&pick(kept), options);
    let scored: Vec<(f64, bool)> = held_out
        .iter()
        .map(|&i| (partial.predict(&examples[i].0), examples[i].1))
        .collect();
    (fit(examples, options), validate(&scored))
}

/// Figures for predictions `(p, label)`.
pub fn validate(scored: &[(f64, bool)]) -> Validation {
    let n = scored.len().max(1) as f64;
    let positives = scored.iter().filter(|(_, y)| *y).count();
    let log_loss = scored
        .iter()
        .map(|&(p, y)| {
            let p = p.clamp(1e-12, 1.0 - 1e-12);
            -(if y { p.ln() } else { (1.0 - p).ln() })
        })
        .sum::<f64>()
        / n;
    let accuracy = scored.iter().filter(|&&(p, y)| (p >= 0.5) == y).count() as f64 / n;
    Validation {
        examples: scored.len(),
        positives,
        auc: auc(scored),
        log_loss,
        accuracy,
    }
}

/// The chance that a random positive scores above a random negative (ties
/// count half).
pub fn auc(scored: &[(f64, bool)]) -> Option<f64> {
    let positives: Vec<f64> = scored.iter().filter(|s| s.1).map(|s| s.0).collect();
    let negatives: Vec<f64> = scored.iter().filter(|s| !s.1).map(|s| s.0).collect();
    if positives.is_empty() || negatives.is_empty() {
        return None;
    }
    let mut wins = 0.0;
    for p in &positives {
        for q in &negatives {
            wins += if p > q {
                1.0
            } else if p == q {
                0.5
            } else {
                0.0
            };
        }
    }
    Some(wins / (positives.len() * negatives.len()) as f64)
}
