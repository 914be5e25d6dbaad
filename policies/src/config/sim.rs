//! Parameters of the built-in model-server simulator.

use std::time::Duration;

/// Named starting points for simulator parameters; fields set next to a
/// preset override it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SimPreset {
    /// A ~1B model on a laptop CPU: quick first token, brisk decode, small context.
    Small,
    /// A ~8B model with speculative decoding: slower prefill, drafted decode.
    Mid,
    /// A frontier model behind a cloud API: network-bound first token, long context.
    Large,
}

impl SimPreset {
    pub const ALL: [SimPreset; 3] = [SimPreset::Small, SimPreset::Mid, SimPreset::Large];

    pub fn name(self) -> &'static str {
        match self {
            SimPreset::Small => "small",
            SimPreset::Mid => "mid",
            SimPreset::Large => "large",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The parameters this preset stands for.
    pub fn params(self) -> SimParams {
        let base = SimParams {
            seed: 0,
            base_ttft: Duration::from_millis(30),
            prefill_tokens_per_s: 1500.0,
            decode_tokens_per_s: 90.0,
            decode_halving_context: 8_000.0,
            jitter: 0.1,
            max_concurrency: 4,
            max_queue: 64,
            prefix_cache_blocks: 4096,
            context_window: 8192,
            default_max_tokens: 96,
            embedding_dimensions: 256,
            speculative: None,
            faults: SimFaults::default(),
        };
        match self {
            SimPreset::Small => base,
            SimPreset::Mid => SimParams {
                seed: 1,
                base_ttft: Duration::from_millis(60),
                prefill_tokens_per_s: 600.0,
                decode_tokens_per_s: 35.0,
                decode_halving_context: 16_000.0,
                max_concurrency: 2,
                context_window: 32_768,
                speculative: Some(SimSpeculation {
                    acceptance_rate: 0.7,
                    draft_tokens: 4,
                }),
                ..base
            },
            SimPreset::Large => SimParams {
                seed: 2,
                base_ttft: Duration::from_millis(400),
                prefill_tokens_per_s: 5000.0,
                decode_tokens_per_s: 60.0,
                decode_halving_context: 64_000.0,
                jitter: 0.2,
                max_concurrency: 64,
                max_queue: 256,
                prefix_cache_blocks: 65_536,
                context_window: 128_000,
                ..base
            },
        }
    }
}

/// How a simulated backend behaves. All rates are per second.
#[derive(Debug, Clone, PartialEq)]
pub struct SimParams {
    /// Makes output text and jitter reproducible.
    pub seed: u64,
    /// Time to first token for an empty, fully cached prompt.
    pub base_ttft: Duration,
    /// Prompt tokens processed per second (uncached tokens only).
    pub prefill_tokens_per_s: f64,
    /// Output tokens per second at an empty context.
    pub decode_tokens_per_s: f64,
    /// Context length (prompt + output tokens) at which decode speed halves.
    pub decode_halving_context: f64,
    /// Each timing is scaled by a factor drawn from `1 ± jitter`.
    pub jitter: f64,
    /// Requests decoded at once; more wait in the queue.
    pub max_concurrency: usize,
    /// Requests that may wait; more are refused with 503.
    pub max_queue: usize,
    /// Prefix-cache capacity in blocks of `PREFIX_BLOCK_TOKENS` tokens.
    pub prefix_cache_blocks: u64,
    /// Longest prompt + output accepted, in tokens.
    pub context_window: u32,
    /// Output tokens when the request sets no limit (the reply length is
    /// drawn up to this).
    pub default_max_tokens: u32,
    /// Length of simulated embedding vectors.
    pub embedding_dimensions: usize,
    pub speculative: Option<SimSpeculation>,
    pub faults: SimFaults,
}

impl SimParams {
    /// Tokens per prefix-cache block, as llama.cpp and vLLM cache in blocks.
    pub const PREFIX_BLOCK_TOKENS: usize = 16;
}

/// Speculative decoding: a draft proposes `draft_tokens`, each accepted with
/// `acceptance_rate`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimSpeculation {
    pub acceptance_rate: f64,
    pub draft_tokens: u32,
}

/// Injected faults, each a probability per request.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SimFaults {
    /// Answer with HTTP 500.
    pub error_rate: f64,
    /// Wait `stall` before the first token.
    pub stall_rate: f64,
    pub stall: Duration,
    /// Drop the connection: before the response when not streaming,
    /// half way through the stream when streaming.
    pub reset_rate: f64,
}
