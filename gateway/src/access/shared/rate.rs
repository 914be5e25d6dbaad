//! Requests and tokens per minute in Redis: governor's GCRA, in Lua, so
//! every replica counts against one minute. A request's check waits in a
//! [`RateTicket`] for its first reservation, and both go to Redis in one
//! round trip; a request with no budget to reserve sends it alone.

use std::collections::HashMap;
use std::sync::Arc;

use redis::ScriptInvocation;
use switchyard_policies::Auth;

use super::scripts::{RATE, RateRefusal, Reply};
use super::settler::Settlement;
use super::store::{RedisStore, StateError};

/// A key's allowances as configured.
#[derive(Debug, Clone, Copy)]
struct Allowance {
    requests_per_minute: u32,
    tokens_per_minute: u32,
}

pub struct SharedRates {
    store: Arc<RedisStore>,
    by_key: HashMap<String, Allowance>,
}

/// Microseconds one unit of a per-minute allowance earns (0: no limit).
fn unit_us(per_minute: u32) -> f64 {
    if per_minute == 0 {
        0.0
    } else {
        60e6 / f64::from(per_minute)
    }
}

impl SharedRates {
    pub fn new(store: Arc<RedisStore>, auth: &Auth) -> SharedRates {
        let by_key = auth
            .keys
            .iter()
            .filter_map(|k| {
                let allowance = Allowance {
                    requests_per_minute: k.requests_per_minute.unwrap_or(0),
                    tokens_per_minute: k.tokens_per_minute.unwrap_or(0),
                };
                let limited = allowance.requests_per_minute > 0 || allowance.tokens_per_minute > 0;
                limited.then(|| (k.name.clone(), allowance))
            })
            .collect();
        SharedRates { store, by_key }
    }

    pub fn store(&self) -> &Arc<RedisStore> {
        &self.store
    }

    fn limiter(&self, key: &str, what: &str) -> String {
        self.store.key(&format!("rl:{key}:{what}"))
    }

    /// The check of one request with `tokens` estimated, for `key`; `None`
    /// when the key has no limit.
    pub fn ticket(&self, key: &str, tokens: u32) -> Option<RateTicket> {
        let allowance = self.by_key.get(key)?;
        Some(RateTicket {
            store: self.store.clone(),
            requests: self.limiter(key, "rpm"),
            tokens_limiter: self.limiter(key, "tpm"),
            rpm: allowance.requests_per_minute,
            tpm: allowance.tokens_per_minute,
            tokens,
            done: false,
        })
    }

    /// Counts tokens used beyond the estimate (off the answer's latency).
    pub fn owe(&self, key: &str, tokens: u64) {
        let Some(allowance) = self.by_key.get(key) else {
            return;
        };
        if tokens > 0 && allowance.tokens_per_minute > 0 {
            self.store.settle(Settlement::Rate {
                mode: "debt",
                limiters: [self.limiter(key, "rpm"), self.limiter(key, "tpm")],
                args: [0.0, 0.0, unit_us(allowance.tokens_per_minute), 0.0],
                tokens,
            });
        }
    }
}

/// A request's rate check, not yet sent: with its first reservation, or
/// alone ([`RateTicket::check`]). Dropped unsent (the request ended
/// first), it is counted without a check, so every request counts.
pub struct RateTicket {
    store: Arc<RedisStore>,
    requests: String,
    tokens_limiter: String,
    rpm: u32,
    tpm: u32,
    tokens: u32,
    done: bool,
}

impl std::fmt::Debug for RateTicket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateTicket")
            .field("rpm", &self.rpm)
            .field("tpm", &self.tpm)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl RateTicket {
    /// Adds the limiters' keys and the check's ARGV (after `now`).
    pub fn add_keys(&self, invocation: &mut ScriptInvocation<'_>) {
        invocation.key(&self.requests).key(&self.tokens_limiter);
    }

    pub fn add_args(&self, invocation: &mut ScriptInvocation<'_>) {
        invocation
            .arg(unit_us(self.rpm))
            .arg(self.rpm)
            .arg(unit_us(self.tpm))
            .arg(self.tpm)
            .arg(self.tokens);
    }

    /// The check went to Redis (admitted or refused).
    pub fn sent(&mut self) {
        self.done = true;
    }

    /// Sends the check alone.
    pub async fn check(&mut self) -> Result<Result<(), RateRefusal>, StateError> {
        let mut invocation = RATE.prepare_invoke();
        self.add_keys(&mut invocation);
        invocation.arg(0).arg("admit");
        self.add_args(&mut invocation);
        let reply: Vec<i64> = self.store.run(&invocation).await?;
        self.sent();
        match Reply::parse(&reply) {
            Some(Reply::Done) => Ok(Ok(())),
            Some(Reply::Limited(refusal)) => Ok(Err(refusal)),
            _ => {
                tracing::error!(?reply, "unexpected reply from the rate script");
                Err(StateError::Unavailable)
            }
        }
    }

    /// Gives the check up (Redis is away: the caller counts it locally or
    /// refuses the request); returns its tokens.
    pub fn abandon(&mut self) -> u32 {
        self.done = true;
        self.tokens
    }

    /// Counts it without a check (off the request's path).
    fn count(&mut self) {
        self.done = true;
        self.store.settle(Settlement::Rate {
            mode: "count",
            limiters: [self.requests.clone(), self.tokens_limiter.clone()],
            args: [
                unit_us(self.rpm),
                f64::from(self.rpm),
                unit_us(self.tpm),
                f64::from(self.tpm),
            ],
            tokens: u64::from(self.tokens),
        });
    }
}

