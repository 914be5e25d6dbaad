//! The online latency model of one backend: what a waiting person feels.
//! Time to first token = queue wait + fixed overhead + uncached prompt
//! tokens / prefill rate; completion = that + output tokens / decode rate at
//! the request's context length. The wait is the work ahead on the backend
//! (see [`Queue`]); the rates are the ones measured under the load the
//! request will run under, since requests sharing a server slow each other.

use std::time::{Duration, Instant};

use switchyard_policies::PromptClass;

use super::drift::{Drift, Drifts, ShareDrift};
use super::queue::{EngineLoad, Queue};
use super::stat::Stat;

/// Load levels rates are learned at: alone, beside one other request,
/// beside two or three, beside four or more.
const LOAD_LEVELS: usize = 4;

fn load_level(concurrent: u32) -> usize {
    match concurrent {
        0 | 1 => 0,
        2 => 1,
        3 | 4 => 2,
        _ => 3,
    }
}

/// The most requests that ran beside a call before its first token,
/// itself included, as far as known.
fn beside(o: &Observation) -> u32 {
    o.ran_beside.max(o.concurrent)
}

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
    /// Whether `concurrency` was told (config, a simulator's own), or need
    /// not be (a cloud API): when not, the model trusts only what it has
    /// seen run at once, plus one.
    pub concurrency_known: bool,
}

impl Default for LatencyHints {
    fn default() -> Self {
        LatencyHints {
            base_ttft: Duration::from_millis(500),
            prefill_tokens_per_s: 1000.0,
            decode_tokens_per_s: 30.0,
            concurrency: 8,
            concurrency_known: false,
        }
    }
}

/// A request as a latency model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shape {
    pub prompt_tokens: u32,
    /// Prompt tokens expected to be in the backend's cache.
    pub cached_tokens: u32,
    /// Output tokens expected.
    pub output_tokens: u32,
    pub class: PromptClass,
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
    /// Requests the backend was serving while this one ran, itself
    /// included: the load its rates were measured under.
    pub concurrent: u32,
    /// Its id in the backend's queue ([`BackendLatency::started`]), when it
    /// has one: a first token is judged by the most requests that ran
    /// beside it while it waited, not only by those ahead when it started.
    pub work: Option<u64>,
    /// The most requests that ran on the backend between its slot and its
    /// first token, itself included, as [`BackendLatency::first_token`]
    /// found (0: not known; `concurrent` stands for it).
    pub ran_beside: u32,
    /// The first-token time predicted when the request was routed here,
    /// and how long it then waited in the gateway for a slot (the caller's
    /// first-token time is that wait and `ttft`).
    pub predicted_ttft_ms: Option<f64>,
    pub waited: Duration,
    pub failed: bool,
}

/// A prediction for one candidate.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// The part of the first-token time spent waiting for the work ahead.
    pub queue_ms: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p90_ms: f64,
    /// Decode speed expected at this context length.
    pub tokens_per_s: f64,
    /// Time to the last token, at p90 first-token time.
    pub total_p90_ms: f64,
    pub error_rate: f64,
    /// The backend's concurrency as its first-token times taught it, when
    /// below what the model was told (the queue above waits on it).
    pub learned_concurrency: Option<u32>,
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
    /// Measured over predicted first-token time (the caller's, wait
    /// included): once enough are seen, predictions are scaled by its
    /// median (p50) and its 90th percentile (p90), so a model that runs
    /// short or long, or a spread wider than the overhead's, is corrected
    /// by what actually happened.
    calibration: Stat,
    /// Decode and prefill rates beside other requests, relative to the
    /// rates alone, by load level (the first is alone: always 1).
    decode_load: [Stat; LOAD_LEVELS],
    prefill_load: [Stat; LOAD_LEVELS],
    /// Decode speed alone against its own baseline, per context bucket,
    /// and the bucket of the latest such call.
    decode_drift: [Drift; 4],
    drift_bucket: usize,
    prefill_drift: Drift,
    error_drift: ShareDrift,
    error_rate: f64,
    concurrency: u32,
    concurrency_known: bool,
    /// Requests the backend serves at once, as its own first-token times
    /// showed (`None` until one waited behind others): below
    /// `concurrency`, it is the limit predictions use.
    learned_slots: Option<u32>,
    /// The most requests seen running at once without a first token
    /// waiting.
    proven_slots: u32,
    /// Calls in a row that ran beside more than `learned_slots` without
    /// waiting: three raise it (one may have met a request in its last
    /// bytes, counted as running though its slot was free).
    beyond_learned: u32,
    queue: Queue,
}

