//! From a request to the router's view of it, and to a decision. The
//! selection itself is the router crate's; this module feeds it.

use http::{HeaderMap, HeaderName};
use switchyard_policies::Profile;
use switchyard_router::{Decision, RequestView, RouteError, Router};

use crate::error::GatewayError;
use crate::state::app::App;

/// Names the request's use-case profile (chat, code, agentic, ...).
pub static PROFILE_HEADER: HeaderName = HeaderName::from_static("x-switchyard-profile");

const SESSION_HEADER_COUNT: usize = 4;

/// Headers that carry a session id, most specific first: our own, Claude
/// Code's, and Codex CLI's (`session-id` now, with its `thread-id` beside
/// it; `session_id` in older versions).
/// `HeaderName`s, not strings: a lookup by string parses the name first.
static SESSION_HEADERS: [HeaderName; SESSION_HEADER_COUNT] = [
    HeaderName::from_static("x-session-id"),
    HeaderName::from_static("x-claude-code-session-id"),
    HeaderName::from_static("session-id"),
    HeaderName::from_static("session_id"),
];

/// What the request body itself says about who calls and for what.
#[derive(Debug, Clone, Copy, Default)]
pub struct BodyHints<'a> {
    /// `user` or `metadata.user_id`.
    pub user: Option<&'a str>,
    /// `metadata.profile`.
    pub profile: Option<&'a str>,
}

/// Completes an endpoint's view of a request with what every endpoint
/// shares: the session, the profile, and the headers rules read.
pub fn complete_view<'a>(
    mut view: RequestView<'a>,
    headers: &'a HeaderMap,
    hints: BodyHints<'a>,
    router: &'a Router,
) -> Result<RequestView<'a>, GatewayError> {
    view.session = session_header(headers)
        .or(hints.user)
        .filter(|s| !s.is_empty());
    view.profile = profile(headers, hints)?;
    view.headers = router
        .header_names()
        .iter()
        .filter_map(|name| Some((name.as_str(), headers.get(name.as_str())?.to_str().ok()?)))
        .collect();
    Ok(view)
}

/// The session a request's headers name, if any (the MCP endpoint's tool
/// calls are put in the same session as the model calls this way).
///
/// One walk over the request's headers instead of a lookup per name: a
/// lookup hashes the name it looks for, byte by byte, and most requests
/// carry none of these (about 600 instructions of callgrind's count for
/// four misses; comparing names costs a length check each).
pub fn session_header(headers: &HeaderMap) -> Option<&str> {
    // The first value of each name, as `HeaderMap::get` would give it.
    let mut first: [Option<&http::HeaderValue>; SESSION_HEADER_COUNT] =
        [None; SESSION_HEADER_COUNT];
    for (name, value) in headers {
        if let Some(at) = SESSION_HEADERS.iter().position(|n| n == name) {
            first[at].get_or_insert(value);
        }
    }
    first
        .into_iter()
        .flatten()
        .find_map(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
}

/// The profile named by the header or, failing that, the body's metadata.
fn profile(headers: &HeaderMap, hints: BodyHints<'_>) -> Result<Option<Profile>, GatewayError> {
    let (named, param) = match headers.get(&PROFILE_HEADER) {
        Some(value) => (Some(value.to_str().unwrap_or("")), PROFILE_HEADER.as_str()),
        None => (hints.profile, "metadata.profile"),
    };
    let Some(named) = named else { return Ok(None) };
    Profile::from_name(named)
        .map(Some)
        .ok_or_else(|| GatewayError::InvalidField {
            param: param.to_owned(),
            message: format!(
                "unknown profile `{named}`; valid profiles: {}",
                Profile::names().join(", ")
            ),
        })
}

impl App {
    pub fn decide(&self, view: &RequestView<'_>) -> Result<Decision, GatewayError> {
        self.router
            .decide(view, rand::random::<f64>())
            .map_err(route_error)
    }
}

pub fn route_error(err: RouteError) -> GatewayError {
    match err {
        RouteError::UnknownModel { model, available } => {
            GatewayError::UnknownModel { model, available }
        }
        RouteError::ContextTooLong {
            needed,
            largest_window,
        } => GatewayError::ContextTooLong {
            needed,
            largest_window,
        },
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &[u8])]) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("content-type", HeaderValue::from_static("application/json"));
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_bytes(value).unwrap());
        }
        map
    }

    #[test]
    fn the_most_specific_name_wins_whatever_the_order() {
        let h = headers(&[
            ("session_id", b"old"),
            ("x-claude-code-session-id", b"claude"),
            ("x-session-id", b"ours"),
        ]);
        assert_eq!(session_header(&h), Some("ours"));
        let h = headers(&[("session_id", b"old"), ("session-id", b"codex")]);
        assert_eq!(session_header(&h), Some("codex"));
        assert_eq!(session_header(&headers(&[("x-other", b"no")])), None);
    }

    #[test]
    fn reads_a_names_first_value_as_a_lookup_does() {
        let h = headers(&[("x-session-id", b"first"), ("x-session-id", b"second")]);
        assert_eq!(session_header(&h), Some("first"));
        // A first value that is not visible ASCII passes to the next name,
        // even when a later value of the same name would be text.
        let h = headers(&[
            ("x-session-id", b"caf\xc3\xa9"),
            ("x-session-id", b"text"),
            ("session-id", b"codex"),
        ]);
        assert_eq!(session_header(&h), Some("codex"));
        // An empty id names no session, and does not pass to the next name.
        let h = headers(&[("x-session-id", b""), ("session-id", b"codex")]);
        assert_eq!(session_header(&h), None);
    }
}
