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
    /// Every candidate's prediction and verdict, for budget strategies.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<CandidateTrace>,
    /// The target-share score threshold now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_threshold: Option<f64>,
    /// The learned predictor the route consults, as `name@version+updates`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predictor: Option<String>,
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

/// What a budget strategy predicted of one candidate, and what it made of it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CandidateTrace {
    pub backend: String,
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    /// The first-token time's part spent waiting for the work ahead.
    pub queue_ms: f64,
    pub tokens_per_s: f64,
    pub total_p90_ms: f64,
    /// The concurrency the backend's own first-token times taught, when
    /// below what the model was told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub learned_concurrency: Option<u32>,
    pub cost_usd: f64,
    pub within_budget: bool,
    /// Why it was picked or passed over.
    pub verdict: String,
}

/// What a decision records of its workings when asked to explain itself.
#[derive(Debug, Default)]
pub(crate) struct Workings {
    pub rules: Vec<RuleTrace>,
    pub candidates: Vec<CandidateTrace>,
}
