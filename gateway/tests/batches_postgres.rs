//! The Files and Batches API's store in PostgreSQL, beside the ledger,
//! against a real PostgreSQL server on loopback: two replicas share files
//! and batches, one runs lines at a time, and when it dies mid-batch, or
//! PostgreSQL ends its lock's session while it lives on, the other takes
//! over with every line answered once; a batch run by one is cancelled
//! through the other.
//!
//! Skips when PostgreSQL is not installed (unless
//! `SWITCHYARD_REQUIRE_SERVERS` is set); bounded in time and requests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use http::Method;
use serde_json::{Value, json};
use support::servers::PostgresServer;
use support::{GatewayBuilder, Proc, get, post_json, request};

/// Lines in the batch.
const LINES: usize = 16;
/// Lines a replica runs at once.
const IN_FLIGHT: usize = 2;
/// The batch runner's advisory lock (`batch::store`'s `RUNNER_LOCK`).
const RUNNER_LOCK: i64 = 0x7377_6974_6368_6272;

/// A replica on `url`'s database, whose one backend answers in about
/// `ttft_ms`, so a batch takes long enough to act in the middle.
fn replica(url: &str, ttft_ms: u32) -> GatewayBuilder {
    // Room for both lines at once beside the interactive reserve.
    GatewayBuilder::new()
        .backend_yaml(&format!(
            "  local:\n    tier: small\n    max_concurrency: 4\n    max_queue: 16\n    sim: {{preset: small, base_ttft_ms: {ttft_ms}, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0}}\n"
        ))
        .section(&format!(
            "ledger: {{flush_ms: 50, postgres: {{url: '{url}'}}}}"
        ))
        .section(&format!("batches: {{lines_in_flight: {IN_FLIGHT}}}"))
}

/// Uploads `content` as a `batch` file through `/v1/files` (multipart, as
/// the SDKs send it); the file object.
async fn upload(gateway: &Proc, content: &str) -> Value {
    let boundary = "switchyard-test-boundary";
    let body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n\
         --{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"input.jsonl\"\r\n\
         Content-Type: application/jsonl\r\n\r\n{content}\r\n--{boundary}--\r\n"
    );
    let kind = format!("multipart/form-data; boundary={boundary}");
    let reply = request(
        Method::POST,
        &gateway.url("/v1/files"),
        &[("content-type", &kind)],
        body.into_bytes(),
        false,
    )
    .await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.json()
}

/// `n` chat lines, `r0` to `rN-1`.
fn lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            json!({"custom_id": format!("r{i}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "local", "max_tokens": 4,
                            "messages": [{"role": "user", "content": format!("line {i}")}]}})
            .to_string()
        })
        .collect()
}

