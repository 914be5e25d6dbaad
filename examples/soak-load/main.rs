//! Steady mixed load for the soak test (`scripts/soak.sh`): workers send a
//! mix of whole and streamed requests in each dialect, abandon some streams
//! half-read, and replace their connection pools now and then, so
//! connections and streams keep opening and closing. Prints a line a
//! minute: requests answered, errors, and streams abandoned.
//!
//! Usage: `soak-load BASE_URL MINUTES [REQUESTS_PER_SECOND]`

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

const WORKERS: u64 = 16;
/// Requests a worker sends on one connection pool before replacing it.
const POOL_LIFETIME: u64 = 50;

#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    errors: AtomicU64,
    abandoned: AtomicU64,
}

/// The request for draw `n` of the mix: path, body, and whether to stop
/// reading after the first few events.
fn request(n: u64) -> (&'static str, String, bool) {
    let chat = |stream: bool| {
        format!(
            r#"{{"model":"auto","stream":{stream},"max_tokens":48,"messages":[{{"role":"user","content":"soak request {n}: tell me about trains"}}]}}"#
        )
    };
    match n % 20 {
        0..=5 => ("/v1/chat/completions", chat(false), false),
        6..=11 => ("/v1/chat/completions", chat(true), false),
        12..=14 => ("/v1/chat/completions", chat(true), true),
        15..=17 => (
            "/v1/messages",
            format!(
                r#"{{"model":"auto","stream":true,"max_tokens":48,"messages":[{{"role":"user","content":"soak {n}"}}]}}"#
            ),
            false,
        ),
        _ => (
            "/v1/responses",
            format!(r#"{{"model":"auto","max_output_tokens":48,"input":"soak {n}"}}"#),
            false,
        ),
    }
}

type HttpClient = Client<HttpConnector, Full<Bytes>>;

async fn one(client: &HttpClient, base: &str, n: u64, counts: &Counts) {
    let (path, body, abandon) = request(n);
    let req = http::Request::post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(Bytes::from(body)));
    let Ok(req) = req else { return };
    let Ok(response) = client.request(req).await else {
        counts.errors.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if !response.status().is_success() {
        counts.errors.fetch_add(1, Ordering::Relaxed);
    }
    let mut body = response.into_body();
    let mut frames = 0;
    while let Some(frame) = body.frame().await {
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

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(base), Some(minutes)) =
        (args.get(1), args.get(2).and_then(|m| m.parse::<u64>().ok()))
    else {
        eprintln!("usage: soak-load BASE_URL MINUTES [REQUESTS_PER_SECOND]");
        std::process::exit(2);
    };
    let rate: f64 = args.get(3).and_then(|r| r.parse().ok()).unwrap_or(40.0);
    let base = Arc::new(base.trim_end_matches('/').to_owned());
    let counts = Arc::new(Counts::default());
    let end = Instant::now() + Duration::from_secs(minutes * 60);
    // Each worker sends one request per this interval.
    let every = Duration::from_secs_f64(WORKERS as f64 / rate);
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let (base, counts) = (base.clone(), counts.clone());
        workers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let mut n = w;
            let mut client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
            while Instant::now() < end {
                tick.tick().await;
                if (n / WORKERS).is_multiple_of(POOL_LIFETIME) {
                    client = Client::builder(TokioExecutor::new()).build_http();
                }
                one(&client, &base, n, &counts).await;
                n += WORKERS;
            }
        }));
    }
    let reporter = {
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut minute = tokio::time::interval(Duration::from_secs(60));
            minute.tick().await;
            for m in 1.. {
                minute.tick().await;
                report(&format!("minute {m}"), &counts);
            }
        })
    };
    for worker in workers {
        let _ = worker.await;
    }
    reporter.abort();
    report("total", &counts);
}

/// One line of counts on stdout (the soak script reads the last one).
fn report(when: &str, counts: &Counts) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stdout().lock(),
        "{when}: answered {} errors {} abandoned {}",
        counts.answered.load(Ordering::Relaxed),
        counts.errors.load(Ordering::Relaxed),
        counts.abandoned.load(Ordering::Relaxed)
    );
}
