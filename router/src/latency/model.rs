//! The online latency model of one backend: what a waiting person feels.
//! Time to first token = queue wait + fixed overhead + uncached prompt
//! tokens / prefill rate; completion = that + output tokens / decode rate at
//! the request's context length.

use std::time::Duration;

use switchyard_policies::PromptClass;

use super::stat::Stat;

/// Context-length buckets for decode speed: <2k, 2-8k, 8-32k, >32k tokens.
const BUCKETS: [u32; 3] = [2_048, 8_192, 32_768];

fn bucket(context: u32) -> usize {
    BUCKETS
        .iter()
        .position(|&edge| context < edge)
        .unwrap_or(BUCKETS.len())
}

/// Starting figures for a backend, from config or a probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencyHints {
    /// Time to first token with nothing to prefill.
    pub base_ttft: Duration,
    pub prefill_tokens_per_s: f64,
    /// Decode speed at a short context.
    pub decode_tokens_per_s: f64,
    /// Requests the backend serves at once.
    pub concurrency: u32,
}

impl Default for LatencyHints {
    fn default() -> Self {
        LatencyHints {
            base_ttft: Duration::from_millis(500),
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 30.0,
            concurrency: 8,
        }
    }
}

/// What one finished call showed.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Observation {
    pub prompt_tokens: u32,
    pub cached_tokens: u32,
    pub output_tokens: u32,
    /// Time to first token, when output arrived.
    pub ttft: Option<Duration>,
    pub total: Duration,
    /// Rates the backend reported itself (llama.cpp `timings`).
    pub reported_prefill_tokens_per_s: Option<f64>,
    pub reported_decode_tokens_per_s: Option<f64>,
    /// What the prompt asked for: speculative decoding speeds code up more.
    pub class: PromptClass,
    pub failed: bool,
}

/// A prediction for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Prediction {
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    /// Decode speed expected at this context length.
    pub tokens_per_s: f64,
    /// Time to the last token, at p90 first-token time.
    pub total_p90_ms: f64,
    pub error_rate: f64,
}

#[derive(Debug, Clone)]
pub struct BackendLatency {
    /// TTFT of requests with little to prefill: the fixed overhead.
    base_ttft_ms: Stat,
    prefill_tps: Stat,
    decode_tps: [Stat; 4],
    /// Each prompt class's decode speed relative to the backend's at the
    /// same context (above 1 where drafts are accepted more often).
    class_decode_ratio: [Stat; 2],
    /// Whole TTFT as observed, for its spread.
    ttft_ms: Stat,
    error_rate: f64,
    concurrency: u32,
    in_flight: u32,
}

/// Below this many uncached tokens, TTFT is taken as overhead alone.
const SMALL_PREFILL: u32 = 64;
/// Above this many, TTFT tells the prefill rate.
const LARGE_PREFILL: u32 = 256;

impl BackendLatency {
    pub fn new(hints: LatencyHints) -> Self {
        let decode = |bucket: usize| {
            // Decode slows as context grows; halve per bucket until measured.
            Stat::new(hints.decode_tokens_per_s / f64::from(1u32 << bucket))
        };
        BackendLatency {
            base_ttft_ms: Stat::new(hints.base_ttft.as_secs_f64() * 1000.0),
            prefill_tps: Stat::new(hints.prefill_tokens_per_s),
            decode_tps: [decode(0), decode(1), decode(2), decode(3)],
            class_decode_ratio: [Stat::new(1.0), Stat::new(1.0)],
            ttft_ms: Stat::new(hints.base_ttft.as_secs_f64() * 1000.0),
            error_rate: 0.0,
            concurrency: hints.concurrency.max(1),
            in_flight: 0,
        }
    }

    pub fn started(&mut self) {
        self.in_flight += 1;
    }

