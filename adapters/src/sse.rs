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
    /// The line still arriving: the bytes after the last line end fed.
    buf: BytesMut,
    /// Leading bytes of `buf` already searched for a line end: each byte is
    /// searched once, so a long line arriving in many pieces costs time in
    /// its length, not its length times its pieces.
    searched: usize,
    unfinished: Unfinished,
}

/// The event whose lines are being read.
#[derive(Debug, Default)]
struct Unfinished {
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

impl Unfinished {
    /// Reads the whole lines of `bytes`, the first line end searched for
    /// from `from` (the bytes before it hold none); pushes the events they
    /// complete. Returns where the unfinished line begins.
    fn read_lines(&mut self, bytes: &[u8], mut from: usize, out: &mut Vec<SseEvent>) -> usize {
        let mut start = 0;
        while let Some(at) = memchr::memchr(b'\n', &bytes[from..]) {
            let end = from + at;
            let mut line = &bytes[start..end];
            (start, from) = (end + 1, end + 1);
            while let [rest @ .., b'\r'] = line {
                line = rest;
            }
            self.read_line(line, out);
        }
        start
    }

    fn read_line(&mut self, line: &[u8], out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.data.is_some() || self.event.is_some() {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: self.data.take().unwrap_or_default(),
                });
            }
            return;
        }
        if line[0] == b':' {
            return; // comment / keep-alive
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
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes and returns every event they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        self.feed_into(chunk, &mut events);
        events
    }

    /// Adds bytes and pushes every event they complete onto `out`.
    ///
    /// Lines are read where they lie. With no unfinished line held (the
    /// usual case: a model server writes whole events), they are read from
    /// `chunk` itself and only its unfinished tail is kept; otherwise the
    /// chunk joins the held line and lines are read from the buffer, whose
    /// read bytes are dropped from its front once, after the last of them.
    pub fn feed_into(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        if self.buf.is_empty() {
            let start = self.unfinished.read_lines(chunk, 0, out);
            self.buf.extend_from_slice(&chunk[start..]);
        } else {
            self.buf.extend_from_slice(chunk);
            let start = self.unfinished.read_lines(&self.buf, self.searched, out);
            bytes::Buf::advance(&mut self.buf, start);
        }
        self.searched = self.buf.len();
    }

    /// Bytes of the unfinished event held: its data so far (as the event
    /// will carry it, with the line breaks that join its lines) and the
    /// line still arriving.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() + self.unfinished.data.as_ref().map_or(0, String::len)
    }

    /// Whether bytes of an unfinished event are buffered (a stream that ends
    /// here was cut short).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || self.unfinished.data.is_some()
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
    fn whole_events_are_read_from_the_piece_and_its_tail_kept() {
        let mut parser = SseParser::new();
        let mut out = vec![SseEvent {
            event: None,
            data: "earlier".into(),
        }];
        // Read straight from the piece (nothing held): two whole events and
        // the start of a third, which alone is kept.
        parser.feed_into(b"data: 1\n\ndata: 2\r\n\r\ndata: 3", &mut out);
        let data: Vec<&str> = out.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["earlier", "1", "2"]);
        assert_eq!(parser.pending_bytes(), "data: 3".len());
        // The held line goes on in the next piece, read from the buffer.
        parser.feed_into(b"4\n\ndata: 5\n", &mut out);
        assert_eq!(out[3].data, "34");
        assert!(parser.has_partial());
        parser.feed_into(b"\n", &mut out);
        assert_eq!(out[4].data, "5");
        assert!(!parser.has_partial());
        assert_eq!(parser.pending_bytes(), 0);
    }

    #[test]
    fn encodes_data_events() {
        assert_eq!(&data_event(b"{}")[..], b"data: {}\n\n");
    }
}
