//! Agent task time from the ledger: per session, how long the whole task
//! took, how much of it was spent waiting on models (the union of its
//! calls' intervals, so parallel calls are not counted twice), how much in
//! tools called through `/mcp` (measured: the ledger's `tool` rows), and
//! the rest between one answer and the next request (tools the gateway did
//! not see, a person reading or typing). A session is one caller's (its
//! key's) session id; calls more than [`IDLE_SPLIT_MS`] after the last
//! answer start a new task under the same id, since an id that lasts for
//! days (a body's `user`) is not one task.

use std::collections::BTreeMap;

use rusqlite::Connection;

/// An idle gap that ends one task of a session and starts the next.
pub const IDLE_SPLIT_MS: f64 = 30.0 * 60.0 * 1000.0;

/// One session, or a total over sessions.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SessionLine {
    /// The session id; the route's name, or `total`, for totals.
    pub session: String,
    /// The caller's key (`-` with auth off).
    pub key: String,
    /// The route of its first call (`-` when called by backend name).
    pub route: String,
    /// The profile of its first call (`-` when it named none).
    pub profile: String,
    /// Sessions summed up (1 for a session's own line).
    pub sessions: u64,
    pub calls: u64,
    /// Calls that carried tool results.
    pub tool_result_calls: u64,
    /// From the first request's start to the last answer's end.
    pub wall_ms: f64,
    /// Time some call of the session was in flight.
    pub model_ms: f64,
    /// Tool calls made through `/mcp`, and their time summed (tools run
    /// side by side, or beside a model call, each count in full: then
    /// model, tool and gap time add up to more than the wall time).
    pub tool_calls: u64,
    pub tool_ms: f64,
    /// The same per tool (its name as callers see it, `SERVER_TOOL`).
    pub tools: BTreeMap<String, ToolTime>,
    /// Tool calls that began when the one before them ended with no
    /// model answer between: nothing they were sent depended on the one
    /// before, so they could have run beside it.
    pub back_to_back_tool_calls: u64,
    /// The time they would have saved run side by side: each call's own
    /// time, or the stretch of tool calls it waited through if shorter.
    pub overlappable_ms: f64,
    /// The rest, in neither a model call nor a measured tool call: tools
    /// the gateway did not see, a person reading or typing.
    pub gap_ms: f64,
    /// `model_ms` over `wall_ms`.
    pub waiting_on_models_share: Option<f64>,
    /// Every prompt token, however billed (as in every report).
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    /// Tiers its calls were served by.
    pub tiers: Vec<String>,
}

/// One tool's calls in a session (or a total).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct ToolTime {
    pub calls: u64,
    pub ms: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SessionsReport {
    pub since_ms: i64,
    pub sessions: Vec<SessionLine>,
    /// Per route, and per profile (of each session's first call).
    pub routes: Vec<SessionLine>,
    pub profiles: Vec<SessionLine>,
    pub total: SessionLine,
}

/// One call of a session: a model's, or (with `tool`) a tool's.
struct Call {
    route: String,
    profile: String,
    tier: String,
    start_ms: f64,
    end_ms: f64,
    input_tokens: u64,
    output_tokens: u64,
    cost_usd: f64,
    tool_results: bool,
    /// The tool (`SERVER_TOOL`) of a call through `/mcp`.
    tool: Option<String>,
}

impl Call {
    fn ms(&self) -> f64 {
        self.end_ms - self.start_ms
    }
}

