//! Test support: the real `switchyard` binary, started as a gateway or a
//! simulator on 127.0.0.1:0, and a small HTTP client for talking to it.
#![allow(dead_code)] // each test file uses part of this

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

pub mod kill_load;
pub mod servers;

/// Simulator settings that make tests quick and timings predictable.
pub const FAST: &[&str] = &[
    "base_ttft_ms=2",
    "prefill_tokens_per_s=1000000",
    "decode_tokens_per_s=5000",
    "jitter=0",
];

/// The same, as the fields of an in-process `sim:` section.
pub const FAST_SIM_FIELDS: &str =
    "base_ttft_ms: 2, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0";

/// A `switchyard` process, killed when dropped.
pub struct Proc {
    child: Child,
    pub addr: SocketAddr,
    config_path: Option<std::path::PathBuf>,
    /// The process's working directory (its ledger lives here), removed on drop.
    pub dir: std::path::PathBuf,
}

impl Proc {
    pub fn spawn(args: &[String], config_path: Option<std::path::PathBuf>) -> Proc {
        Self::spawn_logging(args, config_path, "warn", None, &[])
    }

    /// Starts the binary logging at `level` (`SWITCHYARD_LOG`; unset when
    /// empty), to `log` when given (else to the test's own stderr), with
    /// `env` added to its environment.
    fn spawn_logging(
        args: &[String],
        config_path: Option<std::path::PathBuf>,
        level: &str,
        log: Option<&std::path::Path>,
        env: &[(String, String)],
    ) -> Proc {
        let dir = unique_path("dir");
        std::fs::create_dir_all(&dir).expect("make a working directory");
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path).expect("create the log file")),
            None => Stdio::inherit(),
        };
        let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        if !level.is_empty() {
            command.env("SWITCHYARD_LOG", level);
        }
        let mut child = command
            .args(args)
            .current_dir(&dir)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start switchyard");
        let stdout = child.stdout.take().expect("stdout is piped");
        let mut line = String::new();
        // The first stdout line names the bound address; EOF means it died.
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read stdout");
        // `... listening on http://ADDR` (or https://).
        let addr = line
            .trim()
            .rsplit("://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("switchyard {args:?} did not start: {line:?}"));
        Proc {
            child,
            addr,
            config_path,
            dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The OpenAI base URL (`.../v1`).
    pub fn base_url(&self) -> String {
        self.url("/v1")
    }

    /// The ledger of a gateway started on a config that names no path.
    pub fn ledger(&self) -> rusqlite::Connection {
        rusqlite::Connection::open(self.dir.join("switchyard-ledger.db")).expect("open the ledger")
    }

    /// Sends SIGKILL: no shutdown, no flush.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The config file it serves (a test may rewrite it to reload).
    pub fn config_path(&self) -> &std::path::Path {
        self.config_path
            .as_deref()
            .expect("started from a config file")
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits for the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
        self.child.wait().expect("wait for switchyard")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(path) = &self.config_path {
            let _ = std::fs::remove_file(path);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `switchyard sim --preset PRESET --set ...`.
pub fn sim(preset: &str, overrides: &[&str]) -> Proc {
    sim_on("127.0.0.1:0", preset, overrides)
}

/// A simulator listening on `listen` (say, the port of one stopped before).
pub fn sim_on(listen: &str, preset: &str, overrides: &[&str]) -> Proc {
    let mut args = vec![
        "sim".into(),
        "--listen".into(),
        listen.into(),
        "--preset".into(),
        preset.into(),
    ];
    for o in overrides {
        args.push("--set".into());
        args.push((*o).into());
    }
    Proc::spawn(&args, None)
}

/// A fast simulator with extra settings.
pub fn fast_sim(extra: &[&str]) -> Proc {
    let all: Vec<&str> = FAST.iter().chain(extra).copied().collect();
    sim("small", &all)
}

/// Builds a gateway config fluently, then starts `switchyard serve` on it.
#[derive(Default)]
pub struct GatewayBuilder {
    env: Vec<(String, String)>,
    server: Vec<String>,
    backends: Vec<String>,
    routes: Vec<String>,
    sections: Vec<String>,
}

impl GatewayBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// An environment variable for the gateway process (a backend's key).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// A `server:` setting, e.g. `max_body_bytes: 1024`.
    pub fn server(mut self, line: &str) -> Self {
        self.server.push(line.to_owned());
        self
    }

    /// An OpenAI-adapter backend pointing at `base_url`; `extra` lines go
    /// inside the backend (e.g. `max_concurrency: 1`).
    pub fn openai(mut self, name: &str, tier: &str, base_url: &str, extra: &[&str]) -> Self {
        let mut yaml = format!(
            "  {name}:\n    tier: {tier}\n    model: upstream-{name}\n    openai:\n      base_url: {base_url}\n"
        );
        yaml.push_str(&price_for(tier));
        for line in extra {
            yaml.push_str(&format!("    {line}\n"));
        }
        self.backends.push(yaml);
        self
    }

    /// An in-process simulated backend.
    pub fn in_process_sim(mut self, name: &str, tier: &str, sim_fields: &str) -> Self {
        self.backends.push(format!(
            "  {name}:\n    tier: {tier}\n    sim: {{{sim_fields}}}\n{}",
            price_for(tier)
        ));
        self
    }

    /// A route written out: `body` is its YAML, indented as under the route name.
    pub fn route(mut self, name: &str, body: &str) -> Self {
        let body: String = body.lines().map(|l| format!("    {l}\n")).collect();
        self.routes.push(format!("  {name}:\n{body}"));
        self
    }

    /// A backend written out, indented as under `backends:`.
    pub fn backend_yaml(mut self, yaml: &str) -> Self {
        self.backends.push(yaml.to_owned());
        self
    }

    /// A top-level section written out (`auth:`, `ledger:`, `accounting:`).
    pub fn section(mut self, yaml: &str) -> Self {
        self.sections.push(format!("{}\n", yaml.trim_end()));
        self
    }

    /// A split route over `(backend, weight)` pairs.
    pub fn split(mut self, name: &str, weights: &[(&str, u32)]) -> Self {
        let weights: Vec<String> = weights.iter().map(|(b, w)| format!("{b}: {w}")).collect();
        self.routes.push(format!(
            "  {name}:\n    strategy:\n      split:\n        weights: {{{}}}\n",
            weights.join(", ")
        ));
        self
    }

    pub fn yaml(&self) -> String {
        let mut yaml = String::from("server:\n");
        for line in &self.server {
            yaml.push_str(&format!("  {line}\n"));
        }
        if self.server.is_empty() {
            yaml.push_str("  shutdown_grace_ms: 5000\n");
        }
        yaml.push_str("backends:\n");
        self.backends.iter().for_each(|b| yaml.push_str(b));
        if !self.routes.is_empty() {
            yaml.push_str("routes:\n");
            self.routes.iter().for_each(|r| yaml.push_str(r));
        }
        self.sections.iter().for_each(|s| yaml.push_str(s));
        yaml
    }

    pub fn start(self) -> Proc {
        self.start_logging("warn", None)
    }

    /// Starts the gateway logging at `level` (`trace`, `debug`, ...), to
    /// `log` when given.
    pub fn start_logging(self, level: &str, log: Option<&std::path::Path>) -> Proc {
        let path = write_temp_config(&self.yaml());
        Proc::spawn_logging(
            &[
                "serve".into(),
                "--config".into(),
                path.display().to_string(),
                "--listen".into(),
                "127.0.0.1:0".into(),
            ],
            Some(path),
            level,
            log,
            &self.env,
        )
    }
}

/// Cloud tiers must be priced; tests give them gpt-4o's list price.
fn price_for(tier: &str) -> String {
    match tier {
        "cloud" | "large" => {
            "    price: {input_per_mtok: 2.5, cached_input_per_mtok: 1.25, output_per_mtok: 10}\n"
                .into()
        }
        _ => String::new(),
    }
}

/// A path in the temp directory no other test uses.
pub fn unique_path(what: &str) -> std::path::PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("switchyard-test-{}-{n}-{what}", std::process::id()))
}

/// Writes a config file no other test uses.
pub fn write_temp_config(yaml: &str) -> std::path::PathBuf {
    let path = unique_path("config.yaml");
    std::fs::write(&path, yaml).expect("write config");
    path
}

/// What `switchyard check` says of `yaml` on stderr; fails the test when
/// check accepts it.
pub fn check_refuses(yaml: &str) -> String {
    let path = write_temp_config(yaml);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(!out.status.success(), "check accepted:\n{yaml}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The gateway on its embedded default config.
pub fn default_gateway() -> Proc {
    Proc::spawn(
        &["serve".into(), "--listen".into(), "127.0.0.1:0".into()],
        None,
    )
}

/// A whole HTTP response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `data:` payloads of an SSE body, in order.
    pub fn events(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.body)
            .split("\n\n")
            .filter_map(|event| event.strip_prefix("data: "))
            .map(str::to_owned)
            .collect()
    }

    /// The JSON error object of an OpenAI-shaped error body.
    pub fn error(&self) -> Value {
        let body = self.json();
        assert!(
            body["error"]["message"].is_string(),
            "not an OpenAI error: {body}"
        );
        body["error"].clone()
    }
}

fn client(http2: bool) -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new())
        .http2_only(http2)
        .build_http()
}

