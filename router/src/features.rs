//! What the router knows about a request: the gateway's small view of it,
//! and the features derived from that view, including a complexity score.

use std::sync::Arc;

use switchyard_policies::{Profile, PromptClass};

use crate::prefix::{PrefixChain, Tenant};
use crate::signals::{Signals, signals};

/// The request as the router sees it; the gateway builds it from whatever
/// dialect the request came in.
#[derive(Debug, Clone, Default)]
pub struct RequestView<'a> {
    /// The model name the caller sent.
    pub model: &'a str,
    pub prompt_tokens: u32,
    pub max_tokens: Option<u32>,
    /// Answers the backend generates (`n`; on completions `best_of`, for
    /// each prompt of a batch); 0 counts as 1.
    pub choices: u32,
    /// For a batch (embeddings inputs, completions prompts), the longest
    /// single input's tokens: what a context window must hold. `None`: the
    /// whole prompt is one sequence.
    pub sequence_tokens: Option<u32>,
    pub tool_count: u32,
    /// Prompt tokens of image, audio and file parts (part of
    /// `prompt_tokens`), and whether some part could not be sized before
    /// the call (reservations then take the backend's whole window).
    pub media_tokens: u32,
    pub media_unknown_size: bool,
    pub images: bool,
    pub streaming: bool,
    /// Messages in the conversation so far.
    pub turns: u32,
    /// The request carries tool results (an agent's turn after its tools ran).
    pub tool_results: bool,
    /// The text routing rules look at: the last user message.
    pub last_user_text: &'a str,
    /// The profile the request named (header or metadata), if any.
    pub profile: Option<Profile>,
    pub session: Option<&'a str>,
    /// The caller's virtual key and its team (none when auth is off).
    pub key: Option<&'a str>,
    pub team: Option<&'a str>,
    /// Request headers that some rule reads (lower-case names).
    pub headers: Vec<(&'a str, &'a str)>,
    /// The last user message embedded by encoder backends that semantic
    /// rules name: `(backend, vector)`.
    pub encoded: &'a [(usize, Vec<f32>)],
    /// The canonical prompt's prefix chain, when the gateway built one.
    pub prefix: Option<Arc<PrefixChain>>,
    /// The caller's salts for prefixes shared per key or team.
    pub tenant: Tenant,
}

/// Features derived from a request view, computed once per request.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Features {
    pub prompt_tokens: u32,
    pub max_tokens: Option<u32>,
    /// Answers the backend generates, at least 1: each is billed output.
    pub choices: u32,
    /// The longest single sequence's prompt tokens (the whole prompt unless
    /// the request is a batch).
    pub sequence_tokens: u32,
    pub tools: u32,
    /// As the request view's.
    pub media_tokens: u32,
    pub media_unknown_size: bool,
    pub images: bool,
    pub streaming: bool,
    pub turns: u32,
    pub signals: Signals,
    /// The prompt is long enough that prefill dominates (over 8k tokens).
    pub long_context: bool,
    /// The request's profile, or the route's default.
    pub profile: Option<Profile>,
    /// How demanding the request looks, 0 (trivial) to 1 (hard).
    pub score: f64,
    /// The prompt's prefix chain, for what backends hold cached.
    #[serde(skip)]
    pub prefix: Option<Arc<PrefixChain>>,
    /// Whose cached prefixes the request may count on.
    #[serde(skip)]
    pub tenant: Tenant,
    /// The caller's session, for the ledger's agent task times.
    #[serde(skip)]
    pub session: Option<Arc<str>>,
    /// The request carries tool results.
    pub tool_results: bool,
    /// A learned predictor's P(the easy backend fails), on routes that
    /// consult one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_fail: Option<f64>,
    /// On target-share routes, the threshold in force when this request
    /// was placed: it went to the hard backend when its score (or
    /// `predicted_fail`, with `by`) lay above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_threshold: Option<f64>,
}

/// The code signal of two keyword hits (see `signals::saturate`).
const CODE_SIGNAL: f64 = 0.6;

