//! Route validation: strategies name known backends with usable numbers, and
//! no rule is shadowed by one above it.

use std::collections::{BTreeMap, BTreeSet};

use super::raw::{RawCondition, RawEasy, RawRoute, RawStrategy};
use super::route::{Hedge, LatencyBudget, ResponseCacheSettings};
use super::validate::{Checker, check_name};
use super::{
    Backend, CascadeCheck, Condition, ConfigError, HeaderMatch, Pattern, Route, RouteStrategy,
    Rule, Similar,
};
use crate::speculation::Speculative;

/// Checks that a name is a backend, reporting `path` when it is not.
pub(super) type KnownBackend<'a> = dyn Fn(&[&str], &str) -> Result<String, ConfigError> + 'a;

/// Requests the target-share threshold follows, unless the route says.
const DEFAULT_SHARE_WINDOW: usize = 2000;
/// Mean token log-probability under which a cascade escalates by default.
const DEFAULT_MIN_MEAN_LOGPROB: f64 = -1.5;

/// A split's weights: known backends, finite and not negative, with a positive sum.
fn checked_weights(
    ck: &Checker<'_>,
    path: &[&str],
    weights: BTreeMap<String, f64>,
    known: &KnownBackend<'_>,
) -> Result<Vec<(String, f64)>, ConfigError> {
    if weights.is_empty() {
        return Err(ck.error(path, "name at least one backend"));
    }
    for (backend, weight) in &weights {
        let at = [path, &[backend.as_str()]].concat();
        known(&at, backend)?;
        if !weight.is_finite() || *weight < 0.0 {
            return Err(ck.error(&at, "a weight is a finite number >= 0"));
        }
    }
    if weights.values().sum::<f64>() <= 0.0 {
        return Err(ck.error(path, "weights must sum to more than 0"));
    }
    Ok(weights.into_iter().collect())
}

