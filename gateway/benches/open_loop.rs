//! Added latency at a fixed request rate, open loop: `oha` (a constant-rate
//! load tool from crates.io, with its coordinated-omission correction, so a
//! request's latency counts from when it was due, not from when a free
//! connection sent it) asks the upstream directly, the bare hyper hop,
//! Switchyard and LiteLLM's proxy for the same rates in turns. The system
//! under test runs on core 1; the load tool and the upstream share core 0
//! (`overhead_systems`).
//!
//! Each system's peak closed-loop rate is taken first, so a rate a system
//! cannot sustain is shown as such (achieved rate, p99) rather than hidden.
//! Added latency is a system's percentile minus the direct path's at the
//! same rate in the same round.
//!
//! Run: `scripts/bench-open-loop.sh` (installs `oha` and LiteLLM into the
//! cache, builds, runs this with `OHA` and `LITELLM` set).
//! `SWITCHYARD_COMPARE=path` adds another build of Switchyard (another
//! commit's) as the system `compared`, with the same config, in the same
//! rounds: an A/B that the machine's drift between runs cannot blur.
//! `OPEN_LOOP_RATES=13500,14000` (whole numbers, separated by commas)
//! runs those rates instead of the issue's two and the machine's highest;
//! `OPEN_LOOP_ROUNDS=6`, that many rounds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)] // a benchmark's job is to print

mod common;
mod overhead_systems;

use std::collections::BTreeMap;
use std::process::Command;

use common::{Proc, quantile};
use overhead_systems::{FAST, KEY, bare_hop, litellm, switchyard, switchyard_bin, upstream};

/// The rates the issue names, and the peers publish figures at.
const RATES: [u32; 2] = [3000, 10_000];
/// Seconds of load at one rate for one system in one round.
const SECONDS: u32 = 10;
const ROUNDS: usize = 3;

/// Connections the load tool keeps: enough that none waits for a free
/// one at 10k requests/s with a millisecond's latency, so what waits is
/// the system (and, past its peak, the correction counts it).
const CONNECTIONS: u32 = 64;
/// A rate is taken as sustained when this share of it was reached.
const SUSTAINED: f64 = 0.98;

const BODY: &str = r#"{"model":"auto","stream":false,"max_tokens":16,"temperature":0.7,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Say something short about rivers and the sea."}]}"#;

/// A number from the environment variable `name`. Panics on one that does
/// not read, rather than run a load nobody asked for.
fn number<T: std::str::FromStr>(name: &str, text: &str) -> T {
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}: {text:?} is not a number"))
}

/// One load run's figures, read from oha's JSON summary.
#[derive(Clone, Copy, Default)]
struct Point {
    achieved: f64,
    p50_ms: f64,
    p99_ms: f64,
    failed: u64,
}

struct System {
    name: &'static str,
    url: String,
    auth: bool,
    _server: Option<Proc>,
    peak: f64,
    points: BTreeMap<u32, Vec<Point>>,
}

fn oha_bin() -> String {
    std::env::var("OHA").unwrap_or_else(|_| "oha".into())
}

