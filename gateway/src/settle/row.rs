//! From a finished call's record to its ledger row: tokens (reported or
//! counted), cost, and what the row teaches the router's latency and
//! length models, the prefix index and the breaker.

use std::time::{Duration, Instant};

use switchyard_adapters::tokens;
use switchyard_policies::{Pricing, TokenCounts};
use switchyard_router::Reason;
use switchyard_router::latency::{Observation, Shape};

use crate::admit::breaker::Blame;
use crate::http::request_id::header_text;
use crate::ledger::LedgerRow;
use crate::ledger::UPSTREAM_FAILURES;
use crate::metrics::CallFacts;
use crate::settle::billed_fields::SentTier;
use crate::settle::record::RequestRecord;

impl RequestRecord {
    /// Tokens by kind: as reported, or counted from the prompt and output.
    pub(crate) fn tokens(&self) -> (TokenCounts, bool) {
        if let Some(usage) = &self.usage {
            return (usage.token_counts(), false);
        }
        let unseen = self.unseen_output();
        // A call that failed before any output (reasoning included):
        // nothing was generated, and a failed call is not billed.
        if !self.generated_any()
            && !self.answered_whole
            && !matches!(self.outcome, "cancelled" | "hedge-lost")
            && unseen == 0
        {
            return (TokenCounts::default(), false);
        }
        let (prompt, overhead) = self.context.prompt.prompt_for_count();
        let media = u64::from(self.context.media_tokens);
        let input = (tokens::count(&prompt) + overhead) as u64 + media;
        // Reasoning is output, as providers bill it.
        let reasoning = self.reasoning.tokens();
        let output = self.output.tokens() + reasoning + unseen;
        (
            TokenCounts {
                input,
                output,
                reasoning,
                ..TokenCounts::default()
            },
            true,
        )
    }

    /// Output a whole (not streamed) call made before it was cut short (the
    /// client left, or the first-byte timeout fired): none of it reached
    /// the gateway, but the provider bills what it generated until the
    /// connection closed. Estimated by the backend's latency model: the
    /// time past its expected first token at its expected decode speed, up
    /// to `max_tokens`. Zero for any other call.
    pub(crate) fn unseen_output(&self) -> u64 {
        if self.context.streaming
            || self.answered_whole
            || self.generated_any()
            || !matches!(self.outcome, "cancelled" | "upstream_timeout")
        {
            return 0;
        }
        let shape = Shape {
            prompt_tokens: self.context.prompt_tokens,
            cached_tokens: self.expected_cached_tokens,
            output_tokens: self.output_lengths.expect(
                self.context.route_number,
                Some(self.backend_index),
                self.context.use_case,
                self.context.max_tokens,
            ),
            class: self.context.class,
        };
        let predicted = self.latency.predict(self.backend_index, &shape);
        let first_token_ms = predicted.ttft_p50_ms - predicted.queue_ms;
        let generating_ms = self.started.elapsed().as_secs_f64() * 1000.0 - first_token_ms;
        let tokens = (generating_ms.max(0.0) / 1000.0 * predicted.tokens_per_s).floor() as u64;
        self.context
            .max_tokens
            .map_or(tokens, |most| tokens.min(u64::from(most)))
    }

    /// The row, priced, with the budget settled; once.
    pub(crate) fn take_row(&mut self) -> Option<LedgerRow> {
        if self.written {
            return None;
        }
        self.written = true;
        let (tokens, estimated) = self.tokens();
        // One reading of the clock for the call's length, its cost by time
        // and its row.
        let ended = Instant::now();
        let total = ended.duration_since(self.started);
        let (cost, counterfactual) = self.settle_cost(&tokens, total);
        let ttft = self.first_output.map(|t| t.duration_since(self.started));
        if !self.from_cache {
            self.tell_routing();
            self.inform_backend_models(&tokens, ttft, total);
        }
        let row = self.row(
            tokens,
            estimated,
            (cost, counterfactual),
            ttft,
            (total, ended),
        );
        self.report(&row, ttft, total);
        if self.outcome == "ok"
            && self.shadow.is_none()
            && let Some(tap) = self.context.shadow_tap.get()
        {
            // Text counted and dropped (past 64 KiB) cannot be compared.
            tap.send((self.output.counted == 0).then(|| self.output.text.clone()));
        }
        Some(row)
    }

    /// The call's cost and the reference model's for the same tokens; the
    /// budget reservation and the key's token rate settled with them.
    fn settle_cost(&mut self, tokens: &TokenCounts, busy: Duration) -> (f64, f64) {
        let cost = call_cost(
            &self.pricing,
            tokens,
            busy.as_secs_f64(),
            self.sharing,
            self.service_tier.as_ref(),
        );
        // A shadow copy replaced no call: it saved nothing.
        let counterfactual = match (&self.reference, self.shadow) {
            (Some(r), None) => r.price.cost(tokens),
            _ => 0.0,
        };
        if let Some(reservation) = self.reservation.as_mut() {
            reservation.settle(cost);
        }
        if let Some(caller) = &self.context.caller {
            self.rates.settle_tokens(
                &caller.key,
                self.context.estimated_tokens,
                tokens.prompt() + tokens.output,
            );
        }
        (cost, counterfactual)
    }

