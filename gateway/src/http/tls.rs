//! HTTPS on the listener: rustls with the configured certificate chain and
//! key (PEM), offering HTTP/2 and HTTP/1.1 by ALPN, and with a client CA,
//! only to clients presenting a certificate it signed and its revocation
//! lists (CRLs) do not list. The files are read again when any of them
//! changes on disk (a renewed certificate is served, a rotated client CA or
//! a new CRL applies to new connections, without a restart); a new set that
//! does not load is logged and the old one kept.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use switchyard_policies::TlsFiles;
use tokio_rustls::TlsAcceptor;

/// How often the files are looked at for a change.
const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The listener's TLS: the acceptor for the files as they are now.
pub struct Tls {
    files: TlsFiles,
    current: RwLock<(TlsAcceptor, Stamp)>,
}

/// When each file last changed and its length (in the order of
/// [`watched`]), to notice a new one.
type Stamp = Vec<Option<(SystemTime, u64)>>;

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
        let unchanged = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            == now;
        if unchanged {
            return;
        }
        match acceptor(&self.files) {
            Ok(acceptor) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = (acceptor, now);
                tracing::info!(cert = %self.files.cert_file, "TLS files reloaded");
            }
            // Half-written files, a key that does not fit yet, a CA or CRL
            // that does not parse: tried again until they load.
            Err(err) => {
                tracing::warn!(error = %err, "TLS files not reloaded; serving the previous ones")
            }
        }
    }
}

/// Every file the TLS config is read from.
fn watched(files: &TlsFiles) -> impl Iterator<Item = &str> {
    [&files.cert_file, &files.key_file]
        .into_iter()
        .chain(&files.client_ca_file)
        .chain(&files.crl_files)
        .map(String::as_str)
}

fn stamp(files: &TlsFiles) -> Stamp {
    watched(files)
        .map(|path| {
            let meta = std::fs::metadata(path).ok()?;
            Some((meta.modified().ok()?, meta.len()))
        })
        .collect()
}

/// The revocation lists in `path`: PEM (`X509 CRL` sections) or one DER.
fn read_crls(path: &str) -> anyhow::Result<Vec<CertificateRevocationListDer<'static>>> {
    let bytes = std::fs::read(path)?;
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        return Ok(vec![CertificateRevocationListDer::from(bytes)]);
    }
    let crls =
        CertificateRevocationListDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>()?;
    if crls.is_empty() {
        anyhow::bail!("no X509 CRL in it");
    }
    Ok(crls)
}

/// Client certificates must chain to a CA in `ca_file` and not be revoked
/// by a CRL in `crl_files`.
fn client_verifier(
    ca_file: &str,
    crl_files: &[String],
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
    let roots = Arc::new(roots);
    let mut crls = Vec::new();
    for (i, path) in crl_files.iter().enumerate() {
        let named = |err: &dyn std::fmt::Display| {
            anyhow::anyhow!("server.tls.crl_files[{i}] {path}: {err}")
        };
        let these = read_crls(path).map_err(|e| named(&e))?;
        // Parsed here, file by file, so that a bad one is named.
        rustls::server::WebPkiClientVerifier::builder_with_provider(
            roots.clone(),
            provider.clone(),
        )
        .with_crls(these.iter().cloned())
        .build()
        .map_err(|e| named(&e))?;
        crls.extend(these);
    }
    // Unknown revocation status (an issuer with no CRL listed) is refused,
    // as rustls does by default: revocation fails closed.
    rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider)
        .with_crls(crls)
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
        Some(ca_file) => {
            builder.with_client_cert_verifier(client_verifier(ca_file, &files.crl_files, provider)?)
        }
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|err| {
        anyhow::anyhow!("server.tls: the key does not fit the certificate: {err}")
    })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
