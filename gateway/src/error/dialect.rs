//! The API dialect a caller speaks: it decides the shape of the caller's errors.

/// The API dialect a caller speaks, which decides the shape of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    /// Google's Gemini API (`generateContent`).
    Gemini,
}

/// Gemini's model methods served.
pub const GEMINI_METHODS: [&str; 3] = ["generateContent", "streamGenerateContent", "countTokens"];

/// The Gemini method a `/models/{model}:{method}` path (after any `/v1`)
/// names. A model's name may hold `:` itself (Bedrock's `...-v1:0`), so the
/// method is what follows the last `:`, and only one of Gemini's counts.
pub fn gemini_method(path: &str) -> Option<&'static str> {
    let (_, method) = path.strip_prefix("/models/")?.rsplit_once(':')?;
    GEMINI_METHODS.iter().copied().find(|m| *m == method)
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
        }
    }

    /// The dialect of an endpoint, by path (Anthropic's live under
    /// /v1/messages; Gemini's under /v1beta, and at `/v1/models/{m}:method`).
    pub fn of_path(path: &str) -> Self {
        if path.starts_with("/v1beta/") || path == "/v1beta" {
            return Dialect::Gemini;
        }
        let path = path.strip_prefix("/v1").unwrap_or(path);
        if gemini_method(path).is_some() {
            Dialect::Gemini
        } else if path.starts_with("/messages") {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        }
    }

    /// The dialect of a request: its endpoint's, except on `/v1/models`,
    /// which the dialects share and which answers in Anthropic's shapes
    /// when the caller sends `anthropic-version` (every Anthropic SDK does)
    /// and in Gemini's when it sends `x-goog-api-key` (as google-genai does).
    pub fn of_request(path: &str, headers: &http::HeaderMap) -> Self {
        let shared = path
            .strip_prefix("/v1")
            .unwrap_or(path)
            .starts_with("/models");
        if shared && headers.contains_key("anthropic-version") {
            Dialect::Anthropic
        } else if shared && headers.contains_key("x-goog-api-key") {
            Dialect::Gemini
        } else {
            Dialect::of_path(path)
        }
    }
}
