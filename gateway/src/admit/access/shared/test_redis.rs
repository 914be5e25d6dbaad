//! A real `redis-server` for this module's unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

use std::process::{Command, Stdio};
use std::time::Duration;

/// A `redis-server` on a free port for one test, or `None` when it is
/// not installed (a failure when the test script requires servers).
pub struct Redis(std::process::Child, pub u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn redis() -> Option<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap();
    let spawned = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null())
        .spawn();
    match spawned {
        Ok(child) => Some(Redis(child, port)),
        Err(_) if std::env::var_os("SWITCHYARD_REQUIRE_SERVERS").is_none() => {
            eprintln!("skipped: redis-server is not installed");
            None
        }
        Err(err) => panic!("redis-server: {err}"),
    }
}

pub async fn connect(server: &Redis) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(format!("redis://127.0.0.1:{}", server.1)).unwrap();
    for _ in 0..100 {
        if let Ok(c) = client.get_multiplexed_async_connection().await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("redis-server does not answer");
}
