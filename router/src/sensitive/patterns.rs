//! The detectors: a pattern per form a value is written in, each with the
//! check a candidate must pass. Word boundaries are ASCII ones, so a value
//! written straight against text in another script (`番号は4111…です`)
//! is still bounded.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};

use super::Kind;
use super::checks::{
    card_confidence, iban_valid, is_placeholder, private_key_confidence, token_confidence,
};
use super::national::{
    codice_fiscale_valid, cpf_valid, dni_valid, insee_valid, nino_valid, ssn_valid,
};

pub struct Pattern {
    pub kind: Kind,
    pub regex: Regex,
    /// The confidence of a match, or `None` to drop it.
    pub check: fn(&str) -> Option<f32>,
    /// A match that fails its check may hold a value followed by more of
    /// the same characters (a card number and its expiry, an IBAN and
    /// the next word): shorter candidates ending at a separator are tried.
    pub shrinks: bool,
    /// What the text around a value must be, given the text and the
    /// value's range: `false` drops it.
    pub context: Option<fn(&str, usize, usize) -> bool>,
}

fn pattern(kind: Kind, source: &str, check: fn(&str) -> Option<f32>) -> Pattern {
    Pattern {
        kind,
        // The sources below are constants, tested to compile.
        regex: Regex::new(&source.replace(r"\b", r"(?-u:\b)"))
            .unwrap_or_else(|err| panic!("{source}: {err}")),
        check,
        shrinks: false,
        context: None,
    }
}

fn shrinking(pattern: Pattern) -> Pattern {
    Pattern {
        shrinks: true,
        ..pattern
    }
}

fn phone_digits(
    text: &str,
    digits: std::ops::RangeInclusive<usize>,
    confidence: f32,
) -> Option<f32> {
    let main = text.split(['x', 'X']).next().unwrap_or(text);
    let n = main.bytes().filter(u8::is_ascii_digit).count();
    digits.contains(&n).then_some(confidence)
}

/// Whether the value at `start..end` is not a line of a wrapped base64
/// block (a certificate, a public key, an attachment): such a line stands
/// alone on its line, and so does a line of the same alphabet beside it.
fn not_wrapped_base64(text: &str, start: usize, end: usize) -> bool {
    let alone = (start == 0 || text[..start].ends_with('\n'))
        && (end == text.len() || text[end..].starts_with(['\n', '\r']));
    if !alone {
        return true;
    }
    let base64_line = |line: &str| {
        let line = line.trim_end_matches('\r');
        line.len() >= 16
            && line
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    };
    let before = text[..start].trim_end_matches('\n').rsplit('\n').next();
    let after = text[end..]
        .trim_start_matches(['\r', '\n'])
        .split('\n')
        .next();
    !(before.is_some_and(base64_line) || after.is_some_and(base64_line))
}

