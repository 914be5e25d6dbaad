//! Getting finished spans to the collector without the requests noticing:
//! a bounded queue that drops (and counts) rather than waits, drained by a
//! task of its own that batches spans for the OTLP exporter, still off the
//! request path.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use opentelemetry::Context;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::{mpsc, oneshot};

/// Spans sent in one export at most.
const BATCH: usize = 512;
/// How long a span may wait for others to share its export.
const LINGER: Duration = Duration::from_millis(200);

/// What became of the spans: read by `/metrics`.
#[derive(Debug, Default)]
pub struct ExportStats {
    pub exported: AtomicU64,
    /// Dropped because the queue was full (the collector is slow or away).
    pub dropped: AtomicU64,
    /// Lost in exports that failed after the exporter's own retries.
    pub failed: AtomicU64,
}

enum Message {
    Span(Box<SpanData>),
    /// Export what is queued, then answer.
    Flush(oneshot::Sender<()>),
}

/// A span processor whose `on_end` never blocks.
#[derive(Clone)]
pub struct QueueProcessor {
    queue: mpsc::Sender<Message>,
    stats: Arc<ExportStats>,
}

impl fmt::Debug for QueueProcessor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueProcessor").finish_non_exhaustive()
    }
}

impl QueueProcessor {
    /// A processor holding up to `capacity` spans, exporting with
    /// `exporter` from a task on the current runtime.
    pub fn start<E: SpanExporter + 'static>(
        exporter: E,
        capacity: usize,
        stats: Arc<ExportStats>,
    ) -> Self {
        let (queue, received) = mpsc::channel(capacity);
        tokio::spawn(drain(exporter, received, stats.clone()));
        QueueProcessor { queue, stats }
    }

    /// Exports every span queued so far; waits at most `timeout`.
    pub async fn flush(&self, timeout: Duration) {
        let (done, wait) = oneshot::channel();
        if self.queue.send(Message::Flush(done)).await.is_ok() {
            let _ = tokio::time::timeout(timeout, wait).await;
        }
    }
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if self.queue.try_send(Message::Span(Box::new(span))).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        // The SDK's flush is synchronous; the gateway flushes with
        // `flush` (async) at shutdown instead.
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

async fn drain<E: SpanExporter>(
    exporter: E,
    mut received: mpsc::Receiver<Message>,
    stats: Arc<ExportStats>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while let Some(first) = received.recv().await {
        let mut flushed = Vec::new();
        let take = |message, batch: &mut Vec<SpanData>, flushed: &mut Vec<_>| match message {
            Message::Span(span) => batch.push(*span),
            Message::Flush(done) => flushed.push(done),
        };
        take(first, &mut batch, &mut flushed);
        let deadline = tokio::time::Instant::now() + LINGER;
        while batch.len() < BATCH && flushed.is_empty() {
            match tokio::time::timeout_at(deadline, received.recv()).await {
                Ok(Some(message)) => take(message, &mut batch, &mut flushed),
                Ok(None) | Err(_) => break,
            }
        }
        // A flush takes everything queued before it.
        while !flushed.is_empty()
            && let Ok(message) = received.try_recv()
        {
            take(message, &mut batch, &mut flushed);
        }
        let spans = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
        let count = spans.len() as u64;
        if count > 0 {
            match exporter.export(spans).await {
                Ok(()) => stats.exported.fetch_add(count, Ordering::Relaxed),
                Err(err) => {
                    tracing::warn!(error = %err, spans = count, "trace export failed");
                    stats.failed.fetch_add(count, Ordering::Relaxed)
                }
            };
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// Sends each batch as one OTLP/HTTP protobuf request, written by
/// [`crate::telemetry::otlp`], with the gateway's own hyper client (rustls
/// for https), within one deadline per export. A collector that is busy
/// (429, 502, 503, 504) or cannot be reached is tried twice more; any other
/// non-2xx answer, or an answer cut short, fails the export.
pub struct OtlpExporter {
    pub http: switchyard_adapters::upstream::HttpClient,
    pub timeout: Duration,
    /// The traces URL (`.../v1/traces`).
    pub url: http::Uri,
    /// Sent with every export: the config's and the environment's.
    pub headers: http::HeaderMap,
    pub resource: Resource,
}

impl fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Headers are left out: they may hold a collector's credentials.
        f.debug_struct("OtlpExporter")
            .field("url", &self.url)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Waits before the second and third tries of an export the collector
/// could not take (429, 502, 503, 504, or no connection), as the OTLP
/// specification asks of exporters; a `Retry-After` in seconds is waited
/// instead. Every try and wait fits in the export's one deadline.
const RETRY_AFTER: [Duration; 2] = [Duration::from_millis(250), Duration::from_secs(1)];

/// One try's outcome: done, or why not and whether another try may help
/// (and after how long the collector asked for).
enum Tried {
    Done,
    Failed(OTelSdkError),
    Retry(OTelSdkError, Option<Duration>),
}

impl SpanExporter for OtlpExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let body = Bytes::from(crate::telemetry::otlp::export_request(
            &batch,
            &self.resource,
        ));
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut waits = RETRY_AFTER.iter();
        loop {
            let tried = tokio::time::timeout_at(deadline, self.send(body.clone()))
                .await
                .unwrap_or(Tried::Failed(OTelSdkError::Timeout(self.timeout)));
            let (err, asked) = match tried {
                Tried::Done => return Ok(()),
                Tried::Failed(err) => return Err(err),
                Tried::Retry(err, asked) => (err, asked),
            };
            let Some(wait) = waits.next().map(|w| asked.unwrap_or(*w)) else {
                return Err(err);
            };
            if tokio::time::Instant::now() + wait >= deadline {
                return Err(err);
            }
            tokio::time::sleep(wait).await;
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.clone();
    }
}

impl OtlpExporter {
    /// One try.
    async fn send(&self, body: Bytes) -> Tried {
        let request = Request::builder()
            .method(http::Method::POST)
            .uri(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/x-protobuf")
            .body(Full::new(body));
        let mut request = match request {
            Ok(request) => request,
            Err(err) => return Tried::Failed(OTelSdkError::InternalFailure(err.to_string())),
        };
        request.headers_mut().extend(self.headers.clone());
        let response = match self.http.request(request).await {
            Ok(response) => response,
            // Nothing reached the collector: another try may.
            Err(err) if err.is_connect() => {
                return Tried::Retry(OTelSdkError::InternalFailure(err.to_string()), None);
            }
            Err(err) => return Tried::Failed(OTelSdkError::InternalFailure(err.to_string())),
        };
        let status = response.status();
        let asked = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Read to the end, so the connection is kept for the next one; the
        // status is the answer either way.
        let _ = response.into_body().collect().await;
        let err = || OTelSdkError::InternalFailure(format!("the collector answered {status}"));
        match status.as_u16() {
            _ if status.is_success() => Tried::Done,
            429 | 502 | 503 | 504 => Tried::Retry(err(), asked),
            _ => Tried::Failed(err()),
        }
    }
}
