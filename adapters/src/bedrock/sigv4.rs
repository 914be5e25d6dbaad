//! AWS Signature Version 4 for Bedrock's runtime API (service name
//! `bedrock`): the exact bytes sent are signed, with `content-type`,
//! `host`, `x-amz-date` and the session token when there is one.

use std::time::{SystemTime, UNIX_EPOCH};

use ring::{digest, hmac};

use switchyard_policies::calendar::civil_from_days;

use crate::percent;

/// Keys to sign with.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Keys {
    /// The secret and the token never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("access_key_id", &self.access_key_id)
            .finish_non_exhaustive()
    }
}

/// What is signed of one request.
pub struct Request<'a> {
    pub method: &'a str,
    /// The authority as sent (`host[:port]`, the port only when not the
    /// scheme's default).
    pub host: &'a str,
    /// The path as sent, already percent-encoded.
    pub path: &'a str,
    pub content_type: &'a str,
    pub body: &'a [u8],
}

/// The headers that sign `request`: `(name, value)`, lowercase names.
pub fn sign(
    keys: &Keys,
    region: &str,
    request: &Request<'_>,
    now: SystemTime,
) -> Vec<(&'static str, String)> {
    let stamp = timestamp(now);
    let date = &stamp[..8];
    let mut headers: Vec<(&'static str, String)> = vec![
        ("content-type", request.content_type.to_owned()),
        ("host", request.host.to_owned()),
        ("x-amz-date", stamp.clone()),
    ];
    if let Some(token) = &keys.session_token {
        headers.push(("x-amz-security-token", token.clone()));
    }
    let signed: Vec<&str> = headers.iter().map(|(n, _)| *n).collect();
    let signed = signed.join(";");
    let canonical_headers: String = headers
        .iter()
        .map(|(n, v)| format!("{n}:{}\n", collapse(v)))
        .collect();
    let canonical = format!(
        "{}\n{}\n\n{canonical_headers}\n{signed}\n{}",
        request.method,
        canonical_uri(request.path),
        hex(digest::digest(&digest::SHA256, request.body).as_ref()),
    );
    let scope = format!("{date}/{region}/bedrock/aws4_request");
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{}",
        hex(digest::digest(&digest::SHA256, canonical.as_bytes()).as_ref())
    );
    let key = [date, region, "bedrock", "aws4_request"].iter().fold(
        format!("AWS4{}", keys.secret_access_key).into_bytes(),
        |key, part| mac(&key, part.as_bytes()),
    );
    let signature = hex(&mac(&key, to_sign.as_bytes()));
    let mut out: Vec<(&'static str, String)> = headers
        .into_iter()
        .filter(|(n, _)| !matches!(*n, "content-type" | "host"))
        .collect();
    out.push((
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            keys.access_key_id
        ),
    ));
    out
}

fn mac(key: &[u8], data: &[u8]) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
        .as_ref()
        .to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A header value as signed: trimmed, runs of spaces made one.
fn collapse(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The path as sent, encoded once more (`%` is `%25`), `/` and the
/// unreserved characters kept: what AWS's services other than S3 sign.
fn canonical_uri(path: &str) -> String {
    percent::encode(path, |b| percent::unreserved(b) || b == b'/')
}

/// A path segment as AWS's SDKs encode one (a model id's `:` is `%3A`, an
/// ARN's `/` is `%2F`).
pub fn path_segment(text: &str) -> String {
    percent::encode(text, percent::unreserved)
}

/// `YYYYMMDDTHHMMSSZ` in UTC.
pub fn timestamp(now: SystemTime) -> String {
    let seconds = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(i64::try_from(days).unwrap_or(i64::MAX / 2));
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn botocores_signature_for_a_cross_region_model() {
        // Computed with botocore 1.44.8's SigV4Auth for the same request.
        let keys = Keys {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: Some("SESSIONTOKEN".into()),
        };
        let path = format!(
            "/model/{}/converse",
            path_segment("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
        );
        assert_eq!(
            path,
            "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"
        );
        let request = Request {
            method: "POST",
            host: "bedrock-runtime.us-east-1.amazonaws.com",
            path: &path,
            content_type: "application/json",
            body: br#"{"messages":[{"role":"user","content":[{"text":"hi"}]}]}"#,
        };
        let at = UNIX_EPOCH + Duration::from_secs(1_735_689_600); // 2025-01-01T00:00:00Z
        let headers = sign(&keys, "us-east-1", &request, at);
        let authorization = &headers
            .iter()
            .find(|(n, _)| *n == "authorization")
            .unwrap()
            .1;
        assert!(
            authorization.ends_with(
                "Signature=857f854356f55ca7fae98a790c7497c818bed86bcf99ab0d982684e4f9834249"
            ),
            "{authorization}"
        );
        assert!(authorization.starts_with(
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token,"
        ));
        assert!(headers.contains(&("x-amz-date", "20250101T000000Z".into())));
        assert!(!format!("{keys:?}").contains("wJalr"));
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(
            timestamp(UNIX_EPOCH + Duration::from_secs(1_798_761_599)),
            "20261231T235959Z"
        );
    }
}
