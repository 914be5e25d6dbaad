//! The ledger in PostgreSQL, shared by every replica: a connection pool on
//! a runtime of its own, the schema's migrations, the spooling writer and
//! the reads that reports and budgets make.
//!
//! The pool lives on one thread with a current-thread runtime, like the
//! SQLite writer's thread: synchronous callers (budget seeding inside
//! `App::carrying`, reports in `spawn_blocking`, the CLIs) hand it a future
//! and wait for the answer on a plain channel, which is legal from any
//! thread, and the pool's connections are driven by a runtime that lives
//! as long as the ledger does.

pub mod keys;
mod migrate;
mod read;
mod retention;
mod writer;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadpool_postgres::{ManagerConfig, Pool, RecyclingMethod};
use switchyard_policies::{PostgresLedger, PostgresUrl, check_postgres_url};

pub use crate::ledger::postgres::read::{request_snapshot, snapshot, spend_report, spend_since};
pub(super) use crate::ledger::postgres::retention::run as run_retention;
pub(super) use crate::ledger::postgres::writer::{Spool, run as run_writer};

/// How long a connection attempt or a wait for a pooled connection lasts
/// before the caller hears that PostgreSQL is away.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A pool of connections to the ledger's database, and the thread that
/// drives them.
pub struct Postgres {
    handle: tokio::runtime::Handle,
    pool: Pool,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Postgres {
    /// Starts the pool's thread and applies the schema's migrations; fails
    /// when PostgreSQL cannot be reached, so a replica that cannot record
    /// does not start.
    pub fn connect(settings: &PostgresLedger) -> anyhow::Result<Arc<Postgres>> {
        let postgres = Self::connect_reader(settings)?;
        let pool = postgres.pool.clone();
        postgres
            .run(async move { migrate::apply(&pool).await })?
            .map_err(|err| anyhow::anyhow!("ledger.postgres: {err:#}"))?;
        Ok(postgres)
    }

    /// Starts the pool's thread, to read reports: the schema is left as it
    /// is (a reporting user needs no right to change it), and nothing
    /// connects before the first read.
    pub fn connect_reader(settings: &PostgresLedger) -> anyhow::Result<Arc<Postgres>> {
        let url = match &settings.url {
            PostgresUrl::Inline(url) => url.clone(),
            PostgresUrl::Env(name) => std::env::var(name).map_err(|_| {
                anyhow::anyhow!("ledger.postgres.url: environment variable {name} is not set")
            })?,
        };
        check_postgres_url(&url)
            .map_err(|message| anyhow::anyhow!("ledger.postgres.url: {message}"))?;
        let mut config: tokio_postgres::Config = url
            .parse()
            // The parser's message can quote the URL, password and all.
            .map_err(|_| anyhow::anyhow!("ledger.postgres.url: not a valid PostgreSQL URL"))?;
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .application_name("switchyard");
        let manager = deadpool_postgres::Manager::from_config(
            config,
            tokio_postgres::NoTls,
            ManagerConfig {
                // A connection PostgreSQL closed (a restart) is dropped
                // when next taken, without a round trip for healthy ones.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(settings.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()?;
        let (started, start) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("ledger-postgres".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        let _ = started.send(Err(err));
                        return;
                    }
                };
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                if started.send(Ok((runtime.handle().clone(), stop))).is_ok() {
                    let _ = runtime.block_on(stopped);
                }
            })?;
        let (handle, stop) = start
            .recv()
            .map_err(|_| anyhow::anyhow!("the ledger's PostgreSQL thread did not start"))??;
        Ok(Arc::new(Postgres {
            handle,
            pool,
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Runs `work` on the pool's runtime and waits for it. Never call it
    /// from that runtime's own thread (nothing there does).
    pub fn run<R: Send + 'static>(
        &self,
        work: impl Future<Output = R> + Send + 'static,
    ) -> anyhow::Result<R> {
        let (done, answer) = std::sync::mpsc::channel();
        self.handle.spawn(async move {
            let _ = done.send(work.await);
        });
        answer
            .recv()
            .map_err(|_| anyhow::anyhow!("the ledger's PostgreSQL thread has stopped"))
    }

    /// The pool, for work running on the pool's runtime ([`Postgres::run`],
    /// or spawned there).
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Starts `work` on the pool's runtime.
    pub(super) fn spawn(
        &self,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        self.handle.spawn(work)
    }

    /// Stops the pool's thread; work still on it is dropped.
    pub(super) async fn stop(&self) {
        drop(self.stop.lock().unwrap_or_else(|p| p.into_inner()).take());
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // The thread ends with its runtime; nobody waits for it here.
        drop(
            self.stop
                .get_mut()
                .unwrap_or_else(|p| p.into_inner())
                .take(),
        );
    }
}