pub fn sessions_report(
    conn: &Connection,
    since_ms: i64,
    route: Option<&str>,
) -> rusqlite::Result<SessionsReport> {
    let mut statement = conn.prepare(
        "SELECT COALESCE(key, '-'), session, COALESCE(route, '-'), tier, ts_ms, duration_ms, input_tokens + cached_tokens + cache_write_tokens,
                output_tokens, cost_usd, COALESCE(tool_results, 0), COALESCE(profile, '-'),
                CASE WHEN kind = 'tool' THEN backend || '_' || COALESCE(tool, '') END
         FROM requests
         WHERE ts_ms >= ?1 AND session IS NOT NULL AND refusal IS NULL
               AND reason != 'shadow'
         ORDER BY ts_ms, id",
    )?;
    let count = |v: i64| u64::try_from(v).unwrap_or(0);
    let mut by_session: BTreeMap<(String, String), Vec<Call>> = BTreeMap::new();
    let rows = statement.query_map([since_ms], |row| {
        let key: String = row.get(0)?;
        let session: String = row.get(1)?;
        let start_ms = row.get::<_, i64>(4)? as f64;
        Ok((
            (key, session),
            Call {
                route: row.get(2)?,
                tier: row.get(3)?,
                start_ms,
                end_ms: start_ms + row.get::<_, f64>(5)?,
                input_tokens: count(row.get(6)?),
                output_tokens: count(row.get(7)?),
                cost_usd: row.get(8)?,
                tool_results: row.get::<_, i64>(9)? != 0,
                profile: row.get(10)?,
                tool: row.get(11)?,
            },
        ))
    })?;
    for row in rows {
        let (id, call) = row?;
        by_session.entry(id).or_default().push(call);
    }
    let sessions: Vec<SessionLine> = by_session
        .into_iter()
        .flat_map(|((key, session), calls)| {
            tasks(calls)
                .into_iter()
                .map(move |task| session_line((key.clone(), session.clone()), &task))
        })
        .filter(|line| route.is_none_or(|r| line.route == r))
        .collect();
    let routes = totals(&sessions, TotalBy::Route);
    let profiles = totals(&sessions, TotalBy::Profile);
    let mut total = SessionLine {
        session: "total".into(),
        key: "-".into(),
        route: "-".into(),
        profile: "-".into(),
        ..SessionLine::default()
    };
    for line in &sessions {
        add(&mut total, line);
    }
    Ok(SessionsReport {
        since_ms,
        sessions,
        routes,
        profiles,
        total,
    })
}

/// A session's calls (in start order) cut into tasks at idle gaps.
fn tasks(calls: Vec<Call>) -> Vec<Vec<Call>> {
    let mut tasks: Vec<Vec<Call>> = Vec::new();
    let mut last_end = f64::NEG_INFINITY;
    for call in calls {
        if call.start_ms - last_end > IDLE_SPLIT_MS || tasks.is_empty() {
            tasks.push(Vec::new());
        }
        last_end = last_end.max(call.end_ms);
        if let Some(task) = tasks.last_mut() {
            task.push(call);
        }
    }
    tasks
}

