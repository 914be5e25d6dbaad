//! A route's shadow: a known candidate, a share from 0 to 1, and limits
//! that bound what copies may hold and spend.

use super::ConfigError;
use super::raw::RawShadow;
use super::route::Shadow;
use super::validate::Checker;
use super::validate_route::KnownBackend;

/// Copies waiting for a turn, unless the route says.
const DEFAULT_QUEUE: usize = 64;
/// The most copies a route may hold waiting: each holds a request body.
const MAX_QUEUE: usize = 10_000;

pub(super) fn shadow(
    ck: &Checker<'_>,
    route: &str,
    raw: RawShadow,
    known: &KnownBackend<'_>,
) -> Result<Shadow, ConfigError> {
    fn at<'a>(route: &'a str, field: &'a str) -> [&'a str; 4] {
        ["routes", route, "shadow", field]
    }
    let backend = known(&at(route, "backend"), &raw.backend)?;
    if !(0.0..=1.0).contains(&raw.sample) {
        return Err(ck.error(&at(route, "sample"), "a share from 0 to 1"));
    }
    if raw.max_concurrency == Some(0) {
        return Err(ck.error(&at(route, "max_concurrency"), "at least 1"));
    }
    let queue = raw.queue.unwrap_or(DEFAULT_QUEUE);
    if !(1..=MAX_QUEUE).contains(&queue) {
        return Err(ck.error(
            &at(route, "queue"),
            format!("from 1 to {MAX_QUEUE} copies waiting"),
        ));
    }
    if raw.daily_usd.is_some_and(|v| !v.is_finite() || v < 0.0) {
        return Err(ck.error(&at(route, "daily_usd"), "a finite number of USD >= 0"));
    }
    Ok(Shadow {
        backend,
        sample: raw.sample,
        max_concurrency: raw.max_concurrency,
        queue,
        profiles: raw.profiles,
        daily_usd: raw.daily_usd,
    })
}
