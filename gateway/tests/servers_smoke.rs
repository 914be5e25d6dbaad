//! The real Redis and PostgreSQL servers the scale-out tests use start,
//! answer, restart and stop.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is the failure report

mod support;

use support::servers::{PostgresServer, RedisServer};

#[test]
fn redis_and_postgres_start_answer_and_restart() {
    let (Some(mut redis), Some(mut pg)) = (RedisServer::start(), PostgresServer::start()) else {
        return;
    };
    assert_eq!(redis.cli(&["SET", "k", "1"]), "OK");
    redis.restart();
    assert_eq!(
        redis.cli(&["EXISTS", "k"]),
        "0",
        "a restarted Redis is empty"
    );
    pg.create_database("smoke");
    pg.psql("smoke", "CREATE TABLE t (x int); INSERT INTO t VALUES (7)");
    pg.restart();
    assert_eq!(
        pg.psql("smoke", "SELECT x FROM t"),
        "7",
        "rows survive a crash"
    );
}
