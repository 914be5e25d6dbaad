//! Spend per name per UTC day against a daily cap: hedged spend per key
//! (`hedge.max_usd_per_key_per_day`) and shadow copies' spend per route
//! (`shadow.daily_usd`). The running config holds it, carried across
//! reloads; apart from `hedge` and `shadow` so the running config does not
//! import the request path.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::ledger::now_ms;

/// Today's spend per name, USD, as reserved and settled.
#[derive(Default)]
pub struct DailySpend {
    by_name: Mutex<HashMap<String, (i64, f64)>>,
}

impl DailySpend {
    /// Takes `amount` from the name's daily allowance `cap`, if it fits.
    pub(crate) fn take(&self, name: &str, amount: f64, cap: f64) -> bool {
        let today = now_ms().div_euclid(86_400_000);
        let mut spend = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        let entry = spend.entry(name.to_owned()).or_insert((today, 0.0));
        if entry.0 != today {
            *entry = (today, 0.0);
        }
        if entry.1 + amount > cap {
            return false;
        }
        entry.1 += amount;
        true
    }

    /// What the name has spent today.
    pub(crate) fn spent_today(&self, name: &str) -> f64 {
        let today = now_ms().div_euclid(86_400_000);
        let spend = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        spend
            .get(name)
            .filter(|(day, _)| *day == today)
            .map_or(0.0, |(_, usd)| *usd)
    }

    /// Adds `delta` (negative: gives back) to what `take` took: a settled
    /// cost's difference from its reservation, or a reservation unused.
    pub(crate) fn adjust(&self, name: &str, delta: f64) {
        let mut spend = self.by_name.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = spend.get_mut(name) {
            entry.1 = (entry.1 + delta).max(0.0);
        }
    }
}
