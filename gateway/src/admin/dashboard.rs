//! The built-in dashboard: `GET /dashboard`, a page served from assets
//! compiled into the binary (uPlot vendored, no network fetch), drawn from
//! `GET /admin/stats?window=1h|24h|7d`; and the request log's page,
//! `GET /dashboard/requests`, drawn from `GET /admin/requests`. Both need the admin key when auth
//! is on; a browser asks for it (HTTP Basic, any user name).

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::Serialize;
use switchyard_policies::PromptClass;
use switchyard_router::latency::{LatencyStore, Shape};

use crate::error::GatewayError;
use crate::http::{Body, json_bytes_response};
use crate::ledger::AttainmentDimension;
use crate::ledger::{LedgerStats, Window, attainment_lines, ledger_stats, now_ms, route_budgets};
use crate::state::app::App;

/// The page's files: path, content type, bytes.
const ASSETS: [(&str, &str, &[u8]); 8] = [
    (
        "/dashboard",
        "text/html; charset=utf-8",
        include_bytes!("../../assets/dashboard/index.html"),
    ),
    (
        "/dashboard/dashboard.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard/dashboard.js"),
    ),
    (
        "/dashboard/dom.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard/dom.js"),
    ),
    (
        "/dashboard/requests",
        "text/html; charset=utf-8",
        include_bytes!("../../assets/dashboard/requests.html"),
    ),
    (
        "/dashboard/requests.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard/requests.js"),
    ),
    (
        "/dashboard/dashboard.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/dashboard/dashboard.css"),
    ),
    (
        "/dashboard/vendor/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../assets/dashboard/vendor/uPlot.iife.min.js"),
    ),
    (
        "/dashboard/vendor/uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../../assets/dashboard/vendor/uPlot.min.css"),
    ),
];

/// The page runs no inline code and fetches only its own origin.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/// Whether `path` is one of the dashboard's.
pub fn is_dashboard_path(path: &str) -> bool {
    path == "/dashboard" || path.starts_with("/dashboard/")
}

/// May the caller see the dashboard and its figures: always when the
/// config sets no keys at all, else with the admin key (a browser's Basic
/// password included).
pub fn may_see(app: &App, headers: &HeaderMap) -> bool {
    app.keys.is_open() || app.keys.is_admin_reader(headers)
}

/// A dashboard file, or the browser's cue to ask for the admin key.
pub fn asset(app: &App, req: &Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let path = match req.uri().path() {
        "/dashboard/" => "/dashboard",
        path => path,
    };
    let Some((_, content_type, bytes)) = ASSETS.iter().find(|(p, _, _)| *p == path) else {
        return Err(GatewayError::NotFound {
            path: path.to_owned(),
        });
    };
    if !may_see(app, req.headers()) && !app.keys.has_admin() {
        // No password could open it: say so rather than have a browser ask.
        return Err(GatewayError::Forbidden {
            message:
                "the dashboard needs an admin key, and the config sets none (auth.admin_key_hash)"
                    .into(),
        });
    }
    if !may_see(app, req.headers()) {
        let mut response = GatewayError::Unauthorized {
            message: "the dashboard needs the admin key: give it as the password (any user name)"
                .into(),
        }
        .into_response();
        response.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"switchyard\", charset=\"UTF-8\""),
        );
        return Ok(response);
    }
    let mut response = Response::new(Full::new(Bytes::from_static(bytes)).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("content-security-policy", HeaderValue::from_static(CSP));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(response)
}

/// One profile's share of first tokens within its budget.
#[derive(Debug, Serialize)]
struct Attainment {
    profile: String,
    /// Requests whose first token was measured, and those within budget.
    requests: u64,
    within: u64,
    share: Option<f64>,
    budget_ms: Option<f64>,
    min_tokens_per_s: Option<f64>,
}

