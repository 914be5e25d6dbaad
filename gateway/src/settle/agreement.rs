//! How a shadow copy's answer compares with the answer that served: the
//! same text, how alike the texts are once normalised, and for answers a
//! program can check (JSON, tool calls, fenced code), whether both say the
//! same thing once parsed. Texts are as the ledger's records keep them:
//! content, then each tool call's name and arguments.

use serde_json::Value;

use crate::ledger::Shadowed;

/// Words compared for similarity, from each side: the edit distance is
/// quadratic in them, and an answer's first thousands of words say
/// whether two answers are alike.
const MAX_WORDS: usize = 2_000;

/// Compares the served answer's text with the candidate's; no figures
/// when either is missing (the served call failed, or a text was too long
/// to keep).
pub fn compare(served: Option<&str>, candidate: Option<&str>) -> Shadowed {
    let (Some(served), Some(candidate)) = (served, candidate) else {
        return Shadowed::default();
    };
    Shadowed {
        exact: Some(served.trim() == candidate.trim()),
        similarity: Some(similarity(served, candidate)),
        checked: checkable(served).map(|s| checkable(candidate).is_some_and(|c| c == s)),
    }
}

/// One minus the word-level edit distance over the longer side's length,
/// on lower-cased words with punctuation dropped: 1 for the same words,
/// 0 for nothing in common. Two empty answers are alike.
pub fn similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (words(a), words(b));
    let longest = a.len().max(b.len());
    if longest == 0 {
        return 1.0;
    }
    1.0 - edit_distance(&a, &b) as f64 / longest as f64
}

fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(MAX_WORDS)
        .map(str::to_lowercase)
        .collect()
}

/// Levenshtein distance over words, in two rows of memory.
fn edit_distance(a: &[String], b: &[String]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, word) in a.iter().enumerate() {
        current[0] = i + 1;
        for (j, other) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(word != other);
            current[j + 1] = substitute.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

/// What a program can check of an answer.
#[derive(Debug, PartialEq)]
enum Checkable {
    /// A JSON object or array (the whole answer, or one fenced block).
    Json(Value),
    /// Tool calls: each name with its parsed arguments, in order.
    ToolCalls(Vec<(String, Value)>),
    /// Fenced code blocks, whitespace collapsed.
    Code(Vec<String>),
}

fn checkable(text: &str) -> Option<Checkable> {
    let text = text.trim();
    if let Some(value) = json_document(text) {
        return Some(Checkable::Json(value));
    }
    if let Some(calls) = tool_calls(text) {
        return Some(Checkable::ToolCalls(calls));
    }
    let blocks = fenced_blocks(text);
    if let [(language, body)] = blocks.as_slice()
        && matches!(*language, "" | "json")
        && let Some(value) = json_document(body)
    {
        return Some(Checkable::Json(value));
    }
    (!blocks.is_empty()).then(|| {
        Checkable::Code(
            blocks
                .iter()
                .map(|(_, body)| body.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect(),
        )
    })
}

/// A JSON object or array making up all of `text` (a bare number or
/// string is prose as far as checking goes).
fn json_document(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text.trim()).ok()?;
    (value.is_object() || value.is_array()).then_some(value)
}

/// `name{...}name{...}`: tool calls as records keep their text (the name,
/// then the arguments' JSON object), and nothing else.
fn tool_calls(text: &str) -> Option<Vec<(String, Value)>> {
    let mut calls = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let open = rest.find('{')?;
        let name = &rest[..open];
        let is_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if name.is_empty() || !name.chars().all(is_name) {
            return None;
        }
        let mut arguments = serde_json::Deserializer::from_str(&rest[open..]).into_iter::<Value>();
        let value = arguments.next()?.ok()?;
        let end = open + arguments.byte_offset();
        calls.push((name.to_owned(), value));
        rest = &rest[end..];
    }
    (!calls.is_empty()).then_some(calls)
}

/// The text's fenced code blocks: each block's language tag and body.
fn fenced_blocks(text: &str) -> Vec<(&str, &str)> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let Some(line_end) = after.find('\n') else {
            break;
        };
        let language = after[..line_end].trim();
        let body = &after[line_end + 1..];
        let Some(end) = body.find("```") else {
            break;
        };
        blocks.push((language, &body[..end]));
        rest = &body[end + 3..];
    }
    blocks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_text_agrees_exactly_and_fully() {
        let same = compare(
            Some("Paris is the capital."),
            Some("Paris is the capital.\n"),
        );
        assert_eq!(same.exact, Some(true));
        assert_eq!(same.similarity, Some(1.0));
        assert_eq!(same.checked, None, "prose is not checkable");
    }

    #[test]
    fn similarity_counts_words_changed_over_the_longer_answer() {
        // One word of four replaced.
        assert!((similarity("The cat sat down", "the cat SAT up!") - 0.75).abs() < 1e-9);
        assert_eq!(similarity("", ""), 1.0);
        assert_eq!(similarity("alpha beta", "gamma delta"), 0.0);
        // One word of five missing.
        assert!((similarity("a b c d e", "a b d e") - 0.8).abs() < 1e-9);
    }

    #[test]
    fn json_agrees_when_the_values_are_equal_whatever_the_spacing_or_fences() {
        let served = r#"{"a": 1, "b": [1, 2]}"#;
        let fenced = "```json\n{\"b\":[1,2],\n \"a\":1}\n```";
        let same = compare(Some(served), Some(fenced));
        assert_eq!(same.exact, Some(false));
        assert_eq!(same.checked, Some(true));
        let other = compare(Some(served), Some(r#"{"a": 2, "b": [1, 2]}"#));
        assert_eq!(other.checked, Some(false));
        let prose = compare(Some(served), Some("I think a is 1."));
        assert_eq!(prose.checked, Some(false), "the candidate gave no JSON");
    }

    #[test]
    fn tool_calls_agree_on_names_and_parsed_arguments() {
        let served = r#"get_weather{"city": "Paris"}lookup{"q":"x"}"#;
        let same = compare(
            Some(served),
            Some(r#"get_weather{"city":"Paris"}lookup{ "q": "x" }"#),
        );
        assert_eq!(same.checked, Some(true));
        let other_name = compare(
            Some(served),
            Some(r#"get_time{"city":"Paris"}lookup{"q":"x"}"#),
        );
        assert_eq!(other_name.checked, Some(false));
        let fewer = compare(Some(served), Some(r#"get_weather{"city":"Paris"}"#));
        assert_eq!(fewer.checked, Some(false));
    }

    #[test]
    fn code_blocks_agree_up_to_whitespace() {
        let served = "Here:\n```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n";
        let same = compare(
            Some(served),
            Some("Sure.\n```rust\nfn main() { println!(\"hi\"); }\n```"),
        );
        assert_eq!(same.checked, Some(true));
        let other = compare(Some(served), Some("```rust\nfn main() {}\n```"));
        assert_eq!(other.checked, Some(false));
    }

    #[test]
    fn a_missing_side_gives_no_figures() {
        assert_eq!(compare(None, Some("x")), Shadowed::default());
        assert_eq!(compare(Some("x"), None), Shadowed::default());
    }
}