impl Drop for RateTicket {
    fn drop(&mut self) {
        if !self.done {
            self.count();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use governor::clock::{Clock, FakeRelativeClock};
    use governor::{Quota, RateLimiter};

    use super::*;

    /// A `redis-server` on a free port for one test, or `None` when it is
    /// not installed (a failure when the test script requires servers).
    struct Redis(std::process::Child, u16);

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn redis() -> Option<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap();
        let spawned = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn();
        match spawned {
            Ok(child) => Some(Redis(child, port)),
            Err(_) if std::env::var_os("SWITCHYARD_REQUIRE_SERVERS").is_none() => {
                eprintln!("skipped: redis-server is not installed");
                None
            }
            Err(err) => panic!("redis-server: {err}"),
        }
    }

    /// What a limiter said: admitted, refused with a wait (ms), or never.
    #[derive(Debug, PartialEq)]
    enum Said {
        Admitted,
        Wait(u64),
        TooLarge,
    }

    /// The script and governor, fed the same tokens at the same times,
    /// agree on every answer, and on how long a refusal must wait (to the
    /// millisecond: the script counts in whole microseconds).
    #[tokio::test]
    async fn the_script_counts_as_governor_does() {
        let Some(server) = redis() else { return };
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", server.1)).unwrap();
        let mut connection = None;
        for _ in 0..100 {
            if let Ok(c) = client.get_multiplexed_async_connection().await {
                connection = Some(c);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut connection = connection.expect("redis-server answers");
        let per_minute = 1000u32;
        let clock = FakeRelativeClock::default();
        let governor = RateLimiter::direct_with_clock(
            Quota::per_minute(NonZeroU32::new(per_minute).unwrap()),
            clock.clone(),
        );
        let start_us: u64 = 1_800_000_000_000_000;
        let mut elapsed = Duration::ZERO;
        let mut seen = Vec::new();
        // (ms since the previous check, tokens)
        let steps = [
            (0, 500),
            (0, 400),
            (0, 200),
            (100, 10),
            (10_000, 300),
            (0, 1),
            (5, 1500),
            (61_000, 1000),
            (0, 1),
            (59, 1),
            (1, 1),
            (30_000, 499),
            (0, 2),
            (120_000, 1),
        ];
        for (i, (after_ms, tokens)) in steps.into_iter().enumerate() {
            elapsed += Duration::from_millis(after_ms);
            clock.advance(Duration::from_millis(after_ms));
            let expected = match governor.check_n(NonZeroU32::new(tokens).unwrap()) {
                Ok(Ok(())) => Said::Admitted,
                Ok(Err(not_until)) => {
                    Said::Wait(not_until.wait_time_from(clock.now()).as_millis() as u64)
                }
                Err(_) => Said::TooLarge,
            };
            let now = start_us + elapsed.as_micros() as u64;
            let mut invocation = RATE.prepare_invoke();
            invocation
                .key("rpm")
                .key("tpm")
                .arg(now)
                .arg("admit")
                .arg(0)
                .arg(0)
                .arg(unit_us(per_minute))
                .arg(per_minute)
                .arg(tokens);
            let reply: Vec<i64> = invocation.invoke_async(&mut connection).await.unwrap();
            let said = match Reply::parse(&reply) {
                Some(Reply::Done) => Said::Admitted,
                Some(Reply::Limited(RateRefusal::Tokens { wait, .. })) => {
                    Said::Wait(wait.as_millis() as u64)
                }
                Some(Reply::Limited(RateRefusal::TooLarge)) => Said::TooLarge,
                other => panic!("step {i}: {other:?}"),
            };
            match (&said, &expected) {
                (Said::Wait(a), Said::Wait(b)) => {
                    assert!(a.abs_diff(*b) <= 1, "step {i}: {said:?} vs {expected:?}")
                }
                _ => assert_eq!(said, expected, "step {i}"),
            }
            seen.push(said);
        }
        // The steps cover every kind of answer.
        assert!(seen.contains(&Said::Admitted) && seen.contains(&Said::TooLarge));
        assert!(seen.iter().any(|s| matches!(s, Said::Wait(_))));
    }
}
