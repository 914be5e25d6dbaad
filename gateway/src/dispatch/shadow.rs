//! Shadow traffic: a sampled copy of a route's request goes to the route's
//! candidate backend once the caller's own call is on its way. The copy
//! runs in a task of its own, on the lane's own turns (never the caller's
//! slots), is priced and written to the ledger as a `shadow` row under the
//! request's id, beside how its answer compared with the served one. The
//! caller's answer, latency and receipts never wait for it; nothing of it
//! reaches the caller's budgets or rate limits.

use std::sync::Arc;

use switchyard_adapters::types::{CanonicalRequest, CanonicalResponse};
use switchyard_router::{Decision, Reason};
use tokio::sync::oneshot;

use crate::admit::admission::{Size, worst_cost};
use crate::dispatch::attempts::{Shared, collect, held_answer_limits, prepared, record_whole};
use crate::dispatch::endpoint::{Call, Endpoint};
use crate::dispatch::shadow_lanes::Ticket;
use crate::error::GatewayError;
use crate::ledger::Shadowed;
use crate::settle::agreement;
use crate::settle::context::{RequestContext, ServedTap};
use crate::settle::record::RequestRecord;
use crate::state::app::App;

/// How long a copy waits, after its own call, for the served answer to
/// compare with (a served stream may still be going).
const SERVED_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// Sends a copy of the request to the route's candidate, if the route has
/// one and samples this request; `served_backend` is the backend the
/// caller's call went to (a request the candidate serves itself has
/// nothing to be compared with).
pub(crate) fn offer<E: Endpoint>(
    app: &App,
    decision: &Decision,
    served_backend: usize,
    request: &Arc<Shared<E>>,
    context: &RequestContext,
) {
    let Some(route) = decision.route else {
        return;
    };
    let Some(lane) = app.shadows.lane(route) else {
        return;
    };
    let candidate = lane.candidate;
    let provider = &app.backends[candidate].replicas[0].provider;
    if candidate == served_backend
        || !E::Request::served_by(&**provider)
        || !lane.samples(context.use_case)
    {
        return;
    }
    let Some(owner) = app.shared() else {
        return;
    };
    let ticket = match app.shadows.take(
        route,
        worst_cost(app, candidate, Size::of(&decision.features)),
    ) {
        Ok(ticket) => ticket,
        Err(why) => {
            app.metrics
                .shadow_copies(&lane.route, &lane.candidate_name, why, 1);
            return;
        }
    };
    let (tap, served) = oneshot::channel();
    if context.shadow_tap.set(ServedTap::new(tap)).is_err() {
        // Already copied (a request is offered once, on its first call).
        return;
    }
    let copy = Copy {
        route,
        candidate,
        decision: decision.clone(),
        context: context.for_shadow(),
        ticket,
    };
    app.shadows
        .spawn(Box::pin(run::<E>(owner, copy, request.clone(), served)));
}

/// One copy, taken from its lane.
struct Copy {
    route: usize,
    candidate: usize,
    decision: Decision,
    context: Arc<RequestContext>,
    ticket: Ticket,
}

/// Calls the candidate as the caller's call was made (streamed or whole),
/// then waits for the served answer and writes the copy's row with how the
/// two compared.
async fn run<E: Endpoint>(
    app: Arc<App>,
    mut copy: Copy,
    request: Arc<Shared<E>>,
    served: oneshot::Receiver<Option<String>>,
) {
    let Some(turn) = copy.ticket.turn().await else {
        return;
    };
    let lane = app.shadows.lane(copy.route);
    if let Some(lane) = lane {
        app.metrics
            .shadow_copies(&lane.route, &lane.candidate_name, "sent", 1);
    }
    // The record starts now: its times are the candidate's, not the wait
    // for a turn.
    let mut record = RequestRecord::blank(&app, copy.context, copy.candidate, Reason::Shadow);
    record.shadow = Some(Shadowed::default());
    let (req, tier) = prepared::<E>(
        &app,
        &copy.decision,
        copy.candidate,
        request.0.clone(),
        None,
    );
    record.sent_tier(tier);
    let answer = call::<E>(&app, copy.candidate, &mut record, req).await;
    drop(turn);
    copy.ticket.called();
    let text = match answer {
        Ok(text) => {
            record.finish("ok");
            text
        }
        Err(err) => {
            record.finish(err.kind());
            None
        }
    };
    let served = tokio::time::timeout(SERVED_WAIT, served)
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
    record.shadow = Some(agreement::compare(served.as_deref(), text.as_deref()));
    let Some(row) = record.take_row() else {
        return;
    };
    app.shadows
        .settle(copy.route, copy.ticket.reserved_usd, row.cost_usd);
    // A row the ledger could not take is logged by its writer.
    let _ = app.ledger.write(row).await;
}

/// The candidate's answer as text (`None`: too long to keep whole), its
/// usage and times noted in `record`.
async fn call<E: Endpoint>(
    app: &App,
    candidate: usize,
    record: &mut RequestRecord,
    mut req: E::Request,
) -> Result<Option<String>, GatewayError> {
    let provider = app.backends[candidate].replicas[0].provider.clone();
    let limits = held_answer_limits(app, candidate);
    if req.is_stream() {
        req.request_stream_usage();
        let chunks = req.call_stream(&*provider).await?;
        collect::<E>(chunks, record, limits).await?;
        return Ok((record.output.counted == 0).then(|| record.output.text.clone()));
    }
    let resp = tokio::time::timeout(limits.0, req.call(&*provider))
        .await
        .map_err(|_| {
            GatewayError::from(switchyard_adapters::AdapterError::Timeout {
                phase: switchyard_adapters::TimeoutPhase::FirstByte,
                after: limits.0,
            })
        })??;
    record.whole_answer();
    record_whole::<E>(record, &resp);
    Ok(Some(resp.output_text()))
}
