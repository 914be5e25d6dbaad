//! Trying a decision's backends in order: fallbacks on failures before the
//! first byte, escalation for cascades, local backends when the cloud budget
//! is spent; each try reserves its worst-case cost first and is recorded.

use std::collections::VecDeque;
use std::sync::Arc;
use switchyard_adapters::upstream::with_trace_context;

use futures_util::StreamExt;
use http::Response;
use switchyard_adapters::{AdapterError, Provider};
use switchyard_policies::OnExhausted;
use switchyard_router::{AnswerSummary, Decision, Reason, failed_check};

use crate::admit::admission::{self, NotAdmitted, Size};
use crate::admit::capacity::Admission;
use crate::admit::priority::Class;
use crate::dispatch::endpoint::Call;
use crate::dispatch::endpoint::{Answer, Chunks, Endpoint};
use crate::dispatch::engine;
use crate::dispatch::hedge::{self, Leg};
use crate::dispatch::plan::{self, Mode, Next, Plan, Refusal, Try};
use crate::dispatch::prompt_cache::{self, PromptCache};
use crate::dispatch::response_cache::Slot;
use crate::dispatch::shadow;
use crate::dispatch::stream::{self};
use crate::dispatch::{guardrails, masking};
use crate::error::GatewayError;
use crate::http::{Body, sse_response};
use crate::route::receipts::{CacheUse, Served};
use crate::settle::billed_fields::{self, SentTier};
use crate::settle::context::{PromptSource, RequestContext};
use crate::settle::record::RequestRecord;
use crate::state::app::App;
use switchyard_adapters::types::{CanonicalChunk, CanonicalRequest, CanonicalResponse};

/// A decoded request, shared by the tries that each send a copy of it and
/// by the request's records, which count its prompt only if a backend
/// reports no usage.
pub(crate) struct Shared<E: Endpoint>(pub(crate) E::Request);

impl<E: Endpoint> PromptSource for Shared<E> {
    fn prompt_for_count(&self) -> (String, usize) {
        self.0.prompt_for_count()
    }
    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        self.0.sampling()
    }
    fn texts(&self) -> Vec<String> {
        self.0
            .prompt_texts()
            .into_iter()
            .map(std::borrow::Cow::into_owned)
            .collect()
    }
}

/// Local backends to serve a request whose cloud budget is spent: the
/// decision's own local targets first, then every other local backend.
pub(crate) fn local_targets(app: &App, decision: &Decision, tried: &[usize]) -> VecDeque<usize> {
    let locals = decision
        .targets
        .iter()
        .copied()
        .chain(0..app.backends.len());
    let mut out: VecDeque<usize> = VecDeque::new();
    for index in locals {
        let handle = &app.backends[index];
        // A request its sensitive-data policy keeps local goes only where
        // that policy trusts (`local`), not to every tier budgets count so.
        let allowed = !handle.is_cloud() && (!decision.local_only || handle.local);
        if allowed && !tried.contains(&index) && !out.contains(&index) {
            out.push_back(index);
        }
    }
    out
}

