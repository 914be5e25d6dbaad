//! A tool call's ledger row: which server and tool, for whom, in which
//! session, how long it took and how it ended, and its size both ways.

use std::time::Duration;

use crate::admit::access::Caller;
use crate::ledger::LedgerRow;
use crate::state::app::App;

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

pub fn record_tool_call(app: &App, call: ToolCall<'_>) {
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
