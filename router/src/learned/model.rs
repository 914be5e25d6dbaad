//! A logistic regression over a [`Sample`]: its weights, its prediction,
//! one learning step, and the weights file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::features::{DENSE, FEATURE_SET, Sample};
use crate::embed::DIMENSIONS;

/// The weights file's format name.
pub const FORMAT: &str = "switchyard.predictor/1";

/// The weights of P(label | request) = σ(bias + dense·x + ngram·e).
#[derive(Debug, Clone, PartialEq)]
pub struct Weights {
    pub bias: f64,
    pub dense: [f64; DENSE.len()],
    pub ngram: Vec<f64>,
    /// What the file says of how it was made, kept as written.
    pub about: About,
}

impl Default for Weights {
    /// All zeros: p = 0.5 for every request, until it learns.
    fn default() -> Self {
        Weights {
            bias: 0.0,
            dense: [0.0; DENSE.len()],
            ngram: vec![0.0; DIMENSIONS],
            about: About::default(),
        }
    }
}

/// The logistic function, safe at the extremes.
pub fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

impl Weights {
    /// The linear score, summed in a fixed order (dense, then n-grams) so
    /// the same file and request give the same bits everywhere.
    pub fn logit(&self, sample: &Sample) -> f64 {
        let mut z = self.bias;
        for (w, x) in self.dense.iter().zip(&sample.dense) {
            z += w * x;
        }
        for (w, x) in self.ngram.iter().zip(&sample.ngram) {
            z += w * f64::from(*x);
        }
        z
    }

    pub fn predict(&self, sample: &Sample) -> f64 {
        sigmoid(self.logit(sample))
    }

    /// One stochastic gradient step of the L2-regularised log loss toward
    /// `label` (1: the small tier failed), scaled by `weight`. The bias is
    /// not regularised.
    pub fn step(&mut self, sample: &Sample, label: bool, rate: f64, l2: f64, weight: f64) {
        let error = (self.predict(sample) - if label { 1.0 } else { 0.0 }) * weight;
        self.bias -= rate * error;
        for (w, x) in self.dense.iter_mut().zip(&sample.dense) {
            *w -= rate * (error * x + l2 * *w);
        }
        for (w, x) in self.ngram.iter_mut().zip(&sample.ngram) {
            *w -= rate * (error * f64::from(*x) + l2 * *w);
        }
    }

    /// A short digest of the numbers (not of the file's text), shown with
    /// decisions so a reader knows which weights made them.
    pub fn version(&self) -> String {
        let mut bytes = Vec::with_capacity(8 * (1 + DENSE.len() + self.ngram.len()));
        for v in std::iter::once(&self.bias)
            .chain(&self.dense)
            .chain(&self.ngram)
        {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes))[..12].to_owned()
    }

    /// The weights file: JSON, numbers in their shortest form that reads
    /// back to the same bits.
    pub fn to_json(&self) -> String {
        let file = FileOut {
            format: FORMAT,
            features: FEATURE_SET,
            bias: self.bias,
            dense: DENSE.iter().copied().zip(self.dense).collect(),
            ngram: &self.ngram,
            about: &self.about,
        };
        // Serialising plain numbers and maps cannot fail.
        serde_json::to_string_pretty(&file).unwrap_or_default()
    }

    /// Reads a weights file; the error says what is wrong with it.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let file: FileIn = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if file.format != FORMAT {
            return Err(format!(
                "format is `{}`, this build reads `{FORMAT}`",
                file.format
            ));
        }
        if file.features != FEATURE_SET {
            return Err(format!(
                "trained on feature set `{}`, this build computes `{FEATURE_SET}`",
                file.features
            ));
        }
        let mut weights = Weights {
            bias: number(&file.bias, "bias")?,
            about: About {
                label: file.label,
                backend: file.backend,
                training: file.training,
                validation: file.validation,
            },
            ..Weights::default()
        };
        for (name, raw) in &file.dense {
            let at = DENSE
                .iter()
                .position(|d| d == name)
                .ok_or_else(|| format!("unknown feature `{name}`"))?;
            weights.dense[at] = number(raw, name)?;
        }
        if file.ngram.len() != DIMENSIONS {
            return Err(format!(
                "`ngram` has {} weights, not {DIMENSIONS}",
                file.ngram.len()
            ));
        }
        weights.ngram = file
            .ngram
            .iter()
            .map(|raw| number(raw, "ngram"))
            .collect::<Result<_, _>>()?;
        Ok(weights)
    }
}

/// Parses a number with the standard library, which rounds correctly, so
/// a saved weight reads back to the same bits.
fn number(raw: &RawValue, name: &str) -> Result<f64, String> {
    raw.get()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{name}` is not a finite number: {}", raw.get()))
}

#[derive(Serialize)]
struct FileOut<'a> {
    format: &'static str,
    features: &'static str,
    bias: f64,
    dense: BTreeMap<&'static str, f64>,
    ngram: &'a [f64],
    #[serde(flatten)]
    about: &'a About,
}

#[derive(Deserialize)]
struct FileIn {
    format: String,
    features: String,
    bias: Box<RawValue>,
    dense: BTreeMap<String, Box<RawValue>>,
    ngram: Vec<Box<RawValue>>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    backend: Option<String>,
    #[serde(default)]
    training: Option<serde_json::Value>,
    #[serde(default)]
    validation: Option<serde_json::Value>,
}

/// How a weights file was made: the label it predicts, the backend whose
/// answers it was trained on, and `train-router`'s figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct About {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation: Option<serde_json::Value>,
}
