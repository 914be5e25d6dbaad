//! The admin API, for the admin key only: `GET /admin/spend?since=7d&by=key`
//! (the spend report), `GET /admin/budgets?since=7d&by=profile` (budget
//! attainment), `GET /admin/sessions?since=7d&route=agent` (agent task
//! time), `GET /admin/advice?since=7d&target=0.95` (`switchyard advise`),
//! `GET /admin/compare?since=7d&route=R` (shadow candidates beside what
//! served) and `POST /admin/reload` (read the config file again). The
//! request log is `requests`'.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::ledger::{
    AttainmentDimension, Dimension, attainment_report, compare_report, now_ms, parse_since,
    route_budgets, sessions_report,
};
use crate::state::app::App;
use crate::state::live::Live;

/// The answer to anyone without the admin key, on any admin path.
pub fn unauthorized() -> GatewayError {
    GatewayError::Unauthorized {
        message: "the admin API needs the admin key (auth.admin_key_hash)".into(),
    }
}

pub async fn spend(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (since, by) = report_query(app, &req, "key", parse_dimension)?;
    let since_ms = now_ms() - since;
    // Summed by the database itself, PostgreSQL's included.
    let report = on_ledger(app, move |ledger| ledger.spend_report(since_ms, by)).await?;
    Ok(json_response(
        StatusCode::OK,
        &report.priced_on(app.reference.as_ref()),
    ))
}

/// `GET /admin/predictors`: each learned predictor's version and online
/// updates; `?name=NAME`: that predictor's live weights as a weights file,
/// byte for byte what a config's `predictors.*.weights` reads, so what it
/// learned online can be pinned.
pub fn predictors(app: &App, req: &Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let router = &app.router;
    match query_param(req, "name") {
        Some(name) => {
            let predictor = router
                .predictors()
                .find(|p| p.name == name)
                .ok_or_else(|| GatewayError::InvalidField {
                    param: "name".into(),
                    message: format!("no predictor `{name}`"),
                })?;
            Ok(crate::http::json_bytes_response(
                StatusCode::OK,
                predictor.weights().to_json().into(),
            ))
        }
        None => {
            let list: Vec<serde_json::Value> = router
                .predictors()
                .enumerate()
                .map(|(i, p)| {
                    serde_json::json!({
                        "name": p.name,
                        "backend": app.backends[p.backend].name,
                        "version": p.version(),
                        "updates": p.updates(),
                        "record": app.outcome_logs.get(i).and_then(Option::as_ref).map(|log| {
                            serde_json::json!({"file": log.path.display().to_string(), "dropped": log.dropped()})
                        }),
                    })
                })
                .collect();
            Ok(json_response(
                StatusCode::OK,
                &serde_json::json!({"predictors": list}),
            ))
        }
    }
}

/// `GET /admin/budgets?since=7d&by=profile`: the budget-attainment report.
pub async fn budgets(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let (since, by) = report_query(app, &req, "profile", parse_attainment_dimension)?;
    let budgets = route_budgets(&app.config);
    let since_ms = now_ms() - since;
    ledger_report(app, since_ms, move |conn| {
        attainment_report(conn, since_ms, by, &budgets)
    })
    .await
}

/// `GET /admin/advice?since=7d&target=0.95`: `switchyard advise` as JSON.
pub async fn advice(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let since = report_since(app, &req, "7d")?;
    let target = target_param(query(&req))?;
    let config = app.config.clone();
    let now = now_ms();
    ledger_report(app, now - since, move |conn| {
        crate::cli::advice::advise(conn, &config, now - since, now, target)
    })
    .await
}

/// `GET /admin/compare?since=7d&route=R`: each route's shadow candidate
/// beside what served the same requests (`switchyard compare`).
pub async fn compare(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let since = report_since(app, &req, "7d")?;
    let route = query_param(&req, "route");
    let budgets = route_budgets(&app.config);
    let now = now_ms();
    ledger_report(app, now - since, move |conn| {
        compare_report(conn, (now - since, now), route.as_deref(), &budgets)
    })
    .await
}

/// `GET /admin/sessions?since=7d&route=agent`: agent task time per session.
pub async fn sessions(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let since = report_since(app, &req, "7d")?;
    let route = query_param(&req, "route");
    let since_ms = now_ms() - since;
    ledger_report(app, since_ms, move |conn| {
        sessions_report(conn, since_ms, route.as_deref())
    })
    .await
}