fn session_line((key, session): (String, String), calls: &[Call]) -> SessionLine {
    let start = calls
        .iter()
        .map(|c| c.start_ms)
        .fold(f64::INFINITY, f64::min);
    let end = calls
        .iter()
        .map(|c| c.end_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    let wall_ms = (end - start).max(0.0);
    let (tool_calls, model_calls): (Vec<&Call>, Vec<&Call>) =
        calls.iter().partition(|c| c.tool.is_some());
    let model_ms = union_ms(&model_calls);
    let busy_ms = union_ms(&calls.iter().collect::<Vec<_>>());
    let mut tools: BTreeMap<String, ToolTime> = BTreeMap::new();
    for call in &tool_calls {
        let time = tools
            .entry(call.tool.clone().unwrap_or_default())
            .or_default();
        time.calls += 1;
        time.ms += call.ms();
    }
    let (back_to_back_tool_calls, overlappable_ms) = back_to_back(&tool_calls, &model_calls);
    let mut tiers: Vec<String> = model_calls.iter().map(|c| c.tier.clone()).collect();
    tiers.sort();
    tiers.dedup();
    let first = model_calls.first();
    SessionLine {
        session,
        key,
        route: first.map_or_else(|| "-".into(), |c| c.route.clone()),
        profile: first.map_or_else(|| "-".into(), |c| c.profile.clone()),
        sessions: 1,
        calls: model_calls.len() as u64,
        tool_result_calls: model_calls.iter().filter(|c| c.tool_results).count() as u64,
        wall_ms,
        model_ms,
        tool_calls: tool_calls.len() as u64,
        tool_ms: tool_calls.iter().map(|c| c.ms()).sum(),
        tools,
        back_to_back_tool_calls,
        overlappable_ms,
        gap_ms: (wall_ms - busy_ms).max(0.0),
        waiting_on_models_share: (wall_ms > 0.0).then(|| model_ms / wall_ms),
        input_tokens: model_calls.iter().map(|c| c.input_tokens).sum(),
        output_tokens: model_calls.iter().map(|c| c.output_tokens).sum(),
        cost_usd: model_calls.iter().map(|c| c.cost_usd).sum(),
        tiers,
    }
}

/// Tool calls (in start order) that began after every tool call before
/// them had ended, with no model answer arriving between: nothing they
/// were sent came from those calls, so they could have run beside them.
/// Each could have saved its own time, or the time of the stretch of tool
/// calls it waited through if that was shorter.
fn back_to_back(tools: &[&Call], models: &[&Call]) -> (u64, f64) {
    // A row's start is a whole millisecond and its duration is not: a
    // call that began within one of the last one's end began as it ended.
    const SLACK_MS: f64 = 1.0;
    let answered_between =
        |from: f64, to: f64| models.iter().any(|m| m.end_ms >= from && m.end_ms <= to);
    let (mut count, mut saved) = (0, 0.0);
    // Where the current stretch of tool calls began, and its latest end.
    let mut stretch: Option<f64> = None;
    let mut latest_end = f64::NEG_INFINITY;
    for call in tools {
        match stretch {
            Some(began)
                if call.start_ms + SLACK_MS >= latest_end
                    && !answered_between(latest_end - SLACK_MS, call.start_ms) =>
            {
                count += 1;
                saved += call.ms().min(latest_end - began);
            }
            // Beside a call still running: already side by side.
            Some(_) if call.start_ms < latest_end => {}
            _ => stretch = Some(call.start_ms),
        }
        latest_end = latest_end.max(call.end_ms);
    }
    (count, saved)
}

/// The length of the union of the calls' intervals: overlapping calls
/// (parallel tool calls, a hedge's two legs) count once.
fn union_ms(calls: &[&Call]) -> f64 {
    let mut spans: Vec<(f64, f64)> = calls.iter().map(|c| (c.start_ms, c.end_ms)).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut total = 0.0;
    let mut open: Option<(f64, f64)> = None;
    for (start, end) in spans {
        open = match open {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + open.map_or(0.0, |(s, e)| e - s)
}

/// What session totals are grouped by.
#[derive(Clone, Copy)]
enum TotalBy {
    Route,
    Profile,
}

impl TotalBy {
    fn label(self) -> &'static str {
        match self {
            TotalBy::Route => "route",
            TotalBy::Profile => "profile",
        }
    }

    fn field(self, line: &mut SessionLine) -> &mut String {
        match self {
            TotalBy::Route => &mut line.route,
            TotalBy::Profile => &mut line.profile,
        }
    }

    fn value(self, line: &SessionLine) -> &str {
        match self {
            TotalBy::Route => &line.route,
            TotalBy::Profile => &line.profile,
        }
    }
}

/// Totals of the sessions per route or profile, each named
/// `{label}:{value}`.
fn totals(sessions: &[SessionLine], by: TotalBy) -> Vec<SessionLine> {
    let mut totals: BTreeMap<&str, SessionLine> = BTreeMap::new();
    for line in sessions {
        let value = by.value(line);
        let total = totals.entry(value).or_default();
        add(total, line);
        total.session = format!("{}:{value}", by.label());
        value.clone_into(by.field(total));
    }
    totals.into_values().collect()
}

/// Adds a session's figures to a total.
fn add(total: &mut SessionLine, line: &SessionLine) {
    total.sessions += line.sessions;
    total.calls += line.calls;
    total.tool_result_calls += line.tool_result_calls;
    total.wall_ms += line.wall_ms;
    total.model_ms += line.model_ms;
    total.tool_calls += line.tool_calls;
    total.tool_ms += line.tool_ms;
    for (tool, time) in &line.tools {
        let sum = total.tools.entry(tool.clone()).or_default();
        sum.calls += time.calls;
        sum.ms += time.ms;
    }
    total.back_to_back_tool_calls += line.back_to_back_tool_calls;
    total.overlappable_ms += line.overlappable_ms;
    total.gap_ms += line.gap_ms;
    total.waiting_on_models_share = (total.wall_ms > 0.0).then(|| total.model_ms / total.wall_ms);
    total.input_tokens += line.input_tokens;
    total.output_tokens += line.output_tokens;
    total.cost_usd += line.cost_usd;
    for tier in &line.tiers {
        if !total.tiers.contains(tier) {
            total.tiers.push(tier.clone());
        }
    }
    total.tiers.sort();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(start_ms: f64, end_ms: f64) -> Call {
        Call {
            route: "agent".into(),
            profile: "agentic".into(),
            tier: "small".into(),
            start_ms,
            end_ms,
            input_tokens: 10,
            output_tokens: 5,
            cost_usd: 0.001,
            tool_results: start_ms > 0.0,
            tool: None,
        }
    }

    fn tool(name: &str, start_ms: f64, end_ms: f64) -> Call {
        Call {
            route: "-".into(),
            profile: "-".into(),
            tier: String::new(),
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
            tool_results: false,
            tool: Some(name.into()),
            ..call(start_ms, end_ms)
        }
    }

    #[test]
    fn measured_tool_time_is_its_own_and_the_gap_is_what_is_left() {
        // A model answer, two tools one after the other with no answer
        // between (the second could have run beside the first), a second
        // answer, a third tool and a last answer after a pause no tool
        // explains.
        let calls = [
            call(0.0, 1000.0),
            tool("tools_read", 1010.0, 1310.0),
            tool("tools_grep", 1320.0, 1520.0),
            call(1530.0, 2000.0),
            tool("tools_read", 2010.0, 2110.0),
            call(2500.0, 3000.0),
        ];
        let line = session_line(("alice".into(), "s".into()), &calls);
        assert_eq!(line.calls, 3);
        assert_eq!(line.model_ms, 1970.0);
        assert_eq!(line.tool_calls, 3);
        assert_eq!(line.tool_ms, 600.0);
        assert_eq!(
            line.tools["tools_read"],
            ToolTime {
                calls: 2,
                ms: 400.0
            }
        );
        assert_eq!(
            line.tools["tools_grep"],
            ToolTime {
                calls: 1,
                ms: 200.0
            }
        );
        assert_eq!(line.back_to_back_tool_calls, 1);
        assert_eq!(line.overlappable_ms, 200.0);
        assert_eq!(line.gap_ms, 3000.0 - 1970.0 - 600.0);
        assert_eq!(line.route, "agent", "the route is the first model call's");
        assert_eq!(line.tiers, ["small"]);
    }

    #[test]
    fn tools_called_after_an_answer_or_side_by_side_are_not_back_to_back() {
        let calls = [
            call(0.0, 100.0),
            tool("a_x", 110.0, 200.0),
            call(210.0, 300.0),
            tool("a_y", 310.0, 400.0),
            // Side by side with the next: already overlapping.
            tool("a_x", 410.0, 600.0),
            tool("a_y", 420.0, 500.0),
        ];
        let line = session_line(("k".into(), "s".into()), &calls);
        assert_eq!(line.back_to_back_tool_calls, 1, "{line:?}");
        // a_x(410-600) waited through a_y(310-400): it could have saved 90.
        assert_eq!(line.overlappable_ms, 90.0);
        // One long call with two short ones beside it, the second after
        // the first ended but while the long one ran: none back to back.
        let beside = [
            tool("a_x", 0.0, 500.0),
            tool("a_y", 100.0, 200.0),
            tool("a_y", 300.0, 400.0),
        ];
        let line = session_line(("k".into(), "s".into()), &beside);
        assert_eq!(line.back_to_back_tool_calls, 0, "{line:?}");
    }

    #[test]
    fn overlapping_calls_count_once_and_the_rest_is_gap() {
        // Two calls in parallel (0-1000, 500-1500), a tool gap, then one
        // more (1800-2800).
        let calls = [call(0.0, 1000.0), call(500.0, 1500.0), call(1800.0, 2800.0)];
        let line = session_line(("alice".into(), "s".into()), &calls);
        assert_eq!(line.wall_ms, 2800.0);
        assert_eq!(line.model_ms, 2500.0);
        assert_eq!(line.gap_ms, 300.0);
        assert_eq!(line.calls, 3);
        assert_eq!(line.tool_result_calls, 2);
        assert_eq!(line.output_tokens, 15);
    }

    #[test]
    fn a_long_idle_gap_starts_a_new_task() {
        let hour = 3_600_000.0;
        let tasks = tasks(vec![
            call(0.0, 1000.0),
            call(1300.0, 2000.0),
            call(hour, hour + 500.0),
        ]);
        let lengths: Vec<usize> = tasks.iter().map(Vec::len).collect();
        assert_eq!(lengths, [2, 1]);
    }
}
