//! Between HTTP bodies and the canonical types.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::AdapterError;
use crate::upstream::status_error;

/// Parses one JSON document from the backend; an `{"error":...}` document
/// (as servers send mid-stream) becomes the error it reports.
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, AdapterError> {
    crate::json::from_bytes(body).map_err(|err| not_read(body, err))
}

/// [`parse_json`] for a document already known to be text (an SSE event's
/// data, checked as the parser read its line): not checked again.
pub(crate) fn parse_json_text<T: DeserializeOwned>(text: &str) -> Result<T, AdapterError> {
    serde_json::from_str(text).map_err(|err| not_read(text.as_bytes(), err))
}

/// The error for a document that did not read as `T`.
fn not_read(body: &[u8], err: serde_json::Error) -> AdapterError {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) if value.get("error").is_some() => {
            let status = value["error"]
                .get("code")
                // Azure writes its codes as strings ("429").
                .and_then(|code| {
                    code.as_u64()
                        .or_else(|| code.as_str().and_then(|c| c.parse().ok()))
                })
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..600).contains(c))
                .unwrap_or(502);
            status_error(status, &http::HeaderMap::new(), body)
        }
        _ => AdapterError::Protocol {
            message: format!(
                "{err} in {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ChatChunk;

    #[test]
    fn error_events_in_a_stream_become_errors() {
        let err =
            parse_json::<ChatChunk>(br#"{"error":{"message":"boom","code":500}}"#).unwrap_err();
        assert!(matches!(err, AdapterError::Status { status: 500, .. }));
        let err = parse_json::<ChatChunk>(b"not json").unwrap_err();
        assert!(matches!(err, AdapterError::Protocol { .. }));
        // The same from text already checked (a streamed event's data).
        let err = parse_json_text::<ChatChunk>(r#"{"error":{"message":"boom","code":"429"}}"#)
            .unwrap_err();
        assert!(
            matches!(err, AdapterError::Status { status: 429, .. }),
            "{err:?}"
        );
        let err = parse_json_text::<ChatChunk>("not json").unwrap_err();
        assert!(matches!(err, AdapterError::Protocol { .. }), "{err:?}");
    }
}
