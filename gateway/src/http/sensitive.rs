//! API keys and cookies marked sensitive as a request comes in, so that no
//! layer or log below prints them.
//!
//! tower-http's `SetSensitiveRequestHeadersLayer` did the same by looking
//! each name up in the request's header map: five lookups a request, each
//! hashing its name (the two custom names byte by byte). Here the request's
//! own headers, a handful, are walked once and their names compared.

use http::header::{AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION};
use http::{HeaderMap, HeaderName, Request};
use tower::{Layer, Service};

use crate::admit::access::{X_API_KEY, X_GOOG_API_KEY};

/// The headers that carry credentials.
const SENSITIVE: [HeaderName; 5] = [
    AUTHORIZATION,
    PROXY_AUTHORIZATION,
    COOKIE,
    X_API_KEY,
    X_GOOG_API_KEY,
];

/// Marks every value of a credential header sensitive.
fn mark_sensitive(headers: &mut HeaderMap) {
    for (name, value) in headers.iter_mut() {
        if SENSITIVE.contains(name) {
            value.set_sensitive(true);
        }
    }
}

#[derive(Clone, Copy)]
pub struct SensitiveHeadersLayer;

impl<S> Layer<S> for SensitiveHeadersLayer {
    type Service = SensitiveHeaders<S>;

    fn layer(&self, inner: S) -> Self::Service {
        SensitiveHeaders { inner }
    }
}

#[derive(Clone)]
pub struct SensitiveHeaders<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for SensitiveHeaders<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        mark_sensitive(req.headers_mut());
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    #[test]
    fn every_value_of_a_credential_header_is_marked_and_no_other() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer sk-1"),
            ("x-api-key", "sk-2"),
            ("x-goog-api-key", "sk-3"),
            ("proxy-authorization", "Basic eA=="),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("content-type", "application/json"),
            ("x-api-key-hint", "public"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        mark_sensitive(&mut headers);
        let marked: Vec<(&str, bool)> = headers
            .iter()
            .map(|(name, value)| (name.as_str(), value.is_sensitive()))
            .collect();
        assert_eq!(
            marked,
            [
                ("authorization", true),
                ("x-api-key", true),
                ("x-goog-api-key", true),
                ("proxy-authorization", true),
                ("cookie", true),
                ("cookie", true),
                ("content-type", false),
                ("x-api-key-hint", false),
            ]
        );
    }
}
