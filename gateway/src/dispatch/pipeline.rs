//! The path every model call takes, whatever the endpoint: read, parse,
//! route, then try the decision's backends in order (fallbacks on failures
//! before the first byte, escalation for cascades), answer with receipts.

use crate::telemetry::{AnswerMeta, RequestTrace};
use std::collections::VecDeque;
use std::sync::Arc;
use switchyard_adapters::upstream::with_trace_context;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_adapters::types::{Extra, Timings, Usage};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_policies::OnExhausted;
use switchyard_router::prefix::PrefixChain;
use switchyard_router::{AnswerSummary, Decision, Reason, RequestView, failed_check};

use crate::admit::access::Caller;
use crate::admit::admission::{self, NotAdmitted, Size};
use crate::dispatch::engine;
use crate::dispatch::hedge::{self, Leg};
use crate::dispatch::prompt_cache::{self, PromptCache};
use crate::dispatch::request_context::{PromptSource, RequestContext};
use crate::dispatch::response_cache::{Slot, replay};
use crate::dispatch::stream::{self, StreamEncoder};
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json, sse_response};
use crate::route::encoder::encode_for_routing;
use crate::route::receipts::{self, CacheUse, Served};
use crate::route::view::{BodyHints, complete_view};
use crate::settle::billed_fields::{self, SentTier};
use crate::settle::record::RequestRecord;
use crate::state::app::{Admission, App};

/// A backend's chunks.
pub type Chunks<C> = BoxStream<'static, Result<C, AdapterError>>;

/// One OpenAI-compatible model endpoint that can answer whole or streamed.
pub trait Endpoint: Sized + 'static {
    /// For logs and metrics.
    const NAME: &'static str;
    /// The caller's dialect: errors and the ledger's `dialect` follow it.
    const DIALECT: Dialect;
    /// Whether a cascade's checks (which read an answer's text) apply; an
    /// endpoint without text (embeddings) takes a cascade's first backend.
    const CHECKED_BY_CASCADES: bool = true;
    type Request: DeserializeOwned + Clone + Send + Sync + 'static;
    type Response: Serialize + Send + 'static;
    type Chunk: Serialize + Send + 'static;
    /// Writes streamed chunks in the caller's dialect.
    type Encoder: StreamEncoder<Self::Chunk>;

    /// The request body in the caller's dialect, as the canonical request.
    fn decode(body: &[u8]) -> Result<Self::Request, GatewayError> {
        parse_json(body)
    }
    /// Keeps the caller's protocol headers that a backend of the same
    /// dialect should receive (nothing, unless the dialect has such headers).
    fn forward_headers(_req: &mut Self::Request, _headers: &http::HeaderMap) {}
    /// A whole answer to `req` in the caller's dialect.
    fn respond(_req: &Self::Request, resp: &Self::Response) -> Response<Body> {
        json_response(StatusCode::OK, resp)
    }
    /// The stream writer for the answer to `req`. `client_wants_usage`: the
    /// client asked for the final usage chunk; `prompt_tokens`: the estimate
    /// made at admission.
    fn encoder(
        req: &Self::Request,
        client_wants_usage: bool,
        model: &str,
        prompt_tokens: u32,
    ) -> Self::Encoder;

    /// The router's view of the request (session, profile and headers are
    /// filled in by the caller).
    fn view(req: &Self::Request) -> RequestView<'_>;
    fn hints(req: &Self::Request) -> BodyHints<'_>;
    fn set_model(req: &mut Self::Request, model: &str);
    /// The request body's fields the canonical type does not model, where
    /// engine extras go; `None` for endpoints that take none.
    fn body_extra(_req: &mut Self::Request) -> Option<&mut Extra> {
        None
    }
    /// The same fields as the caller sent them, where fields that change
    /// the bill are priced or removed: every endpoint that keeps any.
    fn caller_fields(req: &mut Self::Request) -> Option<&mut Extra> {
        Self::body_extra(req)
    }
    /// The canonical prompt's prefix chain, for endpoints with a prompt.
    fn prefix_chain(_req: &Self::Request) -> Option<PrefixChain> {
        None
    }
    /// The model name the caller asked for.
    fn model_name(req: &Self::Request) -> &str;
    /// Checks serde cannot express (empty lists, zero counts).
    fn validate(req: &Self::Request) -> Result<(), GatewayError>;
    fn is_stream(req: &Self::Request) -> bool;
    /// Asks the backend for a final usage chunk, which accounting needs;
    /// returns whether the client asked for it too (else it is not forwarded).
    fn request_stream_usage(req: &mut Self::Request) -> bool;
    fn response_usage(resp: &Self::Response) -> Option<&Usage>;
    fn chunk_usage(chunk: &Self::Chunk) -> Option<&Usage>;
    /// A chunk with no choices that only carries usage.
    fn chunk_is_usage_only(chunk: &Self::Chunk) -> bool;
    /// A chunk carrying generated output (text or a tool call): the first one
    /// marks the time to first token.
    fn chunk_has_output(chunk: &Self::Chunk) -> bool;
    /// The prompt as text and the template's extra tokens, for counting
    /// usage when a backend reports none.
    fn prompt_for_count(req: &Self::Request) -> (String, usize);
    /// Generated text of a whole answer, for counting when no usage came.
    fn output_text(resp: &Self::Response) -> String;
    /// Appends a chunk's generated text (content, tool-call arguments).
    fn chunk_output(chunk: &Self::Chunk, out: &mut String);
    /// llama.cpp's `timings` of an answer, or on a chunk.
    fn response_timings(resp: &Self::Response) -> Option<&Timings>;
    fn chunk_timings(chunk: &Self::Chunk) -> Option<&Timings>;
    /// What a whole answer or a chunk says of itself (id, model, finish
    /// reasons), for its attempt's span; nothing for endpoints without.
    fn answer_meta(_resp: &Self::Response, _meta: &mut AnswerMeta) {}
    fn chunk_meta(_chunk: &Self::Chunk, _meta: &mut AnswerMeta) {}
    /// The request's `temperature` and `top_p`, for its attempts' spans.
    fn sampling(_req: &Self::Request) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// What cascade checks look at, from a whole answer or a streamed one.
    fn summarize(resp: &Self::Response) -> AnswerSummary;
    fn summarize_chunks(chunks: &[Self::Chunk]) -> AnswerSummary;

    fn call(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Self::Response, AdapterError>>;
    fn call_stream(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Chunks<Self::Chunk>, AdapterError>>;
}

/// A decoded request, shared by the tries that each send a copy of it and
/// by the request's records, which count its prompt only if a backend
/// reports no usage.
struct Shared<E: Endpoint>(E::Request);

impl<E: Endpoint> PromptSource for Shared<E> {
    fn prompt_for_count(&self) -> (String, usize) {
        E::prompt_for_count(&self.0)
    }
    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        E::sampling(&self.0)
    }
}

