//! Secrets out of text that goes to logs: an upstream's error body can hold
//! a bearer token, an `sk-` style key or credentials in a URL, echoed back
//! by a provider or a proxy in front of it.

use std::sync::LazyLock;

use regex::Regex;

/// `(pattern, replacement)`: each match of the pattern is replaced.
static SECRETS: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
    [
        // Authorization values: `Bearer abc`, `Basic abc`.
        (r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+", "$1 [redacted]"),
        // Provider keys: OpenAI's sk-..., Anthropic's sk-ant-..., and the like.
        (r"\b(sk|pk|rk)-[A-Za-z0-9_-]{6,}", "$1-[redacted]"),
        // Credentials in a URL: scheme://user:password@host, or a password
        // alone (redis://:password@host).
        (r"([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@", "$1[redacted]@"),
        // key=value and "key": "value" forms of named secrets.
        (
            r#"(?i)("?(?:api[_-]?key|x-api-key|access[_-]?token|secret|password)"?\s*[:=]\s*"?)[^"\s,&}]+"#,
            "$1[redacted]",
        ),
    ]
    .into_iter()
    .filter_map(|(pattern, replacement)| Some((Regex::new(pattern).ok()?, replacement)))
    .collect()
});

/// `text` with every secret it recognizes replaced by `[redacted]`.
pub fn redact(text: &str) -> String {
    let mut out = text.to_owned();
    for (pattern, replacement) in SECRETS.iter() {
        if pattern.is_match(&out) {
            out = pattern.replace_all(&out, *replacement).into_owned();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_secret_shapes_are_redacted() {
        let cases = [
            (
                "Incorrect API key provided: sk-proj-abcdefghijklmnop1234",
                "Incorrect API key provided: sk-[redacted]",
            ),
            (
                "proxy said: Authorization: Bearer eyJhbGciOi.xyz",
                "proxy said: Authorization: Bearer [redacted]",
            ),
            (
                "could not reach https://admin:hunter2@10.0.0.5:8443/v1",
                "could not reach https://[redacted]@10.0.0.5:8443/v1",
            ),
            (
                r#"{"api_key": "abc123", "x-api-key":"zzz"}"#,
                r#"{"api_key": "[redacted]", "x-api-key":"[redacted]"}"#,
            ),
            (
                "state.redis: cannot reach redis://:s3cret@redis:6379/0",
                "state.redis: cannot reach redis://[redacted]@redis:6379/0",
            ),
            ("the model is overloaded", "the model is overloaded"),
        ];
        for (text, want) in cases {
            assert_eq!(redact(text), want, "{text}");
        }
    }
}