/// A backend now, and in the window.
#[derive(Debug, Serialize)]
struct BackendNow {
    name: String,
    tier: &'static str,
    breaker: &'static str,
    in_flight: u32,
    queued: usize,
    /// Calls in the window, and those that failed.
    requests: u64,
    errors: u64,
    ttft_p50_ms: Option<f64>,
    /// The median of what routing predicted for the same calls.
    predicted_ttft_ms: Option<f64>,
    decode_tokens_per_s: Option<f64>,
    predicted_decode_tokens_per_s: Option<f64>,
    draft_acceptance: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Stats {
    #[serde(flatten)]
    ledger: LedgerStats,
    attainment: Vec<Attainment>,
    backends: Vec<BackendNow>,
    /// Each route's shadow candidate beside what served the same requests.
    shadows: Vec<crate::ledger::CompareLine>,
    /// The window's longest agent sessions, with their model and measured
    /// tool time.
    sessions: Vec<crate::ledger::SessionLine>,
    /// Interactive first tokens while batch lines ran and otherwise (none
    /// without batch lines in the window), and the batches' throughput.
    batches: Vec<BatchTraffic>,
    batch_tokens_per_hour: Option<f64>,
}

/// Interactive first tokens in one kind of time.
#[derive(Debug, Serialize)]
struct BatchTraffic {
    traffic: &'static str,
    #[serde(flatten)]
    first_tokens: crate::ledger::FirstTokens,
}

/// The most sessions the dashboard lists.
const SESSIONS_SHOWN: usize = 20;

/// `GET /admin/stats?window=1h|24h|7d`: the dashboard's figures.
pub async fn stats(app: &App, req: Request<Incoming>) -> Result<Response<Body>, GatewayError> {
    let name = crate::admin::api::query_param(&req, "window").unwrap_or_else(|| "1h".into());
    let window = Window::named(&name).ok_or_else(|| GatewayError::InvalidField {
        param: "window".into(),
        message: format!("`{name}` is not one of 1h, 24h, 7d"),
    })?;
    if let Some(json) = app.stats_cache.get(window.name) {
        return Ok(json_bytes_response(StatusCode::OK, json));
    }
    let budgets = route_budgets(&app.config);
    let now = now_ms();
    // A bucket more than the window: the first bucket starts before it.
    let since_ms = now - window.length_ms - window.bucket_ms;
    let read = crate::admin::api::read_ledger(app, since_ms, move |conn| {
        // One snapshot: the totals, series and tables agree.
        let tx = conn.transaction()?;
        let stats = ledger_stats(&tx, window, now)?;
        let attainment = attainment_lines(
            &tx,
            now - window.length_ms,
            AttainmentDimension::Profile,
            &budgets,
        )?;
        let per_backend = per_backend(&tx, now - window.length_ms)?;
        let shadows =
            crate::ledger::compare_report(&tx, (now - window.length_ms, now), None, &budgets)?;
        let mut sessions =
            crate::ledger::sessions_report(&tx, now - window.length_ms, None)?.sessions;
        sessions.sort_by(|a, b| b.wall_ms.total_cmp(&a.wall_ms));
        sessions.truncate(SESSIONS_SHOWN);
        let batches = crate::ledger::batch_load(&tx, now - window.length_ms)?;
        tx.commit()?;
        Ok((
            stats,
            attainment,
            per_backend,
            shadows.lines,
            (sessions, batches),
        ))
    })
    .await?;
    let (ledger, attainment, per_backend, shadows, (sessions, load)) = read;
    let batches = if load.batch_calls == 0 {
        Vec::new()
    } else {
        vec![
            BatchTraffic {
                traffic: "while batch lines ran",
                first_tokens: load.interactive_while_batches,
            },
            BatchTraffic {
                traffic: "otherwise",
                first_tokens: load.interactive_otherwise,
            },
        ]
    };
    let attainment = attainment
        .lines
        .into_iter()
        .map(|line| {
            let budget = switchyard_policies::Profile::from_name(&line.group).map(|p| p.budget());
            Attainment {
                within: line
                    .within_ttft_share
                    .map_or(0, |s| (s * line.ttft_measured as f64).round() as u64),
                requests: line.ttft_measured,
                share: line.within_ttft_share,
                budget_ms: budget
                    .and_then(|b| b.ttft)
                    .map(|d| d.as_secs_f64() * 1000.0),
                min_tokens_per_s: budget.map(|b| b.min_tokens_per_s),
                profile: line.group,
            }
        })
        .collect();
    let backends = backends_now(app, &per_backend);
    let stats = Stats {
        ledger,
        attainment,
        backends,
        shadows,
        sessions,
        batches,
        batch_tokens_per_hour: load.batch_tokens_per_hour,
    };
    // Serializing our own types cannot fail (no maps with non-string keys).
    let json = Bytes::from(serde_json::to_vec(&stats).unwrap_or_else(|_| b"{}".to_vec()));
    app.stats_cache.insert(window.name, json.clone());
    Ok(json_bytes_response(StatusCode::OK, json))
}

/// Per backend in the window, of its calls (refusals and cached replays
/// are not calls): how many, how many failed, the median first token as
/// measured and as routing predicted it, the median decode speed, and the
/// share of drafted tokens accepted.
type PerBackend = std::collections::HashMap<String, Calls>;

#[derive(Debug, Default, Clone, Copy)]
struct Calls {
    calls: u64,
    failed: u64,
    ttft_p50_ms: Option<f64>,
    predicted_ttft_p50_ms: Option<f64>,
    decode_p50_tokens_per_s: Option<f64>,
    draft_acceptance: Option<f64>,
}

/// A backend's calls as read, before their medians are taken.
#[derive(Default)]
struct Seen {
    calls: u64,
    failed: u64,
    ttfts: Vec<f64>,
    predicted: Vec<f64>,
    rates: Vec<f64>,
    drafted: u64,
    accepted: u64,
}

fn per_backend(conn: &rusqlite::Connection, since_ms: i64) -> rusqlite::Result<PerBackend> {
    let mut stmt = conn.prepare(
        "SELECT backend, status IN ('ok', 'cancelled', 'hedge-lost', 'escalated'), ttft_ms,
                predicted_ttft_ms, decode_tokens_per_s, draft_tokens, draft_accepted_tokens
         FROM requests
         WHERE ts_ms >= ?1 AND backend != '' AND reason != 'refused' AND NOT cache_hit",
    )?;
    let mut rows = stmt.query([since_ms])?;
    let mut seen: std::collections::HashMap<String, Seen> = Default::default();
    while let Some(row) = rows.next()? {
        let entry = seen.entry(row.get(0)?).or_default();
        entry.calls += 1;
        if !row.get::<_, bool>(1)? {
            entry.failed += 1;
        }
        if let Some(ttft) = row.get::<_, Option<f64>>(2)? {
            entry.ttfts.push(ttft);
            if let Some(predicted) = row.get::<_, Option<f64>>(3)? {
                entry.predicted.push(predicted);
            }
        }
        if let Some(rate) = row.get::<_, Option<f64>>(4)? {
            entry.rates.push(rate);
        }
        if let (Some(drafted), Some(accepted)) =
            (row.get::<_, Option<i64>>(5)?, row.get::<_, Option<i64>>(6)?)
        {
            entry.drafted += drafted.unsigned_abs();
            entry.accepted += accepted.unsigned_abs();
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    Ok(seen
        .into_iter()
        .map(|(backend, seen)| {
            let calls = Calls {
                calls: seen.calls,
                failed: seen.failed,
                ttft_p50_ms: median(seen.ttfts),
                predicted_ttft_p50_ms: median(seen.predicted),
                decode_p50_tokens_per_s: median(seen.rates),
                draft_acceptance: (seen.drafted > 0)
                    .then(|| seen.accepted as f64 / seen.drafted as f64),
            };
            (backend, calls)
        })
        .collect())
}

fn backends_now(app: &App, per_backend: &PerBackend) -> Vec<BackendNow> {
    // Decode speed as the latency model predicts it now, at a 1,000-token
    // context.
    let reference = Shape {
        prompt_tokens: 1000,
        cached_tokens: 0,
        output_tokens: 200,
        class: PromptClass::Prose,
    };
    app.backends
        .iter()
        .enumerate()
        .map(|(index, b)| {
            let calls = per_backend.get(&b.name).copied().unwrap_or_default();
            let predicted = app.router.latency().predict(index, &reference);
            let (in_flight, queued) = b.load();
            BackendNow {
                name: b.name.clone(),
                tier: b.tier.as_str(),
                breaker: b.breaker.state(),
                in_flight,
                queued,
                requests: calls.calls,
                errors: calls.failed,
                ttft_p50_ms: calls.ttft_p50_ms,
                predicted_ttft_ms: calls.predicted_ttft_p50_ms,
                decode_tokens_per_s: calls.decode_p50_tokens_per_s,
                predicted_decode_tokens_per_s: Some(predicted.tokens_per_s)
                    .filter(|v| v.is_finite() && *v > 0.0),
                draft_acceptance: calls.draft_acceptance,
            }
        })
        .collect()
}
