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
    data: Vec<String>,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds bytes and returns every event they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        self.buf.extend_from_slice(chunk);
        let mut events = Vec::new();
        while let Some(at) = self.buf[self.searched..].iter().position(|&b| b == b'\n') {
            let end = self.searched + at;
            self.searched = 0;
            let line = self.buf.split_to(end + 1);
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if !self.data.is_empty() || self.event.is_some() {
                    events.push(SseEvent {
                        event: self.event.take(),
                        data: std::mem::take(&mut self.data).join("\n"),
                    });
                }
                continue;
            }
            if line.starts_with(':') {
                continue; // comment / keep-alive
            }
            let (field, value) = match line.split_once(':') {
                Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
                None => (line, ""),
            };
            match field {
                "data" => self.data.push(value.to_owned()),
                "event" => self.event = Some(value.to_owned()),
                _ => {} // id, retry: not used by model servers
            }
        }
        self.searched = self.buf.len();
        events
    }

    /// Bytes of the unfinished event held: its complete lines and the line
    /// still arriving.
    pub fn pending_bytes(&self) -> usize {
        self.buf.len() + self.data.iter().map(String::len).sum::<usize>()
    }

    /// Whether bytes of an unfinished event are buffered (a stream that ends
    /// here was cut short).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty() || !self.data.is_empty()
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
