//! Upstream error answers read into errors, whichever provider's shape
//! they come in: OpenAI's and Anthropic's `{"error": {...}}`, Google's
//! (sometimes wrapped in a one-element array), and AWS's bare
//! `{"message": ...}` with its error type in `x-amzn-errortype`.

use std::time::Duration;

use http::HeaderMap;
use http::header::RETRY_AFTER;
use serde_json::{Value, json};

use crate::error::AdapterError;

const RETRY_AFTER_MS: &str = "retry-after-ms";
const AWS_ERROR_TYPE: &str = "x-amzn-errortype";
const MAX_RETRY_AFTER_S: f64 = 3600.0;

/// When the backend said to come back: `retry-after-ms` (Azure) or
/// `retry-after` in seconds. The HTTP-date form is not read.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let seconds = number(RETRY_AFTER_MS)
        .map(|ms| ms / 1000.0)
        .or_else(|| number(RETRY_AFTER.as_str()))?;
    // An hour at most: a larger figure is a server's mistake.
    Some(Duration::from_secs_f64(seconds.min(MAX_RETRY_AFTER_S)))
}

/// An AWS error type from `x-amzn-errortype`
/// (`ThrottlingException:http://internal.amazon.com/...`): the part before
/// the first `:`, after any `#` namespace.
fn aws_error_type(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AWS_ERROR_TYPE)?.to_str().ok()?;
    let name = value.split(':').next()?;
    let name = name.rsplit('#').next()?.trim();
    (!name.is_empty()).then_some(name)
}

/// Reads an upstream error answer. The error object, when the server sent
/// one, is kept as the error's `body`; its message (or the raw text)
/// becomes the error's message.
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> AdapterError {
    let retry_after = retry_after(headers);
    let status = match status {
        503 => return AdapterError::Overloaded { retry_after },
        // Bedrock's: the model failed (ModelErrorException) or took too
        // long (ModelTimeoutException). Neither is the caller's to fix.
        424 => 502,
        408 => 504,
        other => other,
    };
    let mut parsed: Option<Value> = serde_json::from_slice(body).ok();
    // Google's APIs at times answer `[{"error": {...}}]`.
    if let Some(Value::Array(items)) = &mut parsed
        && items.len() == 1
    {
        parsed = items.pop();
    }
    let mut error_object = parsed.as_ref().and_then(|v| v.get("error")).cloned();
    if error_object.is_none()
        && let Some(kind) = aws_error_type(headers)
    {
        // AWS: `{"message": ...}` (or `Message`), typed by the header.
        let message = parsed
            .as_ref()
            .and_then(|v| v.get("message").or_else(|| v.get("Message")))
            .cloned()
            .unwrap_or(Value::Null);
        error_object = Some(json!({"message": message, "type": kind}));
    }
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
        retry_after: if status == 429 { retry_after } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn openai_error_bodies_keep_their_message() {
        let err = status_error(
            400,
            &HeaderMap::new(),
            br#"{"error":{"message":"too long","type":"exceed_context_size_error","code":400}}"#,
        );
        let AdapterError::Status {
            status,
            message,
            body,
            retry_after,
        } = err
        else {
            panic!("unexpected {err:?}");
        };
        assert_eq!((status, message.as_str()), (400, "too long"));
        assert_eq!(body.unwrap()["type"], "exceed_context_size_error");
        assert_eq!(retry_after, None);
    }

    #[test]
    fn a_rate_limit_keeps_when_to_come_back() {
        let err = status_error(429, &headers(&[("retry-after", "7")]), b"{}");
        assert!(matches!(
            err,
            AdapterError::Status { status: 429, retry_after: Some(d), .. } if d == Duration::from_secs(7)
        ));
        // Azure sends milliseconds beside the seconds; the finer one wins.
        let err = status_error(
            429,
            &headers(&[("retry-after", "2"), ("retry-after-ms", "1500")]),
            b"{}",
        );
        assert!(matches!(
            err,
            AdapterError::Status { retry_after: Some(d), .. } if d == Duration::from_millis(1500)
        ));
        let absurd = status_error(429, &headers(&[("retry-after", "1e300")]), b"{}");
        assert!(matches!(
            absurd,
            AdapterError::Status { retry_after: Some(d), .. } if d == Duration::from_secs(3600)
        ));
    }

    #[test]
    fn google_errors_are_read_bare_or_in_an_array() {
        let one = br#"{"error":{"code":429,"message":"Resource exhausted.","status":"RESOURCE_EXHAUSTED"}}"#;
        let wrapped = [b"[".as_slice(), one.as_slice(), b"]"].concat();
        for body in [one.as_slice(), &wrapped] {
            let AdapterError::Status { message, body, .. } =
                status_error(429, &HeaderMap::new(), body)
            else {
                panic!("not a status error");
            };
            assert_eq!(message, "Resource exhausted.");
            assert_eq!(body.unwrap()["status"], "RESOURCE_EXHAUSTED");
        }
    }

    #[test]
    fn aws_errors_are_typed_by_their_header() {
        let err = status_error(
            400,
            &headers(&[(
                "x-amzn-errortype",
                "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
            )]),
            br#"{"message":"The model returned the following errors: bad"}"#,
        );
        let AdapterError::Status { message, body, .. } = err else {
            panic!("not a status error");
        };
        assert!(message.starts_with("The model returned"));
        assert_eq!(body.unwrap()["type"], "ValidationException");
        let model_failed = status_error(424, &HeaderMap::new(), br#"{"message":"boom"}"#);
        assert!(matches!(
            model_failed,
            AdapterError::Status { status: 502, .. }
        ));
    }
}