pub static PATTERNS: LazyLock<Vec<Pattern>> = LazyLock::new(|| {
    vec![
        pattern(
            Kind::PrivateKey,
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?s:.{0,8192}?)(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|\z)",
            private_key_confidence,
        ),
        pattern(
            Kind::PrivateKey,
            // PuTTY's key files, through the private part's MAC.
            r"PuTTY-User-Key-File-[0-9]+: (?s:.{0,8192}?)Private-MAC: [0-9a-f]+",
            |_| Some(0.95),
        ),
        pattern(
            Kind::Credential,
            r"\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}|hf_[A-Za-z0-9]{30,}|xox[abprs]-[A-Za-z0-9-]{10,}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
            |text| (!is_placeholder(text)).then_some(0.95),
        ),
        Pattern {
            context: Some(not_wrapped_base64),
            ..pattern(
                Kind::Credential,
                // Unprefixed tokens: long, mixed, and random-looking. Bounded
                // both ways by characters a token cannot hold, so a base64 blob
                // (an image) is one long run, not a token; a `name=` before
                // one is not part of it.
                r"(?:^|[^A-Za-z0-9+/=_-])(?:[A-Za-z_][A-Za-z0-9_]{0,31}=)?([A-Za-z0-9+/_-][A-Za-z0-9+/=_-]{31,127})(?:$|[^A-Za-z0-9+/=_-])",
                token_confidence,
            )
        },
        pattern(
            Kind::Email,
            // Bounded before by a character an address cannot hold (a
            // group: a word boundary would not do for non-ASCII letters).
            // Unbounded repeats (a bounded one of a Unicode class is a large
            // automaton); the check holds the local part to 64 characters.
            r"(?:^|[^\p{L}\p{N}._%+-])([\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)*\.[A-Za-z]{2,24}\b)",
            |text| {
                let local = text.split('@').next().unwrap_or("");
                (local.chars().count() <= 64).then_some(0.95)
            },
        ),
        shrinking(pattern(
            Kind::Iban,
            r"(?i)\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b",
            |text| iban_valid(&text.to_ascii_uppercase()).then_some(0.95),
        )),
        shrinking(pattern(
            Kind::Card,
            r"\b(?:[0-9](?:[ -]?[0-9]){12,18}|[0-9]{4}(?:\.[0-9]{4}){2}\.[0-9]{1,7})\b",
            card_confidence,
        )),
        pattern(
            Kind::NationalId,
            // US social security numbers, written with hyphens.
            r"\b[0-9]{3}-[0-9]{2}-[0-9]{4}\b",
            |text| ssn_valid(text).then_some(0.85),
        ),
        pattern(
            Kind::NationalId,
            // UK National Insurance numbers.
            r"\b[A-Z]{2}(?: ?[0-9]{2}){3} ?[A-D]\b",
            |text| nino_valid(text).then_some(0.8),
        ),
        pattern(
            Kind::NationalId,
            // Brazil's CPF as written (ddd.ddd.ddd-dd), two check digits.
            r"\b[0-9]{3}\.[0-9]{3}\.[0-9]{3}-[0-9]{2}\b",
            |text| cpf_valid(text).then_some(0.9),
        ),
        pattern(
            Kind::NationalId,
            // Spain's DNI and NIE: the letter is the number mod 23.
            r"\b[XYZ0-9][0-9]{7}-?[A-Z]\b",
            |text| dni_valid(text).then_some(0.85),
        ),
        pattern(
            Kind::NationalId,
            // Italy's codice fiscale, its last letter a check character.
            r"\b[A-Z]{6}[0-9LMNPQRSTUV]{2}[A-EHLMPR-T][0-9LMNPQRSTUV]{2}[A-Z][0-9LMNPQRSTUV]{3}[A-Z]\b",
            |text| codice_fiscale_valid(text).then_some(0.9),
        ),
        pattern(
            Kind::NationalId,
            // France's social security number (NIR): 13 digits and a key
            // of 97 less their remainder mod 97.
            r"\b[1-478](?: ?[0-9]{2}){2} ?(?:[0-9]{2}|2[AB])(?: ?[0-9]{3}){2} ?[0-9]{2}\b",
            |text| insee_valid(text).then_some(0.85),
        ),
        pattern(
            Kind::Phone,
            // International form: + and a country code.
            r"\+[1-9][0-9]{0,2}[ .-]?(?:\([0-9]{1,4}\)[ .-]?)?[0-9]{1,4}(?:[ .-]?[0-9]{2,4}){2,4}\b",
            |text| phone_digits(text, 8..=15, 0.75),
        ),
        pattern(
            Kind::Phone,
            // North American: (xxx) xxx-xxxx, or three groups with one
            // separator throughout, an extension after.
            r"(?:\b(?:00?1[ .-]|1[ .-])?[2-9][0-9]{2}[ .-]|(?:\b1 )?\([2-9][0-9]{2}\) ?)[2-9][0-9]{2}[ .-][0-9]{4}(?: ?x[0-9]{1,6})?\b",
            |text| phone_digits(text, 10..=14, 0.7),
        ),
        pattern(
            Kind::Phone,
            // National forms with a trunk 0: an area code, then groups
            // (`020 7946 0087`, `(03449) 78690`, `02 29 58 90 62`,
            // `090-1586-8344`), or ten or eleven digits run together. Not
            // dots: `01.12.2024 10:30` is a date.
            r"(?:\(0[1-9][0-9]{1,4}\) ?[0-9]{3,8}|\b0[1-9][0-9]{0,4}[ -][0-9]{2,8}(?:[ -][0-9]{2,4}){0,3}|\b0[1-9][0-9]{8,9})\b",
            |text| phone_digits(text, 9..=12, 0.6),
        ),
        pattern(
            Kind::Ip,
            // Not a run of a longer dotted number (an OID, a version).
            r"(?:^|[^0-9.])((?:[0-9]{1,3}\.){3}[0-9]{1,3})(?:$|[^0-9.]|\.(?:$|[^0-9]))",
            |text| {
                text.parse::<std::net::Ipv4Addr>()
                    .ok()
                    .filter(|ip| !ip.is_unspecified())
                    .map(|_| 0.7)
            },
        ),
        pattern(
            Kind::Ip,
            r"(?i)(?:\b[0-9a-f]{1,4})?(?::[0-9a-f]{0,4}){2,7}(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}\b)?",
            |text| {
                let groups = text.split(':').filter(|g| !g.is_empty()).count();
                let ip = text.parse::<std::net::Ipv6Addr>().ok()?;
                (groups >= 2 && !ip.is_unspecified() && !ip.is_loopback()).then_some(0.8)
            },
        ),
    ]
});

/// The patterns at once: one pass says which can match anywhere, and only
/// those are run (most prompts hold no value of most kinds). Private keys
/// are left out (their long bounded bodies would make the set large) and
/// always run: each starts with a literal the search skips to.
pub static ANY: LazyLock<(RegexSet, Vec<usize>)> = LazyLock::new(|| {
    let in_set: Vec<usize> = (0..PATTERNS.len())
        .filter(|&i| PATTERNS[i].kind != Kind::PrivateKey)
        .collect();
    let set = RegexSet::new(in_set.iter().map(|&i| PATTERNS[i].regex.as_str()))
        .unwrap_or_else(|err| panic!("the patterns as a set: {err}"));
    (set, in_set)
});

/// The patterns that may match `text`, in order.
pub fn live(text: &str) -> Vec<&'static Pattern> {
    let (set, in_set) = &*ANY;
    let matched = set.matches(text);
    let mut live: Vec<usize> = matched.iter().map(|m| in_set[m]).collect();
    live.extend((0..PATTERNS.len()).filter(|i| !in_set.contains(i)));
    live.sort_unstable();
    live.into_iter().map(|i| &PATTERNS[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles() {
        assert_eq!(PATTERNS.len(), 18);
    }
}

#[cfg(test)]
mod timing {
    use super::*;

    #[test]
    #[ignore = "prints each pattern's time"]
    fn time_each_pattern() {
        let prose = "Hi team, the customer Jane Doe wrote in about order 88213 placed on 2026-11-30. She asks us to refund the card ending 1111 and to write to jane.doe@example.com; her phone is +44 20 7946 0958. ".repeat(300);
        let blob = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg".repeat(600);
        for text in [&prose, &blob] {
            for (i, p) in PATTERNS.iter().enumerate() {
                let t = std::time::Instant::now();
                let n = p.regex.find_iter(text).count();
                println!(
                    "{i} {:?} {n} {:?} per KiB",
                    p.kind,
                    t.elapsed() / (text.len() as u32 / 1024)
                );
            }
        }
    }
}
