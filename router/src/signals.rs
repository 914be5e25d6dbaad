//! Content signals: how much a text looks like code, maths or a request for
//! careful reasoning. One case-insensitive pass over the text finds every
//! keyword of every kind.

use std::sync::OnceLock;

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

/// The keywords as one automaton: Aho-Corasick's, with every transition
/// worked out ahead (a DFA), over the classes of bytes the keywords hold.
///
/// The aho-corasick crate's own DFA, built from the same list, took about
/// 16 instructions a byte of text on its general search loop (callgrind);
/// this loop takes a class, a transition and a check a byte. It finds what
/// the crate's standard, non-overlapping search finds: a keyword is counted
/// where it ends, and the search starts again after it.
struct Matcher {
    /// Each byte's class: 1 and up for the bytes the keywords hold (a
    /// capital letter as its small one), 0 for any other byte.
    classes: [u8; 256],
    /// `next[state + class]`: the state after a byte of `class`, as the
    /// index of its first transition (its number times the classes), and
    /// in the bits above [`STATE_MASK`], the kind of the longest keyword ending
    /// there plus one (0 where none ends).
    next: Box<[u32]>,
}

/// The bits of a transition that hold the state.
const STATE_MASK: u32 = (1 << 24) - 1;

impl Matcher {
    fn new(lists: &[&[&str]]) -> Matcher {
        let mut classes = [0u8; 256];
        let mut stride = 1;
        for byte in lists.iter().flat_map(|l| l.iter()).flat_map(|k| k.bytes()) {
            let byte = byte.to_ascii_lowercase();
            if classes[usize::from(byte)] == 0 {
                classes[usize::from(byte)] = u8::try_from(stride).unwrap_or(0);
                stride += 1;
            }
        }
        for upper in b'A'..=b'Z' {
            classes[usize::from(upper)] = classes[usize::from(upper.to_ascii_lowercase())];
        }
        // The keywords' trie, by state number: each state's children (0,
        // the root, where it has none), and the kind a keyword ends with.
        let mut children: Vec<Vec<usize>> = vec![vec![0; stride]];
        let mut ends: Vec<Option<usize>> = vec![None];
        for (kind, list) in lists.iter().enumerate() {
            for keyword in *list {
                let mut state = 0;
                for byte in keyword.bytes() {
                    let class = usize::from(classes[usize::from(byte)]);
                    if children[state][class] == 0 {
                        children[state][class] = children.len();
                        children.push(vec![0; stride]);
                        ends.push(None);
                    }
                    state = children[state][class];
                }
                ends[state] = Some(kind);
            }
        }
        // Breadth first, each state's missing transitions are its failure
        // state's (the longest proper suffix of its text that is a state),
        // and a state where no keyword ends takes the failure state's end.
        let mut failure = vec![0; children.len()];
        let mut queue: std::collections::VecDeque<usize> =
            children[0].iter().copied().filter(|&c| c != 0).collect();
        while let Some(state) = queue.pop_front() {
            let fail = failure[state];
            if ends[state].is_none() {
                ends[state] = ends[fail];
            }
            let failure_row = children[fail].clone();
            for (child, &by_failure) in children[state].iter_mut().zip(&failure_row) {
                if *child == 0 {
                    *child = by_failure;
                } else {
                    failure[*child] = by_failure;
                    queue.push_back(*child);
                }
            }
        }
        let transition = |to: usize| {
            let kind = ends[to].map_or(0, |kind| kind + 1);
            u32::try_from(to * stride).unwrap_or(0) | u32::try_from(kind << 24).unwrap_or(0)
        };
        // A state's first transition must fit below the kind's bits.
        debug_assert!(children.len() * stride <= STATE_MASK as usize);
        let next = children
            .iter()
            .flatten()
            .map(|&to| transition(to))
            .collect();
        Matcher { classes, next }
    }

    /// Keyword hits in `text`, by kind.
    fn hits(&self, text: &str) -> [u32; 3] {
        let mut hits = [0u32; 3];
        let mut state = 0;
        for &byte in text.as_bytes() {
            let class = u32::from(self.classes[usize::from(byte)]);
            let next = self
                .next
                .get((state + class) as usize)
                .copied()
                .unwrap_or(0);
            state = next & STATE_MASK;
            if next > STATE_MASK {
                if let Some(hit) = hits.get_mut((next >> 24) as usize - 1) {
                    *hit += 1;
                }
                state = 0;
            }
        }
        hits
    }
}

fn matcher() -> &'static Matcher {
    static MATCHER: OnceLock<Matcher> = OnceLock::new();
    MATCHER.get_or_init(|| Matcher::new(&[CODE, MATH, REASONING]))
}

/// Saturates a hit count into 0..1: one hit ~0.4, three ~0.8.
fn saturate(hits: u32) -> f64 {
    1.0 - (-f64::from(hits) / 2.0).exp()
}

pub fn signals(text: &str) -> Signals {
    let hits = matcher().hits(text);
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

    /// The hits aho-corasick's standard, non-overlapping search finds.
    fn by_aho_corasick(text: &str) -> [u32; 3] {
        static BY_CRATE: OnceLock<(aho_corasick::AhoCorasick, Vec<usize>)> = OnceLock::new();
        let (automaton, kinds) = BY_CRATE.get_or_init(|| {
            let lists = [CODE, MATH, REASONING];
            let kinds = lists
                .iter()
                .enumerate()
                .flat_map(|(kind, list)| std::iter::repeat_n(kind, list.len()))
                .collect();
            let automaton = aho_corasick::AhoCorasick::builder()
                .ascii_case_insensitive(true)
                .build(lists.concat())
                .unwrap();
            (automaton, kinds)
        });
        let mut hits = [0u32; 3];
        for found in automaton.find_iter(text) {
            hits[kinds[found.pattern().as_usize()]] += 1;
        }
        hits
    }

    #[test]
    fn finds_what_aho_corasick_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let keywords: Vec<&str> = [CODE, MATH, REASONING].concat();
        // Keywords, their pieces, overlaps and other text, in any case.
        let pieces = [
            "a", " ", "e", "x", "\\n", "é", "≤", "st", "ro", "ana", "fn", "sq",
        ];
        for _ in 0..4000 {
            let mut text = String::new();
            for _ in 0..rng.random_range(0..12) {
                let piece = if rng.random_bool(0.5) {
                    let keyword = keywords[rng.random_range(0..keywords.len())];
                    let end = rng.random_range(1..=keyword.len());
                    keyword.get(..end).unwrap_or(keyword)
                } else {
                    pieces[rng.random_range(0..pieces.len())]
                };
                if rng.random_bool(0.2) {
                    text.push_str(&piece.to_ascii_uppercase());
                } else {
                    text.push_str(piece);
                }
            }
            assert_eq!(matcher().hits(&text), by_aho_corasick(&text), "{text:?}");
        }
        for keyword in &keywords {
            let text = format!("x{keyword}{keyword}");
            assert_eq!(matcher().hits(&text), by_aho_corasick(&text), "{text:?}");
        }
    }
}
