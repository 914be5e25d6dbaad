//! The writer's tests: batches, statements and their bindings, and waits.

use switchyard_policies::{PromptClass, TokenCounts};

use super::*;
use crate::ledger::Drafts;
use crate::ledger::row::LedgerRow;

fn row(i: usize) -> LedgerRow {
    LedgerRow {
        ts_ms: i64::try_from(i).unwrap_or(0),
        request_id: Some(format!("req-{i}")),
        client_request_id: None,
        key: Some("alice".into()),
        team: None,
        route: Some("auto".into()),
        backend: "local".into(),
        tier: "small",
        provider: Some("openai"),
        kind: None,
        tool: None,
        bytes_in: None,
        bytes_out: None,
        batch: None,
        profile: None,
        dialect: "openai",
        endpoint: "chat",
        tokens: TokenCounts {
            input: i as u64,
            output: 2 * i as u64,
            ..TokenCounts::default()
        },
        cost_usd: 0.5,
        counterfactual_usd: 1.0,
        ttft_ms: Some(1.0),
        predicted_ttft_ms: None,
        decode_tokens_per_s: None,
        duration_ms: 2.0,
        status: "ok",
        refusal: None,
        reason: "split",
        hedge: false,
        fallback: false,
        cache_hit: false,
        estimated: false,
        prompt_class: PromptClass::Code,
        drafts: Some(Drafts {
            drafted: 7,
            accepted: 5,
        }),
        expected_cached_tokens: 3,
        service_tier: None,
        unpriced: false,
        session: Some("task-1".into()),
        tool_results: true,
        queued_ms: 0.0,
        error: None,
        shadow: None,
        sensitive: None,
    }
}