/// Tries the decision's backends in order until one answers. A retryable
/// failure before anything reached the client moves on to the next
/// (fallback); in a cascade, an answer failing a check does too. Each try
/// reserves its worst-case cost against the caller's budgets first. The
/// order and what a failure leads to are the plan's (`plan.rs`).
pub(crate) async fn dispatch<E: Endpoint>(
    app: &App,
    decision: &Decision,
    request: Arc<Shared<E>>,
    context: Arc<RequestContext>,
    size: Size,
    mut slot: Option<Slot>,
) -> (Result<Response<Body>, GatewayError>, Served) {
    let cascade = app
        .router
        .cascade(decision)
        .filter(|_| E::CHECKED_BY_CASCADES);
    // Backends that cannot take this kind of call (a passthrough's
    // dialect) are never tried, as fallbacks or hedges either.
    let servable =
        |backend: &usize| E::Request::served_by(&*app.backends[*backend].replicas[0].provider);
    let mut plan = Plan::new(
        decision.targets.iter().copied().filter(servable),
        app.router.retries(decision.route),
    );
    let tries = Tries {
        request: &request,
        context: &context,
        size,
        streaming: request.0.is_stream(),
    };
    let mut served = Served::first_choice(decision);
    let mut last_error = None;
    // Hooks that read the whole answer: a stream is held back for them,
    // and never hedged (a hedge relays as it races).
    let checked_after = E::CHECKED_BY_CASCADES && guardrails::checks_after(app, &context);
    // A route's shadow copies the request once, beside its first call.
    let mut offered = false;
    while let Some(attempt) = plan.next(&mut served.reason) {
        served.backend = attempt.backend;
        let admitted = admission::admit_call(
            app,
            context.caller.as_ref(),
            attempt.backend,
            (
                size,
                &context.shape(app, attempt.backend),
                Class::of_request(decision.features.profile, context.batch.is_some()),
            ),
            decision.features.prefix.as_ref(),
            decision.features.tenant,
        )
        .await;
        let (reservation, mut admission) = match admitted {
            Ok(admitted) => admitted,
            Err(refused) => {
                let (refusal, err) = refusal_of(refused);
                let cloud = app.backends[attempt.backend].is_cloud();
                match plan.after_refusal(refusal, cloud, attempt.is_last) {
                    Next::Downgrade => {
                        let mut locals = local_targets(app, decision, plan.tried());
                        locals.retain(servable);
                        plan.downgrade_to(locals);
                        served.reason = Reason::BudgetDowngrade;
                    }
                    Next::GiveUp => return (Err(err), served),
                    Next::MoveOn | Next::Retry { .. } => {}
                }
                last_error = Some(err);
                continue;
            }
        };
        let predicted =
            (attempt.backend == decision.primary()).then_some(decision.predicted_ttft_ms);
        let mut record = RequestRecord::new(
            app,
            context.clone(),
            attempt.backend,
            served.reason,
            reservation,
            &admission,
            predicted,
        );
        // Each try sends its own copy: the original stays for the next try
        // and for the records.
        let (mut req, tier) = prepared::<E>(
            app,
            decision,
            attempt.backend,
            request.0.clone(),
            Some(&admission),
        );
        record.sent_tier(tier);
        if !offered {
            offered = true;
            shadow::offer::<E>(app, decision, attempt.backend, &request, &context);
        }
        served.cache = CacheUse::Prefix(record.expected_cached_tokens());
        let client_wants_usage = tries.streaming && req.request_stream_usage();
        let checked = cascade.filter(|_| !attempt.is_last);
        // Hedge the first choice with the next, on routes that hedge.
        let hedge = decision
            .route
            .and_then(|r| app.router.hedge(r))
            .filter(|_| attempt.first && !attempt.retrying && checked.is_none() && !checked_after)
            .zip(plan.upcoming());
        let mode = plan::mode(
            tries.streaming,
            checked.is_some() || checked_after,
            hedge.is_some(),
        );
        let answer = match hedge {
            Some((hedge, other)) => {
                let leg = Leg {
                    backend: attempt.backend,
                    record,
                    admission,
                };
                let hedge_req = prepared::<E>(app, decision, other, request.0.clone(), None);
                // Boxed: the race's state is large and most requests never
                // hedge; inline, every request's future would carry it.
                let (answer, winner) = Box::pin(hedge::race::<E>(
                    app,
                    &context,
                    size,
                    leg,
                    req,
                    other,
                    hedge_req,
                    tries.streaming,
                    hedge.max_usd_per_key_per_day,
                ))
                .await;
                if winner.backend != attempt.backend {
                    served = Served {
                        backend: winner.backend,
                        reason: Reason::Hedge,
                        cache: CacheUse::Prefix(winner.record.expected_cached_tokens()),
                    };
                }
                record = winner.record;
                admission = winner.admission;
                answer
            }
            None => {
                let provider = (attempt.backend, &*admission.provider);
                call::<E>(app, mode, provider, &mut record, req).await
            }
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                let err = GatewayError::from(err);
                record.failed(&err);
                // The request fails or moves on either way; a row the
                // ledger could not take is logged by its writer.
                let _ = record.write().await;
                let retryable = matches!(&err, GatewayError::Upstream(e) if e.retryable());
                // A window too small for the request: remember what the
                // backend said it holds, and move on to a backend whose
                // window does.
                let next = match err.window_refusal() {
                    Some(window) => {
                        if let Some(window) = window {
                            app.router.set_context_window(attempt.backend, window);
                        }
                        plan.retain(|b| {
                            b != attempt.backend && app.router.fits(b, &decision.features)
                        });
                        if plan.upcoming().is_some() {
                            Next::MoveOn
                        } else {
                            Next::GiveUp
                        }
                    }
                    None => {
                        plan.after_failure(attempt.backend, retryable, err.kind(), attempt.is_last)
                    }
                };
                match next {
                    Next::Retry { attempt } => tokio::time::sleep(backoff(attempt)).await,
                    Next::MoveOn | Next::Downgrade => {}
                    Next::GiveUp => return (Err(err), served),
                }
                last_error = Some(err);
                continue;
            }
        };
        if let Some((checks, min_mean_logprob)) = checked
            && escalates::<E>(app, decision, attempt, &answer, checks, min_mean_logprob)
        {
            record_answer::<E>(&mut record, &answer);
            record.finish("escalated");
            if let Err(err) = record.write().await {
                return (Err(err), served);
            }
            served.reason = Reason::CascadeEscalated;
            continue;
        }
        if checked_after
            && let Err(err) = guardrails::after(app, &context, &summary::<E>(&answer)).await
        {
            // Billed as served; the caller is told why it gets no answer.
            record_answer::<E>(&mut record, &answer);
            record.finish(err.kind());
            if let Err(err) = record.write().await {
                return (Err(err), served);
            }
            return (Err(err), served);
        }
        let keep = slot.take().map(|slot| {
            (
                slot,
                Arc::<str>::from(app.backends[served.backend].name.as_str()),
            )
        });
        let response = match answer {
            Answer::Whole(resp) => {
                record.whole_answer();
                record_whole::<E>(&mut record, &resp);
                record.finish("ok");
                if let Err(err) = record.write_after_reply().await {
                    return (Err(err), served);
                }
                if let Some((slot, backend)) = keep {
                    slot.put_whole(&resp, backend);
                }
                E::respond(&request.0, &resp)
            }
            Answer::Stream(chunks) => {
                stream_reply(&tries, chunks, record, admission, keep, client_wants_usage)
            }
            Answer::Collected(chunks) => {
                // Its output was counted as it was read (`collect`).
                record.output_counted = true;
                let replay = futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed();
                stream_reply(&tries, replay, record, admission, keep, client_wants_usage)
            }
        };
        return (Ok(response), served);
    }
    let err = last_error.unwrap_or(GatewayError::Internal {
        message: "no backend to try".into(),
    });
    (Err(err), served)
}