/// A query-string parameter's value.
pub fn query_param(req: &Request<Incoming>, name: &str) -> Option<String> {
    query_value(query(req), name)
}

/// A request's query string (empty without one).
fn query(req: &Request<Incoming>) -> &str {
    req.uri().query().unwrap_or("")
}

/// The value of the first `name=value` pair of `query`, percent-decoded
/// as a form is (`%C3%A9` is `é`, `+` a space); a `%` not followed by two
/// hex digits stays as it is, and bytes that decode to no UTF-8 become
/// U+FFFD. Any text at all gives a value or `None`, never a panic.
pub fn query_value(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| percent_decode(v))
}

fn percent_decode(text: &str) -> String {
    let hex = |b: Option<&u8>| b.and_then(|b| char::from(*b).to_digit(16));
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.as_bytes().iter();
    while let Some(&b) = bytes.next() {
        let rest = bytes.as_slice();
        match (b, hex(rest.first()), hex(rest.get(1))) {
            (b'%', Some(hi), Some(lo)) => {
                // Two hex digits: at most 0xFF.
                out.push(u8::try_from(hi * 16 + lo).unwrap_or(b'%'));
                bytes.nth(1);
            }
            (b'+', _, _) => out.push(b' '),
            (b, _, _) => out.push(b),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A report's `since` and `by` from the query string, for the admin key
/// only; `by` defaults to `default_by`.
fn report_query<D>(
    app: &App,
    req: &Request<Incoming>,
    default_by: &str,
    parse_by: fn(&str) -> Result<D, String>,
) -> Result<(i64, D), GatewayError> {
    let since = report_since(app, req, "7d")?;
    let by = by_param(query(req), default_by, parse_by)?;
    Ok((since, by))
}

/// A report's `since` (`default` unless given), for the admin key only.
fn report_since(app: &App, req: &Request<Incoming>, default: &str) -> Result<i64, GatewayError> {
    if !app.keys.is_admin(req.headers()) {
        return Err(unauthorized());
    }
    since_param(query(req), default)
}

/// The `since` of an admin query string (`default` unless given), in
/// milliseconds, or a 400 naming the parameter.
pub fn since_param(query: &str, default: &str) -> Result<i64, GatewayError> {
    let since = query_value(query, "since");
    parse_since(since.as_deref().unwrap_or(default)).map_err(|message| GatewayError::InvalidField {
        param: "since".into(),
        message,
    })
}

/// The `by` of an admin query string (`default` unless given), parsed by
/// `parse_by`, or a 400 naming the parameter.
pub fn by_param<D>(
    query: &str,
    default: &str,
    parse_by: fn(&str) -> Result<D, String>,
) -> Result<D, GatewayError> {
    let by = query_value(query, "by");
    parse_by(by.as_deref().unwrap_or(default)).map_err(|message| GatewayError::InvalidField {
        param: "by".into(),
        message,
    })
}

/// The `target` of `GET /admin/advice` (0.95 unless given): a share
/// between 0 and 1.
pub fn target_param(query: &str) -> Result<f64, GatewayError> {
    match query_value(query, "target") {
        None => Ok(0.95),
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|t| (0.0..=1.0).contains(t))
            .ok_or_else(|| GatewayError::InvalidField {
                param: "target".into(),
                message: format!("`{text}` is not a share between 0 and 1, such as 0.95"),
            }),
    }
}

/// A report read from the ledger off the async threads, as JSON.
async fn ledger_report<R: serde::Serialize + Send + 'static>(
    app: &App,
    since_ms: i64,
    read: impl FnOnce(&rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
) -> Result<Response<Body>, GatewayError> {
    let report = read_ledger(app, since_ms, move |conn| read(conn)).await?;
    Ok(json_response(StatusCode::OK, &report))
}

/// Reads the ledger's rows since `since_ms` off the async threads, on a
/// connection of its own (from every replica when the ledger is in
/// PostgreSQL).
pub async fn read_ledger<R: Send + 'static>(
    app: &App,
    since_ms: i64,
    read: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
) -> Result<R, GatewayError> {
    on_ledger(app, move |ledger| ledger.read(since_ms, read)).await
}

/// Reads one request's rows (by the gateway's id, or the caller's own
/// since `since_ms`) off the async threads.
pub async fn read_ledger_request<R: Send + 'static>(
    app: &App,
    id: String,
    since_ms: i64,
    read: impl FnOnce(&mut rusqlite::Connection) -> rusqlite::Result<R> + Send + 'static,
) -> Result<R, GatewayError> {
    on_ledger(app, move |ledger| ledger.read_request(&id, since_ms, read)).await
}

