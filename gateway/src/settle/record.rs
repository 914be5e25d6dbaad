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
use switchyard_policies::{Pricing, Reference, TokenCounts};
use switchyard_router::latency::{LatencyStore, Observation, Shape};
use switchyard_router::prefix::PrefixIndex;
use switchyard_router::speculation::SpeculationStats;
use switchyard_router::{OutputLengths, Reason};

use crate::admit::access::{RateLimits, Reservation};
use crate::admit::breaker::{Blame, Breaker};
use crate::dispatch::request_context::{RequestContext, header_text};
use crate::error::GatewayError;
use crate::ledger::UPSTREAM_FAILURES;
use crate::ledger::{Drafts, Ledger, LedgerRow, NotCommitted};
use crate::metrics::{CallFacts, Metrics};
use crate::settle::billed_fields::SentTier;
use crate::state::app::{Admission, App};
use crate::telemetry::{AnswerMeta, AttemptSpan};

/// A row's write as an answer goes out: at once, or after a wait for the
/// ledger; an error when strict durability's commit failed.
pub type RowWritten =
    Either<Ready<Result<(), GatewayError>>, BoxFuture<'static, Result<(), GatewayError>>>;

/// Output text held before it is counted (see `RequestRecord::output`).
const OUTPUT_COUNT_BYTES: usize = 64 * 1024;

