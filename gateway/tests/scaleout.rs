//! Several gateway replicas sharing budgets and rate limits through a real
//! Redis (`state.redis`): budgets that hold under concurrent load spread
//! over the replicas, a requests-per-minute limit counted once across
//! them, holds a killed replica leaves behind released within their ttl,
//! Redis going away and coming back without a restart, and an empty Redis
//! starting again from the ledger in a real PostgreSQL.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::servers::{PostgresServer, RedisServer};
use support::{GatewayBuilder, Proc, get, get_with, post_with, priced, short};

/// Each request's reply status, by replica it went to, for requests sent
/// at once.
async fn burst(urls: &[String], count: usize, body: &Value, key: &str) -> Vec<u16> {
    let auth = format!("Bearer {key}");
    let tasks: Vec<_> = (0..count)
        .map(|i| {
            let url = urls[i % urls.len()].clone();
            let (body, auth) = (body.clone(), auth.clone());
            tokio::spawn(async move {
                post_with(&url, &body, &[("authorization", &auth)])
                    .await
                    .status
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::with_capacity(count);
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    statuses
}

/// A replica: the priced backends (cloud at a cent per ten tokens), key
/// `alice` with `key_fields`, and `state.redis` with `redis_fields`.
fn replica(redis: &RedisServer, prefix: &str, key_fields: &str, redis_fields: &str) -> Proc {
    priced("")
        .section(&format!(
            "auth:\n  keys:\n    - {{name: alice, hash: '{}'{key_fields}}}\nstate:\n  redis: {{url: '{}', key_prefix: {prefix}{redis_fields}}}\n",
            support::key_hash("sk-alice"),
            redis.url(),
        ))
        .start()
}

/// Spend the replicas' ledgers record, in micro-dollars (as Redis counts).
fn ledger_micros(replicas: &[Proc]) -> i64 {
    replicas
        .iter()
        .map(|r| {
            r.ledger()
                .query_row(
                    "SELECT COALESCE(SUM(CAST(ROUND(cost_usd * 1000000) AS INTEGER)), 0) FROM requests",
                    [],
                    |row| row.get::<_, i64>(0),
                )
                .unwrap()
        })
        .sum()
}

/// A hash field of a key under `prefix`, as a number (0 when unset).
fn field(redis: &RedisServer, key: &str, name: &str) -> i64 {
    redis.cli(&["HGET", key, name]).parse().unwrap_or(0)
}

/// Today's shared-spend key of `holder`.
fn spent_today(redis: &RedisServer, prefix: &str, holder: &str) -> String {
    let pattern = format!("{{{prefix}}}sp:{holder}:d:*");
    let keys = redis.cli(&["--scan", "--pattern", &pattern]);
    keys.lines().next().unwrap_or_default().to_string()
}

async fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// 1,000 requests at once over three replicas against a $1 cloud budget:
/// the replicas together never spend more than it (holds are taken in
/// Redis, atomically, before any call), yet spend nearly all of it, and
/// Redis's count of the spend equals the ledgers' to the micro-dollar.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_together_keep_within_one_budget() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let replicas: Vec<Proc> = (0..3)
        .map(|_| {
            // A rate limit no request reaches, so each check goes with its
            // reservation in one script.
            let key = ", budget: {daily_usd: 1.0}, requests_per_minute: 100000, tokens_per_minute: 100000000";
            replica(&redis, "budget", key, ", timeout_ms: 2000")
        })
        .collect();
    let urls: Vec<String> = replicas
        .iter()
        .map(|r| r.url("/v1/chat/completions"))
        .collect();
    let statuses = tokio::time::timeout(
        Duration::from_secs(120),
        burst(&urls, 1000, &short("hello there", "cloud"), "sk-alice"),
    )
    .await
    .expect("1,000 requests within two minutes");
    let served = statuses.iter().filter(|s| **s == 200).count();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(served + refused, 1000, "only 200s and 429s: {statuses:?}");
    assert!(served >= 10, "the budget pays for some requests: {served}");
    // Then one at a time, each after the holds before it are settled,
    // until the budget cannot cover another.
    let reserved = "{budget}rv:key:alice";
    for _ in 0..50 {
        wait_for("every hold settled", Duration::from_secs(10), || {
            field(&redis, reserved, "t") == 0
        })
        .await;
        if burst(&urls, 1, &short("hello there", "cloud"), "sk-alice").await[0] == 429 {
            break;
        }
    }
    let key = spent_today(&redis, "budget", "key:alice");
    // The ledgers commit in groups: Redis may know a settlement first.
    let counted = || field(&redis, &key, "c");
    wait_for(
        "the ledgers bill what Redis counts",
        Duration::from_secs(10),
        || ledger_micros(&replicas) == counted(),
    )
    .await;
    let spent = ledger_micros(&replicas);
    assert!(
        spent <= 1_000_000,
        "the replicas spent {spent} micro-dollars of a 1,000,000 budget"
    );
    // A request's worst case here is $0.094: less than that is left.
    assert!(
        spent > 1_000_000 - 94_000,
        "all but less than one request's worst case is spent: {spent}"
    );
}

/// A 600 requests-per-minute limit shared by three replicas: over a
/// minute of load spread over them, the replicas together admit what one
/// GCRA limiter would (the minute's burst of 600, then ten a second),
/// within 5%.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_requests_per_minute_limit_holds_across_replicas() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let replicas: Vec<Proc> = (0..3)
        .map(|_| {
            replica(
                &redis,
                "rpm",
                ", requests_per_minute: 600",
                ", timeout_ms: 2000",
            )
        })
        .collect();
    let urls: Vec<String> = replicas
        .iter()
        .map(|r| r.url("/v1/chat/completions"))
        .collect();
    let body = short("hi", "local");
    let started = Instant::now();
    // 30 a second for a minute, three every 100 ms (one per replica),
    // sent on time whatever the answers' latency.
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut rounds = Vec::new();
    let mut last_sent = started;
    while started.elapsed() < Duration::from_secs(60) {
        tick.tick().await;
        last_sent = Instant::now();
        let (urls, body) = (urls.clone(), body.clone());
        rounds.push(tokio::spawn(async move {
            burst(&urls, 3, &body, "sk-alice").await
        }));
    }
    let (mut admitted, mut refused) = (0usize, 0usize);
    for round in rounds {
        for status in round.await.unwrap() {
            match status {
                200 => admitted += 1,
                429 => refused += 1,
                other => panic!("unexpected status {other}"),
            }
        }
    }
    let elapsed = last_sent.duration_since(started).as_secs_f64();
    let expected = 600.0 + elapsed * 10.0;
    let off = (admitted as f64 - expected).abs() / expected;
    assert!(
        off <= 0.05,
        "admitted {admitted} (refused {refused}) in {elapsed:.1} s; one limiter admits {expected:.0}"
    );
    assert!(refused > 0, "the load was over the limit");
}

/// A replica killed with requests in flight leaves holds in Redis; they
/// are released within the hold ttl, so the budget is whole again for
/// the replicas still running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_replicas_holds_expire() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    // A slow cloud backend (20 tokens a second), so requests stay in flight.
    let slow = |redis: &RedisServer| {
        GatewayBuilder::new()
            .backend_yaml(
                "  cloud:\n    tier: cloud\n    sim: {preset: large, base_ttft_ms: 2, prefill_tokens_per_s: 1000000, decode_tokens_per_s: 20, jitter: 0}\n    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
            )
            .section(&format!(
                "auth:\n  keys:\n    - {{name: alice, hash: '{}', budget: {{daily_usd: 1.0}}}}\nstate:\n  redis: {{url: '{}', key_prefix: kill, hold_ttl_ms: 2000}}\n",
                support::key_hash("sk-alice"),
                redis.url(),
            ))
            .start()
    };
    let mut doomed = slow(&redis);
    let survivor = slow(&redis);
    let mut long = short("hello there", "cloud");
    long["max_tokens"] = json!(600);
    // Each holds about 70 cents: one in flight leaves no room for another.
    let url = doomed.url("/v1/chat/completions");
    let in_flight = tokio::spawn(async move {
        post_with(&url, &long, &[("authorization", "Bearer sk-alice")]).await
    });
    let holds = "{kill}hd:key:alice";
    wait_for("the hold is taken", Duration::from_secs(10), || {
        redis.cli(&["ZCARD", holds]) == "1"
    })
    .await;
    let mut again = short("hello there", "cloud");
    again["max_tokens"] = json!(600);
    let survivor_url = survivor.url("/v1/chat/completions");
    let refused = post_with(
        &survivor_url,
        &again,
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(refused.status, 429, "the doomed replica's hold counts");
    doomed.kill();
    let _ = in_flight.await;
    // The hold outlives its replica by at most its ttl (2 s), and is swept
    // by the next reservation.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let mut shorter = again.clone();
    shorter["max_tokens"] = json!(20);
    let admitted = post_with(
        &survivor_url,
        &shorter,
        &[("authorization", "Bearer sk-alice")],
    )
    .await;
    assert_eq!(
        admitted.status,
        200,
        "{}",
        String::from_utf8_lossy(&admitted.body)
    );
    // The dead hold was swept; the survivor's own is settled just after
    // its answer.
    wait_for("no hold left", Duration::from_secs(5), || {
        redis.cli(&["ZCARD", holds]) == "0"
    })
    .await;
}

/// Redis away: `fail_closed` refuses in the caller's dialect and says so
/// on `/readyz`; `local` enforces a third of the limit in each replica.
/// Redis back (empty): the replicas use it again without a restart, and
/// the budget starts again from the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_away_then_back() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let closed = replica(
        &redis,
        "away",
        ", budget: {daily_usd: 1.0}",
        ", timeout_ms: 1000",
    );
    let local = replica(
        &redis,
        "away",
        ", budget: {daily_usd: 1.0}, requests_per_minute: 30",
        ", timeout_ms: 1000, on_unavailable: local, replicas: 3",
    );
    let alice = [("authorization", "Bearer sk-alice")];
    let chat = closed.url("/v1/chat/completions");
    let served = post_with(&chat, &short("hello", "cloud"), &alice).await;
    assert_eq!(served.status, 200);
    wait_for("the first spend is counted", Duration::from_secs(5), || {
        field(&redis, &spent_today(&redis, "away", "key:alice"), "c") > 0
    })
    .await;
    let before = ledger_micros(std::slice::from_ref(&closed));

    redis.stop();
    let refused = post_with(&chat, &short("hello", "cloud"), &alice).await;
    assert_eq!(
        refused.status,
        503,
        "{}",
        String::from_utf8_lossy(&refused.body)
    );
    assert_eq!(refused.error()["code"], "shared_state_unavailable");
    assert!(refused.header("retry-after").is_some());
    let anthropic = post_with(
        &closed.url("/v1/messages"),
        &json!({"model": "cloud", "max_tokens": 20, "messages": [{"role": "user", "content": "hello"}]}),
        &alice,
    )
    .await;
    assert_eq!(anthropic.status, 503);
    let body = anthropic.json();
    assert_eq!(body["type"], "error", "{body}");
    assert_eq!(body["error"]["type"], "overloaded_error", "{body}");
    let ready = get(&closed.url("/readyz")).await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["state"]["redis"], "unavailable");

    // `local`: 30 a minute shared by three replicas is 10 here.
    let local_chat = local.url("/v1/chat/completions");
    let mut admitted = 0;
    for _ in 0..15 {
        if post_with(&local_chat, &short("hi", "local"), &alice)
            .await
            .status
            == 200
        {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 10, "a third of the limit while Redis is away");
    let metrics = get(&local.url("/metrics")).await;
    let text = String::from_utf8_lossy(&metrics.body);
    assert!(text.contains("switchyard_shared_state_up 0"), "{text}");

    redis.restart();
    wait_for(
        "back on Redis without a restart",
        Duration::from_secs(5),
        || redis.cli(&["PING"]) == "PONG",
    )
    .await;
    let start = Instant::now();
    loop {
        let reply = post_with(&chat, &short("hello", "cloud"), &alice).await;
        if reply.status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "requests succeed within 5 s of Redis's return: {}",
            reply.status
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        get(&closed.url("/readyz")).await.json()["state"]["redis"],
        "up"
    );
    // The empty Redis started this key's day from the ledger: the spend
    // before the outage, and the request that succeeded since.
    wait_for("the spend is counted again", Duration::from_secs(5), || {
        field(&redis, &spent_today(&redis, "away", "key:alice"), "c")
            == ledger_micros(std::slice::from_ref(&closed))
    })
    .await;
    assert!(ledger_micros(std::slice::from_ref(&closed)) > before);
}

