//! The ledger in PostgreSQL, against a real PostgreSQL server on loopback:
//! replicas sharing one database, PostgreSQL restarted mid-load, a full
//! spool refusing new requests, migrations raced by replicas starting
//! together, and reports equal to the SQLite ledger's.
//!
//! Each test starts its own server (`support::servers`), skips when
//! PostgreSQL is not installed (unless `SWITCHYARD_REQUIRE_SERVERS` is set)
//! and is bounded in time and in requests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;
use support::servers::PostgresServer;
use support::{Proc, get, get_with, post_with, priced, short};

/// `(client request id, HTTP status)` of every request that got an answer.
type Answers = Vec<(String, u16)>;

/// A gateway writing to `url`'s database, with `extra` in its
/// `ledger.postgres` section.
fn replica(url: &str, durability: &str, extra: &str) -> support::GatewayBuilder {
    priced(", max_concurrency: 64").section(&format!(
        "ledger: {{durability: {durability}, flush_ms: 50, postgres: {{url: '{url}'{extra}}}}}"
    ))
}

/// Sends chat requests round-robin over `urls` from `workers` tasks, each
/// at most `per_worker` requests and until `stop` is set; each request
/// carries a unique `x-request-id` starting with `tag`.
async fn load(
    urls: Vec<String>,
    workers: usize,
    per_worker: usize,
    stop: Arc<AtomicBool>,
    tag: &str,
) -> Answers {
    let urls = Arc::new(urls);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (urls, stop, tag) = (urls.clone(), stop.clone(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            for i in 0..per_worker {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let id = format!("{tag}-{w}-{i}");
                let mut body = short("load", "auto");
                body["stream"] = json!(i % 3 == 0);
                let url = &urls[(w + i) % urls.len()];
                let reply = post_with(url, &body, &[("x-request-id", &id)]).await;
                answers.push((id, reply.status.as_u16()));
            }
            answers
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("load task"));
    }
    all
}

/// How many times each client request id is in the database.
fn rows_per_id(pg: &PostgresServer, db: &str) -> HashMap<String, u32> {
    pg.psql(
        db,
        "SELECT client_request_id, COUNT(*) FROM requests WHERE client_request_id IS NOT NULL GROUP BY 1",
    )
    .lines()
    .filter_map(|line| {
        let (id, n) = line.split_once('|')?;
        Some((id.to_owned(), n.parse().ok()?))
    })
    .collect()
}

/// Asserts every answered request has exactly one row, and no row is there
/// twice.
fn assert_each_once(answers: &Answers, rows: &HashMap<String, u32>) {
    let missing: Vec<_> = answers
        .iter()
        .filter(|(id, _)| !rows.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} answered requests have no row: {:?}",
        missing.len(),
        answers.len(),
        missing.iter().take(10).collect::<Vec<_>>()
    );
    for (id, status) in answers {
        assert_eq!(
            rows.get(id).copied(),
            Some(1),
            "request {id} (answered {status}) has not exactly one row"
        );
    }
    let twice: Vec<_> = rows.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "rows written twice: {twice:?}");
}

/// The gateway's `switchyard_ledger_pending_rows` gauge.
async fn pending_rows(gateway: &Proc) -> Option<u64> {
    let text = String::from_utf8_lossy(&get(&gateway.url("/metrics")).await.body).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix("switchyard_ledger_pending_rows "))
        .and_then(|v| v.trim().parse().ok())
}

