//! Keys kept outside the config file: made through the admin API and kept
//! in the ledger's database, each an `auth.keys[]` entry as JSON, checked
//! exactly as the file's keys are and added to the config the gateway runs.

use super::raw_accounting::RawKey;
use super::validate::Checker;
use super::validate_accounting::key;
use super::{Config, ConfigError, VirtualKey};

impl Config {
    /// The key `spec` describes (an `auth.keys[]` entry as JSON: `name`,
    /// `hash`, and any of `team`, `budget`, `requests_per_minute`,
    /// `tokens_per_minute`, `may_name_backends`, `models`), checked against
    /// this config's teams and every key but one of the same name (the
    /// key it replaces); errors name the field as `keys.NAME.FIELD`.
    pub fn stored_key(
        &self,
        spec: &serde_json::Value,
        expires_at_ms: Option<i64>,
    ) -> Result<VirtualKey, ConfigError> {
        let name = spec
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("?")
            .to_owned();
        let ck = Checker::new("", "stored key");
        let raw: RawKey = serde_json::from_value(spec.clone())
            .map_err(|err| ck.error(&["keys", &name], err.to_string()))?;
        let others: Vec<VirtualKey> = self
            .auth
            .keys
            .iter()
            .filter(|k| !(k.from_api && k.name == name))
            .cloned()
            .collect();
        let mut checked = key(&ck, &["keys", &name], raw, &self.auth.teams, &others)?;
        checked.expires_at_ms = expires_at_ms;
        checked.from_api = true;
        Ok(checked)
    }

    /// Adds stored keys after the file's. One whose name or hash a key
    /// before it has (the file's own, written since) is left out and
    /// named in the answer: the file wins.
    pub fn add_stored_keys(&mut self, keys: Vec<VirtualKey>) -> Vec<String> {
        let mut skipped = Vec::new();
        for key in keys {
            if self
                .auth
                .keys
                .iter()
                .any(|k| k.name == key.name || k.hash == key.hash)
            {
                skipped.push(key.name);
            } else {
                self.auth.keys.push(key);
            }
        }
        skipped
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::Config;

    const YAML: &str = "backends:\n  small:\n    tier: small\n    sim: {preset: small}\nauth:\n  teams: {ops: {}}\n  keys:\n    - {name: alice, hash: \"sha256:1111111111111111111111111111111111111111111111111111111111111111\"}\n";
    const OTHER: &str = "sha256:3333333333333333333333333333333333333333333333333333333333333333";
    const HASH: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    #[test]
    fn stored_keys_are_checked_as_the_files_are() {
        let mut config = Config::from_yaml(YAML, "test").unwrap();
        let ci = config
            .stored_key(&json!({"name": "ci", "hash": HASH, "team": "ops", "models": ["small"], "budget": {"daily_usd": 5}}), Some(7))
            .unwrap();
        assert!(ci.from_api);
        assert_eq!(ci.expires_at_ms, Some(7));
        assert_eq!(config.add_stored_keys(vec![ci]), Vec::<String>::new());
        assert_eq!(config.auth.keys.len(), 2);
        // Replacing itself is fine; anything the file's check refuses is refused.
        assert!(
            config
                .stored_key(&json!({"name": "ci", "hash": HASH}), None)
                .is_ok()
        );
        for (spec, field) in [
            (json!({"name": "alice", "hash": OTHER}), "name"),
            (
                json!({"name": "x", "hash": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}),
                "hash",
            ),
            (
                json!({"name": "x", "hash": OTHER, "team": "nobody"}),
                "team",
            ),
            (
                json!({"name": "x", "hash": OTHER, "requests_per_minute": 0}),
                "requests_per_minute",
            ),
            (
                json!({"name": "x", "hash": OTHER, "budget": {"daily_usd": -1}}),
                "budget",
            ),
            (
                json!({"name": "x", "hash": OTHER, "colour": "red"}),
                "colour",
            ),
        ] {
            let err = config.stored_key(&spec, None).unwrap_err().to_string();
            assert!(err.contains(field), "{spec}: {err}");
        }
    }
}
