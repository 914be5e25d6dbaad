//! The checks a candidate passes before it is a finding: the check digits
//! its kind carries, the ranges its issuers use, or how random it looks.

/// The Luhn check (ISO/IEC 7812) over the digits of `text`, separators
/// ignored.
pub fn luhn_valid(text: &str) -> bool {
    let digits: Vec<u32> = text.chars().filter_map(|c| c.to_digit(10)).collect();
    if digits.len() < 2 {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| match (i % 2, d * 2) {
            (0, _) => d,
            (_, doubled) if doubled > 9 => doubled - 9,
            (_, doubled) => doubled,
        })
        .sum();
    sum.is_multiple_of(10)
}

/// A card number's confidence: Luhn-valid, of a length cards have, with an
/// issuer prefix of the major networks (Visa 4, Mastercard 51-55 and
/// 2221-2720, American Express 34/37, Discover 6011/65, JCB 35, Diners
/// 36/38, UnionPay 62). Order numbers and timestamps pass Luhn one time in
/// ten; the prefix and length rules keep most of them out.
pub fn card_confidence(text: &str) -> Option<f32> {
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    if !(13..=19).contains(&digits.len()) || !luhn_valid(&digits) {
        return None;
    }
    let prefix = |n: usize| digits[..n].parse::<u32>().unwrap_or(0);
    let network = match digits.as_bytes()[0] {
        b'4' => matches!(digits.len(), 13 | 16 | 19),
        b'5' => (51..=55).contains(&prefix(2)) && digits.len() == 16,
        b'2' => (2221..=2720).contains(&prefix(4)) && digits.len() == 16,
        b'3' => match prefix(2) {
            34 | 37 => digits.len() == 15,
            35 => (16..=19).contains(&digits.len()),
            36 | 38 => (14..=19).contains(&digits.len()),
            _ => false,
        },
        b'6' => (prefix(4) == 6011 || prefix(2) == 65 || prefix(2) == 62) && digits.len() >= 16,
        _ => false,
    };
    network.then_some(0.9)
}

/// The IBAN check (ISO 13616, ISO 7064 mod 97-10) of `text`, spaces
/// ignored: the country's letters and check digits moved to the end,
/// letters as 10 to 35, the number mod 97 is 1.
pub fn iban_valid(text: &str) -> bool {
    let compact: Vec<u8> = text.bytes().filter(|b| *b != b' ').collect();
    if !(15..=34).contains(&compact.len()) {
        return false;
    }
    let (head, rest) = compact.split_at(4);
    let mut remainder: u32 = 0;
    for &b in rest.iter().chain(head) {
        let value = match b {
            b'0'..=b'9' => u32::from(b - b'0'),
            b'A'..=b'Z' => u32::from(b - b'A') + 10,
            _ => return false,
        };
        let width = if value >= 10 { 100 } else { 10 };
        remainder = (remainder * width + value) % 97;
    }
    remainder == 1
}

/// A US social security number as issued: area not 000, 666 or 900-999,
/// group not 00, serial not 0000.
pub fn ssn_valid(text: &str) -> bool {
    let mut parts = text.split('-').map(|p| p.parse::<u32>().unwrap_or(0));
    let (Some(area), Some(group), Some(serial)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// Shannon entropy of `text`'s characters, bits per character.
pub fn entropy_bits(text: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in text.bytes() {
        counts[usize::from(b)] += 1;
    }
    let n = text.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

/// Upper and lower case letters and digits all present: a generated secret
/// rather than a word, a hex hash or an identifier.
pub fn token_mixes_classes(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_uppercase())
        && text.bytes().any(|b| b.is_ascii_lowercase())
        && text.bytes().any(|b| b.is_ascii_digit())
}
