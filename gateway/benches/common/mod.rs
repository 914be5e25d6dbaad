//! What the process-level benchmarks share: starting `switchyard`
//! processes that print their address, and quantiles.

#![allow(dead_code)] // each benchmark uses part of it

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

pub struct Proc {
    child: Child,
    pub url: String,
    _dir: Option<std::path::PathBuf>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn spawn(args: &[&str], dir: Option<std::path::PathBuf>) -> Proc {
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
    Proc {
        child,
        url,
        _dir: dir,
    }
}

pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    values[((values.len() - 1) as f64 * q).round() as usize]
}

/// `switchyard serve` on `config` (YAML), from a folder of its own (for the
/// ledger) named after `what`.
pub fn serve(config: &str, what: &str) -> Proc {
    let dir = std::env::temp_dir().join(format!("switchyard-bench-{}-{what}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
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
