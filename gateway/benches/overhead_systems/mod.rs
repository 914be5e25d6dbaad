//! The systems the overhead benchmark measures, started as processes of
//! their own: the upstream (a `switchyard sim`), the bare hyper hop
//! (`examples/bare-hop`), Switchyard with its default
//! features, and LiteLLM's proxy. Each system under test is pinned to
//! `SUT_CORE`, the upstream to the other core.

#![allow(dead_code)] // each benchmark uses part of it

use std::path::PathBuf;
use std::process::Command;

use super::common::{Proc, free_port, start, temp_dir};

/// The system under test runs on this core, the load and the upstream on the other.
const SUT_CORE: &str = "1";

/// Starts `program args` pinned to `core` and waits until `health` answers.
async fn pinned(
    program: &str,
    args: &[&str],
    core: &str,
    url: String,
    health: &str,
    dir: Option<PathBuf>,
    env: &[(&str, &str)],
) -> Proc {
    let mut command = Command::new("taskset");
    command
        .args(["-c", core, program])
        .args(args)
        .envs(env.iter().copied());
    start(command, url, health, dir).await
}

pub fn switchyard_bin() -> &'static str {
    env!("CARGO_BIN_EXE_switchyard")
}

/// The upstream: Switchyard's model-server simulator, fast and steady.
pub async fn upstream(settings: &[&str]) -> Proc {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec!["sim", "--listen", &listen, "--profile", "small"];
    for s in settings {
        args.extend(["--set", s]);
    }
    pinned(
        switchyard_bin(),
        &args,
        "0",
        format!("http://{listen}"),
        "/health",
        None,
        &[("SWITCHYARD_LOG", "error")],
    )
    .await
}

/// A steady upstream with no decode time: a stream's chunks come back to
/// back. (At 20,000 tokens/s each token's 50 us gap waited for the timer's
/// next 1 ms tick, so a 16-token stream took 17 ms of ticks on every path
/// and the hops' part of it was lost in them.)
pub const FAST: &[&str] = &[
    "base_ttft_ms=1",
    "prefill_tokens_per_s=10000000",
    "decode_tokens_per_s=1000000000000",
    "jitter=0",
    "max_concurrency=100000",
    "max_queue=100000",
];

/// The floor: a minimal hyper pass-through, `examples/bare-hop` as
/// `cargo build --release -p switchyard-examples --bin bare-hop` builds it
/// beside this benchmark (`scripts/bench-overhead.sh` does).
pub async fn bare_hop(upstream: &str) -> Proc {
    let port = free_port();
    // This benchmark runs from `target/release/deps`; the bin is one up.
    let exe = std::env::current_exe().unwrap();
    let hop = exe
        .parent()
        .and_then(|d| d.parent())
        .unwrap()
        .join("bare-hop");
    assert!(
        hop.exists(),
        "{} is missing: cargo build --release -p switchyard-examples --bin bare-hop",
        hop.display()
    );
    let url = format!("http://127.0.0.1:{port}");
    pinned(
        hop.to_str().unwrap(),
        &[],
        SUT_CORE,
        url,
        "/health",
        None,
        &[
            ("BARE_HOP_LISTEN", &format!("127.0.0.1:{port}")),
            ("BARE_HOP_UPSTREAM", upstream),
        ],
    )
    .await
}

pub const KEY: &str = "sk-bench-0123456789";

/// Switchyard with the default feature set: a virtual key with rate limits,
/// a split route, the SQLite ledger, metrics.
pub async fn switchyard(upstream: &str, bin: &str) -> Proc {
    switchyard_with(upstream, bin, "", "").await
}

/// A `redis-server` without persistence on core 0 (with the load and the
/// upstream), for Switchyard's shared state.
pub struct Redis {
    child: std::process::Child,
    pub url: String,
    pub pid: u32,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub async fn redis_server() -> Redis {
    let port = free_port();
    let mut child = Command::new("taskset")
        .args(["-c", "0", "redis-server", "--bind", "127.0.0.1"])
        .args([
            "--port",
            &port.to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (Debian's redis-server package)");
    for _ in 0..100 {
        if let Ok(mut socket) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut pong = [0u8; 7];
            if socket.write_all(b"PING\r\n").await.is_ok()
                && socket.read_exact(&mut pong).await.is_ok()
                && &pong == b"+PONG\r\n"
            {
                let pid = child.id();
                return Redis {
                    child,
                    url: format!("redis://127.0.0.1:{port}"),
                    pid,
                };
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("redis-server did not answer");
}

/// As [`switchyard`], with `key_fields` added to the key and `sections`
/// to the config.
pub async fn switchyard_with(upstream: &str, bin: &str, key_fields: &str, sections: &str) -> Proc {
    let port = free_port();
    // A directory of its own, named by its port: two gateways in one
    // benchmark (an A/B, a comparison of features) must not share a
    // ledger file, nor remove each other's when one stops.
    let dir = temp_dir(&format!("switchyard-{port}"));
    let hash = String::from_utf8(
        Command::new(switchyard_bin())
            .args(["key-hash", KEY])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let config = format!(
        "backends:\n  sim:\n    tier: small\n    openai: {{base_url: '{upstream}/v1'}}\n    price: {{usd_per_hour: 0.1}}\nroutes:\n  auto:\n    strategy: {{split: {{weights: {{sim: 1}}}}}}\nauth:\n  keys:\n    - {{name: bench, hash: '{}', requests_per_minute: 10000000, tokens_per_minute: 1000000000{key_fields}}}\nserver:\n  max_concurrent_requests: 100000\n{sections}",
        hash.trim()
    );
    std::fs::write(dir.join("switchyard.yaml"), config).unwrap();
    let listen = format!("127.0.0.1:{port}");
    let config_path = dir.join("switchyard.yaml");
    pinned(
        bin,
        &[
            "serve",
            "--config",
            config_path.to_str().unwrap(),
            "--listen",
            &listen,
        ],
        SUT_CORE,
        format!("http://{listen}"),
        "/healthz",
        Some(dir),
        &[("SWITCHYARD_LOG", "error")],
    )
    .await
}

/// LiteLLM's proxy, one worker, a master key, the local cost map.
pub async fn litellm(program: &str, upstream: &str) -> Proc {
    let dir = temp_dir("litellm");
    let config = format!(
        "model_list:\n  - model_name: auto\n    litellm_params:\n      model: openai/sim\n      api_base: {upstream}/v1\n      api_key: unused\ngeneral_settings:\n  master_key: {KEY}\n"
    );
    std::fs::write(dir.join("litellm.yaml"), config).unwrap();
    let port = free_port().to_string();
    let config_path = dir.join("litellm.yaml");
    pinned(
        program,
        &[
            "--config",
            config_path.to_str().unwrap(),
            "--port",
            &port,
            "--host",
            "127.0.0.1",
            "--num_workers",
            "1",
        ],
        SUT_CORE,
        format!("http://127.0.0.1:{port}"),
        "/health/liveliness",
        Some(dir),
        &[
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True"),
            ("LITELLM_LOG", "ERROR"),
        ],
    )
    .await
}
