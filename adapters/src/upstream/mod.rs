//! HTTP to upstream model servers, shared by every provider: a pooled
//! client, POSTs within the first-byte timeout, error answers read into
//! errors, and SSE bodies decoded into items with an idle timeout.

mod events;

use std::future::Future;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use switchyard_policies::Timeouts;

pub use events::{EventDecoder, decode_events};

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

use crate::body::TooLarge;
use crate::error::{AdapterError, TimeoutPhase};
use crate::openai::status_error;

/// A pooled HTTP/1.1 + HTTP/2 client, HTTPS through rustls.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How the gateway reaches one upstream server.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    pub max_response_bytes: usize,
    /// A PEM file of CAs trusted beside the public ones (a private CA).
    pub ca_file: Option<&'a str>,
}

/// Builds a pooled client. `TCP_NODELAY` is set: streamed tokens are small
/// writes, and Nagle's algorithm would hold each one back for an ACK.
pub fn http_client(connect_timeout: Duration) -> Result<HttpClient, AdapterError> {
    http_client_trusting(connect_timeout, None)
}

/// The same, trusting the CAs in `ca_file` beside the public roots; there
/// is no way to turn certificate verification off.
pub fn http_client_trusting(
    connect_timeout: Duration,
    ca_file: Option<&str>,
) -> Result<HttpClient, AdapterError> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.enforce_http(false);
    let setup = |err: &dyn std::fmt::Display| AdapterError::Internal {
        message: format!("TLS setup: {err}"),
    };
    let provider = rustls::crypto::ring::default_provider();
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let builder = match ca_file {
        None => builder
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| setup(&e))?,
        Some(ca_file) => {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let certs = CertificateDer::pem_file_iter(ca_file)
                .map_err(|e| setup(&format!("{ca_file}: {e}")))?;
            for cert in certs {
                let cert = cert.map_err(|e| setup(&format!("{ca_file}: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| setup(&format!("{ca_file}: {e}")))?;
            }
            let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
                .with_safe_default_protocol_versions()
                .map_err(|e| setup(&e))?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(config)
        }
    };
    let https = builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .build(https))
}

/// One upstream server: where it is, the headers every request carries
/// (credentials, API versions), and its timeouts.
pub struct Upstream {
    http: HttpClient,
    base_url: String,
    /// Each path's full URI, parsed on first use: parsing `base_url + path`
    /// on every call cost about 1,000 instructions.
    uris: RwLock<Vec<(&'static str, Uri)>>,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    max_response_bytes: usize,
}

/// Error answers are a few hundred bytes; more is not read.
const MAX_ERROR_BYTES: usize = 64 * 1024;

impl Upstream {
    pub fn new(
        base_url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        link: Link<'_>,
    ) -> Result<Self, AdapterError> {
        Ok(Upstream {
            http: http_client_trusting(link.timeouts.connect, link.ca_file)?,
            base_url: base_url.to_owned(),
            uris: RwLock::new(Vec::new()),
            headers,
            timeouts: link.timeouts,
            max_response_bytes: link.max_response_bytes,
        })
    }

