//! Chat requests, answers and chunks read without serde's machinery, for the
//! shapes clients and servers send nearly every time.
//!
//! serde_json spends most of a body's reading on its general machinery: a
//! 210-byte chunk took about 5,400 instructions to read into a
//! [`ChatChunk`](crate::types::ChatChunk) (3,000 only to walk it), a third
//! of what the gateway does for each event it relays. These readers walk the
//! bytes once and build the value as they go (a value they hand to serde is
//! walked twice: once to find its end, once by serde).
//!
//! - The fields the types model they read themselves, where the value has
//!   the kind the type expects (a known field with another kind, such as
//!   `"created": 1.5`, is declined).
//! - Values the types leave as JSON (unknown fields, timings) they read
//!   themselves when the value is a string without a `\u` escape, a
//!   non-negative integer, a non-negative fraction of up to 19 digits
//!   without an exponent (to the bit as serde reads it), `true`, `false` or
//!   `null`. Other values (objects, arrays, exponents, negative numbers,
//!   log probabilities) and fields they do not read themselves (tool calls,
//!   content parts) are found by their brackets and strings and handed to
//!   serde alone, so serde reads them.
//! - They decline (return `None`) what they cannot read exactly as serde
//!   would: keys with escapes, duplicate fields, anything malformed.
//!
//! The caller then reads the whole body with serde, which gives the value or
//! the error it always gave: declining costs a second read and never
//! changes a result. The tests hold the three readers to serde's results on
//! bodies from real servers, on deletions and insertions at each of their
//! characters, and on generated bodies, valid and broken.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types::{ANSWER_OBJECT, CHUNK_OBJECT, Extra, Role, Timings, Usage};

mod answer;
mod chunk;
mod request;

pub(crate) use answer::read_answer;
pub(crate) use chunk::read_chunk;
pub(crate) use request::read_chat_request;

/// How deep a value handed to serde may nest. serde_json refuses a document
/// nested 128 deep, counted from the top, and a value read alone would be
/// counted from itself; the readers' own nesting is at most 4 (an answer,
/// its choices, a choice, its message), and 100 + 4 stays below 128.
const DEEPEST: usize = 100;

/// `text` read by `read` from its start, when nothing but white space
/// follows what it read.
fn whole<'a, T>(text: &'a str, read: impl FnOnce(&mut Cursor<'a>) -> Option<T>) -> Option<T> {
    let mut cursor = Cursor { text, at: 0 };
    let value = read(&mut cursor)?;
    cursor.skip_space();
    (cursor.at == text.len()).then_some(value)
}

/// The top fields a whole answer and a chunk share, as serde's visitor
/// holds them: `None` until read, then `Some` (of `None` for a null).
struct Top<C> {
    id: Option<String>,
    object: Option<Cow<'static, str>>,
    created: Option<u64>,
    model: Option<String>,
    choices: Option<Vec<C>>,
    usage: Option<Option<Usage>>,
    fingerprint: Option<Option<String>>,
    /// Boxed as both types keep it: unboxed, its eleven values made this
    /// 350 bytes larger, copied with it for every chunk.
    timings: Option<Option<Box<Timings>>>,
    extra: Extra,
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

/// Sets `slot` to `value` unless the field was read already: serde refuses
/// a duplicate field, so this declines it.
fn once<T>(slot: &mut Option<T>, value: Option<T>) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value?);
    Some(())
}

impl<'a> Cursor<'a> {
    /// An answer's or a chunk's object, each choice read by `choice`.
    fn top<C>(&mut self, mut choice: impl FnMut(&mut Self) -> Option<C>) -> Option<Top<C>> {
        let mut top = Top {
            id: None,
            object: None,
            created: None,
            model: None,
            choices: None,
            usage: None,
            fingerprint: None,
            timings: None,
            extra: Extra::new(),
        };
        self.members(|c, key| match key {
            "id" => once(&mut top.id, c.string()),
            "object" => once(&mut top.object, c.object()),
            "created" => once(&mut top.created, c.unsigned()),
            "model" => once(&mut top.model, c.string()),
            "choices" => once(&mut top.choices, c.list(1, &mut choice)),
            "usage" => once(&mut top.usage, c.or_null(Self::usage)),
            "system_fingerprint" => once(&mut top.fingerprint, c.string_or_null()),
            "timings" => once(&mut top.timings, c.or_null(|c| c.timings().map(Box::new))),
            _ => c.extra(&mut top.extra, key),
        })?;
        Some(top)
    }

