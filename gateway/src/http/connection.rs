//! One connection's life after accept: a deadline for its first request
//! head, then an idle timeout and an optional maximum age.
//!
//! Nothing else bounds the bytes before a connection's first request: the
//! auto builder's protocol detection reads with no timer, and an HTTP/2
//! connection that sent its preface (and SETTINGS) and then nothing waits
//! forever. A handful of such sockets would hold every connection slot. So
//! the accept loop holds each connection to one deadline from accept to its
//! first request (any TLS handshake included), learned from the service
//! being called, and afterwards closes one that has had no request in
//! flight for the idle timeout or lived past its age.
//!
//! On HTTP/1 the idle timeout is at most the header read timeout: a
//! client that has not sent a whole next head that long after its last
//! answer ended is disconnected, whether it sent nothing or half a head.
//! hyper's own header read timeout did the same, but it arms a timer for
//! every request (a boxed sleep made, registered and cancelled: about 1,700
//! instructions of a whole answer's 104,500), where this watchdog's timer
//! is reset only when it fires.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::server::graceful::GracefulConnection;
use switchyard_adapters::timer::LazyTimer;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use crate::http::woken::PolledWhenWoken;

/// Limits on every connection, whatever its requests.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// From accept to the first request head (TLS handshake and protocol
    /// detection included), and for each later HTTP/1 head: a client that
    /// has not sent one in this long is disconnected.
    pub header_read_timeout: Duration,
    /// A request head larger than this is refused (431 on HTTP/1).
    pub max_header_bytes: usize,
    /// Connections open at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Streams one HTTP/2 connection may have open at once.
    pub http2_max_concurrent_streams: u32,
    /// A connection with no request in flight for this long is closed
    /// (GOAWAY on HTTP/2); an HTTP/1 one after at most
    /// `header_read_timeout`.
    pub idle_timeout: Duration,
    /// How often an HTTP/2 connection is pinged, and how long the answer may
    /// take before the connection is closed.
    pub http2_keepalive_interval: Duration,
    pub http2_keepalive_timeout: Duration,
    /// A connection older than this is asked to close after its requests.
    pub max_connection_age: Option<Duration>,
    /// How long a connection asked to close (idle, too old) may take to
    /// finish its requests before it is dropped.
    pub close_grace: Duration,
}

impl ConnectionLimits {
    /// The limits a config's `server` section sets.
    pub fn of(server: &switchyard_policies::ServerSettings) -> Self {
        ConnectionLimits {
            header_read_timeout: server.header_read_timeout,
            max_header_bytes: server.max_header_bytes,
            max_connections: server.max_connections,
            http2_max_concurrent_streams: server.http2_max_concurrent_streams,
            idle_timeout: server.http2_idle_timeout,
            http2_keepalive_interval: server.http2_keepalive_interval,
            http2_keepalive_timeout: server.http2_keepalive_timeout,
            max_connection_age: server.max_connection_age,
            close_grace: server.shutdown_grace,
        }
    }
}

/// What a connection's requests tell its watchdog.
pub(super) struct Activity {
    accepted: Instant,
    first_request: Notify,
    seen_request: AtomicBool,
    /// Whether the first request came over HTTP/2, set before the watchdog
    /// hears of it.
    http2: AtomicBool,
    in_flight: AtomicUsize,
    /// Milliseconds after `accepted` when a request last ended.
    last_ended_ms: AtomicU64,
}

impl Activity {
    pub(super) fn new(accepted: Instant) -> Arc<Self> {
        Arc::new(Activity {
            accepted,
            first_request: Notify::new(),
            seen_request: AtomicBool::new(false),
            http2: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            last_ended_ms: AtomicU64::new(0),
        })
    }

    /// When the first request head must have arrived.
    pub(super) fn first_request_deadline(&self, limits: &ConnectionLimits) -> Instant {
        self.accepted + limits.header_read_timeout
    }

    fn begin(self: &Arc<Self>, version: http::Version) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        // Only the first request wakes the watchdog; later ones cost a load.
        if !self.seen_request.load(Ordering::Relaxed)
            && !self.seen_request.swap(true, Ordering::Relaxed)
        {
            self.http2
                .store(version == http::Version::HTTP_2, Ordering::Release);
            self.first_request.notify_one();
        }
        InFlight(self.clone())
    }

    /// How long the connection may go with no request in flight: on HTTP/1
    /// no longer than a next head may take (see the module's note).
    fn idle_timeout(&self, limits: &ConnectionLimits) -> Duration {
        // Read once the first request's notice has come (an HTTP/2
        // stream's task set it, on another thread perhaps).
        if self.http2.load(Ordering::Acquire) {
            limits.idle_timeout
        } else {
            limits.idle_timeout.min(limits.header_read_timeout)
        }
    }

    /// When the connection may be closed as idle, if nothing is in flight.
    fn idle_deadline(&self, idle: Duration) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let ended = Duration::from_millis(self.last_ended_ms.load(Ordering::Acquire));
        Some(self.accepted + ended + idle)
    }
}

