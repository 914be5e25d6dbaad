use std::sync::Arc;

use switchyard_policies::{PromptClass, TokenCounts};

/// One request's record.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    /// Start of the request, Unix milliseconds.
    pub ts_ms: i64,
    /// The gateway's own id of the request (`x-request-id` as logged).
    pub request_id: Option<String>,
    /// The caller's own `x-request-id`, when it sent a short, plain one.
    pub client_request_id: Option<String>,
    pub key: Option<String>,
    pub team: Option<String>,
    pub route: Option<Arc<str>>,
    pub backend: String,
    pub tier: &'static str,
    /// Who serves the backend, as the GenAI conventions name it
    /// (`azure.ai.openai`, `gcp.gemini`, `llama.cpp`); none for a request
    /// refused before routing.
    pub provider: Option<&'static str>,
    /// `tool` for a tool call through `/mcp` (its server in `backend`);
    /// none for a model call.
    pub kind: Option<&'static str>,
    /// The tool called, as its server names it.
    pub tool: Option<String>,
    /// A tool call's size in JSON, both ways.
    pub bytes_in: Option<u64>,
    pub bytes_out: Option<u64>,
    pub profile: Option<&'static str>,
    /// The caller's API dialect (`openai`).
    pub dialect: &'static str,
    pub endpoint: &'static str,
    pub tokens: TokenCounts,
    pub cost_usd: f64,
    /// The same tokens priced on the reference cloud model.
    pub counterfactual_usd: f64,
    pub ttft_ms: Option<f64>,
    /// What the latency model expected, for comparing prediction and fact.
    pub predicted_ttft_ms: Option<f64>,
    /// Output tokens per second after the first.
    pub decode_tokens_per_s: Option<f64>,
    pub duration_ms: f64,
    /// `ok`, an error kind, `cancelled`, `escalated`.
    pub status: &'static str,
    /// For a request refused before any backend was called (budget, rate
    /// limit, open breaker, full queue, bad request, client gone): why, in
    /// the words the caller was given. Such a row costs nothing.
    pub refusal: Option<String>,
    pub reason: &'static str,
    pub hedge: bool,
    pub fallback: bool,
    pub cache_hit: bool,
    /// Usage as the backend reported it, or counted here.
    pub estimated: bool,
    /// Code or prose, as the router classed the prompt.
    pub prompt_class: PromptClass,
    /// Speculative decoding: tokens drafted and accepted, when the backend
    /// reported them (llama.cpp `timings.draft_n`, `draft_n_accepted`).
    pub drafts: Option<Drafts>,
    /// Prompt tokens the prefix index expected the replica to hold.
    pub expected_cached_tokens: u32,
    /// The provider service tier the request was sent with, when priced.
    pub service_tier: Option<String>,
    /// The backend has no price: `cost_usd` is 0 because the cost is not
    /// known, not because the call was free.
    pub unpriced: bool,
    /// The caller's session (`x-session-id`, Claude Code's session header,
    /// the body's `user`), for agent task times.
    pub session: Option<Arc<str>>,
    /// The batch whose line the call answered (`/v1/batches`).
    pub batch: Option<Arc<str>>,
    /// The request carried tool results.
    pub tool_results: bool,
    /// Of `ttft_ms` and `duration_ms`, the wait for one of the backend's
    /// slots in the gateway (0 for a call that did not wait).
    pub queued_ms: f64,
    /// A shadow copy's call (not the caller's answer), with how its answer
    /// compared with the one that served; `None` for every other row.
    pub shadow: Option<Shadowed>,
    /// A failed call's cause in the backend's own words, redacted (the
    /// caller was told only the kind), for the request log.
    pub error: Option<String>,
    /// What the request's sensitive-data policies found (the kinds,
    /// never the values) and did.
    pub sensitive: Option<std::sync::Arc<switchyard_router::sensitive::Handling>>,
}

impl LedgerRow {
    /// A row that bills nothing (a refusal, a tool call), to fill in: no
    /// tokens, no cost, no timings but its duration.
    pub fn unbilled(
        ts_ms: i64,
        (dialect, endpoint): (&'static str, &'static str),
        (status, reason): (&'static str, &'static str),
        duration_ms: f64,
    ) -> Self {
        LedgerRow {
            ts_ms,
            request_id: None,
            client_request_id: None,
            key: None,
            team: None,
            route: None,
            backend: String::new(),
            tier: "",
            provider: None,
            kind: None,
            tool: None,
            bytes_in: None,
            bytes_out: None,
            profile: None,
            dialect,
            endpoint,
            tokens: TokenCounts::default(),
            cost_usd: 0.0,
            counterfactual_usd: 0.0,
            ttft_ms: None,
            predicted_ttft_ms: None,
            decode_tokens_per_s: None,
            duration_ms,
            status,
            refusal: None,
            reason,
            hedge: false,
            fallback: false,
            cache_hit: false,
            estimated: false,
            prompt_class: PromptClass::Prose,
            drafts: None,
            expected_cached_tokens: 0,
            service_tier: None,
            unpriced: false,
            session: None,
            batch: None,
            tool_results: false,
            queued_ms: 0.0,
            shadow: None,
            error: None,
            sensitive: None,
        }
    }
}

/// How a shadow copy's answer compared with the answer that served the
/// request (the row with the same `request_id`); `None` figures when the
/// served answer was not there to compare (it failed, or its text was
/// counted and dropped past 64 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shadowed {
    /// The two texts are the same.
    pub exact: Option<bool>,
    /// Normalised-text similarity, 0 to 1.
    pub similarity: Option<f64>,
    /// Both answers checkable (JSON, tool calls, code blocks) and the same
    /// when parsed; `None` when the served answer is not checkable.
    pub checked: Option<bool>,
}

/// Speculative-decoding counts of one request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Drafts {
    pub drafted: u64,
    pub accepted: u64,
}

/// The outcomes that are the backend's own failures: what trips its
/// breaker, and what the budgets report counts as failed calls.
pub const UPSTREAM_FAILURES: [&str; 7] = [
    "upstream_connect",
    "upstream_auth",
    "upstream_reset",
    "upstream_protocol",
    "upstream_timeout",
    "upstream_overloaded",
    "upstream_error",
];

/// A batch line's request carries its batch's id (in its extensions), for
/// its rows.
#[derive(Debug, Clone)]
pub struct BatchId(pub Arc<str>);
