//! Simulated embeddings: hashed character trigrams, normalised, so similar
//! texts get similar vectors and the same text always the same one.

use base64::Engine;
use serde_json::Value;

pub fn embed(text: &str, dimensions: usize) -> Vec<f32> {
    let mut vector = vec![0.0_f32; dimensions.max(1)];
    let chars: Vec<char> = format!("  {}  ", text.to_lowercase()).chars().collect();
    for gram in chars.windows(3) {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for c in gram {
            for b in (*c as u32).to_le_bytes() {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        let slot = (hash % vector.len() as u64) as usize;
        // The hash's top bit picks the sign, so unrelated grams cancel out.
        vector[slot] += if hash >> 63 == 0 { 1.0 } else { -1.0 };
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

/// The vector as the caller asked: a float array, or base64 of
/// little-endian f32s (what the openai SDK requests by default).
pub fn encode(vector: &[f32], base64_format: bool) -> Value {
    if base64_format {
        let bytes: Vec<u8> = vector.iter().flat_map(|v| v.to_le_bytes()).collect();
        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
    } else {
        Value::Array(vector.iter().map(|v| Value::from(f64::from(*v))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn similar_texts_are_closer() {
        let a = embed("route this to the local model", 256);
        let b = embed("route that to a local model", 256);
        let c = embed("quarterly tax filing deadline", 256);
        assert!(cosine(&a, &b) > cosine(&a, &c));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn base64_is_little_endian_f32() {
        let Value::String(text) = encode(&[1.0, -0.5], true) else {
            panic!("not a string")
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap();
        assert_eq!(
            bytes,
            [1.0_f32.to_le_bytes(), (-0.5_f32).to_le_bytes()].concat()
        );
    }
}
