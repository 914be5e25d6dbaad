//! The batch runner: one task for the process, which runs the pending
//! lines of every batch in progress (oldest batch first, at most
//! `batches.lines_in_flight` at once) down the same pipeline as a caller's
//! request, under the `batch` profile unless the line's route names its
//! own, and as the key that created the batch. Each answer is stored with
//! its line as it comes, so a restart runs only the lines not yet
//! answered. A line the gateway had no room for (503, 429) waits for a
//! later turn; any other answer is final. When no line is left, the batch's
//! output and error files are written and it is completed (or cancelled,
//! or expired).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::{HeaderValue, Method, Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;

use crate::batch::api::blocking;
use crate::batch::store::{BatchRow, FileRow, Pending};
use crate::batch::{Batches, new_id, now_s};
use crate::dispatch::pipeline::serve_body;
use crate::error::{Dialect, GatewayError};
use crate::ingress::{chat, completions, embeddings, responses};
use crate::state::app::App;
use crate::state::live::Live;

/// How often the runner looks again without being woken (for expiry, and
/// lines waiting for room).
const TICK: Duration = Duration::from_millis(500);

/// How often a runner with nothing to run looks at a store that replicas
/// share: a batch made on another replica waits at most this long for the
/// runner holding the lease, and a replica taking over from one that
/// stopped does so within it.
const SHARED_LOOK: Duration = Duration::from_secs(2);

/// The lines running now, by batch.
type Running = Arc<Mutex<HashMap<String, HashSet<u64>>>>;

/// The lines this process runs: which, and their tasks (stopped together
/// when the runner's lease is lost).
#[derive(Default)]
struct Lines {
    running: Running,
    tasks: JoinSet<()>,
}

/// Starts the runner for the process.
pub fn spawn(live: Arc<Live>) {
    tokio::spawn(run(live));
}

async fn run(live: Arc<Live>) {
    let mut lines = Lines::default();
    let mut slots: Option<Arc<Semaphore>> = None;
    loop {
        let app = live.app();
        let Some(batches) = app.batches.clone() else {
            tokio::time::sleep(TICK).await;
            continue;
        };
        // The store's settings are the process's (a reload keeps them).
        let slots = slots
            .get_or_insert_with(|| Arc::new(Semaphore::new(batches.settings.lines_in_flight)))
            .clone();
        // Ended tasks are reaped (their lines unmarked themselves).
        while lines.tasks.try_join_next().is_some() {}
        let unfinished = turn(&app, &batches, &slots, &mut lines)
            .await
            .unwrap_or_else(|err| {
                tracing::error!(error = ?err, "batch runner");
                true
            });
        // With no batch under way only a new one (or a cancel) wakes it: an
        // idle gateway does not read the store twice a second. A store
        // replicas share is looked at now and then, for batches made on
        // the others (or left by a runner that stopped).
        if unfinished {
            tokio::select! {
                () = batches.wake.notified() => {}
                () = tokio::time::sleep(TICK) => {}
            }
        } else if batches.store.shared() {
            tokio::select! {
                () = batches.wake.notified() => {}
                () = tokio::time::sleep(SHARED_LOOK) => {}
            }
        } else {
            batches.wake.notified().await;
        }
    }
}

/// One look at every unfinished batch, oldest first: lines started where
/// there is room, and batches with nothing left to run ended. A batch whose
/// store call fails is passed over this turn (and logged); the others go
/// on. Says whether any batch was unfinished; a process another holds the
/// runner's lease from (a replica, on a shared store) runs nothing.
async fn turn(
    app: &Arc<App>,
    batches: &Arc<Batches>,
    slots: &Arc<Semaphore>,
    lines: &mut Lines,
) -> Result<bool, GatewayError> {
    let lease = blocking(batches.store.clone(), |s| s.runner_lease()).await;
    if !matches!(lease, Ok(true)) {
        // Another replica may take the lease and run these lines: they stop
        // here, and stay pending for whoever runs them next.
        if !lines.tasks.is_empty() {
            tracing::warn!(
                lines = lines.tasks.len(),
                "batch runner: the lease is lost; the lines running here are stopped"
            );
            lines.tasks.abort_all();
        }
        return lease.map(|_| false);
    }
    let unfinished = blocking(batches.store.clone(), |s| s.unfinished()).await?;
    for batch in &unfinished {
        if let Err(err) = look_at(app, batches, slots, lines, batch).await {
            tracing::error!(batch = %batch.id, error = ?err, "batch runner");
        }
    }
    Ok(!unfinished.is_empty())
}

