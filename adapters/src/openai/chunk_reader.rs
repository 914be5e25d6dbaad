//! A streamed chat chunk read without serde, for the shape model servers
//! send nearly every event in: known fields, one-line deltas, plain values.
//!
//! serde_json spends most of a chunk's reading on its general machinery: a
//! 210-byte chunk took about 5,400 instructions to read into a
//! [`ChatChunk`] (3,000 only to walk it), a third of what the gateway does
//! for each event it relays. This reader walks the bytes once and builds
//! the chunk as it goes, about 1,300 instructions a chunk fewer (a streamed
//! answer of 19 events: 409,106 instructions a request to 385,515,
//! `COUNT_STREAM=1 scripts/count-instructions.sh`). It takes only what it reads exactly as serde does
//! and declines everything else (returns `None`): tool-call deltas,
//! log-probabilities, usage and timings objects, `\u` escapes, numbers
//! other than non-negative integers, nested unknown fields, duplicate
//! fields, anything malformed. The caller then reads the chunk with serde,
//! which gives the answer or the error it always gave, so declining costs a
//! second read and never changes a result. Its tests hold it to serde's
//! results on generated chunks, valid and broken.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::IntoDeserializer;
use serde::de::value::Error as ValueError;
use serde_json::Value;

use crate::types::{ChatChunk, ChunkChoice, Delta, Extra, Role};

/// `text` read as a chat chunk, when it has the common shape (see above).
pub(crate) fn read(text: &str) -> Option<ChatChunk> {
    let mut cursor = Cursor { text, at: 0 };
    let chunk = cursor.chunk()?;
    cursor.skip_space();
    (cursor.at == text.len()).then_some(chunk)
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
    fn chunk(&mut self) -> Option<ChatChunk> {
        let (mut id, mut object, mut created, mut model, mut choices) =
            (None, None, None, None, None);
        let (mut usage, mut fingerprint, mut timings) = (None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "id" => once(&mut id, c.string()),
            "object" => once(&mut object, c.string()),
            "created" => once(&mut created, c.unsigned()),
            "model" => once(&mut model, c.string()),
            "choices" => once(&mut choices, c.choices()),
            "usage" => once(&mut usage, c.null()),
            "system_fingerprint" => once(&mut fingerprint, c.string_or_null()),
            "timings" => once(&mut timings, c.null()),
            _ => c.extra(&mut extra, key),
        })?;
        let spec_fields_sent =
            object.is_some() && created.is_some() && model.is_some() && choices.is_some();
        Some(ChatChunk {
            id: id?,
            object: object.unwrap_or_else(|| "chat.completion.chunk".to_owned()),
            created: created.unwrap_or_default(),
            model: model.unwrap_or_default(),
            choices: choices.unwrap_or_default(),
            usage_sent: usage.is_some(),
            usage: None,
            system_fingerprint: fingerprint.flatten(),
            timings: None,
            extra,
            verbatim: None,
            spec_fields_sent,
        })
    }

    fn choices(&mut self) -> Option<Vec<ChunkChoice>> {
        let mut choices = Vec::new();
        self.expect(b'[')?;
        if self.peek()? == b']' {
            self.at += 1;
            return Some(choices);
        }
        loop {
            choices.push(self.choice()?);
            match self.next()? {
                b',' => {}
                b']' => return Some(choices),
                _ => return None,
            }
        }
    }

    fn choice(&mut self) -> Option<ChunkChoice> {
        let (mut index, mut delta, mut finish, mut logprobs) = (None, None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "index" => once(&mut index, c.unsigned().and_then(|n| u32::try_from(n).ok())),
            "delta" => once(&mut delta, c.delta()),
            "finish_reason" => once(&mut finish, c.string_or_null()),
            "logprobs" => once(&mut logprobs, c.null()),
            _ => c.extra(&mut extra, key),
        })?;
        let spec_fields_sent = index.is_some() && delta.is_some() && finish.is_some();
        Some(ChunkChoice {
            index: index.unwrap_or_default(),
            delta: delta.unwrap_or_default(),
            finish_reason: finish.flatten(),
            logprobs: None,
            extra,
            spec_fields_sent,
        })
    }

    fn delta(&mut self) -> Option<Delta> {
        let (mut role, mut content, mut tool_calls) = (None, None, None);
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "role" => once(&mut role, c.role()),
            "content" => once(&mut content, c.string_or_null()),
            "tool_calls" => once(&mut tool_calls, c.null()),
            _ => c.extra(&mut extra, key),
        })?;
        Some(Delta {
            role: role.flatten(),
            content: content.flatten(),
            tool_calls: None,
            extra,
        })
    }

    /// A role as serde's derive reads it, or `null`.
    fn role(&mut self) -> Option<Option<Role>> {
        if self.peek()? == b'n' {
            return self.null().map(|()| None);
        }
        let name = self.string_value()?;
        let role = Role::deserialize(IntoDeserializer::<ValueError>::into_deserializer(&*name));
        role.ok().map(Some)
    }

    /// An unknown field's value, into `extra`: a string, a non-negative
    /// integer, `true`, `false` or `null`.
    fn extra(&mut self, extra: &mut Extra, key: &str) -> Option<()> {
        let value = match self.peek()? {
            b'"' => Value::String(self.string()?),
            b'n' => self.null().map(|()| Value::Null)?,
            b't' => self.word("true").map(|()| Value::Bool(true))?,
            b'f' => self.word("false").map(|()| Value::Bool(false))?,
            _ => Value::from(self.unsigned()?),
        };
        // A repeated unknown field replaces the first, as serde's map does.
        extra.insert(key.to_owned(), value);
        Some(())
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

    fn string(&mut self) -> Option<String> {
        self.string_value().map(Cow::into_owned)
    }

    fn string_or_null(&mut self) -> Option<Option<String>> {
        if self.peek()? == b'n' {
            return self.null().map(|()| None);
        }
        self.string().map(Some)
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
        while let Some(&byte) = bytes.get(self.at).filter(|b| b.is_ascii_digit()) {
            number = number
                .checked_mul(10)?
                .checked_add(u64::from(byte - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - first;
        if digits == 0 || (digits > 1 && bytes[first] == b'0') {
            return None;
        }
        if matches!(bytes.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(number)
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

    /// The next byte after white space, left in place.
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.skip_space();
        self.text.as_bytes().get(self.at).copied()
    }

    #[inline(always)]
    fn skip_space(&mut self) {
        let bytes = self.text.as_bytes();
        while matches!(bytes.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }
}

/// Where in `bytes` the first `"`, `\` or control character is, eight
/// bytes at a time while eight remain (most of a chunk's strings end within
/// the first eight).
#[inline(always)]
fn string_stop(bytes: &[u8]) -> Option<usize> {
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
mod tests;
