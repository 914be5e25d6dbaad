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
/// The most copies a route may run at once.
const MAX_RUNNING: usize = 10_000;

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
    if raw
        .max_concurrency
        .is_some_and(|n| !(1..=MAX_RUNNING).contains(&n))
    {
        return Err(ck.error(
            &at(route, "max_concurrency"),
            format!("from 1 to {MAX_RUNNING} copies running"),
        ));
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

#[cfg(test)]
mod tests {
    use crate::config::{Config, ConfigError};
    use crate::profiles::Profile;

    fn with_shadow(shadow: &str) -> String {
        format!(
            "backends:
  small: {{tier: small, sim: {{preset: small}}}}
  mid: {{tier: mid, sim: {{preset: mid}}, max_concurrency: 3}}
routes:
  auto:
    strategy: {{split: {{weights: {{small: 1}}}}}}
    shadow: {shadow}
"
        )
    }

    fn error_of(shadow: &str) -> ConfigError {
        Config::from_yaml(&with_shadow(shadow), "t.yaml").unwrap_err()
    }

    #[test]
    fn a_shadow_takes_its_defaults_and_its_profiles() {
        let config = Config::from_yaml(
            &with_shadow("{backend: mid, sample: 0.25, profiles: [chat, code], daily_usd: 2}"),
            "t.yaml",
        )
        .unwrap();
        let shadow = config.routes["auto"].shadow.clone().unwrap();
        assert_eq!(shadow.backend, "mid");
        assert_eq!(shadow.sample, 0.25);
        assert_eq!(shadow.queue, 64);
        // The candidate's own max_concurrency applies when this is unset.
        assert_eq!(shadow.max_concurrency, None);
        assert_eq!(shadow.profiles, vec![Profile::Chat, Profile::Code]);
        assert_eq!(shadow.daily_usd, Some(2.0));
    }

    #[test]
    fn bad_shadows_are_named() {
        let cases = [
            (
                "{backend: large, sample: 0.1}",
                "routes.auto.shadow.backend",
                "unknown backend",
            ),
            (
                "{backend: mid, sample: 1.5}",
                "routes.auto.shadow.sample",
                "0 to 1",
            ),
            (
                "{backend: mid, sample: -0.1}",
                "routes.auto.shadow.sample",
                "0 to 1",
            ),
            (
                "{backend: mid, sample: .nan}",
                "routes.auto.shadow.sample",
                "0 to 1",
            ),
            (
                "{backend: mid, sample: 1, queue: 0}",
                "routes.auto.shadow.queue",
                "from 1",
            ),
            (
                "{backend: mid, sample: 1, max_concurrency: 0}",
                "routes.auto.shadow.max_concurrency",
                "from 1",
            ),
            (
                "{backend: mid, sample: 1, daily_usd: -1}",
                "routes.auto.shadow.daily_usd",
                "USD",
            ),
        ];
        for (shadow, path, says) in cases {
            let err = error_of(shadow);
            assert_eq!(err.path, path, "{shadow}: {err}");
            assert!(err.message.contains(says), "{shadow}: {err}");
        }
        let unknown = error_of("{backend: mid, sample: 1, mirror: true}");
        assert!(unknown.message.contains("mirror"), "{unknown}");
        let no_sample = error_of("{backend: mid}");
        assert!(no_sample.message.contains("sample"), "{no_sample}");
    }
}
