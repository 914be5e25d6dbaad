//! Virtual keys: looked up by the SHA-256 of what the caller sent, compared
//! in constant time against every configured key; a key once found is then
//! found by its tag (`verified`).

use std::sync::Arc;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchyard_policies::{Auth, ModelAccess, VirtualKey};
use switchyard_router::prefix::Tenant;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use crate::admit::access::shared::RateTicket;
use crate::admit::access::verified::Verified;
use crate::error::GatewayError;

/// The authenticated caller of a request (in its extensions).
#[derive(Debug, Clone)]
pub struct Caller {
    pub key: Arc<VirtualKey>,
    /// The request's shared rate check, waiting to go to Redis with its
    /// first reservation (one round trip for both).
    pub rate_check: Arc<std::sync::Mutex<Option<RateTicket>>>,
}

impl Caller {
    pub fn new(key: Arc<VirtualKey>) -> Caller {
        Caller {
            key,
            rate_check: Arc::default(),
        }
    }

    /// The rate check still waiting to be sent, if any.
    pub fn take_rate_check(&self) -> Option<RateTicket> {
        self.rate_check
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

pub struct KeyStore {
    keys: Vec<Arc<VirtualKey>>,
    /// Auth is on: some key is configured or was ever made through the API.
    enabled: bool,
    admin: Option<[u8; 32]>,
    /// `auth.metrics_key_hash`: the scraper's key, when `/metrics` needs one.
    metrics: Option<[u8; 32]>,
    /// Seeds team salts: made of the file's keys' and the admin key's
    /// stored hashes, so it is the same on every replica of one config and
    /// known to no tenant.
    team_secret: u64,
    /// Each team's `models`, where it has them.
    team_models: Vec<(String, ModelAccess)>,
    /// Keys already found, by tag: their callers' next requests skip the
    /// SHA-256.
    verified: Verified,
}

/// The header anthropic SDK 1.x sends its key in.
pub const X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");

/// SHA-256 of a key, as config stores it.
pub fn hash_key(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

/// A key's hash as config writes it: `sha256:` and 64 hex digits.
pub fn hash_text(key: &str) -> String {
    let hex: String = hash_key(key).iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Where the google-genai SDKs and Gemini CLI send their key.
pub const X_GOOG_API_KEY: HeaderName = HeaderName::from_static("x-goog-api-key");

/// The key a request carries: `Authorization: Bearer KEY` (OpenAI SDKs,
/// anthropic SDK 2.x), `x-api-key: KEY` (anthropic SDK 1.x) or
/// `x-goog-api-key: KEY` (google-genai, Gemini CLI).
fn presented(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    bearer
        .or_else(|| headers.get(X_API_KEY).and_then(|v| v.to_str().ok()))
        .or_else(|| headers.get(X_GOOG_API_KEY).and_then(|v| v.to_str().ok()))
        .map(str::trim)
}

/// The caller's key in a `?key=` query, percent-decoded: the Gemini API
/// takes its key there too.
fn query_key(query: Option<&str>) -> Option<String> {
    let value = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("key="))?;
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().filter(|k| !k.is_empty())
}

/// The password of a `Basic` credential (any user name): how a browser
/// sends the admin key to the dashboard after asking for it.
fn basic_password(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once([' ', '\t'])?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (_, password) = String::from_utf8(decoded)
        .ok()?
        .split_once(':')
        .map(|(u, p)| (u.to_owned(), p.to_owned()))?;
    (!password.is_empty()).then_some(password)
}

/// The token of a `Bearer` credential: the scheme in any case, then one or
/// more spaces or tabs (RFC 9110 section 11.1 and 11.4).
fn bearer_token(value: &str) -> Option<&str> {
    let value = value.trim_start_matches([' ', '\t']);
    let (scheme, token) = value.split_once([' ', '\t'])?;
    let token = token.trim_matches([' ', '\t']);
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

impl KeyStore {
    pub fn new(auth: &Auth) -> Self {
        // The file's keys only: a key made through the admin API would
        // otherwise change every team's salts (and cool its prefix cache).
        let hashes: Vec<u8> = auth
            .keys
            .iter()
            .filter(|k| !k.from_api)
            .flat_map(|k| k.hash)
            .chain(auth.admin_key_hash.into_iter().flatten())
            .collect();
        KeyStore {
            verified: Verified::new(auth.keys.len()),
            keys: auth.keys.iter().cloned().map(Arc::new).collect(),
            enabled: auth.enabled(),
            admin: auth.admin_key_hash,
            metrics: auth.metrics_key_hash,
            team_secret: xxh3_64(&hashes),
            team_models: auth
                .teams
                .iter()
                .filter_map(|t| Some((t.name.clone(), t.models.clone()?)))
                .collect(),
        }
    }

    /// A caller for the key named `name` (work done later for it, as a
    /// batch's lines), if it still exists and has not expired.
    pub fn caller_named(&self, name: &str) -> Option<Caller> {
        self.keys
            .iter()
            .find(|k| k.name == name)
            .filter(|k| {
                k.expires_at_ms
                    .is_none_or(|at| crate::ledger::now_ms() < at)
            })
            .map(|k| Caller::new(k.clone()))
    }

    /// Whether the caller may ask for `model` (a route, alias or backend
    /// name): its key's `models` and its team's both let it through, where
    /// they are set.
    pub fn may_use(&self, caller: &Caller, model: &str) -> bool {
        let key = &caller.key;
        let team = key.team.as_ref().and_then(|team| {
            self.team_models
                .iter()
                .find(|(name, _)| name == team)
                .map(|(_, models)| models)
        });
        key.models.as_ref().is_none_or(|m| m.allows(model)) && team.is_none_or(|m| m.allows(model))
    }

    /// Whether the caller's key may reach the MCP server `server`, and
    /// call its `tool` (by its prefixed name) when one is named.
    pub fn may_use_mcp(&self, caller: &Caller, server: &str, tool: Option<&str>) -> bool {
        caller
            .key
            .mcp
            .as_ref()
            .is_none_or(|access| access.allows(server, tool))
    }

    /// Auth is on when any key is configured, or was ever made through
    /// the admin API (revoking every one does not turn auth off).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The caller's key, or 401. A string not found before is hashed and
    /// compared with every configured key, so the time taken says nothing
    /// about which one (nearly) matched. One found before is found by its
    /// tag: the search's time depends on random tags and their number.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, GatewayError> {
        self.authenticate_request(headers, &http::Uri::from_static("/"))
    }

    /// The same, taking the key from a `?key=` query too on the Gemini
    /// API's paths, where Google takes it.
    pub fn authenticate_request(
        &self,
        headers: &HeaderMap,
        uri: &http::Uri,
    ) -> Result<Caller, GatewayError> {
        let from_query = (crate::error::Dialect::of_path(uri.path())
            == crate::error::Dialect::Gemini)
            .then(|| query_key(uri.query()))
            .flatten();
        let Some(key) = presented(headers).or(from_query.as_deref()) else {
            return Err(GatewayError::Unauthorized {
                message: "missing API key: send `Authorization: Bearer KEY`, `x-api-key: KEY` or `x-goog-api-key: KEY`"
                    .into(),
            });
        };
        let tag = self.verified.tag(key);
        let position = self.verified.find(tag).or_else(|| {
            let hash = hash_key(key);
            let mut found = None;
            for (position, candidate) in self.keys.iter().enumerate() {
                if bool::from(candidate.hash.ct_eq(&hash)) {
                    found = Some(position);
                }
            }
            found.inspect(|&position| self.verified.remember(tag, position))
        });
        let key = position
            .map(|position| self.keys[position].clone())
            .ok_or_else(|| GatewayError::Unauthorized {
                message: "invalid API key".into(),
            })?;
        if key
            .expires_at_ms
            .is_some_and(|at| crate::ledger::now_ms() >= at)
        {
            return Err(GatewayError::Unauthorized {
                message: "this API key has expired".into(),
            });
        }
        Ok(Caller::new(key))
    }

    /// The caller's prefix-cache salts: its key's from the key's stored
    /// hash (a secret of the key's own), its team's from the team's name
    /// and every key's hash. Never 0, which means shared.
    pub fn tenant(&self, caller: &Caller) -> Tenant {
        let key = xxh3_64(&caller.key.hash).max(1);
        let team = caller.key.team.as_ref().map_or(key, |team| {
            xxh3_64_with_seed(team.as_bytes(), self.team_secret).max(1)
        });
        Tenant { key, team }
    }

    /// Whether the request may read `/metrics`: anyone, unless
    /// `auth.metrics_key_hash` is set; then its key or the admin key.
    pub fn may_scrape(&self, headers: &HeaderMap) -> bool {
        let Some(metrics) = self.metrics else {
            return true;
        };
        let key = presented(headers);
        key.is_some_and(|key| bool::from(metrics.ct_eq(&hash_key(key)))) || self.admin_matches(key)
    }

    /// Whether the request carries the admin key.
    pub fn is_admin(&self, headers: &HeaderMap) -> bool {
        self.admin_matches(presented(headers))
    }

    /// Whether the request carries the admin key, as a `Basic` password
    /// too: how a browser sends it to the dashboard after asking. Only the
    /// dashboard's reads take it: a browser attaches a Basic credential to
    /// any request to the origin, a cross-site form's POST included.
    pub fn is_admin_reader(&self, headers: &HeaderMap) -> bool {
        self.is_admin(headers) || self.admin_matches(basic_password(headers).as_deref())
    }

    /// An admin key is configured.
    pub fn has_admin(&self) -> bool {
        self.admin.is_some()
    }

    fn admin_matches(&self, key: Option<&str>) -> bool {
        match (self.admin, key) {
            (Some(admin), Some(key)) => bool::from(admin.ct_eq(&hash_key(key))),
            _ => false,
        }
    }

    /// Neither keys nor an admin key are configured (the embedded
    /// default): the dashboard is open; the rest of the admin API is not.
    pub fn is_open(&self) -> bool {
        !self.enabled && self.admin.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn virtual_key(name: &str, secret: &str) -> VirtualKey {
        VirtualKey {
            name: name.into(),
            hash: hash_key(secret),
            team: None,
            budget: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            may_name_backends: true,
            models: None,
            expires_at_ms: None,
            from_api: false,
            sensitive: None,
            mcp: None,
        }
    }

    fn store() -> KeyStore {
        KeyStore::new(&Auth {
            keys: vec![virtual_key("alice", "sk-alice")],
            teams: vec![],
            admin_key_hash: Some(hash_key("sk-admin")),
            disabled: false,
            metrics_key_hash: None,
            metrics_key_labels: true,
            stored_keys_exist: false,
        })
    }

    fn headers(name: &str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
        h
    }

    #[test]
    fn bearer_and_x_api_key_both_work() {
        let store = store();
        assert_eq!(
            store
                .authenticate(&headers("authorization", "Bearer sk-alice"))
                .unwrap()
                .key
                .name,
            "alice"
        );
        assert_eq!(
            store
                .authenticate(&headers("x-api-key", "sk-alice"))
                .unwrap()
                .key
                .name,
            "alice"
        );
        assert!(
            store
                .authenticate(&headers("x-api-key", "sk-mallory"))
                .is_err()
        );
        assert!(store.authenticate(&HeaderMap::new()).is_err());
        for scheme in [
            "bearer sk-alice",
            "BEARER sk-alice",
            "Bearer   sk-alice ",
            "bEaReR\tsk-alice",
        ] {
            assert!(
                store
                    .authenticate(&headers("authorization", scheme))
                    .is_ok(),
                "{scheme}"
            );
        }
        for wrong in [
            "Basic sk-alice",
            "Bearer",
            "Bearersk-alice",
            "Token sk-alice",
        ] {
            assert!(
                store
                    .authenticate(&headers("authorization", wrong))
                    .is_err(),
                "{wrong}"
            );
        }
        assert!(store.is_admin(&headers("authorization", "Bearer sk-admin")));
        assert!(!store.is_admin(&headers("authorization", "Bearer sk-alice")));
    }

    #[test]
    fn a_key_found_once_is_found_by_its_tag_and_expiry_still_holds() {
        let store = KeyStore::new(&Auth {
            keys: vec![
                virtual_key("alice", "sk-alice"),
                virtual_key("bob", "sk-bob"),
            ],
            ..Auth::default()
        });
        let bob = headers("authorization", "Bearer sk-bob");
        assert!(
            store
                .authenticate(&headers("x-api-key", "sk-mallory"))
                .is_err()
        );
        assert_eq!(store.verified.len(), 0, "a wrong key is never remembered");
        assert_eq!(store.authenticate(&bob).unwrap().key.name, "bob");
        assert_eq!(store.verified.len(), 1);
        assert_eq!(store.verified.find(store.verified.tag("sk-bob")), Some(1));
        assert_eq!(store.authenticate(&bob).unwrap().key.name, "bob");
        assert!(store.authenticate(&headers("x-api-key", "sk-bol")).is_err());
        // A remembered tag is what finds a key the next time: one planted
        // for a string that is no key's finds the key it names.
        store.verified.remember(store.verified.tag("sk-planted"), 0);
        let planted = store.authenticate(&headers("x-api-key", "sk-planted"));
        assert_eq!(planted.unwrap().key.name, "alice");

        let mut expired = virtual_key("alice", "sk-alice");
        expired.expires_at_ms = Some(1);
        let store = KeyStore::new(&Auth {
            keys: vec![expired],
            ..Auth::default()
        });
        let alice = headers("authorization", "Bearer sk-alice");
        for _ in 0..2 {
            let err = store.authenticate(&alice).unwrap_err();
            assert!(err.to_string().contains("expired"), "{err}");
        }
        assert_eq!(store.verified.len(), 1);
    }

    #[test]
    fn a_browser_may_send_the_admin_key_as_a_basic_password() {
        let store = store();
        // base64("admin:sk-admin"), base64("anyone:sk-admin"), base64("admin:sk-alice")
        let basic = headers("authorization", "Basic YWRtaW46c2stYWRtaW4=");
        assert!(store.is_admin_reader(&basic));
        assert!(
            !store.is_admin(&basic),
            "the admin API's writes want the key itself"
        );
        assert!(store.is_admin_reader(&headers("authorization", "basic  YW55b25lOnNrLWFkbWlu")));
        assert!(!store.is_admin_reader(&headers("authorization", "Basic YWRtaW46c2stYWxpY2U=")));
        assert!(!store.is_admin_reader(&headers("authorization", "Basic not-base64!")));
        assert!(store.is_admin_reader(&headers("authorization", "Bearer sk-admin")));
        // A Basic credential is never a model key.
        assert!(
            store
                .authenticate(&headers("authorization", "Basic YWRtaW46c2stYWRtaW4="))
                .is_err()
        );
        assert!(!store.is_open());
        assert!(KeyStore::new(&Auth::default()).is_open());
    }

    #[test]
    fn gemini_callers_send_their_key_in_a_header_or_on_gemini_paths_in_the_query() {
        let store = store();
        let gemini = http::Uri::from_static("/v1beta/models/auto:generateContent?key=sk%2Dalice");
        assert!(
            store
                .authenticate_request(&HeaderMap::new(), &gemini)
                .is_ok()
        );
        assert!(
            store
                .authenticate(&headers("x-goog-api-key", "sk-alice"))
                .is_ok()
        );
        // Elsewhere a query is no place for a key.
        let openai = http::Uri::from_static("/v1/chat/completions?key=sk-alice");
        assert!(
            store
                .authenticate_request(&HeaderMap::new(), &openai)
                .is_err()
        );
        assert_eq!(
            query_key(Some("alt=sse&key=AIza%2Dx_1")),
            Some("AIza-x_1".into())
        );
        assert_eq!(query_key(Some("key=")), None);
        assert_eq!(query_key(Some("key=%4")), None);
        assert_eq!(query_key(None), None);
    }
}