async fn look_at(
    app: &Arc<App>,
    batches: &Arc<Batches>,
    slots: &Arc<Semaphore>,
    lines: &mut Lines,
    batch: &BatchRow,
) -> Result<(), GatewayError> {
    let store = batches.store.clone();
    let running_now: Vec<u64> = lock(&lines.running)
        .get(&batch.id)
        .map(|lines| lines.iter().copied().collect())
        .unwrap_or_default();
    #[allow(clippy::collapsible_match)] // the expiry arm must not fall through to starting lines
    match batch.status.as_str() {
        // Past its window: no new line starts, and once those running are
        // answered the rest fail as expired.
        "in_progress" if now_s() >= batch.expires_at => {
            if running_now.is_empty() {
                finish(batches, batch, "expired").await?;
            }
        }
        "in_progress" => {
            let free = slots.available_permits();
            let (id, taken) = (batch.id.clone(), running_now.clone());
            let pending = if free == 0 {
                Vec::new()
            } else {
                blocking(store.clone(), move |s| s.pending_lines(&id, &taken, free)).await?
            };
            if pending.is_empty() && running_now.is_empty() {
                let id = batch.id.clone();
                if !blocking(store, move |s| s.has_pending(&id)).await? {
                    finish(batches, batch, "completed").await?;
                }
            }
            for line in pending {
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    break;
                };
                let guard = RunningLine::start(&lines.running, &batch.id, line.line);
                lines.tasks.spawn(run_line(
                    (app.clone(), batches.clone()),
                    batch.clone(),
                    line,
                    (permit, guard),
                ));
            }
        }
        // Ended once the lines running are answered.
        "cancelling" if running_now.is_empty() => finish(batches, batch, "cancelled").await?,
        _ => {}
    }
    Ok(())
}

/// A line marked running until dropped, however its task ends (a panic
/// included): a line left marked would never be run again, and its batch
/// never end.
struct RunningLine {
    running: Running,
    batch: String,
    line: u64,
}

impl RunningLine {
    fn start(running: &Running, batch: &str, line: u64) -> Self {
        lock(running)
            .entry(batch.to_owned())
            .or_default()
            .insert(line);
        RunningLine {
            running: running.clone(),
            batch: batch.to_owned(),
            line,
        }
    }
}

impl Drop for RunningLine {
    fn drop(&mut self) {
        let mut running = lock(&self.running);
        if let Some(lines) = running.get_mut(&self.batch) {
            lines.remove(&self.line);
            if lines.is_empty() {
                running.remove(&self.batch);
            }
        }
    }
}

