//! Keys as data, for the admin key only:
//! - `GET /admin/keys`: every key, the config file's and the stored ones;
//! - `POST /admin/keys` with `{"name": ...}` and any of `team`, `models`,
//!   `budget`, `requests_per_minute`, `tokens_per_minute`,
//!   `may_name_backends`, `expires_in` (`30d`) or `expires_at_ms`: 201 with
//!   the new secret in `key`, shown this once;
//! - `GET /admin/keys/{name}`: one key and its audit trail;
//! - `PATCH /admin/keys/{name}`: change those fields (`null` takes one out);
//! - `POST /admin/keys/{name}/rotate`: a new secret, the old one refused;
//! - `DELETE /admin/keys/{name}`: revoked.
//!
//! A stored key is an `auth.keys[]` entry (its hash, never the secret)
//! checked as the file's are, kept in the ledger's database; every change
//! is audited there, and the running config is rebuilt with it before the
//! answer goes out, so the next request sees it.

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use serde::Serialize;
use serde_json::{Map, Value};
use switchyard_policies::VirtualKey;

use crate::admin::api::on_ledger;
use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::ledger::keys::{AuditEntry, StoredKey, Write};
use crate::ledger::{now_ms, parse_since};
use crate::state::app::App;
use crate::state::live::Live;

/// The fields a body may set, besides `name` and the expiry.
const FIELDS: [&str; 7] = [
    "team",
    "models",
    "budget",
    "requests_per_minute",
    "tokens_per_minute",
    "may_name_backends",
    "sensitive",
];

