//! Token counting with tiktoken's `cl100k_base`, the encoding most
//! OpenAI-compatible tooling assumes when a backend reports nothing.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

use crate::types::{ChatRequest, Message};

/// Tokens the chat template adds per message, as OpenAI documents for its
/// chat models.
const TOKENS_PER_MESSAGE: usize = 3;
/// Tokens that prime the assistant's reply.
const REPLY_PRIMER_TOKENS: usize = 3;

fn bpe() -> Option<&'static CoreBPE> {
    static BPE: OnceLock<Option<CoreBPE>> = OnceLock::new();
    // The encoding ships inside tiktoken-rs; loading can only fail if the
    // crate's embedded data is corrupt, in which case we count by bytes.
    BPE.get_or_init(|| tiktoken_rs::cl100k_base().ok()).as_ref()
}

/// Loads the encoding now rather than on the first request.
pub fn warm_up() {
    let _ = bpe();
}

/// Token ids of a text.
pub fn encode(text: &str) -> Vec<u32> {
    match bpe() {
        Some(bpe) => bpe.encode_ordinary(text),
        None => text.bytes().map(u32::from).collect(),
    }
}

/// A text cut at its token boundaries: one piece per token, each a whole
/// UTF-8 string (a character that spans tokens stays in the first piece).
pub fn pieces(text: &str) -> Vec<String> {
    let Some(bpe) = bpe() else {
        return text.chars().map(String::from).collect();
    };
    let mut out = Vec::new();
    let mut pending = Vec::new();
    for id in bpe.encode_ordinary(text) {
        pending.extend(bpe.decode_bytes(&[id]).unwrap_or_default());
        if let Ok(piece) = std::str::from_utf8(&pending) {
            out.push(piece.to_owned());
            pending.clear();
        }
    }
    if !pending.is_empty() {
        out.push(String::from_utf8_lossy(&pending).into_owned());
    }
    out
}

/// Tokens in a text.
pub fn count(text: &str) -> usize {
    match bpe() {
        Some(bpe) => bpe.encode_ordinary(text).len(),
        None => text.len().div_ceil(4),
    }
}

/// Prompt tokens of a chat request: message texts, tool-call arguments and
/// tool definitions, plus the template's per-message overhead.
pub fn count_chat_prompt(req: &ChatRequest) -> usize {
    let (text, overhead) = prompt_text_and_overhead(req);
    count(&text) + overhead
}

/// A fast estimate of `count_chat_prompt`, for routing: within a few
/// percent of tiktoken on prose, code and JSON (a test holds it to that)
/// at a fraction of the cost, without building the prompt text.
pub fn estimate_chat_prompt(req: &ChatRequest) -> usize {
    let mut tokens = req.messages.len() * TOKENS_PER_MESSAGE + REPLY_PRIMER_TOKENS;
    for tool in req.tool_defs() {
        tokens += estimate(&tool.function.name);
        tokens += tool.function.description.as_deref().map_or(0, estimate);
        // Schemas are small next to prompts; their JSON text is estimated
        // from its length rather than serialized on the hot path.
        tokens += tool
            .function
            .parameters
            .as_ref()
            .map_or(0, |p| json_length(p) / 3);
    }
    for message in &req.messages {
        match &message.content {
            Some(crate::types::Content::Text(text)) => tokens += estimate(text),
            Some(crate::types::Content::Parts(parts)) => {
                tokens += parts
                    .iter()
                    .filter_map(|p| p.text.as_deref())
                    .map(estimate)
                    .sum::<usize>();
            }
            None => {}
        }
        for call in message.tool_calls.iter().flatten() {
            tokens += estimate(&call.function.name) + estimate(&call.function.arguments);
        }
    }
    tokens
}

/// Rough serialized length of a JSON value, without serializing it.
fn json_length(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) | Value::Number(_) => 5,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_length(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + json_length(v))
                .sum::<usize>()
        }
    }
}

/// Byte classes for `estimate`.
const LETTER: u8 = 0;
const DIGIT: u8 = 1;
const SPACE: u8 = 2;
const NEWLINE: u8 = 3;
const PUNCT: u8 = 4;
/// The first byte of a non-ASCII character (a letter in another script, an
/// emoji): about one token each.
const WIDE: u8 = 5;
/// A UTF-8 continuation byte: part of the character before it.
const CONTINUATION: u8 = 6;
const NOTHING: u8 = 7;

const CLASSES: [u8; 256] = {
    let mut table = [PUNCT; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = match b as u8 {
            b'a'..=b'z' | b'A'..=b'Z' => LETTER,
            b'0'..=b'9' => DIGIT,
            b'\n' | b'\r' => NEWLINE,
            b' ' | b'\t' => SPACE,
            0x80..=0xBF => CONTINUATION,
            0xC0..=0xFF => WIDE,
            _ => PUNCT,
        };
        b += 1;
    }
    table
};

/// Tokens of a run of `run` bytes of one class, after a run of `previous`.
const fn run_tokens(class: u8, previous: u8, run: usize) -> usize {
    match class {
        // Common words are one token; long or rare ones split about every 6 letters.
        LETTER => 1 + run.saturating_sub(4) / 6,
        DIGIT => run.div_ceil(3),
        // A single space joins the next word; a longer run is one token,
        // or joins the line break before it (indentation).
        SPACE => (run > 1 && previous != NEWLINE) as usize,
        // Line breaks join the punctuation before them (`):\n`).
        NEWLINE => (previous != PUNCT) as usize,
        PUNCT => run.div_ceil(3),
        WIDE => run,
        _ => 0,
    }
}