    /// An `object`: the two OpenAI sends (an answer's and a chunk's) as
    /// the constants they are, without a copy each time; any other as
    /// `string` reads it.
    fn object(&mut self) -> Option<Cow<'static, str>> {
        let text = self.text()?;
        Some(match &*text {
            CHUNK_OBJECT => Cow::Borrowed(CHUNK_OBJECT),
            ANSWER_OBJECT => Cow::Borrowed(ANSWER_OBJECT),
            _ => Cow::Owned(text.into_owned()),
        })
    }

    /// A role as serde's derive reads it.
    fn role(&mut self) -> Option<Role> {
        Role::from_name(&self.string_value()?)
    }

    /// An unknown field's value, into `extra`.
    fn extra(&mut self, extra: &mut Extra, key: &str) -> Option<()> {
        let value = self.value()?;
        // A repeated unknown field replaces the first, as serde's map does.
        extra.insert(key.to_owned(), value);
        Some(())
    }

    /// Any value: a string, a non-negative integer, `true`, `false` or
    /// `null` read here, anything else by serde.
    fn value(&mut self) -> Option<Value> {
        Some(match self.peek()? {
            b'"' => Value::String(self.string()?),
            b'n' => self.null().map(|()| Value::Null)?,
            b't' => self.word("true").map(|()| Value::Bool(true))?,
            b'f' => self.word("false").map(|()| Value::Bool(false))?,
            b'0'..=b'9' => {
                let start = self.at;
                match self.unsigned() {
                    Some(number) => Value::from(number),
                    // A fraction, an exponent, past u64 (serde reads it as
                    // a float), or a leading 0 (serde refuses it).
                    None => {
                        self.at = start;
                        match self.fraction() {
                            Some(fraction) => Value::from(fraction),
                            None => {
                                self.at = start;
                                self.by_serde()?
                            }
                        }
                    }
                }
            }
            _ => self.by_serde()?,
        })
    }

    /// The value ahead read by serde, alone: its end found by its brackets
    /// and strings, what lies between checked by serde.
    fn by_serde<T: DeserializeOwned>(&mut self) -> Option<T> {
        self.skip_space();
        let start = self.at;
        self.skip_value()?;
        serde_json::from_str(&self.text[start..self.at]).ok()
    }

    /// Moves past the value ahead, to where it would end if well formed
    /// (serde checks it): a string, brackets and what they hold, or up to
    /// the next delimiter.
    fn skip_value(&mut self) -> Option<()> {
        let bytes = self.text.as_bytes();
        let mut depth = 0;
        loop {
            match *bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    loop {
                        self.at += string_stop(bytes.get(self.at..)?)?;
                        match bytes[self.at] {
                            b'"' => break,
                            b'\\' => self.at += 2,
                            _ => return None,
                        }
                    }
                    self.at += 1;
                }
                b'{' | b'[' => {
                    depth += 1;
                    if depth > DEEPEST {
                        return None;
                    }
                    self.at += 1;
                    continue;
                }
                b'}' | b']' if depth > 0 => {
                    depth -= 1;
                    self.at += 1;
                }
                b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(()),
                _ => {
                    self.at += 1;
                    continue;
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    /// An array, each element read by `item`, in a vector made with room
    /// for `room` of them once the first is read: sized for what the list
    /// nearly always holds (one choice), a vector is allocated once, rather
    /// than grown from none (about 200 instructions a chunk).
    fn list<T>(
        &mut self,
        room: usize,
        mut item: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(Vec::new());
        }
        let mut items = Vec::with_capacity(room);
        loop {
            items.push(item(self)?);
            match self.next()? {
                b',' => {}
                b']' => return Some(items),
                _ => return None,
            }
        }
    }

    /// A non-negative integer that fits a `u32` (a choice's index, a token
    /// limit).
    fn unsigned_32(&mut self) -> Option<u32> {
        self.unsigned().and_then(|n| u32::try_from(n).ok())
    }

    /// `null`, or what `read` reads.
    fn or_null<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.peek()? == b'n' {
            return self.null().map(|()| None);
        }
        read(self).map(Some)
    }

    /// An object: `member` reads the value of each key. Keys with escapes
    /// are declined.
    fn members(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = match self.string_value()? {
                Cow::Borrowed(key) => key,
                Cow::Owned(_) => return None,
            };
            self.expect(b':')?;
            member(self, key)?;
            match self.next()? {
                b',' => {}
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A string value; one with a `\u` escape read by serde.
    fn string(&mut self) -> Option<String> {
        self.text().map(Cow::into_owned)
    }

    /// A string value, borrowed when it has no escapes; one with a `\u`
    /// escape read by serde.
    #[inline(always)]
    fn text(&mut self) -> Option<Cow<'a, str>> {
        let start = self.at;
        match self.string_value() {
            Some(text) => Some(text),
            None => {
                self.at = start;
                self.by_serde().map(Cow::Owned)
            }
        }
    }

    fn string_or_null(&mut self) -> Option<Option<String>> {
        self.or_null(Self::string)
    }

    /// A string, borrowed when it has no escapes. Declines `\u` escapes
    /// (serde refuses unpaired surrogates) and raw control characters
    /// (which JSON does not allow in a string).
    #[inline(always)]
    fn string_value(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.at;
        let end = start + string_stop(&self.text.as_bytes()[start..])?;
        if self.text.as_bytes()[end] == b'"' {
            self.at = end + 1;
            return Some(Cow::Borrowed(&self.text[start..end]));
        }
        self.escaped(start, end).map(Cow::Owned)
    }

    /// The rest of a string from `end`, where its first escape or control
    /// character is; `start` is where it began.
    #[cold]
    fn escaped(&mut self, start: usize, mut end: usize) -> Option<String> {
        let bytes = self.text.as_bytes();
        let mut text = String::from(&self.text[start..end]);
        loop {
            match bytes[end] {
                b'"' => {
                    self.at = end + 1;
                    return Some(text);
                }
                b'\\' => {
                    text.push(match bytes.get(end + 1)? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        _ => return None,
                    });
                    let from = end + 2;
                    end = from + string_stop(&bytes[from..])?;
                    text.push_str(&self.text[from..end]);
                }
                _ => return None,
            }
        }
    }

    /// A non-negative integer that fits a `u64`, as JSON writes it (no
    /// leading zeros); declines a fraction or an exponent.
    fn unsigned(&mut self) -> Option<u64> {
        self.skip_space();
        let bytes = self.text.as_bytes();
        let first = self.at;
        let mut number: u64 = 0;
        let digits = self.digits(&mut number)?;
        if digits == 0 || (digits > 1 && bytes[first] == b'0') {
            return None;
        }
        if matches!(bytes.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(number)
    }

    /// The decimal digits ahead, appended to `number`; how many there were.
    /// Declines a number past `u64`.
    fn digits(&mut self, number: &mut u64) -> Option<usize> {
        let bytes = self.text.as_bytes();
        let from = self.at;
        while let Some(&byte) = bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            *number = number
                .checked_mul(10)?
                .checked_add(u64::from(byte - b'0'))?;
            self.at += 1;
        }
        Some(self.at - from)
    }

    /// A non-negative number with a fraction and no exponent, of at most
    /// 19 digits, to the bit as serde_json reads it (without its
    /// `float_roundtrip` feature): its digits as one integer, made a float
    /// and divided by the power of ten its fraction's digits make. Declines
    /// a leading zero before a digit, an exponent, and more digits (serde's
    /// integer could overflow and take another path).
    fn fraction(&mut self) -> Option<f64> {
        /// Powers of ten up to 1e19, each exact in an `f64` (as is every
        /// power up to 1e22), as serde_json's table has them.
        const POWERS: [f64; 20] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19,
        ];
        let bytes = self.text.as_bytes();
        let first = self.at;
        let mut significand: u64 = 0;
        let whole = self.digits(&mut significand)?;
        if whole == 0 || (whole > 1 && bytes[first] == b'0') || bytes.get(self.at) != Some(&b'.') {
            return None;
        }
        self.at += 1;
        let places = self.digits(&mut significand)?;
        if places == 0 || whole + places > 19 || matches!(bytes.get(self.at), Some(b'e' | b'E')) {
            return None;
        }
        Some(significand as f64 / POWERS[places])
    }

    /// A number as an `f64`: a fraction read here, any other by serde.
    fn float(&mut self) -> Option<f64> {
        let start = self.at;
        self.fraction().or_else(|| {
            self.at = start;
            self.by_serde()
        })
    }

    fn null(&mut self) -> Option<()> {
        self.word("null")
    }

    fn word(&mut self, word: &str) -> Option<()> {
        self.skip_space();
        let rest = self.text.get(self.at..)?;
        rest.starts_with(word).then(|| self.at += word.len())
    }

    /// The next byte after white space, taken.
    #[inline(always)]
    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    /// The next byte after white space, left in place. Nearly always the
    /// next byte is no space: one load and one comparison say so, where
    /// going through `skip_space` loaded it twice, each with its bounds
    /// check (about a tenth of a streamed chunk's reading).
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        match self.text.as_bytes().get(self.at) {
            Some(&byte) if byte > b' ' => Some(byte),
            _ => self.peek_past_space(),
        }
    }

    /// `peek` where the next byte may be white space (or there is none).
    #[inline(never)]
    fn peek_past_space(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.as_bytes().get(self.at).copied()
    }

    #[inline(always)]
    fn skip_space(&mut self) {
        let bytes = self.text.as_bytes();
        // Nearly always the next byte is no space: one comparison says so.
        while let Some(&byte) = bytes.get(self.at) {
            if byte > b' ' || !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.at += 1;
        }
    }
}

/// Where in `bytes` the first `"`, `\` or control character is, eight
/// bytes at a time while eight remain (most of a chunk's strings end within
/// the first eight).
#[inline(always)]
pub(super) fn string_stop(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    /// The high bit of each byte of `word` that is zero; above the lowest
    /// such byte, others may be marked that are not.
    fn zero_bytes(word: u64) -> u64 {
        word.wrapping_sub(ONES) & !word & HIGH_BITS
    }
    let mut at = 0;
    while let Some(eight) = bytes.get(at..at + 8) {
        let mut word = [0; 8];
        word.copy_from_slice(eight);
        let word = u64::from_le_bytes(word);
        let stops = zero_bytes(word ^ (ONES * u64::from(b'"')))
            | zero_bytes(word ^ (ONES * u64::from(b'\\')))
            // Below 0x20: the subtraction borrows into the high bit.
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGH_BITS);
        if stops != 0 {
            return Some(at + (stops.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes[at..]
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(at + rest)
}

#[cfg(test)]
pub(super) mod tests;