/// Sends a request with `headers` (a `content-type` among them when there
/// is a body) and reads the whole answer, within 60 s each.
pub async fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
    http2: bool,
) -> Reply {
    let mut req = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    let req = req.body(Full::new(Bytes::from(body))).expect("request");
    let response = tokio::time::timeout(Duration::from_secs(60), client(http2).request(req))
        .await
        .expect("answer within 60 s")
        .expect("request sent");
    let (parts, body) = response.into_parts();
    let body = tokio::time::timeout(Duration::from_secs(60), body.collect())
        .await
        .expect("body within 60 s")
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub async fn send(
    method: Method,
    url: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    http2: bool,
) -> Reply {
    let headers: Vec<(&str, &str)> = content_type
        .map(|kind| ("content-type", kind))
        .into_iter()
        .collect();
    request(method, url, &headers, body, http2).await
}

pub async fn post_json(url: &str, body: &Value) -> Reply {
    post_with(url, body, &[]).await
}

/// POST JSON with extra headers.
pub async fn post_with(url: &str, body: &Value, headers: &[(&str, &str)]) -> Reply {
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    request(
        Method::POST,
        url,
        &all,
        serde_json::to_vec(body).expect("json"),
        false,
    )
    .await
}

/// GET with extra headers.
pub async fn get_with(url: &str, headers: &[(&str, &str)]) -> Reply {
    request(Method::GET, url, headers, Vec::new(), false).await
}

pub async fn get(url: &str) -> Reply {
    send(Method::GET, url, None, Vec::new(), false).await
}

/// Waits (bounded) until `check` holds, polling; false if it never did.
pub async fn eventually(mut check: impl AsyncFnMut() -> bool) -> bool {
    for _ in 0..100 {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

pub fn chat(model: &str, text: &str) -> Value {
    serde_json::json!({"model": model, "messages": [{"role": "user", "content": text}]})
}

/// A chat request with `max_tokens: 20`.
pub fn short(text: &str, model: &str) -> Value {
    let mut request = chat(model, text);
    request["max_tokens"] = serde_json::json!(20);
    request
}

/// A free local backend, and a cloud one priced at $1,000 per million
/// tokens (a cent per ten tokens) so budgets run out within a few requests;
/// `auto` sends everything to the cloud one.
pub fn priced(cloud_sim_extra: &str) -> GatewayBuilder {
    GatewayBuilder::new()
        .in_process_sim("local", "small", &format!("preset: small, {FAST_SIM_FIELDS}"))
        .backend_yaml(&format!(
            "  cloud:\n    tier: cloud\n    sim: {{preset: large, {FAST_SIM_FIELDS}{cloud_sim_extra}}}\n    price: {{input_per_mtok: 1000, output_per_mtok: 1000}}\n"
        ))
        .split("auto", &[("cloud", 1)])
}

/// A bare server that records `count` requests (head and body), answering
/// each with the JSON `reply`.
pub async fn recording_server(
    count: usize,
    reply: &'static str,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    canned_server(count, "200 OK", reply).await
}

/// A bare server that records `count` requests, answering each with
/// `status` (such as `401 Unauthorized`) and the JSON `reply`. GETs (the
/// gateway asking for a context window or an engine's metrics) are
/// answered 404 and not counted: the count is of calls.
pub async fn canned_server(
    count: usize,
    status: &'static str,
    reply: &'static str,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    serve_canned(count, status, "application/json", reply).await
}

/// As `canned_server`, answering each call 200 with the server-sent
/// events in `events`.
pub async fn canned_event_server(
    count: usize,
    events: &'static str,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    serve_canned(count, "200 OK", "text/event-stream", events).await
}

async fn serve_canned(
    count: usize,
    status: &'static str,
    content_type: &'static str,
    reply: &'static str,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = tokio::spawn(async move {
        let mut seen = Vec::new();
        while seen.len() < count {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let n = socket.read(&mut buf).await.unwrap();
                request.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let length = head
                        .lines()
                        .find_map(|l| {
                            l.to_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break;
                    }
                }
            }
            if request.starts_with(b"GET ") {
                let missing =
                    "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = socket.write_all(missing.as_bytes()).await;
                continue;
            }
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
                reply.len()
            );
            socket.write_all(response.as_bytes()).await.unwrap();
            seen.push(String::from_utf8_lossy(&request).to_string());
        }
        seen
    });
    (addr, seen)
}