pub async fn serve<E: Endpoint>(
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    let mut request: E::Request = E::decode(&bytes)?;
    E::forward_headers(&mut request, &parts.headers);
    E::validate(&request)?;
    let decision = decide::<E>(app, &parts, &request).await?;
    serve_decided::<E>(app, &parts, request, decision).await
}

/// Routes a decoded request: its view (with the caller's key and team and
/// any encoder embeddings), the decision, and whether the key may name a
/// backend directly.
pub async fn decide<E: Endpoint>(
    app: &App,
    parts: &Parts,
    request: &E::Request,
) -> Result<Decision, GatewayError> {
    let caller = parts.extensions.get::<Caller>();
    let mut view = complete_view(
        E::view(request),
        &parts.headers,
        E::hints(request),
        &app.router,
    )?;
    if let Some(caller) = caller {
        view.key = Some(&caller.key.name);
        view.team = caller.key.team.as_deref();
        view.tenant = app.keys.tenant(caller);
    }
    view.prefix = E::prefix_chain(request).map(Arc::new);
    let trace = parts.extensions.get::<RequestTrace>();
    let started = trace.map(|_| std::time::SystemTime::now());
    let (encoded, _) = encode_for_routing(app, parts, &view).await;
    let decision = app
        .decide(&RequestView {
            encoded: &encoded,
            ..view
        })
        .map_err(|err| admission::for_caller(err, app, caller))?;
    if let (Some(trace), Some(started)) = (trace, started) {
        trace.routed(
            started,
            crate::settle::attempt_span::routing(app, &decision),
        );
    }
    admission::check_direct(app, caller, &decision)?;
    Ok(decision)
}