/// A refused admission as the plan weighs it, and the error it gives.
fn refusal_of(refused: NotAdmitted) -> (Refusal, GatewayError) {
    match refused {
        NotAdmitted::Budget(exhausted) => (
            Refusal::Budget {
                downgrade: exhausted.on_exhausted == OnExhausted::Downgrade,
            },
            GatewayError::from(exhausted),
        ),
        NotAdmitted::Unavailable(err) => (Refusal::Unavailable, err),
        NotAdmitted::Refused(err) => (Refusal::Refused, err),
    }
}

/// What every try of one request shares.
struct Tries<'a, E: Endpoint> {
    request: &'a Arc<Shared<E>>,
    context: &'a Arc<RequestContext>,
    size: Size,
    streaming: bool,
}

/// Calls `backend` through `provider` (the admitted replica's) as the
/// mode says: whole, streamed, or streamed and held back whole for a check
/// (a hedged call is raced in `hedge`; a shadow copy is called whole or
/// held back).
pub(crate) async fn call<E: Endpoint>(
    app: &App,
    mode: Mode,
    (backend, provider): (usize, &dyn Provider),
    record: &mut RequestRecord,
    req: E::Request,
) -> Result<Answer<E>, AdapterError> {
    let trace = record.trace_context();
    let masker = masking::for_backend(app, &record.context, backend);
    match mode {
        Mode::Whole | Mode::Hedged => {
            with_trace_context(trace, masking::call_whole(req, provider, masker))
                .await
                .map(Answer::Whole)
        }
        Mode::Stream => with_trace_context(trace, masking::call_stream(req, provider, masker))
            .await
            .map(Answer::Stream),
        Mode::Collected => {
            let chunks =
                with_trace_context(trace, masking::call_stream(req, provider, masker)).await?;
            collect::<E>(chunks, record, held_answer_limits(app, backend))
                .await
                .map(Answer::Collected)
        }
    }
}

