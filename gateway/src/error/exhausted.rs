//! Why a request may not spend: the budget that refused it and its numbers.
//! One of the errors (`GatewayError::BudgetExhausted`); admission's budgets
//! produce it.

use switchyard_policies::OnExhausted;

/// Why a request may not spend: the budget, and the numbers that refused it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exhausted {
    pub holder: String,
    pub on_exhausted: OnExhausted,
    /// `daily` or `monthly`.
    pub period: &'static str,
    pub limit_usd: f64,
    /// Spent in the period plus what requests in flight hold.
    pub committed_usd: f64,
    /// The most this request could cost, which it would have had to hold.
    pub request_usd: f64,
}

impl std::fmt::Display for Exhausted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (holder, period, limit) = (&self.holder, self.period, usd(self.limit_usd));
        let left = self.limit_usd - self.committed_usd;
        if left <= 1e-12 {
            write!(
                f,
                "budget `{holder}` is spent: {} of its {limit} {period} limit is spent or held by requests in flight; raise it or wait for the next period",
                usd(self.committed_usd)
            )
        } else {
            write!(
                f,
                "budget `{holder}` cannot cover this request: it may cost up to {}, and {} of its {limit} {period} limit remains (the rest is spent or held by requests in flight); ask for fewer tokens or wait for the next period",
                usd(self.request_usd),
                usd(left)
            )
        }
    }
}

/// Dollars with enough places to show a fraction of a cent.
fn usd(amount: f64) -> String {
    let text = format!("{amount:.6}");
    let text = text.trim_end_matches('0');
    let places = text.split_once('.').map_or(0, |(_, p)| p.len());
    format!("${text}{}", "0".repeat(2usize.saturating_sub(places)))
}