    /// The ledger row. Times are the caller's: from before the wait for the
    /// backend's slot.
    fn row(
        &mut self,
        tokens: TokenCounts,
        estimated: bool,
        (cost, counterfactual): (f64, f64),
        ttft: Option<Duration>,
        (total, ended): (Duration, Instant),
    ) -> LedgerRow {
        let key = self.context.caller.as_ref().map(|c| &c.key);
        let waited_ms = self.waited.as_secs_f64() * 1000.0;
        let started = self.started;
        let ms = |t: Instant| waited_ms + t.duration_since(started).as_secs_f64() * 1000.0;
        LedgerRow {
            ts_ms: self.ts_ms,
            request_id: header_text(self.context.request_id.as_ref()),
            client_request_id: header_text(self.context.client_request_id.as_ref()),
            key: key.map(|k| k.name.clone()),
            team: key.and_then(|k| k.team.clone()),
            route: self.context.route.clone(),
            // Taken: the row is made once, and the record needs no name after.
            backend: std::mem::take(&mut self.backend),
            tier: self.tier,
            provider: Some(self.provider),
            kind: None,
            tool: None,
            bytes_in: None,
            bytes_out: None,
            profile: self.context.profile,
            dialect: self.context.dialect.name(),
            endpoint: self.context.endpoint,
            tokens,
            cost_usd: cost,
            counterfactual_usd: counterfactual,
            ttft_ms: self.first_output.map(ms),
            predicted_ttft_ms: self.predicted_ttft_ms,
            decode_tokens_per_s: decode_rate(tokens.output, ttft, total, self.reported_rates.1),
            duration_ms: ms(ended),
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
            batch: self.context.batch.clone(),
            tool_results: self.context.tool_results,
            queued_ms: waited_ms,
            shadow: self.shadow,
            error: self.error.clone(),
            sensitive: self.context.sensitive.clone(),
        }
    }

    /// What a span may record of a request's text: where a sensitive-data
    /// policy masks or keeps the request local, the values are masked
    /// there too (a trace collector is somewhere else).
    fn content_shown(
        &self,
        (mut prompt, mut output): (String, Option<String>),
    ) -> Option<(String, Option<String>)> {
        use switchyard_policies::SensitiveAction;
        let Some(handling) = &self.context.sensitive else {
            return Some((prompt, output));
        };
        match (&handling.masker, handling.action) {
            (_, SensitiveAction::Allow) => {}
            (Some(masker), _) => {
                masker.mask(&mut prompt);
                if let Some(output) = &mut output {
                    masker.mask(output);
                }
            }
            (None, _) => return None,
        }
        Some((prompt, output))
    }

