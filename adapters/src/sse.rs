//! Server-sent events: an incremental parser for upstream streams and the
//! encoder for what we send downstream.

use bytes::{Bytes, BytesMut};

/// One event: its `event:` name (if any) and its `data:` lines joined by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: Option<String>,
    pub data: String,
}

/// Incremental SSE parser: feed bytes as they arrive, take whole events out.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: BytesMut,
    /// Leading bytes of `buf` already searched for a line end: each byte is
    /// searched once, so a long line arriving in many pieces costs time in
    /// its length, not its length times its pieces.
    searched: usize,
    event: Option<String>,
    /// The event's `data:` lines so far, joined by `\n` as they come.
    data: Option<String>,
}

/// A line's text. Nearly always valid UTF-8, checked by the standard
/// library's fast check; only bytes that are not get the replacement
/// character (`from_utf8_lossy` checks byte by byte even when all are
/// valid, about 1,700 instructions a chat chunk in callgrind's count).
fn text(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes and returns every event they complete.
    ///
    /// Lines are read where they lie in the buffer, and the bytes they
    /// took are dropped from its front once, after the last of them.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.searched;
        while let Some(at) = memchr::memchr(b'\n', &self.buf[from..]) {
            let end = from + at;
            let mut line = &self.buf[start..end];
            (start, from) = (end + 1, end + 1);
            while let [rest @ .., b'\r'] = line {
                line = rest;
            }
            if line.is_empty() {
                if self.data.is_some() || self.event.is_some() {
                    events.push(SseEvent {
                        event: self.event.take(),
                        data: self.data.take().unwrap_or_default(),
                    });
                }
                continue;
            }
            if line[0] == b':' {
                continue; // comment / keep-alive
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &b""[..]),
            };
            match field {
                b"data" => match &mut self.data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(&text(value));
                    }
                    None => self.data = Some(text(value).into_owned()),
                },
                b"event" => self.event = Some(text(value).into_owned()),
                _ => {} // id, retry: not used by model servers
            }
        }
        bytes::Buf::advance(&mut self.buf, start);
        self.searched = self.buf.len();
        events
    }

    /// Bytes of the unfinished event held: its data so far (as the event
    /// will carry it, with the line breaks that join its lines) and the
    /// line still arriving.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() + self.data.as_ref().map_or(0, String::len)
    }

    /// Whether bytes of an unfinished event are buffered (a stream that ends
    /// here was cut short).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.data.is_some()
    }
}

/// `data: <json>\n\n`.
pub fn data_event(json: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// `event: <name>\ndata: <json>\n\n`, as Anthropic streams are framed.
pub fn named_event(name: &str, json: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(json.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(json);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// The OpenAI end-of-stream marker.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_split_across_chunks() {
        let mut p = SseParser::new();
        assert!(p.feed(b"data: {\"a\"").is_empty());
        assert!(p.has_partial());
        let events = p.feed(b":1}\r\n\r\n: ping\n\nevent: x\ndata: 1\ndata: 2\n\n");
        assert_eq!(
            events,
            vec![
                SseEvent {
                    event: None,
                    data: "{\"a\":1}".into()
                },
                SseEvent {
                    event: Some("x".into()),
                    data: "1\n2".into()
                },
            ]
        );
        assert!(!p.has_partial());
    }

    #[test]
    fn text_is_read_per_whole_line() {
        let mut parser = SseParser::new();
        // A character cut between two pieces is read whole; bytes that are
        // no character become the replacement character.
        assert!(parser.feed(b"data: caf\xc3").is_empty());
        let events = parser.feed(b"\xa9 \xff\r\nevent: n\xc3\xa9\n\n");
        assert_eq!(
            events,
            vec![SseEvent {
                event: Some("n\u{e9}".into()),
                data: "caf\u{e9} \u{fffd}".into()
            }]
        );
        // A field without a colon, and an empty data line, as the SSE
        // specification reads them.
        let events = parser.feed(b"data\ndata:\ndata:x\n\n");
        assert_eq!(events[0].data, "\n\nx");
        assert!(!parser.has_partial());
    }

    #[test]
    fn a_long_line_in_many_pieces_is_searched_once() {
        let mut parser = SseParser::new();
        for _ in 0..1000 {
            assert!(parser.feed(b"xxxxxxxxxx").is_empty());
            // Everything held has been searched: the next piece is searched
            // from where this one ended, not from the line's start.
            assert_eq!(parser.searched, parser.buf.len());
        }
        let events = parser.feed(b"\ndata: done\n\n");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "done");
        assert_eq!(parser.searched, 0);
    }

    #[test]
    fn an_unfinished_event_is_counted_while_it_arrives() {
        let mut parser = SseParser::new();
        assert!(parser.feed(b"data: 12345\ndata: 67").is_empty());
        assert_eq!(parser.pending_bytes(), "12345".len() + "data: 67".len());
        assert_eq!(parser.feed(b"\n\n").len(), 1);
        assert_eq!(parser.pending_bytes(), 0);
    }

    #[test]
    fn encodes_data_events() {
        assert_eq!(&data_event(b"{}")[..], b"data: {}\n\n");
    }
}