/// A key as the API shows it: never its hash or secret.
#[derive(Debug, Serialize)]
struct KeyView {
    name: String,
    /// `config` (the file's: change it there) or `api`.
    source: &'static str,
    /// `active`, `expired` or `revoked`.
    state: &'static str,
    #[serde(flatten)]
    fields: Map<String, Value>,
    created_ms: Option<i64>,
    updated_ms: Option<i64>,
    expires_at_ms: Option<i64>,
    revoked_ms: Option<i64>,
    /// The secret, in the answer that made it only.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit: Option<Vec<AuditEntry>>,
    /// The change is stored but this replica's running config was not
    /// rebuilt with it yet (it is retried within seconds): why.
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

fn stored_view(key: &StoredKey, now: i64) -> KeyView {
    let fields = key
        .spec
        .as_object()
        .map(|spec| {
            FIELDS
                .iter()
                .filter_map(|f| Some(((*f).to_owned(), spec.get(*f)?.clone())))
                .collect()
        })
        .unwrap_or_default();
    KeyView {
        name: key.name.clone(),
        source: "api",
        state: if key.revoked_ms.is_some() {
            "revoked"
        } else if key.expires_at_ms.is_some_and(|at| now >= at) {
            "expired"
        } else {
            "active"
        },
        fields,
        created_ms: Some(key.created_ms),
        updated_ms: Some(key.updated_ms),
        expires_at_ms: key.expires_at_ms,
        revoked_ms: key.revoked_ms,
        key: None,
        audit: None,
        warning: None,
    }
}

fn file_view(key: &VirtualKey) -> KeyView {
    let mut fields = Map::new();
    if let Some(team) = &key.team {
        fields.insert("team".into(), team.clone().into());
    }
    if let Some(models) = &key.models {
        fields.insert("models".into(), models.0.clone().into());
    }
    if let Some(budget) = &key.budget {
        let mut limit = Map::new();
        limit.insert("daily_usd".into(), budget.daily_usd.into());
        limit.insert("monthly_usd".into(), budget.monthly_usd.into());
        fields.insert("budget".into(), limit.into());
    }
    fields.insert("requests_per_minute".into(), key.requests_per_minute.into());
    fields.insert("tokens_per_minute".into(), key.tokens_per_minute.into());
    fields.insert("may_name_backends".into(), key.may_name_backends.into());
    KeyView {
        name: key.name.clone(),
        source: "config",
        state: "active",
        fields,
        created_ms: None,
        updated_ms: None,
        expires_at_ms: None,
        revoked_ms: None,
        key: None,
        audit: None,
        warning: None,
    }
}

/// What `/admin/keys...` a request names: the key's name, and whether it
/// asks to rotate.
pub fn key_path(path: &str) -> Option<(&str, bool)> {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    let rest = path.strip_prefix("/admin/keys/")?;
    let (name, rotate) = match rest.strip_suffix("/rotate") {
        Some(name) => (name, true),
        None => (rest, false),
    };
    (!name.is_empty() && !name.contains('/')).then_some((name, rotate))
}

/// `/admin/keys`: the list, or a new key.
pub async fn collection(
    live: &Live,
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    match *req.method() {
        Method::GET => {
            let stored = on_ledger(app, |ledger| ledger.stored_keys()).await?;
            let now = now_ms();
            let mut keys: Vec<KeyView> = app
                .config
                .auth
                .keys
                .iter()
                .filter(|k| !k.from_api)
                .map(file_view)
                .collect();
            keys.extend(stored.iter().map(|k| stored_view(k, now)));
            Ok(json_response(
                StatusCode::OK,
                &serde_json::json!({"keys": keys}),
            ))
        }
        Method::POST => create(live, app, req).await,
        _ => Err(not_allowed(&req, "GET, POST")),
    }
}

/// `/admin/keys/{name}[/rotate]`.
pub async fn one(
    live: &Live,
    app: &App,
    req: Request<Incoming>,
    name: String,
    rotate: bool,
) -> Result<Response<Body>, GatewayError> {
    let method = req.method().clone();
    if rotate {
        return match method {
            Method::POST => change(live, app, req, &name, Change::Rotate).await,
            _ => Err(not_allowed(&req, "POST")),
        };
    }
    match method {
        Method::GET => {
            let of = name.clone();
            let (stored, audit) = on_ledger(app, move |ledger| {
                Ok((ledger.stored_keys()?, ledger.key_audit(&of)?))
            })
            .await?;
            let mut view = match stored.iter().find(|k| k.name == name) {
                Some(key) => stored_view(key, now_ms()),
                None => file_view(file_key(app, &name).ok_or_else(|| no_key(&name))?),
            };
            view.audit = Some(audit);
            Ok(json_response(StatusCode::OK, &view))
        }
        Method::PATCH => change(live, app, req, &name, Change::Update).await,
        Method::DELETE => change(live, app, req, &name, Change::Revoke).await,
        _ => Err(not_allowed(&req, "GET, PATCH, DELETE")),
    }
}

enum Change {
    Update,
    Rotate,
    Revoke,
}

async fn create(
    live: &Live,
    app: &App,
    req: Request<Incoming>,
) -> Result<Response<Body>, GatewayError> {
    let actor = actor(&req);
    let body = read_object(app, req).await?;
    let name = match body.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => return Err(invalid("name", "a key needs a `name` (a string)".into())),
    };
    if name.is_empty()
        || name.len() > 64
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(invalid(
            "name",
            format!("`{name}` is not 1 to 64 of A-Z, a-z, 0-9, `.`, `_`, `-`"),
        ));
    }
    if file_key(app, &name).is_some() {
        return Err(taken(&name));
    }
    let (secret, hash) = new_secret();
    let mut spec = Map::new();
    spec.insert("name".into(), name.clone().into());
    spec.insert("hash".into(), hash.into());
    let expires_at_ms = apply_fields(&mut spec, &body, None)?;
    let now = now_ms();
    let key = StoredKey {
        name: name.clone(),
        spec: Value::Object(spec),
        created_ms: now,
        updated_ms: now,
        expires_at_ms,
        revoked_ms: None,
        version: 1,
    };
    check(app, &key)?;
    let audit = audit_of(&actor, "create", &name, &body, now);
    let stored = key.clone();
    if !on_ledger(app, move |ledger| {
        ledger.put_key(&stored, &audit, Write::Create)
    })
    .await?
    {
        return Err(taken(&name));
    }
    let mut view = stored_view(&key, now);
    // The key is stored: its secret goes back whatever happens next, or
    // nobody could ever use it.
    view.key = Some(secret);
    view.warning = go_live(live, "key created").await.err();
    Ok(json_response(StatusCode::CREATED, &view))
}

