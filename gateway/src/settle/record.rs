//! What one call to a backend did, written to the ledger when it ends
//! however it ends: finished, failed, escalated, or dropped because the
//! client went away (then from `Drop`, with usage counted here and the row
//! marked estimated).

use std::future::Ready;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures_util::future::{BoxFuture, Either};
use switchyard_adapters::AdapterError;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{Timings, Usage};
use switchyard_adapters::upstream::TraceContext;
use switchyard_policies::{Pricing, Reference};
use switchyard_router::latency::LatencyStore;
use switchyard_router::prefix::{PrefixChain, PrefixIndex};
use switchyard_router::speculation::SpeculationStats;
use switchyard_router::{OutputLengths, Reason};

use crate::admit::access::{RateLimits, Reservation};
use crate::admit::breaker::Breaker;
use crate::admit::capacity::Admission;
use crate::error::GatewayError;
use crate::ledger::{Drafts, Ledger, NotCommitted};
use crate::metrics::Metrics;
use crate::settle::billed_fields::SentTier;
use crate::settle::context::RequestContext;
use crate::state::app::App;
use crate::telemetry::{AnswerMeta, AttemptSpan};

/// A row's write as an answer goes out: at once, or after a wait for the
/// ledger; an error when strict durability's commit failed.
pub type RowWritten =
    Either<Ready<Result<(), GatewayError>>, BoxFuture<'static, Result<(), GatewayError>>>;

/// Output text held before it is counted (see [`StreamedText`]).
const OUTPUT_COUNT_BYTES: usize = 64 * 1024;

/// Room a stream's output text starts with.
const OUTPUT_START_BYTES: usize = 512;

/// Text seen on a stream, for counting its tokens when no usage is
/// reported: the tokens of text already counted, and the text not counted
/// yet (counted and dropped every `OUTPUT_COUNT_BYTES`, so an endless
/// stream holds no more than that).
#[derive(Default)]
pub(crate) struct StreamedText {
    pub(crate) counted: u64,
    pub(crate) text: String,
}

impl StreamedText {
    /// Where the next text goes.
    fn sink(&mut self) -> &mut String {
        if self.text.len() > OUTPUT_COUNT_BYTES {
            // A token cut in two here counts as two: one token in
            // sixteen thousand, at most.
            self.counted += tokens::count(&self.text) as u64;
            self.text.clear();
        }
        &mut self.text
    }

    /// Every token seen.
    pub(crate) fn tokens(&self) -> u64 {
        self.counted + tokens::count(&self.text) as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counted == 0 && self.text.is_empty()
    }

    /// The whole text, when none of it has been counted and dropped.
    pub(crate) fn whole(&self) -> Option<&str> {
        (self.counted == 0 && !self.text.is_empty()).then_some(self.text.as_str())
    }
}

