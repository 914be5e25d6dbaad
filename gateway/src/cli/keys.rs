//! `switchyard keys`: the admin API's keys (`/admin/keys`) from the command
//! line, against a running gateway (`--url`, or `SWITCHYARD_URL`), with the
//! admin key from `SWITCHYARD_ADMIN_KEY` (never an argument: it would land
//! in the shell's history). A new or rotated secret is printed once.

use std::io::Write;
use std::time::Duration;

use bytes::Bytes;
use clap::{Args, Subcommand};
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use serde_json::{Map, Value, json};

use crate::cli::report_text::{self, Rows};

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: KeysAction,
    /// The gateway's address (else `SWITCHYARD_URL`, else
    /// http://127.0.0.1:8080).
    #[arg(long, global = true)]
    pub url: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Every key: the config file's and those made here.
    List {
        /// table or json.
        #[arg(long, default_value = "table")]
        format: String,
    },
    /// Make a key; its secret is printed this once.
    Create {
        name: String,
        #[command(flatten)]
        fields: KeyFields,
    },
    /// One key and its audit trail.
    Get { name: String },
    /// Change a key's fields (`--clear FIELD` takes one out).
    Update {
        name: String,
        #[command(flatten)]
        fields: KeyFields,
        /// A field to take out (repeatable): team, models, budget,
        /// requests_per_minute, tokens_per_minute, expiry.
        #[arg(long = "clear", value_name = "FIELD")]
        clear: Vec<String>,
    },
    /// A new secret for a key; the old one stops working at once.
    Rotate { name: String },
    /// Revoke a key: its next request is refused.
    Revoke { name: String },
}

#[derive(Debug, Args)]
pub struct KeyFields {
    /// The key's team (one under auth.teams).
    #[arg(long)]
    team: Option<String>,
    /// Models the key may use, comma-separated (`*` wildcards).
    #[arg(long, value_delimiter = ',')]
    models: Option<Vec<String>>,
    #[arg(long)]
    daily_usd: Option<f64>,
    #[arg(long)]
    monthly_usd: Option<f64>,
    #[arg(long)]
    requests_per_minute: Option<u32>,
    #[arg(long)]
    tokens_per_minute: Option<u32>,
    /// Whether the key may name a backend directly.
    #[arg(long)]
    may_name_backends: Option<bool>,
    /// Expire after this long: 30d, 12h, 90m.
    #[arg(long)]
    expires_in: Option<String>,
}

impl KeyFields {
    fn body(&self) -> Map<String, Value> {
        let mut body = Map::new();
        let mut set = |name: &str, value: Option<Value>| {
            if let Some(value) = value {
                body.insert(name.to_owned(), value);
            }
        };
        set("team", self.team.clone().map(Value::from));
        set("models", self.models.clone().map(Value::from));
        set(
            "requests_per_minute",
            self.requests_per_minute.map(Value::from),
        );
        set("tokens_per_minute", self.tokens_per_minute.map(Value::from));
        set("may_name_backends", self.may_name_backends.map(Value::from));
        set("expires_in", self.expires_in.clone().map(Value::from));
        if self.daily_usd.is_some() || self.monthly_usd.is_some() {
            let mut budget = Map::new();
            if let Some(daily) = self.daily_usd {
                budget.insert("daily_usd".into(), daily.into());
            }
            if let Some(monthly) = self.monthly_usd {
                budget.insert("monthly_usd".into(), monthly.into());
            }
            body.insert("budget".into(), budget.into());
        }
        body
    }
}

pub fn run(args: &KeysArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let url = args
        .url
        .clone()
        .or_else(|| std::env::var("SWITCHYARD_URL").ok())
        .unwrap_or_else(|| "http://127.0.0.1:8080".to_owned());
    let base = url.trim_end_matches('/');
    let one = |name: &str| format!("{base}/admin/keys/{name}");
    let (method, url, body) = match &args.action {
        KeysAction::List { .. } => (Method::GET, format!("{base}/admin/keys"), None),
        KeysAction::Create { name, fields } => {
            let mut body = fields.body();
            body.insert("name".into(), name.clone().into());
            (Method::POST, format!("{base}/admin/keys"), Some(body))
        }
        KeysAction::Get { name } => (Method::GET, one(name), None),
        KeysAction::Update {
            name,
            fields,
            clear,
        } => {
            let mut body = fields.body();
            for field in clear {
                let field = if field == "expiry" {
                    "expires_at_ms"
                } else {
                    field
                };
                body.insert(field.to_owned(), Value::Null);
            }
            (Method::PATCH, one(name), Some(body))
        }
        KeysAction::Rotate { name } => (
            Method::POST,
            format!("{}/rotate", one(name)),
            Some(Map::new()),
        ),
        KeysAction::Revoke { name } => (Method::DELETE, one(name), None),
    };
    let answer = call(method, &url, body)?;
    match &args.action {
        KeysAction::List { format } if format == "table" => {
            let keys = answer["keys"].as_array().cloned().unwrap_or_default();
            let rows: Rows = keys
                .iter()
                .map(|k| {
                    let text = |v: &Value| match v {
                        Value::Null => "-".to_owned(),
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let cells = COLUMNS.iter().map(|f| text(&k[*f])).collect();
                    (text(&k["name"]), cells)
                })
                .collect();
            report_text::write(out, "table", &answer, ("name", &COLUMNS, &rows))
        }
        KeysAction::List { format } if format != "json" => {
            anyhow::bail!("--format: `{format}` is not one of table, json")
        }
        _ => {
            serde_json::to_writer_pretty(&mut *out, &answer)?;
            writeln!(out)?;
            Ok(())
        }
    }
}

/// `keys list`'s table, after the name.
const COLUMNS: [&str; 6] = [
    "source",
    "state",
    "team",
    "models",
    "budget",
    "expires_at_ms",
];

/// One call to the admin API; an error answer becomes the error, in the
/// gateway's words.
fn call(method: Method, url: &str, body: Option<Map<String, Value>>) -> anyhow::Result<Value> {
    let admin = std::env::var("SWITCHYARD_ADMIN_KEY").map_err(|_| {
        anyhow::anyhow!(
            "set SWITCHYARD_ADMIN_KEY to the admin key (auth.admin_key_hash is its hash)"
        )
    })?;
    let bytes = body.map_or_else(Bytes::new, |b| Bytes::from(Value::Object(b).to_string()));
    let request = Request::builder()
        .method(method)
        .uri(url)
        .header(http::header::AUTHORIZATION, format!("Bearer {admin}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("switchyard-cli/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(bytes))?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, body) = runtime.block_on(async {
        let client = switchyard_adapters::upstream::http_client(Duration::from_secs(5))?;
        let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
            .await
            .map_err(|_| anyhow::anyhow!("{url}: no answer within 30 s"))?
            .map_err(|err| anyhow::anyhow!("{url}: {err}"))?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        anyhow::Ok((status, body))
    })?;
    let value: Value = serde_json::from_slice(&body).unwrap_or_else(|_| json!({}));
    if !status.is_success() {
        let message = value["error"]["message"].as_str().unwrap_or("no message");
        anyhow::bail!("{status}: {message}");
    }
    Ok(value)
}
