//! The fuzz targets on every CI run: each replays its hand-written seeds
//! (`fuzz/seeds/`), the corpus `scripts/fuzz.sh` found with cargo fuzz
//! (`fuzz/corpus/TARGET.hex.gz`) and every input that once crashed it
//! (`fuzz/regressions/`); then a few thousand mutations of those, a brief
//! stable-toolchain stand-in for the coverage-guided runs. None may panic.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

#[path = "../../fuzz/src/targets.rs"]
mod targets;

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const MUTATIONS_PER_TARGET: usize = 2_000;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Every committed input of `target`: seeds, packed corpus, regressions.
fn inputs(target: &str) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for dir in ["seeds", "regressions"] {
        if let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join(target)) {
            for entry in entries {
                all.push(std::fs::read(entry.unwrap().path()).unwrap());
            }
        }
    }
    // Every target has a corpus once scripts/fuzz.sh has run it: a missing
    // one is a packing mistake, not an empty corpus.
    let packed = fuzz_dir().join("corpus").join(format!("{target}.hex.gz"));
    let packed =
        std::fs::File::open(&packed).unwrap_or_else(|e| panic!("{}: {e}", packed.display()));
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(packed), &mut text)
        .unwrap_or_else(|e| panic!("{target}.hex.gz: {e}"));
    all.extend(
        text.lines()
            .map(|line| hex(line).unwrap_or_else(|| panic!("{target}.hex.gz: not hex: {line}"))),
    );
    all
}

fn hex(line: &str) -> Option<Vec<u8>> {
    (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(line.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `input` changed the ways fuzzers change inputs: a byte flipped, a run
/// cut out or repeated, a piece of another input spliced in.
fn mutate(rng: &mut StdRng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=out.len());
        match rng.random_range(0..4) {
            0 if at < out.len() => out[at] ^= 1 << rng.random_range(0..8),
            1 => {
                let end = rng.random_range(at..=out.len());
                out.drain(at..end);
            }
            2 => {
                let end = rng.random_range(at..=out.len()).min(at + 64);
                let run = out[at..end].to_vec();
                out.splice(at..at, run);
            }
            _ => {
                let from = rng.random_range(0..=other.len());
                let end = rng.random_range(from..=other.len()).min(from + 64);
                out.splice(at..at, other[from..end].iter().copied());
            }
        }
    }
    out
}

#[test]
fn every_fuzz_target_survives_its_corpus_and_mutations_of_it() {
    for (target, run) in targets::TARGETS {
        let inputs = inputs(target);
        assert!(!inputs.is_empty(), "{target} has no seeds");
        for input in &inputs {
            run(input);
        }
        let mut rng = StdRng::seed_from_u64(0x5eed);
        for _ in 0..MUTATIONS_PER_TARGET {
            let input = &inputs[rng.random_range(0..inputs.len())];
            let other = &inputs[rng.random_range(0..inputs.len())];
            run(&mutate(&mut rng, input, other));
        }
    }
}
