//! The pooled HTTP client every upstream shares (rustls over ring, public
//! roots or a private CA, the gateway's client certificate), and how its
//! failures are told apart: a refused certificate, a connect timeout, a
//! peer that hung up.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use switchyard_policies::{BackendTls, ClientCert, TrustRoots};

use crate::error::{AdapterError, TimeoutPhase};

/// A pooled HTTP/1.1 + HTTP/2 client, HTTPS through rustls.
pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

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

/// Connection failures are told apart from a peer that hung up mid-exchange.
pub(super) fn client_error(
    err: hyper_util::client::legacy::Error,
    connect_timeout: Duration,
) -> AdapterError {
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
