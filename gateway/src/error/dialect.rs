//! The API dialect a caller speaks: it decides the shape of the caller's errors.

/// The API dialect a caller speaks, which decides the shape of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    OpenAi,
    Anthropic,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
        }
    }

    /// The dialect of an endpoint, by path (Anthropic's live under /v1/messages).
    pub fn of_path(path: &str) -> Self {
        let path = path.strip_prefix("/v1").unwrap_or(path);
        if path.starts_with("/messages") {
            Dialect::Anthropic
        } else {
            Dialect::OpenAi
        }
    }

    /// The dialect of a request: its endpoint's, except on `/v1/models`,
    /// which both dialects share and which answers in Anthropic's shapes
    /// when the caller sends `anthropic-version` (every Anthropic SDK does).
    pub fn of_request(path: &str, headers: &http::HeaderMap) -> Self {
        let shared = path
            .strip_prefix("/v1")
            .unwrap_or(path)
            .starts_with("/models");
        if shared && headers.contains_key("anthropic-version") {
            Dialect::Anthropic
        } else {
            Dialect::of_path(path)
        }
    }
}
