//! The learned router's inputs (feature set "v1"): the router's own
//! features, a few measures of the text's shape, and the n-gram embedding of
//! the last user message. Every value lies in [0, 1] by construction, so a
//! weights file needs no scaler and carries over between deployments.

use switchyard_policies::Profile;

use crate::embed::{DIMENSIONS, embed};
use crate::features::{Features, RequestView};

/// The name weights files give this feature set; a file trained on another
/// is refused.
pub const FEATURE_SET: &str = "v1";

/// The dense features' names, in the order of [`Sample::dense`].
pub const DENSE: [&str; 26] = [
    "score",
    "length",
    "code",
    "math",
    "reasoning",
    "tools",
    "depth",
    "output",
    "tool_results",
    "images",
    "long_context",
    "profile_chat",
    "profile_code",
    "profile_agentic",
    "profile_rag",
    "profile_unattended",
    "profile_batch",
    "digit_share",
    "numbers",
    "longest_number",
    "operators",
    "lines",
    "words",
    "code_fence",
    "brackets",
    "questions",
];

/// Slots of the n-gram embedding in a sample.
pub const NGRAM_SLOTS: usize = DIMENSIONS;

/// One request as the learned router sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub dense: [f64; DENSE.len()],
    /// `embed` of the last user message (unit length, or all zeros).
    pub ngram: Vec<f32>,
}

impl Sample {
    /// The sample of a request; `embedding` is the last user message's
    /// n-gram embedding when the route computed it already.
    pub fn of(view: &RequestView<'_>, features: &Features, embedding: Option<&[f32]>) -> Self {
        let ngram = match embedding {
            Some(e) if e.len() == DIMENSIONS => e.to_vec(),
            _ => embed(view.last_user_text),
        };
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let profile = |p: Profile| flag(features.profile == Some(p));
        let text = TextShape::of(view.last_user_text);
        let dense = [
            features.score,
            (f64::from(features.prompt_tokens).ln_1p() / 32_768f64.ln_1p()).min(1.0),
            features.signals.code,
            features.signals.math,
            features.signals.reasoning,
            flag(features.tools > 0),
            f64::from(features.turns.min(20)) / 20.0,
            features
                .max_tokens
                .map_or(0.0, |m| (f64::from(m) / 4096.0).min(1.0)),
            flag(features.tool_results),
            flag(features.images),
            flag(features.long_context),
            profile(Profile::Chat),
            profile(Profile::Code),
            profile(Profile::Agentic),
            profile(Profile::Rag),
            profile(Profile::Unattended),
            profile(Profile::Batch),
            text.digit_share,
            saturate(text.numbers, 4.0),
            (f64::from(text.longest_number) / 12.0).min(1.0),
            saturate(text.operators, 4.0),
            saturate(text.lines, 8.0),
            (f64::from(text.words).ln_1p() / 1024f64.ln_1p()).min(1.0),
            flag(text.code_fence),
            saturate(text.brackets, 8.0),
            saturate(text.questions, 2.0),
        ];
        Sample { dense, ngram }
    }
}

/// 1 - e^(-count/scale): 0 for none, near 1 for many.
fn saturate(count: u32, scale: f64) -> f64 {
    1.0 - (-f64::from(count) / scale).exp()
}

/// Counts taken in one pass over the text.
#[derive(Debug, Default)]
struct TextShape {
    digit_share: f64,
    numbers: u32,
    /// Digits in the longest run of digits.
    longest_number: u32,
    operators: u32,
    lines: u32,
    words: u32,
    code_fence: bool,
    brackets: u32,
    questions: u32,
}

impl TextShape {
    fn of(text: &str) -> Self {
        let mut shape = TextShape {
            code_fence: text.contains("```"),
            ..TextShape::default()
        };
        let (mut chars, mut digits, mut run) = (0u32, 0u32, 0u32);
        let mut in_word = false;
        for c in text.chars() {
            chars += 1;
            if c.is_ascii_digit() {
                digits += 1;
                if run == 0 {
                    shape.numbers += 1;
                }
                run += 1;
                shape.longest_number = shape.longest_number.max(run);
            } else {
                run = 0;
            }
            match c {
                '+' | '-' | '*' | '/' | '=' | '^' | '%' | '<' | '>' => shape.operators += 1,
                '\n' => shape.lines += 1,
                '(' | ')' | '[' | ']' | '{' | '}' => shape.brackets += 1,
                '?' => shape.questions += 1,
                _ => {}
            }
            let alnum = c.is_alphanumeric();
            if alnum && !in_word {
                shape.words += 1;
            }
            in_word = alnum;
        }
        if chars > 0 {
            shape.digit_share = f64::from(digits) / f64::from(chars);
        }
        shape
    }
}