/// Redis and PostgreSQL together, as a deployment runs them: three
/// replicas spend part of a $1 budget, Redis restarts empty, and the
/// budget's day starts again from the ledger in PostgreSQL, which has
/// every replica's rows; so the replicas together still stop at $1. (With
/// a SQLite ledger per replica, the seed would see one replica's spend.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_empty_redis_starts_again_from_every_replicas_spend() {
    let (Some(mut redis), Some(pg)) = (RedisServer::start(), PostgresServer::start()) else {
        return;
    };
    let db = pg.create_database("reseed");
    let replicas: Vec<Proc> = (0..3)
        .map(|_| {
            priced("")
                .section(&format!(
                    "auth:\n  keys:\n    - {{name: alice, hash: '{}', budget: {{daily_usd: 1.0}}}}\nstate:\n  redis: {{url: '{}', key_prefix: reseed, timeout_ms: 2000}}\nledger: {{durability: strict, postgres: {{url: '{db}'}}}}\n",
                    support::key_hash("sk-alice"),
                    redis.url(),
                ))
                .start()
        })
        .collect();
    let urls: Vec<String> = replicas
        .iter()
        .map(|r| r.url("/v1/chat/completions"))
        .collect();
    let body = short("hello there", "cloud");
    let spent = || -> i64 {
        pg.psql(
            "reseed",
            "SELECT COALESCE(SUM(ROUND(cost_usd * 1000000)), 0)::bigint FROM requests",
        )
        .parse()
        .unwrap()
    };
    let reserved = "{reseed}rv:key:alice";
    // Three at a time: twelve at once would hold more than the budget.
    for _ in 0..4 {
        for status in burst(&urls, 3, &body, "sk-alice").await {
            assert_eq!(status, 200);
        }
    }
    wait_for("every hold settled", Duration::from_secs(10), || {
        field(&redis, reserved, "t") == 0
    })
    .await;
    let before = spent();
    assert!(before > 0 && before < 600_000, "{before}");

    redis.restart();
    // Until the replicas' probes see Redis back, they refuse (fail_closed).
    let start = Instant::now();
    while burst(&urls, 3, &body, "sk-alice").await.contains(&503) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "Redis is used again"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let statuses = burst(&urls, 300, &body, "sk-alice").await;
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    for _ in 0..50 {
        wait_for("every hold settled", Duration::from_secs(10), || {
            field(&redis, reserved, "t") == 0
        })
        .await;
        if burst(&urls, 1, &body, "sk-alice").await[0] == 429 {
            break;
        }
    }
    let total = spent();
    assert!(
        total <= 1_000_000,
        "the replicas spent {total} micro-dollars of a 1,000,000 budget ({before} before Redis restarted)"
    );
    assert!(
        total > 1_000_000 - 94_000,
        "the budget was used up: {total}"
    );
    let day = spent_today(&redis, "reseed", "key:alice");
    assert_eq!(
        field(&redis, &day, "c"),
        total,
        "Redis counts what PostgreSQL holds"
    );
}