fn lock(running: &Running) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<u64>>> {
    running.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one line and stores its answer (or leaves it pending, when the
/// gateway had no room for it).
async fn run_line(
    (app, batches): (Arc<App>, Arc<Batches>),
    batch: BatchRow,
    line: Pending,
    (permit, running): (OwnedSemaphorePermit, RunningLine),
) {
    let request_id = new_id("batch_req_");
    let stored = match answer(&app, &batch, &line, &request_id).await {
        Some((status, body)) => {
            let ok = status.is_success();
            let result = json!({
                "id": request_id, "custom_id": line.custom_id,
                "response": {"status_code": status.as_u16(), "request_id": request_id, "body": body},
                "error": null,
            })
            .to_string();
            let (id, number) = (batch.id.clone(), line.line);
            blocking(batches.store.clone(), move |s| {
                s.finish_line(&id, number, ok, &result)
            })
            .await
            .is_ok()
        }
        None => {
            // No room now: a later turn runs it again.
            tokio::time::sleep(TICK).await;
            false
        }
    };
    drop(running);
    drop(permit);
    if stored {
        batches.wake.notify_one();
    }
}

/// A line's answer: its status and body, or `None` when the gateway had
/// no room for it (it is tried again later).
async fn answer(
    app: &App,
    batch: &BatchRow,
    line: &Pending,
    request_id: &str,
) -> Option<(StatusCode, Value)> {
    let body = line.body.as_bytes();
    let served = match line_parts(app, batch, line, request_id) {
        Err(err) => Err(err),
        Ok(parts) => match batch.endpoint.as_str() {
            "/v1/responses" => Box::pin(responses::serve_body(app, parts, body)).await,
            "/v1/chat/completions" => Box::pin(serve_body::<chat::Chat>(app, parts, body)).await,
            "/v1/completions" => {
                Box::pin(serve_body::<completions::Completions>(app, parts, body)).await
            }
            _ => Box::pin(serve_body::<embeddings::Embeddings>(app, parts, body)).await,
        },
    };
    // A refusal is answered as a caller would get it.
    let response = served.unwrap_or_else(|err| err.into_response_for(Dialect::OpenAi));
    let status = response.status();
    let bytes = response.into_body().collect().await.ok()?.to_bytes();
    let body: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| json!({"error": {"message": "the answer was not JSON"}}));
    // No room for it now (a full queue, a rate limit): tried again later.
    // Any other answer, a spent budget's 429 included, is final.
    let code = body["error"]["code"].as_str();
    if matches!(code, Some("overloaded" | "rate_limit_exceeded")) {
        return None;
    }
    Some((status, body))
}

/// The request a line makes: its endpoint, the `batch` profile unless its
/// route names one (its place in backends' queues is batch's either way:
/// the batch id says so), the batch's key, an id of its own, and its
/// batch's id for its ledger rows.
fn line_parts(
    app: &App,
    batch: &BatchRow,
    line: &Pending,
    request_id: &str,
) -> Result<http::request::Parts, GatewayError> {
    let model = serde_json::from_str::<Value>(&line.body)
        .ok()
        .and_then(|b| b["model"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let route_profile = app
        .route_of(&model)
        .and_then(|route| app.config.routes.get(&*route).and_then(|r| r.profile));
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(batch.endpoint.as_str())
        .header(http::header::CONTENT_TYPE, "application/json");
    if route_profile.is_none() {
        request = request.header("x-switchyard-profile", "batch");
    }
    if let Ok(id) = HeaderValue::from_str(request_id) {
        request = request.header(crate::http::request_id::REQUEST_ID, id);
    }
    let (mut parts, ()) = request
        .body(())
        .map_err(|e| GatewayError::Internal {
            message: e.to_string(),
        })?
        .into_parts();
    parts
        .extensions
        .insert(crate::ledger::BatchId(Arc::from(batch.id.as_str())));
    if !batch.owner.is_empty() {
        let caller =
            app.keys
                .caller_named(&batch.owner)
                .ok_or_else(|| GatewayError::Unauthorized {
                    message: format!(
                        "the key `{}` that created the batch is gone or has expired",
                        batch.owner
                    ),
                })?;
        parts.extensions.insert(caller);
    }
    Ok(parts)
}

/// Ends a batch as `status`: lines never run fail (`batch_cancelled`,
/// `batch_expired`), then its output and error files are written.
async fn finish(
    batches: &Batches,
    batch: &BatchRow,
    status: &'static str,
) -> Result<(), GatewayError> {
    let id = batch.id.clone();
    let code = (status != "completed").then(|| format!("batch_{status}"));
    let (done, failed) = blocking(batches.store.clone(), move |s| {
        if let Some(code) = code {
            s.fail_pending(&id, &code)?;
        }
        s.results(&id)
    })
    .await?;
    let now = now_s();
    let file = |kind: &str, lines: Vec<String>| {
        (!lines.is_empty()).then(|| {
            let mut content = lines.join("\n").into_bytes();
            content.push(b'\n');
            (
                FileRow {
                    id: new_id("file-"),
                    owner: batch.owner.clone(),
                    purpose: "batch_output".into(),
                    filename: format!("{}_{kind}.jsonl", batch.id),
                    bytes: content.len() as u64,
                    created_at: now,
                },
                content,
            )
        })
    };
    let files = [file("output", done), file("error", failed)];
    let batch = batch.clone();
    let ended = batch.id.clone();
    let finished = blocking(batches.store.clone(), move |s| {
        s.finish_batch(&batch, files, status, now)
    })
    .await?;
    // Not finished: its status moved meanwhile (a cancel); the next turn
    // ends it as that.
    if finished {
        tracing::info!(batch = %ended, status, "batch ended");
    }
    Ok(())
}
