//! The admin API, for the admin key only: `GET /admin/spend?since=7d&by=key`
//! (the spend report), `GET /admin/budgets?since=7d&by=profile` (budget
//! attainment), `GET /admin/sessions?since=1d&route=agent` (agent task
//! time), `GET /admin/advice?since=7d&target=0.95` (`switchyard advise`)
//! and `POST /admin/reload` (read the config file again).

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::ledger::{
    AttainmentDimension, Dimension, attainment_report, now_ms, route_budgets, sessions_report,
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
    Ok(json_response(StatusCode::OK, &report))
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
    let target = match query_param(&req, "target") {
        None => 0.95,
        Some(text) => text
            .parse::<f64>()
            .ok()
            .filter(|t| (0.0..=1.0).contains(t))
            .ok_or_else(|| GatewayError::InvalidField {
                param: "target".into(),
                message: format!("`{text}` is not a share between 0 and 1, such as 0.95"),
            })?,
    };
    let config = app.config.clone();
    let now = now_ms();
    ledger_report(app, now - since, move |conn| {
        crate::cli::advice::advise(conn, &config, now - since, now, target)
    })
    .await
}

/// `GET /admin/sessions?since=1d&route=agent`: agent task time per session.
pub async fn sessions(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let since = report_since(app, &req, "1d")?;
    let route = query_param(&req, "route");
    let since_ms = now_ms() - since;
    ledger_report(app, since_ms, move |conn| {
        sessions_report(conn, since_ms, route.as_deref())
    })
    .await
}

/// A query-string parameter's value.
pub fn query_param(req: &Request<Incoming>, name: &str) -> Option<String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
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
    let by =
        parse_by(query_param(req, "by").as_deref().unwrap_or(default_by)).map_err(|message| {
            GatewayError::InvalidField {
                param: "by".into(),
                message,
            }
        })?;
    Ok((since, by))
}

/// A report's `since` (`default` unless given), for the admin key only.
fn report_since(app: &App, req: &Request<Incoming>, default: &str) -> Result<i64, GatewayError> {
    if !app.keys.is_admin(req.headers()) {
        return Err(unauthorized());
    }
    parse_since(query_param(req, "since").as_deref().unwrap_or(default)).map_err(|message| {
        GatewayError::InvalidField {
            param: "since".into(),
            message,
        }
    })
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

/// Runs blocking ledger `work` off the async workers.
async fn on_ledger<R: Send + 'static>(
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
pub async fn reload(live: &Live) -> Result<Response<Body>, GatewayError> {
    let reloaded =
        live.reload("POST /admin/reload")
            .await
            .map_err(|err| GatewayError::ConfigRejected {
                message: format!("{err:#}"),
            })?;
    Ok(json_response(StatusCode::OK, &reloaded))
}

/// `7d`, `24h`, `30m` -> milliseconds.
pub fn parse_since(text: &str) -> Result<i64, String> {
    let bad = || format!("`{text}` is not a duration such as 7d, 24h or 30m");
    let (number, unit) = text.split_at(text.len().saturating_sub(1));
    let n: i64 = number.parse().map_err(|_| bad())?;
    let unit_ms = match unit {
        "d" => 86_400_000,
        "h" => 3_600_000,
        "m" => 60_000,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_ms).filter(|ms| *ms >= 0).ok_or_else(bad)
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
    fn durations_parse() {
        assert_eq!(parse_since("7d"), Ok(7 * 86_400_000));
        assert_eq!(parse_since("30m"), Ok(30 * 60_000));
        assert!(parse_since("soon").is_err());
        assert!(parse_since("-1d").is_err());
        assert_eq!(parse_dimension("tier"), Ok(Dimension::Tier));
    }
}
