//! A request body that fails when its client pauses too long between
//! frames (a slow-loris upload holds a connection and a body slot no longer
//! than that). The timer starts only when a frame is not already there, so
//! a body that arrived with its headers (most JSON bodies) costs none.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// Why a body could not be read.
#[derive(Debug)]
pub enum BodyError {
    Read(hyper::Error),
    /// No frame arrived for this long.
    Idle(Duration),
}

impl std::fmt::Display for BodyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyError::Read(err) => write!(f, "{err}"),
            BodyError::Idle(after) => write!(f, "no body data for {after:?}"),
        }
    }
}

impl std::error::Error for BodyError {}

pin_project_lite::pin_project! {
    pub struct IdleLimited<B> {
        #[pin]
        inner: B,
        idle: Duration,
        // Boxed, and made on the first wait only.
        timer: Option<Pin<Box<Sleep>>>,
    }
}

impl<B> IdleLimited<B> {
    pub fn new(inner: B, idle: Duration) -> Self {
        IdleLimited {
            inner,
            idle,
            timer: None,
        }
    }
}

impl<B: Body<Data = Bytes, Error = hyper::Error>> Body for IdleLimited<B> {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.project();
        match this.inner.poll_frame(cx) {
            Poll::Ready(frame) => {
                if let Some(timer) = this.timer {
                    timer.as_mut().reset(Instant::now() + *this.idle);
                }
                Poll::Ready(frame.map(|f| f.map_err(BodyError::Read)))
            }
            Poll::Pending => {
                let idle = *this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(BodyError::Idle(idle)))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