/// The gateway's `switchyard_ledger_lost_rows` counter.
async fn lost_rows(gateway: &Proc) -> u64 {
    let text = String::from_utf8_lossy(&get(&gateway.url("/metrics")).await.body).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix("switchyard_ledger_lost_rows_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("the lost-rows counter is exported")
}

/// Waits (at most 30 s) until the gateway's spool and queue are empty,
/// and then for its last batch's commit.
/// Starts PostgreSQL again and waits until `gateway`'s spool drains.
async fn restart_and_drain(mut pg: PostgresServer, gateway: &Proc) -> PostgresServer {
    let pg = tokio::task::spawn_blocking(move || {
        pg.restart();
        pg
    })
    .await
    .expect("start PostgreSQL");
    assert!(
        tokio::time::timeout(Duration::from_secs(40), drained(gateway))
            .await
            .unwrap_or(false),
        "the spool drains once PostgreSQL is back"
    );
    pg
}

async fn drained(gateway: &Proc) -> bool {
    for _ in 0..300 {
        if pending_rows(gateway).await == Some(0) {
            // The batch being committed has left the spool's count only
            // once committed; a row on its way from the queue into the
            // spool is in neither for an instant: look twice.
            tokio::time::sleep(Duration::from_millis(300)).await;
            if pending_rows(gateway).await == Some(0) {
                return true;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Starts `n` gateways at once (their schema migrations race).
fn start_together(builders: Vec<support::GatewayBuilder>) -> Vec<Proc> {
    let threads: Vec<_> = builders
        .into_iter()
        .map(|b| std::thread::spawn(move || b.start()))
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a replica started"))
        .collect()
}

/// Three replicas started together apply the schema once, then under
/// concurrent load spread over them every answered request is in
/// PostgreSQL exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_migrate_once_and_record_every_request_once() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("replicas");
    let admin = format!(
        "auth: {{admin_key_hash: '{}'}}",
        support::key_hash("admin-secret")
    );
    let mut replicas = start_together(
        (0..3)
            .map(|_| replica(&url, "group", "").section(&admin))
            .collect(),
    );
    assert_eq!(
        pg.psql(
            "replicas",
            "SELECT string_agg(version::text, ',' ORDER BY version) FROM switchyard_schema"
        ),
        // Version 2 added the shadow columns; 3 the error column, the
        // request-id index and the stored keys; 8 the batch store's tables.
        "1,2,3,4,5,6,7,8",
        "each schema version applied once"
    );
    let urls = replicas
        .iter()
        .map(|r| r.url("/v1/chat/completions"))
        .collect();
    let answers = tokio::time::timeout(
        Duration::from_secs(60),
        load(urls, 12, 25, Arc::new(AtomicBool::new(false)), "r"),
    )
    .await
    .expect("load within 60 s");
    assert_eq!(answers.len(), 300);
    assert!(
        answers.iter().all(|(_, status)| *status == 200),
        "all served: {:?}",
        answers
            .iter()
            .filter(|(_, s)| *s != 200)
            .take(5)
            .collect::<Vec<_>>()
    );
    for replica in &replicas {
        assert!(drained(replica).await, "every replica's rows written");
    }
    // Any replica's admin API reports all three replicas' rows.
    let as_admin = [("authorization", "Bearer admin-secret")];
    let spend = get_with(&replicas[2].url("/admin/spend?since=1h&by=key"), &as_admin).await;
    assert_eq!(spend.status, 200);
    assert_eq!(spend.json()["total"]["requests"], 300, "{}", spend.json());
    let stats = get_with(&replicas[0].url("/admin/stats?window=1h"), &as_admin).await;
    assert_eq!(stats.status, 200);
    assert_eq!(
        stats.json()["totals"]["requests"],
        300,
        "{}",
        stats.json()["totals"]
    );
    let budgets = get_with(&replicas[1].url("/admin/budgets?since=1h"), &as_admin).await;
    assert_eq!(budgets.status, 200, "{:?}", budgets.body);
    for replica in &mut replicas {
        assert!(replica.terminate().success(), "clean shutdown");
    }
    assert_each_once(&answers, &rows_per_id(&pg, "replicas"));
    assert_eq!(
        pg.psql("replicas", "SELECT COUNT(DISTINCT writer_id) FROM requests"),
        "3",
        "each replica writes under its own writer id"
    );
    // `switchyard spend` on any replica's config reports all three.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["spend", "--since", "1h", "--by", "key", "--format", "json"])
        .arg("--config")
        .arg(replicas[1].config_path())
        .output()
        .expect("run switchyard spend");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["total"]["requests"], 300, "{report}");
}

/// `switchyard check` takes a PostgreSQL ledger, refuses what this build
/// cannot do (TLS) with a reason, and never shows the URL's password.
#[test]
fn check_validates_the_postgres_ledger_without_showing_its_password() {
    let check_with = |ledger: &str, flags: &[&str]| {
        let path = support::write_temp_config(&format!(
            "backends:\n  small:\n    tier: small\n    sim: {{preset: small}}\n{ledger}\n"
        ));
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("check")
            .args(flags)
            .arg(&path)
            .output()
            .expect("run switchyard check");
        let _ = std::fs::remove_file(&path);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!text.contains("hunter2"), "the password shown: {text}");
        (out.status.success(), text)
    };
    let check = |ledger: &str| check_with(ledger, &[]);
    let (ok, text) = check(
        "ledger: {durability: strict, postgres: {url: 'postgres://sy:hunter2@db:5432/ledger', pool_size: 8, spool_rows: 5000, on_full: serve, strict_wait_ms: 2000}}",
    );
    assert!(ok, "{text}");
    // An unset variable stops `serve`, so `check` too, unless told the
    // file is checked where it will not run.
    let (ok, text) = check("ledger: {postgres: {url: 'env:SY_TEST_UNSET_LEDGER_URL'}}");
    assert!(!ok);
    assert!(
        text.contains("ledger.postgres.url: env:SY_TEST_UNSET_LEDGER_URL is not set"),
        "{text}"
    );
    let (ok, text) = check_with(
        "ledger: {postgres: {url: 'env:SY_TEST_UNSET_LEDGER_URL'}}",
        &["--allow-missing-env"],
    );
    assert!(
        ok && text.contains("warning: ledger.postgres.url"),
        "{text}"
    );
    let (ok, text) =
        check("ledger: {postgres: {url: 'postgres://sy:hunter2@db/ledger?sslmode=require'}}");
    assert!(!ok);
    assert!(
        text.contains("ledger.postgres.url")
            && text.contains("sslmode=require")
            && text.contains("without TLS"),
        "{text}"
    );
    let (ok, text) = check("ledger: {postgres: {url: 'mysql://sy:hunter2@db/ledger'}}");
    assert!(!ok && text.contains("postgres://"), "{text}");
    let (ok, text) = check("ledger: {postgres: {url: 'postgres://db/l', on_full: drop}}");
    assert!(
        !ok && text.contains("ledger.postgres.on_full") && text.contains("refuse, serve"),
        "{text}"
    );
    let (ok, text) = check("ledger: {postgres: {url: 'postgres://db/l', spool_rows: 0}}");
    assert!(!ok && text.contains("ledger.postgres.spool_rows"), "{text}");
    let (ok, text) = check("ledger: {postgres: {pool_size: 2}}");
    assert!(!ok && text.contains("ledger.postgres.url"), "{text}");
}

/// PostgreSQL crashes and comes back mid-load: no row is lost or doubled,
/// and the spool drains to 0.
async fn survives_a_postgres_restart(durability: &'static str) {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let db = format!("restart_{durability}");
    let url = pg.create_database(&db);
    let gateway = replica(&url, durability, ", strict_wait_ms: 20000").start();
    let stop = Arc::new(AtomicBool::new(false));
    let running = tokio::spawn(load(
        vec![gateway.url("/v1/chat/completions")],
        6,
        400,
        stop.clone(),
        durability,
    ));
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut pg = tokio::task::spawn_blocking(move || {
        let mut pg = pg;
        pg.stop();
        pg
    })
    .await
    .expect("stop PostgreSQL");
    // Rows gather in the spool while PostgreSQL is away.
    let mut spooled = 0;
    for _ in 0..100 {
        spooled = pending_rows(&gateway).await.unwrap_or(0);
        if spooled >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        spooled >= 5,
        "rows spooled while PostgreSQL was away: {spooled}"
    );
    let pg = tokio::task::spawn_blocking(move || {
        pg.restart();
        pg
    })
    .await
    .expect("start PostgreSQL");
    tokio::time::sleep(Duration::from_millis(800)).await;
    stop.store(true, Ordering::Relaxed);
    let answers = tokio::time::timeout(Duration::from_secs(60), running)
        .await
        .expect("load ends within 60 s")
        .expect("load task");
    assert!(answers.len() > 20, "load ran: {}", answers.len());
    assert!(
        tokio::time::timeout(Duration::from_secs(40), drained(&gateway))
            .await
            .unwrap_or(false),
        "the spool drains once PostgreSQL is back"
    );
    assert_each_once(&answers, &rows_per_id(&pg, &db));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_commits_survive_a_postgres_restart() {
    survives_a_postgres_restart("group").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_commits_survive_a_postgres_restart() {
    survives_a_postgres_restart("strict").await;
}

/// PostgreSQL away and the spool full: `on_full: refuse` answers 503 in the
/// caller's dialect, and serving resumes once PostgreSQL is back, with the
/// spooled rows written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_refuses_in_the_callers_dialect() {
    let Some(mut pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("spool_full");
    let gateway = replica(&url, "group", ", spool_rows: 3, on_full: refuse").start();
    let chat = gateway.url("/v1/chat/completions");
    assert_eq!(
        post_with(&chat, &short("before", "auto"), &[]).await.status,
        200
    );
    assert!(drained(&gateway).await, "the first row is written");
    pg.stop();
    let mut served = Vec::new();
    let mut refused = None;
    for i in 0..50 {
        let id = format!("full-{i}");
        let reply = post_with(&chat, &short("away", "auto"), &[("x-request-id", &id)]).await;
        if reply.status == 503 {
            refused = Some(reply);
            break;
        }
        assert_eq!(reply.status, 200);
        served.push((id, 200));
        // Let the writer move the row into its spool.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = refused.expect("a 503 once the spool is full");
    assert!(served.len() >= 3, "the spool held rows: {}", served.len());
    let error = refused.error();
    assert_eq!(error["type"], "overloaded_error", "{error}");
    assert!(refused.header("retry-after").is_some());
    let anthropic = post_with(
        &gateway.url("/v1/messages"),
        &json!({"model": "auto", "max_tokens": 20, "messages": [{"role": "user", "content": "away"}]}),
        &[("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(anthropic.status, 503);
    let body = anthropic.json();
    assert_eq!(body["type"], "error", "Anthropic's error shape: {body}");
    assert_eq!(body["error"]["type"], "overloaded_error", "{body}");
    assert!(anthropic.header("retry-after").is_some());
    let ready = get(&gateway.url("/readyz")).await;
    assert_eq!(
        ready.status, 200,
        "ready: it answers in the callers' dialects"
    );
    let ledger = &ready.json()["ledger"];
    assert_eq!(ledger["store"], "postgres");
    assert_eq!(ledger["refusing"], true, "{ledger}");
    let pg = restart_and_drain(pg, &gateway).await;
    assert_eq!(
        post_with(&chat, &short("back", "auto"), &[]).await.status,
        200
    );
    assert_each_once(&served, &rows_per_id(&pg, "spool_full"));
    assert_eq!(
        lost_rows(&gateway).await,
        0,
        "under on_full: refuse no row is dropped"
    );
    assert_eq!(
        pg.psql(
            "spool_full",
            "SELECT COUNT(*) FROM requests WHERE refusal IS NOT NULL"
        ),
        "2",
        "the two refusals are recorded too"
    );
}

/// The same rows give the same reports, to the byte, from the SQLite file
/// and from PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_are_the_same_from_sqlite_and_postgres() {
    use switchyard::ledger::{
        AttainmentDimension, Dimension, Ledger, Postgres, Window, attainment_report, ledger_stats,
        now_ms, postgres_spend_report, sessions_report, snapshot, spend_report,
    };
    use switchyard_policies::{LedgerSettings, OnSpoolFull, PostgresLedger, PostgresUrl};

    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("reports");
    let path = support::unique_path("ledger.db");
    let sqlite = LedgerSettings {
        path: path.display().to_string(),
        ..LedgerSettings::default()
    };
    let postgres = LedgerSettings {
        postgres: Some(PostgresLedger {
            url: PostgresUrl::Inline(url),
            pool_size: 2,
            spool_rows: 1000,
            on_full: OnSpoolFull::Refuse,
            strict_wait: Duration::from_secs(5),
        }),
        ..LedgerSettings::default()
    };
    let now = now_ms();
    let rows: Vec<_> = (0..80).map(|i| sample_row(i, now)).collect();
    let mut spend = Vec::new();
    for settings in [&sqlite, &postgres] {
        let ledger = Ledger::open(settings).expect("open the ledger");
        for row in &rows {
            ledger.write(row.clone()).await.expect("queued");
        }
        ledger.close().await;
        let ledger = Ledger::open(settings).expect("open again");
        let mut since = ledger
            .spend_since_async(now - 86_400_000)
            .await
            .expect("spend since");
        assert_eq!(
            since.len(),
            ledger
                .spend_since(now - 86_400_000)
                .expect("spend since")
                .len()
        );
        since.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        spend.push(since);
        ledger.close().await;
    }
    // PostgreSQL sums in its own order: the last bits of a float may differ.
    assert_eq!(spend[0].len(), 4, "{:?}", spend[0]);
    assert_eq!(spend[0].len(), spend[1].len());
    for (a, b) in spend[0].iter().zip(&spend[1]) {
        assert_eq!((&a.0, &a.1), (&b.0, &b.1));
        assert!(
            (a.2 - b.2).abs() < 1e-9 && (a.3 - b.3).abs() < 1e-9,
            "budgets start from the same spend: {a:?} {b:?}"
        );
    }

    let since = now - 7 * 86_400_000;
    let config = switchyard::state::config_file::load(None).expect("the embedded config");
    let reports = |conn: &rusqlite::Connection| {
        let mut all = BTreeMap::new();
        for by in Dimension::ALL {
            let report = spend_report(conn, since, by).expect("spend");
            all.insert(format!("spend-{}", by.name()), json!(report));
        }
        for by in AttainmentDimension::ALL {
            let report = attainment_report(conn, since, by, &BTreeMap::new()).expect("attainment");
            all.insert(format!("budgets-{}", by.name()), json!(report));
        }
        for window in Window::ALL {
            let stats = ledger_stats(conn, window, now).expect("stats");
            all.insert(format!("stats-{}", window.name), json!(stats));
        }
        let sessions = sessions_report(conn, since, None).expect("sessions");
        all.insert("sessions".into(), json!(sessions));
        let advice =
            switchyard::cli::advice::advise(conn, &config, since, now, 0.95).expect("advice");
        all.insert("advice".into(), json!(advice));
        all
    };
    let from_sqlite = reports(&rusqlite::Connection::open(&path).expect("open SQLite"));
    let postgres =
        Postgres::connect(postgres.postgres.as_ref().expect("set")).expect("connect to PostgreSQL");
    let from_postgres = reports(&snapshot(&postgres, since).expect("snapshot"));
    assert_eq!(
        from_sqlite["spend-key"]["total"]["requests"],
        json!(rows.iter().filter(|r| r.refusal.is_none()).count())
    );
    for (name, report) in &from_sqlite {
        assert_eq!(Some(report), from_postgres.get(name), "report {name}");
    }
    // The spend report summed by PostgreSQL itself: the same groups in the
    // same order, the same counts, sums equal but for the last bits.
    for by in Dimension::ALL {
        let summed = postgres_spend_report(&postgres, since, by).expect("spend from PostgreSQL");
        assert_close(
            &from_sqlite[&format!("spend-{}", by.name())],
            &json!(summed),
            by.name(),
        );
    }
    let _ = std::fs::remove_file(&path);
}

/// `a` and `b` are the same JSON, numbers equal within 1e-9 (relative).
/// A database only a version before the shadow columns (schema version 2)
/// wrote: reports from it read those columns as NULL, and the next replica
/// to start adds them and keeps every row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_at_schema_version_1_is_read_then_migrated_with_its_rows() {
    use switchyard::ledger::{Ledger, Postgres, compare_report, now_ms, snapshot, spend_report};
    use switchyard_policies::{LedgerSettings, OnSpoolFull, PostgresLedger, PostgresUrl};

    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("older");
    let postgres = PostgresLedger {
        url: PostgresUrl::Inline(url),
        pool_size: 2,
        spool_rows: 1000,
        on_full: OnSpoolFull::Refuse,
        strict_wait: Duration::from_secs(5),
    };
    let settings = LedgerSettings {
        postgres: Some(postgres.clone()),
        ..LedgerSettings::default()
    };
    let now = now_ms();
    let ledger = Ledger::open(&settings).expect("open the ledger");
    for i in 0..20 {
        ledger.write(sample_row(i, now)).await.expect("queued");
    }
    ledger.close().await;
    // Back to version 1, as the version before wrote it.
    pg.psql(
        "older",
        "ALTER TABLE requests DROP COLUMN shadow, DROP COLUMN agree_exact,
           DROP COLUMN agree_similarity, DROP COLUMN agree_checked, DROP COLUMN error;
         DROP INDEX requests_request_id;
         DELETE FROM switchyard_schema WHERE version IN (2, 3)",
    );
    let reader = Postgres::connect_reader(&postgres).expect("a reader");
    let conn = snapshot(&reader, now - 86_400_000).expect("a snapshot of the older database");
    spend_report(
        &conn,
        now - 86_400_000,
        switchyard::ledger::Dimension::Backend,
    )
    .expect("spend");
    let (rows, shadows): (i64, i64) = conn
        .query_row("SELECT COUNT(*), COUNT(shadow) FROM requests", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((rows, shadows), (20, 0), "the missing column reads as NULL");
    let compared =
        compare_report(&conn, (now - 86_400_000, now), None, &BTreeMap::new()).expect("compare");
    assert!(compared.lines.is_empty());
    // The next start migrates: versions 2, 3 and 4 again, every row kept.
    let ledger = Ledger::open(&settings).expect("open and migrate");
    // The request log finds one request's row in PostgreSQL, by the
    // gateway's id or (within the window) the caller's own.
    for (id, since) in [("gw-5", now), ("client-5", now - 86_400_000)] {
        let record = ledger
            .read_request(id, since, |conn| {
                switchyard::ledger::request_record(conn, id, since)
            })
            .expect("read")
            .expect("found");
        assert_eq!(record.line.request_id, "gw-5");
        assert_eq!(record.calls.len(), 1);
    }
    ledger.close().await;
    assert_eq!(
        pg.psql(
            "older",
            "SELECT string_agg(version::text, ',' ORDER BY version) FROM switchyard_schema"
        ),
        "1,2,3,4,5,6,7,8"
    );
    assert_eq!(
        pg.psql(
            "older",
            "SELECT COUNT(*) FROM requests WHERE shadow IS NULL"
        ),
        "20"
    );
}

fn assert_close(a: &serde_json::Value, b: &serde_json::Value, at: &str) {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0),
                "{at}: {x} != {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{at}: lengths");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_close(x, y, &format!("{at}[{i}]"));
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{at}: fields"
            );
            for (k, x) in x {
                assert_close(x, &y[k], &format!("{at}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{at}"),
    }
}

/// Row `i` of a varied set: keys, teams, routes, tiers, statuses, sessions,
/// refusals and cache hits over the last few hours.
fn sample_row(i: usize, now: i64) -> switchyard::ledger::LedgerRow {
    use switchyard_policies::{PromptClass, TokenCounts};
    let n = i as u64;
    let every = |k: usize| i.is_multiple_of(k);
    let pick = |options: &[&'static str]| options[i % options.len()];
    switchyard::ledger::LedgerRow {
        ts_ms: now - (i as i64) * 97_000,
        request_id: Some(format!("gw-{i}")),
        client_request_id: (!every(4)).then(|| format!("client-{i}")),
        key: (!every(5)).then(|| pick(&["alice", "bob", "carol"]).to_owned()),
        team: every(3).then(|| "research".to_owned()),
        route: Some(Arc::from(pick(&["auto", "agent", "code"]))),
        backend: pick(&["local", "cloud", "big"]).to_owned(),
        tier: pick(&["small", "cloud", "large"]),
        provider: (!every(7)).then(|| pick(&["llama.cpp", "azure.ai.openai", "gcp.gemini"])),
        kind: None,
        tool: None,
        bytes_in: None,
        bytes_out: None,
        profile: every(2).then_some("interactive"),
        dialect: pick(&["openai", "anthropic"]),
        endpoint: "chat",
        tokens: TokenCounts {
            input: 100 + n * 7,
            cached_input: n % 11,
            output: 20 + n * 3,
            ..TokenCounts::default()
        },
        cost_usd: 0.001 * (i % 7) as f64,
        counterfactual_usd: 0.002 * (i % 9) as f64,
        ttft_ms: (!every(6)).then_some(40.0 + i as f64),
        predicted_ttft_ms: (i % 2 == 1).then_some(50.0),
        decode_tokens_per_s: (!every(3)).then_some(30.0 + (i % 13) as f64),
        duration_ms: 200.0 + (i * 17) as f64,
        status: pick(&["ok", "ok", "ok", "timeout", "cancelled"]),
        refusal: (i % 10 == 9).then(|| "budget exhausted".to_owned()),
        reason: pick(&["split", "rule", "refused"]),
        hedge: every(8),
        fallback: every(9),
        cache_hit: every(11),
        estimated: every(6),
        prompt_class: if every(2) {
            PromptClass::Code
        } else {
            PromptClass::Prose
        },
        drafts: every(4).then_some(switchyard::ledger::Drafts {
            drafted: n,
            accepted: n / 2,
        }),
        expected_cached_tokens: (i % 5) as u32,
        service_tier: every(7).then(|| "flex".to_owned()),
        unpriced: every(12),
        session: every(2).then(|| Arc::from(pick(&["s1", "s2", "s3", "s4"]))),
        batch: None,
        tool_results: i % 3 == 1,
        queued_ms: (i % 4) as f64,
        error: None,
        shadow: None,
        sensitive: None,
    }
}

/// Rows older than `retention_days` are deleted from the shared ledger at
/// start; newer ones stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_purges_old_rows_from_postgres() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("retention");
    // A first replica creates the schema, and has nothing to write. (Not
    // SIGTERM: the gateway installs its handler only after announcing its
    // address, so a signal that early kills it.)
    replica(&url, "group", "").start().kill();
    let now = switchyard::ledger::now_ms();
    let insert = |writer: &str, ts: i64| {
        format!(
            "INSERT INTO requests (writer_id, seq, ts_ms, backend, tier, dialect, endpoint, input_tokens,
                cached_tokens, cache_write_tokens, output_tokens, reasoning_tokens, cost_usd,
                counterfactual_usd, duration_ms, status, reason, hedge, fallback, cache_hit, estimated)
             VALUES ('{writer}', 0, {ts}, 'cloud', 'cloud', 'openai', 'chat', 1, 0, 0, 1, 0, 0.5, 0.5,
                10, 'ok', 'split', 0, 0, 0, 0)"
        )
    };
    pg.psql("retention", &insert("old", now - 3 * 86_400_000));
    pg.psql("retention", &insert("recent", now - 3_600_000));
    let second = priced("")
        .section(&format!(
            "ledger: {{retention_days: 2, postgres: {{url: '{url}'}}}}"
        ))
        .start();
    let mut left = String::new();
    for _ in 0..100 {
        left = pg.psql(
            "retention",
            "SELECT string_agg(writer_id, ',' ORDER BY writer_id) FROM requests",
        );
        if left == "recent" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, "recent", "the old row is purged, the recent one kept");
    // PostgreSQL's text cannot hold NUL, a caller's JSON can: the row is
    // still written (a rejected batch would stop the writer, or lose it).
    let mut body = short("nul", "auto");
    body["user"] = json!("a\u{0}b");
    let reply = post_with(
        &second.url("/v1/chat/completions"),
        &body,
        &[("x-request-id", "nul")],
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(drained(&second).await);
    assert_eq!(
        pg.psql(
            "retention",
            "SELECT session FROM requests WHERE client_request_id = 'nul'"
        ),
        "a\u{FFFD}b"
    );
}

/// PostgreSQL away and the spool full under `on_full: serve`: requests are
/// still served, the rows that do not fit are counted lost, and the spooled
/// ones are written once PostgreSQL is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spool_serves_and_counts_the_rows_lost() {
    let Some(mut pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("spool_serve");
    let gateway = replica(&url, "group", ", spool_rows: 3, on_full: serve").start();
    let chat = gateway.url("/v1/chat/completions");
    pg.stop();
    for i in 0..10 {
        let id = format!("serve-{i}");
        let reply = post_with(&chat, &short("away", "auto"), &[("x-request-id", &id)]).await;
        assert_eq!(reply.status, 200, "served while the spool is full");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut lost = 0;
    for _ in 0..100 {
        lost = lost_rows(&gateway).await;
        if lost == 7 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(lost, 7, "ten rows, three spooled");
    let ready = get(&gateway.url("/readyz")).await.json();
    assert_eq!(ready["ledger"]["refusing"], false);
    let pg = restart_and_drain(pg, &gateway).await;
    assert_eq!(
        pg.psql("spool_serve", "SELECT COUNT(*) FROM requests"),
        "3",
        "the spooled rows are written"
    );
}

/// Strict durability in PostgreSQL: a replica killed mid-load (no shutdown,
/// no flush) leaves a row for every response a client saw complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_rows_survive_kill_9_of_a_replica() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("strict_kill");
    let mut gateway = replica(&url, "strict", "").start();
    let load = support::kill_load::KillLoad::start(&gateway.url("/v1/chat/completions"), 6, "kill");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    gateway.kill();
    let completed: Answers = load.stop().into_iter().map(|id| (id, 200)).collect();
    assert!(completed.len() > 20, "load ran: {}", completed.len());
    assert_each_once(&completed, &rows_per_id(&pg, "strict_kill"));
}

/// Strict durability with PostgreSQL away: each request is answered 500
/// `ledger_not_committed`, and its row, landing once PostgreSQL is back,
/// says so (never `ok`): a ledger row matches what its client got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_withheld_strict_answer_is_never_written_as_ok() {
    let Some(mut pg) = PostgresServer::start() else {
        return;
    };
    let db = "withheld";
    let url = pg.create_database(db);
    let gateway = replica(&url, "strict", ", strict_wait_ms: 500").start();
    let ask = async |id: &str, stream: bool| {
        let mut body = short("hello", "auto");
        body["stream"] = json!(stream);
        let reply = post_with(
            &gateway.url("/v1/chat/completions"),
            &body,
            &[("x-request-id", id)],
        )
        .await;
        (
            id.to_owned(),
            reply.status.as_u16(),
            String::from_utf8_lossy(&reply.body).into_owned(),
        )
    };
    let before = ask("before", false).await;
    assert_eq!(before.1, 200);
    pg = tokio::task::spawn_blocking(move || {
        pg.stop();
        pg
    })
    .await
    .unwrap();
    let mut away = Vec::new();
    for i in 0..4 {
        away.push(ask(&format!("away-{i}"), false).await);
    }
    for (id, status, body) in &away {
        assert_eq!(*status, 500, "{id}: {body}");
        assert!(body.contains("ledger_not_committed"), "{id}: {body}");
    }
    let pg = restart_and_drain(pg, &gateway).await;
    let statuses: HashMap<String, String> = pg
        .psql(db, "SELECT client_request_id, status FROM requests")
        .lines()
        .filter_map(|l| l.split_once('|').map(|(a, b)| (a.to_owned(), b.to_owned())))
        .collect();
    assert_eq!(statuses.get("before").map(String::as_str), Some("ok"));
    for (id, _, _) in &away {
        assert_eq!(
            statuses.get(id).map(String::as_str),
            Some("ledger_not_committed"),
            "{id}'s row says what its client got: {statuses:?}"
        );
    }
    assert_each_once(
        &away.iter().map(|(id, s, _)| (id.clone(), *s)).collect(),
        &rows_per_id(&pg, db),
    );
}

/// PostgreSQL away, the spool and the queue full under `on_full: refuse`:
/// every refusal still has a row, and those rows no longer pile up in
/// tasks without bound. What fits nowhere is counted lost, and `/readyz`
/// says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusal_rows_stay_bounded_while_postgres_is_away() {
    let Some(mut pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("refusals_bounded");
    let gateway = support::priced("")
        .section(&format!(
            "ledger: {{flush_ms: 50, queue: 8, postgres: {{url: '{url}', spool_rows: 3, on_full: refuse}}}}"
        ))
        .start();
    let chat = gateway.url("/v1/chat/completions");
    assert_eq!(
        post_with(&chat, &short("before", "auto"), &[]).await.status,
        200
    );
    assert!(drained(&gateway).await);
    pg.stop();
    let mut refusals = 0;
    for _ in 0..200 {
        if post_with(&chat, &short("away", "auto"), &[]).await.status == 503 {
            refusals += 1;
        }
    }
    assert!(
        refusals > 150,
        "refused while the spool was full: {refusals}"
    );
    // The spool (3), the queue (8) and as many rows in tasks as the queue
    // holds (8), and no more.
    let pending = pending_rows(&gateway).await.unwrap();
    assert!(
        pending <= 3 + 8 + 8 + 1,
        "pending rows grew without bound: {pending}"
    );
    let lost = lost_rows(&gateway).await;
    assert!(lost > 0, "rows that fit nowhere are counted");
    let ready = get(&gateway.url("/readyz")).await.json();
    assert_eq!(ready["ledger"]["lost_rows"], lost, "{ready}");
    drop(restart_and_drain(pg, &gateway).await);
}

/// A key made on one replica serves on the others sharing the ledger's
/// PostgreSQL (they look for changes every 2 s), and revoked on one it is
/// refused on all; the audit trail is shared too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_made_on_one_replica_serve_on_every_replica() {
    let Some(pg) = PostgresServer::start() else {
        return;
    };
    let url = pg.create_database("keys");
    let auth = format!(
        "auth:\n  admin_key_hash: \"{}\"\n  keys:\n    - {{name: file, hash: \"{}\"}}\n",
        support::key_hash("admin-secret"),
        support::key_hash("file-secret")
    );
    let replicas = start_together(
        (0..2)
            .map(|_| replica(&url, "group", "").section(&auth))
            .collect(),
    );
    let admin = [("authorization", "Bearer admin-secret")];
    let made = post_with(
        &replicas[0].url("/admin/keys"),
        &json!({"name": "shared"}),
        &admin,
    )
    .await;
    assert_eq!(made.status, 201, "{}", String::from_utf8_lossy(&made.body));
    let secret = made.json()["key"].as_str().unwrap().to_owned();
    let auth = format!("Bearer {secret}");
    let chat = |replica: &Proc| {
        let url = replica.url("/v1/chat/completions");
        let auth = auth.clone();
        async move {
            post_with(
                &url,
                &short("hi", "auto"),
                &[("authorization", auth.as_str())],
            )
            .await
            .status
        }
    };
    assert_eq!(chat(&replicas[0]).await, 200);
    // Replicas look every 2 s; a loaded machine gets twice the usual wait.
    let within = |target: u16, replica: usize| {
        let chat = &chat;
        let replicas = &replicas;
        async move {
            for _ in 0..2 {
                if support::eventually(async || chat(&replicas[replica]).await == target).await {
                    return true;
                }
            }
            false
        }
    };
    assert!(within(200, 1).await, "the other replica never took the key");
    let revoked = support::request(
        "DELETE".parse().unwrap(),
        &replicas[1].url("/admin/keys/shared"),
        &admin,
        Vec::new(),
        false,
    )
    .await;
    assert_eq!(revoked.status, 200);
    assert_eq!(chat(&replicas[1]).await, 401);
    assert!(
        within(401, 0).await,
        "the first replica still serves a revoked key"
    );
    let seen = get_with(&replicas[0].url("/admin/keys/shared"), &admin)
        .await
        .json();
    let actions: Vec<&str> = seen["audit"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["revoke", "create"]);
}
