//! Reading JSON bodies.

use serde::de::DeserializeOwned;

/// Reads a JSON document from bytes, checking UTF-8 once for all of them.
///
/// serde_json reading bytes checks each string on its own as it goes, and
/// for the short strings of API bodies (keys, roles, ids) each check costs
/// more than the string: on a short chat request and its answer, about
/// 4,000 instructions of callgrind's count, where one check of the whole
/// body costs a few hundred. Bytes that are not UTF-8 are read as bytes, so
/// the error is serde_json's own, with its line and column.
pub fn from_bytes<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// Above this size, a chat request with tools is read by serde alone.
const TOOLS_READ_BY_SERDE: usize = 2048;

/// A chat request read by the gateway's own reader (see
/// `openai/reader`), when it reads it exactly as serde would; `None`
/// otherwise (bytes that are not UTF-8 among them), and then
/// [`from_bytes`] gives serde's value or error.
pub fn chat_request(bytes: &[u8]) -> Option<crate::types::ChatRequest> {
    // An agent's tool definitions (JSON Schema, often tens of kilobytes)
    // are handed to serde after the reader has found their end: two walks
    // of most of the body where serde alone takes one. Such bodies go to
    // serde alone.
    if bytes.len() > TOOLS_READ_BY_SERDE && memchr::memmem::find(bytes, b"\"tools\"").is_some() {
        return None;
    }
    std::str::from_utf8(bytes)
        .ok()
        .and_then(crate::openai::read_chat_request)
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn reads_text_and_reports_bad_bytes_as_serde_json_does() {
        let value: Value = from_bytes(br#"{"content": "caf\u00e9 \u2014 ok"}"#).unwrap();
        assert_eq!(value["content"], "café — ok");
        let bad = b"{\"content\": \"\xff\"}";
        assert_eq!(
            from_bytes::<Value>(bad).unwrap_err().to_string(),
            serde_json::from_slice::<Value>(bad)
                .unwrap_err()
                .to_string()
        );
    }
}
