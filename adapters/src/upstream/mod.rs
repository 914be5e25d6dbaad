//! HTTP to upstream model servers, shared by every provider: a pooled
//! client, POSTs within the first-byte timeout, error answers read into
//! errors, and SSE bodies decoded into items with an idle timeout.

mod error_body;
mod events;

use std::future::Future;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::BoxStream;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde::Serialize;
use switchyard_policies::{BackendTls, ClientCert, Timeouts, TrustRoots};

pub(crate) use error_body::status_error;
pub use events::{EventDecoder, decode_events};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::body::TooLarge;
use crate::error::{AdapterError, TimeoutPhase};

/// The W3C trace context of the attempt a backend call is made for.
#[derive(Debug, Clone)]
pub struct TraceContext {
    pub traceparent: HeaderValue,
    pub tracestate: Option<HeaderValue>,
}

tokio::task_local! {
    /// Set by the gateway around a backend call when traces are on, so
    /// every adapter's requests carry it without each taking it as an
    /// argument.
    static TRACE_CONTEXT: TraceContext;
}

/// Runs `call` with its upstream requests carrying `context`.
pub async fn with_trace_context<F: Future>(context: Option<TraceContext>, call: F) -> F::Output {
    match context {
        Some(context) => TRACE_CONTEXT.scope(context, call).await,
        None => call.await,
    }
}

/// A pooled HTTP/1.1 + HTTP/2 client, HTTPS through rustls.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// How the gateway reaches one upstream server.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    pub max_response_bytes: usize,
    /// How the server's certificate is checked, and the gateway's own.
    pub tls: &'a BackendTls,
}

/// Builds a pooled client. `TCP_NODELAY` is set: streamed tokens are small
/// writes, and Nagle's algorithm would hold each one back for an ACK.
pub fn http_client(connect_timeout: Duration) -> Result<HttpClient, AdapterError> {
    http_client_trusting(connect_timeout, &BackendTls::default())
}

