//! A decision with its workings, for `POST /v1/route/explain` and
//! `switchyard explain`.

use crate::decision::Reason;
use crate::features::Features;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Explanation {
    pub model: String,
    pub route: Option<String>,
    /// `split`, `target_share`, `rules`, `cascade`, or `direct`.
    pub strategy: &'static str,
    pub backend: String,
    /// Backends in the order they would be tried.
    pub targets: Vec<String>,
    pub reason: Reason,
    pub rule: Option<usize>,
    /// Every rule's verdict, for rule routes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleTrace>,
    /// The target-share score threshold now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_threshold: Option<f64>,
    pub features: Features,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RuleTrace {
    pub index: usize,
    pub to: String,
    pub matched: bool,
    /// The closest example's similarity, for semantic rules.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub similarity: Option<f64>,
}
