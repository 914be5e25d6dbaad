//! Steady mixed load for the soak test (`scripts/soak.sh`): workers send a
//! mix of whole and streamed requests in each dialect, abandon some streams
//! half-read, and replace their connection pools now and then, so
//! connections and streams keep opening and closing. Requests go round-robin
//! over one or more gateways (replicas sharing a ledger and budgets). Prints
//! a line a minute: requests answered, errors, and streams abandoned, then
//! the count of each HTTP status.
//!
//! Usage: `soak-load BASE_URL[,BASE_URL...] MINUTES [REQUESTS_PER_SECOND]`
//!
//! Every request carries a unique `x-request-id` (`soak-WORKER-N`, or
//! `budget-N` for the budget worker). Environment:
//!
//! - `SOAK_KEY`: sent as `authorization: Bearer KEY` with the load.
//! - `SOAK_IDS`: a file each request's id and what it got are appended to,
//!   one `ID STATUS SECONDS` line per request: the HTTP status as soon as
//!   the response head arrives (a stream abandoned or cut later still
//!   counts as answered with it), or `error` when no response came; and
//!   when, in seconds since the load started.
//! - `SOAK_BUDGET_KEY`: a key for one more worker that sends whole chat
//!   requests one at a time (never two at once, so a budget can be overshot
//!   by at most one request's reservation), to spend that key's budget down.
//! - `SOAK_BUDGET_EVERY_MS`: that worker's pace (default 1000).
//! - `SOAK_MAX_TOKENS`: `max_tokens` of every request (default 48).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

const WORKERS: u64 = 16;
/// Requests a worker sends on one connection pool before replacing it.
const POOL_LIFETIME: u64 = 50;
/// The longest wait for a response head, or between two body frames: far
/// past the gateway's own upstream timeouts, so only a hung gateway hits it.
const PATIENCE: Duration = Duration::from_secs(120);

#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    errors: AtomicU64,
    abandoned: AtomicU64,
    /// Requests by what they got: an HTTP status, or `error`.
    by_status: Mutex<BTreeMap<String, u64>>,
}

/// Where requests go, with what key, and where their ids are written.
struct Target {
    bases: Vec<String>,
    key: Option<String>,
    ids: Option<Mutex<BufWriter<File>>>,
    max_tokens: u32,
    started: Instant,
}

impl Target {
    /// The gateway for request `k` of worker `w`: consecutive requests of a
    /// worker alternate, and workers start at different ones.
    fn base(&self, w: u64, k: u64) -> &str {
        let i = (w + k) % self.bases.len() as u64;
        &self.bases[i as usize]
    }

    /// Notes what request `id` got.
    fn got(&self, counts: &Counts, id: &str, outcome: &str) {
        if let Ok(mut by_status) = counts.by_status.lock() {
            *by_status.entry(outcome.to_owned()).or_default() += 1;
        }
        if let Some(ids) = &self.ids
            && let Ok(mut ids) = ids.lock()
        {
            let at = self.started.elapsed().as_secs_f64();
            let _ = writeln!(ids, "{id} {outcome} {at:.1}");
        }
    }

    fn flush(&self) {
        if let Some(ids) = &self.ids
            && let Ok(mut ids) = ids.lock()
            && let Err(err) = ids.flush()
        {
            eprintln!("soak-load: writing the request ids: {err}");
        }
    }
}