    pub fn observe(&mut self, o: &Observation) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.error_rate = 0.1 * f64::from(u8::from(o.failed)) + 0.9 * self.error_rate;
        if o.failed {
            return;
        }
        let uncached = o.prompt_tokens.saturating_sub(o.cached_tokens);
        let Some(ttft) = o.ttft else {
            // A whole answer: its first token was not seen. Only rates the
            // backend itself reported are learned from it.
            if let Some(rate) = o.reported_prefill_tokens_per_s {
                self.prefill_tps.observe(rate);
            }
            if let Some(rate) = o.reported_decode_tokens_per_s {
                self.observe_decode(rate, o);
            }
            return;
        };
        let ttft_ms = ttft.as_secs_f64() * 1000.0;
        self.ttft_ms.observe(ttft_ms);
        match o.reported_prefill_tokens_per_s {
            Some(rate) => self.prefill_tps.observe(rate),
            None if uncached >= LARGE_PREFILL => {
                let prefill_ms = ttft_ms - self.base_ttft_ms.mean();
                if prefill_ms > 0.0 {
                    self.prefill_tps
                        .observe(f64::from(uncached) / prefill_ms * 1000.0);
                }
            }
            None => {}
        }
        if uncached < SMALL_PREFILL || o.reported_prefill_tokens_per_s.is_some() {
            let prefill_ms = f64::from(uncached) / self.prefill_tps.mean() * 1000.0;
            self.base_ttft_ms.observe((ttft_ms - prefill_ms).max(0.0));
        }
        let decoding = o.total.saturating_sub(ttft).as_secs_f64();
        let rate = o.reported_decode_tokens_per_s.or_else(|| {
            (o.output_tokens > 1 && decoding > 0.0)
                .then(|| f64::from(o.output_tokens - 1) / decoding)
        });
        if let Some(rate) = rate {
            self.observe_decode(rate, o);
        }
    }

    /// A decode rate at the call's context length and prompt class.
    fn observe_decode(&mut self, rate: f64, o: &Observation) {
        let context = o.prompt_tokens + o.output_tokens / 2;
        let bucket = &mut self.decode_tps[bucket(context)];
        self.class_decode_ratio[o.class.index()].observe(rate / bucket.mean().max(1e-3));
        bucket.observe(rate);
    }

    /// Expected figures for a request of this shape, now.
    pub fn predict(
        &mut self,
        prompt_tokens: u32,
        cached_tokens: u32,
        output_tokens: u32,
        class: PromptClass,
    ) -> Prediction {
        let uncached = f64::from(prompt_tokens.saturating_sub(cached_tokens));
        let prefill = self.prefill_tps.mean().max(1e-3);
        let decode_bucket = bucket(prompt_tokens + output_tokens / 2);
        let tokens_per_s = (self.decode_tps[decode_bucket].mean()
            * self.class_decode_ratio[class.index()].mean())
        .max(1e-3);
        let service_ms = self.ttft_ms.mean() + f64::from(output_tokens) / tokens_per_s * 1000.0;
        // Requests beyond the backend's concurrency wait for a slot: about
        // one service time per full round ahead of this one.
        let rounds_ahead = f64::from((self.in_flight + 1).saturating_sub(self.concurrency))
            / f64::from(self.concurrency);
        let queue_ms = rounds_ahead.ceil() * service_ms;
        let prefill_ms = uncached / prefill * 1000.0;
        let ttft_p50_ms = queue_ms + self.base_ttft_ms.quantile(0.5) + prefill_ms;
        let ttft_p90_ms = queue_ms + self.base_ttft_ms.quantile(0.9) + prefill_ms;
        Prediction {
            ttft_p50_ms,
            ttft_p90_ms,
            tokens_per_s,
            total_p90_ms: ttft_p90_ms + f64::from(output_tokens) / tokens_per_s * 1000.0,
            error_rate: self.error_rate,
        }
    }

    /// Samples behind the first-token figure (0 until a request finished).
    pub fn samples(&self) -> usize {
        self.ttft_ms.samples() - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn observation(prompt: u32, ttft_ms: u64, output: u32, total_ms: u64) -> Observation {
        Observation {
            prompt_tokens: prompt,
            output_tokens: output,
            ttft: Some(ms(ttft_ms)),
            total: ms(total_ms),
            ..Observation::default()
        }
    }

    #[test]
    fn learns_overhead_prefill_and_decode() {
        let mut model = BackendLatency::new(LatencyHints::default());
        for _ in 0..40 {
            // 50 ms overhead; 2000 tokens/s prefill; 100 tokens/s decode.
            model.started();
            model.observe(&observation(20, 60, 101, 60 + 1000));
            model.started();
            model.observe(&observation(1000, 550, 11, 550 + 100));
        }
        let short = model.predict(20, 0, 100, PromptClass::Prose);
        let long = model.predict(1000, 0, 100, PromptClass::Prose);
        assert!((short.ttft_p50_ms - 60.0).abs() < 15.0, "{short:?}");
        assert!((long.ttft_p50_ms - 550.0).abs() < 60.0, "{long:?}");
        assert!((short.tokens_per_s - 100.0).abs() < 10.0, "{short:?}");
        // Cached tokens skip prefill.
        assert!(
            model
                .predict(1000, 960, 100, PromptClass::Prose)
                .ttft_p50_ms
                < long.ttft_p50_ms / 3.0
        );
    }

    #[test]
    fn a_backend_that_slows_down_is_noticed() {
        let mut model = BackendLatency::new(LatencyHints {
            base_ttft: ms(50),
            ..LatencyHints::default()
        });
        let before = model.predict(10, 0, 10, PromptClass::Prose).ttft_p90_ms;
        for _ in 0..20 {
            model.started();
            model.observe(&observation(10, 2000, 10, 2100));
        }
        assert!(model.predict(10, 0, 10, PromptClass::Prose).ttft_p90_ms > before * 10.0);
    }

    #[test]
    fn queueing_adds_wait() {
        let mut model = BackendLatency::new(LatencyHints {
            concurrency: 1,
            ..LatencyHints::default()
        });
        let idle = model.predict(10, 0, 10, PromptClass::Prose).ttft_p50_ms;
        model.started();
        model.started();
        assert!(model.predict(10, 0, 10, PromptClass::Prose).ttft_p50_ms > idle * 2.0);
    }
}
