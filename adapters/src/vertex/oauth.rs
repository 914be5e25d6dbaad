//! Google OAuth2 access tokens for Vertex AI: from a service account's
//! key (a JWT signed with it, exchanged at its `token_uri`), or from the
//! metadata server of the machine the gateway runs on. They are held and
//! refreshed by a [`Refresher`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderName, HeaderValue};
use ring::rand::SystemRandom;
use ring::signature::{RSA_PKCS1_SHA256, RsaKeyPair};
use rustls_pki_types::PrivatePkcs8KeyDer;
use rustls_pki_types::pem::PemObject;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::credentials::{Refresher, Source, fetch_failure};
use crate::error::AdapterError;
use crate::upstream::{Link, Upstream};

/// A backend's access tokens, as `Authorization` values.
pub type Tokens = Refresher<Google>;

/// What Vertex AI's calls need.
const SCOPE: &str = "https://www.googleapis.com/auth/cloud-platform";
/// How long an assertion asks its token to last (Google's maximum).
const ASSERTION_LIFETIME: u64 = 3600;
const JWT_BEARER: &str = "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer";
/// Where the metadata server is, unless `GCE_METADATA_HOST` says.
const METADATA_HOST: &str = "metadata.google.internal";
const METADATA_TOKEN_PATH: &str = "/computeMetadata/v1/instance/service-accounts/default/token";

/// A service account's key file, as Google writes it.
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: String,
    client_email: String,
    private_key_id: String,
    private_key: String,
    token_uri: String,
}

enum Kind {
    ServiceAccount {
        email: String,
        key_id: String,
        key: Box<RsaKeyPair>,
        token_uri: String,
    },
    Metadata,
}

/// Google's token sources.
pub struct Google {
    kind: Kind,
    /// The token endpoint or the metadata server.
    server: Upstream,
}

impl Google {
    /// Tokens from a service account's key file (JSON, as the Cloud
    /// console downloads it).
    pub fn key_file(path: &str, link: Link<'_>) -> Result<Self, AdapterError> {
        let failed = |why: String| AdapterError::Internal {
            message: format!("credentials file {path}: {why}"),
        };
        let text = std::fs::read(path).map_err(|e| failed(e.to_string()))?;
        let file: KeyFile = serde_json::from_slice(&text).map_err(|e| failed(e.to_string()))?;
        if file.kind != "service_account" {
            return Err(failed(format!(
                "is a `{}` credential; a service account's key is taken",
                file.kind
            )));
        }
        let der = PrivatePkcs8KeyDer::from_pem_slice(file.private_key.as_bytes())
            .map_err(|e| failed(format!("private_key: {e}")))?;
        let key = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der())
            .map_err(|e| failed(format!("private_key: {e}")))?;
        Ok(Google {
            server: Upstream::new(&file.token_uri, Vec::new(), link)?,
            kind: Kind::ServiceAccount {
                email: file.client_email,
                key_id: file.private_key_id,
                key: Box::new(key),
                token_uri: file.token_uri,
            },
        })
    }

    /// Tokens from the metadata server (`GCE_METADATA_HOST`, else
    /// metadata.google.internal), for the machine's own service account.
    pub fn metadata_server(link: Link<'_>) -> Result<Self, AdapterError> {
        let host = std::env::var("GCE_METADATA_HOST").unwrap_or_else(|_| METADATA_HOST.into());
        Ok(Google {
            server: Upstream::new(&format!("http://{host}"), Vec::new(), link)?,
            kind: Kind::Metadata,
        })
    }

    async fn token(&self) -> Result<(HeaderValue, Duration), String> {
        let answer = match &self.kind {
            Kind::ServiceAccount {
                email,
                key_id,
                key,
                token_uri,
            } => {
                let assertion = assertion(email, key_id, key, token_uri)?;
                let form = format!("grant_type={JWT_BEARER}&assertion={assertion}");
                self.server
                    .call_bytes(
                        "",
                        "application/x-www-form-urlencoded",
                        Bytes::from(form),
                        &[],
                    )
                    .await
            }
            Kind::Metadata => {
                let flavor = (
                    HeaderName::from_static("metadata-flavor"),
                    HeaderValue::from_static("Google"),
                );
                self.server.get_path(METADATA_TOKEN_PATH, &[flavor]).await
            }
        };
        let answer = answer.map_err(|err| fetch_failure("the token endpoint", &err))?;
        let body: Value = serde_json::from_slice(&answer)
            .map_err(|_| "the token endpoint's answer is not JSON".to_owned())?;
        let token = body["access_token"]
            .as_str()
            .filter(|t| !t.is_empty())
            .ok_or("the token endpoint's answer holds no access_token")?;
        // An integer, or (from some servers) a string of one.
        let seconds = body["expires_in"]
            .as_u64()
            .or_else(|| body["expires_in"].as_str().and_then(|s| s.parse().ok()))
            .unwrap_or(ASSERTION_LIFETIME)
            .max(1);
        let mut bearer = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| "the access token holds characters a header cannot".to_owned())?;
        bearer.set_sensitive(true);
        Ok((bearer, Duration::from_secs(seconds)))
    }
}

impl Source for Google {
    type Credential = HeaderValue;

    fn name(&self) -> &'static str {
        match self.kind {
            Kind::ServiceAccount { .. } => "service_account",
            Kind::Metadata => "metadata",
        }
    }

    fn fetch(&self) -> BoxFuture<'_, Result<(HeaderValue, Duration), String>> {
        self.token().boxed()
    }
}

/// The signed JWT a service account presents: RS256 over its header and
/// claims, for the cloud-platform scope, addressed to its token endpoint.
fn assertion(
    email: &str,
    key_id: &str,
    key: &RsaKeyPair,
    token_uri: &str,
) -> Result<String, String> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let header = json!({"alg": "RS256", "typ": "JWT", "kid": key_id});
    let claims = json!({
        "iss": email, "scope": SCOPE, "aud": token_uri,
        "iat": now, "exp": now + ASSERTION_LIFETIME,
    });
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut signature = vec![0; key.public().modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        signed.as_bytes(),
        &mut signature,
    )
    .map_err(|_| "the service account's key could not sign".to_owned())?;
    Ok(format!("{signed}.{}", URL_SAFE_NO_PAD.encode(signature)))
}
