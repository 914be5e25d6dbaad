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
mod normalize;
mod parts;

use std::sync::LazyLock;

use regex::Regex;

use crate::sensitive::checks::{card_confidence, entropy_bits, ssn_valid, token_mixes_classes};
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
    /// Set when the action masks: applied to every call to a backend that
    /// is not local.
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
/// caller's policy decides what an unscanned tail means).
pub const MAX_SCAN_BYTES: usize = 4 << 20;

struct Pattern {
    kind: Kind,
    regex: Regex,
    /// The confidence of a match, or `None` to drop it.
    check: fn(&str) -> Option<f32>,
}

fn pattern(kind: Kind, source: &str, check: fn(&str) -> Option<f32>) -> Pattern {
    Pattern {
        kind,
        // The sources below are constants, tested to compile.
        regex: Regex::new(source).unwrap_or_else(|err| panic!("{source}: {err}")),
        check,
    }
}

static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        pattern(
            Kind::PrivateKey,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?s:.{0,8192}?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\z)",
            |_| Some(0.99),
        ),
        pattern(
            Kind::Credential,
            r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|xox[abprs]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
            |_| Some(0.95),
        ),
        pattern(
            Kind::Credential,
            // Unprefixed tokens: long, mixed, and random-looking. Bounded
            // both ways by characters a token cannot hold, so a base64 blob
            // (an image) is one long run, not a token.
            r"(?:^|[^A-Za-z0-9+/=_-])([A-Za-z0-9+/=_-]{32,128})(?:$|[^A-Za-z0-9+/=_-])",
            |token| (token_mixes_classes(token) && entropy_bits(token) >= 4.3).then_some(0.6),
        ),
        pattern(
            Kind::Email,
            r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b",
            |_| Some(0.95),
        ),
        pattern(
            Kind::Iban,
            r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
            |text| iban_valid(text).then_some(0.95),
        ),
        pattern(
            Kind::Card,
            r"\b[0-9](?:[ -]?[0-9]){12,18}\b",
            card_confidence,
        ),
        pattern(
            Kind::NationalId,
            // US social security numbers, written with hyphens.
            r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b",
            |text| ssn_valid(text).then_some(0.85),
        ),
        pattern(
            Kind::NationalId,
            // UK National Insurance numbers (the prefixes HMRC never issues
            // left out).
            r"\b(?:[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z])(?: ?[0-9]{2}){3} ?[A-D]\b",
            |text| {
                (!["BG", "GB", "NK", "KN", "TN", "NT", "ZZ"].contains(&&text[..2])).then_some(0.8)
            },
        ),
        pattern(
            Kind::Phone,
            // International form (+ and country code), or North American
            // (xxx) xxx-xxxx.
            r"(?:\+[1-9][0-9]{0,2}[ .-]?(?:\([0-9]{1,4}\)[ .-]?)?[0-9]{1,4}(?:[ .-]?[0-9]{2,4}){2,4}\b|\([2-9][0-9]{2}\) ?[2-9][0-9]{2}-[0-9]{4}\b)",
            |text| {
                let digits = text.bytes().filter(u8::is_ascii_digit).count();
                (8..=15).contains(&digits).then_some(0.75)
            },
        ),
        pattern(Kind::Ip, r"\b(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b", |text| {
            text.parse::<std::net::Ipv4Addr>()
                .ok()
                .filter(|ip| !ip.is_unspecified())
                .map(|_| 0.7)
        }),
        pattern(
            Kind::Ip,
            r"(?i)\b[0-9a-f]{0,4}(?::[0-9a-f]{0,4}){2,7}\b",
            |text| {
                (text.matches(':').count() >= 2 && text.parse::<std::net::Ipv6Addr>().is_ok())
                    .then_some(0.8)
            },
        ),
    ]
});

/// Every sensitive value in `text`, in order of where it starts; where
/// two findings overlap, the first pattern's (the more specific) stands.
pub fn scan(text: &str) -> Vec<Finding> {
    let text = &text[..floor_char_boundary(text, MAX_SCAN_BYTES)];
    let folded = Folded::of(text);
    let mut findings: Vec<Finding> = Vec::new();
    for pattern in PATTERNS.iter() {
        for captures in pattern.regex.captures_iter(&folded.text) {
            // The token pattern's value is its group; the rest, the match.
            let Some(found) = captures.get(1).or_else(|| captures.get(0)) else {
                continue;
            };
            let Some(confidence) = (pattern.check)(found.as_str()) else {
                continue;
            };
            let (start, end) = folded.original(found.start(), found.end());
            if findings.iter().any(|f| start < f.end && f.start < end) {
                continue;
            }
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
