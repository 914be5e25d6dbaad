//! The overhead benchmark's narrower runs: one system alone under steady
//! load for a profiler, and comparisons of two Switchyards in turns (two
//! builds, budgets in memory or in Redis, sensitive-data scans on or off),
//! each beside the direct call and the bare hop.

use std::process::Command;
use std::time::{Duration, Instant};

use super::common::{Proc, cpu_ns, quantile};
use super::overhead_systems::{
    bare_hop, redis_server, switchyard, switchyard_bin, switchyard_with,
};
use super::{LEVELS, System, client, floor, load, spread, take_turns};

/// For profiling: Switchyard (or the bare hop, with `OVERHEAD_PROFILE_BARE`)
/// alone under steady load at `concurrency`, printing CPU per request as it
/// goes; its PID is printed so `perf record -p` or `strace -p` can attach.
pub async fn profile_load(sim: &Proc, concurrency: usize) {
    let bare = std::env::var("OVERHEAD_PROFILE_BARE").is_ok();
    let gateway = if bare {
        bare_hop(&sim.url).await
    } else {
        switchyard(&sim.url, switchyard_bin()).await
    };
    println!("pid {}", gateway.pid());
    let client = client(concurrency);
    let stream = std::env::var("OVERHEAD_PROFILE_STREAM").is_ok();
    let started = Instant::now();
    let seconds = std::env::var("OVERHEAD_PROFILE_SECS").map_or(60, |s| s.parse().unwrap());
    while started.elapsed() < Duration::from_secs(seconds) {
        let before = cpu_ns(gateway.pid());
        let mut run = load(&client, &gateway.url, !bare, stream, concurrency, 4000).await;
        let cpu = (cpu_ns(gateway.pid()) - before) as f64 / 1000.0 / 4000.0;
        println!(
            "{:.0} req/s, p50 {:.3} ms, {cpu:.1} us CPU per request",
            4000.0 / run.elapsed.as_secs_f64(),
            quantile(&mut run.latency, 0.5)
        );
    }
}

/// Rounds of the quick comparisons of two Switchyards.
const AB_ROUNDS: usize = 9;

/// The comparisons' rounds: `systems` are the direct call and the bare hop,
/// then the two Switchyards compared, which swap places in the rotation
/// each round, so neither always follows the other.
async fn pair_rounds(systems: &mut [System]) {
    for round in 0..AB_ROUNDS {
        take_turns(systems).await;
        systems.swap(2, 3);
        println!("round {}/{AB_ROUNDS} done", round + 1);
    }
}

/// This build against another Switchyard binary (`OVERHEAD_AB=<path>`, a
/// copy of an earlier build), in turns only: a few minutes, for a change
/// too small for the full run's noise to show. Each round takes both builds
/// and the bare hop in rotation; per round, the ratio of this build's CPU
/// per request to the other's, and the c=1 latency of each.
pub async fn compare_builds(sim: &Proc, base_bin: &str) {
    let mut systems = floor(sim).await;
    systems.push(System::served(
        "base",
        switchyard(&sim.url, base_bin).await,
        true,
    ));
    systems.push(System::served(
        "this",
        switchyard(&sim.url, switchyard_bin()).await,
        true,
    ));
    pair_rounds(&mut systems).await;
    compare_pair(&systems, "this", "base");
}

