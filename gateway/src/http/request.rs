use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;
use serde_json::error::Category;
use switchyard_adapters::body::TooLarge;

use crate::error::GatewayError;
use crate::http::idle_body::{BodyError, IdleLimited};

/// How much of a request body is read, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub max_bytes: usize,
    /// A body not read whole in this long is a 408: a client that stalls
    /// mid-body holds a connection no longer.
    pub read_timeout: Duration,
    /// Nor may it pause longer than this between pieces (408).
    pub idle_timeout: Duration,
}

/// Reads a JSON request body: refuses other media types (415), bodies over
/// `limits.max_bytes` (413, before reading them where the headers already
/// tell) and bodies that do not arrive within `limits.read_timeout`, or
/// pause longer than `limits.idle_timeout` (408).
pub async fn read_json_body(
    parts: &Parts,
    body: Incoming,
    limits: BodyLimits,
) -> Result<Bytes, GatewayError> {
    read_body_of(
        parts,
        body,
        limits,
        ("application/json", |essence| {
            essence == "application/json" || essence.ends_with("+json")
        }),
    )
    .await
}

/// Reads an upload's `multipart/form-data` body, as [`read_json_body`]
/// reads JSON.
pub async fn read_upload_body(
    parts: &Parts,
    body: Incoming,
    limits: BodyLimits,
) -> Result<Bytes, GatewayError> {
    read_body_of(
        parts,
        body,
        limits,
        ("multipart/form-data", |essence| {
            essence == "multipart/form-data"
        }),
    )
    .await
}

async fn read_body_of(
    parts: &Parts,
    body: Incoming,
    limits: BodyLimits,
    accepts: (&'static str, fn(&str) -> bool),
) -> Result<Bytes, GatewayError> {
    let timeout = limits.read_timeout;
    let body = IdleLimited::new(body, limits.idle_timeout);
    tokio::time::timeout(
        timeout,
        read_limited(parts, body, limits.max_bytes, accepts),
    )
    .await
    .unwrap_or(Err(GatewayError::BodyTimeout { after: timeout }))
}

async fn read_limited(
    parts: &Parts,
    body: IdleLimited<Incoming>,
    limit: usize,
    (want, accepts): (&'static str, fn(&str) -> bool),
) -> Result<Bytes, GatewayError> {
    if let Some(kind) = parts.headers.get(CONTENT_TYPE) {
        let kind = kind.to_str().unwrap_or("");
        if !accepts_essence(kind, accepts) {
            return Err(GatewayError::UnsupportedMediaType {
                got: kind.to_owned(),
                want,
            });
        }
    }
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = std::pin::pin!(body);
    if declared.is_some_and(|n| n > limit as u64) {
        discard(body).await;
        return Err(GatewayError::BodyTooLarge { limit });
    }
    match switchyard_adapters::body::collect_at_most(body.as_mut(), limit).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(TooLarge)) => {
            discard(body).await;
            Err(GatewayError::BodyTooLarge { limit })
        }
        Err(BodyError::Idle(after)) => Err(GatewayError::BodyTimeout { after }),
        Err(BodyError::Read(err)) => Err(GatewayError::BodyRead {
            message: err.to_string(),
        }),
    }
}

/// Whether `accepts` takes the media type `kind` names: its essence, the
/// part before any `;` parameters, trimmed and in lower case. Copied to
/// lower case only when it has a capital: clients nearly always send
/// `application/json` as it is. (A header value that reads as text is
/// visible ASCII, spaces and tabs, so ASCII trimming is all the trimming
/// there is.)
fn accepts_essence(kind: &str, accepts: fn(&str) -> bool) -> bool {
    let essence = match kind.bytes().position(|b| b == b';') {
        Some(at) => &kind[..at],
        None => kind,
    }
    .trim_ascii();
    if essence.bytes().any(|b| b.is_ascii_uppercase()) {
        accepts(&essence.to_ascii_lowercase())
    } else {
        accepts(essence)
    }
}