/// A new ledger in a directory of its own, `switchyard-NAME-PID`, which
/// the test removes.
fn fresh_ledger(name: &str) -> (std::path::PathBuf, Connection) {
    let dir = std::env::temp_dir().join(format!("switchyard-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ledger.db");
    let conn = super::super::schema::open(path.to_str().unwrap(), false).unwrap();
    (dir, conn)
}

/// Every row of a batch lands whole, each value in its own column.
#[test]
fn every_row_of_a_batch_lands_in_its_columns() {
    let (dir, mut conn) = fresh_ledger("writer");
    let rows = 69;
    let batch: Vec<Entry> = (0..rows).map(|i| Entry::unwaited(row(i))).collect();
    commit(&mut conn, &batch).unwrap();
    let (count, inputs, outputs): (i64, i64, i64) = conn
        .query_row(
            "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM requests",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let expected = i64::try_from(rows * (rows - 1) / 2).unwrap();
    assert_eq!(
        (count, inputs, outputs),
        (i64::try_from(rows).unwrap(), expected, 2 * expected)
    );
    let last: (String, i64, String, i64, i64) = conn
        .query_row(
            "SELECT request_id, ts_ms, prompt_class, draft_accepted_tokens, expected_cached_tokens FROM requests WHERE ts_ms = ?1",
            [i64::try_from(rows - 1).unwrap()],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap();
    assert_eq!(
        last,
        (
            format!("req-{}", rows - 1),
            i64::try_from(rows - 1).unwrap(),
            "code".into(),
            5,
            3
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cell empty in one row and not in the next (or the other way
/// round), or the same or another in both, lands as it is in each: in
/// a statement of many rows and in one of one, in the next run of the
/// same statement, and in the next batch.
#[test]
fn a_value_in_one_row_never_fills_the_next_rows_empty_cell() {
    let (dir, mut conn) = fresh_ledger("nulls");
    // Laid out for eight rows a statement: the first batch runs the
    // eight-row statement twice, then the one-row statement three times;
    // the second runs each once. Between the two runs of the first, the
    // row positions go from empty to empty, empty to set, set to empty,
    // "a" to "a" and "b" to "c"; the one-row runs go from empty to set,
    // to the same and to empty.
    assert_eq!(ROWS_PER_INSERT, 8);
    #[rustfmt::skip]
    let sessions: [Option<&str>; 28] = [
        None, None, Some("a"), Some("a"), Some("b"), None, Some("a"), Some("x"),
        None, Some("a"), None, Some("a"), Some("c"), Some("a"), None, Some("x"),
        Some("a"), Some("a"), None,
        Some("a"), None, Some("a"), None, Some("b"), Some("b"), None, Some("a"),
        Some("d"),
    ];
    let with = |i: usize| {
        let mut r = row(i);
        r.session = sessions[i].map(Into::into);
        r.ttft_ms = sessions[i].map(|_| 1.0);
        r.team = sessions[i].map(|_| "t".into());
        Entry::unwaited(r)
    };
    commit(&mut conn, &(0..19).map(with).collect::<Vec<_>>()).unwrap();
    commit(&mut conn, &(19..28).map(with).collect::<Vec<_>>()).unwrap();
    let mut statement = conn
        .prepare("SELECT session, ttft_ms, team FROM requests ORDER BY ts_ms")
        .unwrap();
    let rows: Vec<(Option<String>, Option<f64>, Option<String>)> = statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let expected: Vec<(Option<String>, Option<f64>, Option<String>)> = sessions
        .iter()
        .map(|s| (s.map(Into::into), s.map(|_| 1.0), s.map(|_| "t".into())))
        .collect();
    assert_eq!(rows, expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every column a lean statement leaves out is one of the table's and
/// may be empty.
#[test]
fn the_sparse_columns_are_columns_that_may_be_empty() {
    for name in SPARSE {
        let column = COLUMNS.iter().find(|c| c.name == name);
        assert!(column.is_some_and(|c| !c.required), "{name}");
    }
    assert_eq!(LEAN.0.len() + SPARSE.len(), COLUMNS.len());
}

/// Rows of both shapes, in runs of every length from one to past two
/// statements' worth, land in the order they came, each with its own
/// values, the sparse ones included.
#[test]
fn rows_of_both_shapes_land_in_their_order() {
    let (dir, mut conn) = fresh_ledger("shapes");
    let runs = [1, 3, 8, 1, 17, 2, 9, 1, 1, 16];
    let mut batch = Vec::new();
    for (n, run) in runs.iter().enumerate() {
        for _ in 0..*run {
            let mut r = row(batch.len());
            r.session = None;
            r.drafts = None;
            // Every other run sets one sparse column or another.
            if n % 2 == 1 {
                match batch.len() % 3 {
                    0 => r.team = Some(format!("team-{}", batch.len())),
                    1 => r.bytes_in = Some(7),
                    _ => r.session = Some("s".into()),
                }
            }
            assert_eq!(
                Shape::of(&cells(&r)),
                if n % 2 == 1 { Shape::Full } else { Shape::Lean }
            );
            batch.push(Entry::unwaited(r));
        }
    }
    commit(&mut conn, &batch[..40]).unwrap();
    commit(&mut conn, &batch[40..]).unwrap();
    let mut statement = conn
        .prepare("SELECT ts_ms, request_id, team, bytes_in, session, input_tokens FROM requests ORDER BY id")
        .unwrap();
    type Landed = (
        i64,
        String,
        Option<String>,
        Option<i64>,
        Option<String>,
        i64,
    );
    let landed: Vec<Landed> = statement
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let sent: Vec<Landed> = batch
        .iter()
        .map(|e| {
            let r = &e.row;
            (
                r.ts_ms,
                r.request_id.clone().unwrap(),
                r.team.clone(),
                r.bytes_in.map(|b| i64::try_from(b).unwrap()),
                r.session.as_deref().map(str::to_owned),
                i64::try_from(r.tokens.input).unwrap(),
            )
        })
        .collect();
    assert_eq!(landed, sent);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A row that fails takes its whole batch with it, the rows its
/// statement wrote before it included: the trigger's `RAISE(FAIL)`
/// keeps those rows, as a failed `INSERT OR FAIL` does, and only the
/// batch's transaction drops them. The next batch lands whole.
#[test]
fn a_failing_row_leaves_none_of_its_batch() {
    let (dir, mut conn) = fresh_ledger("failing");
    conn.execute_batch(
        "CREATE TRIGGER refuse_five BEFORE INSERT ON requests WHEN NEW.ts_ms = 5
         BEGIN SELECT RAISE(FAIL, 'row five refused'); END;",
    )
    .unwrap();
    let batch = |range: std::ops::Range<usize>| -> Vec<Entry> {
        range.map(|i| Entry::unwaited(row(i))).collect()
    };
    let failed = commit(&mut conn, &batch(0..9)).unwrap_err();
    assert!(failed.to_string().contains("row five refused"), "{failed}");
    let count = |conn: &Connection| -> i64 {
        conn.query_row("SELECT COUNT(*) FROM requests", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(count(&conn), 0);
    commit(&mut conn, &batch(6..15)).unwrap();
    assert_eq!(count(&conn), 9);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_batch_waits_for_about_the_rows_it_has_room_for_at_their_pace() {
    let ms = Duration::from_millis;
    // The first wait, before any pace is known, is the shortest.
    assert_eq!(nap(1, Duration::ZERO, 1023, ms(200)), POLL);
    // 8 rows in 20 ms: 1,015 more would take seconds, so the longest.
    assert_eq!(nap(9, ms(20), 1015, ms(180)), LONGEST_NAP);
    // Nor past the batch's deadline.
    assert_eq!(nap(9, ms(150), 1015, ms(50)), ms(50));
    // 300 rows in 20 ms: 723 more take about 48 ms.
    let fast = nap(301, ms(20), 723, ms(180));
    assert!(fast > ms(45) && fast < ms(50), "{fast:?}");
    // A queue of one or two: room for at most one row, so no longer than
    // the shortest wait.
    assert_eq!(nap(5, ms(20), 1, ms(180)), POLL);
    assert_eq!(nap(5, ms(20), 0, ms(180)), POLL);
}
