//! One span per request, `request`, with its method, path and id: every
//! log line made while serving it, the answer's body included, is inside
//! the span. The lines tower-http's `TraceLayer` wrote, with the same
//! fields, stay: "started processing request", "finished processing
//! request" and "end of stream" at `debug`, and for a 5xx answer "response
//! failed" at `warn` (mostly a backend's failure, which the request's
//! record reports as such; it is not an error of the gateway's own).
//!
//! `TraceLayer` also read the clock twice for every frame of the answer's
//! body, for its `on_body_chunk` hook and its check of how the body ended,
//! neither of which the gateway uses: about 280 instructions an event of
//! a streamed answer. Here the clock is read when the call starts, when
//! its answer is ready, and at the body's end only if that line is logged.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tower::{Layer, Service};
use tracing::Span;

use crate::http::request_id::REQUEST_ID;

#[derive(Clone, Copy)]
pub struct RequestSpanLayer;

impl<S> Layer<S> for RequestSpanLayer {
    type Service = RequestSpan<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestSpan { inner }
    }
}

#[derive(Clone)]
pub struct RequestSpan<S> {
    inner: S,
}

impl<S, B, R> Service<Request<B>> for RequestSpan<S>
where
    S: Service<Request<B>, Response = Response<R>>,
{
    type Response = Response<InSpan<R>>;
    type Error = S::Error;
    type Future = Spanned<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The fields are read only when the span is on (logs at `info`).
        let span = tracing::info_span!(
            "request",
            method = %req.method(),
            path = %req.uri().path(),
            id = %req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("-")
        );
        let started = Instant::now();
        let inner = {
            let _in_span = span.enter();
            tracing::debug!("started processing request");
            self.inner.call(req)
        };
        Spanned {
            inner,
            span,
            started,
        }
    }
}

pin_project! {
    /// The inner service's future, polled inside the request's span; the
    /// answer's body goes on inside it.
    pub struct Spanned<F> {
        #[pin]
        inner: F,
        // Handed to the answer's body when the answer is ready (a
        // disabled span stays behind).
        span: Span,
        started: Instant,
    }
}

impl<F, R, E> Future for Spanned<F>
where
    F: Future<Output = Result<Response<R>, E>>,
{
    type Output = Result<Response<InSpan<R>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let polled = {
            let _in_span = this.span.enter();
            this.inner.poll(cx)
        };
        let response = match polled {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(result) => result?,
        };
        let span = std::mem::replace(this.span, Span::none());
        let ready_at = Instant::now();
        {
            let _in_span = span.enter();
            let status = response.status();
            // As tower-http wrote it: whole milliseconds, with the unit.
            let ms = ready_at.duration_since(*this.started).as_millis();
            tracing::debug!(latency = %format_args!("{ms} ms"), status = status.as_u16(), "finished processing request");
            if status.is_server_error() {
                tracing::warn!(
                    classification = %format_args!("Status code: {status}"),
                    latency = %format_args!("{ms} ms"),
                    "response failed"
                );
            }
        }
        Poll::Ready(Ok(response.map(|inner| InSpan {
            inner,
            span,
            stream_start: ready_at,
            ended: false,
        })))
    }
}

pin_project! {
    /// An answer's body, polled inside its request's span.
    pub struct InSpan<B> {
        #[pin]
        inner: B,
        span: Span,
        // When the answer was ready, for the line at the body's end.
        stream_start: Instant,
        ended: bool,
    }
}

