//! Decision receipts: `x-switchyard-*` response headers that tell the caller
//! (and dashboards) how a request was routed. The names are a contract.
//! They are `HeaderName`s, not strings, so inserting one does not parse it.

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_adapters::decimal;
use switchyard_router::{Decision, Reason};

use crate::state::app::App;

pub const ROUTE: HeaderName = HeaderName::from_static("x-switchyard-route");
pub const BACKEND: HeaderName = HeaderName::from_static("x-switchyard-backend");
pub const TIER: HeaderName = HeaderName::from_static("x-switchyard-tier");
pub const REASON: HeaderName = HeaderName::from_static("x-switchyard-reason");
pub const PREDICTED_TTFT: HeaderName = HeaderName::from_static("x-switchyard-predicted-ttft-ms");
/// `hit` (the response cache answered), `prefix=N` (N prompt tokens were
/// expected cached on the replica that served) or `miss`.
pub const CACHE: HeaderName = HeaderName::from_static("x-switchyard-cache");
/// A learned predictor's P(the easy backend fails), three decimals, on
/// routes that consult one.
pub const PREDICTED_FAIL: HeaderName = HeaderName::from_static("x-switchyard-predicted-fail");

/// Which backend served (or last failed) and why it was that one.
#[derive(Debug, Clone, Copy)]
pub struct Served {
    pub backend: usize,
    pub reason: Reason,
    /// What the cache did for this request.
    pub cache: CacheUse,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheUse {
    /// Answered from the response cache.
    Hit,
    /// Prompt tokens expected in the serving replica's prefix cache.
    Prefix(u32),
}

impl Served {
    pub fn first_choice(decision: &Decision) -> Self {
        Served {
            backend: decision.primary(),
            reason: decision.reason,
            cache: CacheUse::Prefix(0),
        }
    }
}

/// `prefix=N`, written on the stack: `format!` would allocate a string
/// only for the header value to copy it, and `write!`'s formatting
/// machinery cost about 280 instructions a request for a number
/// ([`decimal`] writes the digits).
fn prefix_value(n: u32) -> HeaderValue {
    const PREFIX: &[u8] = b"prefix=";
    const LONGEST: usize = "prefix=4294967295".len();
    let mut buffer = [0u8; LONGEST];
    buffer[..PREFIX.len()].copy_from_slice(PREFIX);
    let mut scratch = [0; decimal::MAX_DIGITS];
    let digits = decimal::digits(&mut scratch, u64::from(n));
    let end = PREFIX.len() + digits.len();
    buffer[PREFIX.len()..end].copy_from_slice(digits);
    HeaderValue::from_bytes(&buffer[..end]).unwrap_or(HeaderValue::from_static("miss"))
}

/// The reason, and on a target share the score that placed the request
/// against the threshold in force: `target-share-hard (predicted-fail
/// 0.731 above threshold 0.412)`. The reason alone stays the metrics label.
fn reason_value(decision: &Decision, reason: Reason) -> HeaderValue {
    let placed = match reason {
        Reason::TargetShareHard | Reason::TargetShareEasy => decision.features.share_threshold,
        _ => None,
    };
    let Some(threshold) = placed else {
        return HeaderValue::from_static(reason.as_str());
    };
    let (what, score) = match decision.features.predicted_fail {
        Some(p) => ("predicted-fail", p),
        None => ("score", decision.features.score),
    };
    let side = if score > threshold {
        "above"
    } else if score < threshold {
        "below"
    } else {
        "at"
    };
    let text = format!(
        "{} ({what} {score:.3} {side} threshold {threshold:.3})",
        reason.as_str()
    );
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static(reason.as_str()))
}

pub fn apply(app: &App, decision: &Decision, served: Served, headers: &mut HeaderMap) {
    let backend = &app.backends[served.backend];
    let route = decision.route.and_then(|r| app.route_receipts[r].clone());
    if let Some(route) = route {
        headers.insert(ROUTE, route);
    }
    if let Some(name) = backend.name_receipt.clone() {
        headers.insert(BACKEND, name);
    }
    headers.insert(TIER, HeaderValue::from_static(backend.tier.as_str()));
    headers.insert(REASON, reason_value(decision, served.reason));
    let cache = match served.cache {
        CacheUse::Hit => HeaderValue::from_static("hit"),
        CacheUse::Prefix(0) => HeaderValue::from_static("miss"),
        CacheUse::Prefix(n) => prefix_value(n),
    };
    headers.insert(CACHE, cache);
    if decision.predicted_ttft_ms.is_finite() {
        headers.insert(
            PREDICTED_TTFT,
            HeaderValue::from(decision.predicted_ttft_ms.round() as u64),
        );
    }
    if let Some(fail) = decision.features.predicted_fail
        && let Ok(value) = HeaderValue::from_str(&format!("{fail:.3}"))
    {
        headers.insert(PREDICTED_FAIL, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_values_fit_up_to_the_largest_count() {
        assert_eq!(prefix_value(12), "prefix=12");
        assert_eq!(prefix_value(u32::MAX), "prefix=4294967295");
        for n in [0, 1, 9, 10, 99, 100, 4096, 1_000_000_000] {
            assert_eq!(prefix_value(n), format!("prefix={n}").as_str());
        }
    }
}
