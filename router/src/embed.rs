//! A built-in text embedding for semantic routes that needs no model:
//! hashed character trigrams of each word, normalised. It captures surface
//! similarity ("write a python function" ~ "write a rust function"), which is
//! what routing by example prompts mostly needs.

/// Vector length (a power of two); enough to keep collisions rare for short
/// prompts.
pub const DIMENSIONS: usize = 512;

pub fn embed(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0_f32; DIMENSIONS];
    // Slide a window of three lower-cased characters over each word padded
    // with `<` and `>`, without allocating per word. The three characters
    // pack into one key, spread over the slots by Fibonacci hashing.
    let mut key: u64 = 0;
    let mut filled = 0;
    let mut push = |c: char, key: &mut u64, filled: &mut usize| {
        *key = ((*key << 21) | u64::from(c)) & ((1 << 63) - 1);
        *filled += 1;
        if *filled >= 3 {
            let slot =
                key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - DIMENSIONS.trailing_zeros());
            vector[slot as usize] += 1.0;
        }
    };
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() {
            if filled == 0 {
                push('<', &mut key, &mut filled);
            }
            push(c.to_ascii_lowercase(), &mut key, &mut filled);
        } else if c.is_alphanumeric() {
            if filled == 0 {
                push('<', &mut key, &mut filled);
            }
            for lower in c.to_lowercase() {
                push(lower, &mut key, &mut filled);
            }
        } else if filled > 0 {
            push('>', &mut key, &mut filled);
            filled = 0;
        }
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

/// Cosine similarity (vectors from an encoder backend need not be
/// normalised; different lengths compare as unrelated).
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return 0.0;
    }
    let (mut dot, mut aa, mut bb) = (0.0f32, 0.0f32, 0.0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        aa += x * x;
        bb += y * y;
    }
    if aa == 0.0 || bb == 0.0 {
        return 0.0;
    }
    f64::from(dot / (aa.sqrt() * bb.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_prompts_are_near() {
        let a = embed("write a python function to sort a list");
        let b = embed("Write a Rust function that sorts a list");
        let c = embed("what is the weather like in Paris");
        assert!(cosine(&a, &b) > 0.5, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c) < 0.3, "{}", cosine(&a, &c));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-5);
    }
}
