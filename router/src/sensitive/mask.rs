//! Masking for the cloud: each value found becomes a placeholder naming its
//! kind (`[CARD_1]`, `[EMAIL_2]`), the same value the same placeholder
//! wherever it appears in the request, and the answer gets the values
//! back. A streamed answer is restored as it streams: text that may be the
//! start of a placeholder cut between two chunks is held until the next
//! chunk says whether it is one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};

use super::Kind;
use super::parts::PartFinding;

/// A piece shorter than this, of a value split across two texts, is not
/// masked on its own: a digit or two would be replaced wherever it stands.
const MIN_PIECE_BYTES: usize = 4;

/// The values of one request and their placeholders.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    values: Vec<String>,
    placeholders: Vec<String>,
    /// Finds values (longest first where two start together), and
    /// placeholders: each text is rewritten in one pass.
    find_values: Option<AhoCorasick>,
    find_placeholders: Option<AhoCorasick>,
    /// The longest placeholder: the most text a stream holds back.
    longest: usize,
}

impl Masker {
    /// Placeholders for the pieces of `found` in `texts` whose kind is in
    /// `kinds`. Numbered per kind in order of appearance, skipping any a
    /// text already holds (which would be restored into a value).
    pub fn new(texts: &[&str], found: &[PartFinding], kinds: &[Kind]) -> Masker {
        let held = placeholders_in(texts);
        let mut index: HashMap<&str, usize> = HashMap::new();
        let mut numbers: HashMap<Kind, u32> = HashMap::new();
        let (mut values, mut placeholders) = (Vec::new(), Vec::new());
        for finding in found.iter().filter(|f| kinds.contains(&f.kind)) {
            let split = finding.pieces.len() > 1;
            for &(text, start, end) in &finding.pieces {
                let value = &texts[text][start..end];
                if index.contains_key(value) || (split && value.len() < MIN_PIECE_BYTES) {
                    continue;
                }
                let placeholder = loop {
                    let n = numbers.entry(finding.kind).or_insert(0);
                    *n += 1;
                    let candidate = format!("[{}_{n}]", finding.kind.as_str().to_uppercase());
                    if !held.contains(&candidate) {
                        break candidate;
                    }
                };
                index.insert(value, values.len());
                values.push(value.to_owned());
                placeholders.push(placeholder);
            }
        }
        let automaton = |patterns: &[String]| {
            (!patterns.is_empty())
                .then(|| {
                    AhoCorasick::builder()
                        .match_kind(MatchKind::LeftmostLongest)
                        .build(patterns)
                        .ok()
                })
                .flatten()
        };
        Masker {
            find_values: automaton(&values),
            find_placeholders: automaton(&placeholders),
            longest: placeholders.iter().map(String::len).max().unwrap_or(0),
            values,
            placeholders,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Values masked.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Replaces every value in `text` by its placeholder.
    pub fn mask(&self, text: &mut String) {
        if let Some(find) = &self.find_values
            && find.is_match(text.as_str())
        {
            *text = find.replace_all(text, &self.placeholders);
        }
    }

    /// Replaces every placeholder in `text` by its value.
    pub fn restore(&self, text: &mut String) {
        if let Some(find) = &self.find_placeholders
            && text.contains('[')
            && find.is_match(text.as_str())
        {
            *text = find.replace_all(text, &self.values);
        }
    }

    /// A restorer for one streamed answer.
    pub fn stream(self: &Arc<Self>) -> StreamRestorer {
        StreamRestorer {
            masker: self.clone(),
            held: HashMap::new(),
        }
    }

    /// How much of the end of `text` could be the start of a placeholder.
    fn open_tail(&self, text: &str) -> usize {
        let from = super::ceil_char_boundary(
            text,
            text.len().saturating_sub(self.longest.saturating_sub(1)),
        );
        let Some(at) = text[from..]
            .char_indices()
            .map(|(i, _)| from + i)
            .find(|&i| {
                let tail = &text[i..];
                tail.starts_with('[')
                    && self
                        .placeholders
                        .iter()
                        .any(|p| p.len() > tail.len() && p.starts_with(tail))
            })
        else {
            return 0;
        };
        text.len() - at
    }
}

/// Two maskers are the same when they hold the same values and
/// placeholders (their automatons follow from those).
impl PartialEq for Masker {
    fn eq(&self, other: &Masker) -> bool {
        self.values == other.values && self.placeholders == other.placeholders
    }
}

/// Every `[KIND_N]` the texts already hold, in one pass each.
fn placeholders_in(texts: &[&str]) -> HashSet<String> {
    let mut held = HashSet::new();
    for text in texts {
        let mut rest = *text;
        while let Some(open) = rest.find('[') {
            rest = &rest[open..];
            let Some(close) = rest[1..]
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            else {
                break;
            };
            if rest[1 + close..].starts_with(']') {
                held.insert(rest[..close + 2].to_owned());
            }
            rest = &rest[1..];
        }
    }
    held
}

/// Restores one streamed answer, text field by text field (`slot`: a
/// choice's content, one tool call's arguments), each field's pieces in
/// the order they came.
pub struct StreamRestorer {
    masker: Arc<Masker>,
    held: HashMap<u64, String>,
}

impl StreamRestorer {
    /// The text of `slot` that can be sent now: what was held, then
    /// `piece`, restored, less any tail that may be a placeholder's start.
    pub fn push(&mut self, slot: u64, piece: &str) -> String {
        let mut text = self.held.remove(&slot).unwrap_or_default();
        text.push_str(piece);
        self.masker.restore(&mut text);
        let open = self.masker.open_tail(&text);
        if open > 0 {
            let tail = text.split_off(text.len() - open);
            self.held.insert(slot, tail);
        }
        text
    }

    /// What `slot` still holds, as it came (the field ended).
    pub fn finish(&mut self, slot: u64) -> Option<String> {
        self.held.remove(&slot).filter(|t| !t.is_empty())
    }

    /// Slots still holding text.
    pub fn holding(&self) -> Vec<u64> {
        let mut slots: Vec<u64> = self.held.keys().copied().collect();
        slots.sort_unstable();
        slots
    }
}

#[cfg(test)]
mod tests {
    use super::super::parts::scan_parts;
    use super::*;

    fn masker(texts: &[&str]) -> Arc<Masker> {
        Arc::new(Masker::new(texts, &scan_parts(texts), &Kind::ALL))
    }

    #[test]
    fn the_same_value_gets_the_same_placeholder_everywhere() {
        let texts = [
            "card 4111 1111 1111 1111, mail a@example.com",
            "again: 4111 1111 1111 1111 and b@example.org",
        ];
        let masker = masker(&texts);
        let masked: Vec<String> = texts
            .iter()
            .map(|t| {
                let mut t = (*t).to_owned();
                masker.mask(&mut t);
                t
            })
            .collect();
        assert_eq!(masked[0], "card [CARD_1], mail [EMAIL_1]");
        assert_eq!(masked[1], "again: [CARD_1] and [EMAIL_2]");
        let mut answer = "Charged [CARD_1]; receipts to [EMAIL_2].".to_owned();
        masker.restore(&mut answer);
        assert_eq!(
            answer,
            "Charged 4111 1111 1111 1111; receipts to b@example.org."
        );
    }

    #[test]
    fn placeholders_the_prompt_already_holds_are_skipped() {
        let texts = ["[EMAIL_1] is a template; mine is a@example.com"];
        let masker = masker(&texts);
        let mut text = texts[0].to_owned();
        masker.mask(&mut text);
        assert_eq!(text, "[EMAIL_1] is a template; mine is [EMAIL_2]");
    }

    #[test]
    fn a_placeholder_cut_across_chunks_is_restored_whole() {
        let masker = masker(&["write to a@example.com"]);
        for cut in 1.."[EMAIL_1]".len() {
            let (a, b) = "[EMAIL_1]".split_at(cut);
            let mut stream = masker.stream();
            let mut out = stream.push(0, &format!("Sent to {a}"));
            out += &stream.push(0, &format!("{b}."));
            assert_eq!(out, "Sent to a@example.com.", "cut at {cut}");
            assert_eq!(stream.finish(0), None);
        }
        // One byte at a time, with an unrelated bracket.
        let mut stream = masker.stream();
        let mut out = String::new();
        for c in "see [1] and [EMAIL_1][EMA".chars() {
            out += &stream.push(7, &c.to_string());
        }
        assert_eq!(stream.holding(), [7]);
        out += &stream.finish(7).unwrap();
        assert_eq!(out, "see [1] and a@example.com[EMA");
    }

    #[test]
    fn a_stream_of_wide_characters_is_cut_only_between_them() {
        let masker = masker(&["write to a@example.com"]);
        let mut stream = masker.stream();
        let mut out = String::new();
        for piece in [
            "こんにちは、",
            "送信先は[EM",
            "AIL_1]です。日本語のテキスト",
            "🎉",
        ] {
            out += &stream.push(0, piece);
        }
        out += &stream.finish(0).unwrap_or_default();
        assert_eq!(
            out,
            "こんにちは、送信先はa@example.comです。日本語のテキスト🎉"
        );
    }

    #[test]
    fn split_pieces_are_masked_and_restored_each() {
        let texts = ["my card is 4111 1111", "1111 1111 thanks"];
        let masker = masker(&texts);
        let mut first = texts[0].to_owned();
        let mut second = texts[1].to_owned();
        masker.mask(&mut first);
        masker.mask(&mut second);
        assert_eq!(
            (first.as_str(), second.as_str()),
            ("my card is [CARD_1]", "[CARD_2] thanks")
        );
        let mut back = format!("{first} {second}");
        masker.restore(&mut back);
        assert_eq!(back, "my card is 4111 1111 1111 1111 thanks");
    }
}
