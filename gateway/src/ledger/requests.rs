//! The request log: the ledger's rows gathered per request (a request's
//! calls share its `request_id`: a fallback's, a hedge's, a cascade's and a
//! shadow copy's rows beside the one that served), filtered and paged for
//! `GET /admin/requests` and `switchyard requests`, and one request's whole
//! record for `GET /admin/requests/{id}`.
//!
//! A request's outcome is its serving call's: the call that answered `ok`,
//! else the last to end of those that failed, else the last to end (a
//! cancelled call, a hedge's losing leg, an answer escalated past). A
//! routing encoder's call (for a semantic rule) never serves, nor does a
//! shadow copy; a copy shows only in the one-request record. A request is
//! in a window when its first call began in it; its calls are read up to
//! [`SPAN_MS`] either side.

use rusqlite::types::Value;
use rusqlite::{Connection, Row};
use serde::Serialize;

use crate::ledger::columns::{COLUMNS, Kind};

/// The most requests one page holds.
pub const MAX_PAGE: u32 = 1000;

/// How far apart one request's calls are read: a request whose calls
/// spread wider than this (retries, fallbacks and hedges take seconds to
/// minutes) shows only its calls within it.
pub const SPAN_MS: i64 = 3_600_000;

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
    /// Requests whose sensitive-data policies acted on this kind (`any`:
    /// on any).
    pub sensitive: Option<String>,
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
            "ok" => StatusClass::Ok,
            "cancelled" | "hedge-lost" => StatusClass::Cancelled,
            _ => StatusClass::Error,
        }
    }

    /// The outcomes of this class, as SQL over the `outcome` column.
    fn sql(self) -> &'static str {
        match self {
            StatusClass::Ok => "outcome = 'ok'",
            StatusClass::Cancelled => "outcome IN ('cancelled', 'hedge-lost')",
            StatusClass::Error => "outcome NOT IN ('ok', 'cancelled', 'hedge-lost')",
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
    /// The sensitive data its policies acted on (kinds, never values),
    /// and what they did (`mask`, `local_only`, `refuse`, `allow`).
    pub sensitive: Option<String>,
    pub sensitive_action: Option<String>,
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
        ORDER BY endpoint <> 'encoder' DESC, status = 'ok' DESC,
                 status NOT IN ('cancelled', 'hedge-lost', 'escalated') DESC,
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
        MAX(sensitive) AS sensitive, MAX(sensitive_action),
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
        sensitive: row.get(20)?,
        sensitive_action: row.get(21)?,
    })
}