/// Prompts above this many tokens count as long-context.
const LONG_CONTEXT_TOKENS: u32 = 8192;

/// Weights of the complexity score's parts; they sum to 1.
const W_LENGTH: f64 = 0.25;
const W_CODE: f64 = 0.15;
const W_MATH: f64 = 0.15;
const W_REASONING: f64 = 0.2;
const W_TOOLS: f64 = 0.1;
const W_DEPTH: f64 = 0.1;
const W_OUTPUT: f64 = 0.05;

impl Features {
    pub fn of(view: &RequestView<'_>, route_profile: Option<Profile>) -> Self {
        let signals = signals(view.last_user_text);
        let mut features = Features {
            prompt_tokens: view.prompt_tokens,
            max_tokens: view.max_tokens,
            choices: view.choices.max(1),
            sequence_tokens: view.sequence_tokens.unwrap_or(view.prompt_tokens),
            tools: view.tool_count,
            images: view.images,
            media_tokens: view.media_tokens,
            media_unknown_size: view.media_unknown_size,
            streaming: view.streaming,
            turns: view.turns,
            signals,
            long_context: view.prompt_tokens > LONG_CONTEXT_TOKENS,
            profile: view.profile.or(route_profile),
            score: 0.0,
            prefix: view.prefix.clone(),
            tenant: view.tenant,
            session: view.session.map(Arc::from),
            tool_results: view.tool_results,
            predicted_fail: None,
            share_threshold: None,
        };
        features.score = features.complexity();
        features
    }

    /// Code or prose, for speculative decoding: code when the last user
    /// turn shows at least two signs of code.
    pub fn prompt_class(&self) -> PromptClass {
        if self.signals.code >= CODE_SIGNAL {
            PromptClass::Code
        } else {
            PromptClass::Prose
        }
    }

    /// A weighted sum of bounded parts: prompt length (log-scaled up to
    /// 32k tokens), content signals, tools, conversation depth (up to 20
    /// turns) and requested output (up to 4k tokens).
    fn complexity(&self) -> f64 {
        let length = (f64::from(self.prompt_tokens).ln_1p() / 32_768f64.ln_1p()).min(1.0);
        let depth = f64::from(self.turns.min(20)) / 20.0;
        let output = self
            .max_tokens
            .map_or(0.0, |m| (f64::from(m) / 4096.0).min(1.0));
        let tools = if self.tools > 0 { 1.0 } else { 0.0 };
        W_LENGTH * length
            + W_CODE * self.signals.code
            + W_MATH * self.signals.math
            + W_REASONING * self.signals.reasoning
            + W_TOOLS * tools
            + W_DEPTH * depth
            + W_OUTPUT * output
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_sum_to_one() {
        let sum = W_LENGTH + W_CODE + W_MATH + W_REASONING + W_TOOLS + W_DEPTH + W_OUTPUT;
        assert!((sum - 1.0).abs() < 1e-12);
    }

    #[test]
    fn hard_requests_score_higher() {
        let easy = RequestView {
            prompt_tokens: 8,
            turns: 1,
            last_user_text: "hi there",
            ..Default::default()
        };
        let hard = RequestView {
            prompt_tokens: 6000,
            turns: 12,
            tool_count: 3,
            max_tokens: Some(4000),
            last_user_text: "Analyze step by step and prove the theorem; then refactor the Python code in ```def f()```",
            ..Default::default()
        };
        let (easy, hard) = (Features::of(&easy, None), Features::of(&hard, None));
        assert!(easy.score < 0.2, "{}", easy.score);
        assert!(hard.score > 0.7, "{}", hard.score);
        assert!((0.0..=1.0).contains(&hard.score));
    }

    #[test]
    fn the_requests_profile_beats_the_routes() {
        let view = RequestView {
            profile: Some(Profile::Code),
            ..Default::default()
        };
        assert_eq!(
            Features::of(&view, Some(Profile::Chat)).profile,
            Some(Profile::Code)
        );
        assert_eq!(
            Features::of(&RequestView::default(), Some(Profile::Chat)).profile,
            Some(Profile::Chat)
        );
    }
}
