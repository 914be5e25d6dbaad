//! A tool call's ledger row: which server and tool, for whom, in which
//! session, how long it took and how it ended, and its size both ways.

use std::time::{Duration, Instant, SystemTime};

use crate::admit::access::Caller;
use crate::ledger::LedgerRow;
use crate::state::app::App;
use crate::telemetry::ToolSpan;

pub struct ToolCall<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    pub caller: Option<&'a Caller>,
    pub session: Option<String>,
    pub ts_ms: i64,
    pub duration: Duration,
    /// `ok`, `tool_error` (the tool said it failed), `server_gone`,
    /// `unavailable` (not reached, or not in time), `cancelled` (by the
    /// caller), `error`.
    pub outcome: &'static str,
    pub bytes_in: usize,
    pub bytes_out: usize,
}

/// A tool call under way. Its row and span are written when it is
/// finished; should it be dropped first (its caller went away, and the
/// request serving it with it), as `cancelled`: no call goes unrecorded.
pub struct Recording<'a> {
    app: &'a App,
    /// Taken when written.
    call: Option<ToolCall<'a>>,
    span: Option<ToolSpan>,
    started: Instant,
}

impl<'a> Recording<'a> {
    /// Starts timing `call` (its outcome, duration and answer size are
    /// filled in when it ends).
    pub fn start(app: &'a App, call: ToolCall<'a>, span: Option<ToolSpan>) -> Self {
        Recording {
            app,
            call: Some(call),
            span,
            started: Instant::now(),
        }
    }

    pub fn finish(mut self, outcome: &'static str, bytes_out: usize) {
        self.write(outcome, bytes_out);
    }

    fn write(&mut self, outcome: &'static str, bytes_out: usize) {
        let Some(mut call) = self.call.take() else {
            return;
        };
        if let Some(span) = self.span.take() {
            span.end(SystemTime::now(), outcome, Vec::new());
        }
        call.duration = self.started.elapsed().min(Duration::from_secs(86_400));
        call.outcome = outcome;
        call.bytes_out = bytes_out;
        record_tool_call(self.app, call);
    }
}

impl Drop for Recording<'_> {
    fn drop(&mut self) {
        self.write("cancelled", 0);
    }
}

fn record_tool_call(app: &App, call: ToolCall<'_>) {
    let key = call.caller.map(|c| &c.key);
    let ms = call.duration.as_secs_f64() * 1000.0;
    app.metrics
        .tool_call(call.server, call.tool, call.outcome, call.duration);
    let row = LedgerRow {
        key: key.map(|k| k.name.clone()),
        team: key.and_then(|k| k.team.clone()),
        backend: call.server.to_owned(),
        session: call.session.map(std::sync::Arc::from),
        kind: Some("tool"),
        tool: Some(call.tool.to_owned()),
        bytes_in: Some(call.bytes_in as u64),
        bytes_out: Some(call.bytes_out as u64),
        ..LedgerRow::unbilled(call.ts_ms, ("mcp", "tool"), (call.outcome, "tool"), ms)
    };
    app.ledger.write_detached(row);
}
