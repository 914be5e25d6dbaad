//! AWS's event-stream framing (`application/vnd.amazon.eventstream`), as
//! ConverseStream sends it, decoded incrementally: each message is
//! `total_length u32 | headers_length u32 | prelude_crc u32 | headers |
//! payload | message_crc u32`, big-endian, the CRCs CRC-32 (IEEE). A
//! message's length is checked against the bound before any of it is
//! held, and its CRCs before it is read.

/// One decoded message: its string headers and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub headers: Vec<(String, String)>,
    pub payload: Vec<u8>,
}

impl Message {
    /// A string header's value (`:event-type`, `:message-type`, ...).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

const PRELUDE: usize = 12;
/// Prelude and the message CRC: the smallest message there is.
const OVERHEAD: usize = PRELUDE + 4;

/// Bytes in, messages out.
#[derive(Debug)]
pub struct Parser {
    buffer: Vec<u8>,
    max_message_bytes: usize,
}

impl Parser {
    pub fn new(max_message_bytes: usize) -> Self {
        Parser {
            buffer: Vec::new(),
            max_message_bytes,
        }
    }

    /// The messages `data` completes. A malformed or oversized message is
    /// an error, after which the stream cannot be read on.
    pub fn feed(&mut self, data: &[u8]) -> Result<Vec<Message>, String> {
        self.buffer.extend_from_slice(data);
        let mut out = Vec::new();
        let mut at = 0;
        while self.buffer.len() - at >= PRELUDE {
            let prelude = &self.buffer[at..at + PRELUDE];
            let total =
                u32::from_be_bytes([prelude[0], prelude[1], prelude[2], prelude[3]]) as usize;
            let headers_len =
                u32::from_be_bytes([prelude[4], prelude[5], prelude[6], prelude[7]]) as usize;
            let prelude_crc =
                u32::from_be_bytes([prelude[8], prelude[9], prelude[10], prelude[11]]);
            if crc32fast::hash(&prelude[..8]) != prelude_crc {
                return Err("an event-stream message's prelude failed its CRC".into());
            }
            if total < OVERHEAD || headers_len > total - OVERHEAD {
                return Err(format!(
                    "an event-stream message's lengths do not add up ({total} bytes, {headers_len} of headers)"
                ));
            }
            if total > self.max_message_bytes {
                return Err(format!(
                    "a streamed event is larger than {} bytes (max_response_bytes)",
                    self.max_message_bytes
                ));
            }
            if self.buffer.len() - at < total {
                break;
            }
            let bytes = &self.buffer[at..at + total];
            let message_crc = u32::from_be_bytes([
                bytes[total - 4],
                bytes[total - 3],
                bytes[total - 2],
                bytes[total - 1],
            ]);
            if crc32fast::hash(&bytes[..total - 4]) != message_crc {
                return Err("an event-stream message failed its CRC".into());
            }
            let headers = headers(&bytes[PRELUDE..PRELUDE + headers_len])?;
            let payload = bytes[PRELUDE + headers_len..total - 4].to_vec();
            out.push(Message { headers, payload });
            at += total;
        }
        self.buffer.drain(..at);
        Ok(out)
    }

    /// Bytes held of a message not yet complete.
    pub fn pending_bytes(&self) -> usize {
        self.buffer.len()
    }

    /// Whether the body ended inside a message.
    pub fn has_partial(&self) -> bool {
        !self.buffer.is_empty()
    }
}

/// A message's headers: each `name_len u8 | name | type u8 | value`. String
/// values are kept; the others are read past.
fn headers(mut bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    let bad = || "an event-stream message's headers are malformed".to_owned();
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let name_len = usize::from(*bytes.first().ok_or_else(bad)?);
        let name = bytes.get(1..1 + name_len).ok_or_else(bad)?;
        let name = String::from_utf8(name.to_vec()).map_err(|_| bad())?;
        let kind = *bytes.get(1 + name_len).ok_or_else(bad)?;
        let rest = &bytes[2 + name_len..];
        let sized = |len: usize| rest.get(..len).map(|v| (v, len)).ok_or_else(bad);
        let with_length = || -> Result<(&[u8], usize), String> {
            let len = rest.get(..2).ok_or_else(bad)?;
            let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
            rest.get(2..2 + len).map(|v| (v, 2 + len)).ok_or_else(bad)
        };
        let (value, used) = match kind {
            0 | 1 => (&rest[..0], 0),
            2 => sized(1)?,
            3 => sized(2)?,
            4 => sized(4)?,
            5 | 8 => sized(8)?,
            6 | 7 => with_length()?,
            9 => sized(16)?,
            _ => return Err(bad()),
        };
        if kind == 7 {
            out.push((name, String::from_utf8(value.to_vec()).map_err(|_| bad())?));
        }
        bytes = &rest[used..];
    }
    Ok(out)
}

