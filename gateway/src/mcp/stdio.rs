//! A stdio MCP server: a child process the gateway starts, speaking
//! newline-delimited JSON-RPC on its stdin and stdout, restarted with
//! backoff (one second, doubling to thirty) whenever it exits. A call in
//! flight when it exits fails; calls made while it restarts wait for it,
//! within their own deadline.

use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Notify, mpsc, watch};

use crate::mcp::jsonrpc::{self, UpstreamError};
use crate::mcp::pending::{IfAbandoned, Pending};
use crate::mcp::progress::Progress;
use crate::mcp::session::{PROTOCOL_VERSION, initialize_params};

const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long resets the backoff: the server was not crash-looping.
const HEALTHY_RUN: Duration = Duration::from_secs(10);

/// One running child.
struct Running {
    /// Lines for the child's stdin, written whole and in order by a task
    /// of their own: a caller that stops waiting mid-write cannot leave
    /// half a line in the pipe.
    lines: mpsc::UnboundedSender<Vec<u8>>,
    pending: Arc<Pending>,
    /// Told when its output can no longer be read: the child is ended.
    unreadable: Notify,
}

pub struct StdioServer {
    name: String,
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    max_line_bytes: usize,
    /// The child when it is up; `None` while it (re)starts.
    running: watch::Sender<Option<Arc<Running>>>,
    /// Whether its supervisor runs (started with the gateway's runtime).
    supervised: std::sync::atomic::AtomicBool,
}

impl StdioServer {
    /// The server; its supervisor (which starts the child and ends with
    /// the last reference to the server, as when a reload drops it) starts
    /// at once inside a runtime, else with the first request.
    pub fn start(
        name: &str,
        program: &str,
        args: &[String],
        env: &[(String, String)],
        max_line_bytes: usize,
    ) -> Arc<Self> {
        let server = Arc::new(StdioServer {
            name: name.to_owned(),
            program: program.to_owned(),
            args: args.to_vec(),
            env: env.to_vec(),
            max_line_bytes,
            running: watch::channel(None).0,
            supervised: std::sync::atomic::AtomicBool::new(false),
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            server.supervise();
        }
        server
    }

    fn supervise(self: &Arc<Self>) {
        if !self
            .supervised
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            tokio::spawn(supervise(Arc::downgrade(self)));
        }
    }

    /// Sends a request and awaits its answer (the caller bounds the wait),
    /// relaying its progress to `progress`.
    pub async fn request(
        self: &Arc<Self>,
        method: &str,
        params: &Value,
        progress: Option<&Progress>,
    ) -> Result<Value, UpstreamError> {
        self.supervise();
        let mut up = self.running.subscribe();
        let running = up
            .wait_for(Option::is_some)
            .await
            .map_err(|_| UpstreamError::Unavailable("the tool server is not running".into()))?
            .clone()
            .ok_or(UpstreamError::Gone)?;
        call(&running, method, params, progress).await
    }
}

async fn call(
    running: &Arc<Running>,
    method: &str,
    params: &Value,
    progress: Option<&Progress>,
) -> Result<Value, UpstreamError> {
    let (id, answer) = running.pending.expect().ok_or(UpstreamError::Gone)?;
    let params = running.pending.with_progress(id, params, progress);
    let abandoned = {
        let running = Arc::clone(running);
        // `initialize` is never cancelled (MCP's rule): a server that
        // does not finish it is ended instead.
        let tell = method != "initialize";
        IfAbandoned::new(move || {
            running.pending.forget(id);
            if tell {
                let _ = running.write(&jsonrpc::cancelled(id));
            }
        })
    };
    running.write(&jsonrpc::request(id, method, &params))?;
    let answer = answer.await.map_err(|_| UpstreamError::Gone)?;
    abandoned.disarm();
    answer
}

impl Running {
    /// Queues one message, a line of JSON, for the child's stdin.
    fn write(&self, message: &Value) -> Result<(), UpstreamError> {
        let mut line =
            serde_json::to_vec(message).map_err(|e| UpstreamError::Protocol(e.to_string()))?;
        line.push(b'\n');
        self.lines.send(line).map_err(|_| UpstreamError::Gone)
    }
}

