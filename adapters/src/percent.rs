//! Percent-encoding, as providers' wires need it: a model's name as one
//! path segment, a path as SigV4 signs it, a form's values.

/// RFC 3986's unreserved characters, never encoded.
pub fn unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~')
}

/// `text` with every byte `keep` refuses written as `%XX`.
pub fn encode(text: &str, keep: impl Fn(u8) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if keep(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_not_kept_is_encoded() {
        assert_eq!(encode("a b/c:d~", unreserved), "a%20b%2Fc%3Ad~");
        assert_eq!(encode("a/b%3A", |b| unreserved(b) || b == b'/'), "a/b%253A");
        assert_eq!(encode("é", unreserved), "%C3%A9");
    }
}
