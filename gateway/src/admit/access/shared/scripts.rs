//! The Lua scripts, each prefixed with the functions they share, and
//! their replies.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Script;

macro_rules! with_lib {
    ($file:literal) => {
        LazyLock::new(|| Script::new(concat!(include_str!("lib.lua"), "\n", include_str!($file))))
    };
}

pub static RESERVE: LazyLock<Script> = with_lib!("reserve.lua");
pub static ADMIT: LazyLock<Script> = with_lib!("admit.lua");
pub static RATE: LazyLock<Script> = with_lib!("rate.lua");
pub static OWE: LazyLock<Script> = with_lib!("owe.lua");
pub static SETTLE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("settle.lua")));
pub static SEED: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("seed.lua")));
/// How many of KEYS exist.
pub static EXISTING: LazyLock<Script> =
    LazyLock::new(|| Script::new("return redis.call('EXISTS', unpack(KEYS))"));
pub static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("renew.lua")));

/// Why a rate limit refused, naming its holder (`key:NAME`, `team:NAME`).
#[derive(Debug, PartialEq)]
pub enum RateRefusal {
    Requests {
        holder: String,
        wait: Duration,
    },
    Tokens {
        holder: String,
        wait: Duration,
        owed: bool,
    },
    /// The request alone asks for more than a minute's tokens.
    TooLarge {
        holder: String,
    },
}

/// Which limit of a limiter pair refused (see lib.lua).
#[derive(Debug, PartialEq)]
pub enum Limit {
    Requests { wait: Duration },
    Tokens { wait: Duration, owed: bool },
    TooLarge,
}

impl Limit {
    pub fn of(self, holder: String) -> RateRefusal {
        match self {
            Limit::Requests { wait } => RateRefusal::Requests { holder, wait },
            Limit::Tokens { wait, owed } => RateRefusal::Tokens { holder, wait, owed },
            Limit::TooLarge => RateRefusal::TooLarge { holder },
        }
    }
}

/// A script's reply (see lib.lua).
#[derive(Debug, PartialEq)]
pub enum Reply {
    Done,
    /// Holders (by index) whose period has no spend yet.
    Unseeded(Vec<usize>),
    /// Holder index, period (`daily`/`monthly`), cap and committed µ$.
    Exhausted {
        holder: usize,
        period: &'static str,
        cap: i64,
        committed: i64,
    },
    /// The limiter pair (by index) that refused, and how.
    Limited {
        pair: usize,
        limit: Limit,
    },
}

impl Reply {
    pub fn parse(reply: &[i64]) -> Option<Reply> {
        let index = |i: i64| usize::try_from(i).ok();
        let wait = |us: i64| Duration::from_micros(u64::try_from(us).unwrap_or(0));
        let limited = |pair: i64, limit: Limit| {
            Some(Reply::Limited {
                pair: index(pair)?,
                limit,
            })
        };
        match reply {
            [0] => Some(Reply::Done),
            [1, holders @ ..] => Some(Reply::Unseeded(
                holders.iter().map(|i| index(*i)).collect::<Option<_>>()?,
            )),
            [2, holder, period @ (1 | 2), cap, committed] => Some(Reply::Exhausted {
                holder: index(*holder)?,
                period: if *period == 1 { "daily" } else { "monthly" },
                cap: *cap,
                committed: *committed,
            }),
            [3, 1, us, _, pair] => limited(*pair, Limit::Requests { wait: wait(*us) }),
            [3, 2, us, owed, pair] => limited(
                *pair,
                Limit::Tokens {
                    wait: wait(*us),
                    owed: *owed == 1,
                },
            ),
            [4, _, pair] => limited(*pair, Limit::TooLarge),
            _ => None,
        }
    }
}