/// Whether a cascade's checks send the answer on to the next backend. The
/// first backend's answer is a label for the predictors learning from the
/// route (a fallback's is not).
fn escalates<E: Endpoint>(
    app: &App,
    decision: &Decision,
    attempt: Try,
    answer: &Answer<E>,
    checks: &[switchyard_policies::CascadeCheck],
    min_mean_logprob: f64,
) -> bool {
    let failed = failed_check(&summary::<E>(answer), checks, min_mean_logprob);
    if attempt.first {
        app.router
            .observe(decision, attempt.backend, failed.is_some());
        app.record_outcome(decision, attempt.backend, failed.is_some());
    }
    if let Some(failed) = failed {
        let backend = &app.backends[attempt.backend].name;
        tracing::info!(backend = %backend, check = failed.name(), "cascade escalates");
    }
    failed.is_some()
}

/// What checks read of an answer held whole (nothing of one relayed as it
/// streams).
fn summary<E: Endpoint>(answer: &Answer<E>) -> AnswerSummary {
    match answer {
        Answer::Whole(resp) => E::Request::summarize(resp),
        Answer::Collected(chunks) => E::Request::summarize_chunks(chunks),
        Answer::Stream(_) => AnswerSummary::default(),
    }
}

/// A streamed answer (relayed, or held for a check and replayed) as the
/// reply in the caller's dialect; the stream writes the row as it ends.
fn stream_reply<E: Endpoint>(
    tries: &Tries<'_, E>,
    chunks: Chunks<E::Chunk>,
    record: Box<RequestRecord>,
    admission: Admission,
    keep: Option<(Slot, Arc<str>)>,
    client_wants_usage: bool,
) -> Response<Body> {
    let request = &tries.request.0;
    let model = &tries.context.model;
    let encoder = E::encoder(request, client_wants_usage, model, tries.size.prompt_tokens);
    sse_response(stream::encode::<E>(
        chunks,
        encoder,
        record,
        Some(admission),
        keep,
    ))
}

/// The request as backend `backend` takes it: its model name, the engine's
/// extra fields (llama.cpp's speculative settings, and the slot chosen at
/// admission), and provider prompt caching (from what the admitted replica
/// holds). Fields that change the bill are priced or removed; the priced
/// service tier sent comes back with the request.
pub(crate) fn prepared<E: Endpoint>(
    app: &App,
    decision: &Decision,
    backend: usize,
    mut req: E::Request,
    admission: Option<&Admission>,
) -> (E::Request, Option<SentTier>) {
    let handle = &app.backends[backend];
    req.set_model(
        decision
            .upstream_model
            .as_deref()
            .unwrap_or(&handle.upstream_model),
    );
    let mut fields = engine::body_fields(app, decision, backend);
    if let Some(slot) = admission.and_then(|a| a.slot) {
        fields.insert("id_slot".into(), slot.into());
    }
    if !fields.is_empty()
        && let Some(extra) = req.engine_fields()
    {
        engine::apply(extra, &fields);
    }
    let tier = req
        .caller_fields()
        .and_then(|extra| billed_fields::apply(extra, handle));
    let tenant = decision.features.tenant;
    engine::cache_salt(
        || req.engine_fields(),
        handle.engine,
        app.router.prefix_salt(backend, tenant),
    );
    if let Some(chain) = &decision.features.prefix {
        // As admission salted it, when it did; salted here only where a
        // prompt cache is keyed by it.
        let salted = || match admission.and_then(|a| a.prefix.as_deref()) {
            Some(salted) => std::borrow::Cow::Borrowed(salted),
            None => app.router.chain_for(backend, chain, tenant),
        };
        match (handle.prompt_cache, admission) {
            (PromptCache::OpenAiKey, _) => {
                if let Some(extra) = req.engine_fields() {
                    prompt_cache::openai_key(extra, &salted());
                }
            }
            (PromptCache::AnthropicMarkers, Some(admission)) => {
                prompt_cache::anthropic_markers(
                    &mut req,
                    &salted(),
                    decision.features.prompt_tokens,
                    admission.cached_blocks,
                );
            }
            (PromptCache::AnthropicMarkers, None) | (PromptCache::None, _) => {}
        }
    }
    (req, tier)
}