/// Makes a batch of file `file_id` on `gateway`; its id.
async fn make_batch(gateway: &Proc, file_id: &str) -> String {
    let made = post_json(
        &gateway.url("/v1/batches"),
        &json!({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(made.status, 200, "{:?}", made.body);
    made.json()["id"].as_str().unwrap().to_owned()
}

/// A file's lines, as JSON.
async fn jsonl(gateway: &Proc, file_id: &str) -> Vec<Value> {
    let content = get(&gateway.url(&format!("/v1/files/{file_id}/content"))).await;
    String::from_utf8_lossy(&content.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `SELECT COUNT(*) ...` in the test database.
fn count(pg: &PostgresServer, sql: &str) -> u64 {
    pg.psql("batches", sql).parse().unwrap()
}

async fn batch(gateway: &Proc, id: &str) -> Value {
    let reply = get(&gateway.url(&format!("/v1/batches/{id}"))).await;
    assert_eq!(reply.status, 200, "{:?}", reply.body);
    reply.json()
}

/// Polls `gateway` (at most 60 s) until the batch's status is `status` or
/// `answered` of its lines are; the batch.
async fn wait_for(gateway: &Proc, id: &str, status: &str, answered: u64) -> Value {
    for _ in 0..600 {
        let batch = batch(gateway, id).await;
        let counts = &batch["request_counts"];
        let done = counts["completed"].as_u64().unwrap() + counts["failed"].as_u64().unwrap();
        if batch["status"] == status || done >= answered {
            return batch;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("batch {id} never reached {status} or {answered} answered lines");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_share_batches_and_one_takes_over_when_the_runner_dies() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("batches");
    // The first replica up takes the runner's lease; the second waits.
    let mut first = replica(&url, 150).start();
    let second = replica(&url, 150).start();

    let content = lines(LINES).join("\n");
    let file = upload(&first, &content).await;
    let file_id = file["id"].as_str().unwrap();

    // The file is the second replica's too: listed, described, readable.
    let listed = get(&second.url("/v1/files")).await.json();
    assert!(
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == file["id"]),
        "{listed}"
    );
    let read = get(&second.url(&format!("/v1/files/{file_id}/content"))).await;
    assert_eq!(
        String::from_utf8_lossy(&read.body).trim_end(),
        content,
        "the content as uploaded"
    );

    // Made on the second replica; run by the first, which holds the lease.
    let id = make_batch(&second, file_id).await;
    let midway = wait_for(&first, &id, "completed", 4).await;
    assert_eq!(midway["status"], "in_progress", "{midway}");

    // The runner dies without a goodbye; the second replica takes over.
    // Rows stamped from here on are the second replica's: it starts lines
    // only once the first's lease has run out.
    let killed_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    first.kill();
    let before = count(
        &pg,
        &format!("SELECT COUNT(*) FROM batch_lines WHERE batch_id = '{id}' AND state = 'done'"),
    );
    assert!(
        (4..LINES as u64).contains(&before),
        "killed mid-batch: {before} of {LINES} answered"
    );
    let ended = wait_for(&second, &id, "completed", u64::MAX).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(
        (
            ended["request_counts"]["completed"].as_u64(),
            ended["request_counts"]["failed"].as_u64()
        ),
        (Some(LINES as u64), Some(0))
    );

    // Every line answered once, in the output file.
    let answers = jsonl(&second, ended["output_file_id"].as_str().unwrap()).await;
    assert_eq!(answers.len(), LINES);
    let ids: BTreeSet<String> = answers
        .iter()
        .map(|a| a["custom_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, (0..LINES).map(|i| format!("r{i}")).collect());
    assert!(answers.iter().all(|a| a["response"]["status_code"] == 200));

    // Lines answered before the kill were not run again: the second
    // replica's ledger rows for the batch are the lines left, and at most
    // the lines in flight at the kill more.
    let second_rows = || {
        count(
            &pg,
            &format!(
                "SELECT COUNT(*) FROM requests WHERE batch = '{id}' AND status = 'ok'
                   AND ts_ms >= {killed_ms}"
            ),
        )
    };
    let mut rows = 0;
    for _ in 0..50 {
        rows = second_rows();
        if rows >= LINES as u64 - before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        (LINES as u64 - before..=LINES as u64 - before + IN_FLIGHT as u64).contains(&rows),
        "{rows} rows after the takeover, {before} lines answered before it"
    );

    // `switchyard batches` reads the same store.
    let report = support::report(
        Some(&second.dir),
        second.config_path(),
        &["batches", "--format", "json"],
    );
    let listed: Value = serde_json::from_str(&report).unwrap();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id.as_str())
        .expect("the batch is listed");
    assert_eq!(row["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_lock_session_stops_the_runners_lines_and_a_cancel_on_either_replica_holds() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("batches");
    // Lines a second long: both are mid-call when the lock goes.
    let first = replica(&url, 1000).start();
    let second = replica(&url, 1000).start();

    // 12 lines and one that is not JSON (stored failed, with no body).
    let mut content = lines(12);
    content.insert(5, "not json".into());
    let file = upload(&first, &content.join("\n")).await;
    let id = make_batch(&first, file["id"].as_str().unwrap()).await;
    wait_for(&second, &id, "completed", 3).await;
    // PostgreSQL ends the lock's session, and the lock is held from psql
    // for 3 s: the first replica lives on, but no replica may run lines
    // now, and none does; the lines running when the session ended are
    // stopped, not answered.
    let done_lines = || {
        count(
            &pg,
            &format!(
                "SELECT COUNT(*) FROM batch_lines WHERE batch_id = '{id}' AND state != 'pending'"
            ),
        )
    };
    let (held, settled, later) = std::thread::scope(|scope| {
        let holder = scope.spawn(|| {
            pg.psql(
                "batches",
                &format!(
                    "SELECT COUNT(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory';
                     SELECT pg_advisory_lock({RUNNER_LOCK}); SELECT pg_sleep(3)"
                ),
            )
        });
        std::thread::sleep(Duration::from_millis(1000));
        let settled = done_lines();
        std::thread::sleep(Duration::from_millis(1500));
        (holder.join().unwrap(), settled, done_lines())
    });
    assert!(
        held.starts_with('1'),
        "one session held the runner's lock: {held}"
    );
    assert_eq!(
        settled, later,
        "no line answered while another session held the lock"
    );
    assert!(later < 13, "the batch was still under way");
    let done = wait_for(&first, &id, "completed", u64::MAX).await;
    assert_eq!(done["status"], "completed", "{done}");
    let counts = &done["request_counts"];
    assert_eq!(
        (counts["completed"].as_u64(), counts["failed"].as_u64()),
        (Some(12), Some(1))
    );
    let output = jsonl(&first, done["output_file_id"].as_str().unwrap()).await;
    let ids: BTreeSet<&str> = output
        .iter()
        .map(|o| o["custom_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        (output.len(), ids.len()),
        (12, 12),
        "each line answered once"
    );
    let errors = jsonl(&first, done["error_file_id"].as_str().unwrap()).await;
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["error"]["line"], 6);
    // The lines stopped when the lock went are in the ledger as cancelled
    // calls, and every ok row is a line's one answer, bar one answered in
    // the instant before its runner saw the lock go.
    let rows = |status: &str| {
        count(
            &pg,
            &format!("SELECT COUNT(*) FROM requests WHERE batch = '{id}' AND status = '{status}'"),
        )
    };
    let (mut ok, mut stopped) = (0, 0);
    for _ in 0..50 {
        (ok, stopped) = (rows("ok"), rows("cancelled"));
        if ok >= 12 && stopped >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stopped >= 1,
        "a line running when the lock went was stopped: {}",
        pg.psql(
            "batches",
            "SELECT batch, status, COUNT(*) FROM requests GROUP BY 1, 2"
        )
    );
    assert!(
        (12..=12 + IN_FLIGHT as u64).contains(&ok),
        "{ok} ok rows for 12 lines"
    );

    // A batch run by whichever replica holds the lock, cancelled through
    // the other one and through the one that runs it alike.
    let file = upload(&second, &lines(30).join("\n")).await;
    let id = make_batch(&second, file["id"].as_str().unwrap()).await;
    wait_for(&first, &id, "completed", 2).await;
    let cancelled = post_json(&first.url(&format!("/v1/batches/{id}/cancel")), &json!({})).await;
    assert_eq!(cancelled.status, 200, "{:?}", cancelled.body);
    let done = wait_for(&second, &id, "cancelled", u64::MAX).await;
    assert_eq!(done["status"], "cancelled", "{done}");
    let counts = &done["request_counts"];
    let (answered, failed) = (
        counts["completed"].as_u64().unwrap(),
        counts["failed"].as_u64().unwrap(),
    );
    assert!(answered >= 2 && answered + failed == 30, "{counts}");
    let errors = jsonl(&second, done["error_file_id"].as_str().unwrap()).await;
    assert_eq!(errors.len() as u64, failed);
    assert!(
        errors
            .iter()
            .all(|e| e["error"]["code"] == "batch_cancelled")
    );
    // The second batch's list page, then the first's after it, newest first.
    let page = get(&first.url("/v1/batches?limit=1")).await.json();
    assert_eq!(page["data"][0]["id"], id.as_str());
    assert_eq!(page["has_more"], true);
    let after = page["last_id"].as_str().unwrap();
    let next = get(&second.url(&format!("/v1/batches?limit=1&after={after}")))
        .await
        .json();
    assert_eq!(next["data"].as_array().unwrap().len(), 1);
    assert_ne!(next["data"][0]["id"], id.as_str());
}
