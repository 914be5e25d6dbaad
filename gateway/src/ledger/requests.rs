//! The request log: the ledger's rows gathered per request (a request's
//! calls share its `request_id`: a fallback's, a hedge's, a cascade's and a
//! shadow copy's rows beside the one that served), filtered and paged for
//! `GET /admin/requests` and `switchyard requests`, and one request's whole
//! record for `GET /admin/requests/{id}`.
//!
//! A request's outcome is its serving call's: the call that answered `ok`,
//! else the last to end of those that were not cancelled, else the last to
//! end. Shadow copies never serve; they show only in the one-request record.

use rusqlite::types::Value;
use rusqlite::{Connection, Row};
use serde::Serialize;

use crate::ledger::columns::{COLUMNS, Kind};

/// The most requests one page holds.
pub const MAX_PAGE: u32 = 1000;

/// What `GET /admin/requests` asks for; `None` filters match everything.
#[derive(Debug, Clone, Default)]
pub struct RequestFilter {
    pub since_ms: i64,
    pub until_ms: Option<i64>,
    pub key: Option<String>,
    pub team: Option<String>,
    pub route: Option<String>,
    /// Requests with any call to this backend.
    pub backend: Option<String>,
    pub status: Option<StatusClass>,
    /// The serving call's outcome, exactly (`ok`, `upstream_timeout`, ...).
    pub outcome: Option<String>,
    pub session: Option<String>,
    /// Requests that took at least this long, first call's start to last
    /// call's end.
    pub min_duration_ms: Option<f64>,
    pub limit: u32,
    pub offset: u32,
}

/// How a request ended, coarsely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusClass {
    Ok,
    /// Refused, or every call failed.
    Error,
    /// The caller left first.
    Cancelled,
}

impl StatusClass {
    pub fn parse(text: &str) -> Option<StatusClass> {
        Some(match text {
            "ok" => StatusClass::Ok,
            "error" => StatusClass::Error,
            "cancelled" => StatusClass::Cancelled,
            _ => return None,
        })
    }

    fn of(outcome: &str) -> StatusClass {
        match outcome {
            "ok" | "escalated" => StatusClass::Ok,
            "cancelled" => StatusClass::Cancelled,
            _ => StatusClass::Error,
        }
    }

    /// The outcomes of this class, as SQL over the `outcome` column.
    fn sql(self) -> &'static str {
        match self {
            StatusClass::Ok => "outcome IN ('ok', 'escalated')",
            StatusClass::Cancelled => "outcome = 'cancelled'",
            StatusClass::Error => "outcome NOT IN ('ok', 'escalated', 'cancelled')",
        }
    }
}

/// One request, as a line of the log.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RequestLine {
    pub request_id: String,
    /// The caller's own `x-request-id`, when it sent a plain one (what it
    /// was answered with).
    pub client_request_id: Option<String>,
    /// The first call's start, Unix milliseconds.
    pub ts_ms: i64,
    pub key: Option<String>,
    pub team: Option<String>,
    pub route: Option<String>,
    pub session: Option<String>,
    pub endpoint: String,
    /// The serving call's backend (`-` for a request refused before any).
    pub backend: String,
    pub reason: String,
    pub status: StatusClass,
    pub outcome: String,
    /// Calls made for the caller (shadow copies not counted).
    pub calls: u32,
    pub duration_ms: f64,
    pub ttft_ms: Option<f64>,
    /// Every prompt token, cached or not; `cached_tokens` of them read from
    /// a cache.
    pub input_tokens: i64,
    pub cached_tokens: i64,
    pub output_tokens: i64,
    pub cost_usd: f64,
    /// Why it was refused, in the words the caller got.
    pub refusal: Option<String>,
    /// The serving call's error in the backend's own words, redacted.
    pub error: Option<String>,
}

/// A page of the log, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct RequestLog {
    pub since_ms: i64,
    pub requests: Vec<RequestLine>,
    /// The offset of the next page, when there is one.
    pub next_offset: Option<u32>,
}