/// Most of a refused body read (and dropped) so its sender, which may send
/// it all before reading, gets to read the 413; past it, or past the time,
/// the connection is closed.
const DISCARD_BYTES: u64 = 64 * 1024 * 1024;
const DISCARD_TIME: Duration = Duration::from_secs(10);

/// Reads and drops what is left of a refused body, within bounds.
async fn discard(mut body: Pin<&mut IdleLimited<Incoming>>) {
    let _ = tokio::time::timeout(DISCARD_TIME, async {
        let mut read = 0u64;
        while let Some(Ok(frame)) = body.frame().await {
            read += frame.data_ref().map_or(0, |d| d.len() as u64);
            if read > DISCARD_BYTES {
                break;
            }
        }
    })
    .await;
}

/// Parses a request body, naming the offending field when the JSON is valid
/// but does not fit.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, GatewayError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(GatewayError::MalformedJson {
            message: "the request body is empty; send a JSON object".into(),
        });
    }
    // The fast path tracks no field path; only a body that fails is parsed
    // again, to name the field in the error.
    if let Ok(value) = switchyard_adapters::json::from_bytes(bytes) {
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed: Result<T, _> = serde_path_to_error::deserialize(&mut de);
    let value = parsed.map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        match inner.classify() {
            Category::Syntax | Category::Eof | Category::Io => GatewayError::MalformedJson {
                message: inner.to_string(),
            },
            Category::Data => {
                let message = inner.to_string();
                GatewayError::InvalidField {
                    param: field_of(&path, &message),
                    message,
                }
            }
        }
    })?;
    de.end().map_err(|err| GatewayError::MalformedJson {
        message: err.to_string(),
    })?;
    Ok(value)
}

/// The field a data error is about: its path, or for a missing field (whose
/// path is its parent) the parent path plus the name serde quotes.
fn field_of(path: &str, message: &str) -> String {
    let missing = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next());
    match (path, missing) {
        (".", Some(field)) => field.to_owned(),
        (parent, Some(field)) => format!("{parent}.{field}"),
        (path, None) => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use switchyard_adapters::types::ChatRequest;

    use super::*;

    fn param_of(body: &str) -> (String, String) {
        match parse_json::<ChatRequest>(body.as_bytes()).unwrap_err() {
            GatewayError::InvalidField { param, message } => (param, message),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn missing_and_wrong_fields_are_named() {
        assert_eq!(param_of(r#"{"model":"m"}"#).0, "messages");
        assert_eq!(
            param_of(r#"{"model":"m","messages":[{"content":"x"}]}"#).0,
            "messages[0].role"
        );
        assert_eq!(
            param_of(r#"{"model":"m","messages":[{"role":"wizard","content":"x"}]}"#).0,
            "messages[0].role"
        );
        assert_eq!(
            param_of(r#"{"model":"m","messages":[],"max_tokens":"lots"}"#).0,
            "max_tokens"
        );
    }

    #[test]
    fn a_media_types_essence_is_read_as_before_without_copying() {
        // The reading it replaced: split, trim, copy to lower case.
        let copied = |kind: &str| {
            kind.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        };
        let json = |essence: &str| essence == "application/json";
        for kind in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON;charset=UTF-8",
            " application/json ",
            "\tapplication/json\t; q=1",
            "application/json;",
            ";application/json",
            "application/jsonx",
            "text/plain",
            "",
            "APPLICATION/JSON",
        ] {
            assert_eq!(accepts_essence(kind, json), json(&copied(kind)), "{kind:?}");
        }
    }

    #[test]
    fn syntax_errors_are_malformed_json() {
        for body in [
            "{",
            "{\"model\": }",
            "",
            r#"{"model":"m","messages":[]} trailing"#,
        ] {
            assert!(
                matches!(
                    parse_json::<ChatRequest>(body.as_bytes()),
                    Err(GatewayError::MalformedJson { .. })
                ),
                "{body}"
            );
        }
    }
}
