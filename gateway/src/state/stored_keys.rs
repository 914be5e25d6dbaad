//! Keys made through the admin API in the config the gateway runs: added
//! to the file's keys whenever a config is built (at start, on every
//! reload), and again whenever the stored keys change: at once on the
//! replica that changed them, and within [`POLL`] on every other replica
//! sharing the ledger's PostgreSQL.

use std::time::Duration;

use switchyard_policies::Config;

use crate::ledger::keys::StoredKey;

/// How often a replica looks for another's change to the stored keys.
pub const POLL: Duration = Duration::from_secs(2);

/// What a build does when the stored keys cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreadable {
    /// Keep the stored keys of the config this one replaces (a reload
    /// keeps serving the keys it had).
    KeepRunning,
    /// Fail the build (at start: never serve with keys missing; a key
    /// change: the running config stays, and the change is tried again).
    Fail,
}

/// `config` (the file's, or a running one) with the stored keys as they
/// are now: revoked ones left out (a revoked key is refused as any unknown
/// one), expired ones kept (they answer that they expired), and auth on
/// while any key was ever made. A stored key the config refuses now (its
/// team was taken out of the file, or the file has a key of its name since)
/// is left out and logged.
/// `stored`: the store as read (`Ledger::stored_keys`, or
/// `ledger::read_stored_keys` outside a running gateway).
pub fn merged(
    config: &Config,
    stored: anyhow::Result<Vec<StoredKey>>,
    running: Option<&Config>,
    unreadable: Unreadable,
) -> anyhow::Result<Config> {
    let mut config = config.clone();
    config.auth.keys.retain(|k| !k.from_api);
    let stored = match (stored, running, unreadable) {
        (Ok(stored), ..) => stored,
        (Err(err), Some(previous), Unreadable::KeepRunning) => {
            tracing::error!(error = %err, "cannot read the stored keys; the ones in use stay");
            let kept: Vec<_> = previous
                .auth
                .keys
                .iter()
                .filter(|k| k.from_api)
                .cloned()
                .collect();
            config.auth.stored_keys_exist = previous.auth.stored_keys_exist;
            config.add_stored_keys(kept);
            return Ok(config);
        }
        (Err(err), ..) => {
            return Err(anyhow::anyhow!("cannot read the stored keys: {err}"));
        }
    };
    config.auth.stored_keys_exist = !stored.is_empty();
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
    Ok(config)
}
