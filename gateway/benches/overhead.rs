//! Gateway overhead, side by side on loopback: the same chat load sent to
//! the upstream directly, through a bare hyper pass-through, through
//! Switchyard with its default features on (auth, router, rate limits,
//! ledger, metrics) and through LiteLLM's proxy. Systems are interleaved
//! and repeated; medians with min and max are reported, with CPU time per
//! request (from /proc, all threads and child processes), peak RSS, and
//! Switchyard's RSS idle and with 10,000 slow streams open. Each round also
//! takes the fast systems' c=1 latency and their CPU per request at every
//! level turn by turn (short turns in rotation), and reports Switchyard's
//! ratio to the bare hop round by round.
//!
//! Run: `scripts/bench-overhead.sh` (installs LiteLLM into a cached venv,
//! raises the open-file limit, then runs this with `LITELLM` set).
//!
//! For profiling, `OVERHEAD_PROFILE=<concurrency>` runs Switchyard alone (the
//! bare hop with `OVERHEAD_PROFILE_BARE` set; streams with
//! `OVERHEAD_PROFILE_STREAM`) under steady load for `OVERHEAD_PROFILE_SECS`
//! (60), printing its PID and CPU per request as it goes, for
//! `perf record -p`; `OVERHEAD_STREAMS_ONLY` runs only the memory check.
//! `OVERHEAD_AB=<path to another switchyard binary>` compares this build
//! with that one in turns only (see `overhead_compare::compare_builds`).
//! `OVERHEAD_REDIS=1` compares budgets and rate limits in memory with the
//! same kept in a `redis-server` on loopback, in turns (see
//! `overhead_compare::compare_state`). `OVERHEAD_SENSITIVE=1` compares a
//! key whose requests are all scanned for sensitive data with one whose
//! are not, in turns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark's job is to print

mod common;
mod overhead_compare;
mod overhead_systems;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, cpu_ns, quantile, rss_kb};
use overhead_systems::{FAST, KEY, bare_hop, litellm, switchyard, switchyard_bin, upstream};

/// Rounds of every system; on a shared VM one round can run 30% slow, so
/// the median of five is what is reported.
const ROUNDS: usize = 5;
const LEVELS: [usize; 3] = [1, 16, 64];
const STREAMS: usize = 10_000;
type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client(concurrency: usize) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(concurrency)
        .build(connector)
}

fn body(stream: bool) -> Bytes {
    Bytes::from(format!(
        r#"{{"model":"auto","stream":{stream},"max_tokens":16,"temperature":0.7,"messages":[{{"role":"system","content":"You are a helpful assistant."}},{{"role":"user","content":"Say something short about rivers and the sea."}}]}}"#
    ))
}

/// One measured run: latencies (ms) of `n` requests at `concurrency`, and
/// for streams the first-chunk times too.
struct Run {
    latency: Vec<f64>,
    ttft: Vec<f64>,
    elapsed: Duration,
}

async fn load(
    client: &HttpClient,
    url: &str,
    auth: bool,
    stream: bool,
    concurrency: usize,
    n: usize,
) -> Run {
    let url = Arc::new(format!("{url}/v1/chat/completions"));
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, next) = (client.clone(), url.clone(), next.clone());
            tokio::spawn(async move {
                let (mut latency, mut ttft) = (Vec::new(), Vec::new());
                while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < n {
                    let mut request = http::Request::post(url.as_str())
                        .header("content-type", "application/json");
                    if auth {
                        request = request.header("authorization", format!("Bearer {KEY}"));
                    }
                    let start = Instant::now();
                    let response = client
                        .request(request.body(Full::new(body(stream))).unwrap())
                        .await
                        .unwrap();
                    assert!(response.status().is_success(), "{}", response.status());
                    let mut body = response.into_body();
                    let mut first = None;
                    while let Some(frame) = body.frame().await {
                        if frame.unwrap().is_data() && first.is_none() {
                            first = Some(start.elapsed());
                        }
                    }
                    latency.push(start.elapsed().as_secs_f64() * 1000.0);
                    if let Some(first) = first {
                        ttft.push(first.as_secs_f64() * 1000.0);
                    }
                }
                (latency, ttft)
            })
        })
        .collect();
    let mut run = Run {
        latency: Vec::new(),
        ttft: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for w in workers {
        let (l, t) = w.await.unwrap();
        run.latency.extend(l);
        run.ttft.extend(t);
    }
    run.elapsed = started.elapsed();
    run
}

/// One system's figures for one round at one level.
#[derive(Default, Clone, Copy)]
struct Figures {
    rps: f64,
    p50: f64,
    p99: f64,
    cpu_us: f64,
    ttft_p50: f64,
    stream_p50: f64,
}