/// One request's whole record: its line, and every call's row as stored.
#[derive(Debug, Clone, Serialize)]
pub struct RequestRecord {
    #[serde(flatten)]
    pub line: RequestLine,
    pub calls: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// The calls in the window, each marked `pick = 1` when it is its request's
/// serving call; `{where}` narrows the rows read.
const CALLS: &str = "
    SELECT *, ROW_NUMBER() OVER (
        PARTITION BY request_id
        ORDER BY status IN ('ok', 'escalated') DESC, status <> 'cancelled' DESC,
                 ts_ms + duration_ms DESC, id DESC) AS pick
    FROM requests
    WHERE request_id IS NOT NULL AND COALESCE(shadow, 0) = 0 AND {where}";

/// A request's line from its calls.
const LINE: &str = "
    SELECT request_id,
        MAX(CASE WHEN pick = 1 THEN client_request_id END),
        MIN(ts_ms) AS started,
        MAX(key), MAX(team), MAX(route), MAX(session),
        MAX(CASE WHEN pick = 1 THEN endpoint END),
        MAX(CASE WHEN pick = 1 THEN backend END),
        MAX(CASE WHEN pick = 1 THEN reason END),
        MAX(CASE WHEN pick = 1 THEN status END) AS outcome,
        COUNT(*),
        MAX(ts_ms + duration_ms) - MIN(ts_ms) AS took,
        MAX(CASE WHEN pick = 1 THEN ttft_ms END),
        SUM(input_tokens + cached_tokens + cache_write_tokens),
        SUM(cached_tokens), SUM(output_tokens), SUM(cost_usd),
        MAX(CASE WHEN pick = 1 THEN refusal END),
        MAX(CASE WHEN pick = 1 THEN error END),
        SUM(backend = :backend) AS touched
    FROM calls GROUP BY request_id";

fn line(row: &Row<'_>) -> rusqlite::Result<RequestLine> {
    let outcome: String = row.get(10)?;
    Ok(RequestLine {
        request_id: row.get(0)?,
        client_request_id: row.get(1)?,
        ts_ms: row.get(2)?,
        key: row.get(3)?,
        team: row.get(4)?,
        route: row.get(5)?,
        session: row.get(6)?,
        endpoint: row.get(7)?,
        backend: row.get(8)?,
        reason: row.get(9)?,
        status: StatusClass::of(&outcome),
        outcome,
        calls: row.get(11)?,
        duration_ms: row.get::<_, f64>(12)?.max(0.0),
        ttft_ms: row.get(13)?,
        input_tokens: row.get(14)?,
        cached_tokens: row.get(15)?,
        output_tokens: row.get(16)?,
        cost_usd: row.get(17)?,
        refusal: row.get(18)?,
        error: row.get(19)?,
    })
}

/// A page of requests matching `filter`, newest first.
pub fn request_log(conn: &Connection, filter: &RequestFilter) -> rusqlite::Result<RequestLog> {
    // Every condition is a named parameter: a caller's text never becomes SQL.
    let mut rows = vec!["ts_ms >= :since"];
    let mut kept = vec!["1 = 1"];
    let text = |v: &Option<String>| v.clone().map_or(Value::Null, Value::Text);
    let mut params: Vec<(&str, Value)> = vec![
        (":since", Value::Integer(filter.since_ms)),
        (":backend", text(&filter.backend)),
    ];
    if let Some(until) = filter.until_ms {
        rows.push("ts_ms < :until");
        params.push((":until", Value::Integer(until)));
    }
    for (condition, name, value) in [
        ("key = :key", ":key", &filter.key),
        ("team = :team", ":team", &filter.team),
        ("route = :route", ":route", &filter.route),
        ("session = :session", ":session", &filter.session),
    ] {
        if value.is_some() {
            rows.push(condition);
            params.push((name, text(value)));
        }
    }
    if filter.backend.is_some() {
        kept.push("touched > 0");
    }
    if let Some(status) = filter.status {
        kept.push(status.sql());
    }
    if filter.outcome.is_some() {
        kept.push("outcome = :outcome");
        params.push((":outcome", text(&filter.outcome)));
    }
    if let Some(min) = filter.min_duration_ms {
        kept.push("took >= :min");
        params.push((":min", Value::Real(min)));
    }
    let limit = filter.limit.clamp(1, MAX_PAGE);
    // One more than the page: whether another page follows.
    params.push((":limit", Value::Integer(i64::from(limit) + 1)));
    params.push((":offset", Value::Integer(i64::from(filter.offset))));
    let sql = format!(
        "WITH calls AS ({}), lines AS ({LINE})
         SELECT * FROM lines WHERE {} ORDER BY started DESC, request_id
         LIMIT :limit OFFSET :offset",
        CALLS.replace("{where}", &rows.join(" AND ")),
        kept.join(" AND "),
    );
    let named: Vec<(&str, &dyn rusqlite::ToSql)> = params
        .iter()
        .map(|(name, value)| (*name, value as &dyn rusqlite::ToSql))
        .collect();
    let mut requests: Vec<RequestLine> = conn
        .prepare(&sql)?
        .query_map(named.as_slice(), line)?
        .collect::<rusqlite::Result<_>>()?;
    let more = requests.len() > limit as usize;
    requests.truncate(limit as usize);
    Ok(RequestLog {
        since_ms: filter.since_ms,
        requests,
        next_offset: more.then(|| filter.offset + limit),
    })
}

/// One request's record, found by the gateway's id or the caller's own
/// (`client_request_id`, read from `since_ms` on); `None` when no row has it.
pub fn request_record(
    conn: &Connection,
    id: &str,
    since_ms: i64,
) -> rusqlite::Result<Option<RequestRecord>> {
    let gateway_id: Option<String> = conn
        .query_row(
            "SELECT request_id FROM requests WHERE request_id = ?1
             UNION ALL SELECT request_id FROM requests
             WHERE client_request_id = ?1 AND ts_ms >= ?2 AND request_id IS NOT NULL
             LIMIT 1",
            rusqlite::params![id, since_ms],
            |row| row.get(0),
        )
        .map(Some)
        .or_else(|err| match err {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            err => Err(err),
        })?;
    let Some(gateway_id) = gateway_id else {
        return Ok(None);
    };
    let sql = format!(
        "WITH calls AS ({}), lines AS ({LINE}) SELECT * FROM lines",
        CALLS.replace("{where}", "request_id = :id")
    );
    let params: [(&str, &dyn rusqlite::ToSql); 2] =
        [(":id", &gateway_id), (":backend", &None::<String>)];
    let line = match conn.query_row(&sql, params.as_slice(), line) {
        Ok(line) => line,
        // Only shadow rows (the served row not yet committed): not found yet.
        Err(rusqlite::Error::QueryReturnedNoRows) => return Ok(None),
        Err(err) => return Err(err),
    };
    let mut calls =
        conn.prepare("SELECT * FROM requests WHERE request_id = ?1 ORDER BY ts_ms, id")?;
    let calls = calls
        .query_map([&gateway_id], call_json)?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(RequestRecord { line, calls }))
}

/// A call's row as JSON, every column under its own name (flags as
/// booleans), the store's own `id` left out.
fn call_json(row: &Row<'_>) -> rusqlite::Result<serde_json::Map<String, serde_json::Value>> {
    use serde_json::Value as J;
    let mut out = serde_json::Map::new();
    for column in &COLUMNS {
        let value: Value = row.get(column.name)?;
        let json = match (value, column.kind) {
            (Value::Null, _) => J::Null,
            (Value::Integer(v), Kind::Flag) => J::Bool(v != 0),
            (Value::Integer(v), _) => J::from(v),
            (Value::Real(v), _) => J::from(v),
            (Value::Text(v), _) => J::from(v),
            (Value::Blob(_), _) => J::Null,
        };
        out.insert(column.name.to_owned(), json);
    }
    Ok(out)
}