    /// The full URI of `path` on this server.
    fn uri(&self, path: &'static str) -> Result<Uri, AdapterError> {
        let known = self.uris.read().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, uri)) = known.iter().find(|(p, _)| *p == path) {
            return Ok(uri.clone());
        }
        drop(known);
        let uri: Uri =
            format!("{}{path}", self.base_url)
                .parse()
                .map_err(|err: http::uri::InvalidUri| AdapterError::Internal {
                    message: format!("{}{path}: {err}", self.base_url),
                })?;
        self.uris
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((path, uri.clone()));
        Ok(uri)
    }

    /// Sends a POST and waits for the response head; error statuses are read
    /// and turned into errors here. No deadline of its own: callers put one
    /// timer around all of their exchange.
    async fn send<B: Serialize>(
        &self,
        path: &'static str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Incoming, AdapterError> {
        // Sized for a typical chat request, so encoding it does not regrow
        // the buffer five or six times from serde_json's empty start.
        let mut json = Vec::with_capacity(1024);
        serde_json::to_writer(&mut json, body).map_err(|err| AdapterError::Internal {
            message: err.to_string(),
        })?;
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(self.uri(path)?)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .header(
                ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            );
        // A per-request header replaces the backend's default of that name.
        for (name, value) in &self.headers {
            if !extra_headers.iter().any(|(n, _)| n == name) {
                request = request.header(name, value.clone());
            }
        }
        for (name, value) in extra_headers {
            request = request.header(name, value.clone());
        }
        let request =
            request
                .body(Full::new(Bytes::from(json)))
                .map_err(|err| AdapterError::Internal {
                    message: err.to_string(),
                })?;
        let response = self
            .http
            .request(request)
            .await
            .map_err(|err| client_error(err, self.timeouts.connect))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response.into_body());
        }
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // The status says what happened; a body past the limit is not read
        // (nor needed to say it).
        let limit = MAX_ERROR_BYTES.min(self.max_response_bytes);
        let body = read_body(response.into_body(), limit)
            .await
            .unwrap_or_default();
        Err(status_error(status.as_u16(), retry_after, &body))
    }

    /// Runs `exchange` within the first-byte timeout (one timer for all of it).
    async fn within_first_byte<T>(
        &self,
        exchange: impl Future<Output = Result<T, AdapterError>>,
    ) -> Result<T, AdapterError> {
        tokio::time::timeout(self.timeouts.first_byte, exchange)
            .await
            .map_err(|_| AdapterError::Timeout {
                phase: TimeoutPhase::FirstByte,
                after: self.timeouts.first_byte,
            })?
    }

    /// POSTs and reads the whole answer, within the first-byte timeout.
    /// `extra_headers` go with this request only.
    pub async fn call<B: Serialize>(
        &self,
        path: &'static str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.within_first_byte(async {
            let incoming = self.send(path, body, extra_headers).await?;
            read_body(incoming, self.max_response_bytes).await
        })
        .await
    }

    /// POSTs and decodes the SSE answer as it arrives.
    pub async fn stream<B, T, D>(
        &self,
        path: &'static str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        B: Serialize,
        T: Send + 'static,
        D: EventDecoder<T>,
    {
        let incoming = self
            .within_first_byte(self.send(path, body, extra_headers))
            .await?;
        Ok(decode_events(
            incoming,
            self.timeouts.idle,
            self.max_response_bytes,
            decoder,
        ))
    }
}

/// A whole body, cut with an error past `limit` bytes rather than held.
async fn read_body(body: Incoming, limit: usize) -> Result<Bytes, AdapterError> {
    crate::body::collect_at_most(std::pin::pin!(body), limit)
        .await
        .map_err(|err| AdapterError::Reset {
            message: err.to_string(),
        })?
        .map_err(|TooLarge| AdapterError::Protocol {
            message: format!("the answer is larger than {limit} bytes (max_response_bytes)"),
        })
}

/// Connection failures are told apart from a peer that hung up mid-exchange.
fn client_error(err: hyper_util::client::legacy::Error, connect_timeout: Duration) -> AdapterError {
    let message = match std::error::Error::source(&err) {
        Some(source) => format!("{err}: {source}"),
        None => err.to_string(),
    };
    if err.is_connect() && caused_by_timeout(&err) {
        AdapterError::Timeout {
            phase: TimeoutPhase::Connect,
            after: connect_timeout,
        }
    } else if err.is_connect() {
        AdapterError::Connect { message }
    } else {
        AdapterError::Reset { message }
    }
}

/// Whether an I/O timeout is somewhere in the error's chain (the connector's
/// connect timeout surfaces that way).
fn caused_by_timeout(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = err.source();
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = cause.source();
    }
    false
}