/// Keeps the server running while anyone holds it.
async fn supervise(server: Weak<StdioServer>) {
    let mut failures = 0u32;
    loop {
        let Some(strong) = server.upgrade() else {
            return;
        };
        let started = Instant::now();
        match spawn(&strong).await {
            Ok((mut child, running)) => {
                strong.running.send_replace(Some(Arc::clone(&running)));
                drop(strong);
                let status = tokio::select! {
                    status = child.wait() => status,
                    () = running.unreadable.notified() => {
                        let _ = child.kill().await;
                        child.wait().await
                    }
                };
                running.pending.close();
                let Some(strong) = server.upgrade() else {
                    return;
                };
                strong.running.send_replace(None);
                tracing::warn!(server = %strong.name, status = ?status.ok(), "MCP stdio server exited; restarting");
            }
            Err(why) => {
                tracing::warn!(server = %strong.name, error = %why, "MCP stdio server did not start");
            }
        }
        failures = if started.elapsed() >= HEALTHY_RUN {
            0
        } else {
            failures + 1
        };
        let backoff = Duration::from_secs(1 << failures.min(5)).min(MAX_BACKOFF);
        tokio::time::sleep(backoff).await;
    }
}

/// Starts the child, its reader, and the MCP handshake.
async fn spawn(server: &StdioServer) -> Result<(Child, Arc<Running>), String> {
    let mut child = Command::new(&server.program)
        .args(&server.args)
        .envs(server.env.iter().cloned())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("{}: {e}", server.program))?;
    let stdin = child.stdin.take().ok_or("no stdin")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (lines, queued) = mpsc::unbounded_channel();
    tokio::spawn(write(stdin, queued));
    let running = Arc::new(Running {
        lines,
        pending: Arc::new(Pending::new()),
        unreadable: Notify::new(),
    });
    tokio::spawn(read(stdout, Arc::clone(&running), server.max_line_bytes));
    let handshake = async {
        let params = initialize_params(PROTOCOL_VERSION);
        call(&running, "initialize", &params, None).await?;
        running.write(&jsonrpc::notification("notifications/initialized"))
    };
    match tokio::time::timeout(Duration::from_secs(30), handshake).await {
        Ok(Ok(())) => Ok((child, running)),
        Ok(Err(err)) => Err(format!("initialize failed: {err:?}")),
        Err(_) => Err("initialize took over 30 s".into()),
    }
}

/// Writes the queued lines to the child's stdin until it closes, or the
/// child's `Running` (holding the queue) is dropped.
async fn write(mut stdin: ChildStdin, mut queued: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(line) = queued.recv().await {
        if stdin.write_all(&line).await.is_err() {
            return;
        }
    }
}

/// Reads the child's messages, one per line, each at most
/// `max_line_bytes`: answers go to their callers; a line too long ends the
/// child (its stream can no longer be read in step).
async fn read(
    mut stdout: tokio::process::ChildStdout,
    running: Arc<Running>,
    max_line_bytes: usize,
) {
    let mut buffer = Vec::new();
    let mut chunk = vec![0; 16 * 1024];
    loop {
        let n = match stdout.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        buffer.extend_from_slice(&chunk[..n]);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buffer.drain(..=end).collect();
            if let Ok(message) = serde_json::from_slice::<Value>(&line) {
                if message.get("method").is_some() {
                    // The server's own request is answered; its
                    // notifications of progress go to their calls.
                    match jsonrpc::answer_server_request(&message) {
                        Some(answer) => drop(running.write(&answer)),
                        None => running.pending.relay(&message),
                    }
                    continue;
                }
                running.pending.answer(message);
            }
        }
        if buffer.len() > max_line_bytes {
            tracing::warn!(
                limit = max_line_bytes,
                "MCP stdio server wrote a message over the limit"
            );
            break;
        }
    }
    running.pending.close();
    running.unreadable.notify_one();
}
