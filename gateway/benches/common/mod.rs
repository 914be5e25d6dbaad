//! What the process-level benchmarks share: starting processes (a
//! `switchyard` that prints its address, or any server polled until healthy),
//! ending them by their PID when dropped, the CPU time and resident memory
//! of a process and its descendants (from /proc), and quantiles.

#![allow(dead_code)] // each benchmark uses part of it

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// A process of ours, and the folder it runs in (removed with it).
pub struct Proc {
    child: Child,
    pub url: String,
    dir: Option<PathBuf>,
}

impl Proc {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A folder of this run's own, named after `what`.
pub fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchyard-bench-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `command` (in `dir`, when given) and waits until `url` + `health`
/// answers with success.
pub async fn start(mut command: Command, url: String, health: &str, dir: Option<PathBuf>) -> Proc {
    if let Some(dir) = &dir {
        command.current_dir(dir);
    }
    command.stdout(Stdio::null()).stderr(Stdio::null());
    let proc = Proc {
        child: command.spawn().unwrap(),
        url,
        dir,
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    for _ in 0..600 {
        let probe = http::Request::get(format!("{}{health}", proc.url))
            .body(Full::new(Bytes::new()))
            .unwrap();
        if let Ok(response) = client.request(probe).await
            && response.status().is_success()
        {
            return proc;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{:?} did not come up", command.get_program());
}

pub fn spawn(args: &[&str], dir: Option<PathBuf>) -> Proc {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command
        .args(args)
        .env("SWITCHYARD_LOG", "error")
        .stdout(Stdio::piped());
    if let Some(dir) = &dir {
        command.current_dir(dir);
    }
    let mut child = command.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_owned();
    Proc { child, url, dir }
}

pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// `switchyard serve` on `config` (YAML), from a folder of its own (for the
/// ledger) named after `what`.
pub fn serve(config: &str, what: &str) -> Proc {
    let dir = temp_dir(what);
    let path = dir.join("config.yaml");
    std::fs::write(&path, config).unwrap();
    spawn(
        &[
            "serve",
            "--config",
            path.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        Some(dir),
    )
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// CPU time (ns) of a process, its threads and its descendants.
pub fn cpu_ns(root: u32) -> u64 {
    tree(root)
        .iter()
        .map(|pid| {
            std::fs::read_dir(format!("/proc/{pid}/task"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// Resident set (kB) of a process and its descendants: now, or its peak.
pub fn rss_kb(root: u32, field: &str) -> u64 {
    tree(root)
        .iter()
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find(|l| l.starts_with(field))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

fn tree(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let after = stat.rsplit_once(')')?.1;
            Some((pid, after.split_whitespace().nth(1)?.parse().ok()?))
        })
        .collect();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// Runs a benchmark's `main` future on core 0, where the load and the
/// upstream run. Pinned before the runtime starts, so its worker threads
/// inherit the pinning and never take time from the system under test.
pub fn block_on_core_0<F: std::future::Future>(future: F) -> F::Output {
    let _ = Command::new("taskset")
        .args(["-cp", "0", &std::process::id().to_string()])
        .output();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}
