//! Between HTTP bodies and the canonical types.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::AdapterError;

/// Reads an upstream error answer: the OpenAI shape
/// `{"error":{"message":...}}` when the server sent it, the raw text otherwise.
pub(crate) fn status_error(
    status: u16,
    retry_after: Option<Duration>,
    body: &[u8],
) -> AdapterError {
    if status == 503 {
        return AdapterError::Overloaded { retry_after };
    }
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let error_object = parsed.as_ref().and_then(|v| v.get("error")).cloned();
    let message = error_object
        .as_ref()
        .and_then(|e| {
            e.get("message")
                .and_then(Value::as_str)
                .or_else(|| e.as_str())
        })
        .map(str::to_owned)
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned());
    AdapterError::Status {
        status,
        message,
        body: error_object.filter(Value::is_object),
    }
}

/// Parses one JSON document from the backend; an `{"error":...}` document
/// (as servers send mid-stream) becomes the error it reports.
pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, AdapterError> {
    crate::json::from_bytes(body).map_err(|err| match serde_json::from_slice::<Value>(body) {
        Ok(value) if value.get("error").is_some() => {
            let status = value["error"]
                .get("code")
                .and_then(Value::as_u64)
                .and_then(|c| u16::try_from(c).ok())
                .filter(|c| (400..600).contains(c))
                .unwrap_or(502);
            status_error(status, None, body)
        }
        _ => AdapterError::Protocol {
            message: format!(
                "{err} in {}",
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ChatChunk;

    #[test]
    fn openai_error_bodies_keep_their_message() {
        let err = status_error(
            400,
            None,
            br#"{"error":{"message":"too long","type":"exceed_context_size_error","code":400}}"#,
        );
        match err {
            AdapterError::Status {
                status,
                message,
                body,
            } => {
                assert_eq!(status, 400);
                assert_eq!(message, "too long");
                assert_eq!(body.unwrap()["type"], "exceed_context_size_error");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn error_events_in_a_stream_become_errors() {
        let err =
            parse_json::<ChatChunk>(br#"{"error":{"message":"boom","code":500}}"#).unwrap_err();
        assert!(matches!(err, AdapterError::Status { status: 500, .. }));
        let err = parse_json::<ChatChunk>(b"not json").unwrap_err();
        assert!(matches!(err, AdapterError::Protocol { .. }));
    }
}
