//! Getting finished spans to the collector without the requests noticing:
//! a bounded queue that drops (and counts) rather than waits, drained by a
//! task of its own that batches spans for the OTLP exporter (which retries
//! a busy or unreachable collector itself, still off the request path).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use opentelemetry::Context;
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

/// The exporter's HTTP client: the gateway's own hyper client (rustls for
/// https), with a deadline per export since the exporter sets none.
pub struct OtlpClient {
    pub http: switchyard_adapters::upstream::HttpClient,
    pub timeout: Duration,
}

impl fmt::Debug for OtlpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OtlpClient")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for OtlpClient {
    async fn send_bytes(
        &self,
        request: Request<Bytes>,
    ) -> Result<Response<Bytes>, opentelemetry_http::HttpError> {
        let (parts, body) = request.into_parts();
        let request = Request::from_parts(parts, Full::new(body));
        let exchange = async {
            let response = self.http.request(request).await?;
            let (parts, body) = response.into_parts();
            let body = body.collect().await?.to_bytes();
            Ok::<_, opentelemetry_http::HttpError>(Response::from_parts(parts, body))
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| OTelSdkError::Timeout(self.timeout))?
    }
}
