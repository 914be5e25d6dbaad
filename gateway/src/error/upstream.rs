//! Upstream failures: how each adapter error is shown, in fixed words that
//! never repeat what the backend said.

use std::time::Duration;

use http::StatusCode;
use serde_json::Value;
use switchyard_adapters::AdapterError;

use crate::error::shape::{Shape, shape};

pub(crate) fn upstream_shape(err: &AdapterError) -> Shape {
    match err {
        AdapterError::Connect { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_connect",
            "upstream_error",
            Some("upstream_unreachable"),
        ),
        AdapterError::Certificate { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_certificate",
            "upstream_error",
            Some("upstream_certificate_refused"),
        ),
        AdapterError::Credentials { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_credentials",
            "upstream_error",
            Some("upstream_credentials_unavailable"),
        ),
        AdapterError::Reset { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_reset",
            "upstream_error",
            Some("upstream_reset"),
        ),
        AdapterError::Protocol { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_protocol",
            "upstream_error",
            Some("upstream_bad_response"),
        ),
        AdapterError::Timeout { .. } => shape(
            StatusCode::GATEWAY_TIMEOUT,
            "upstream_timeout",
            "upstream_error",
            Some("upstream_timeout"),
        ),
        AdapterError::Overloaded { retry_after } => Shape {
            retry_after: Some(retry_after.unwrap_or(Duration::from_secs(1))),
            ..shape(
                StatusCode::SERVICE_UNAVAILABLE,
                "upstream_overloaded",
                "overloaded_error",
                Some("upstream_overloaded"),
            )
        },
        // The backend refused the gateway's own credentials: the operator's
        // fault, not the caller's, and another backend may still answer.
        AdapterError::Status { status, .. } if credentials_refused(*status) => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_auth",
            "upstream_error",
            Some("upstream_credentials_refused"),
        ),
        // Every attempt was rate limited: the caller hears when the last
        // backend said to come back (a second when it did not say).
        AdapterError::Status {
            status: 429,
            retry_after,
            ..
        } => Shape {
            retry_after: Some(retry_after.unwrap_or(Duration::from_secs(1))),
            ..shape(
                StatusCode::TOO_MANY_REQUESTS,
                "upstream_rate_limited",
                "invalid_request_error",
                None,
            )
        },
        AdapterError::Status { status, .. } if *status < 500 => {
            // Pass the backend's verdict on the request through as it was.
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST);
            shape(status, "upstream_rejected", "invalid_request_error", None)
        }
        AdapterError::Status { .. } => shape(
            StatusCode::BAD_GATEWAY,
            "upstream_error",
            "upstream_error",
            Some("upstream_error"),
        ),
        AdapterError::InvalidRequest { param, .. } => Shape {
            param: param.clone(),
            ..shape(
                StatusCode::BAD_REQUEST,
                "invalid_for_backend",
                "invalid_request_error",
                None,
            )
        },
        AdapterError::Internal { .. } => shape(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "server_error",
            None,
        ),
    }
}

/// 401 and 403 from a backend answer the gateway's credentials (callers'
/// keys never reach a backend).
pub fn credentials_refused(status: u16) -> bool {
    matches!(status, 401 | 403)
}

/// The code content filters refuse a request with (Azure OpenAI's).
const CONTENT_FILTER: &str = "content_filter";

/// An upstream failure in fixed words: what happened, never what the
/// backend said.
pub(crate) fn upstream_message(err: &AdapterError) -> String {
    match err {
        AdapterError::Connect { .. } => "could not connect to the backend".into(),
        AdapterError::Certificate { reason, .. } => {
            format!("the backend's TLS certificate was refused: {reason}")
        }
        AdapterError::Timeout { .. } | AdapterError::Overloaded { .. } => err.to_string(),
        AdapterError::Reset { .. } => "the backend closed the connection".into(),
        // The operator's to fix; what failed is in /readyz and the log.
        AdapterError::Credentials { .. } => {
            "the gateway has no valid credentials for the backend (see /readyz)".into()
        }
        AdapterError::Status { status, .. } if credentials_refused(*status) => format!(
            "the backend refused the gateway's credentials (HTTP {status}); the gateway's operator must fix the backend's api_key"
        ),
        AdapterError::Status { status: 429, .. } => {
            "the backend is rate limiting requests (HTTP 429)".into()
        }
        // Azure's (and others') content filters: the caller's prompt, not a fault.
        AdapterError::Status {
            status,
            body: Some(body),
            ..
        } if *status < 500 && body.get("code").and_then(Value::as_str) == Some(CONTENT_FILTER) => {
            format!(
                "the backend's content filter refused the request (HTTP {status}, {CONTENT_FILTER})"
            )
        }
        AdapterError::Status { status, body, .. } if *status < 500 => {
            match body.as_ref().and_then(known_code) {
                Some(code) => format!(
                    "the prompt and output do not fit the backend's context window (HTTP {status}, {code})"
                ),
                None => format!("the backend rejected the request (HTTP {status})"),
            }
        }
        AdapterError::Status { status, .. } => format!("the backend failed (HTTP {status})"),
        AdapterError::Protocol { .. } => "the backend sent an answer that could not be read".into(),
        // Made here, not by the backend: the caller's to read.
        AdapterError::InvalidRequest { .. } | AdapterError::Internal { .. } => err.to_string(),
    }
}

