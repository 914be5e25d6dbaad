//! Shadow traffic: a sampled copy of a route's request goes to the route's
//! candidate backend once the caller's own call is on its way. The copy
//! runs in a task of its own, on the lane's own turns (never the caller's
//! slots), is priced and written to the ledger as a `shadow` row under the
//! request's id, beside how its answer compared with the served one. The
//! caller's answer, latency and receipts never wait for it; nothing of it
//! reaches the caller's budgets or rate limits.

use std::sync::Arc;

use switchyard_adapters::AdapterError;
use switchyard_adapters::types::{CanonicalRequest, CanonicalResponse};
use switchyard_router::{Decision, Reason};
use tokio::sync::oneshot;

use crate::admit::admission::{Size, worst_cost};
use crate::dispatch::attempts::{Shared, backoff, call, prepared, record_whole};
use crate::dispatch::endpoint::{Answer, Call, Endpoint};
use crate::dispatch::plan::Mode;
use crate::dispatch::shadow_lanes::Ticket;
use crate::error::GatewayError;
use crate::ledger::{LedgerRow, Shadowed};
use crate::settle::agreement;
use crate::settle::context::{RequestContext, ServedTap};
use crate::settle::record::RequestRecord;
use crate::state::app::App;

/// How long a copy waits, after its own call, for the served answer to
/// compare with (a served stream may still be going). It holds the `App`
/// it started with meanwhile, after a reload too.
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
    let candidate = &app.backends[lane.candidate];
    if lane.candidate == served_backend
        // Sensitive data kept local is never copied out.
        || (decision.local_only && !candidate.local)
        || context.shadow_tap.get().is_some()
        || !E::Request::served_by(&*candidate.replicas[0].provider)
        || !lane.samples(context.use_case)
    {
        return;
    }
    let Some(owner) = app.shared() else {
        return;
    };
    // An open breaker keeps copies off a failing candidate, as it keeps
    // requests off it.
    let taken = if candidate.breaker.state() == "open" {
        Err("breaker_open")
    } else {
        let worst = worst_cost(app, lane.candidate, Size::of_decision(decision));
        app.shadows.take(lane, worst)
    };
    let ticket = match taken {
        Ok(ticket) => ticket,
        Err(why) => {
            app.metrics
                .shadow_copies(&lane.route, &lane.candidate_name, why, 1);
            return;
        }
    };
    let (tap, served) = oneshot::channel();
    // Not set before (checked above, and a request's calls are tried one
    // at a time).
    let _ = context.shadow_tap.set(ServedTap::new(tap));
    let copy = Copy {
        route,
        candidate: lane.candidate,
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

/// A copy's row between its call and the comparison: written as it is
/// (without the comparison) if the copy is cut off while it waits.
struct PendingRow {
    row: Option<LedgerRow>,
    ledger: Arc<crate::ledger::Ledger>,
}

impl Drop for PendingRow {
    fn drop(&mut self) {
        if let Some(row) = self.row.take() {
            self.ledger.write_detached(row);
        }
    }
}

/// Calls the candidate as the caller's call was made (streamed or whole)
/// and makes its row from the call alone (its times and cost are the
/// candidate's, not the wait after); then waits for the served answer and
/// writes the row with how the two compared.
async fn run<E: Endpoint>(
    app: Arc<App>,
    mut copy: Copy,
    request: Arc<Shared<E>>,
    served: oneshot::Receiver<Option<String>>,
) {
    let Some(turn) = copy.ticket.turn().await else {
        return;
    };
    let Some(lane) = app.shadows.lane(copy.route) else {
        return;
    };
    app.metrics
        .shadow_copies(&lane.route, &lane.candidate_name, "sent", 1);
    // The record starts now: its times are the candidate's, not the wait
    // for a turn. The candidate's hardware is shared with the calls in
    // flight on it and the lane's other copies.
    let mut record = RequestRecord::blank(&app, copy.context, copy.candidate, Reason::Shadow);
    record.shadow = Some(Shadowed::default());
    let in_flight = app.backends[copy.candidate]
        .in_flight
        .load(std::sync::atomic::Ordering::Acquire);
    record.sharing = in_flight + u32::try_from(lane.running_now()).unwrap_or(u32::MAX);
    let (req, tier) = prepared::<E>(
        &app,
        &copy.decision,
        copy.candidate,
        request.0.clone(),
        None,
    );
    record.sent_tier(tier);
    let retries = app.router.retries(Some(copy.route));
    let answer = call_with_retries::<E>(&app, (copy.candidate, retries), &mut record, req).await;
    drop(turn);
    copy.ticket.called();
    let text = match answer {
        Ok(text) => {
            record.finish("ok");
            text
        }
        Err(err) => {
            record.failed(&err);
            None
        }
    };
    let Some(row) = record.take_row() else {
        return;
    };
    app.shadows
        .settle(copy.route, copy.ticket.reserved_usd, row.cost_usd);
    let mut pending = PendingRow {
        row: Some(row),
        ledger: app.ledger.clone(),
    };
    let served = tokio::time::timeout(SERVED_WAIT, served)
        .await
        .ok()
        .and_then(Result::ok)
        .flatten();
    // Answers without text (embeddings) have nothing to compare.
    let compared = match (E::CHECKED_BY_CASCADES, served, text) {
        (true, Some(served), Some(text)) => {
            tokio::task::spawn_blocking(move || agreement::compare(Some(&served), Some(&text)))
                .await
                .unwrap_or_default()
        }
        _ => Shadowed::default(),
    };
    if let Some(row) = pending.row.as_mut() {
        row.shadow = Some(compared);
    }
    // Written by the ledger's own writer, which a shutdown waits for.
    drop(pending);
}
/// The candidate's answer as text (`None`: too long to keep whole), its
/// usage and times noted in `record`. A failure before any output that the
/// route would retry is retried as often as the route retries (a server
/// closing an idle pooled connection is not the candidate's fault).
async fn call_with_retries<E: Endpoint>(
    app: &App,
    (candidate, retries): (usize, u32),
    record: &mut RequestRecord,
    req: E::Request,
) -> Result<Option<String>, GatewayError> {
    let mut attempt = 0;
    loop {
        match call_once::<E>(app, candidate, record, req.clone()).await {
            Err(err) if err.retryable() && !record.generated_any() && attempt < retries => {
                attempt += 1;
                tokio::time::sleep(backoff(attempt)).await;
            }
            result => return result.map_err(GatewayError::from),
        }
    }
}

async fn call_once<E: Endpoint>(
    app: &App,
    candidate: usize,
    record: &mut RequestRecord,
    mut req: E::Request,
) -> Result<Option<String>, AdapterError> {
    let provider = app.backends[candidate].replicas[0].provider.clone();
    // A stream is read whole here (nobody is waiting for it), counted as
    // it is read, its first token timed.
    let mode = if req.is_stream() {
        req.request_stream_usage();
        Mode::Collected
    } else {
        Mode::Whole
    };
    match call::<E>(app, mode, (candidate, &*provider), record, req).await? {
        Answer::Whole(resp) => {
            record.whole_answer();
            record_whole::<E>(record, &resp);
            Ok(Some(resp.output_text()))
        }
        Answer::Collected(_) | Answer::Stream(_) => {
            Ok((record.output.counted == 0).then(|| record.output.text.clone()))
        }
    }
}