/// Budgets and rate limits in this process against the same in Redis
/// (`OVERHEAD_REDIS`, Debian's redis-server on core 0 with the load), in
/// turns like [`compare_builds`]: per request Switchyard with Redis sends
/// one script (the rate check and the budget hold together) and settles
/// in batches off the answer's path. Both have a key with rate limits and
/// a budget no request exhausts. Prints the added c=1 p50 and the
/// gateway's CPU per request with Redis over without, and Redis's own CPU.
pub async fn compare_state(sim: &Proc) {
    const BUDGET: &str = ", budget: {daily_usd: 1000000000}";
    let redis = redis_server().await;
    // The floor for one Redis round trip from the gateway's core: a bare
    // EVAL from redis-benchmark (C, one connection) pinned there.
    let port = redis.url.rsplit(':').next().unwrap().to_owned();
    let bench = Command::new("taskset")
        .args([
            "-c",
            "1",
            "redis-benchmark",
            "-p",
            &port,
            "-c",
            "1",
            "-n",
            "20000",
            "--csv",
        ])
        .args(["EVAL", "return 1", "0"])
        .output()
        .expect("redis-benchmark (Debian's redis-tools)");
    let csv = String::from_utf8_lossy(&bench.stdout);
    // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    let p50_ms: f64 = csv
        .lines()
        .last()
        .and_then(|line| line.split(',').nth(4))
        .and_then(|v| v.trim_matches('"').parse().ok())
        .unwrap_or(f64::NAN);
    println!(
        "a bare EVAL round trip from the gateway's core (redis-benchmark, c=1): p50 {:.0} us",
        p50_ms * 1000.0
    );
    let mut systems = floor(sim).await;
    systems.push(System::served(
        "memory",
        switchyard_with(&sim.url, switchyard_bin(), BUDGET, "").await,
        true,
    ));
    systems.push(System::served(
        "redis",
        switchyard_with(
            &sim.url,
            switchyard_bin(),
            BUDGET,
            &format!(
                "state:\n  redis: {{url: '{}', timeout_ms: 1000}}\n",
                redis.url
            ),
        )
        .await,
        true,
    ));
    let redis_before = cpu_ns(redis.pid);
    pair_rounds(&mut systems).await;
    let redis_cpu_ms = (cpu_ns(redis.pid) - redis_before) as f64 / 1e6;
    compare_pair(&systems, "redis", "memory");
    println!("redis-server used {redis_cpu_ms:.0} ms of CPU over the run (on the load's core)");
}

/// The gateway's CPU per request at each level and its c=1 latency over
/// the direct call, `with` against `without` (two of `systems`, measured
/// in turns), the bare hop beside them.
fn compare_pair(systems: &[System], with: &str, without: &str) {
    let by_name = |name: &str| systems.iter().find(|s| s.name == name).unwrap();
    let (direct, bare, a, b) = (
        by_name("direct"),
        by_name("bare-hop"),
        by_name(with),
        by_name(without),
    );
    for level in LEVELS {
        // Round by round, each over the other in the same round.
        let ratio = |x: &System, y: &System| {
            spread(
                x.turn_cpu[&level]
                    .iter()
                    .zip(&y.turn_cpu[&level])
                    .map(|(x, y)| x / y),
            )
        };
        let (r, lo, hi) = ratio(a, b);
        let median_cpu = |s: &System| spread(s.turn_cpu[&level].iter().copied()).0;
        println!(
            "c={level}: gateway CPU per request {with} {:.1} us, {without} {:.1} us, bare hop {:.1} us; {with}/{without} {r:.3}x ({lo:.3}-{hi:.3}), {with}/bare {:.2}x, {without}/bare {:.2}x",
            median_cpu(a),
            median_cpu(b),
            median_cpu(bare),
            ratio(a, bare).0,
            ratio(b, bare).0,
        );
    }
    let turn_p50 = |s: &System| quantile(&mut s.turns.clone(), 0.5) * 1000.0;
    let direct_p50 = turn_p50(direct);
    println!(
        "c=1 added p50 over direct: {with} {:.1} us, {without} {:.1} us ({with} adds {:.1} us); bare hop {:.1} us",
        turn_p50(a) - direct_p50,
        turn_p50(b) - direct_p50,
        turn_p50(a) - turn_p50(b),
        turn_p50(bare) - direct_p50,
    );
}

/// Every request scanned for sensitive data (the key's `sensitive:` policy
/// masks what it finds) against none, in turns: what the scan adds.
pub async fn compare_sensitive(sim: &Proc) {
    let mut systems = floor(sim).await;
    systems.push(System::served(
        "plain",
        switchyard_with(&sim.url, switchyard_bin(), "", "").await,
        true,
    ));
    systems.push(System::served(
        "scanned",
        switchyard_with(
            &sim.url,
            switchyard_bin(),
            ", sensitive: {action: mask}",
            "",
        )
        .await,
        true,
    ));
    pair_rounds(&mut systems).await;
    compare_pair(&systems, "scanned", "plain");
}
