//! Validated route types: how a named route picks among backends.

use std::fmt;

use crate::profiles::Profile;

/// A named policy that picks among backends.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    pub name: String,
    /// Other model names that mean this route (e.g. a cloud model name that
    /// clients have hard-coded).
    pub aliases: Vec<String>,
    /// The profile of requests that name none.
    pub profile: Option<Profile>,
    pub strategy: RouteStrategy,
    /// Backends to try, in order, when the chosen one fails before answering.
    pub fallbacks: Vec<String>,
    /// Explicit latency budget; the profile's when `None`.
    pub budget: Option<LatencyBudget>,
    /// Retries of a backend that failed before answering, before moving on.
    pub retries: u32,
    pub hedge: Option<Hedge>,
    pub speculative: Option<crate::speculation::Speculative>,
    pub response_cache: Option<ResponseCacheSettings>,
    pub shadow: Option<Shadow>,
    /// What a request holding sensitive data may do here.
    pub sensitive: Option<super::SensitivePolicy>,
    /// Guardrail hooks asked for each request, by name, in order.
    pub guardrails: Vec<String>,
}

/// Shadow traffic: a sampled copy of the route's requests goes to a
/// candidate backend after the caller's own call is dispatched, priced and
/// compared with what served. The caller's answer never waits for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shadow {
    /// The candidate backend.
    pub backend: String,
    /// The share of the route's requests copied, 0 to 1.
    pub sample: f64,
    /// Copies in flight at once: the candidate's own `max_concurrency`, or
    /// 4 where it has none, when `None`.
    pub max_concurrency: Option<usize>,
    /// Copies waiting for a turn; past it, copies are dropped and counted.
    pub queue: usize,
    /// The profiles whose requests are copied; every profile when empty.
    pub profiles: Vec<Profile>,
    /// The shadow calls' spend per day, USD, across the route.
    pub daily_usd: Option<f64>,
}

/// The exact response cache of a route (opt-in).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResponseCacheSettings {
    pub ttl: std::time::Duration,
    pub max_entries: u64,
    /// Who may be served an answer another caller got.
    pub share: CacheShare,
    /// Cache sampled answers too (by default only temperature 0 or a seed).
    pub any_temperature: bool,
}

/// Whose answers a caller may be served from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheShare {
    /// Only answers to the same virtual key.
    #[default]
    Key,
    /// Answers to any key of the same team.
    Team,
    /// Every caller's (for public, non-personal prompts).
    Everyone,
}

/// How long a waiting person (or job) will wait.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyBudget {
    pub ttft: Option<std::time::Duration>,
    pub min_tokens_per_s: f64,
    pub total: Option<std::time::Duration>,
}

/// Hedging: when the chosen backend may be slow to start, a second one is
/// started after the first's p90 time to first token; the first to answer
/// wins and the other is cancelled. Both are billed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hedge {
    pub max_usd_per_key_per_day: Option<f64>,
}

/// How a route picks its backend.
#[derive(Debug, Clone, PartialEq)]
pub enum RouteStrategy {
    /// Weighted split; weights are positive and name known backends. With
    /// `sticky`, a session stays on one backend while that keeps its
    /// caller within the weights (see the router's `sticky_share`).
    Split {
        weights: Vec<(String, f64)>,
        sticky: bool,
    },
    /// The hardest `share` of requests (by complexity score) go to `hard`,
    /// the rest to `easy` (one backend, or split between several by
    /// weight); the score threshold follows the last `window` requests so
    /// the share holds as traffic shifts.
    TargetShare {
        hard: String,
        easy: Vec<(String, f64)>,
        share: f64,
        window: usize,
        /// Rank by this predictor's P(`easy` fails) instead of the
        /// complexity score.
        by: Option<String>,
    },
    /// Requests a predictor expects `easy` to fail (p >= `threshold`) go
    /// straight to `hard`; the rest try `easy` first and, when `checks` are
    /// set, escalate to `hard` on a failed check, which trains the
    /// predictor. `explore` is the share of predicted failures still tried
    /// on `easy`, so the predictor keeps seeing labels for what it sends up.
    Learned {
        predictor: String,
        threshold: f64,
        easy: String,
        hard: String,
        checks: Vec<CascadeCheck>,
        min_mean_logprob: f64,
        explore: f64,
    },
    /// First matching rule wins; the last rule matches everything.
    Rules { rules: Vec<Rule> },
    /// The cheapest candidate predicted to meet the latency budget; the
    /// fastest when none is.
    CheapestWithinBudget { candidates: Vec<String> },
    /// The candidate predicted to finish first.
    Fastest { candidates: Vec<String> },
    /// Try `order[0]`; escalate to the next when its answer fails a check.
    Cascade {
        order: Vec<String>,
        checks: Vec<CascadeCheck>,
        min_mean_logprob: f64,
    },
}