impl<B: Body> Body for InSpan<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let _in_span = this.span.enter();
        let polled = this.inner.as_mut().poll_frame(cx);
        // As tower-http: at the last frame, or at the end of a body that
        // did not know its last frame was the last.
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Ready(Some(Err(_))) | Poll::Pending => false,
        };
        if ended && !*this.ended {
            *this.ended = true;
            // Inside the macro, the clock is read only if the line is logged.
            tracing::debug!(
                stream_duration = %format_args!("{} ms", this.stream_start.elapsed().as_millis()),
                "end of stream"
            );
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::sync::{Arc, Mutex};

    use http_body_util::BodyExt;

    use super::*;

    type Seen = Arc<Mutex<Vec<Option<&'static str>>>>;

    fn note_span(seen: &Seen) {
        let name = Span::current().metadata().map(|m| m.name());
        seen.lock().unwrap().push(name);
    }

    /// A body with no frames that notes the span it is polled in.
    struct Noting(Seen);

    impl Body for Noting {
        type Data = bytes::Bytes;
        type Error = Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<bytes::Bytes>, Infallible>>> {
            note_span(&self.0);
            Poll::Ready(None)
        }
    }

    #[test]
    fn the_call_its_future_and_its_body_run_inside_the_request_span() {
        let seen = Seen::default();
        let handler_seen = seen.clone();
        let mut service = RequestSpanLayer.layer(tower::service_fn(move |_req: Request<()>| {
            let seen = handler_seen.clone();
            note_span(&seen);
            async move {
                note_span(&seen);
                Ok::<_, Infallible>(Response::new(Noting(seen)))
            }
        }));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(tracing_subscriber::registry(), || {
            runtime.block_on(async {
                let request = Request::get("/v1/models")
                    .header(REQUEST_ID, "req-1")
                    .body(())
                    .unwrap();
                let response = service.call(request).await.unwrap();
                // Polled after the answer, outside any span of the caller's.
                assert!(Span::current().is_none());
                let _ = response.into_body().frame().await;
            });
        });
        assert_eq!(*seen.lock().unwrap(), [Some("request"); 3]);
    }
    /// Notes each event's level, message and other fields.
    type Noted = Vec<(tracing::Level, String, Vec<(String, String)>)>;
    struct Events(Arc<Mutex<Noted>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Events {
        fn on_event(
            &self,
            event: &tracing::Event<'_>,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            #[derive(Default)]
            struct Fields(String, Vec<(String, String)>);
            impl tracing::field::Visit for Fields {
                fn record_debug(
                    &mut self,
                    field: &tracing::field::Field,
                    value: &dyn std::fmt::Debug,
                ) {
                    let value = format!("{value:?}");
                    match field.name() {
                        "message" => self.0 = value,
                        name => self.1.push((name.to_owned(), value)),
                    }
                }
            }
            let mut fields = Fields::default();
            event.record(&mut fields);
            let level = *event.metadata().level();
            self.0.lock().unwrap().push((level, fields.0, fields.1));
        }
    }

    #[test]
    fn tower_https_lines_with_their_fields_and_a_5xx_at_warn() {
        use tracing_subscriber::layer::SubscriberExt;
        let events = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Events(events.clone()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            for status in [200, 502] {
                let mut service = RequestSpanLayer.layer(tower::service_fn(
                    move |_req: Request<()>| async move {
                        let mut response =
                            Response::new(http_body_util::Empty::<bytes::Bytes>::new());
                        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                        Ok::<_, Infallible>(response)
                    },
                ));
                let request = Request::get("/v1/models").body(()).unwrap();
                runtime.block_on(async {
                    let response = service.call(request).await.unwrap();
                    let _ = response.into_body().frame().await;
                });
            }
        });
        use tracing::Level;
        // Each field as `name=value`, a time without its number ("12 ms"
        // reads " ms").
        let fields = |fields: &[(String, String)]| -> Vec<String> {
            fields
                .iter()
                .map(|(name, value)| match name.as_str() {
                    "latency" | "stream_duration" => {
                        format!(
                            "{name}={}",
                            value.trim_start_matches(|c: char| c.is_ascii_digit())
                        )
                    }
                    _ => format!("{name}={value}"),
                })
                .collect()
        };
        let events = events.lock().unwrap();
        let seen: Vec<(Level, &str, Vec<String>)> = events
            .iter()
            .map(|(level, message, fs)| (*level, message.as_str(), fields(fs)))
            .collect();
        let line = |level, message, fields: &[&str]| {
            (
                level,
                message,
                fields.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            seen,
            [
                line(Level::DEBUG, "started processing request", &[]),
                line(
                    Level::DEBUG,
                    "finished processing request",
                    &["latency= ms", "status=200"]
                ),
                line(Level::DEBUG, "end of stream", &["stream_duration= ms"]),
                line(Level::DEBUG, "started processing request", &[]),
                line(
                    Level::DEBUG,
                    "finished processing request",
                    &["latency= ms", "status=502"]
                ),
                line(
                    Level::WARN,
                    "response failed",
                    &["classification=Status code: 502 Bad Gateway", "latency= ms"]
                ),
                line(Level::DEBUG, "end of stream", &["stream_duration= ms"]),
            ]
        );
    }
}