/// The same, checking servers' certificates as `tls` says (public roots,
/// a private CA beside them) and presenting its client certificate when it
/// has one; there is no way to turn certificate verification off.
pub fn http_client_trusting(
    connect_timeout: Duration,
    tls: &BackendTls,
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
    let builder = if *tls == BackendTls::default() {
        // The common case, built as hyper-rustls builds it.
        builder
            .with_provider_and_webpki_roots(provider)
            .map_err(|e| setup(&e))?
    } else {
        builder.with_tls_config(client_tls_config(tls, provider).map_err(|e| setup(&e))?)
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

/// A TLS client config for `tls`: the trusted roots and the client
/// certificate. Errors name the file at fault.
fn client_tls_config(
    tls: &BackendTls,
    provider: rustls::crypto::CryptoProvider,
) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    match tls.roots {
        TrustRoots::Webpki => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        TrustRoots::Platform => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(format!(
                    "tls.roots: platform: no CA certificates found in the system's trust store ({})",
                    found
                        .errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
            // A store holds the odd certificate rustls cannot use; the rest serve.
            roots.add_parsable_certificates(found.certs);
        }
    }
    if let Some(ca_file) = &tls.ca_file {
        let named = |e: &dyn std::fmt::Display| format!("tls.ca_file {ca_file}: {e}");
        for cert in CertificateDer::pem_file_iter(ca_file).map_err(|e| named(&e))? {
            roots
                .add(cert.map_err(|e| named(&e))?)
                .map_err(|e| named(&e))?;
        }
    }
    let builder = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots);
    match &tls.client_cert {
        None => Ok(builder.with_no_client_auth()),
        Some(ClientCert {
            cert_file,
            key_file,
        }) => {
            let certs = CertificateDer::pem_file_iter(cert_file)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("tls.cert_file {cert_file}: {e}"))?;
            let key = PrivateKeyDer::from_pem_file(key_file)
                .map_err(|e| format!("tls.key_file {key_file}: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("tls.cert_file and tls.key_file: {e}"))
        }
    }
}

/// One upstream server: where it is, the headers every request carries
/// (credentials, API versions), and its timeouts.
pub struct Upstream {
    http: HttpClient,
    base_url: String,
    /// Each path's full URI, parsed on first use: parsing `base_url + path`
    /// on every call cost about 1,000 instructions.
    uris: RwLock<Vec<(&'static str, Uri)>>,
    /// Added after every path (`?api-version=...`), or empty.
    query: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    timeouts: Timeouts,
    /// The largest whole answer or streamed event read.
    max_response_bytes: usize,
}

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Error answers are a few hundred bytes; more is not read.
const MAX_ERROR_BYTES: usize = 64 * 1024;

impl Upstream {
    pub fn new(
        base_url: &str,
        headers: Vec<(HeaderName, HeaderValue)>,
        link: Link<'_>,
    ) -> Result<Self, AdapterError> {
        Ok(Upstream {
            http: http_client_trusting(link.timeouts.connect, link.tls)?,
            base_url: base_url.to_owned(),
            uris: RwLock::new(Vec::new()),
            query: String::new(),
            headers,
            timeouts: link.timeouts,
            max_response_bytes: link.max_response_bytes,
        })
    }

    /// The same server with `query` (`api-version=2024-10-21`) added to
    /// every request's URI.
    pub fn with_query(mut self, query: &str) -> Self {
        self.query = if query.is_empty() {
            String::new()
        } else {
            format!("?{query}")
        };
        self
    }

    /// The full URI of `path` on this server.
    fn uri(&self, path: &'static str) -> Result<Uri, AdapterError> {
        let known = self.uris.read().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, uri)) = known.iter().find(|(p, _)| *p == path) {
            return Ok(uri.clone());
        }
        drop(known);
        let uri = self.fresh_uri(path)?;
        self.uris
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push((path, uri.clone()));
        Ok(uri)
    }

    /// The full URI of `path`, parsed now. `path` may carry its own query
    /// when the server adds none.
    fn fresh_uri(&self, path: &str) -> Result<Uri, AdapterError> {
        format!("{}{path}{}", self.base_url, self.query)
            .parse()
            .map_err(|err: http::uri::InvalidUri| AdapterError::Internal {
                message: format!("{}{path}: {err}", self.base_url),
            })
    }

    /// Sends a POST and waits for the response head; error statuses are read
    /// and turned into errors here. No deadline of its own: callers put one
    /// timer around all of their exchange.
    async fn send<B: Serialize>(
        &self,
        uri: Uri,
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
            .uri(uri)
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
        if let Ok(context) = TRACE_CONTEXT.try_with(TraceContext::clone) {
            request = request.header(TRACEPARENT, context.traceparent);
            if let Some(state) = context.tracestate {
                request = request.header(TRACESTATE, state);
            }
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
        let (head, body) = response.into_parts();
        // The status says what happened; a body past the limit is not read
        // (nor needed to say it).
        let limit = MAX_ERROR_BYTES.min(self.max_response_bytes);
        let body = read_body(body, limit).await.unwrap_or_default();
        Err(status_error(status.as_u16(), &head.headers, &body))
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
        self.call_uri(self.uri(path)?, body, extra_headers).await
    }

    /// The same for a path made per request (one naming the model, as
    /// Google's APIs do), which is parsed each time rather than kept.
    pub async fn call_path<B: Serialize>(
        &self,
        path: &str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.call_uri(self.fresh_uri(path)?, body, extra_headers)
            .await
    }

    async fn call_uri<B: Serialize>(
        &self,
        uri: Uri,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<Bytes, AdapterError> {
        self.within_first_byte(async {
            let incoming = self.send(uri, body, extra_headers).await?;
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
        self.stream_uri(self.uri(path)?, body, extra_headers, decoder)
            .await
    }

    /// The same for a path made per request.
    pub async fn stream_path<B, T, D>(
        &self,
        path: &str,
        body: &B,
        extra_headers: &[(HeaderName, HeaderValue)],
        decoder: D,
    ) -> Result<BoxStream<'static, Result<T, AdapterError>>, AdapterError>
    where
        B: Serialize,
        T: Send + 'static,
        D: EventDecoder<T>,
    {
        self.stream_uri(self.fresh_uri(path)?, body, extra_headers, decoder)
            .await
    }

    async fn stream_uri<B, T, D>(
        &self,
        uri: Uri,
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
            .within_first_byte(self.send(uri, body, extra_headers))
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
    if let Some(reason) = certificate_problem(&err) {
        AdapterError::Certificate { reason, message }
    } else if err.is_connect() && caused_by_timeout(&err) {
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

const CLIENT_CERTIFICATE_REFUSED: &str =
    "the backend refused the gateway's client certificate (or its absence); see tls.cert_file";

/// The alerts a server sends about the client's certificate, as rustls
/// names them.
const CLIENT_CERTIFICATE_ALERTS: [&str; 4] = [
    "CertificateRequired",
    "BadCertificate",
    "UnknownCA",
    "CertificateUnknown",
];

/// What was wrong with a certificate, when a TLS verification failure is
/// somewhere in the error's chain (rustls reports it inside an I/O error).
fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<&'static str> {
    use rustls::{AlertDescription, CertificateError, Error as Tls};
    let mut next = Some(err);
    while let Some(mut err) = next {
        // An I/O error's `source` skips the error it wraps (the connector
        // wraps rustls' I/O error in another): look inside each layer.
        while let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            err = inner;
        }
        match err.downcast_ref::<Tls>() {
            Some(Tls::InvalidCertificate(problem)) => {
                return Some(match problem {
                    CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                        "expired"
                    }
                    CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                        "not valid yet"
                    }
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. } => {
                        "not valid for the backend's host name"
                    }
                    CertificateError::UnknownIssuer => {
                        "signed by a CA the gateway does not trust; see tls.ca_file and tls.roots"
                    }
                    CertificateError::Revoked => "revoked",
                    _ => "invalid",
                });
            }
            Some(Tls::AlertReceived(
                AlertDescription::CertificateRequired
                | AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown,
            )) => return Some(CLIENT_CERTIFICATE_REFUSED),
            // An alert after the handshake (TLS 1.3 checks the client's
            // certificate then) reaches us as text inside the I/O error.
            None if CLIENT_CERTIFICATE_ALERTS
                .iter()
                .any(|alert| err.to_string() == format!("received fatal alert: {alert}")) =>
            {
                return Some(CLIENT_CERTIFICATE_REFUSED);
            }
            _ => {}
        }
        next = err.source();
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_client_certificate_is_named_however_the_alert_arrives() {
        use rustls::{AlertDescription, Error as Tls};
        // During the handshake (TLS 1.2): the rustls error itself, inside
        // the connector's I/O errors.
        let alert = Tls::AlertReceived(AlertDescription::CertificateRequired);
        let wrapped = std::io::Error::other(std::io::Error::other(alert));
        assert_eq!(
            certificate_problem(&wrapped),
            Some(CLIENT_CERTIFICATE_REFUSED)
        );
        // After it (TLS 1.3): only the alert's text survives.
        let text = std::io::Error::other("received fatal alert: CertificateRequired");
        assert_eq!(certificate_problem(&text), Some(CLIENT_CERTIFICATE_REFUSED));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(certificate_problem(&reset), None);
    }
}