async fn change(
    live: &Live,
    app: &App,
    req: Request<Incoming>,
    name: &str,
    change: Change,
) -> Result<Response<Body>, GatewayError> {
    let actor = actor(&req);
    let body = match change {
        Change::Update => read_object(app, req).await?,
        Change::Rotate | Change::Revoke => Map::new(),
    };
    let stored = on_ledger(app, |ledger| ledger.stored_keys()).await?;
    let Some(mut key) = stored
        .into_iter()
        .find(|k| k.name == name && k.revoked_ms.is_none())
    else {
        if file_key(app, name).is_some() {
            return Err(GatewayError::Conflict {
                message: format!(
                    "the key `{name}` is in the config file: change or remove it there"
                ),
            });
        }
        return Err(no_key(name));
    };
    let now = now_ms();
    let mut secret = None;
    let action = match change {
        Change::Update => {
            if body.contains_key("name") {
                return Err(invalid("name", "a key's name cannot change".into()));
            }
            let spec = key
                .spec
                .as_object_mut()
                .ok_or_else(|| internal("a stored key's spec is not an object"))?;
            key.expires_at_ms = apply_fields(spec, &body, Some(key.expires_at_ms))?;
            "update"
        }
        Change::Rotate => {
            let (new, hash) = new_secret();
            key.spec
                .as_object_mut()
                .ok_or_else(|| internal("a stored key's spec is not an object"))?
                .insert("hash".into(), hash.into());
            secret = Some(new);
            "rotate"
        }
        Change::Revoke => {
            key.revoked_ms = Some(now);
            "revoke"
        }
    };
    key.updated_ms = now;
    if key.revoked_ms.is_none() {
        check(app, &key)?;
    }
    let audit = audit_of(&actor, action, name, &body, now);
    let (written, how) = (
        key.clone(),
        Write::Change {
            from_version: key.version,
        },
    );
    if !on_ledger(app, move |ledger| ledger.put_key(&written, &audit, how)).await? {
        // Changed (or revoked) since it was read: this change would undo that one.
        return Err(GatewayError::Conflict {
            message: format!(
                "the key `{name}` changed while this was made; read it again and retry"
            ),
        });
    }
    key.version += 1;
    let mut view = stored_view(&key, now);
    view.key = secret;
    view.warning = go_live(live, action).await.err();
    Ok(json_response(StatusCode::OK, &view))
}

/// Sets `spec`'s fields from `body` (`null` takes one out) and answers the
/// expiry: `expires_in` (a duration from now) or `expires_at_ms`, else
/// `current` (the key's, when changing one).
fn apply_fields(
    spec: &mut Map<String, Value>,
    body: &Map<String, Value>,
    current: Option<Option<i64>>,
) -> Result<Option<i64>, GatewayError> {
    if let Some(field) = body.keys().find(|k| {
        !FIELDS.contains(&k.as_str())
            && !matches!(k.as_str(), "name" | "expires_in" | "expires_at_ms")
    }) {
        return Err(invalid(
            field,
            format!(
                "unknown field; a key takes name, {}, expires_in, expires_at_ms",
                FIELDS.join(", ")
            ),
        ));
    }
    for field in FIELDS {
        match body.get(field) {
            None => {}
            Some(Value::Null) => {
                spec.remove(field);
            }
            Some(value) => {
                spec.insert(field.to_owned(), value.clone());
            }
        }
    }
    let now = now_ms();
    match (body.get("expires_in"), body.get("expires_at_ms")) {
        (Some(_), Some(_)) => Err(invalid(
            "expires_in",
            "give expires_in or expires_at_ms, not both".into(),
        )),
        (Some(Value::String(text)), None) => match parse_since(text) {
            Ok(0) => Err(invalid("expires_in", "must be longer than nothing".into())),
            Ok(ms) => Ok(Some(now.saturating_add(ms))),
            Err(message) => Err(invalid("expires_in", message)),
        },
        (Some(Value::Null), None) | (None, Some(Value::Null)) => Ok(None),
        (Some(_), None) => Err(invalid(
            "expires_in",
            "a duration such as 30d, 12h or 90m".into(),
        )),
        (None, Some(value)) => match value.as_i64() {
            Some(at) if at > now => Ok(Some(at)),
            Some(_) => Err(invalid("expires_at_ms", "must be in the future".into())),
            None => Err(invalid(
                "expires_at_ms",
                "Unix milliseconds, an integer".into(),
            )),
        },
        (None, None) => Ok(current.flatten()),
    }
}

