//! How long the simulated backend takes: time to first token from the
//! uncached prompt, decode speed falling as the context grows, speculation.

use std::time::Duration;

use switchyard_policies::{SimParams, SimSpeculation};

/// Expected tokens produced per target-model step with speculation: the
/// accepted run of a k-token draft plus the target's own token,
/// `(1 - a^(k+1)) / (1 - a)`.
fn tokens_per_step(spec: SimSpeculation) -> f64 {
    let a = spec.acceptance_rate.clamp(0.0, 0.999);
    (1.0 - a.powi(spec.draft_tokens as i32 + 1)) / (1.0 - a)
}

/// Each drafted token costs this fraction of a target step (a draft model is
/// roughly a tenth of the target's size).
const DRAFT_COST: f64 = 0.1;

/// Decode speed, tokens per second, at a context of `context` tokens.
pub fn decode_rate(params: &SimParams, context: usize) -> f64 {
    let base = params.decode_tokens_per_s / (1.0 + context as f64 / params.decode_halving_context);
    match params.speculative {
        Some(spec) => {
            base * tokens_per_step(spec) / (1.0 + DRAFT_COST * f64::from(spec.draft_tokens))
        }
        None => base,
    }
}

/// Time to first token for a prompt with `uncached` tokens to prefill.
pub fn ttft(params: &SimParams, uncached: usize) -> Duration {
    params.base_ttft + Duration::from_secs_f64(uncached as f64 / params.prefill_tokens_per_s)
}

/// The gap before output token `index` (0-based) of a reply to a prompt of
/// `prompt_tokens` tokens.
pub fn token_gap(params: &SimParams, prompt_tokens: usize, index: usize) -> Duration {
    Duration::from_secs_f64(1.0 / decode_rate(params, prompt_tokens + index))
}

/// Drafted and accepted token counts for `tokens` output tokens, as
/// llama.cpp reports them in `timings.draft_n` / `draft_n_accepted`.
pub fn draft_counts(params: &SimParams, tokens: usize) -> Option<(usize, usize)> {
    params.speculative.map(|spec| {
        let steps = (tokens as f64 / tokens_per_step(spec)).ceil();
        let drafted = steps * f64::from(spec.draft_tokens);
        (
            drafted as usize,
            (drafted * spec.acceptance_rate).round() as usize,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_policies::SimPreset;

    #[test]
    fn decode_slows_as_context_grows() {
        let p = SimPreset::Small.params();
        assert!((decode_rate(&p, 0) - 90.0).abs() < 1e-9);
        assert!((decode_rate(&p, 8000) - 45.0).abs() < 1e-9);
    }

    #[test]
    fn speculation_speeds_up_decode() {
        let mid = SimPreset::Mid.params();
        let plain = SimParams {
            speculative: None,
            ..mid.clone()
        };
        let speedup = decode_rate(&mid, 0) / decode_rate(&plain, 0);
        assert!(speedup > 1.5 && speedup < 3.0, "{speedup}");
    }

    #[test]
    fn prefill_is_paid_on_uncached_tokens_only() {
        let p = SimPreset::Small.params();
        assert_eq!(ttft(&p, 0), p.base_ttft);
        assert_eq!(ttft(&p, 1500), p.base_ttft + Duration::from_secs(1));
    }
}