pub struct RequestRecord {
    context: Arc<RequestContext>,
    backend_index: usize,
    backend: String,
    latency: Arc<dyn LatencyStore>,
    output_lengths: Arc<OutputLengths>,
    breaker: Arc<Breaker>,
    predicted_ttft_ms: Option<f64>,
    /// Prefill and decode rates the backend reported (llama.cpp `timings`).
    reported_rates: (Option<f64>, Option<f64>),
    /// Speculative drafts the backend reported.
    drafts: Option<Drafts>,
    speculation: Arc<SpeculationStats>,
    metrics: Arc<Metrics>,
    tier: &'static str,
    pricing: Pricing,
    reference: Option<Reference>,
    ledger: Arc<Ledger>,
    rates: Arc<RateLimits>,
    reservation: Option<Reservation>,
    sharing: u32,
    /// The replica served, by its number in the prefix index.
    replica: usize,
    /// The caller's salt on this backend's prefix cache.
    prefix_salt: u64,
    /// Prompt tokens that replica was expected to have cached.
    expected_cached_tokens: u32,
    prefix_index: Arc<dyn PrefixIndex>,
    reason: Reason,
    ts_ms: i64,
    started: Instant,
    /// The wait for the backend's slot before `started`: part of what the
    /// caller waits for, not of the backend's own times.
    waited: Duration,
    /// Requests running on the backend's hardware when this one started.
    load: u32,
    first_output: Option<Instant>,
    /// A whole (not streamed) answer arrived: output exists, but when its
    /// first token was made is unknown.
    answered_whole: bool,
    usage: Option<Usage>,
    /// Output as streamed so far, for counting when no usage is reported:
    /// the tokens of text already counted, and the text not counted yet
    /// (counted and dropped every `OUTPUT_COUNT_BYTES`, so an endless
    /// stream holds no more than that).
    output_counted: u64,
    output: String,
    /// `cancelled` until the request finishes or fails.
    outcome: &'static str,
    /// One of two backends raced for this request.
    hedge: bool,
    /// The priced service tier the call was sent with.
    service_tier: Option<SentTier>,
    /// Answered from the response cache: no backend was called.
    from_cache: bool,
    /// The breaker and the prefix index have heard of this call's outcome.
    routing_told: bool,
    written: bool,
    /// The attempt's CLIENT span, when traces are on.
    span: Option<AttemptSpan>,
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
    ) -> Self {
        let mut record = Self::blank(app, context, backend_index, reason);
        record.reservation = reservation;
        record.sharing = admission.sharing;
        record.waited = admission.waited;
        // The row starts when the request began waiting for its slot.
        record.ts_ms -= i64::try_from(admission.waited.as_millis()).unwrap_or(0);
        record.load = admission.load;
        record.replica = admission.replica;
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
    fn attempt(&self) -> crate::settle::attempt_span::Attempt<'_> {
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
    ) -> Self {
        let mut record = Self::blank(app, context, backend_index, reason);
        record.from_cache = true;
        record.pricing = Pricing::Free;
        record
    }

    fn blank(
        app: &App,
        context: Arc<RequestContext>,
        backend_index: usize,
        reason: Reason,
    ) -> Self {
        if let Some(accounted) = &context.accounted {
            accounted.recorded();
        }
        let backend = &app.backends[backend_index];
        let prefix_salt = app.router.prefix_salt(backend_index, context.tenant);
        let ts_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        RequestRecord {
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
            pricing: backend.pricing,
            reference: app.reference.clone(),
            ledger: app.ledger.clone(),
            rates: app.rates.clone(),
            reservation: None,
            sharing: 1,
            replica: 0,
            prefix_salt,
            expected_cached_tokens: 0,
            prefix_index: app.router.prefix_index().clone(),
            reason,
            ts_ms,
            started: Instant::now(),
            waited: Duration::ZERO,
            load: 1,
            first_output: None,
            answered_whole: false,
            usage: None,
            output_counted: 0,
            output: String::new(),
            outcome: "cancelled",
            hedge: false,
            service_tier: None,
            from_cache: false,
            routing_told: false,
            written: false,
            span: None,
        }
    }

    /// Prompt tokens the serving replica was expected to hold cached.
    pub fn expected_cached_tokens(&self) -> u32 {
        self.expected_cached_tokens
    }

    /// The first generated output is here (a streamed answer): the time to
    /// first token.
    pub fn first_output(&mut self) {
        self.first_output.get_or_insert_with(Instant::now);
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

    /// Where output text seen on a stream goes.
    pub fn output(&mut self) -> &mut String {
        if self.output.len() > OUTPUT_COUNT_BYTES {
            // A token cut in two here counts as two: one token in
            // sixteen thousand, at most.
            self.output_counted += tokens::count(&self.output) as u64;
            self.output.clear();
        }
        &mut self.output
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

    /// Records a whole (not streamed) call's outcome, and writes the row as
    /// the answer goes out.
    pub async fn settle_whole<T>(
        mut self,
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
                self.finish(err.kind());
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
    /// limits, metrics, the latency model and the row) runs in a task of its
    /// own, which runs once this request's task has sent the answer, and so
    /// adds nothing to the answer's latency; unless the ledger is backed up,
    /// when the request waits for it as before.
    /// In strict mode a row that was not committed is an error: the answer
    /// must not go out as a success.
    /// (Not an `async fn`: its state would hold the record and grow every
    /// request's future by as much.)
    pub fn write_after_reply(mut self) -> RowWritten {
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

    /// Tokens by kind: as reported, or counted from the prompt and output.
    fn tokens(&self) -> (TokenCounts, bool) {
        match &self.usage {
            Some(usage) => (usage.token_counts(), false),
            // A call that failed before any output: nothing was generated,
            // and a failed call is not billed.
            None if self.first_output.is_none()
                && !self.answered_whole
                && !matches!(self.outcome, "cancelled" | "hedge-lost") =>
            {
                (TokenCounts::default(), false)
            }
            None => {
                let (prompt, overhead) = self.context.prompt.prompt_for_count();
                let input = (tokens::count(&prompt) + overhead) as u64;
                let output = self.output_counted + tokens::count(&self.output) as u64;
                (
                    TokenCounts {
                        input,
                        output,
                        ..TokenCounts::default()
                    },
                    true,
                )
            }
        }
    }

    /// The row, priced, with the budget settled; once.
    fn take_row(&mut self) -> Option<LedgerRow> {
        if self.written {
            return None;
        }
        self.written = true;
        let (tokens, estimated) = self.tokens();
        let busy = self.started.elapsed().as_secs_f64();
        let multiplier = self.service_tier.as_ref().map_or(1.0, |t| t.multiplier);
        let cost = self.pricing.cost(&tokens, busy, self.sharing) * multiplier;
        let counterfactual = self
            .reference
            .as_ref()
            .map_or(0.0, |r| r.price.cost(&tokens));
        if let Some(reservation) = self.reservation.as_mut() {
            reservation.settle(cost);
        }
        let key = self.context.caller.as_ref().map(|c| c.key.clone());
        if let Some(key) = &key {
            self.rates.settle_tokens(
                key,
                self.context.estimated_tokens,
                tokens.prompt() + tokens.output,
            );
        }
        let started = self.started;
        // The caller's times: from before the wait for the backend's slot.
        let waited_ms = self.waited.as_secs_f64() * 1000.0;
        let ms = |t: Instant| waited_ms + t.duration_since(started).as_secs_f64() * 1000.0;
        let total = self.started.elapsed();
        let ttft = self.first_output.map(|t| t.duration_since(self.started));
        // Measured from the first token on; a whole answer's, as the
        // backend reported it (llama.cpp's timings), if it did.
        let decode_tokens_per_s = match ttft {
            Some(ttft) => {
                let decoding = total.saturating_sub(ttft).as_secs_f64();
                (tokens.output > 1 && decoding > 0.0).then(|| (tokens.output - 1) as f64 / decoding)
            }
            None => self.reported_rates.1.filter(|_| tokens.output > 1),
        };
        if !self.from_cache {
            self.tell_routing();
            self.inform_backend_models(&tokens, ttft, total);
        }
        let row = LedgerRow {
            ts_ms: self.ts_ms,
            request_id: header_text(self.context.request_id.as_ref()),
            client_request_id: header_text(self.context.client_request_id.as_ref()),
            key: key.as_ref().map(|k| k.name.clone()),
            team: key.as_ref().and_then(|k| k.team.clone()),
            route: self.context.route.clone(),
            // Taken: the row is made once, and the record needs no name after.
            backend: std::mem::take(&mut self.backend),
            tier: self.tier,
            profile: self.context.profile,
            dialect: self.context.dialect.name(),
            endpoint: self.context.endpoint,
            tokens,
            cost_usd: cost,
            counterfactual_usd: counterfactual,
            ttft_ms: self.first_output.map(ms),
            predicted_ttft_ms: self.predicted_ttft_ms,
            decode_tokens_per_s,
            duration_ms: ms(Instant::now()),
            status: self.outcome,
            refusal: None,
            reason: self.reason.as_str(),
            hedge: self.hedge,
            fallback: self.reason == Reason::Fallback,
            cache_hit: self.from_cache,
            estimated,
            prompt_class: self.context.class,
            drafts: self.drafts,
            expected_cached_tokens: self.expected_cached_tokens,
            service_tier: self.service_tier.as_ref().map(|t| t.name.clone()),
            unpriced: self.pricing == Pricing::Unpriced,
            session: self.context.session.clone(),
            tool_results: self.context.tool_results,
            queued_ms: waited_ms,
        };
        if let Some(span) = self.span.take() {
            let content = span.captures_content().then(|| {
                // Output held back and counted is gone: only a whole
                // completion is recorded.
                let output = (self.output_counted == 0 && !self.output.is_empty())
                    .then(|| self.output.clone());
                (self.context.prompt.prompt_for_count().0, output)
            });
            crate::settle::attempt_span::end(span, &row, ttft, content);
        }
        let facts = CallFacts {
            operation: crate::settle::attempt_span::operation(self.context.endpoint),
            role: crate::settle::attempt_span::role(self.reason),
            ttft_saved_ms: self.ttft_saved_ms(&tokens),
            upstream_seconds: total.as_secs_f64(),
            upstream_ttft: ttft,
            from_cache: self.from_cache,
        };
        self.metrics.record(self.backend_index, &row, facts);
        tracing::info!(
            target: "switchyard::request",
            endpoint = row.endpoint,
            route = row.route.as_deref().unwrap_or("-"),
            backend = %row.backend,
            reason = row.reason,
            status = row.status,
            ttft_ms = row.ttft_ms,
            duration_ms = row.duration_ms,
            prompt_tokens = tokens.prompt(),
            cached_tokens = tokens.cached_input,
            completion_tokens = tokens.output,
            cost_usd = row.cost_usd,
            estimated = row.estimated,
        );
        Some(row)
    }

    /// Tells the backend's breaker and the prefix index how the call went,
    /// once (not for cache hits: no backend was called).
    fn tell_routing(&mut self) {
        if self.routing_told || self.from_cache {
            return;
        }
        self.routing_told = true;
        match self.outcome {
            "ok" | "escalated" => self.breaker.success(),
            _ if self.upstream_failure() => self.breaker.failure(self.blame()),
            _ => self.breaker.inconclusive(),
        }
        if matches!(self.outcome, "ok" | "escalated")
            && let Some(chain) = &self.context.prefix
        {
            self.prefix_index
                .served(self.replica, &chain.salted(self.prefix_salt));
        }
    }

    /// The backend's own failures trip its breaker; a caller's bad request
    /// or a client that left says nothing about the backend.
    fn upstream_failure(&self) -> bool {
        UPSTREAM_FAILURES.contains(&self.outcome)
    }

    /// Who the backend's fault may be laid to: the caller's key, unless no
    /// request could have caused it (the backend was not reached).
    fn blame(&self) -> Blame<'_> {
        match (&self.context.caller, self.outcome) {
            (_, "upstream_connect" | "upstream_auth") | (None, _) => Blame::Backend,
            (Some(caller), _) => Blame::Key(&caller.key.name),
        }
    }

    /// What this call tells the backend's latency model and speculation
    /// figures.
    fn inform_backend_models(&self, tokens: &TokenCounts, ttft: Option<Duration>, total: Duration) {
        let upstream_failure = self.upstream_failure();
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        self.latency.observe(
            self.backend_index,
            &Observation {
                prompt_tokens: clamp(tokens.prompt()),
                cached_tokens: clamp(tokens.cached_input),
                output_tokens: clamp(tokens.output),
                ttft,
                total,
                reported_prefill_tokens_per_s: self.reported_rates.0,
                reported_decode_tokens_per_s: self.reported_rates.1,
                class: self.context.class,
                concurrent: self.load,
                predicted_ttft_ms: self.predicted_ttft_ms,
                waited: self.waited,
                failed: upstream_failure,
            },
        );
        self.metrics
            .set_drifts(self.backend_index, &self.latency.drifts(self.backend_index));
        if !upstream_failure && tokens.output > 0 {
            self.output_lengths.observe(
                self.context.route_number,
                self.context.use_case,
                tokens.output,
            );
        }
        if let Some(drafts) = self.drafts {
            self.speculation.observe(
                self.backend_index,
                self.context.class,
                drafts.drafted,
                drafts.accepted,
            );
        }
    }

    /// First-token time the reported cached tokens saved, by the latency model.
    fn ttft_saved_ms(&self, tokens: &TokenCounts) -> f64 {
        if tokens.cached_input == 0 || self.from_cache {
            return 0.0;
        }
        let clamp = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let predict = |cached| {
            let shape = Shape {
                prompt_tokens: clamp(tokens.prompt()),
                cached_tokens: cached,
                output_tokens: 1,
                class: self.context.class,
            };
            self.latency.predict(self.backend_index, &shape).ttft_p50_ms
        };
        (predict(0) - predict(clamp(tokens.cached_input))).max(0.0)
    }
}

impl Drop for RequestRecord {
    fn drop(&mut self) {
        if let Some(row) = self.take_row() {
            self.ledger.write_detached(row);
        }
    }
}