struct System {
    name: &'static str,
    server: Option<Proc>,
    url: String,
    auth: bool,
    results: BTreeMap<usize, Vec<Figures>>,
    peak_rss_kb: u64,
    /// c=1 latencies (ms) from the turn-by-turn phase.
    turns: Vec<f64>,
    /// CPU us per request from the turn-by-turn phase, one per round, by level.
    turn_cpu: BTreeMap<usize, Vec<f64>>,
}

impl System {
    fn new(name: &'static str, url: String, server: Option<Proc>, auth: bool) -> Self {
        System {
            name,
            server,
            url,
            auth,
            results: BTreeMap::new(),
            peak_rss_kb: 0,
            turns: Vec::new(),
            turn_cpu: BTreeMap::new(),
        }
    }

    /// A system of ours or LiteLLM's, reached at its server's URL.
    fn served(name: &'static str, server: Proc, auth: bool) -> Self {
        System::new(name, server.url.clone(), Some(server), auth)
    }
}

/// The systems every comparison measures against: the upstream reached
/// directly, and the bare hop.
async fn floor(sim: &Proc) -> Vec<System> {
    vec![
        System::new("direct", sim.url.clone(), None, false),
        System::served("bare-hop", bare_hop(&sim.url).await, false),
    ]
}

fn requests_at(concurrency: usize, slow: bool) -> usize {
    match (concurrency, slow) {
        (1, false) => 2000,
        // A few seconds per window, so the ledger's batched commits and the
        // like land in every window alike.
        (_, false) => 12_000,
        (1, true) => 200,
        (_, true) => 1000,
    }
}

async fn measure(system: &mut System) {
    let slow = system.name == "litellm";
    for level in LEVELS {
        let client = client(level);
        let n = requests_at(level, slow);
        // Warm the connection pool and caches.
        load(&client, &system.url, system.auth, false, level, level * 4).await;
        let pid = system.server.as_ref().map(|s| s.pid());
        let cpu_before = pid.map_or(0, cpu_ns);
        let whole = load(&client, &system.url, system.auth, false, level, n).await;
        let cpu_after = pid.map_or(0, cpu_ns);
        let streams = load(&client, &system.url, system.auth, true, level, n / 4).await;
        let mut latency = whole.latency;
        let (mut ttft, mut stream_total) = (streams.ttft, streams.latency);
        let figures = Figures {
            rps: n as f64 / whole.elapsed.as_secs_f64(),
            p50: quantile(&mut latency, 0.5),
            p99: quantile(&mut latency, 0.99),
            cpu_us: (cpu_after - cpu_before) as f64 / 1000.0 / n as f64,
            ttft_p50: quantile(&mut ttft, 0.5),
            stream_p50: quantile(&mut stream_total, 0.5),
        };
        system.results.entry(level).or_default().push(figures);
        if let Some(pid) = pid {
            system.peak_rss_kb = system.peak_rss_kb.max(rss_kb(pid, "VmHWM:"));
        }
    }
}

/// Turns of this many requests at c=1, taken by the direct path, the bare
/// hop and Switchyard in rotation, TURNS times per round.
const TURN: usize = 100;
const TURNS: usize = 10;
/// Turns of this many requests at c=16 and c=64 (a tenth of a second or
/// so each), for CPU per request taken the same way.
const CPU_TURN: usize = 2000;
const CPU_TURNS: usize = 8;

/// The fast systems' figures taken turn by turn: a round's figures of one
/// system are seconds apart from another's, and on a shared VM latency and
/// CPU per request drift by more than the differences sought within that
/// time (round medians of the same build differ by 100 us, and CPU at c=16
/// by a third); in turns of a fraction of a second each, drift hits every
/// system alike. At c=1 the turns give latency and CPU, at c=16 and c=64
/// CPU. LiteLLM, at 15 ms a request, is left out.
async fn take_turns(systems: &mut [System]) {
    for level in LEVELS {
        let (turn, turns) = if level == 1 {
            (TURN, TURNS)
        } else {
            (CPU_TURN, CPU_TURNS)
        };
        let mut fast: Vec<(&mut System, HttpClient, u64)> = systems
            .iter_mut()
            .filter(|s| s.name != "litellm")
            .map(|s| (s, client(level), 0))
            .collect();
        for (s, client, _) in &fast {
            load(client, &s.url, s.auth, false, level, level * 4).await;
        }
        for _ in 0..turns {
            for (s, client, cpu) in &mut fast {
                let pid = s.server.as_ref().map(|p| p.pid());
                let before = pid.map_or(0, cpu_ns);
                let run = load(client, &s.url, s.auth, false, level, turn).await;
                *cpu += pid.map_or(0, cpu_ns) - before;
                if level == 1 {
                    s.turns.extend(run.latency);
                }
            }
        }
        for (s, _, cpu) in fast {
            let per_request = cpu as f64 / 1000.0 / (turn * turns) as f64;
            s.turn_cpu.entry(level).or_default().push(per_request);
        }
    }
}

