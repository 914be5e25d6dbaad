//! Real Redis and PostgreSQL servers for the scale-out tests: each test
//! starts its own on a free loopback port, in a directory of its own, and
//! stops them by PID when dropped. Debian's `redis-server` and `postgresql`
//! packages provide the binaries (`scripts/test.sh` installs them).
//!
//! Without the binaries a test skips with a printed reason, unless
//! `SWITCHYARD_REQUIRE_SERVERS` is set (as the test script sets it), when
//! a skip is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::unique_path;

/// Whether a test that needs `what` may run; prints why not, or panics
/// when the servers are required.
fn available(what: &str, found: bool) -> bool {
    if found {
        return true;
    }
    if std::env::var_os("SWITCHYARD_REQUIRE_SERVERS").is_some() {
        panic!("{what} is not installed, and SWITCHYARD_REQUIRE_SERVERS is set");
    }
    eprintln!("skipped: {what} is not installed (scripts/test.sh installs it)");
    false
}

/// A loopback port nobody listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    listener.local_addr().expect("its address").port()
}

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < limit,
            "{what} did not come up within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A `redis-server` without persistence on 127.0.0.1.
pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts one, or `None` (with the reason printed) when Redis is not
    /// installed and not required.
    pub fn start() -> Option<RedisServer> {
        let found = Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !available("redis-server", found) {
            return None;
        }
        let dir = unique_path("redis");
        std::fs::create_dir_all(&dir).expect("make the Redis directory");
        let mut server = RedisServer {
            child: None,
            port: free_port(),
            dir,
        };
        server.run();
        Some(server)
    }

    fn run(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&self.dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        wait_until("redis-server", Duration::from_secs(10), || {
            self.try_cli(&["PING"]).as_deref() == Some("PONG")
        });
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn try_cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stderr(Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (out.status.success() && !text.starts_with("Could not connect")).then_some(text)
    }

    /// Runs one command with `redis-cli` and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args)
            .unwrap_or_else(|| panic!("redis-cli {args:?} failed"))
    }

    /// Kills the server (its counters are gone: it keeps nothing on disk).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.run();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A private PostgreSQL cluster on 127.0.0.1, user `switchyard`, trust
/// authentication, `fsync=off` (the tests restart it, but never lose power).
pub struct PostgresServer {
    bin: PathBuf,
    pub port: u16,
    dir: PathBuf,
    running: bool,
}

/// The newest installed PostgreSQL's `bin` directory.
fn postgres_bin() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    dirs.sort();
    dirs.pop().map(|(_, bin)| bin)
}

/// PostgreSQL refuses to run as root: as root, its tools run as the
/// `postgres` user.
fn as_postgres(program: &Path) -> Command {
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if root {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

impl PostgresServer {
    /// Starts one, or `None` (with the reason printed) when PostgreSQL is
    /// not installed and not required.
    pub fn start() -> Option<PostgresServer> {
        let bin = postgres_bin();
        if !available("PostgreSQL", bin.is_some()) {
            return None;
        }
        let bin = bin?;
        let dir = unique_path("postgres");
        std::fs::create_dir_all(&dir).expect("make the PostgreSQL directory");
        let _ = Command::new("chown")
            .args(["-R", "postgres:"])
            .arg(&dir)
            .status();
        let status = as_postgres(&bin.join("initdb"))
            .arg("-D")
            .arg(dir.join("data"))
            .args(["-A", "trust", "-U", "switchyard", "-E", "UTF8", "--no-sync"])
            .stdout(Stdio::null())
            .status()
            .expect("run initdb");
        assert!(status.success(), "initdb failed");
        let mut server = PostgresServer {
            bin,
            port: free_port(),
            dir,
            running: false,
        };
        server.pg_ctl_start();
        Some(server)
    }

    fn pg_ctl(&self) -> Command {
        let mut command = as_postgres(&self.bin.join("pg_ctl"));
        command
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .stdout(Stdio::null());
        command
    }

    fn pg_ctl_start(&mut self) {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.display()
        );
        let status = self
            .pg_ctl()
            .args(["-w", "-t", "30", "-o", &options, "start"])
            .status()
            .expect("run pg_ctl start");
        assert!(
            status.success(),
            "pg_ctl start failed: see {:?}",
            self.dir.join("log")
        );
        self.running = true;
    }

    /// The URL of database `db` for user `switchyard`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://switchyard@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs `sql` in database `db` with `psql` and returns its unaligned
    /// output (tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "switchyard",
            ])
            .args(["-d", db, "-v", "ON_ERROR_STOP=1", "-Atc", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Creates an empty database for one test and returns its URL.
    pub fn create_database(&self, db: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE {db}"));
        self.url(db)
    }

    /// Stops it at once, as a crash would (`-m immediate`).
    pub fn stop(&mut self) {
        if self.running {
            let _ = self.pg_ctl().args(["-m", "immediate", "stop"]).status();
            self.running = false;
        }
    }

    /// A crash and a start on the same port: what a database failover
    /// looks like to the gateway.
    pub fn restart(&mut self) {
        self.stop();
        self.pg_ctl_start();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
