//! Accept loop: HTTP/1.1 and h2c on one port, TCP_NODELAY on every
//! connection, a limit on every phase of a connection, graceful shutdown
//! with a deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::http::after_poll;
use crate::http::tls::Tls;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use crate::http::connection::{Activity, Watched, drive};

/// Named with the server it is given to, for callers outside the crate.
pub use crate::http::connection::ConnectionLimits;

/// Serves `service` on `listener` until `shutdown` resolves; then stops
/// accepting, lets in-flight requests and streams finish for up to `grace`,
/// and returns. Every connection is held to `limits` (see
/// `http::connection`); with `tls`, each first
/// completes a TLS handshake within the deadline for its first request.
pub async fn serve<S, B>(
    listener: TcpListener,
    service: S,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: ConnectionLimits,
    tls: Option<Arc<Tls>>,
) where
    S: tower::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        // The connection's watchdog times HTTP/1 heads (`connection.rs`),
        // without a timer per request.
        .header_read_timeout(None)
        // hyper's smallest read buffer is 8 KiB.
        .max_buf_size(limits.max_header_bytes.max(8192));
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout)
        .max_concurrent_streams(limits.http2_max_concurrent_streams)
        .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
    let builder = Arc::new(builder);
    let (drain, draining) = watch::channel(false);
    let open = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        // A connection slot before accepting: past the limit, clients wait
        // in the kernel's backlog instead of costing the process anything.
        let slot = tokio::select! {
            slot = open.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(err) => {
                    // Out of file descriptors and the like: back off briefly
                    // rather than spin; the listener itself is still good.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let activity = Activity::new(Instant::now());
        let first_deadline = activity.first_request_deadline(&limits);
        // Streamed tokens are small writes; Nagle would hold each back.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::debug!(error = %err, "could not set TCP_NODELAY");
        }
        let service = Watched {
            inner: TowerToHyperService::new(service.clone()),
            activity: activity.clone(),
        };
        let (builder, draining, tls) = (builder.clone(), draining.clone(), tls.clone());
        // Run as a `RunsQueued`: an HTTP/1 request's bookkeeping runs in
        // this task once hyper has handed its answer to the socket (see
        // `after_poll`). HTTP/2 streams run in tasks of their own, whose
        // frames this task writes: theirs keeps a task of its own.
        tokio::spawn(after_poll::RunsQueued::new(async move {
            let ended = match tls {
                None => {
                    let connection = builder.serve_connection(TokioIo::new(stream), service);
                    drive(connection, &activity, &limits, first_deadline, draining).await
                }
                Some(tls) => {
                    match tokio::time::timeout_at(first_deadline, tls.acceptor().accept(stream))
                        .await
                    {
                        Ok(Ok(stream)) => {
                            let connection =
                                builder.serve_connection(TokioIo::new(stream), service);
                            drive(connection, &activity, &limits, first_deadline, draining).await
                        }
                        Ok(Err(err)) => {
                            tracing::debug!(%peer, error = %err, "TLS handshake failed");
                            Ok(())
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake timed out");
                            Ok(())
                        }
                    }
                }
            };
            if let Err(err) = ended {
                tracing::debug!(%peer, error = %err, "connection ended with an error");
            }
            drop(slot);
        }));
    }
    drop(listener);
    let _ = drain.send(true);
    // Every connection gives its slot back when it ends.
    let all_closed = open.acquire_many(u32::try_from(limits.max_connections).unwrap_or(u32::MAX));
    tokio::select! {
        _ = all_closed => tracing::info!("all connections closed"),
        () = tokio::time::sleep(grace) => tracing::warn!(?grace, "shutdown grace period over; closing remaining connections"),
    }
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM (what Kubernetes sends).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    // Registered now, not when first polled: a signal that comes after the
    // caller announced its address, before it began serving, still means
    // a graceful stop rather than the default action (death).
    let interrupt = signal(SignalKind::interrupt()).ok();
    let terminate = signal(SignalKind::terminate()).ok();
    async move {
        let wait = |signal: Option<tokio::signal::unix::Signal>| async move {
            match signal {
                Some(mut signal) => {
                    signal.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = wait(interrupt) => {},
            () = wait(terminate) => {},
        }
    }
}