/// Median, min and max of one figure over the rounds.
fn spread(values: impl Iterator<Item = f64>) -> (f64, f64, f64) {
    let mut v: Vec<f64> = values.collect();
    let median = quantile(&mut v, 0.5);
    (median, v[0], v[v.len() - 1])
}

fn report(systems: &[System]) {
    let median = |s: &System, level: usize, f: fn(&Figures) -> f64| {
        spread(s.results[&level].iter().map(f)).0
    };
    println!(
        "\nmedians over {ROUNDS} rounds (min-max); latency in ms, CPU in us per non-streaming request"
    );
    for level in LEVELS {
        println!("\nconcurrency {level}:");
        println!(
            "{:<11} {:>18} {:>22} {:>10} {:>22} {:>10} {:>10} {:>9}",
            "system", "req/s", "p50", "p99", "CPU us/req", "+p50", "TTFT p50", "stream"
        );
        let direct_p50 = median(&systems[0], level, |f| f.p50);
        for s in systems {
            let (rps, rps_lo, rps_hi) = spread(s.results[&level].iter().map(|f| f.rps));
            let (p50, p50_lo, p50_hi) = spread(s.results[&level].iter().map(|f| f.p50));
            let (cpu, cpu_lo, cpu_hi) = spread(s.results[&level].iter().map(|f| f.cpu_us));
            println!(
                "{:<11} {rps:>8.0} ({rps_lo:.0}-{rps_hi:.0}) {p50:>9.3} ({p50_lo:.3}-{p50_hi:.3}) {:>10.3} {cpu:>8.1} ({cpu_lo:.1}-{cpu_hi:.1}) {:>10.3} {:>10.3} {:>9.3}",
                s.name,
                median(s, level, |f| f.p99),
                p50 - direct_p50,
                median(s, level, |f| f.ttft_p50),
                median(s, level, |f| f.stream_p50),
            );
        }
    }
    let by_name = |name: &str| systems.iter().find(|s| s.name == name);
    let (Some(bare), Some(sy)) = (by_name("bare-hop"), by_name("switchyard")) else {
        return;
    };
    let direct = &systems[0];
    println!();
    for level in LEVELS {
        let cpu = |s: &System| median(s, level, |f| f.cpu_us);
        println!(
            "c={level}: Switchyard/bare-hop CPU per request {:.2}x",
            cpu(sy) / cpu(bare)
        );
        // Each round's turns pair the two systems in time: the ratio per
        // round, then its median.
        let paired = sy.turn_cpu[&level].iter().zip(&bare.turn_cpu[&level]);
        let (ratio, lo, hi) = spread(paired.clone().map(|(s, b)| s / b));
        let (sy_cpu, bare_cpu) = (
            spread(sy.turn_cpu[&level].iter().copied()).0,
            spread(bare.turn_cpu[&level].iter().copied()).0,
        );
        println!(
            "c={level}, turn by turn: Switchyard {sy_cpu:.1} us, bare hop {bare_cpu:.1} us CPU per request; Switchyard/bare-hop {ratio:.2}x ({lo:.2}-{hi:.2} over rounds)"
        );
        // LiteLLM over the bare hop is the ceiling of LiteLLM/Switchyard on
        // this host: what a gateway costing no more than a bare hop would get.
        if let Some(lite) = by_name("litellm") {
            println!(
                "c={level}: LiteLLM/Switchyard CPU per request {:.0}x (LiteLLM/bare-hop {:.0}x)",
                cpu(lite) / cpu(sy),
                cpu(lite) / cpu(bare)
            );
        }
    }
    let added = |s: &System, f: fn(&Figures) -> f64| median(s, 1, f) - median(direct, 1, f);
    println!(
        "c=1: added p50 Switchyard {:.1} us vs bare hop {:.1} us (difference {:.1} us)",
        added(sy, |f| f.p50) * 1000.0,
        added(bare, |f| f.p50) * 1000.0,
        (added(sy, |f| f.p50) - added(bare, |f| f.p50)) * 1000.0
    );
    let turn_p50 = |s: &System| quantile(&mut s.turns.clone(), 0.5) * 1000.0;
    let (direct_p50, bare_p50, sy_p50) = (turn_p50(direct), turn_p50(bare), turn_p50(sy));
    println!(
        "c=1, turn by turn ({} requests each, in turns of {TURN}): added p50 Switchyard {:.1} us vs bare hop {:.1} us (difference {:.1} us)",
        sy.turns.len(),
        sy_p50 - direct_p50,
        bare_p50 - direct_p50,
        sy_p50 - bare_p50
    );
    println!(
        "c=1: added stream TTFT Switchyard {:.1} us vs bare hop {:.1} us ({:.2}x)",
        added(sy, |f| f.ttft_p50) * 1000.0,
        added(bare, |f| f.ttft_p50) * 1000.0,
        added(sy, |f| f.ttft_p50) / added(bare, |f| f.ttft_p50)
    );
    // A ratio only when the bare hop's added time is there to divide by:
    // against a 20 ms stream it is often within noise of zero, or below.
    let (sy_stream, bare_stream) = (added(sy, |f| f.stream_p50), added(bare, |f| f.stream_p50));
    println!(
        "c=1: added whole-stream time Switchyard {:.1} us vs bare hop {:.1} us{}",
        sy_stream * 1000.0,
        bare_stream * 1000.0,
        if bare_stream > 0.05 {
            format!(" ({:.2}x)", sy_stream / bare_stream)
        } else {
            String::new()
        }
    );
    for s in systems.iter().filter(|s| s.server.is_some()) {
        println!(
            "peak RSS {}: {:.1} MB",
            s.name,
            s.peak_rss_kb as f64 / 1024.0
        );
    }
}