/// A message as AWS writes one, string headers only: for tests and the
/// stand-ins that speak it.
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut head = Vec::new();
    for (name, value) in headers {
        head.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
        head.extend_from_slice(name.as_bytes());
        head.push(7);
        head.extend_from_slice(&u16::try_from(value.len()).unwrap_or(u16::MAX).to_be_bytes());
        head.extend_from_slice(value.as_bytes());
    }
    let total = OVERHEAD + head.len() + payload.len();
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&u32::try_from(total).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&u32::try_from(head.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&crc32fast::hash(&out[..8]).to_be_bytes());
    out.extend_from_slice(&head);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc32fast::hash(&out).to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A contentBlockDelta as botocore's EventStreamBuffer reads it.
    const VECTOR: &str = "0000009400000057b4ab9aee0b3a6576656e742d74797065070011636f6e74656e74426c6f636b44656c74610d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b22636f6e74656e74426c6f636b496e646578223a302c2264656c7461223a7b2274657874223a224869227d7d1f944657";

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn botocores_vector_decodes_in_two_pieces_and_encodes_back() {
        let bytes = unhex(VECTOR);
        let mut parser = Parser::new(1 << 20);
        assert!(parser.feed(&bytes[..50]).unwrap().is_empty());
        assert!(parser.has_partial());
        let messages = parser.feed(&bytes[50..]).unwrap();
        assert!(!parser.has_partial());
        let message = &messages[0];
        assert_eq!(message.header(":event-type"), Some("contentBlockDelta"));
        assert_eq!(message.header(":message-type"), Some("event"));
        assert_eq!(
            message.payload,
            br#"{"contentBlockIndex":0,"delta":{"text":"Hi"}}"#
        );
        let again = encode(
            &[
                (":event-type", "contentBlockDelta"),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            &message.payload,
        );
        assert_eq!(again, bytes);
    }

    #[test]
    fn bad_crcs_and_oversized_messages_are_refused_before_they_are_held() {
        let mut bytes = unhex(VECTOR);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert!(
            Parser::new(1 << 20)
                .feed(&bytes)
                .unwrap_err()
                .contains("CRC")
        );
        let bytes = unhex(VECTOR);
        // Only the prelude has arrived: refused for its length already.
        let err = Parser::new(100).feed(&bytes[..12]).unwrap_err();
        assert!(err.contains("larger than 100"), "{err}");
        let mut prelude = bytes[..12].to_vec();
        prelude[11] ^= 1;
        assert!(
            Parser::new(1 << 20)
                .feed(&prelude)
                .unwrap_err()
                .contains("prelude")
        );
    }

    proptest::proptest! {
        #[test]
        fn any_split_of_a_stream_decodes_the_same(cuts in proptest::collection::vec(0usize..400, 0..6)) {
            let one = |text: &str| encode(&[(":event-type", "contentBlockDelta"), (":message-type", "event")], text.as_bytes());
            let stream: Vec<u8> = ["a", "bc", "def"].iter().flat_map(|t| one(t)).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % stream.len()).collect();
            cuts.sort_unstable();
            let mut parser = Parser::new(1 << 20);
            let mut got = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([stream.len()]) {
                got.extend(parser.feed(&stream[from..cut]).unwrap());
                from = cut;
            }
            let payloads: Vec<Vec<u8>> = got.into_iter().map(|m| m.payload).collect();
            proptest::prop_assert_eq!(payloads, vec![b"a".to_vec(), b"bc".to_vec(), b"def".to_vec()]);
        }
    }
}
