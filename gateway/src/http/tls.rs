//! HTTPS on the listener: rustls with the configured certificate chain and
//! key (PEM), offering HTTP/2 and HTTP/1.1 by ALPN.

use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use switchyard_policies::TlsFiles;
use tokio_rustls::TlsAcceptor;

/// The acceptor for `files`, or why the files will not do (read at start-up,
/// so a bad file stops the start with its name).
pub fn acceptor(files: &TlsFiles) -> anyhow::Result<TlsAcceptor> {
    let certs = CertificateDer::pem_file_iter(&files.cert_file)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| anyhow::anyhow!("server.tls.cert_file {}: {err}", files.cert_file))?;
    if certs.is_empty() {
        anyhow::bail!(
            "server.tls.cert_file {}: no certificate in it",
            files.cert_file
        );
    }
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .map_err(|err| anyhow::anyhow!("server.tls.key_file {}: {err}", files.key_file))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| {
            anyhow::anyhow!("server.tls: the key does not fit the certificate: {err}")
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