/// Serves a request already decided: limits, dispatch, receipts.
pub async fn serve_decided<E: Endpoint>(
    app: &App,
    parts: &Parts,
    request: E::Request,
    decision: Decision,
) -> Result<Response<Body>, GatewayError> {
    let caller = parts.extensions.get::<Caller>().cloned();
    let size = Size::of(&decision.features);
    let request = Arc::new(Shared::<E>(request));
    let context = RequestContext::new(
        app,
        parts,
        (E::NAME, E::DIALECT),
        E::model_name(&request.0).to_owned(),
        &decision,
        request.clone(),
    );
    admission::admit_request(app, caller.as_ref(), size)?;
    let slot = Slot::of(app, parts, &request.0, &decision);
    // A hit from a backend the config no longer has is a miss.
    let cached = slot.as_ref().and_then(Slot::get).and_then(|cached| {
        let backend = app
            .backends
            .iter()
            .position(|b| *b.name == *cached.backend)?;
        Some((cached, backend))
    });
    if slot.as_ref().is_some_and(Slot::looks_up) {
        app.metrics.response_cache(cached.is_some());
    }
    if let Some((cached, backend)) = cached
        && let Some(mut response) = Box::pin(replay::<E>(
            app,
            request.0.clone(),
            context.clone(),
            (&cached, backend),
            &decision,
        ))
        .await
    {
        let served = Served {
            backend,
            reason: decision.reason,
            cache: CacheUse::Hit,
        };
        receipts::apply(app, &decision, served, response.headers_mut());
        return Ok(response);
    }
    // Boxed: dispatch's state is most of a request's future, and a future
    // is copied whole into its parent's at each level that awaits it
    // (boxed, this function's future went from 6.7 KB to 0.9 KB).
    let (result, served) =
        Box::pin(dispatch::<E>(app, &decision, request, context, size, slot)).await;
    let mut response = result.unwrap_or_else(|err| err.into_response_for(E::DIALECT));
    receipts::apply(app, &decision, served, response.headers_mut());
    Ok(response)
}

/// What one backend gave.
pub enum Answer<E: Endpoint> {
    Whole(E::Response),
    Stream(Chunks<E::Chunk>),
    /// A streamed answer held back for a cascade check.
    Collected(Vec<E::Chunk>),
}

/// Local backends to serve a request whose cloud budget is spent: the
/// decision's own local targets first, then every other local backend.
fn local_targets(app: &App, decision: &Decision, tried: &[usize]) -> VecDeque<usize> {
    let locals = decision
        .targets
        .iter()
        .copied()
        .chain(0..app.backends.len());
    let mut out: VecDeque<usize> = VecDeque::new();
    for index in locals {
        if !app.backends[index].is_cloud() && !tried.contains(&index) && !out.contains(&index) {
            out.push_back(index);
        }
    }
    out
}

