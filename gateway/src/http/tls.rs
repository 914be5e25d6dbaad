//! HTTPS on the listener: rustls with the configured certificate chain and
//! key (PEM), offering HTTP/2 and HTTP/1.1 by ALPN, and with a client CA,
//! only to clients presenting a certificate it signed. The files are read again
//! when they change on disk (a renewed certificate is served without a
//! restart); a new pair that does not load is logged and the old one kept.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use switchyard_policies::TlsFiles;
use tokio_rustls::TlsAcceptor;

/// How often the files are looked at for a change.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The listener's TLS: the acceptor for the files as they are now.
pub struct Tls {
    files: TlsFiles,
    current: RwLock<(TlsAcceptor, Stamp)>,
}

/// When each file last changed, to notice a new one.
type Stamp = (Option<SystemTime>, Option<SystemTime>);

impl Tls {
    /// Loads the files (at start-up a bad file stops the start, named).
    pub fn load(files: &TlsFiles) -> anyhow::Result<Arc<Self>> {
        let loaded = (acceptor(files)?, stamp(files));
        Ok(Arc::new(Tls {
            files: files.clone(),
            current: RwLock::new(loaded),
        }))
    }

    /// The acceptor for the next connection.
    pub fn acceptor(&self) -> TlsAcceptor {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }

    /// Watches the files from a task of its own, for as long as the
    /// process runs.
    pub fn spawn_reload(self: &Arc<Self>) {
        let tls = self.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(RELOAD_EVERY);
            loop {
                ticks.tick().await;
                tls.reload_if_changed();
            }
        });
    }

    fn reload_if_changed(&self) {
        let now = stamp(&self.files);
        let seen = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1;
        if now == seen {
            return;
        }
        match acceptor(&self.files) {
            Ok(acceptor) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = (acceptor, now);
                tracing::info!(cert = %self.files.cert_file, "TLS certificate reloaded");
            }
            // Half-written files, or a key that does not fit yet: the next
            // change is tried again.
            Err(err) => {
                tracing::warn!(error = %err, "TLS certificate not reloaded; serving the previous one")
            }
        }
    }
}

fn stamp(files: &TlsFiles) -> Stamp {
    let modified = |path: &str| std::fs::metadata(path).and_then(|m| m.modified()).ok();
    (modified(&files.cert_file), modified(&files.key_file))
}

/// Client certificates must chain to a CA in `ca_file`.
fn client_verifier(
    ca_file: &str,
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let named =
        |err: &dyn std::fmt::Display| anyhow::anyhow!("server.tls.client_ca_file {ca_file}: {err}");
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_file).map_err(|e| named(&e))? {
        roots
            .add(cert.map_err(|e| named(&e))?)
            .map_err(|e| named(&e))?;
    }
    if roots.is_empty() {
        return Err(named(&"no certificate in it"));
    }
    rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| named(&e))
}

/// The acceptor for `files`, or why the files will not do.
fn acceptor(files: &TlsFiles) -> anyhow::Result<TlsAcceptor> {
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
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?;
    let builder = match &files.client_ca_file {
        None => builder.with_no_client_auth(),
        Some(ca_file) => builder.with_client_cert_verifier(client_verifier(ca_file, provider)?),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|err| {
        anyhow::anyhow!("server.tls: the key does not fit the certificate: {err}")
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