/// Runs shorter than this are looked up in [`SHORT_RUNS`].
const SHORT_RUN: usize = 16;

/// `run_tokens` of every class, class before it and run shorter than
/// [`SHORT_RUN`], at `class << 7 | previous << 4 | run`: looked up rather
/// than worked out at the end of each run (most runs in prose are a word
/// or a space), which took about half of `estimate`'s instructions.
const SHORT_RUNS: [u8; 8 * 8 * SHORT_RUN] = {
    let mut table = [0; 8 * 8 * SHORT_RUN];
    let mut i = 0;
    while i < table.len() {
        // At most 15 (a run of 15 wide characters).
        table[i] = run_tokens((i >> 7) as u8, ((i >> 4) & 7) as u8, i & 15) as u8;
        i += 1;
    }
    table
};

#[inline]
fn tokens_of_run(class: u8, previous: u8, run: usize) -> usize {
    if run < SHORT_RUN {
        usize::from(SHORT_RUNS[usize::from(class) << 7 | usize::from(previous) << 4 | run])
    } else {
        run_tokens(class, previous, run)
    }
}

/// Estimates cl100k tokens by walking the text the way its pre-tokenizer
/// splits it: letter runs (long ones split further by BPE), digit groups of
/// up to three, punctuation runs, whitespace runs.
pub fn estimate(text: &str) -> usize {
    sum_of_runs(text, tokens_of_run)
}

/// `text`'s runs of one class, each counted by `tokens_of`.
#[inline(always)]
fn sum_of_runs(text: &str, tokens_of: impl Fn(u8, u8, usize) -> usize) -> usize {
    let mut tokens = 0;
    let (mut current, mut previous, mut run) = (NOTHING, NOTHING, 0);
    for &b in text.as_bytes() {
        let class = CLASSES[usize::from(b)];
        if class == current {
            run += 1;
        } else if class != CONTINUATION {
            tokens += tokens_of(current, previous, run);
            previous = current;
            current = class;
            run = 1;
        }
    }
    tokens + tokens_of(current, previous, run)
}

/// The text a chat request's prompt is made of, in order, and the tokens
/// the chat template adds around it. Used for counting and prefix hashing.
pub fn prompt_text_and_overhead(req: &ChatRequest) -> (String, usize) {
    // Sized for the messages' text, so appending them does not regrow it.
    let texts: usize = req.messages.iter().map(Message::text_len).sum();
    let mut text = String::with_capacity(texts);
    for tool in req.tool_defs() {
        text.push_str(&serde_json::to_string(&tool.function).unwrap_or_default());
    }
    for message in &req.messages {
        message.push_text(&mut text);
        for call in message.tool_calls.iter().flatten() {
            text.push_str(&call.function.name);
            text.push_str(&call.function.arguments);
        }
    }
    let overhead = req.messages.len() * TOKENS_PER_MESSAGE + REPLY_PRIMER_TOKENS;
    (text, overhead)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The table gives what working each run out gives, for runs of
        /// every class and length, short and long.
        #[test]
        fn the_estimate_is_the_sum_of_its_runs_tokens(
            text in "([a-z]{1,40}|[0-9]{1,20}|[ \t]{1,20}|[\n\r]{1,3}|[(){}:;,.]{1,20}|[é川😀]{1,20}){0,30}"
        ) {
            prop_assert_eq!(estimate(&text), sum_of_runs(&text, run_tokens));
        }
    }

    #[test]
    fn the_estimate_stays_close_to_tiktoken() {
        let samples = [
            "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks were striking thirteen.",
            "def mean(xs):\n    if not xs:\n        raise ValueError(\"mean of empty list\")\n    return sum(xs) / len(xs)\n",
            "{\"model\": \"gpt-4o\", \"messages\": [{\"role\": \"user\", \"content\": \"hello\"}], \"max_tokens\": 512}",
            "Revenue grew 12.5% to $1,234,567 in Q3 2024, compared with $1,097,301 a year earlier.",
            "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * 2).collect();\n    println!(\"{v:?}\");\n}\n",
            "Please summarise the attached report, focusing on the methodology, the main findings, and any limitations the authors acknowledge.",
        ];
        let (mut exact_total, mut estimate_total) = (0usize, 0usize);
        for text in samples {
            let text = text.repeat(5);
            let (exact, guess) = (count(&text), estimate(&text));
            let error = (guess as f64 - exact as f64).abs() / exact as f64;
            assert!(error < 0.25, "{guess} vs {exact} for {text:?}");
            exact_total += exact;
            estimate_total += guess;
        }
        let error = (estimate_total as f64 - exact_total as f64).abs() / exact_total as f64;
        assert!(error < 0.1, "{estimate_total} vs {exact_total} overall");
    }

    #[test]
    fn counts_like_cl100k() {
        assert_eq!(count("hello world"), 2);
        assert_eq!(encode("hello world").len(), 2);
    }
}