/// Tries the decision's backends in order until one answers. A retryable
/// failure before anything reached the client moves on to the next
/// (fallback); in a cascade, an answer failing a check does too. Each try
/// reserves its worst-case cost against the caller's budgets first.
async fn dispatch<E: Endpoint>(
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
    let streaming = E::is_stream(&request.0);
    let mut served = Served::first_choice(decision);
    let mut last_error = None;
    let mut targets: VecDeque<usize> = decision.targets.iter().copied().collect();
    let mut tried: Vec<usize> = Vec::new();
    let retries = app.router.retries(decision.route);
    let mut retries_used = 0;
    while let Some(backend_index) = targets.pop_front() {
        let is_last = targets.is_empty();
        // A retry of the same backend keeps the reason; moving on is a fallback.
        let retrying = tried.last() == Some(&backend_index);
        if !retrying {
            retries_used = 0;
            if !tried.is_empty()
                && !matches!(
                    served.reason,
                    Reason::CascadeEscalated | Reason::BudgetDowngrade
                )
            {
                served.reason = Reason::Fallback;
            }
            tried.push(backend_index);
        }
        served.backend = backend_index;
        let admitted = admission::admit_call(
            app,
            context.caller.as_ref(),
            backend_index,
            (size, &context.shape(app, backend_index)),
            decision.features.prefix.as_deref(),
            decision.features.tenant,
        )
        .await;
        let (reservation, mut admission) = match admitted {
            Ok(admitted) => admitted,
            Err(NotAdmitted::Budget(exhausted))
                if exhausted.on_exhausted == OnExhausted::Downgrade
                    && app.backends[backend_index].is_cloud() =>
            {
                targets = local_targets(app, decision, &tried);
                served.reason = Reason::BudgetDowngrade;
                last_error = Some(exhausted.into());
                continue;
            }
            Err(NotAdmitted::Budget(exhausted)) => return (Err(exhausted.into()), served),
            // An open circuit or a full backend: the next backend may take it.
            Err(NotAdmitted::Unavailable(err)) if !is_last => {
                last_error = Some(err);
                continue;
            }
            Err(NotAdmitted::Unavailable(err) | NotAdmitted::Refused(err)) => {
                return (Err(err), served);
            }
        };
        let backend = &app.backends[backend_index];
        // Each try sends its own copy: the original stays for the next try
        // and for the records.
        let (mut req, tier) = prepared::<E>(
            app,
            decision,
            backend_index,
            request.0.clone(),
            Some(&admission),
        );
        let predicted = (backend_index == decision.primary()).then_some(decision.predicted_ttft_ms);
        let mut record = RequestRecord::new(
            app,
            context.clone(),
            backend_index,
            served.reason,
            reservation,
            &admission,
            predicted,
        );
        record.sent_tier(tier);
        served.cache = CacheUse::Prefix(record.expected_cached_tokens());
        let client_wants_usage = streaming && E::request_stream_usage(&mut req);
        let checked = cascade.filter(|_| !is_last);
        // Hedge the first choice with the next, on routes that hedge.
        let hedge_with = decision
            .route
            .and_then(|r| app.router.hedge(r))
            .filter(|_| tried.len() == 1 && !retrying && checked.is_none())
            .zip(targets.front().copied());
        let answer = match (streaming, checked, hedge_with) {
            (_, None, Some((hedge, other))) => {
                let leg = Leg {
                    backend: backend_index,
                    record,
                    admission,
                };
                // Boxed: the race's state is large and most requests never
                // hedge; inline, every request's future would carry it.
                let (answer, winner) = Box::pin(hedge::race::<E>(
                    app,
                    &context,
                    size,
                    leg,
                    req,
                    other,
                    prepared::<E>(app, decision, other, request.0.clone(), None),
                    streaming,
                    hedge.max_usd_per_key_per_day,
                ))
                .await;
                if winner.backend != backend_index {
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
            (false, _, _) => {
                with_trace_context(record.trace_context(), E::call(&*admission.provider, req))
                    .await
                    .map(Answer::<E>::Whole)
            }
            (true, None, _) => with_trace_context(
                record.trace_context(),
                E::call_stream(&*admission.provider, req),
            )
            .await
            .map(Answer::Stream),
            (true, Some(_), _) => match with_trace_context(
                record.trace_context(),
                E::call_stream(&*admission.provider, req),
            )
            .await
            {
                Ok(chunks) => {
                    collect::<E>(chunks, &mut record, held_answer_limits(app, backend_index))
                        .await
                        .map(Answer::Collected)
                }
                Err(err) => Err(err),
            },
        };
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                let err = GatewayError::from(err);
                record.finish(err.kind());
                // The request fails or moves on either way; a row the
                // ledger could not take is logged by its writer.
                let _ = record.write().await;
                let retryable = matches!(&err, GatewayError::Upstream(e) if e.retryable());
                if retryable && retries_used < retries {
                    retries_used += 1;
                    tokio::time::sleep(backoff(retries_used)).await;
                    targets.push_front(backend_index);
                    last_error = Some(err);
                    continue;
                }
                // Refused credentials are this backend's alone: another
                // backend may answer, the same one will not.
                if (retryable || err.kind() == "upstream_auth") && !is_last {
                    last_error = Some(err);
                    continue;
                }
                return (Err(err), served);
            }
        };
        if let Some((checks, min_mean_logprob)) = checked {
            let summary = match &answer {
                Answer::Whole(resp) => E::summarize(resp),
                Answer::Collected(chunks) => E::summarize_chunks(chunks),
                Answer::Stream(_) => AnswerSummary::default(),
            };
            let failed = failed_check(&summary, checks, min_mean_logprob);
            // The first backend's answer is a label for the predictors
            // learning from this route (a fallback's is not).
            if tried.len() == 1 {
                app.router
                    .observe(decision, backend_index, failed.is_some());
                app.record_outcome(decision, backend_index, failed.is_some());
            }
            if let Some(failed) = failed {
                tracing::info!(backend = %backend.name, check = failed.name(), "cascade escalates");
                record_answer::<E>(&mut record, &answer);
                record.finish("escalated");
                if let Err(err) = record.write().await {
                    return (Err(err), served);
                }
                served.reason = Reason::CascadeEscalated;
                continue;
            }
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
            Answer::Stream(chunks) => sse_response(stream::encode::<E>(
                chunks,
                E::encoder(
                    &request.0,
                    client_wants_usage,
                    &context.model,
                    size.prompt_tokens,
                ),
                record,
                Some(admission),
                keep,
            )),
            Answer::Collected(chunks) => {
                let replay = futures_util::stream::iter(chunks.into_iter().map(Ok)).boxed();
                sse_response(stream::encode::<E>(
                    replay,
                    E::encoder(
                        &request.0,
                        client_wants_usage,
                        &context.model,
                        size.prompt_tokens,
                    ),
                    record,
                    Some(admission),
                    keep,
                ))
            }
        };
        return (Ok(response), served);
    }
    let err = last_error.unwrap_or(GatewayError::Internal {
        message: "no backend to try".into(),
    });
    (Err(err), served)
}