/// A team's requests-per-minute limit is shared by its keys across
/// replicas: two keys on two replicas, a team limit of 10 and larger
/// limits of their own, get 10 requests between them, and the refusal
/// names the team.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_limit_holds_across_keys_and_replicas() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let replicas: Vec<Proc> = (0..2)
        .map(|_| {
            priced("")
                .section(&format!(
                    "auth:\n  teams:\n    t: {{requests_per_minute: 10}}\n  keys:\n    - {{name: a, hash: '{}', team: t, requests_per_minute: 100}}\n    - {{name: b, hash: '{}', team: t, requests_per_minute: 100}}\nstate:\n  redis: {{url: '{}', key_prefix: team, timeout_ms: 2000}}\n",
                    support::key_hash("sk-a"),
                    support::key_hash("sk-b"),
                    redis.url(),
                ))
                .start()
        })
        .collect();
    let mut admitted = 0;
    let mut refusal = None;
    for i in 0..14 {
        let url = replicas[i % 2].url("/v1/chat/completions");
        let key = if i % 4 < 2 {
            "Bearer sk-a"
        } else {
            "Bearer sk-b"
        };
        let reply = post_with(&url, &short("hi", "local"), &[("authorization", key)]).await;
        match reply.status.as_u16() {
            200 => admitted += 1,
            429 => refusal = Some(reply.error()["message"].as_str().unwrap().to_owned()),
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(
        admitted, 10,
        "the team's minute, once across keys and replicas"
    );
    let refusal = refusal.unwrap();
    assert!(
        refusal.starts_with("team `t` is over its requests-per-minute limit"),
        "{refusal}"
    );
}

/// Redis paused (it answers nothing, but keeps its data): with
/// `on_unavailable: local` the replica serves from its share, and once
/// Redis answers again what it spent meanwhile is added to Redis's count,
/// and the holds of the calls that timed out are released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spend_made_while_redis_was_away_reaches_it() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let gateway = replica(
        &redis,
        "paused",
        ", budget: {daily_usd: 1.0}",
        ", timeout_ms: 300, on_unavailable: local",
    );
    let chat = gateway.url("/v1/chat/completions");
    let alice = [("authorization", "Bearer sk-alice")];
    assert_eq!(
        post_with(&chat, &short("hello", "cloud"), &alice)
            .await
            .status,
        200
    );
    redis.cli(&["CLIENT", "PAUSE", "4000", "ALL"]);
    for _ in 0..4 {
        let reply = post_with(&chat, &short("hello", "cloud"), &alice).await;
        assert_eq!(
            reply.status,
            200,
            "{}",
            String::from_utf8_lossy(&reply.body)
        );
    }
    let day = spent_today(&redis, "paused", "key:alice");
    wait_for("the spend reaches Redis", Duration::from_secs(15), || {
        field(&redis, &day, "c") == ledger_micros(std::slice::from_ref(&gateway))
    })
    .await;
    wait_for("no hold left", Duration::from_secs(5), || {
        field(&redis, "{paused}rv:key:alice", "t") == 0
    })
    .await;
    assert!(ledger_micros(std::slice::from_ref(&gateway)) > 0);
}