pub(super) fn validate_route(
    ck: &Checker<'_>,
    name: &str,
    raw: RawRoute,
    backends: &BTreeMap<String, Backend>,
) -> Result<Route, ConfigError> {
    // `PREFIX/*`: a wildcard route, for every model name under PREFIX/.
    check_name(ck, "routes", name.strip_suffix("/*").unwrap_or(name))?;
    let known = |path: &[&str], backend: &str| -> Result<String, ConfigError> {
        if backends.contains_key(backend) {
            Ok(backend.to_owned())
        } else {
            let names: Vec<&str> = backends.keys().map(String::as_str).collect();
            Err(ck.error(
                path,
                format!("unknown backend `{backend}`; known: {}", names.join(", ")),
            ))
        }
    };
    // Every name in a list must be a backend; errors name the list and the entry.
    let known_all = |path: &[&str], names: &[String]| -> Result<Vec<String>, ConfigError> {
        names
            .iter()
            .map(|b| known(&[path, &[b.as_str()]].concat(), b))
            .collect()
    };
    let strategy = match raw.strategy {
        RawStrategy::Split { weights, sticky } => {
            let path = ["routes", name, "strategy", "split", "weights"];
            RouteStrategy::Split {
                weights: checked_weights(ck, &path, weights, &known)?,
                sticky,
            }
        }
        RawStrategy::TargetShare {
            hard,
            easy,
            share,
            window,
            by,
        } => {
            let path = ["routes", name, "strategy", "target_share"];
            let hard = known(&[&path[..], &["hard"]].concat(), &hard)?;
            let easy_path = [&path[..], &["easy"]].concat();
            let easy = match easy {
                RawEasy::One(backend) => vec![(known(&easy_path, &backend)?, 1.0)],
                RawEasy::Split(weights) => checked_weights(ck, &easy_path, weights, &known)?,
            };
            if !(share > 0.0 && share < 1.0) {
                return Err(ck.error(
                    &[&path[..], &["share"]].concat(),
                    "a share is a fraction between 0 and 1, e.g. 0.2",
                ));
            }
            let window = window.unwrap_or(DEFAULT_SHARE_WINDOW);
            if window < 10 {
                return Err(ck.error(
                    &[&path[..], &["window"]].concat(),
                    "follow at least 10 requests",
                ));
            }
            RouteStrategy::TargetShare {
                hard,
                easy,
                share,
                window,
                by,
            }
        }
        RawStrategy::Learned {
            predictor,
            threshold,
            easy,
            hard,
            escalate_on,
            min_mean_logprob,
            explore,
        } => {
            let path = ["routes", name, "strategy", "learned"];
            let easy = known(&[&path[..], &["easy"]].concat(), &easy)?;
            let hard = known(&[&path[..], &["hard"]].concat(), &hard)?;
            let threshold = threshold.unwrap_or(0.5);
            let explore = explore.unwrap_or(0.0);
            within_unit(
                ck,
                &path,
                &[("threshold", Some(threshold)), ("explore", Some(explore))],
                "a probability from 0 to 1",
            )?;
            RouteStrategy::Learned {
                predictor,
                threshold,
                easy,
                hard,
                checks: escalate_on,
                min_mean_logprob: min_mean_logprob.unwrap_or(DEFAULT_MIN_MEAN_LOGPROB),
                explore,
            }
        }
        RawStrategy::Rules(raw_rules) => {
            let path = ["routes", name, "strategy", "rules"];
            if raw_rules.is_empty() {
                return Err(ck.error(&path, "list at least one rule"));
            }
            let mut rules = Vec::with_capacity(raw_rules.len());
            for (i, raw_rule) in raw_rules.into_iter().enumerate() {
                let index = i.to_string();
                let at = [&path[..], &[index.as_str()]].concat();
                let to = known(&[&at[..], &["to"]].concat(), &raw_rule.to)?;
                let when = condition(ck, &at, raw_rule.when, &known)?;
                rules.push(Rule { when, to });
            }
            check_shadowing(ck, &path, &rules)?;
            if !rules.last().is_some_and(|r| r.when.is_empty()) {
                return Err(ck.error(
                    &path,
                    "end with a rule without `when`: the backend for requests no rule matches",
                ));
            }
            RouteStrategy::Rules { rules }
        }
        RawStrategy::CheapestWithinBudget { candidates } | RawStrategy::Fastest { candidates }
            if candidates.is_empty() =>
        {
            return Err(ck.error(&["routes", name, "strategy"], "list at least one candidate"));
        }
        RawStrategy::CheapestWithinBudget { candidates } => RouteStrategy::CheapestWithinBudget {
            candidates: known_all(
                &[
                    "routes",
                    name,
                    "strategy",
                    "cheapest_within_budget",
                    "candidates",
                ],
                &candidates,
            )?,
        },
        RawStrategy::Fastest { candidates } => RouteStrategy::Fastest {
            candidates: known_all(
                &["routes", name, "strategy", "fastest", "candidates"],
                &candidates,
            )?,
        },
        RawStrategy::Cascade {
            order,
            escalate_on,
            min_mean_logprob,
        } => {
            let path = ["routes", name, "strategy", "cascade", "order"];
            if order.len() < 2 {
                return Err(ck.error(
                    &path,
                    "a cascade needs at least two backends: where to start and where to escalate",
                ));
            }
            let order = known_all(&path, &order)?;
            let checks = escalate_on.unwrap_or_else(|| CascadeCheck::ALL.to_vec());
            if checks.is_empty() {
                return Err(ck.error(
                    &["routes", name, "strategy", "cascade", "escalate_on"],
                    "name at least one check",
                ));
            }
            RouteStrategy::Cascade {
                order,
                checks,
                min_mean_logprob: min_mean_logprob.unwrap_or(DEFAULT_MIN_MEAN_LOGPROB),
            }
        }
    };
    let fallbacks = known_all(&["routes", name, "fallbacks"], &raw.fallbacks)?;
    for alias in &raw.aliases {
        check_name(ck, "routes", alias).map_err(|e| ConfigError {
            path: format!("routes.{name}.aliases"),
            ..e
        })?;
    }
    let budget = match raw.budget {
        None => None,
        Some(b) => {
            if b.min_tokens_per_s
                .is_some_and(|v| !v.is_finite() || v < 0.0)
            {
                return Err(ck.error(
                    &["routes", name, "budget", "min_tokens_per_s"],
                    "a rate is a finite number >= 0",
                ));
            }
            Some(LatencyBudget {
                ttft: b.ttft_ms.map(std::time::Duration::from_millis),
                min_tokens_per_s: b.min_tokens_per_s.unwrap_or(0.0),
                total: b.total_ms.map(std::time::Duration::from_millis),
            })
        }
    };
    let retries = raw.retries.unwrap_or(1);
    if retries > 5 {
        return Err(ck.error(
            &["routes", name, "retries"],
            "at most 5: beyond that, fall back instead",
        ));
    }
    let hedge = match raw.hedge {
        Some(h) if h.enabled => {
            if h.max_usd_per_key_per_day
                .is_some_and(|v| !v.is_finite() || v < 0.0)
            {
                return Err(ck.error(
                    &["routes", name, "hedge", "max_usd_per_key_per_day"],
                    "a finite number of USD >= 0",
                ));
            }
            Some(Hedge {
                max_usd_per_key_per_day: h.max_usd_per_key_per_day,
            })
        }
        _ => None,
    };
    let speculative = match raw.speculative {
        None => None,
        Some(s) => {
            if let Some(instead) = &s.instead {
                known(&["routes", name, "speculative", "instead"], instead)?;
            }
            Some(speculative(ck, name, s)?)
        }
    };
    let sensitive = super::sensitive::sensitive(ck, &["routes", name, "sensitive"], raw.sensitive)?;
    let shadow = match raw.shadow {
        Some(raw) => Some(super::validate_shadow::shadow(ck, name, raw, &known)?),
        None => None,
    };
    Ok(Route {
        name: name.to_owned(),
        aliases: raw.aliases,
        profile: raw.profile,
        strategy,
        fallbacks,
        budget,
        retries,
        hedge,
        speculative,
        response_cache: raw.response_cache.map(|c| ResponseCacheSettings {
            ttl: std::time::Duration::from_secs(c.ttl_s.unwrap_or(300).max(1)),
            max_entries: c.max_entries.unwrap_or(10_000).max(1),
            share: c.share.unwrap_or_default(),
            any_temperature: c.any_temperature,
        }),
        shadow,
        sensitive,
        guardrails: raw.guardrails,
    })
}

