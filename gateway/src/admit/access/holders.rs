//! Whom limits and budgets are kept for: a key (`key:NAME`) and its team
//! (`team:NAME`), by the same names in this process and in Redis.

use switchyard_policies::{Auth, SpendLimit, VirtualKey};

/// A key or a team, by name, where a holder's name is not needed as text
/// (`key:NAME`): this process's rate limits look them up by plain name.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Holder<'a> {
    Key(&'a str),
    Team(&'a str),
}

impl<'a> Holder<'a> {
    /// `key:alice` is key `alice`, `team:research` team `research`; a
    /// name without a kind is a key's.
    pub fn parse(holder: &'a str) -> Self {
        match holder.split_once(':') {
            Some(("team", name)) => Holder::Team(name),
            Some(("key", name)) => Holder::Key(name),
            _ => Holder::Key(holder),
        }
    }

    pub fn kind(self) -> &'static str {
        match self {
            Holder::Key(_) => "key",
            Holder::Team(_) => "team",
        }
    }

    pub fn name(self) -> &'a str {
        match self {
            Holder::Key(name) | Holder::Team(name) => name,
        }
    }
}

/// Every holder with a rate limit in `auth`: `(holder, requests per
/// minute, tokens per minute)`.
pub fn limited_holders(auth: &Auth) -> Vec<(String, Option<u32>, Option<u32>)> {
    let keys = auth.keys.iter().map(|k| {
        let holder = format!("key:{}", k.name);
        (holder, k.requests_per_minute, k.tokens_per_minute)
    });
    let teams = auth.teams.iter().map(|t| {
        let holder = format!("team:{}", t.name);
        (holder, t.requests_per_minute, t.tokens_per_minute)
    });
    keys.chain(teams)
        .filter(|(_, rpm, tpm)| rpm.is_some() || tpm.is_some())
        .collect()
}

/// The holders a request by `key` counts against: the key, then its team.
pub fn holders_of(key: &VirtualKey) -> impl Iterator<Item = String> + '_ {
    std::iter::once(format!("key:{}", key.name)).chain(key.team.iter().map(|t| format!("team:{t}")))
}

/// Every budget `auth` sets, by holder name.
pub fn budget_holders(auth: &Auth) -> impl Iterator<Item = (String, SpendLimit)> + '_ {
    let keys = auth
        .keys
        .iter()
        .filter_map(|k| Some((format!("key:{}", k.name), k.budget?)));
    let teams = auth
        .teams
        .iter()
        .filter_map(|t| Some((format!("team:{}", t.name), t.budget?)));
    keys.chain(teams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_parse_as_budgets_and_redis_name_them() {
        assert_eq!(Holder::parse("key:a:b"), Holder::Key("a:b"));
        assert_eq!(Holder::parse("team:research"), Holder::Team("research"));
        assert_eq!(Holder::parse("plain"), Holder::Key("plain"));
        assert_eq!(Holder::parse("team:r").kind(), "team");
    }
}
