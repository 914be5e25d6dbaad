//! The Files and Batches API's store in PostgreSQL, beside the ledger,
//! against a real PostgreSQL server on loopback: two replicas share files
//! and batches, one runs lines at a time, and when it dies mid-batch the
//! other takes over with every line answered once.
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

/// A replica on `url`'s database, whose one backend answers in about
/// 150 ms, so a batch takes long enough to kill a replica in the middle.
fn replica(url: &str) -> GatewayBuilder {
    GatewayBuilder::new()
        .in_process_sim(
            "local",
            "small",
            "preset: small, base_ttft_ms: 150, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 5000, jitter: 0",
        )
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
    let mut first = replica(&url).start();
    let second = replica(&url).start();

    let lines: Vec<String> = (0..LINES)
        .map(|i| {
            json!({"custom_id": format!("r{i}"), "method": "POST", "url": "/v1/chat/completions",
                   "body": {"model": "local", "max_tokens": 4,
                            "messages": [{"role": "user", "content": format!("line {i}")}]}})
            .to_string()
        })
        .collect();
    let content = lines.join("\n");
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
    let made = post_json(
        &second.url("/v1/batches"),
        &json!({"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
    )
    .await;
    assert_eq!(made.status, 200, "{:?}", made.body);
    let id = made.json()["id"].as_str().unwrap().to_owned();
    let midway = wait_for(&first, &id, "completed", 4).await;
    assert_eq!(midway["status"], "in_progress", "{midway}");

    // The runner dies without a goodbye; the second replica takes over.
    first.kill();
    let before: u64 = pg
        .psql(
            "batches",
            &format!("SELECT COUNT(*) FROM batch_lines WHERE batch_id = '{id}' AND state = 'done'"),
        )
        .parse()
        .unwrap();
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
    let output_id = ended["output_file_id"].as_str().unwrap();
    let output = get(&second.url(&format!("/v1/files/{output_id}/content"))).await;
    let answers: Vec<Value> = String::from_utf8_lossy(&output.body)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
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
        pg.psql(
            "batches",
            &format!(
                "SELECT COUNT(*) FROM requests WHERE batch = '{id}' AND status = 'ok'
                   AND writer_id = (SELECT writer_id FROM requests ORDER BY id DESC LIMIT 1)"
            ),
        )
        .parse::<u64>()
        .unwrap()
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
    let report = support::report(None, second.config_path(), &["batches", "--format", "json"]);
    let listed: Value = serde_json::from_str(&report).unwrap();
    let row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["id"] == id.as_str())
        .expect("the batch is listed");
    assert_eq!(row["status"], "completed");
}
