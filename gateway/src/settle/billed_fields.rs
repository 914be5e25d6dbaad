//! Request fields the gateway does not model but that change a provider's
//! bill. Each is priced or stripped: a `service_tier` the backend's price
//! names is sent and its multiplier applied to the cost; any other tier
//! (but `auto` and `default`, which are the standard price) is not sent,
//! nor is any field the backend's `passthrough.deny` names. The ledger
//! keeps the tier that was sent.

use switchyard_adapters::types::Fields;

use crate::state::backends::BackendHandle;

const SERVICE_TIER: &str = "service_tier";

/// The standard price's names for a tier.
const STANDARD_TIERS: [&str; 2] = ["auto", "default"];

/// A service tier sent to a backend, with its price multiplier.
#[derive(Debug, Clone, PartialEq)]
pub struct SentTier {
    pub name: String,
    pub multiplier: f64,
}

/// Removes what `backend` may not be sent from a request body's fields, and
/// says which service tier is sent (with its multiplier; 1 for the
/// standard price).
pub fn apply(fields: &mut Fields, backend: &BackendHandle) -> Option<SentTier> {
    for denied in &backend.deny_fields {
        if fields.remove(denied).is_some() {
            tracing::debug!(backend = %backend.name, field = %denied, "field not sent (passthrough.deny)");
        }
    }
    let tier = fields
        .get(SERVICE_TIER)?
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if STANDARD_TIERS.contains(&tier.as_str()) {
        return Some(SentTier {
            name: tier,
            multiplier: 1.0,
        });
    }
    match backend.service_tiers.iter().find(|(name, _)| *name == tier) {
        Some((name, multiplier)) => Some(SentTier {
            name: name.clone(),
            multiplier: *multiplier,
        }),
        None => {
            // Unpriced: sent, it would be billed at a price the ledger does
            // not know.
            fields.remove(SERVICE_TIER);
            tracing::debug!(backend = %backend.name, %tier, "service tier not sent: no price for it");
            None
        }
    }
}

/// The most a service tier can multiply this backend's price: what a
/// reservation must allow for.
pub fn worst_multiplier(backend: &BackendHandle) -> f64 {
    backend
        .service_tiers
        .iter()
        .map(|(_, multiplier)| *multiplier)
        .fold(1.0, f64::max)
}
