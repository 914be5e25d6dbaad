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

/// A value a document shows in place of a real one (`sk-xxxx…`,
/// `xoxb-your-token`): a secret's text with few distinct characters, or
/// the words such stand-ins use.
pub fn is_placeholder(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    let mut seen = [false; 256];
    for b in text.bytes() {
        seen[usize::from(b)] = true;
    }
    seen.iter().filter(|s| **s).count() < 10
        || [
            "your",
            "xxxx",
            "placeholder",
            "redacted",
            "changeme",
            "dummy",
            "here",
        ]
        .iter()
        .any(|w| lower.contains(w))
}

/// An unprefixed token's confidence: mixed classes and random-looking,
/// and none of the long runs that are not secrets: a subresource
/// integrity hash (`sha384-…`), a line of wrapped base64 (a certificate's,
/// a public key's: 64 or 76 characters with `+` or `/`), a UUID, a path,
/// public key material, base64 that decodes to text.
pub fn token_confidence(token: &str) -> Option<f32> {
    let wrapped_line =
        matches!(token.len(), 64 | 76) && token.bytes().any(|b| b == b'+' || b == b'/');
    let integrity = ["sha256-", "sha384-", "sha512-"]
        .iter()
        .any(|p| token.starts_with(p));
    let uuid = token.len() == 36
        && token.bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                b == b'-'
            } else {
                b.is_ascii_hexdigit()
            }
        });
    // Public material in base64: an SSH public key (its wire form starts
    // `AAAA`), a certificate or public key in DER (`MII`), or text.
    let public = token.starts_with("AAAA") || token.starts_with("MII") || base64_of_text(token);
    (!wrapped_line
        && !integrity
        && !uuid
        && !public
        && !token.starts_with('/')
        && !is_placeholder(token)
        && token_mixes_classes(token)
        && entropy_bits(token) >= 4.3)
        .then_some(0.6)
}

/// A private key block's confidence: one with a body of key material, not
/// a stand-in (`(your key here)`).
pub fn private_key_confidence(block: &str) -> Option<f32> {
    let body = block.split("-----").nth(2).unwrap_or("");
    let material = body
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
        .count();
    (material >= 16 && !is_placeholder(body)).then_some(0.99)
}

/// Whether `token` is standard base64 of text (a sentence encoded, not a
/// key): decoded, it is UTF-8 and nine characters in ten are printable.
fn base64_of_text(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    if !token.len().is_multiple_of(4) || body.len() < 16 {
        return false;
    }
    let mut bits: u32 = 0;
    let mut held = 0;
    let mut bytes = Vec::with_capacity(body.len() * 3 / 4);
    for b in body.bytes() {
        let value = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return false,
        };
        bits = (bits << 6) | u32::from(value);
        held += 6;
        if held >= 8 {
            held -= 8;
            bytes.push((bits >> held) as u8);
        }
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return false;
    };
    let (all, printable) = text.chars().fold((0, 0), |(all, printable), c| {
        (
            all + 1,
            printable + usize::from(!c.is_control() || c == '\n'),
        )
    });
    all > 0 && printable * 10 >= all * 9
}