/// With limits in Redis, every request a key sends counts against its
/// requests per minute, not only routed ones: `count_tokens`, `/v1/models`
/// and `/v1/route/explain` (which can make billed encoder calls) spend
/// the same allowance across replicas, and are refused once it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_are_not_routed_count_against_shared_limits() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let replicas: Vec<Proc> = (0..2)
        .map(|_| {
            replica(
                &redis,
                "unrouted",
                ", requests_per_minute: 4",
                ", timeout_ms: 2000",
            )
        })
        .collect();
    let auth = [
        ("authorization", "Bearer sk-alice"),
        ("anthropic-version", "2023-06-01"),
    ];
    let count =
        serde_json::json!({"model": "local", "messages": [{"role": "user", "content": "hi"}]});
    let explain =
        serde_json::json!({"model": "local", "messages": [{"role": "user", "content": "hi"}]});
    let mut statuses = Vec::new();
    for round in 0..2 {
        let replica = &replicas[round % 2];
        statuses.push(
            post_with(&replica.url("/v1/messages/count_tokens"), &count, &auth)
                .await
                .status
                .as_u16(),
        );
        statuses.push(
            get_with(&replica.url("/v1/models"), &auth)
                .await
                .status
                .as_u16(),
        );
        statuses.push(
            post_with(&replica.url("/v1/route/explain"), &explain, &auth)
                .await
                .status
                .as_u16(),
        );
    }
    // Four a minute between both replicas: the first four pass, then 429s.
    assert_eq!(&statuses[..4], &[200, 200, 200, 200], "{statuses:?}");
    assert!(statuses[4..].iter().all(|s| *s == 429), "{statuses:?}");
    let routed = post_with(
        &replicas[1].url("/v1/chat/completions"),
        &short("hi", "local"),
        &auth,
    )
    .await;
    assert_eq!(routed.status, 429, "the same minute as routed requests");
}