/// The most of a backend's error body the failing call's log line carries.
const DETAIL_BODY_CHARS: usize = 300;

/// An upstream failure in the backend's words and the start of its error
/// body, with secrets taken out: the failing call's `info` log line.
pub(crate) fn upstream_detail(err: &AdapterError) -> String {
    use crate::http::redact::redact;
    let mut detail = redact(&err.to_string());
    if let AdapterError::Status {
        body: Some(body), ..
    } = err
    {
        // Redacted whole, then cut: a cut could split a secret so that it
        // no longer looks like one.
        let body = redact(&body.to_string());
        let cut = body
            .char_indices()
            .nth(DETAIL_BODY_CHARS)
            .map_or(body.len(), |(at, _)| at);
        detail.push_str(": ");
        detail.push_str(&body[..cut]);
    }
    detail
}

/// The whole story of an upstream failure, for the operator: at debug, with
/// secrets taken out; a refused certificate at warn, since only the
/// operator can fix it.
pub(crate) fn log_upstream_detail(err: &AdapterError) {
    if let AdapterError::Certificate { .. } = err {
        tracing::warn!(detail = %crate::http::redact::redact(&err.to_string()), "backend TLS certificate refused");
        return;
    }
    if tracing::enabled!(tracing::Level::DEBUG) {
        let body = match err {
            AdapterError::Status {
                body: Some(body), ..
            } => body.to_string(),
            _ => String::new(),
        };
        tracing::debug!(
            detail = %crate::http::redact::redact(&err.to_string()),
            body = %crate::http::redact::redact(&body),
            "upstream error"
        );
    }
}

/// A backend error field that is a plain identifier (`invalid_request_error`,
/// `context_length_exceeded`), safe to show; free text is not.
pub(crate) fn identifier(value: &Value) -> Option<&str> {
    value.as_str().filter(|s| {
        !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    })
}

/// The one code clients act on, whatever the engine calls it: a prompt
/// longer than the backend's context is `context_length_exceeded`.
pub(crate) fn known_code(body: &Value) -> Option<&'static str> {
    let named = |field: &str| body.get(field).and_then(Value::as_str);
    let context = ["context_length_exceeded", "exceed_context_size_error"];
    [named("code"), named("type")]
        .into_iter()
        .flatten()
        .any(|name| context.contains(&name))
        .then_some("context_length_exceeded")
}

/// Whether the backend refused the request for its context window
/// (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`),
/// and the window its error names when it names one: llama.cpp's `n_ctx`,
/// "maximum context length is N tokens" (OpenAI, vLLM), "> N maximum"
/// (Anthropic), "context size (N tokens)".
pub(crate) fn window_refusal(err: &AdapterError) -> Option<Option<u32>> {
    let AdapterError::Status {
        status,
        message,
        body: Some(body),
        ..
    } = err
    else {
        return None;
    };
    if *status >= 500 || known_code(body).is_none() {
        return None;
    }
    let from_body = body
        .get("n_ctx")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok());
    let text = body
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or(message);
    Some(from_body.or_else(|| window_in(text)))
}

/// The context window a backend's error message names, if it names one.
fn window_in(text: &str) -> Option<u32> {
    static PATTERNS: std::sync::LazyLock<Vec<regex::Regex>> = std::sync::LazyLock::new(|| {
        [
            r"maximum context length is (\d+)",
            r"> ?(\d+) maximum",
            r"context size \((\d+) tokens\)",
        ]
        .iter()
        .filter_map(|p| regex::Regex::new(p).ok())
        .collect()
    });
    PATTERNS
        .iter()
        .find_map(|p| p.captures(text)?.get(1)?.as_str().parse().ok())
}
