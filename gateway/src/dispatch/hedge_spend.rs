//! Hedged spend per key today: the running config holds it, hedging takes
//! from it. Apart from `hedge` so the running config does not import the
//! request path.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ledger::now_ms;

/// Hedged spend per key today, counted as the worst case of each hedge.
#[derive(Default)]
pub struct HedgeSpend {
    by_key: Mutex<HashMap<String, (i64, f64)>>,
}

impl HedgeSpend {
    /// Takes `amount` from the key's daily hedge allowance, if it fits.
    pub(crate) fn take(&self, key: &str, amount: f64, cap: f64) -> bool {
        let today = now_ms().div_euclid(86_400_000);
        let mut spend = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        let entry = spend.entry(key.to_owned()).or_insert((today, 0.0));
        if entry.0 != today {
            *entry = (today, 0.0);
        }
        if entry.1 + amount > cap {
            return false;
        }
        entry.1 += amount;
        true
    }

    /// Gives back what `take` took for a hedge that did not start.
    pub(crate) fn refund(&self, key: &str, amount: f64) {
        let mut spend = self.by_key.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = spend.get_mut(key) {
            entry.1 = (entry.1 - amount).max(0.0);
        }
    }
}
