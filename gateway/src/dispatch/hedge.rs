//! Hedging: when the chosen backend is slow to start, a second backend is
//! started after the first's p90 time to first token, and whichever
//! produces output first serves the request. The loser is cancelled (its
//! future dropped, which drops its upstream connection); both are billed,
//! marked `hedge` in the ledger. Each key's hedged spend per day is capped
//! by the worst case of the hedges it started.

use std::sync::Arc;
use std::time::Duration;
use switchyard_adapters::upstream::with_trace_context;
use switchyard_router::latency::LatencyStore;

use futures_util::StreamExt;
use switchyard_adapters::{AdapterError, Provider};

use crate::admit::access::Caller;
use crate::admit::admission::{Size, admit_call, worst_cost};
use crate::admit::capacity::Admission;
use crate::admit::priority::Class;
use crate::dispatch::endpoint::{Answer, Endpoint};
use crate::dispatch::masking;
use crate::error::GatewayError;
use crate::settle::billed_fields::SentTier;
use crate::settle::context::RequestContext;
use crate::settle::record::RequestRecord;
use crate::state::app::App;
use switchyard_adapters::types::{CanonicalChunk, CanonicalRequest};
use switchyard_router::sensitive::Masker;

/// Never hedge sooner than this: below it a hedge only doubles the load.
const MIN_DELAY: Duration = Duration::from_millis(10);

/// One backend's attempt at a request.
pub struct Leg {
    pub backend: usize,
    pub record: Box<RequestRecord>,
    pub admission: Admission,
}

/// Calls a backend and waits until it has produced output: the whole answer,
/// or a stream whose chunks up to the first with output are read ahead.
async fn until_output<E: Endpoint>(
    provider: &dyn Provider,
    req: E::Request,
    streaming: bool,
    masker: Option<Arc<Masker>>,
) -> Result<Answer<E>, AdapterError> {
    if !streaming {
        return masking::call_whole(req, provider, masker)
            .await
            .map(Answer::Whole);
    }
    let mut chunks = masking::call_stream(req, provider, masker).await?;
    let mut read_ahead = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk?;
        let has_output = chunk.has_output();
        read_ahead.push(chunk);
        if has_output {
            break;
        }
    }
    let replay = futures_util::stream::iter(read_ahead.into_iter().map(Ok));
    Ok(Answer::Stream(replay.chain(chunks).boxed()))
}

/// Starts the hedge's leg, if its breaker, the caller's budgets, the hedge
/// allowance and the backend's capacity all allow.
async fn hedge_leg(
    app: &App,
    context: &Arc<RequestContext>,
    size: Size,
    backend_index: usize,
    cap: Option<f64>,
) -> Option<Leg> {
    // The allowance first (nothing is admitted for a hedge it cannot
    // afford), given back if the hedge does not start after all.
    let worst = worst_cost(app, backend_index, size);
    let allowance = match (&context.caller, cap) {
        (Some(Caller { key, .. }), Some(cap)) => {
            if !app.hedges.take(&key.name, worst, cap) {
                return None;
            }
            Some(key.name.as_str())
        }
        _ => None,
    };
    let admitted = admit_call(
        app,
        context.caller.as_ref(),
        backend_index,
        (
            size,
            &context.shape(app, backend_index),
            Class::of_request(
                context
                    .profile
                    .and_then(switchyard_policies::Profile::from_name),
                context.batch.is_some(),
            ),
        ),
        context.prefix.as_ref(),
        context.tenant,
    )
    .await;
    let Ok((reservation, admission)) = admitted else {
        if let Some(key) = allowance {
            app.hedges.adjust(key, -worst);
        }
        return None;
    };
    let mut record = RequestRecord::new(
        app,
        context.clone(),
        backend_index,
        switchyard_router::Reason::Hedge,
        reservation,
        &admission,
        None,
    );
    record.hedged();
    Some(Leg {
        backend: backend_index,
        record,
        admission,
    })
}

/// Runs the primary leg, hedging with `hedge_backend` (`hedge_req` prepared
/// for it) if it has not produced output by its p90 first-token time. Returns the answer and the leg that
/// gave it (or the primary's failure).
#[allow(clippy::too_many_arguments)]
pub async fn race<E: Endpoint>(
    app: &App,
    context: &Arc<RequestContext>,
    size: Size,
    mut primary: Leg,
    primary_req: E::Request,
    hedge_backend: usize,
    (mut hedge_req, hedge_tier): (E::Request, Option<SentTier>),
    streaming: bool,
    cap: Option<f64>,
) -> (Result<Answer<E>, AdapterError>, Leg) {
    let predicted = app
        .router
        .latency()
        .predict(primary.backend, &context.shape(app, primary.backend));
    // A stream is late when its first token is; a whole answer only when
    // the whole of it is (its first token is not seen). The primary holds
    // its slot already, so the wait the prediction counts (itself among
    // the work ahead) is not part of its time.
    let deadline_ms = if streaming {
        predicted.ttft_p90_ms
    } else {
        predicted.total_p90_ms
    } - predicted.queue_ms;
    let delay = Duration::from_secs_f64(deadline_ms.max(0.0) / 1000.0).max(MIN_DELAY);
    let primary_backend = primary.admission.provider.clone();
    let first = with_trace_context(
        primary.record.trace_context(),
        until_output::<E>(
            &*primary_backend,
            primary_req,
            streaming,
            masking::for_backend(app, context, primary.backend),
        ),
    );
    tokio::pin!(first);
    tokio::select! {
        answer = &mut first => return (answer, primary),
        () = tokio::time::sleep(delay) => {}
    }
    let Some(mut hedge) = hedge_leg(app, context, size, hedge_backend, cap).await else {
        return (first.await, primary);
    };
    hedge.record.sent_tier(hedge_tier);
    primary.record.hedged();
    if streaming {
        hedge_req.request_stream_usage();
    }
    tracing::info!(primary = %app.backends[primary.backend].name, hedge = %app.backends[hedge_backend].name, ?delay, "hedging");
    let hedge_provider = hedge.admission.provider.clone();
    let second = with_trace_context(
        hedge.record.trace_context(),
        until_output::<E>(
            &*hedge_provider,
            hedge_req,
            streaming,
            masking::for_backend(app, context, hedge_backend),
        ),
    );
    tokio::pin!(second);
    // The leg that did not serve: cancelled when the other answered first,
    // or failed, which its record says as for any failed call (its breaker
    // counts it; it is billed for what it consumed).
    let (answer, winner, (mut loser, failure)) = tokio::select! {
        answer = &mut first => match answer {
            Ok(answer) => (Ok(answer), primary, (hedge, None)),
            // The primary failed: the hedge is all there is.
            Err(err) => ((&mut second).await, hedge, (primary, Some(err))),
        },
        answer = &mut second => match answer {
            Ok(answer) => (Ok(answer), hedge, (primary, None)),
            Err(err) => ((&mut first).await, primary, (hedge, Some(err))),
        },
    };
    match failure {
        Some(err) => loser.record.failed(&GatewayError::from(err)),
        None => loser.record.finish("hedge-lost"),
    }
    // In strict mode a ledger that cannot commit fails the request when
    // the winner's row is written; the loser's is logged by the writer.
    let _ = loser.record.write().await;
    (answer, winner)
}
