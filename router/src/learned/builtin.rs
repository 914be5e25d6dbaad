//! Weights compiled into the binary, named in a config as
//! `weights: builtin:NAME`, so a route can rank by a trained predictor with
//! no file beside the config (the embedded default's `auto` does).

/// How a config names compiled-in weights.
pub const PREFIX: &str = "builtin:";

/// `quality`: P(the small tier's answer is wrong where the large tier's is
/// right), trained by `scripts/train-builtin-router.sh` on the
/// routing-quality benchmark's recorded answers (all 24 task families,
/// both seeds).
const QUALITY: &str = include_str!("weights/quality.json");

/// The names `builtin:` takes.
pub const NAMES: [&str; 1] = ["quality"];

/// The text of the compiled-in weights `name` (without the prefix).
pub fn weights(name: &str) -> Option<&'static str> {
    match name {
        "quality" => Some(QUALITY),
        _ => None,
    }
}
