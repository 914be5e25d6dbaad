//! Reads from the shared ledger: budgets' spend so far and the spend
//! report, summed in PostgreSQL, and a window of rows for the other reports.
//!
//! Those other reports (sessions, budget attainment, stats, drift, advice)
//! read rows one by one and aggregate in Rust, so they would move their
//! window's rows anyway: they read a copy of it in an in-memory SQLite
//! database and run their own SQL there, the same report, number for
//! number, as from the SQLite file. The price is memory for the window's
//! rows (about 400 bytes each) on the replica that asks.

use rusqlite::types::Value;

use crate::ledger::postgres::Postgres;
use crate::ledger::report::{Dialect, SpendSums, spend_lines, spend_sql};
use crate::ledger::{Dimension, SpendReport};

/// Spend per key and per team since `since_ms`, as (`key`|`team`, name,
/// cloud USD, total USD): the same query as the SQLite ledger's.
pub fn spend_since(
    postgres: &Postgres,
    since_ms: i64,
) -> anyhow::Result<Vec<(String, String, f64, f64)>> {
    let pool = postgres.pool().clone();
    postgres.run(async move {
        let client = pool.get().await?;
        let sql = crate::ledger::report::spend_since_sql().replace("?1", "$1");
        let rows = client.query(&sql, &[&since_ms]).await?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    row.get::<_, String>(0),
                    row.get::<_, String>(1),
                    row.get::<_, Option<f64>>(2).unwrap_or(0.0),
                    row.get::<_, Option<f64>>(3).unwrap_or(0.0),
                )
            })
            .collect())
    })?
}

