//! Keys made through the admin API in the config the gateway runs: added
//! to the file's keys whenever a config is built (at start, on every
//! reload), and again whenever the stored keys change: at once on the
//! replica that changed them, and within [`POLL`] on every other replica
//! sharing the ledger's PostgreSQL.

use std::time::Duration;

use switchyard_policies::Config;

use crate::ledger::Ledger;

/// How often a replica looks for another's change to the stored keys.
pub const POLL: Duration = Duration::from_secs(2);

/// `config` (the file's, or a running one) with the stored keys as they
/// are now: revoked ones left out, expired ones kept (they answer that
/// they expired). A stored key the config refuses now (its team was taken
/// out of the file, or the file has a key of its name since) is left out
/// and logged. When the store cannot be read the running ones stay.
pub fn merged(config: &Config, ledger: &Ledger) -> Config {
    let stored = match ledger.stored_keys() {
        Ok(stored) => stored,
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the stored keys; the ones in use stay");
            return config.clone();
        }
    };
    let mut config = config.clone();
    config.auth.keys.retain(|k| !k.from_api);
    let mut keys = Vec::new();
    for key in stored.iter().filter(|k| k.revoked_ms.is_none()) {
        match config.stored_key(&key.spec, key.expires_at_ms) {
            Ok(key) => keys.push(key),
            Err(err) => tracing::warn!(key = %key.name, error = %err, "stored key left out"),
        }
    }
    for name in config.add_stored_keys(keys) {
        tracing::warn!(key = %name, "stored key left out: the config file has a key of its name or hash");
    }
    config
}