pub struct RequestRecord {
    pub(crate) context: Arc<RequestContext>,
    pub(crate) backend_index: usize,
    pub(crate) backend: String,
    pub(crate) latency: Arc<dyn LatencyStore>,
    pub(crate) output_lengths: Arc<OutputLengths>,
    pub(crate) breaker: Arc<Breaker>,
    pub(crate) predicted_ttft_ms: Option<f64>,
    /// Prefill and decode rates the backend reported (llama.cpp `timings`).
    pub(crate) reported_rates: (Option<f64>, Option<f64>),
    /// Speculative drafts the backend reported.
    pub(crate) drafts: Option<Drafts>,
    pub(crate) speculation: Arc<SpeculationStats>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) tier: &'static str,
    pub(crate) provider: &'static str,
    pub(crate) pricing: Pricing,
    pub(crate) reference: Option<Reference>,
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) rates: Arc<RateLimits>,
    pub(crate) reservation: Option<Reservation>,
    pub(crate) sharing: u32,
    /// The replica served, by its number in the prefix index.
    pub(crate) replica: usize,
    /// The caller's salt on this backend's prefix cache.
    pub(crate) prefix_salt: u64,
    /// The prompt's prefix chain salted so, when admission made it.
    pub(crate) salted_prefix: Option<Arc<PrefixChain>>,
    /// Prompt tokens that replica was expected to have cached.
    pub(crate) expected_cached_tokens: u32,
    pub(crate) prefix_index: Arc<dyn PrefixIndex>,
    pub(crate) reason: Reason,
    pub(crate) ts_ms: i64,
    pub(crate) started: Instant,
    /// The wait for the backend's slot before `started`: part of what the
    /// caller waits for, not of the backend's own times.
    pub(crate) waited: Duration,
    /// Requests running on the backend's hardware when this one started.
    pub(crate) load: u32,
    /// Its id in the backend's latency model, once admitted.
    pub(crate) work: Option<u64>,
    /// The most requests that ran on the backend before its first token,
    /// itself included (0 until a streamed first token came).
    pub(crate) ran_beside: u32,
    pub(crate) first_output: Option<Instant>,
    /// A whole (not streamed) answer arrived: output exists, but when its
    /// first token was made is unknown.
    pub(crate) answered_whole: bool,
    pub(crate) usage: Option<Usage>,
    /// Output as streamed so far (content, tool calls), and reasoning.
    pub(crate) output: StreamedText,
    pub(crate) reasoning: StreamedText,
    /// `cancelled` until the request finishes or fails.
    pub(crate) outcome: &'static str,
    /// One of two backends raced for this request.
    pub(crate) hedge: bool,
    /// The priced service tier the call was sent with.
    pub(crate) service_tier: Option<SentTier>,
    /// Answered from the response cache: no backend was called.
    pub(crate) from_cache: bool,
    /// The breaker and the prefix index have heard of this call's outcome.
    pub(crate) routing_told: bool,
    pub(crate) written: bool,
    /// The attempt's CLIENT span, when traces are on.
    pub(crate) span: Option<AttemptSpan>,
    /// A shadow copy's call, and how its answer compared with the served one.
    pub(crate) shadow: Option<crate::ledger::Shadowed>,
    /// The answer's output was counted as it was read (held back for a
    /// cascade's check): its replay to the client counts nothing again.
    pub(crate) output_counted: bool,
    /// A backend's own words for its failure (redacted), for the call's
    /// log line.
    pub(crate) error: Option<String>,
}

impl RequestRecord {
    /// A record of a call to backend `backend_index`; `predicted_ttft_ms`
    /// is what the router expected of it, when it predicted this backend.
    pub fn new(
        app: &App,
        context: Arc<RequestContext>,
        backend_index: usize,
        reason: Reason,
        reservation: Option<Reservation>,
        admission: &Admission,
        predicted_ttft_ms: Option<f64>,
    ) -> Box<Self> {
        let mut record = Self::blank(app, context, backend_index, reason);
        record.reservation = reservation;
        record.sharing = admission.sharing;
        record.waited = admission.waited;
        // The row starts when the request began waiting for its slot.
        record.ts_ms -= i64::try_from(admission.waited.as_millis()).unwrap_or(0);
        record.load = admission.load;
        record.work = admission.work_id();
        record.replica = admission.replica;
        record.salted_prefix = admission.prefix.clone();
        record.predicted_ttft_ms = predicted_ttft_ms;
        record.expected_cached_tokens = record.context.prefix.as_ref().map_or(0, |chain| {
            chain.tokens_in(admission.cached_blocks, record.context.prompt_tokens)
        });
        if let Some(trace) = &record.context.trace {
            record.span = crate::settle::attempt_span::start(app, &record.attempt(), trace);
        }
        if let Some(before) = record
            .context
            .accounted
            .as_ref()
            .and_then(|a| a.first_call_overhead())
        {
            record
                .metrics
                .overhead(backend_index, before.saturating_sub(admission.waited));
        }
        record
    }

