//! A built-in text embedding for semantic routes that needs no model:
//! hashed character trigrams of each word, normalised. It captures surface
//! similarity ("write a python function" ~ "write a rust function"), which is
//! what routing by example prompts mostly needs.

/// Vector length; enough to keep hash collisions rare for short prompts.
pub const DIMENSIONS: usize = 512;

pub fn embed(text: &str) -> Vec<f32> {
    let mut vector = vec![0.0_f32; DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        let padded: Vec<char> = std::iter::once('<')
            .chain(word.chars())
            .chain(std::iter::once('>'))
            .collect();
        for gram in padded.windows(3) {
            let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
            for c in gram {
                hash ^= u64::from(*c);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
            vector[(hash % DIMENSIONS as u64) as usize] += 1.0;
        }
    }
    let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 0.0 {
        vector.iter_mut().for_each(|v| *v /= norm);
    }
    vector
}

/// Cosine similarity of two normalised vectors.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    f64::from(a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>())
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