/// `oha` on core 0 against `system` for `seconds`, at `rate` requests/s
/// (open loop, latency-corrected), or as fast as `CONNECTIONS` closed-loop
/// connections go when `rate` is `None`.
fn oha(system: &System, rate: Option<u32>, seconds: u32) -> Point {
    let url = format!("{}/v1/chat/completions", system.url);
    let mut command = Command::new("taskset");
    command.args(["-c", "0"]).arg(oha_bin()).args([
        "--no-tui",
        "--output-format",
        "json",
        "--worker-threads",
        "1",
        "-z",
        &format!("{seconds}s"),
        "-c",
        &CONNECTIONS.to_string(),
        "-m",
        "POST",
        "-T",
        "application/json",
        "-d",
        BODY,
        // A request a system never answers is an error, not a stall.
        "-t",
        "10s",
        "-w",
    ]);
    if system.auth {
        command.args(["-H", &format!("authorization: Bearer {KEY}")]);
    }
    if let Some(rate) = rate {
        command.args(["-q", &rate.to_string(), "--latency-correction"]);
    }
    let output = command.arg(&url).output().expect("oha (OHA=path)");
    assert!(
        output.status.success(),
        "oha failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let ok = json["statusCodeDistribution"]["200"].as_u64().unwrap_or(0);
    let all_codes: u64 = json["statusCodeDistribution"].as_object().map_or(0, |m| {
        m.values().filter_map(serde_json::Value::as_u64).sum()
    });
    let errors: u64 = json["errorDistribution"].as_object().map_or(0, |m| {
        m.values().filter_map(serde_json::Value::as_u64).sum()
    });
    let percentile = |p: &str| json["latencyPercentiles"][p].as_f64().unwrap_or(f64::NAN) * 1000.0;
    Point {
        // Answered with 200 per second of the run, not requests sent.
        achieved: ok as f64 / f64::from(seconds),
        p50_ms: percentile("p50"),
        p99_ms: percentile("p99"),
        failed: all_codes - ok + errors,
    }
}

fn main() {
    // This process only starts the others and reads oha's output; it stays
    // off the system under test's core like they do.
    common::block_on_core_0(run());
}

async fn run() {
    let sim = upstream(FAST).await;
    let mut systems = vec![
        System::new("direct", sim.url.clone(), None, false),
        System::new(
            "bare-hop",
            String::new(),
            Some(bare_hop(&sim.url).await),
            false,
        ),
        System::new(
            "switchyard",
            String::new(),
            Some(switchyard(&sim.url, switchyard_bin()).await),
            true,
        ),
    ];
    if let Ok(bin) = std::env::var("SWITCHYARD_COMPARE") {
        // Made absolute: the gateway starts in a directory of its own.
        let bin = std::fs::canonicalize(&bin)
            .unwrap_or_else(|err| panic!("SWITCHYARD_COMPARE={bin}: {err}"));
        let bin = bin.to_str().expect("SWITCHYARD_COMPARE: a UTF-8 path");
        println!("compared: {bin}");
        systems.push(System::new(
            "compared",
            String::new(),
            Some(switchyard(&sim.url, bin).await),
            true,
        ));
    }
    match std::env::var("LITELLM") {
        Ok(bin) => systems.push(System::new(
            "litellm",
            String::new(),
            Some(litellm(&bin, &sim.url).await),
            true,
        )),
        Err(_) => println!("LITELLM is not set: LiteLLM is left out"),
    }
    for s in &mut systems {
        // Warm, then the peak: closed loop, as fast as it answers, for
        // long enough that the ledger's queue (10,000 rows, written behind
        // the requests) cannot hide a writer that falls behind.
        oha(s, None, 2);
        s.peak = oha(s, None, 10).achieved;
        println!("{}: peak {:.0} requests/s closed loop", s.name, s.peak);
    }
    // The highest rate every one of our systems and the floor sustains
    // here, beside the issue's two: the machine's own ceiling.
    let ceiling = systems
        .iter()
        .filter(|s| s.name != "litellm")
        .map(|s| s.peak)
        .fold(f64::INFINITY, f64::min);
    let highest = ((ceiling * 0.8 / 500.0).floor() * 500.0).max(500.0) as u32;
    let chosen = std::env::var("OPEN_LOOP_RATES").ok();
    let mut rates: Vec<u32> = match &chosen {
        Some(list) => list
            .split(',')
            .map(|r| number("OPEN_LOOP_RATES", r))
            .collect(),
        None => RATES.iter().copied().chain([highest]).collect(),
    };
    assert!(
        rates.iter().all(|&r| r > 0),
        "OPEN_LOOP_RATES: a rate of 0 runs nothing (rates are whole numbers, 13500, separated by commas)"
    );
    rates.sort_unstable();
    rates.dedup();
    let rounds =
        std::env::var("OPEN_LOOP_ROUNDS").map_or(ROUNDS, |r| number("OPEN_LOOP_ROUNDS", &r));
    assert!(rounds > 0, "OPEN_LOOP_ROUNDS: at least one round");
    for round in 0..rounds {
        // LiteLLM answers a few hundred requests/s on one core at best:
        // one short run at each rate shows that, and more would queue for
        // minutes.
        let running: Vec<usize> = (1..systems.len())
            .filter(|&i| round == 0 || systems[i].name != "litellm")
            .collect();
        // Direct first, as each round's reference; the others that run
        // this round take turns going first, so that none always runs
        // just after the same one.
        let order: Vec<usize> = std::iter::once(0)
            .chain((0..running.len()).map(|j| running[(j + round) % running.len()]))
            .collect();
        for &rate in &rates {
            for &i in &order {
                let s = &mut systems[i];
                let seconds = if s.name == "litellm" { 5 } else { SECONDS };
                let point = oha(s, Some(rate), seconds);
                s.points.entry(rate).or_default().push(point);
            }
        }
        println!("round {}/{rounds} done", round + 1);
    }
    report(
        &systems,
        &rates,
        chosen.is_none().then_some(highest),
        rounds,
    );
}

impl System {
    fn new(name: &'static str, url: String, server: Option<Proc>, auth: bool) -> Self {
        let url = server.as_ref().map_or(url, |s| s.url.clone());
        System {
            name,
            url,
            auth,
            _server: server,
            peak: 0.0,
            points: BTreeMap::new(),
        }
    }
}

/// The median of one figure over a system's rounds at `rate`.
fn median(s: &System, rate: u32, figure: fn(&Point) -> f64) -> f64 {
    let mut v: Vec<f64> = s.points[&rate].iter().map(figure).collect();
    quantile(&mut v, 0.5)
}

/// The median over the rounds of a figure's excess over the direct path's
/// in the same round (LiteLLM's one round against the first).
fn added(s: &System, direct: &System, rate: u32, figure: fn(&Point) -> f64) -> f64 {
    let mut v: Vec<f64> = s.points[&rate]
        .iter()
        .zip(&direct.points[&rate])
        .map(|(p, d)| figure(p) - figure(d))
        .collect();
    quantile(&mut v, 0.5)
}

/// `highest`: the machine's highest rate, when it was run (not when
/// `OPEN_LOOP_RATES` chose the rates).
fn report(systems: &[System], rates: &[u32], highest: Option<u32>, rounds: usize) {
    println!(
        "\nopen loop, latency-corrected; medians over {rounds} rounds of {SECONDS} s (LiteLLM: one round of 5 s); latency in ms, added = minus direct's in the same round"
    );
    if let Some(highest) = highest {
        println!(
            "highest rate the floor and Switchyard all sustain here: {highest} requests/s (0.8 of the lowest peak)"
        );
    }
    let direct = &systems[0];
    for &rate in rates {
        println!("\n{rate} requests/s:");
        println!(
            "{:<11} {:>10} {:>9} {:>9} {:>11} {:>11} {:>8} {:>10}",
            "system", "achieved", "p50", "p99", "added p50", "added p99", "failed", "sustained"
        );
        for s in systems {
            let achieved = median(s, rate, |p| p.achieved);
            let (p50, p99) = (median(s, rate, |p| p.p50_ms), median(s, rate, |p| p.p99_ms));
            let failed: u64 = s.points[&rate].iter().map(|p| p.failed).sum();
            println!(
                "{:<11} {achieved:>10.0} {p50:>9.3} {p99:>9.3} {:>11.3} {:>11.3} {failed:>8} {:>10}",
                s.name,
                added(s, direct, rate, |p| p.p50_ms),
                added(s, direct, rate, |p| p.p99_ms),
                if achieved >= f64::from(rate) * SUSTAINED {
                    "yes"
                } else {
                    "no"
                },
            );
        }
        // A median hides how far the rounds spread: the tail at a high
        // rate moves with the machine, and an A/B needs to see by how much.
        println!("p99 by round:");
        for s in systems {
            let by_round: Vec<String> = s.points[&rate]
                .iter()
                .map(|p| format!("{:.3}", p.p99_ms))
                .collect();
            println!("  {:<11} {}", s.name, by_round.join(" "));
        }
    }
    for s in systems {
        println!("peak {}: {:.0} requests/s closed loop", s.name, s.peak);
    }
    println!(
        "\npublished by peers (their machines, their loads): Bifrost 11 us added at 5k requests/s; agentgateway p99 0.44 ms at 3k requests/s; TensorZero p99 0.94 ms at 10k requests/s"
    );
}