    /// The row told to the attempt's span, the metrics and the request log,
    /// so none of them can disagree with the ledger.
    fn report(&mut self, row: &LedgerRow, ttft: Option<Duration>, total: Duration) {
        let tokens = &row.tokens;
        if let Some(span) = self.span.take() {
            let content = span.captures_content().then(|| {
                // Output held back and counted is gone: only a whole
                // completion is recorded.
                let output = self.output.whole().map(str::to_owned);
                (self.context.prompt.prompt_for_count().0, output)
            });
            let content = content.and_then(|c| self.content_shown(c));
            crate::settle::attempt_span::end(span, row, ttft, content);
        }
        let facts = CallFacts {
            operation: crate::settle::attempt_span::operation(self.context.endpoint),
            role: crate::settle::attempt_span::role(self.reason),
            ttft_saved_ms: self.ttft_saved_ms(tokens),
            upstream_seconds: total.as_secs_f64(),
            upstream_ttft: ttft,
            from_cache: self.from_cache,
        };
        self.metrics.record(self.backend_index, row, facts);
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
            error = self.error.as_deref(),
        );
    }

    /// Tells the backend's breaker and the prefix index how the call went,
    /// once (not for cache hits: no backend was called).
    pub(crate) fn tell_routing(&mut self) {
        if self.routing_told || self.from_cache {
            return;
        }
        self.routing_told = true;
        match self.outcome {
            "ok" | "escalated" => self.breaker.success(),
            _ if self.upstream_failure() => self.breaker.failure(self.blame()),
            _ => self.breaker.inconclusive(),
        }
        if matches!(self.outcome, "ok" | "escalated") {
            match (&self.salted_prefix, &self.context.prefix) {
                (Some(salted), _) => self.prefix_index.served(self.replica, salted),
                (None, Some(chain)) => self
                    .prefix_index
                    .served(self.replica, &chain.salted(self.prefix_salt)),
                (None, None) => {}
            }
        }
    }

    /// The backend's own failures trip its breaker; a caller's bad request
    /// or a client that left says nothing about the backend.
    pub(crate) fn upstream_failure(&self) -> bool {
        UPSTREAM_FAILURES.contains(&self.outcome)
    }

    /// Who the backend's fault may be laid to: the caller's key, unless no
    /// request could have caused it (the backend was not reached).
    pub(crate) fn blame(&self) -> Blame<'_> {
        match (&self.context.caller, self.outcome) {
            (_, "upstream_connect" | "upstream_auth") | (None, _) => Blame::Backend,
            (Some(caller), _) => Blame::Key(&caller.key.name),
        }
    }

    /// What this call tells the backend's latency model and speculation
    /// figures.
    pub(crate) fn inform_backend_models(
        &self,
        tokens: &TokenCounts,
        ttft: Option<Duration>,
        total: Duration,
    ) {
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
                work: self.work,
                ran_beside: self.ran_beside,
                predicted_ttft_ms: self.predicted_ttft_ms,
                waited: self.waited,
                failed: upstream_failure,
            },
        );
        self.metrics
            .set_drifts(self.backend_index, &self.latency.drifts(self.backend_index));
        // A shadow's answers are the candidate's, not the route's.
        if !upstream_failure && tokens.output > 0 && self.shadow.is_none() {
            self.output_lengths.observe(
                self.context.route_number,
                self.backend_index,
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
    pub(crate) fn ttft_saved_ms(&self, tokens: &TokenCounts) -> f64 {
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

/// What a call cost: its tokens priced, or its share of the hardware's hour
/// (`busy_seconds` split with the `sharing` requests running beside it),
/// times the service tier's multiplier when one was sent.
pub(crate) fn call_cost(
    pricing: &Pricing,
    tokens: &TokenCounts,
    busy_seconds: f64,
    sharing: u32,
    tier: Option<&SentTier>,
) -> f64 {
    let multiplier = tier.map_or(1.0, |t| t.multiplier);
    pricing.cost(tokens, busy_seconds, sharing) * multiplier
}

/// Output tokens per second after the first: measured from the first token
/// on; for a whole answer (no first-token time), as the backend reported it
/// (llama.cpp's timings), if it did. One token gives no rate.
pub(crate) fn decode_rate(
    output_tokens: u64,
    ttft: Option<Duration>,
    total: Duration,
    reported: Option<f64>,
) -> Option<f64> {
    match ttft {
        Some(ttft) => {
            let decoding = total.saturating_sub(ttft).as_secs_f64();
            (output_tokens > 1 && decoding > 0.0).then(|| (output_tokens - 1) as f64 / decoding)
        }
        None => reported.filter(|_| output_tokens > 1),
    }
}

#[cfg(test)]
mod tests {
    use switchyard_policies::TokenPrice;

    use super::*;

    fn tokens(input: u64, output: u64) -> TokenCounts {
        TokenCounts {
            input,
            output,
            ..TokenCounts::default()
        }
    }

    #[test]
    fn decoding_is_timed_from_the_first_token() {
        let s = Duration::from_secs;
        assert_eq!(decode_rate(11, Some(s(1)), s(3), None), Some(5.0));
        assert_eq!(
            decode_rate(1, Some(s(1)), s(3), None),
            None,
            "one token has no rate"
        );
        assert_eq!(
            decode_rate(11, Some(s(3)), s(3), None),
            None,
            "no time to decode in"
        );
        assert_eq!(
            decode_rate(11, None, s(3), Some(40.0)),
            Some(40.0),
            "the backend's own"
        );
        assert_eq!(decode_rate(1, None, s(3), Some(40.0)), None);
    }

    #[test]
    fn a_service_tier_multiplies_the_price_and_an_hour_is_shared() {
        let price = Pricing::Tokens(TokenPrice {
            input: 1.0,
            cached_input: 0.5,
            cache_write: 1.25,
            output: 2.0,
            reasoning: 2.0,
        });
        let used = tokens(1_000_000, 1_000_000);
        assert!((call_cost(&price, &used, 9.0, 1, None) - 3.0).abs() < 1e-9);
        let flex = SentTier {
            name: "flex".into(),
            multiplier: 0.5,
        };
        assert!((call_cost(&price, &used, 9.0, 1, Some(&flex)) - 1.5).abs() < 1e-9);
        let hourly = Pricing::Hourly { usd_per_hour: 3.6 };
        // 10 s of a $3.60 hour is $0.01, split between two requests.
        assert!((call_cost(&hourly, &used, 10.0, 2, None) - 0.005).abs() < 1e-9);
        assert_eq!(call_cost(&Pricing::Free, &used, 10.0, 1, None), 0.0);
    }
}