    /// What the attempt's span says of it at the start.
    pub(crate) fn attempt(&self) -> crate::settle::attempt_span::Attempt<'_> {
        crate::settle::attempt_span::Attempt {
            context: &self.context,
            backend_index: self.backend_index,
            replica: self.replica,
            reason: self.reason,
            waited: self.waited,
            predicted_ttft_ms: self.predicted_ttft_ms,
            expected_cached_tokens: self.expected_cached_tokens,
        }
    }

    /// Lets `fill` note what the answer says of itself, when the attempt
    /// is traced (otherwise nothing is read).
    pub fn answer_meta(&mut self, fill: impl FnOnce(&mut AnswerMeta)) {
        if let Some(span) = &mut self.span {
            fill(&mut span.answer);
        }
    }

    /// Whether the attempt's span records the completion's text.
    pub fn captures_content(&self) -> bool {
        self.span
            .as_ref()
            .is_some_and(AttemptSpan::captures_content)
    }

    /// Whether a whole answer's text is kept: for the span's content, or
    /// for a shadow copy of the request to compare with.
    pub fn keeps_text(&self) -> bool {
        self.captures_content() || self.context.shadow_tap.get().is_some()
    }

    /// The trace context this attempt's upstream request carries.
    pub fn trace_context(&self) -> Option<TraceContext> {
        self.span.as_ref().and_then(|s| s.trace_context().cloned())
    }

    /// A record of an answer served from the response cache, first made by
    /// `backend_index`: free, and no backend's figures change.
    pub fn cache_hit(
        app: &App,
        context: Arc<RequestContext>,
        backend_index: usize,
        reason: Reason,
    ) -> Box<Self> {
        let mut record = Self::blank(app, context, backend_index, reason);
        record.from_cache = true;
        record.pricing = Pricing::Free;
        record
    }

    /// Boxed: a record is large (1,328 bytes) and is moved from the
    /// attempt to its call, its stream and the task that writes its row
    /// after the reply; each move of it unboxed was a copy.
    pub(crate) fn blank(
        app: &App,
        context: Arc<RequestContext>,
        backend_index: usize,
        reason: Reason,
    ) -> Box<Self> {
        if let Some(accounted) = &context.accounted {
            accounted.recorded();
        }
        let backend = &app.backends[backend_index];
        let prefix_salt = app.router.prefix_salt(backend_index, context.tenant);
        let pricing = backend.pricing_for(context.listed_price);
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        // Made in its box: built on the stack first, it was copied whole
        // (about 150 instructions).
        switchyard_adapters::boxed::boxed_in_place(|| RequestRecord {
            context,
            backend_index,
            backend: backend.name.clone(),
            latency: app.router.latency().clone(),
            output_lengths: app.router.output_lengths().clone(),
            breaker: backend.breaker.clone(),
            predicted_ttft_ms: None,
            reported_rates: (None, None),
            drafts: None,
            speculation: app.router.speculation().clone(),
            metrics: app.metrics.clone(),
            tier: backend.tier.as_str(),
            provider: backend.peer.provider,
            pricing,
            reference: app.reference.clone(),
            ledger: app.ledger.clone(),
            rates: app.rates.clone(),
            reservation: None,
            sharing: 1,
            replica: 0,
            prefix_salt,
            salted_prefix: None,
            expected_cached_tokens: 0,
            prefix_index: app.router.prefix_index().clone(),
            reason,
            ts_ms,
            started: Instant::now(),
            waited: Duration::ZERO,
            load: 1,
            work: None,
            ran_beside: 0,
            first_output: None,
            answered_whole: false,
            usage: None,
            output: StreamedText::default(),
            reasoning: StreamedText::default(),
            outcome: "cancelled",
            hedge: false,
            service_tier: None,
            from_cache: false,
            routing_told: false,
            written: false,
            span: None,
            shadow: None,
            output_counted: false,
            error: None,
        })
    }

    /// Prompt tokens the serving replica was expected to hold cached.
    pub fn expected_cached_tokens(&self) -> u32 {
        self.expected_cached_tokens
    }

    /// The first generated output is here (a streamed answer): the time to
    /// first token.
    pub fn first_output(&mut self) {
        if self.first_output.is_some() {
            return;
        }
        let now = Instant::now();
        self.first_output = Some(now);
        // Told now, not when the answer ends: the requests routed
        // meanwhile see what its wait says of the backend's concurrency.
        self.ran_beside = self.latency.first_token(
            self.backend_index,
            &switchyard_router::latency::Observation {
                prompt_tokens: self.context.prompt_tokens,
                cached_tokens: self.expected_cached_tokens,
                ttft: Some(now.saturating_duration_since(self.started)),
                concurrent: self.load,
                work: self.work,
                ..Default::default()
            },
        );
    }

    /// A whole answer arrived. Its first token came some time before, not
    /// now: the record keeps no first-token time for it, so neither the
    /// ledger nor the latency model takes the whole call's time for one.
    pub fn whole_answer(&mut self) {
        self.answered_whole = true;
    }

    pub fn usage(&mut self, usage: Option<&Usage>) {
        if let Some(usage) = usage {
            self.usage = Some(usage.clone());
        }
    }

    /// Notes llama.cpp's `timings` of an answer: the prefill and decode
    /// rates it measured, and its speculative drafts.
    pub fn timings(&mut self, timings: Option<&Timings>) {
        let Some(timings) = timings else {
            return;
        };
        self.reported_rates = (timings.prompt_rate(), timings.predicted_rate());
        if let Some((drafted, accepted)) = timings.drafts() {
            self.drafts = Some(Drafts { drafted, accepted });
        }
    }

    /// Where output text goes: a whole answer's, pushed at once.
    pub fn output(&mut self) -> &mut String {
        self.output.sink()
    }

    /// Where output text seen on a stream goes, chunk by chunk; with room
    /// for a short reply from the first chunk on, so that it is allocated
    /// once rather than grown from 8 bytes by doubling (five reallocations
    /// for 200 bytes).
    pub fn stream_output(&mut self) -> &mut String {
        let text = self.output.sink();
        if text.capacity() == 0 {
            text.reserve(OUTPUT_START_BYTES);
        }
        text
    }

    /// Where reasoning text seen on a stream goes.
    pub fn reasoning(&mut self) -> &mut String {
        self.reasoning.sink()
    }

    /// Any output was seen: content, tool calls or reasoning.
    pub(crate) fn generated_any(&self) -> bool {
        self.first_output.is_some() || !self.output.is_empty() || !self.reasoning.is_empty()
    }

    /// The priced service tier the call was sent with: its multiplier
    /// applies to the cost.
    pub fn sent_tier(&mut self, tier: Option<SentTier>) {
        self.service_tier = tier;
    }

    /// Marks the call as one leg of a hedged request.
    pub fn hedged(&mut self) {
        self.hedge = true;
    }

    pub fn finish(&mut self, outcome: &'static str) {
        self.outcome = outcome;
    }

    /// The call failed with `err`: its kind is the row's status, and a
    /// backend's own words for it (redacted) go on the call's log line.
    pub fn failed(&mut self, err: &GatewayError) {
        self.outcome = err.kind();
        // A backend's words can quote the prompt: values a policy keeps in
        // are masked there too, for the ledger and the log line.
        self.error = err.upstream_detail().map(|mut detail| {
            if let Some(masker) = self
                .context
                .sensitive
                .as_ref()
                .and_then(|s| s.masker.as_ref())
            {
                masker.mask(&mut detail);
            }
            detail
        });
    }

    /// Records a whole (not streamed) call's outcome, and writes the row as
    /// the answer goes out.
    pub async fn settle_whole<T>(
        mut self: Box<Self>,
        result: Result<T, AdapterError>,
        usage: impl FnOnce(&T) -> Option<Usage>,
    ) -> Result<T, GatewayError> {
        let result = match result {
            Ok(answer) => {
                self.whole_answer();
                self.usage(usage(&answer).as_ref());
                self.finish("ok");
                Ok(answer)
            }
            Err(err) => {
                let err = GatewayError::from(err);
                self.failed(&err);
                Err(err)
            }
        };
        let written = self.write_after_reply().await;
        let answer = result?;
        written?;
        Ok(answer)
    }

    /// Writes the row of a call whose answer is about to go out. In strict
    /// mode the row is committed first, so the client never sees an answer
    /// the ledger lacks. Otherwise the bookkeeping (pricing, budgets, rate
    /// limits, metrics, the latency model and the row) runs after the answer
    /// (`Ledger::after_reply`), and so adds nothing to the answer's latency;
    /// unless the ledger is backed up, when the request waits for it as
    /// before.
    /// In strict mode a row that was not committed is an error: the answer
    /// must not go out as a success.
    /// (Not an `async fn`: its state would hold the record and grow every
    /// request's future by as much.)
    pub fn write_after_reply(mut self: Box<Self>) -> RowWritten {
        if self.ledger.is_strict() || self.ledger.backed_up() {
            return Either::Right(Box::pin(async move { self.write().await }));
        }
        // What the next request's routing reads is told now: an agent sends
        // its next turn as soon as it has this answer, and that turn should
        // find its prefix in the index.
        self.tell_routing();
        let ledger = self.ledger.clone();
        ledger.after_reply(move || self.take_row());
        Either::Left(std::future::ready(Ok(())))
    }

    /// Writes the row now, waiting as the ledger's durability requires; an
    /// error when strict durability required a commit that failed.
    pub async fn write(&mut self) -> Result<(), GatewayError> {
        match self.take_row() {
            Some(row) => self
                .ledger
                .write(row)
                .await
                .map_err(|NotCommitted| GatewayError::LedgerNotCommitted),
            None => Ok(()),
        }
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        if let Some(row) = self.take_row() {
            self.ledger.write_detached(row);
        }
    }
}
