//! A request's texts scanned together: each text alone, and each junction
//! of two neighbours, where a number a caller split across messages ("my
//! card is 4111 1111" then "1111 1111") is whole again.

use super::{Finding, Kind, ceil_char_boundary, floor_char_boundary, scan};

/// One value found in a request's texts: each piece is `(text, start,
/// end)`, byte offsets into that text. A value split across two texts has
/// two pieces.
#[derive(Debug, Clone, PartialEq)]
pub struct PartFinding {
    pub kind: Kind,
    pub confidence: f32,
    pub pieces: Vec<(usize, usize, usize)>,
}

/// How far into each neighbour a junction is read: longer than any value
/// the digit patterns take (an IBAN written in groups is 42 bytes).
const JUNCTION_BYTES: usize = 64;

/// Every value in `texts` (a request's texts in the order a model reads
/// them), whole or split across a junction.
pub fn scan_parts(texts: &[&str]) -> Vec<PartFinding> {
    let mut found: Vec<PartFinding> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        found.extend(scan(text).into_iter().map(|f| PartFinding {
            kind: f.kind,
            confidence: f.confidence,
            pieces: vec![(i, f.start, f.end)],
        }));
    }
    for i in 1..texts.len() {
        found.extend(across(texts, i - 1, i));
    }
    found
}

/// Values that start in `texts[a]` and end in `texts[b]`: the end of one
/// and the start of the other, trimmed of white space and joined by a
/// space (which every digit pattern takes as a separator). A value either
/// side finds alone is not found again.
fn across(texts: &[&str], a: usize, b: usize) -> Option<PartFinding> {
    let (left, right) = (texts[a], texts[b]);
    let window = ceil_char_boundary(left, left.len().saturating_sub(JUNCTION_BYTES));
    let tail = left[window..].trim();
    let tail_from = window + (left[window..].len() - left[window..].trim_start().len());
    let head_from = right.len() - right.trim_start().len();
    let head_to = floor_char_boundary(right, head_from + JUNCTION_BYTES);
    let head = right[head_from..head_to].trim_end();
    if tail.is_empty() || head.is_empty() {
        return None;
    }
    let joined = format!("{tail} {head}");
    let seam = tail.len();
    scan(&joined)
        .into_iter()
        .find(|f: &Finding| f.start < seam && f.end > seam + 1)
        .map(|f| PartFinding {
            kind: f.kind,
            confidence: f.confidence,
            pieces: vec![
                (a, tail_from + f.start, tail_from + tail.len()),
                (b, head_from, head_from + (f.end - seam - 1)),
            ],
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces<'a>(texts: &[&'a str]) -> Vec<(Kind, Vec<&'a str>)> {
        scan_parts(texts)
            .into_iter()
            .map(|f| {
                let pieces = f.pieces.iter().map(|&(t, s, e)| &texts[t][s..e]).collect();
                (f.kind, pieces)
            })
            .collect()
    }

    #[test]
    fn a_card_split_across_messages_is_found_in_both() {
        assert_eq!(
            pieces(&["my card is 4111 1111\n", "  1111 1111, thanks"]),
            [(Kind::Card, vec!["4111 1111", "1111 1111"])]
        );
        assert_eq!(
            pieces(&["IBAN GB82 WEST 1234", "5698 7654 32 please"]),
            [(Kind::Iban, vec!["GB82 WEST 1234", "5698 7654 32"])]
        );
    }

    #[test]
    fn values_whole_in_one_text_are_found_once() {
        assert_eq!(
            pieces(&["a@example.com", "4111 1111 1111 1111"]),
            [
                (Kind::Email, vec!["a@example.com"]),
                (Kind::Card, vec!["4111 1111 1111 1111"])
            ]
        );
        // Neighbouring numbers that make no value together stay apart.
        assert!(pieces(&["order 12345", "67890 shipped"]).is_empty());
    }

    #[test]
    fn junctions_respect_characters_wider_than_a_byte() {
        let left = format!("{} 4111 1111", "é".repeat(40));
        let right = format!("1111 1111 {}", "日".repeat(30));
        assert_eq!(
            pieces(&[&left, &right]),
            [(Kind::Card, vec!["4111 1111", "1111 1111"])]
        );
    }
}