/// The request for draw `n` of the mix: path, body, and whether to stop
/// reading after the first few events.
fn request(n: u64, max_tokens: u32) -> (&'static str, String, bool) {
    let chat = |stream: bool| {
        format!(
            r#"{{"model":"auto","stream":{stream},"max_tokens":{max_tokens},"messages":[{{"role":"user","content":"soak request {n}: tell me about trains"}}]}}"#
        )
    };
    match n % 20 {
        0..=5 => ("/v1/chat/completions", chat(false), false),
        6..=11 => ("/v1/chat/completions", chat(true), false),
        12..=14 => ("/v1/chat/completions", chat(true), true),
        15..=17 => (
            "/v1/messages",
            format!(
                r#"{{"model":"auto","stream":true,"max_tokens":{max_tokens},"messages":[{{"role":"user","content":"soak {n}"}}]}}"#
            ),
            false,
        ),
        _ => (
            "/v1/responses",
            format!(r#"{{"model":"auto","max_output_tokens":{max_tokens},"input":"soak {n}"}}"#),
            false,
        ),
    }
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Sends one request and reads its answer (or the first frames of it, when
/// `abandon`), counting what happened.
async fn one(
    client: &HttpClient,
    target: &Target,
    base: &str,
    key: Option<&str>,
    id: &str,
    (path, body, abandon): (&str, String, bool),
    counts: &Counts,
) {
    let mut req = http::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .header("x-request-id", id);
    if let Some(key) = key {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    let Ok(req) = req.body(Full::new(Bytes::from(body))) else {
        return;
    };
    let response = match tokio::time::timeout(PATIENCE, client.request(req)).await {
        Ok(Ok(response)) => response,
        Ok(Err(_)) | Err(_) => {
            target.got(counts, id, "error");
            counts.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    target.got(counts, id, response.status().as_str());
    if !response.status().is_success() {
        counts.errors.fetch_add(1, Ordering::Relaxed);
    }
    let mut body = response.into_body();
    let mut frames = 0;
    loop {
        let frame = match tokio::time::timeout(PATIENCE, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => {
                counts.errors.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        if frame.is_err() {
            counts.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        frames += 1;
        if abandon && frames == 3 {
            // Dropping the body mid-stream closes the stream (and, on
            // HTTP/1, the connection) under the gateway.
            counts.abandoned.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    counts.answered.fetch_add(1, Ordering::Relaxed);
}

/// A key from the environment, if set and not empty.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(bases), Some(minutes)) =
        (args.get(1), args.get(2).and_then(|m| m.parse::<u64>().ok()))
    else {
        eprintln!("usage: soak-load BASE_URL[,BASE_URL...] MINUTES [REQUESTS_PER_SECOND]");
        std::process::exit(2);
    };
    let rate: f64 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(40.0);
    let bases: Vec<String> = bases
        .split(',')
        .map(|b| b.trim().trim_end_matches('/').to_owned())
        .filter(|b| !b.is_empty())
        .collect();
    if bases.is_empty() {
        eprintln!("soak-load: no base URL given");
        std::process::exit(2);
    }
    let ids = match env("SOAK_IDS") {
        Some(path) => match File::options().create(true).append(true).open(&path) {
            Ok(file) => Some(Mutex::new(BufWriter::new(file))),
            Err(err) => {
                eprintln!("soak-load: cannot open {path}: {err}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    let target = Arc::new(Target {
        bases,
        key: env("SOAK_KEY"),
        ids,
        max_tokens: env("SOAK_MAX_TOKENS")
            .and_then(|m| m.parse().ok())
            .unwrap_or(48),
        started: Instant::now(),
    });
    let counts = Arc::new(Counts::default());
    let budget_counts = Arc::new(Counts::default());
    let end = Instant::now() + Duration::from_secs(minutes * 60);
    // Each worker sends one request per this interval.
    let every = Duration::from_secs_f64(WORKERS as f64 / rate);
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (target, counts) = (target.clone(), counts.clone());
        workers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let mut n = w;
            let mut client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
            while Instant::now() < end {
                tick.tick().await;
                let k = n / WORKERS;
                if k.is_multiple_of(POOL_LIFETIME) {
                    client = Client::builder(TokioExecutor::new()).build_http();
                }
                let id = format!("soak-{w}-{n}");
                let base = target.base(w, k);
                let key = target.key.as_deref();
                let req = request(n, target.max_tokens);
                one(&client, &target, base, key, &id, req, &counts).await;
                n += WORKERS;
            }
        }));
    }
    if let Some(key) = env("SOAK_BUDGET_KEY") {
        let every = env("SOAK_BUDGET_EVERY_MS")
            .and_then(|m| m.parse().ok())
            .unwrap_or(1000);
        let (target, counts) = (target.clone(), budget_counts.clone());
        workers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(every));
            let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
            let mut i = 0;
            while Instant::now() < end {
                tick.tick().await;
                let id = format!("budget-{i}");
                let body = format!(
                    r#"{{"model":"auto","max_tokens":{},"messages":[{{"role":"user","content":"budget request {i}: tell me about trains"}}]}}"#,
                    target.max_tokens
                );
                let req = ("/v1/chat/completions", body, false);
                let base = target.base(0, i);
                one(&client, &target, base, Some(&key), &id, req, &counts).await;
                i += 1;
            }
        }));
    }
    let reporter = {
        let (counts, budget_counts) = (counts.clone(), budget_counts.clone());
        tokio::spawn(async move {
            let mut minute = tokio::time::interval(Duration::from_secs(60));
            minute.tick().await;
            for m in 1.. {
                minute.tick().await;
                report(&format!("minute {m}"), &counts, &budget_counts);
            }
        })
    };
    for worker in workers {
        let _ = worker.await;
    }
    reporter.abort();
    target.flush();
    report("total", &counts, &budget_counts);
}

/// One line of counts on stdout (the soak script reads the last one).
fn report(when: &str, counts: &Counts, budget: &Counts) {
    let statuses = |counts: &Counts| {
        counts
            .by_status
            .lock()
            .map(|by| {
                by.iter()
                    .map(|(status, n)| format!("{status}={n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let mut line = format!(
        "{when}: answered {} errors {} abandoned {}; by status: {}",
        counts.answered.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed),
        counts.abandoned.load(Ordering::Relaxed),
        statuses(counts)
    );
    let budget_statuses = statuses(budget);
    if !budget_statuses.is_empty() {
        line.push_str(&format!("; budget worker: {budget_statuses}"));
    }
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