/// One request in flight, from the service's call to the end of its
/// response body (a streamed answer keeps its connection busy).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let elapsed = u64::try_from(self.0.accepted.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.last_ended_ms.fetch_max(elapsed, Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::Release);
    }
}

/// The connection's service: the gateway's, with each call counted.
#[derive(Clone)]
pub(super) struct Watched<S> {
    pub(super) inner: S,
    pub(super) activity: Arc<Activity>,
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Watched<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>>,
{
    type Response = Response<Tracked<B>>;
    type Error = S::Error;
    type Future = WatchedCall<S::Future>;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let in_flight = self.activity.begin(req.version());
        WatchedCall {
            inner: self.inner.call(req),
            in_flight: Some(in_flight),
        }
    }
}

pin_project_lite::pin_project! {
    /// The service's future; hands the in-flight mark to the response body.
    pub(super) struct WatchedCall<F> {
        #[pin]
        inner: F,
        in_flight: Option<InFlight>,
    }
}

impl<F, B, E> Future for WatchedCall<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<Tracked<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = std::task::ready!(this.inner.poll(cx))?;
        let in_flight = this.in_flight.take();
        Poll::Ready(Ok(response.map(|inner| Tracked {
            inner,
            _in_flight: in_flight,
        })))
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request counted until it is dropped.
    pub(super) struct Tracked<B> {
        #[pin]
        inner: B,
        _in_flight: Option<InFlight>,
    }
}

impl<B: http_body::Body> http_body::Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Drives `connection` to its end under `limits`: closed at once if no
/// request arrives by `first_deadline`; after that, gracefully (GOAWAY on
/// HTTP/2) when idle or too old, and dropped if it has not finished
/// `limits.close_grace` later; gracefully as well once `draining` turns true.
pub(super) async fn drive<C>(
    connection: C,
    activity: &Activity,
    limits: &ConnectionLimits,
    first_deadline: Instant,
    mut draining: watch::Receiver<bool>,
) -> Result<(), C::Error>
where
    C: GracefulConnection,
{
    let mut connection = pin!(connection);
    tokio::select! {
        ended = connection.as_mut() => return ended,
        () = activity.first_request.notified() => {}
        () = tokio::time::sleep_until(first_deadline) => {
            tracing::debug!("no request head before the header read timeout; closing");
            return Ok(());
        }
        () = drained(&mut draining) => return Ok(()),
    }
    let idle_timeout = activity.idle_timeout(limits);
    let age_deadline = limits.max_connection_age.map(|age| activity.accepted + age);
    // Polled each time the connection's task is (once per event of a
    // streamed answer), so they ask tokio only when tokio may have news.
    let mut timer = LazyTimer::new(Instant::now());
    let mut drain = pin!(PolledWhenWoken::new(drained(&mut draining)));
    let closing_deadline = loop {
        let next = [activity.idle_deadline(idle_timeout), age_deadline]
            .into_iter()
            .flatten()
            .min()
            // A request is in flight and no age is set: look again once an
            // idle timeout has passed.
            .unwrap_or_else(|| Instant::now() + idle_timeout);
        timer.reset(next);
        tokio::select! {
            // The connection first: a head already read when the deadline
            // comes is parsed and its request counted before the timer's
            // branch looks, as hyper's own timer let a whole head win.
            biased;
            ended = connection.as_mut() => return ended,
            () = std::future::poll_fn(|cx| timer.poll_due(cx)) => {
                let now = Instant::now();
                let idle = activity.idle_deadline(idle_timeout).is_some_and(|at| at <= now);
                let old = age_deadline.is_some_and(|at| at <= now);
                if idle || old {
                    tracing::debug!(idle, old, "closing the connection");
                    break now + limits.close_grace;
                }
            }
            () = drain.as_mut() => return finish(connection, None).await,
        }
    };
    finish(connection, Some(closing_deadline)).await
}

/// Asks the connection to finish its requests and close, and waits for it
/// (until `deadline`, if one is given).
async fn finish<C: GracefulConnection>(
    mut connection: Pin<&mut C>,
    deadline: Option<Instant>,
) -> Result<(), C::Error> {
    connection.as_mut().graceful_shutdown();
    match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, connection)
            .await
            .unwrap_or(Ok(())),
        None => connection.await,
    }
}

/// Resolves once the process begins to drain (or the sender is gone).
async fn drained(draining: &mut watch::Receiver<bool>) {
    // The borrow the wait returns is dropped here, not held by the caller.
    let _ = draining.wait_for(|d| *d).await.map(|_| ());
}