/// Predictions checked against measurements before their errors scale
/// predictions.
const CALIBRATION_SAMPLES: usize = 10;

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
            calibration: Stat::new(1.0),
            decode_load: std::array::from_fn(|_| Stat::new(1.0)),
            decode_drift: [Drift::default(); 4],
            drift_bucket: 0,
            prefill_drift: Drift::default(),
            error_drift: ShareDrift::default(),
            prefill_load: std::array::from_fn(|_| Stat::new(1.0)),
            error_rate: 0.0,
            concurrency: hints.concurrency.max(1),
            concurrency_known: hints.concurrency_known,
            learned_slots: None,
            proven_slots: 0,
            beyond_learned: 0,
            queue: Queue::default(),
        }
    }

    /// A request of `shape` bound for the backend, with `others` running
    /// on other backends of the same hardware: it counts as work ahead of
    /// later requests until [`Self::finished`]. Returns its id.
    pub fn started(&mut self, shape: &Shape, others: u32) -> u64 {
        let level = load_level(self.running_alongside(others));
        let service_ms = self.service_ms(shape, level);
        self.queue.admit(service_ms, Instant::now())
    }

    /// A request of `shape` was just routed here: work ahead of the next
    /// decisions until it is admitted ([`Self::started`]) or its
    /// reservation lapses.
    pub fn reserve(&mut self, shape: &Shape, others: u32) {
        let level = load_level(self.running_alongside(others));
        let service_ms = self.service_ms(shape, level);
        self.queue.reserve(service_ms, Instant::now());
    }

    /// Requests running on the backend now.
    pub fn running_now(&self) -> u32 {
        u32::try_from(self.queue.running_count()).unwrap_or(u32::MAX)
    }

    /// The request got its slot at the backend.
    pub fn running(&mut self, id: u64, now: Instant) {
        self.queue.running(id, now);
    }

    pub fn finished(&mut self, id: u64) {
        self.queue.remove(id);
    }

    pub fn set_engine_load(&mut self, load: EngineLoad, now: Instant, fresh_for: Duration) {
        self.queue.set_engine_load(load, now, fresh_for);
    }

    /// Requests a new one would run beside (itself included), once it
    /// runs: on this backend, and `others` on backends of the same hardware.
    fn running_alongside(&self, others: u32) -> u32 {
        let ahead = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        ahead
            .saturating_add(1)
            .min(self.slots())
            .saturating_add(others)
    }

    /// Requests the backend serves at once: as configured, or fewer where
    /// its own first-token times showed it; told nothing, as many as have
    /// run at once without waiting, and one more to find out.
    pub fn slots(&self) -> u32 {
        let untold = (!self.concurrency_known).then(|| self.proven_slots.max(1) + 1);
        self.learned_slots
            .or(untold)
            .map_or(self.concurrency, |learned| learned.min(self.concurrency))
    }

    /// The concurrency learned from the backend's first-token times, when
    /// it is below what the model was told.
    pub fn learned_concurrency(&self) -> Option<u32> {
        self.learned_slots.filter(|&s| s < self.concurrency)
    }

    /// Whether a call that ran beside others waited at the backend behind
    /// them: `Some(true)` when its first token came at least three times
    /// (and 100 ms) later than its overhead and prefill alone take (jitter
    /// and a busier machine do not do that; a queue inside the engine
    /// does), `Some(false)` when it came within half again of that, `None`
    /// between (a short wait behind a request about to end tells
    /// nothing) or alone.
    fn waited_at_backend(&self, o: &Observation, ttft_ms: f64) -> Option<bool> {
        if beside(o) < 2 {
            return None;
        }
        let uncached = f64::from(o.prompt_tokens.saturating_sub(o.cached_tokens));
        let alone_ms =
            self.base_ttft_ms.quantile(0.5) + uncached / self.prefill_tps.mean().max(1e-3) * 1000.0;
        if ttft_ms > 3.0 * alone_ms && ttft_ms - alone_ms > 100.0 {
            Some(true)
        } else {
            (ttft_ms <= 1.5 * alone_ms).then_some(false)
        }
    }

    /// Learns the backend's concurrency from a call's first token: lower
    /// when it waited behind the others that ran there before it came,
    /// higher again when as many ran at once without waiting. Returns the
    /// most requests that ran there before it came, itself included (for
    /// the call's [`Observation::ran_beside`]).
    pub fn first_token(&mut self, o: &Observation) -> u32 {
        let peak = o.work.and_then(|id| self.queue.first_token(id));
        let o = &Observation {
            ran_beside: o.ran_beside.max(peak.unwrap_or(0)),
            ..*o
        };
        let Some(ttft) = o.ttft else {
            return beside(o);
        };
        let ttft_ms = ttft.as_secs_f64() * 1000.0;
        match self.waited_at_backend(o, ttft_ms) {
            Some(true) => {
                let fits = beside(o).saturating_sub(1).max(1);
                self.learned_slots = Some(self.learned_slots.map_or(fits, |s| s.min(fits)));
                self.beyond_learned = 0;
            }
            // A first token that did not wait proves only the requests
            // running when it started: one that got its slot after it may
            // be waiting at the server.
            Some(false) => {
                self.proven_slots = self.proven_slots.max(o.concurrent);
                if self.learned_slots.is_some_and(|s| o.concurrent > s) {
                    self.beyond_learned += 1;
                    if self.beyond_learned >= 3 {
                        self.beyond_learned = 0;
                        self.learned_slots =
                            (o.concurrent < self.concurrency).then_some(o.concurrent);
                    }
                }
            }
            None => {
                if beside(o) < 2 {
                    self.proven_slots = self.proven_slots.max(1);
                }
            }
        }
        beside(o)
    }

    /// The backend time a request of `shape` takes at a load level: its
    /// overhead and uncached prefill, and its output.
    fn service_ms(&self, shape: &Shape, level: usize) -> f64 {
        let (prefill, decode) = self.rates(shape, level);
        let uncached = f64::from(shape.prompt_tokens.saturating_sub(shape.cached_tokens));
        self.base_ttft_ms.mean()
            + uncached / prefill * 1000.0
            + f64::from(shape.output_tokens) / decode * 1000.0
    }

    /// Prefill and decode rates for `shape` at a load level.
    fn rates(&self, shape: &Shape, level: usize) -> (f64, f64) {
        let prefill = (self.prefill_tps.mean() * self.prefill_load[level].mean()).max(1e-3);
        let decode_bucket = bucket(shape.prompt_tokens + shape.output_tokens / 2);
        let decode = (self.decode_tps[decode_bucket].mean()
            * self.class_decode_ratio[shape.class.index()].mean()
            * self.decode_load[level].mean())
        .max(1e-3);
        (prefill, decode)
    }

    pub fn observe(&mut self, o: &Observation) {
        self.error_rate = 0.1 * f64::from(u8::from(o.failed)) + 0.9 * self.error_rate;
        self.error_drift.observe(o.failed);
        if o.failed {
            return;
        }
        let uncached = o.prompt_tokens.saturating_sub(o.cached_tokens);
        let Some(ttft) = o.ttft else {
            // A whole answer: its first token was not seen. Only rates the
            // backend itself reported are learned from it.
            if let Some(rate) = o.reported_prefill_tokens_per_s {
                self.observe_prefill(rate, o);
            }
            if let Some(rate) = o.reported_decode_tokens_per_s {
                self.observe_decode(rate, o);
            }
            return;
        };
        let ttft_ms = ttft.as_secs_f64() * 1000.0;
        if self.waited_at_backend(o, ttft_ms) == Some(true) {
            // Its first token waited behind other requests: not the
            // backend's overhead or prefill, and not the model's error.
            self.observe_decode_of(o, ttft);
            return;
        }
        self.ttft_ms.observe(ttft_ms);
        if let Some(predicted) = o.predicted_ttft_ms.filter(|p| *p > 0.0 && p.is_finite()) {
            let waited_ms = o.waited.as_secs_f64() * 1000.0;
            self.calibration
                .observe(((waited_ms + ttft_ms) / predicted).clamp(0.1, 10.0));
        }
        match o.reported_prefill_tokens_per_s {
            Some(rate) => self.observe_prefill(rate, o),
            None if uncached >= LARGE_PREFILL => {
                let prefill_ms = ttft_ms - self.base_ttft_ms.mean();
                if prefill_ms > 0.0 {
                    self.observe_prefill(f64::from(uncached) / prefill_ms * 1000.0, o);
                }
            }
            None => {}
        }
        if uncached < SMALL_PREFILL || o.reported_prefill_tokens_per_s.is_some() {
            let level = load_level(o.concurrent);
            let prefill = self.prefill_tps.mean() * self.prefill_load[level].mean();
            let prefill_ms = f64::from(uncached) / prefill.max(1e-3) * 1000.0;
            self.base_ttft_ms.observe((ttft_ms - prefill_ms).max(0.0));
        }
        self.observe_decode_of(o, ttft);
    }

    /// The decode rate a streamed call showed after its first token.
    fn observe_decode_of(&mut self, o: &Observation, ttft: Duration) {
        let decoding = o.total.saturating_sub(ttft).as_secs_f64();
        let rate = o.reported_decode_tokens_per_s.or_else(|| {
            (o.output_tokens > 1 && decoding > 0.0)
                .then(|| f64::from(o.output_tokens - 1) / decoding)
        });
        if let Some(rate) = rate {
            self.observe_decode(rate, o);
        }
    }

    /// A prefill rate: the rate alone, or how much slower it was beside
    /// other requests.
    fn observe_prefill(&mut self, rate: f64, o: &Observation) {
        match load_level(o.concurrent) {
            0 => {
                self.prefill_tps.observe(rate);
                // Drift is watched at long prompts only: a short one's
                // reported rate is mostly overhead, and a change in the
                // traffic's prompt lengths would pass for one in the backend.
                if o.prompt_tokens.saturating_sub(o.cached_tokens) >= LARGE_PREFILL {
                    self.prefill_drift.observe(rate);
                }
            }
            level => self.prefill_load[level].observe(rate / self.prefill_tps.mean().max(1e-3)),
        }
    }

    /// A decode rate at the call's context length and prompt class: the
    /// rate alone, or how much slower it was beside other requests.
    fn observe_decode(&mut self, rate: f64, o: &Observation) {
        let context = o.prompt_tokens + o.output_tokens / 2;
        let class = &mut self.class_decode_ratio[o.class.index()];
        let index = bucket(context);
        let bucket = &mut self.decode_tps[index];
        match load_level(o.concurrent) {
            0 => {
                class.observe(rate / bucket.mean().max(1e-3));
                bucket.observe(rate);
                self.decode_drift[index].observe(rate);
                self.drift_bucket = index;
            }
            level => {
                self.decode_load[level].observe(rate / (bucket.mean() * class.mean()).max(1e-3))
            }
        }
    }

    /// Expected figures for a request of `shape`, arriving `now`: the
    /// wait for the work ahead, then its own overhead and prefill, at the
    /// rates of the load it will run under.
    /// `others`: requests running on other backends of the same hardware.
    pub fn predict(&self, shape: &Shape, now: Instant, others: u32) -> Prediction {
        let level = load_level(self.running_alongside(others));
        let (prefill, tokens_per_s) = self.rates(shape, level);
        // A request known only by count (another client's, at the engine):
        // a typical reply's length, at this load.
        let typical = Shape {
            output_tokens: crate::budgeted::DEFAULT_EXPECTED_OUTPUT,
            ..*shape
        };
        let queue_ms = self
            .queue
            .wait_ms(self.slots(), self.service_ms(&typical, level), now);
        let uncached = f64::from(shape.prompt_tokens.saturating_sub(shape.cached_tokens));
        let prefill_ms = uncached / prefill * 1000.0;
        let (ttft_p50_ms, ttft_p90_ms) = if self.calibration.samples() > CALIBRATION_SAMPLES {
            let expected = queue_ms + self.base_ttft_ms.mean() + prefill_ms;
            (
                expected * self.calibration.quantile(0.5),
                expected * self.calibration.quantile(0.9),
            )
        } else {
            (
                queue_ms + self.base_ttft_ms.quantile(0.5) + prefill_ms,
                queue_ms + self.base_ttft_ms.quantile(0.9) + prefill_ms,
            )
        };
        Prediction {
            queue_ms,
            ttft_p50_ms,
            ttft_p90_ms,
            tokens_per_s,
            total_p90_ms: ttft_p90_ms + f64::from(shape.output_tokens) / tokens_per_s * 1000.0,
            error_rate: self.error_rate,
            learned_concurrency: self.learned_concurrency(),
        }
    }

    /// Recent speeds and failures against their baselines. Decode speed is
    /// compared at the context length of the latest call alone (once that
    /// bucket has enough calls to tell): a bucket the traffic has left
    /// does not hold the figure. Prefill speed is of calls alone with long
    /// uncached prompts.
    pub fn drifts(&self) -> Drifts {
        Drifts {
            decode: self.decode_drift[self.drift_bucket].ratio(),
            prefill: self.prefill_drift.ratio(),
            errors: self.error_drift.shares(),
        }
    }

    /// Samples behind the first-token figure (0 until a request finished).
    pub fn samples(&self) -> usize {
        self.ttft_ms.samples() - 1
    }
}

#[cfg(test)]
mod tests;