/// Runs blocking ledger `work` off the async workers.
pub(crate) async fn on_ledger<R: Send + 'static>(
    app: &App,
    work: impl FnOnce(&crate::ledger::Ledger) -> anyhow::Result<R> + Send + 'static,
) -> Result<R, GatewayError> {
    let ledger = app.ledger.clone();
    tokio::task::spawn_blocking(move || work(&ledger))
        .await
        .map_err(|err| GatewayError::Internal {
            message: err.to_string(),
        })?
        .map_err(|err| GatewayError::Internal {
            message: format!("ledger: {err}"),
        })
}

/// Reloads the config file (the caller was checked for the admin key):
/// 200 with what changed, or 422 with the file's first error while the
/// running config stays.
/// `POST /admin/reload[?widen=true]`: `widen=true` lets a config that
/// drops a key's limits (or the admin key) go live.
pub async fn reload(live: &Live, req: &Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let widen = query_param(req, "widen").is_some_and(|v| v == "true" || v == "1");
    let reloaded = live
        .reload("POST /admin/reload", widen)
        .await
        .map_err(|err| GatewayError::ConfigRejected {
            message: format!("{err:#}"),
        })?;
    Ok(json_response(StatusCode::OK, &reloaded))
}

pub fn parse_attainment_dimension(text: &str) -> Result<AttainmentDimension, String> {
    AttainmentDimension::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = AttainmentDimension::ALL.iter().map(|d| d.name()).collect();
        format!("`{text}` is not one of {}", names.join(", "))
    })
}

pub fn parse_dimension(text: &str) -> Result<Dimension, String> {
    Dimension::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = Dimension::ALL.iter().map(|d| d.name()).collect();
        format!("`{text}` is not one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dimensions_parse() {
        assert_eq!(parse_dimension("tier"), Ok(Dimension::Tier));
        assert!(parse_dimension("planet").is_err());
    }

    #[test]
    fn query_values_are_percent_decoded_whatever_they_hold() {
        let q = "since=7%C3%A9&by=a+b&route=%zz%4&empty=&x=%FF&since=1d";
        assert_eq!(query_value(q, "since").as_deref(), Some("7é"));
        assert_eq!(query_value(q, "by").as_deref(), Some("a b"));
        assert_eq!(query_value(q, "route").as_deref(), Some("%zz%4"));
        assert_eq!(query_value(q, "empty").as_deref(), Some(""));
        assert_eq!(query_value(q, "x").as_deref(), Some("\u{FFFD}"));
        assert_eq!(query_value(q, "nope"), None);
        assert_eq!(query_value("", "since"), None);
        for q in ["%", "since=%", "since=%C", "since=%C3", "since=é%", "=&&=="] {
            let _ = query_value(q, "since");
        }
    }

    #[test]
    fn bad_admin_query_values_are_400s_naming_the_parameter() {
        let param = |err: GatewayError| match err {
            GatewayError::InvalidField { param, .. } => param,
            other => panic!("not a 400: {other:?}"),
        };
        assert_eq!(since_param("", "7d").unwrap(), 7 * 86_400_000);
        assert_eq!(
            param(since_param("since=7%C3%A9", "7d").unwrap_err()),
            "since"
        );
        assert_eq!(param(since_param("since=7é", "7d").unwrap_err()), "since");
        assert_eq!(
            by_param("by=tier", "key", parse_dimension).unwrap(),
            Dimension::Tier
        );
        assert_eq!(
            param(by_param("by=é", "key", parse_dimension).unwrap_err()),
            "by"
        );
        assert_eq!(target_param("").unwrap(), 0.95);
        assert_eq!(target_param("target=0.5").unwrap(), 0.5);
        for bad in [
            "target=NaN",
            "target=inf",
            "target=1.5",
            "target=é",
            "target=",
        ] {
            assert_eq!(param(target_param(bad).unwrap_err()), "target", "{bad}");
        }
    }
}