fn speculative(
    ck: &Checker<'_>,
    name: &str,
    raw: super::raw::RawSpeculative,
) -> Result<Speculative, ConfigError> {
    let error =
        |field: &str, message: String| ck.error(&["routes", name, "speculative", field], message);
    let outside_unit = |v: Option<f64>| v.is_some_and(|p| !(0.0..=1.0).contains(&p));
    if outside_unit(raw.p_min) {
        return Err(error("p_min", "a probability from 0 to 1".to_owned()));
    }
    if outside_unit(raw.min_acceptance) {
        return Err(error(
            "min_acceptance",
            "a share of drafted tokens from 0 to 1".to_owned(),
        ));
    }
    if let (Some(min), Some(max)) = (raw.n_min, raw.n_max)
        && min > max
    {
        return Err(error("n_min", format!("{min} is above n_max ({max})")));
    }
    Ok(Speculative {
        n_max: raw.n_max,
        n_min: raw.n_min,
        p_min: raw.p_min,
        disable_for: raw.disable_for,
        min_acceptance: raw.min_acceptance,
        instead: raw.instead,
    })
}

fn condition(
    ck: &Checker<'_>,
    at: &[&str],
    raw: RawCondition,
    known: &KnownBackend<'_>,
) -> Result<Condition, ConfigError> {
    let field = |f: &'static str| [at, &["when", f]].concat();
    let regex = match raw.regex {
        None => None,
        Some(pattern) => Some(Pattern(regex::Regex::new(&pattern).map_err(|err| {
            ck.error(&field("regex"), format!("not a valid regex: {err}"))
        })?)),
    };
    within_unit(
        ck,
        &[at, &["when"]].concat(),
        &[("min_score", raw.min_score), ("max_score", raw.max_score)],
        "scores run from 0 to 1",
    )?;
    if let (Some(min), Some(max)) = (raw.min_prompt_tokens, raw.max_prompt_tokens)
        && min > max
    {
        return Err(ck.error(
            &field("min_prompt_tokens"),
            "min_prompt_tokens is above max_prompt_tokens: nothing can match",
        ));
    }
    let similar_to = match raw.similar_to {
        None => None,
        Some(s) if s.examples.is_empty() => {
            return Err(ck.error(&field("similar_to"), "give at least one example"));
        }
        Some(s) if !(0.0..=1.0).contains(&s.threshold) => {
            return Err(ck.error(
                &field("similar_to"),
                "threshold is a cosine similarity from 0 to 1",
            ));
        }
        Some(s) => {
            if let Some(encoder) = &s.encoder {
                known(&field("similar_to"), encoder)?;
            }
            Some(Similar {
                examples: s.examples,
                threshold: s.threshold,
                encoder: s.encoder,
            })
        }
    };
    let predicted_fail = match raw.predicted_fail {
        None => None,
        Some(p) => {
            within_unit(
                ck,
                &field("predicted_fail"),
                &[("min", p.min), ("max", p.max)],
                "a probability from 0 to 1",
            )?;
            if p.min.is_none() && p.max.is_none() {
                return Err(ck.error(&field("predicted_fail"), "set `min`, `max` or both"));
            }
            if let (Some(min), Some(max)) = (p.min, p.max)
                && min > max
            {
                return Err(ck.error(
                    &field("predicted_fail"),
                    "min is above max: nothing can match",
                ));
            }
            Some(super::PredictedFail {
                predictor: p.predictor.unwrap_or_default(),
                min: p.min,
                max: p.max,
            })
        }
    };
    if raw.keywords.as_ref().is_some_and(Vec::is_empty) {
        return Err(ck.error(&field("keywords"), "give at least one keyword"));
    }
    Ok(Condition {
        model: raw.model,
        keys: raw.keys,
        teams: raw.teams,
        header: raw.header.map(|h| HeaderMatch {
            name: h.name.to_ascii_lowercase(),
            value: h.value,
        }),
        profile: raw.profile,
        tools: raw.tools,
        images: raw.images,
        streaming: raw.streaming,
        min_prompt_tokens: raw.min_prompt_tokens,
        max_prompt_tokens: raw.max_prompt_tokens,
        regex,
        keywords: raw
            .keywords
            .map(|k| k.into_iter().map(|w| w.to_lowercase()).collect()),
        min_score: raw.min_score,
        max_score: raw.max_score,
        similar_to,
        predicted_fail,
    })
}