/// A page of requests matching `filter`, newest first.
pub fn request_log(conn: &Connection, filter: &RequestFilter) -> rusqlite::Result<RequestLog> {
    // Every condition is a named parameter: a caller's text never becomes SQL.
    // Rows within a span of the window; requests by their first call.
    let mut rows = vec!["ts_ms >= :rows_from"];
    let mut kept = vec!["started >= :since"];
    let text = |v: &Option<String>| v.clone().map_or(Value::Null, Value::Text);
    let mut params: Vec<(&str, Value)> = vec![
        (":since", Value::Integer(filter.since_ms)),
        (
            ":rows_from",
            Value::Integer(filter.since_ms.saturating_sub(SPAN_MS)),
        ),
        (":backend", text(&filter.backend)),
    ];
    if let Some(until) = filter.until_ms {
        rows.push("ts_ms < :rows_to");
        kept.push("started < :until");
        params.push((":until", Value::Integer(until)));
        params.push((":rows_to", Value::Integer(until.saturating_add(SPAN_MS))));
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
    match filter.sensitive.as_deref() {
        None => {}
        Some("any") => kept.push("sensitive IS NOT NULL"),
        Some(kind) => {
            kept.push("(',' || sensitive || ',') LIKE :sensitive");
            params.push((":sensitive", Value::Text(format!("%,{kind},%"))));
        }
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
            "SELECT request_id FROM (
                 SELECT request_id, 0 AS own, ts_ms FROM requests WHERE request_id = ?1
                 UNION ALL SELECT request_id, 1, ts_ms FROM requests
                 WHERE client_request_id = ?1 AND ts_ms >= ?2 AND request_id IS NOT NULL)
             -- The gateway's id first; of a caller's id used twice, the latest.
             ORDER BY own, ts_ms DESC LIMIT 1",
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

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, params};

    use super::*;

    /// One call's row: what the log reads of it.
    fn call(
        conn: &Connection,
        ts_ms: i64,
        id: &str,
        (endpoint, backend): (&str, &str),
        status: &str,
        duration_ms: f64,
    ) {
        conn.execute(
            "INSERT INTO requests (ts_ms, request_id, key, route, backend, tier, dialect, endpoint,
                 input_tokens, cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens,
                 cost_usd, counterfactual_usd, duration_ms, status, reason, hedge, fallback,
                 cache_hit, estimated)
             VALUES (?1, ?2, 'k', CASE WHEN ?3 = 'encoder' THEN NULL ELSE 'r' END, ?4, 'small',
                 'openai', ?3, 10, 2, 1, 5, 0, 0.5, 1, ?5, ?6, 'split', 0, 0, 0, 0)",
            params![ts_ms, id, endpoint, backend, duration_ms, status],
        )
        .unwrap();
    }

    fn ledger() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        crate::ledger::schema::create(&conn).unwrap();
        conn
    }

    fn line(conn: &Connection, id: &str) -> RequestLine {
        request_record(conn, id, 0).unwrap().unwrap().line
    }

    #[test]
    fn the_serving_call_decides_how_a_request_ended() {
        let conn = ledger();
        let t = 10 * SPAN_MS;
        // A routing encoder answered, the chosen backend failed.
        call(&conn, t, "encoded", ("encoder", "embed"), "ok", 5.0);
        call(
            &conn,
            t + 5,
            "encoded",
            ("chat", "small"),
            "upstream_error",
            9.0,
        );
        // A hedge: one leg served, the other lost.
        call(&conn, t, "hedged", ("chat", "small"), "ok", 20.0);
        call(
            &conn,
            t + 3,
            "hedged",
            ("chat", "large"),
            "hedge-lost",
            30.0,
        );
        // The caller left during a hedge.
        call(&conn, t, "left", ("chat", "small"), "cancelled", 20.0);
        call(&conn, t + 3, "left", ("chat", "large"), "hedge-lost", 30.0);
        // A cascade escalated, and the next backend failed.
        call(&conn, t, "escalated", ("chat", "small"), "escalated", 20.0);
        call(
            &conn,
            t + 20,
            "escalated",
            ("chat", "large"),
            "upstream_timeout",
            10.0,
        );
        let of = |id| {
            let l = line(&conn, id);
            (l.status, l.outcome, l.backend, l.calls)
        };
        assert_eq!(
            of("encoded"),
            (
                StatusClass::Error,
                "upstream_error".into(),
                "small".into(),
                2
            )
        );
        assert_eq!(
            of("hedged"),
            (StatusClass::Ok, "ok".into(), "small".into(), 2)
        );
        assert_eq!(of("left").0, StatusClass::Cancelled);
        assert_eq!(
            of("escalated"),
            (
                StatusClass::Error,
                "upstream_timeout".into(),
                "large".into(),
                2
            )
        );
        // Every prompt token, cached or written to a cache, counted.
        assert_eq!(line(&conn, "hedged").input_tokens, 26);
        let errors = request_log(
            &conn,
            &RequestFilter {
                status: Some(StatusClass::Error),
                limit: 10,
                ..RequestFilter::default()
            },
        )
        .unwrap();
        let ids: Vec<&str> = errors
            .requests
            .iter()
            .map(|r| r.request_id.as_str())
            .collect();
        // Same start: by id.
        assert_eq!(ids, ["encoded", "escalated"]);
    }

    #[test]
    fn a_window_holds_the_requests_that_began_in_it_with_all_their_calls() {
        let conn = ledger();
        let (since, until) = (10 * SPAN_MS, 10 * SPAN_MS + 1000);
        // Began before the window, its fallback inside: not in it.
        call(
            &conn,
            since - 10,
            "before",
            ("chat", "small"),
            "upstream_error",
            5.0,
        );
        call(&conn, since + 10, "before", ("chat", "large"), "ok", 5.0);
        // Began inside, its fallback after the window ended: in it, whole.
        call(
            &conn,
            until - 10,
            "inside",
            ("chat", "small"),
            "upstream_error",
            5.0,
        );
        call(&conn, until + 10, "inside", ("chat", "large"), "ok", 5.0);
        let log = request_log(
            &conn,
            &RequestFilter {
                since_ms: since,
                until_ms: Some(until),
                limit: 10,
                ..RequestFilter::default()
            },
        )
        .unwrap();
        assert_eq!(log.requests.len(), 1);
        let inside = &log.requests[0];
        assert_eq!(
            (inside.request_id.as_str(), inside.calls, inside.status),
            ("inside", 2, StatusClass::Ok)
        );
    }
}