/// The spend report over every replica's rows, summed in PostgreSQL.
pub fn spend_report(
    postgres: &Postgres,
    since_ms: i64,
    by: Dimension,
) -> anyhow::Result<SpendReport> {
    let pool = postgres.pool().clone();
    let sums = postgres.run(async move {
        let client = pool.get().await?;
        let rows = client
            .query(&spend_sql(by, Dialect::Postgres), &[&since_ms])
            .await?;
        rows.iter()
            .map(|row| {
                anyhow::Ok(SpendSums {
                    group: row.try_get(0)?,
                    counts: [
                        row.try_get(1)?,
                        row.try_get(2)?,
                        row.try_get(3)?,
                        row.try_get(4)?,
                    ],
                    usd: [row.try_get(5)?, row.try_get(6)?, row.try_get(7)?],
                    estimated: row.try_get(8)?,
                    refused: row.try_get(9)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })??;
    Ok(spend_lines(since_ms, by, sums))
}

/// The rows since `since_ms` from every replica, in an in-memory SQLite
/// ledger for a report to read.
pub fn snapshot(postgres: &Postgres, since_ms: i64) -> anyhow::Result<rusqlite::Connection> {
    copy_rows(postgres, Rows::Since(since_ms))
}

/// One request's calls from every replica (by the gateway's id through its
/// index, or by the caller's own id since `since_ms`), in an in-memory
/// SQLite ledger.
pub fn request_snapshot(
    postgres: &Postgres,
    id: &str,
    since_ms: i64,
) -> anyhow::Result<rusqlite::Connection> {
    copy_rows(
        postgres,
        Rows::Request {
            id: id.to_owned(),
            since_ms,
        },
    )
}

/// Which rows a snapshot copies.
enum Rows {
    Since(i64),
    Request { id: String, since_ms: i64 },
}

fn copy_rows(postgres: &Postgres, wanted: Rows) -> anyhow::Result<rusqlite::Connection> {
    let pool = postgres.pool().clone();
    // Every column the SQLite ledger has, in its order (`id` first).
    let columns = format!("id, {}", crate::ledger::columns::names());
    // Only the query runs on the pool's runtime, which the ledger writer
    // shares (one thread): converting a window of rows cell by cell there
    // would hold up its commits for as long. The caller's thread (a report
    // runs in `spawn_blocking`, or in a CLI) does that.
    let fetched = postgres.run(async move {
        let client = pool.get().await?;
        // A database no replica of this version has migrated yet lacks the
        // newest columns: they read as NULL, as in an old SQLite ledger.
        let present: Vec<String> = client
            .query(
                "SELECT column_name::text FROM information_schema.columns
                 WHERE table_name = 'requests' AND table_schema = current_schema()",
                &[],
            )
            .await?
            .iter()
            .map(|row| row.get(0))
            .collect();
        let columns = selected_columns(&present);
        anyhow::Ok(match &wanted {
            Rows::Since(since_ms) => {
                let sql =
                    format!("SELECT id, {columns} FROM requests WHERE ts_ms >= $1 ORDER BY id");
                client.query(&sql, &[since_ms]).await?
            }
            Rows::Request { id, since_ms } => {
                // The gateway's id through its index; else the latest
                // request a caller's own id names in the window.
                let own: Option<String> = client
                    .query_opt("SELECT request_id FROM requests WHERE request_id = $1 LIMIT 1", &[id])
                    .await?
                    .map(|row| row.get(0));
                let found = match own {
                    Some(own) => Some(own),
                    None => client
                        .query_opt(
                            "SELECT request_id FROM requests WHERE client_request_id = $1
                             AND ts_ms >= $2 AND request_id IS NOT NULL ORDER BY ts_ms DESC LIMIT 1",
                            &[id, since_ms],
                        )
                        .await?
                        .map(|row| row.get(0)),
                };
                match found {
                    Some(found) => {
                        let sql = format!("SELECT id, {columns} FROM requests WHERE request_id = $1 ORDER BY id");
                        client.query(&sql, &[&found]).await?
                    }
                    None => Vec::new(),
                }
            }
        })
    })??;
    let rows: Vec<Vec<Value>> = fetched
        .iter()
        .map(|row| {
            (0..row.len())
                .map(|i| value(row, i))
                .collect::<anyhow::Result<Vec<Value>>>()
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    drop(fetched);
    let mut conn = rusqlite::Connection::open_in_memory()?;
    crate::ledger::schema::create(&conn)?;
    let tx = conn.transaction()?;
    {
        let placeholders = vec!["?"; crate::ledger::columns::COLUMNS.len() + 1].join(", ");
        let mut insert = tx.prepare(&format!(
            "INSERT INTO requests ({columns}) VALUES ({placeholders})"
        ))?;
        for row in rows {
            insert.execute(rusqlite::params_from_iter(row))?;
        }
    }
    tx.commit()?;
    Ok(conn)
}

/// Every column in table order: as stored where `present` has it, else a
/// NULL of its kind.
fn selected_columns(present: &[String]) -> String {
    use crate::ledger::columns::{COLUMNS, Kind};
    COLUMNS
        .iter()
        .map(|c| {
            if present.iter().any(|p| p == c.name) {
                return c.name.to_owned();
            }
            let kind = match c.kind {
                Kind::Int | Kind::Flag => "bigint",
                Kind::Real => "double precision",
                Kind::Text => "text",
            };
            format!("NULL::{kind} AS {}", c.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Column `i` of `row` as SQLite would hold it.
fn value(row: &tokio_postgres::Row, i: usize) -> anyhow::Result<Value> {
    use tokio_postgres::types::Type;
    let kind = row.columns()[i].type_();
    Ok(if *kind == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?
            .map_or(Value::Null, Value::Integer)
    } else if *kind == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?
            .map_or(Value::Null, |v| Value::Integer(v.into()))
    } else if *kind == Type::FLOAT8 {
        row.try_get::<_, Option<f64>>(i)?
            .map_or(Value::Null, Value::Real)
    } else {
        row.try_get::<_, Option<String>>(i)?
            .map_or(Value::Null, Value::Text)
    })
}
