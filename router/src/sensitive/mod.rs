//! Finding sensitive data in a prompt: payment cards, IBANs, email
//! addresses, phone numbers, national ids, IP addresses, credentials and
//! private keys, each with a kind (as config, receipts and the ledger name
//! it) and a confidence; a request's texts scanned together, so a number
//! split across two messages is found (`parts`); and the masking of what
//! was found, restored in the answer (`mask`).
//!
//! Patterns are compiled once (the `regex` crate: linear time in the text,
//! so a scan is bounded by its length) and every candidate is checked the
//! way its kind allows: Luhn for cards, ISO 7064 mod 97 for IBANs, the
//! issuing rules for US social security numbers, octet ranges for IPv4 and
//! the parser for IPv6, entropy for unprefixed tokens. Text is scanned after
//! folding look-alikes (fullwidth forms, zero-width characters), and
//! findings point back into the text as given.

mod checks;
mod mask;
mod national;
mod normalize;
mod parts;
mod patterns;

use std::collections::BTreeMap;
use std::ops::Range;

pub use crate::sensitive::checks::{iban_valid, luhn_valid};
pub use crate::sensitive::mask::{Masker, StreamRestorer};
use crate::sensitive::normalize::Folded;

pub use crate::sensitive::parts::{PartFinding, scan_parts};

/// What a finding is, as config, headers and the ledger name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Card,
    Iban,
    Email,
    Phone,
    NationalId,
    Ip,
    Credential,
    PrivateKey,
}

impl Kind {
    pub const ALL: [Kind; 8] = [
        Kind::Card,
        Kind::Iban,
        Kind::Email,
        Kind::Phone,
        Kind::NationalId,
        Kind::Ip,
        Kind::Credential,
        Kind::PrivateKey,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Card => "card",
            Kind::Iban => "iban",
            Kind::Email => "email",
            Kind::Phone => "phone",
            Kind::NationalId => "national_id",
            Kind::Ip => "ip",
            Kind::Credential => "credential",
            Kind::PrivateKey => "private_key",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

/// What a request's sensitive-data policies found and did: the kinds
/// acted on, the strictest action, and the masker when it masks.
#[derive(Debug, Clone, PartialEq)]
pub struct Handling {
    /// As receipts and the ledger write them: `card,email`.
    pub kinds: String,
    pub action: switchyard_policies::SensitiveAction,
    /// Set when the action masks (applied to every call to a backend that
    /// is not local) or keeps the request local (no such call is made):
    /// either way applied to what the gateway writes of the request.
    pub masker: Option<std::sync::Arc<Masker>>,
}

/// One value found: where it is in the text as given (byte offsets), what
/// it is, and how sure the check is (0 to 1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Finding {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub confidence: f32,
}

/// The most text one scan reads: past it, the rest is not scanned (a
/// caller's policy decides what an unscanned tail means). Above the
/// gateway's default body limit (8 MiB): at about 14 µs a kilobyte, a
/// quarter of a second at most.
pub const MAX_SCAN_BYTES: usize = 16 << 20;

/// Every sensitive value in `text`, in order of where it starts; where
/// two findings overlap, the first pattern's (the more specific) stands.
pub fn scan(text: &str) -> Vec<Finding> {
    let text = &text[..floor_char_boundary(text, MAX_SCAN_BYTES)];
    let folded = Folded::of(text);
    let haystack = folded.text.as_str();
    // Folded ranges taken so far, by start: an overlap is one lookup.
    let mut taken: BTreeMap<usize, usize> = BTreeMap::new();
    let mut findings: Vec<Finding> = Vec::new();
    for pattern in patterns::live(haystack) {
        let grouped = pattern.regex.captures_len() > 1;
        let mut at = 0;
        // `find_at` runs the fast engines; a pattern's group (the value
        // inside the characters that bound it) is read within the match.
        while at <= haystack.len() {
            let Some(matched) = pattern.regex.find_at(haystack, at) else {
                break;
            };
            let found = if grouped {
                pattern
                    .regex
                    .captures_at(&haystack[..matched.end()], matched.start())
                    .and_then(|c| c.get(1))
            } else {
                Some(matched)
            };
            // The next search starts where the value ends, not the match:
            // the character bounding one value may bound the next.
            let next = found.map_or(matched.end(), |f| f.end());
            at = ceil_char_boundary(haystack, next.max(at + 1));
            let Some(found) = found else { continue };
            let Some((range, confidence)) = checked(pattern, found.as_str()) else {
                continue;
            };
            let (start, end) = (found.start() + range.start, found.start() + range.end);
            if pattern
                .context
                .is_some_and(|fits| !fits(haystack, start, end))
            {
                continue;
            }
            if taken
                .range(..end)
                .next_back()
                .is_some_and(|(_, &taken_end)| taken_end > start)
            {
                continue;
            }
            taken.insert(start, end);
            let (start, end) = folded.original(start, end);
            findings.push(Finding {
                kind: pattern.kind,
                start,
                end,
                confidence,
            });
        }
    }
    findings.sort_by_key(|f| f.start);
    findings
}

/// The part of `candidate` that passes `pattern`'s check, and its
/// confidence: the whole, or for a pattern that shrinks, the longest part
/// between separators that does (a card number with its expiry after it,
/// or a quantity before it; an IBAN and the next word).
fn checked(pattern: &patterns::Pattern, candidate: &str) -> Option<(Range<usize>, f32)> {
    if let Some(confidence) = (pattern.check)(candidate) {
        return Some((0..candidate.len(), confidence));
    }
    if !pattern.shrinks {
        return None;
    }
    let cuts: Vec<usize> = candidate
        .bytes()
        .enumerate()
        .filter(|(_, b)| matches!(b, b' ' | b'-' | b'.'))
        .map(|(i, _)| i)
        .collect();
    let starts = std::iter::once(0).chain(cuts.iter().map(|c| c + 1));
    for start in starts {
        let ends = std::iter::once(candidate.len()).chain(cuts.iter().rev().copied());
        for end in ends.filter(|&end| end > start) {
            if let Some(confidence) = (pattern.check)(&candidate[start..end]) {
                return Some((start..end, confidence));
            }
        }
    }
    None
}

/// The smallest char boundary at or above `at`; `at` itself past the end.
fn ceil_char_boundary(text: &str, at: usize) -> usize {
    (at..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(at)
}

/// The largest char boundary at or below `at`.
fn floor_char_boundary(text: &str, at: usize) -> usize {
    if at >= text.len() {
        return text.len();
    }
    (0..=at)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