/// The wait before retry `n` (1-based): 50 ms doubling, jittered by ±50% so
/// many callers retrying at once do not arrive together.
pub(crate) fn backoff(n: u32) -> std::time::Duration {
    let base = 50.0 * f64::from(1u32 << n.saturating_sub(1).min(6));
    std::time::Duration::from_secs_f64(base * (0.5 + rand::random::<f64>()) / 1000.0)
}

/// How long a stream held back for a cascade check may take, and how large
/// it may grow: what the backend's whole answers may (`first_byte_ms` for
/// the whole answer, `max_response_bytes`).
pub(crate) fn held_answer_limits(app: &App, backend: usize) -> (std::time::Duration, usize) {
    let handle = &app.backends[backend];
    (handle.first_byte_timeout, handle.max_response_bytes)
}

/// Reads a whole stream, for a cascade to check before anything is sent;
/// the first output it reads is the call's first token. Held in memory, so
/// bounded like a whole answer: `limits` is the time it may take and the
/// bytes its chunks may hold (as JSON).
async fn collect<E: Endpoint>(
    mut chunks: Chunks<E::Chunk>,
    record: &mut RequestRecord,
    (within, max_bytes): (std::time::Duration, usize),
) -> Result<Vec<E::Chunk>, AdapterError> {
    let read = async {
        let mut all = Vec::new();
        let mut bytes = 0usize;
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            if chunk.has_output() {
                record.first_output();
            }
            // Counted as it arrives: a step cut short (timed out, reset)
            // is billed for what the backend made of it.
            record.usage(chunk.usage());
            chunk.push_output(record.stream_output());
            chunk.push_reasoning(record.reasoning());
            bytes += serde_json::to_vec(&chunk).map_or(0, |json| json.len());
            if bytes > max_bytes {
                return Err(AdapterError::Protocol {
                    message: format!(
                        "the answer is larger than {max_bytes} bytes (max_response_bytes)"
                    ),
                });
            }
            all.push(chunk);
        }
        Ok(all)
    };
    tokio::time::timeout(within, read)
        .await
        .unwrap_or(Err(AdapterError::Timeout {
            phase: switchyard_adapters::TimeoutPhase::FirstByte,
            after: within,
        }))
}

/// Notes an answer's output and usage in its record.
pub(crate) fn record_answer<E: Endpoint>(record: &mut RequestRecord, answer: &Answer<E>) {
    // A whole answer's first token is not seen; a collected stream's was,
    // as it was read.
    record.whole_answer();
    match answer {
        Answer::Whole(resp) => record_whole::<E>(record, resp),
        // Its output and usage were counted as it was read (`collect`).
        Answer::Collected(chunks) => {
            for chunk in chunks {
                record.answer_meta(|meta| E::Request::chunk_meta(chunk, meta));
                record.timings(chunk.timings());
            }
        }
        Answer::Stream(_) => {}
    }
}

pub(crate) fn record_whole<E: Endpoint>(record: &mut RequestRecord, resp: &E::Response) {
    record.answer_meta(|meta| E::Request::answer_meta(resp, meta));
    record.timings(resp.timings());
    record.usage(resp.usage());
    // The text is counted when no usage came, recorded on the span when
    // content is captured, and compared when a shadow copy waits for it.
    if resp.usage().is_none() || record.keeps_text() {
        record.output().push_str(&resp.output_text());
    }
}
