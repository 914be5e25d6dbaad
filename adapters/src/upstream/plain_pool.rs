//! Connections to one plain `http://` backend (a local model server), kept
//! by the upstream itself instead of hyper_util's pool.
//!
//! hyper_util's client serves every scheme and host from one pool: each
//! request hashed its key (scheme and authority, with SipHash) to check a
//! connection out and again to put it back, raced the checkout against a
//! connect it built and dropped, and rewrote the request's URI. Sending a
//! request (`Upstream::send`, with its headers) took about 12,200
//! instructions that way and 3,300 this way (`scripts/count-instructions.sh`). One backend is one address, so a
//! stack of idle HTTP/1 connections serves: the newest idle connection is
//! taken, and it goes back once its answer has been read off the socket.
//! TLS backends, which may speak HTTP/2, stay on hyper_util's client.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::Scheme;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

use crate::error::{AdapterError, TimeoutPhase};

/// How long a connection may sit idle before it is closed (the idle timeout
/// the shared client's pool was given).
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How often idle connections are looked over for those past the timeout.
const REAP_EVERY: Duration = Duration::from_secs(30);

pub struct PlainPool {
    /// Where to connect: the host (an IPv6 address without its brackets)
    /// and the port.
    host: String,
    port: u16,
    connect_timeout: Duration,
    /// Idle connections, the most recently used last.
    idle: Mutex<Vec<Idle>>,
    /// Whether the task that closes connections idle too long runs.
    reaping: AtomicBool,
}

struct Idle {
    sender: SendRequest<Full<Bytes>>,
    since: Instant,
}

impl PlainPool {
    /// A pool for `base_url`, when it is a plain `http://` URL.
    pub fn for_base_url(base_url: &str, connect_timeout: Duration) -> Option<Arc<Self>> {
        let uri: Uri = base_url.parse().ok()?;
        if uri.scheme() != Some(&Scheme::HTTP) {
            return None;
        }
        let host = uri.host()?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        Some(Arc::new(PlainPool {
            host: host.to_owned(),
            port: uri.port_u16().unwrap_or(80),
            connect_timeout,
            idle: Mutex::new(Vec::new()),
            reaping: AtomicBool::new(false),
        }))
    }

    /// Sends `request` (its URI in origin form, `/path?query`) on an idle
    /// connection, or a new one, and waits for the answer's head.
    pub async fn request(
        self: &Arc<Self>,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, AdapterError> {
        loop {
            let (mut sender, reused) = match self.take() {
                Some(sender) => (sender, true),
                None => (self.connect().await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.keep(sender);
                    return Ok(response);
                }
                Err(mut err) => match err.take_message() {
                    // The connection closed before the request went out
                    // (the server let an idle connection go as it was
                    // taken): the request goes on another. Not on a new
                    // connection's failure, which another would repeat.
                    Some(unsent) if reused => request = unsent,
                    _ => {
                        return Err(AdapterError::Reset {
                            message: describe(&err.into_error()),
                        });
                    }
                },
            }
        }
    }

    /// The most recently used idle connection that is still open and
    /// has not sat idle past [`IDLE_TIMEOUT`] (the reaper, which closes
    /// those, runs only every [`REAP_EVERY`]).
    fn take(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        while let Some(Idle { sender, since }) = idle.pop() {
            // Not ready: the server closed it while it sat idle.
            if sender.is_ready() && since.elapsed() < IDLE_TIMEOUT {
                return Some(sender);
            }
        }
        None
    }

    /// Puts a connection back once it can take the next request: at once
    /// when the answer was read off the socket with its head (a short
    /// whole answer), else once its body has been (a stream), as
    /// hyper_util's pool does.
    fn keep(self: &Arc<Self>, mut sender: SendRequest<Full<Bytes>>) {
        if sender.is_ready() {
            self.put(sender);
            return;
        }
        let pool = Arc::downgrade(self);
        tokio::spawn(async move {
            if sender.ready().await.is_ok()
                && let Some(pool) = pool.upgrade()
            {
                pool.put(sender);
            }
        });
    }

    fn put(&self, sender: SendRequest<Full<Bytes>>) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Idle {
                sender,
                since: Instant::now(),
            });
    }

    /// A new connection, its HTTP/1 exchange driven by a task of its own.
    async fn connect(self: &Arc<Self>) -> Result<SendRequest<Full<Bytes>>, AdapterError> {
        let stream = self.connect_tcp().await?;
        // Streamed tokens are small writes; Nagle's algorithm would hold
        // each one back for an ACK. Without it the connection still works.
        if let Err(err) = stream.set_nodelay(true) {
            tracing::warn!(error = %err, "backend connection without TCP_NODELAY");
        }
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|err| AdapterError::Connect {
                message: describe(&err),
            })?;
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!(error = %describe(&err), "backend connection ended");
            }
        });
        self.reap_idle();
        Ok(sender)
    }

    /// A TCP connection to the backend, as hyper_util's connector makes
    /// one: the name is looked up without a deadline, then its addresses
    /// are tried in order, each within an equal share of the connect
    /// timeout, so one that drops packets leaves time for the next. (Unlike
    /// hyper_util's, no second address family is raced after 300 ms.)
    async fn connect_tcp(&self) -> Result<tokio::net::TcpStream, AdapterError> {
        let failed = |err: &dyn std::fmt::Display| AdapterError::Connect {
            message: format!("tcp connect error: {err}"),
        };
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await
            .map_err(|err| AdapterError::Connect {
                message: format!("dns error: {err}"),
            })?
            .collect();
        let share = self.connect_timeout / u32::try_from(addresses.len().max(1)).unwrap_or(1);
        let mut last = None;
        for address in &addresses {
            match tokio::time::timeout(share, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(stream)) => return Ok(stream),
                Ok(Err(err)) => last = Some(failed(&err)),
                Err(_) => {
                    last = Some(AdapterError::Timeout {
                        phase: TimeoutPhase::Connect,
                        after: self.connect_timeout,
                    });
                }
            }
        }
        Err(last.unwrap_or_else(|| failed(&"the backend's name has no address")))
    }

    /// Starts, once, the task that closes connections idle past
    /// [`IDLE_TIMEOUT`]; it ends with the pool.
    fn reap_idle(self: &Arc<Self>) {
        if self.reaping.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            // The first look a period after the first connection, not at once.
            let first = tokio::time::Instant::now() + REAP_EVERY;
            let mut every = tokio::time::interval_at(first, REAP_EVERY);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let Some(pool) = pool.upgrade() else { return };
                pool.idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .retain(|idle| idle.since.elapsed() < IDLE_TIMEOUT && !idle.sender.is_closed());
            }
        });
    }
}

/// A hyper error with its cause (`connection closed before message
/// completed: ...`).
fn describe(err: &hyper::Error) -> String {
    match std::error::Error::source(err) {
        Some(source) => format!("{err}: {source}"),
        None => err.to_string(),
    }
}

#[cfg(test)]
mod tests;