/// The request as backend `backend` takes it: its model name, the engine's
/// extra fields (llama.cpp's speculative settings, and the slot chosen at
/// admission), and provider prompt caching (from what the admitted replica
/// holds). Fields that change the bill are priced or removed; the priced
/// service tier sent comes back with the request.
fn prepared<E: Endpoint>(
    app: &App,
    decision: &Decision,
    backend: usize,
    mut req: E::Request,
    admission: Option<&Admission>,
) -> (E::Request, Option<SentTier>) {
    let handle = &app.backends[backend];
    E::set_model(&mut req, &handle.upstream_model);
    let mut fields = engine::body_fields(app, decision, backend);
    if let Some(slot) = admission.and_then(|a| a.slot) {
        fields.insert("id_slot".into(), slot.into());
    }
    if !fields.is_empty()
        && let Some(extra) = E::body_extra(&mut req)
    {
        engine::apply(extra, &fields);
    }
    let tier = E::caller_fields(&mut req).and_then(|extra| billed_fields::apply(extra, handle));
    let tenant = decision.features.tenant;
    if let Some(extra) = E::body_extra(&mut req) {
        engine::cache_salt(
            extra,
            handle.engine,
            app.router.prefix_salt(backend, tenant),
        );
    }
    if let Some(chain) = &decision.features.prefix {
        let chain = app.router.chain_for(backend, chain, tenant);
        match handle.prompt_cache {
            PromptCache::OpenAiKey => {
                if let Some(extra) = E::body_extra(&mut req) {
                    prompt_cache::openai_key(extra, &chain);
                }
            }
            PromptCache::AnthropicMarkers => {
                if let Some(admission) = admission {
                    prompt_cache::anthropic_markers(
                        &mut req,
                        &chain,
                        decision.features.prompt_tokens,
                        admission.cached_blocks,
                    );
                }
            }
            PromptCache::None => {}
        }
    }
    (req, tier)
}

/// The wait before retry `n` (1-based): 50 ms doubling, jittered by ±50% so
/// many callers retrying at once do not arrive together.
fn backoff(n: u32) -> std::time::Duration {
    let base = 50.0 * f64::from(1u32 << n.saturating_sub(1).min(6));
    std::time::Duration::from_secs_f64(base * (0.5 + rand::random::<f64>()) / 1000.0)
}

/// How long a stream held back for a cascade check may take, and how large
/// it may grow: what the backend's whole answers may (`first_byte_ms` for
/// the whole answer, `max_response_bytes`).
fn held_answer_limits(app: &App, backend: usize) -> (std::time::Duration, usize) {
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
            if E::chunk_has_output(&chunk) {
                record.first_output();
            }
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
fn record_answer<E: Endpoint>(record: &mut RequestRecord, answer: &Answer<E>) {
    // A whole answer's first token is not seen; a collected stream's was,
    // as it was read.
    record.whole_answer();
    match answer {
        Answer::Whole(resp) => record_whole::<E>(record, resp),
        Answer::Collected(chunks) => {
            for chunk in chunks {
                record.answer_meta(|meta| E::chunk_meta(chunk, meta));
                record.timings(E::chunk_timings(chunk));
                record.usage(E::chunk_usage(chunk));
                E::chunk_output(chunk, record.output());
            }
        }
        Answer::Stream(_) => {}
    }
}

fn record_whole<E: Endpoint>(record: &mut RequestRecord, resp: &E::Response) {
    record.answer_meta(|meta| E::answer_meta(resp, meta));
    record.timings(E::response_timings(resp));
    record.usage(E::response_usage(resp));
    // The text is counted when no usage came, and recorded on the span
    // when content is captured.
    if E::response_usage(resp).is_none() || record.captures_content() {
        record.output().push_str(&E::output_text(resp));
    }
}
