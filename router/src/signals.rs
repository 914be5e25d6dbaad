//! Content signals: how much a text looks like code, maths or a request for
//! careful reasoning. One case-insensitive pass over the text finds every
//! keyword of every kind.

use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

const CODE: &[&str] = &[
    "```",
    "def ",
    "fn ",
    "class ",
    "function",
    "import ",
    "#include",
    "console.log",
    "return ",
    "=>",
    "public static",
    "select ",
    "traceback",
    "stack trace",
    "compile",
    "refactor",
    "bug",
    "python",
    "rust",
    "javascript",
    "typescript",
    "regex",
    "sql",
    "unit test",
    "segfault",
    "exception",
];
const MATH: &[&str] = &[
    "integral",
    "derivative",
    "equation",
    "theorem",
    "prove",
    "\\frac",
    "matrix",
    "probability",
    "solve for",
    "sqrt",
    "lemma",
    "eigen",
    "polynomial",
    "∑",
    "≤",
    "≥",
];
const REASONING: &[&str] = &[
    "step by step",
    "analyze",
    "analyse",
    "compare",
    "explain why",
    "trade-off",
    "tradeoff",
    "design",
    "evaluate",
    "pros and cons",
    "architecture",
    "strategy",
    "critique",
    "in depth",
    "reason about",
    "plan ",
];

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Signals {
    /// Each from 0 (no sign) towards 1 (many signs).
    pub code: f64,
    pub math: f64,
    pub reasoning: f64,
}

struct Matcher {
    automaton: AhoCorasick,
    /// Which kind each pattern is: 0 code, 1 maths, 2 reasoning.
    kinds: Vec<u8>,
}

fn matcher() -> &'static Matcher {
    static MATCHER: OnceLock<Matcher> = OnceLock::new();
    MATCHER.get_or_init(|| {
        let mut patterns = Vec::new();
        let mut kinds = Vec::new();
        for (kind, words) in [CODE, MATH, REASONING].into_iter().enumerate() {
            patterns.extend_from_slice(words);
            kinds.extend(std::iter::repeat_n(kind as u8, words.len()));
        }
        // A few dozen fixed literals: building only fails past size limits
        // these cannot reach (a unit test builds it).
        #[allow(clippy::expect_used)]
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&patterns)
            .expect("fixed keyword list builds");
        Matcher { automaton, kinds }
    })
}

/// Saturates a hit count into 0..1: one hit ~0.4, three ~0.8.
fn saturate(hits: u32) -> f64 {
    1.0 - (-f64::from(hits) / 2.0).exp()
}

pub fn signals(text: &str) -> Signals {
    let m = matcher();
    let mut hits = [0u32; 3];
    for found in m.automaton.find_iter(text) {
        hits[usize::from(m.kinds[found.pattern().as_usize()])] += 1;
    }
    Signals {
        code: saturate(hits[0]),
        math: saturate(hits[1]),
        reasoning: saturate(hits[2]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_code_from_maths_from_chat() {
        let code = signals("Fix this Python bug:\n```\ndef f(x):\n    return x\n```");
        assert!(code.code > 0.8 && code.math == 0.0);
        let math = signals("Prove the theorem: the integral of a polynomial is a polynomial.");
        assert!(math.math > 0.8);
        let chat = signals("hello, how are you today?");
        assert_eq!(chat, Signals::default());
        let reasoning = signals("Compare these designs step by step and evaluate the trade-offs");
        assert!(reasoning.reasoning > 0.8);
    }
}