/// The rows `sql` selects from the gateway's ledger once there are `want`
/// of them (rows are written in the background after answers go out):
/// fails the test if they never are.
pub async fn ledger_rows<T>(
    gateway: &Proc,
    sql: &str,
    want: usize,
    row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    rows_once_written(&gateway.ledger(), sql, want, row).await
}

/// As [`ledger_rows`], from a ledger at a path of the test's own.
pub async fn rows_once_written<T>(
    ledger: &rusqlite::Connection,
    sql: &str,
    want: usize,
    row: impl Fn(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Vec<T> {
    let mut rows = Vec::new();
    let written = eventually(async || {
        let mut statement = ledger.prepare(sql).expect("a valid query");
        rows = statement
            .query_map([], &row)
            .expect("the query runs")
            .collect::<Result<_, _>>()
            .expect("rows read");
        rows.len() == want
    })
    .await;
    assert!(written, "{} rows, not {want}: {sql}", rows.len());
    rows
}

/// The JSON body of a request a recording server saw.
pub fn body_of(request: &str) -> Value {
    let (_, body) = request.split_once("\r\n\r\n").expect("a head and a body");
    serde_json::from_str(body).expect("a JSON body")
}

/// `sha256:` of `key`, as `switchyard key-hash` prints it.
pub fn key_hash(key: &str) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["key-hash", key])
        .output()
        .expect("switchyard key-hash");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The number `/metrics` gives for `series` (a whole series with labels),
/// 0 when absent.
pub async fn metric(gateway: &Proc, series: &str) -> f64 {
    let text = String::from_utf8_lossy(&get(&gateway.url("/metrics")).await.body).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// What `switchyard ARGS --config CONFIG` prints, run in `dir` when given
/// (where a config naming no ledger path finds its gateway's ledger); it
/// must succeed.
pub fn report(dir: Option<&std::path::Path>, config: &std::path::Path, args: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    command.args(args).arg("--config").arg(config);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let out = command.output().expect("run switchyard");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}