impl RouteStrategy {
    /// Every backend this strategy can pick.
    pub fn backends(&self) -> Vec<&str> {
        match self {
            RouteStrategy::Split { weights, .. } => {
                weights.iter().map(|(b, _)| b.as_str()).collect()
            }
            RouteStrategy::TargetShare { hard, easy, .. } => std::iter::once(hard.as_str())
                .chain(easy.iter().map(|(b, _)| b.as_str()))
                .collect(),
            RouteStrategy::Learned { hard, easy, .. } => vec![hard.as_str(), easy.as_str()],
            RouteStrategy::Rules { rules } => rules.iter().map(|r| r.to.as_str()).collect(),
            RouteStrategy::Cascade { order, .. } => order.iter().map(String::as_str).collect(),
            RouteStrategy::CheapestWithinBudget { candidates }
            | RouteStrategy::Fastest { candidates } => {
                candidates.iter().map(String::as_str).collect()
            }
        }
    }
}

/// A rule: when the condition holds, send to `to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub when: Condition,
    pub to: String,
}

/// Conditions on a request; all that are set must hold. An empty condition
/// matches every request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Condition {
    /// The model name the caller sent (a route name or one of its aliases).
    pub model: Option<String>,
    /// The caller's virtual key is one of these (by name).
    pub keys: Option<Vec<String>>,
    /// The caller's key belongs to one of these teams.
    pub teams: Option<Vec<String>>,
    /// A request header, present (and equal to `value` when set).
    pub header: Option<HeaderMatch>,
    /// One of these profiles.
    pub profile: Option<Vec<Profile>>,
    pub tools: Option<bool>,
    pub images: Option<bool>,
    pub streaming: Option<bool>,
    pub min_prompt_tokens: Option<u32>,
    pub max_prompt_tokens: Option<u32>,
    /// Matches the last user message.
    pub regex: Option<Pattern>,
    /// Any of these (case-insensitive) in the last user message.
    pub keywords: Option<Vec<String>>,
    /// Complexity score range, 0 to 1.
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
    /// The last user message resembles one of these examples.
    pub similar_to: Option<Similar>,
    /// A predictor's P(its backend fails) lies in a range.
    pub predicted_fail: Option<PredictedFail>,
}

/// `predicted_fail: {predictor: small-fails, min: 0.5}`: bounds are
/// inclusive; an unset one is open.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictedFail {
    /// Filled in by validation when the config has one predictor.
    pub predictor: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

impl Condition {
    pub fn is_empty(&self) -> bool {
        *self == Condition::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderMatch {
    /// Lower-case header name.
    pub name: String,
    pub value: Option<String>,
}

/// Semantic match by example prompts.
#[derive(Debug, Clone, PartialEq)]
pub struct Similar {
    pub examples: Vec<String>,
    /// Cosine similarity needed, 0 to 1.
    pub threshold: f64,
    /// A backend whose `/v1/embeddings` embeds the examples and the request,
    /// for a real encoder; the built-in n-gram embedding when unset.
    pub encoder: Option<String>,
}

/// A compiled regular expression, compared by its pattern.
#[derive(Clone)]
pub struct Pattern(pub regex::Regex);

impl PartialEq for Pattern {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/", self.0.as_str())
    }
}

/// Why a cascade escalates an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CascadeCheck {
    /// The answer was cut at the token limit.
    Length,
    /// No text and no tool call.
    Empty,
    /// The model declined.
    Refusal,
    /// A tool call whose arguments are not JSON.
    InvalidToolJson,
    /// Mean token log-probability under `min_mean_logprob` (when the backend
    /// returns logprobs).
    LowLogprob,
}

impl CascadeCheck {
    pub const ALL: [CascadeCheck; 5] = [
        CascadeCheck::Length,
        CascadeCheck::Empty,
        CascadeCheck::Refusal,
        CascadeCheck::InvalidToolJson,
        CascadeCheck::LowLogprob,
    ];

    pub fn name(self) -> &'static str {
        match self {
            CascadeCheck::Length => "length",
            CascadeCheck::Empty => "empty",
            CascadeCheck::Refusal => "refusal",
            CascadeCheck::InvalidToolJson => "invalid_tool_json",
            CascadeCheck::LowLogprob => "low_logprob",
        }
    }
}