/// Each of `fields` that is set lies in [0, 1]; the first that does not is
/// an error at `at` and its name, saying `message`.
fn within_unit(
    ck: &Checker<'_>,
    at: &[&str],
    fields: &[(&str, Option<f64>)],
    message: &str,
) -> Result<(), ConfigError> {
    match fields
        .iter()
        .find(|(_, value)| value.is_some_and(|v| !(0.0..=1.0).contains(&v)))
    {
        Some((name, _)) => Err(ck.error(&[at, &[*name]].concat(), message)),
        None => Ok(()),
    }
}

/// A rule below one that matches everything it matches can never fire:
/// almost always a mistake in the order.
fn check_shadowing(ck: &Checker<'_>, path: &[&str], rules: &[Rule]) -> Result<(), ConfigError> {
    for (later, rule) in rules.iter().enumerate() {
        if let Some(earlier) = rules[..later]
            .iter()
            .position(|above| covers(&above.when, &rule.when))
        {
            let index = later.to_string();
            return Err(ck.error(
                &[path, &[index.as_str()]].concat(),
                format!("this rule can never match: rule {earlier} above it matches every request it would"),
            ));
        }
    }
    Ok(())
}

/// Whether every request matching `narrow` also matches `wide`.
fn covers(wide: &Condition, narrow: &Condition) -> bool {
    fn same<T: PartialEq>(wide: &Option<T>, narrow: &Option<T>) -> bool {
        wide.is_none() || wide == narrow
    }
    fn at_least<T: PartialOrd>(wide: Option<T>, narrow: Option<T>) -> bool {
        match (wide, narrow) {
            (None, _) => true,
            (Some(w), Some(n)) => n >= w,
            (Some(_), None) => false,
        }
    }
    fn at_most<T: PartialOrd>(wide: Option<T>, narrow: Option<T>) -> bool {
        match (wide, narrow) {
            (None, _) => true,
            (Some(w), Some(n)) => n <= w,
            (Some(_), None) => false,
        }
    }
    fn subset<T: Ord + Clone>(wide: &Option<Vec<T>>, narrow: &Option<Vec<T>>) -> bool {
        match (wide, narrow) {
            (None, _) => true,
            (Some(w), Some(n)) => {
                let w: BTreeSet<T> = w.iter().cloned().collect();
                n.iter().all(|x| w.contains(x))
            }
            (Some(_), None) => false,
        }
    }
    let profiles = |c: &Condition| {
        c.profile
            .as_ref()
            .map(|p| p.iter().map(|x| x.name()).collect::<Vec<_>>())
    };
    same(&wide.model, &narrow.model)
        && subset(&wide.keys, &narrow.keys)
        && subset(&wide.teams, &narrow.teams)
        && same(&wide.header, &narrow.header)
        && subset(&profiles(wide), &profiles(narrow))
        && same(&wide.tools, &narrow.tools)
        && same(&wide.images, &narrow.images)
        && same(&wide.streaming, &narrow.streaming)
        && at_least(wide.min_prompt_tokens, narrow.min_prompt_tokens)
        && at_most(wide.max_prompt_tokens, narrow.max_prompt_tokens)
        && same(&wide.regex, &narrow.regex)
        && subset(&wide.keywords, &narrow.keywords)
        && at_least(wide.min_score, narrow.min_score)
        && at_most(wide.max_score, narrow.max_score)
        && same(&wide.similar_to, &narrow.similar_to)
        && same(&wide.predicted_fail, &narrow.predicted_fail)
}

/// Model names (backends, routes, aliases) must each mean one thing.
pub(super) fn check_model_names(
    ck: &Checker<'_>,
    backends: &BTreeMap<String, Backend>,
    routes: &BTreeMap<String, Route>,
) -> Result<(), ConfigError> {
    let mut seen: BTreeMap<&str, String> = backends
        .keys()
        .map(|b| (b.as_str(), format!("backend `{b}`")))
        .collect();
    for route in routes.values() {
        for (name, path) in std::iter::once((&route.name, vec!["routes", route.name.as_str()]))
            .chain(
                route
                    .aliases
                    .iter()
                    .map(|a| (a, vec!["routes", route.name.as_str(), "aliases"])),
            )
        {
            if let Some(owner) = seen.get(name.as_str()) {
                return Err(ck.error(
                    &path,
                    format!(
                        "`{name}` is already the name of {owner}; a model name must mean one thing"
                    ),
                ));
            }
            seen.insert(name, format!("route `{}`", route.name));
        }
    }
    Ok(())
}
