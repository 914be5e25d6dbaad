//! `predictors:`: learned models of whether a backend's answer will fail
//! its checks, named by routes (`learned`, `target_share.by`, and the
//! `predicted_fail` rule condition), with their weights in a file.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;

use super::validate::{Checker, check_name};
use super::{Backend, ConfigError, Route, RouteStrategy};

/// Step size of online learning unless the predictor says.
const DEFAULT_LEARNING_RATE: f64 = 0.05;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPredictor {
    pub backend: String,
    pub weights: Option<String>,
    #[serde(default)]
    pub learn_from: Vec<String>,
    pub learning_rate: Option<f64>,
    pub record: Option<String>,
}

/// A learned predictor of P(`backend`'s answer fails | the request).
#[derive(Debug, Clone, PartialEq)]
pub struct Predictor {
    pub name: String,
    /// Whose answers it predicts.
    pub backend: String,
    /// The weights file as written (relative to the config file); without
    /// one the predictor starts at p = 0.5 and learns online.
    pub weights: Option<String>,
    /// The file's text, read by the caller ([`super::Config::apply_predictor_weights`]).
    pub weights_text: Option<Arc<str>>,
    /// Routes whose cascade outcomes on `backend` train it while serving.
    pub learn_from: Vec<String>,
    /// Step size of each online update (0: never learns online).
    pub learning_rate: f64,
    /// A file the outcomes it learns from are appended to (features and
    /// label, no prompt text), for `switchyard train-router`.
    pub record: Option<String>,
}

pub(super) fn validate(
    ck: &Checker<'_>,
    raw: BTreeMap<String, RawPredictor>,
    backends: &BTreeMap<String, Backend>,
) -> Result<BTreeMap<String, Predictor>, ConfigError> {
    let mut predictors = BTreeMap::new();
    for (name, raw) in raw {
        check_name(ck, "predictors", &name)?;
        if !backends.contains_key(&raw.backend) {
            return Err(ck.error(
                &["predictors", &name, "backend"],
                format!("unknown backend `{}`", raw.backend),
            ));
        }
        let learning_rate = raw.learning_rate.unwrap_or(DEFAULT_LEARNING_RATE);
        if !(0.0..=1.0).contains(&learning_rate) {
            return Err(ck.error(
                &["predictors", &name, "learning_rate"],
                "a step size from 0 (never learn online) to 1",
            ));
        }
        predictors.insert(
            name.clone(),
            Predictor {
                name,
                backend: raw.backend,
                weights: raw.weights,
                weights_text: None,
                learn_from: raw.learn_from,
                learning_rate,
                record: raw.record,
            },
        );
    }
    Ok(predictors)
}

/// Routes name predictors that exist; a `predicted_fail` condition without
/// a name gets the only predictor; `learn_from` names cascades (or learned
/// routes) that try the predictor's backend first.
pub(super) fn check_uses(
    ck: &Checker<'_>,
    predictors: &BTreeMap<String, Predictor>,
    routes: &mut BTreeMap<String, Route>,
) -> Result<(), ConfigError> {
    let known = |path: &[&str], name: &str| -> Result<(), ConfigError> {
        if predictors.contains_key(name) {
            return Ok(());
        }
        let names: Vec<&str> = predictors.keys().map(String::as_str).collect();
        Err(ck.error(
            path,
            format!(
                "unknown predictor `{name}`; known: {}",
                if names.is_empty() {
                    "none (add a `predictors:` section)".to_owned()
                } else {
                    names.join(", ")
                }
            ),
        ))
    };
    let only = (predictors.len() == 1)
        .then(|| predictors.keys().next().cloned())
        .flatten();
    for (name, route) in routes.iter_mut() {
        match &mut route.strategy {
            RouteStrategy::Learned {
                predictor,
                easy,
                hard,
                ..
            } => {
                let path = ["routes", name.as_str(), "strategy", "learned"];
                known(&[&path[..], &["predictor"]].concat(), predictor)?;
                if easy == hard {
                    return Err(ck.error(
                        &[&path[..], &["hard"]].concat(),
                        "`hard` must differ from `easy`",
                    ));
                }
                if predictors[predictor.as_str()].backend != *easy {
                    return Err(ck.error(
                        &[&path[..], &["easy"]].concat(),
                        format!(
                            "`easy` must be the backend predictor `{predictor}` predicts (`{}`)",
                            predictors[predictor.as_str()].backend
                        ),
                    ));
                }
            }
            RouteStrategy::TargetShare {
                by: Some(by), easy, ..
            } => {
                let path = ["routes", name.as_str(), "strategy", "target_share", "by"];
                known(&path, by)?;
                // With a split `easy`, the predictor judges one of its
                // backends (the weakest, as a rule) for all of them.
                let predicted = &predictors[by.as_str()].backend;
                if !easy.iter().any(|(b, _)| b == predicted) {
                    let easy: Vec<&str> = easy.iter().map(|(b, _)| b.as_str()).collect();
                    return Err(ck.error(
                        &path,
                        format!(
                            "predictor `{by}` predicts `{predicted}`'s failures, not those of `easy` (`{}`)",
                            easy.join("`, `")
                        ),
                    ));
                }
            }
            RouteStrategy::Rules { rules } => {
                let mut used: Option<String> = None;
                for (i, rule) in rules.iter_mut().enumerate() {
                    let Some(p) = &mut rule.when.predicted_fail else {
                        continue;
                    };
                    let index = i.to_string();
                    let path = [
                        "routes",
                        name.as_str(),
                        "strategy",
                        "rules",
                        index.as_str(),
                        "when",
                        "predicted_fail",
                    ];
                    if p.predictor.is_empty() {
                        p.predictor = only.clone().ok_or_else(|| {
                            ck.error(
                                &path,
                                "name the `predictor`: the config has none or several",
                            )
                        })?;
                    }
                    known(&path, &p.predictor)?;
                    if used.as_ref().is_some_and(|u| *u != p.predictor) {
                        return Err(ck.error(&path, "a route's rules use one predictor"));
                    }
                    used = Some(p.predictor.clone());
                }
            }
            _ => {}
        }
    }
    for predictor in predictors.values() {
        for (i, from) in predictor.learn_from.iter().enumerate() {
            let index = i.to_string();
            let path = [
                "predictors",
                predictor.name.as_str(),
                "learn_from",
                index.as_str(),
            ];
            let first = match routes.get(from).map(|r| &r.strategy) {
                Some(RouteStrategy::Cascade { order, .. }) => order.first(),
                Some(RouteStrategy::Learned { checks, .. }) if checks.is_empty() => {
                    return Err(ck.error(
                        &path,
                        format!("route `{from}` checks no answer (no `escalate_on`), so it has no outcomes to learn from"),
                    ));
                }
                Some(RouteStrategy::Learned { easy, .. }) => Some(easy),
                Some(_) => {
                    return Err(ck.error(
                        &path,
                        format!("route `{from}` is not a cascade or a learned route"),
                    ));
                }
                None => return Err(ck.error(&path, format!("unknown route `{from}`"))),
            };
            if first != Some(&predictor.backend) {
                return Err(ck.error(
                    &path,
                    format!(
                        "route `{from}` does not try `{}` first, so its outcomes say nothing of it",
                        predictor.backend
                    ),
                ));
            }
        }
    }
    Ok(())
}