/// Switchyard's memory idle and with STREAMS slow streams open at once.
async fn open_streams() {
    let slow = upstream(&[
        "base_ttft_ms=1",
        "decode_tokens_per_s=1",
        "jitter=0",
        "max_concurrency=100000",
        "max_queue=100000",
    ])
    .await;
    let gateway = switchyard(&slow.url, switchyard_bin()).await;
    let pid = gateway.pid();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = rss_kb(pid, "VmRSS:");
    // HTTP/2 to the gateway: a few connections carry all the streams, so
    // the gateway's descriptors go to its upstream connections.
    let clients: Vec<HttpClient> = (0..64)
        .map(|_| {
            Client::builder(TokioExecutor::new())
                .http2_only(true)
                .build(HttpConnector::new())
        })
        .collect();
    let url = format!("{}/v1/chat/completions", gateway.url);
    let body = Bytes::from(
        r#"{"model":"auto","stream":true,"max_tokens":1000,"messages":[{"role":"user","content":"Tell a long story."}]}"#,
    );
    let mut open = Vec::with_capacity(STREAMS);
    for i in 0..STREAMS {
        let request = http::Request::post(&url)
            .header("content-type", "application/json")
            .header("authorization", format!("Bearer {KEY}"))
            .body(Full::new(body.clone()))
            .unwrap();
        open.push(clients[i % clients.len()].request(request));
    }
    let responses = futures_util::future::join_all(open).await;
    let streaming = responses
        .iter()
        .filter(|r| r.as_ref().is_ok_and(|r| r.status().is_success()))
        .count();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let busy = rss_kb(pid, "VmRSS:");
    println!("\nSwitchyard RSS idle: {:.1} MB", idle as f64 / 1024.0);
    println!(
        "Switchyard RSS with {streaming} slow streams open: {:.1} MB",
        busy as f64 / 1024.0
    );
    drop(responses);
}

fn main() {
    // The load generator shares core 0 with the upstream.
    common::block_on_core_0(run());
}

async fn run() {
    if std::env::var("OVERHEAD_STREAMS_ONLY").is_ok() {
        return open_streams().await;
    }
    let sim = upstream(FAST).await;
    if let Ok(level) = std::env::var("OVERHEAD_PROFILE") {
        return overhead_compare::profile_load(&sim, level.parse().unwrap()).await;
    }
    if let Ok(base) = std::env::var("OVERHEAD_AB") {
        return overhead_compare::compare_builds(&sim, &base).await;
    }
    if std::env::var("OVERHEAD_REDIS").is_ok() {
        return overhead_compare::compare_state(&sim).await;
    }
    if std::env::var("OVERHEAD_SENSITIVE").is_ok() {
        return overhead_compare::compare_sensitive(&sim).await;
    }
    let litellm_bin = std::env::var("LITELLM").ok();
    let mut systems = floor(&sim).await;
    systems.push(System::served(
        "switchyard",
        switchyard(&sim.url, switchyard_bin()).await,
        true,
    ));
    match &litellm_bin {
        Some(bin) => systems.push(System::served(
            "litellm",
            litellm(bin, &sim.url).await,
            true,
        )),
        None => println!(
            "LITELLM is not set: LiteLLM is left out (scripts/bench-overhead.sh installs it)"
        ),
    }
    for round in 0..ROUNDS {
        // Interleaved, so drift on the machine hits every system alike.
        for s in &mut systems {
            measure(s).await;
        }
        take_turns(&mut systems).await;
        println!("round {}/{ROUNDS} done", round + 1);
    }
    report(&systems);
    drop(systems);
    open_streams().await;
}
