//! One span per request, `request`, with its method, path and id: every
//! log line made while serving it, the answer's body included, is inside
//! the span. A 5xx answer is logged at `warn` (mostly a backend's failure,
//! which the request's record reports as such; it is not an error of the
//! gateway's own), every answer at `debug`.
//!
//! tower-http's `TraceLayer` did this, and also read the clock twice for
//! every frame of the answer's body, for an `on_body_chunk` hook the
//! gateway does not use: about 280 instructions an event of a streamed
//! answer.

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
        let id = req
            .headers()
            .get(REQUEST_ID)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("-");
        let span = tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), id = %id);
        let inner = {
            let _in_span = span.enter();
            self.inner.call(req)
        };
        Spanned {
            inner,
            span: Some(span),
            started: Instant::now(),
        }
    }
}

pin_project! {
    /// The inner service's future, polled inside the request's span; the
    /// answer's body goes on inside it.
    pub struct Spanned<F> {
        #[pin]
        inner: F,
        span: Option<Span>,
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
        let span = this.span.take().unwrap_or_else(Span::none);
        let polled = {
            let _in_span = span.enter();
            this.inner.poll(cx)
        };
        let response = match polled {
            Poll::Pending => {
                *this.span = Some(span);
                return Poll::Pending;
            }
            Poll::Ready(result) => result?,
        };
        {
            let _in_span = span.enter();
            let status = response.status().as_u16();
            let latency_ms = this.started.elapsed().as_secs_f64() * 1000.0;
            if response.status().is_server_error() {
                tracing::warn!(status, latency_ms, "response failed");
            } else {
                tracing::debug!(status, latency_ms, "finished processing request");
            }
        }
        Poll::Ready(Ok(response.map(|inner| InSpan { inner, span })))
    }
}

pin_project! {
    /// An answer's body, polled inside its request's span.
    pub struct InSpan<B> {
        #[pin]
        inner: B,
        span: Span,
    }
}

impl<B: Body> Body for InSpan<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let _in_span = this.span.enter();
        this.inner.poll_frame(cx)
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
}
