//! The request log over HTTP, for the admin key only:
//! `GET /admin/requests?since=1h&key=K&status=error&limit=50` (a page of
//! requests, newest first, with `next_offset` when more follow) and
//! `GET /admin/requests/{id}` (one request's record, by the `x-request-id`
//! its caller saw). `switchyard requests` takes the same filters as flags.

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::admin::api::{query_value, read_ledger, read_ledger_request};
use crate::error::GatewayError;
use crate::http::{Body, json_response};
use crate::ledger::{
    RequestFilter, SPAN_MS, StatusClass, now_ms, parse_since, request_log, request_record,
};
use crate::state::app::App;

/// A page's size unless `limit` says.
const DEFAULT_LIMIT: u32 = 50;

/// The filter that `param` (a query string's or the CLI's values, by
/// name) describes, at `now_ms`; a bad value is a 400 naming it.
pub fn parse_filter(
    param: impl Fn(&str) -> Option<String>,
    now_ms: i64,
) -> Result<RequestFilter, GatewayError> {
    let invalid = |name: &str, message: String| GatewayError::InvalidField {
        param: name.into(),
        message,
    };
    let ago = |name: &str, default: Option<&str>| -> Result<Option<i64>, GatewayError> {
        match param(name).as_deref().or(default) {
            None => Ok(None),
            Some(text) => parse_time(text, now_ms)
                .map(Some)
                .map_err(|message| invalid(name, message)),
        }
    };
    let number = |name: &str| -> Result<Option<u32>, GatewayError> {
        param(name)
            .map(|text| {
                text.parse::<u32>()
                    .map_err(|_| invalid(name, format!("`{text}` is not a whole number")))
            })
            .transpose()
    };
    let status = param("status")
        .map(|text| {
            StatusClass::parse(&text).ok_or_else(|| {
                invalid(
                    "status",
                    format!("`{text}` is not one of ok, error, cancelled"),
                )
            })
        })
        .transpose()?;
    let min_duration_ms = param("min_ms")
        .map(|text| {
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| {
                    invalid(
                        "min_ms",
                        format!("`{text}` is not a number of milliseconds"),
                    )
                })
        })
        .transpose()?;
    let sensitive = param("sensitive")
        .map(|text| {
            if text == "any" || switchyard_policies::SENSITIVE_KINDS.contains(&text.as_str()) {
                Ok(text)
            } else {
                Err(invalid(
                    "sensitive",
                    format!(
                        "`{text}` is not any or one of {}",
                        switchyard_policies::SENSITIVE_KINDS.join(", ")
                    ),
                ))
            }
        })
        .transpose()?;
    let limit = number("limit")?.unwrap_or(DEFAULT_LIMIT);
    if limit == 0 || limit > crate::ledger::MAX_PAGE {
        return Err(invalid(
            "limit",
            format!("{limit} is not between 1 and {}", crate::ledger::MAX_PAGE),
        ));
    }
    Ok(RequestFilter {
        since_ms: ago("since", Some("7d"))?.unwrap_or(0),
        until_ms: ago("until", None)?,
        key: param("key"),
        team: param("team"),
        route: param("route"),
        backend: param("backend"),
        status,
        outcome: param("outcome"),
        session: param("session"),
        min_duration_ms,
        sensitive,
        limit,
        offset: number("offset")?.unwrap_or(0),
    })
}

/// A point in time: a duration ago (`7d`, `24h`, `30m`) or Unix
/// milliseconds (`1764720000000`).
fn parse_time(text: &str, now_ms: i64) -> Result<i64, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map_err(|_| format!("`{text}` is too large a time"));
    }
    parse_since(text)
        .map(|ago| now_ms.saturating_sub(ago))
        .map_err(|_| {
            format!("`{text}` is neither a duration such as 7d, 24h or 30m nor Unix milliseconds")
        })
}

/// `GET /admin/requests`: a page of the request log.
pub async fn list(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let query = req.uri().query().unwrap_or("").to_owned();
    let filter = parse_filter(|name| query_value(&query, name), now_ms())?;
    // A request's calls may begin up to a span before its window's rows.
    let rows_from = filter.since_ms.saturating_sub(SPAN_MS);
    let log = read_ledger(app, rows_from, move |conn| request_log(conn, &filter)).await?;
    Ok(json_response(StatusCode::OK, &log))
}

/// `GET /admin/requests/{id}`: one request's record, or 404.
pub async fn one(
    app: &App,
    req: Request<Incoming>,
    id: String,
) -> Result<Response<Body>, GatewayError> {
    let query = req.uri().query().unwrap_or("");
    let since_ms = parse_filter(|name| query_value(query, name), now_ms())?.since_ms;
    let lookup = id.clone();
    let record = read_ledger_request(app, id.clone(), since_ms, move |conn| {
        request_record(conn, &lookup, since_ms)
    })
    .await?;
    match record {
        Some(record) => Ok(json_response(StatusCode::OK, &record)),
        None => Err(GatewayError::NotFound {
            path: format!("/admin/requests/{id}"),
        }),
    }
}

/// The id a `/admin/requests/{id}` path names.
pub fn requested_id(path: &str) -> Option<&str> {
    let path = path.strip_prefix("/v1").unwrap_or(path);
    path.strip_prefix("/admin/requests/")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_read_durations_and_times_and_refuse_nonsense() {
        let now = 10_000_000_000;
        let params = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let f = parse_filter(params(&[]), now).unwrap();
        assert_eq!(f.since_ms, now - 7 * 86_400_000);
        assert_eq!((f.limit, f.offset, f.until_ms), (50, 0, None));
        let f = parse_filter(
            params(&[
                ("since", "2h"),
                ("until", "5000"),
                ("status", "error"),
                ("min_ms", "250"),
            ]),
            now,
        )
        .unwrap();
        assert_eq!(f.since_ms, now - 7_200_000);
        assert_eq!(f.until_ms, Some(5000));
        assert_eq!(f.status, Some(StatusClass::Error));
        assert_eq!(f.min_duration_ms, Some(250.0));
        for (name, value) in [
            ("status", "failed"),
            ("limit", "0"),
            ("limit", "5000"),
            ("offset", "-1"),
            ("since", "yesterday"),
            ("min_ms", "NaN"),
        ] {
            let pairs: &'static [(&str, &str)] = Box::leak(Box::new([(name, value)]));
            let err = parse_filter(params(pairs), now).unwrap_err();
            assert!(err.to_string().contains(name), "{name}={value}: {err}");
        }
    }
}