/// The key checked as the config file's are, against the running config.
fn check(app: &App, key: &StoredKey) -> Result<(), GatewayError> {
    app.config
        .stored_key(&key.spec, key.expires_at_ms)
        .map(drop)
        .map_err(|err| {
            // `keys.NAME.FIELD...`: the field as the request body has it
            // (`budget.daily_usd`); the whole key when it names none.
            let prefix = format!("keys.{}.", key.name);
            let field = err.path.strip_prefix(&prefix).unwrap_or("key");
            invalid(field, err.message)
        })
}

/// A new secret (32 random bytes from the operating system's generator,
/// hex) and its hash as config writes it.
fn new_secret() -> (String, String) {
    let bytes: [u8; 32] = rand::random();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let secret = format!("sk-sy-{hex}");
    let hash = crate::admit::access::hash_text(&secret);
    (secret, hash)
}

/// Who made a change: the admin key, and the client's own words for itself.
fn actor(req: &Request<Incoming>) -> String {
    let agent = req
        .headers()
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.chars().take(120).collect::<String>());
    match agent {
        Some(agent) => format!("admin key ({agent})"),
        None => "admin key".to_owned(),
    }
}

fn audit_of(
    actor: &str,
    action: &str,
    name: &str,
    body: &Map<String, Value>,
    ts_ms: i64,
) -> AuditEntry {
    AuditEntry {
        ts_ms,
        actor: actor.to_owned(),
        action: action.to_owned(),
        name: name.to_owned(),
        detail: Value::Object(body.clone()),
    }
}

fn file_key<'a>(app: &'a App, name: &str) -> Option<&'a VirtualKey> {
    app.config
        .auth
        .keys
        .iter()
        .find(|k| !k.from_api && k.name == name)
}

async fn read_object(
    app: &App,
    req: Request<Incoming>,
) -> Result<Map<String, Value>, GatewayError> {
    let (parts, body) = req.into_parts();
    let bytes = app.read_body(&parts, body).await?;
    match crate::http::parse_json::<Value>(&bytes)? {
        Value::Object(map) => Ok(map),
        _ => Err(GatewayError::MalformedJson {
            message: "send a JSON object".into(),
        }),
    }
}

/// The config rebuilt with the stored keys as they are now; the error's
/// words when it could not be (the stored keys' watcher tries again).
async fn go_live(live: &Live, trigger: &str) -> Result<(), String> {
    live.rebuild_running(trigger).await.map_err(|err| {
        tracing::error!(trigger, error = %err, "key stored, running config not rebuilt");
        format!("stored, but not in effect here yet (retried within seconds): {err}")
    })
}

fn invalid(param: &str, message: String) -> GatewayError {
    GatewayError::InvalidField {
        param: param.to_owned(),
        message,
    }
}

fn internal(message: &str) -> GatewayError {
    GatewayError::Internal {
        message: message.to_owned(),
    }
}

fn no_key(name: &str) -> GatewayError {
    GatewayError::NotFound {
        path: format!("/admin/keys/{name}"),
    }
}

fn taken(name: &str) -> GatewayError {
    GatewayError::Conflict {
        message: format!("a key named `{name}` exists: pick another name, or revoke it first"),
    }
}

fn not_allowed(req: &Request<Incoming>, allowed: &'static str) -> GatewayError {
    GatewayError::MethodNotAllowed {
        path: req.uri().path().to_owned(),
        method: req.method().to_string(),
        allowed,
    }
}
