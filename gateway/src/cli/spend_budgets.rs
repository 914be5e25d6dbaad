//! `switchyard spend --budgets`: each spend budget the config sets (a key's
//! or a team's, `budget: {daily_usd, monthly_usd, scope}`) with what the
//! ledger says was spent against it today and this month (UTC), and what
//! remains. Latency budgets (first-token times met) are `switchyard
//! budgets`'; this is money.

use std::io::Write;

use serde::Serialize;
use switchyard_policies::{Config, SpendLimit, SpendScope};

use crate::cli::report_text::{self, Rows};
use crate::ledger::{Postgres, now_ms};

/// One budget's standing.
#[derive(Debug, Serialize)]
pub struct BudgetLine {
    /// `key:NAME` or `team:NAME`, as refusals name it.
    pub budget: String,
    /// `cloud` (only cloud spend counts) or `total`.
    pub scope: &'static str,
    pub daily_usd: Option<f64>,
    pub spent_today_usd: f64,
    pub monthly_usd: Option<f64>,
    pub spent_this_month_usd: f64,
    /// The smaller of what the day's and the month's limits leave.
    pub remaining_usd: Option<f64>,
}

pub fn run(config: &Config, format: &str, out: &mut impl Write) -> anyhow::Result<()> {
    // The keys made through the admin API have budgets too.
    let config = &crate::state::stored_keys::merged(
        config,
        crate::ledger::read_stored_keys(&config.ledger),
        None,
        crate::state::stored_keys::Unreadable::Fail,
    )?;
    let (day_start, month_start) = switchyard_policies::calendar::period_starts(now_ms());
    // Spend per key and team: (kind, name, cloud USD, total USD).
    let read = |since: i64| -> anyhow::Result<Vec<(String, String, f64, f64)>> {
        match &config.ledger.postgres {
            Some(postgres) => {
                crate::ledger::postgres_spend_since(&*Postgres::connect_reader(postgres)?, since)
            }
            None => Ok(crate::ledger::spend_since(
                &report_text::open_ledger(&config.ledger, since)?,
                since,
            )?),
        }
    };
    let (today, month) = (read(day_start)?, read(month_start)?);
    let limits = config
        .auth
        .keys
        .iter()
        .filter_map(|k| Some(("key", &k.name, k.budget.as_ref()?)))
        .chain(
            config
                .auth
                .teams
                .iter()
                .filter_map(|t| Some(("team", &t.name, t.budget.as_ref()?))),
        );
    let lines: Vec<BudgetLine> = limits
        .map(|(kind, name, limit)| line(kind, name, limit, &today, &month))
        .collect();
    let rows: Rows = lines
        .iter()
        .map(|l| {
            let limit = |v: Option<f64>| v.map_or("-".to_owned(), report_text::usd);
            (
                l.budget.clone(),
                vec![
                    l.scope.to_owned(),
                    limit(l.daily_usd),
                    report_text::usd(l.spent_today_usd),
                    limit(l.monthly_usd),
                    report_text::usd(l.spent_this_month_usd),
                    limit(l.remaining_usd),
                ],
            )
        })
        .collect();
    let columns = [
        "scope",
        "daily_usd",
        "spent_today_usd",
        "monthly_usd",
        "spent_this_month_usd",
        "remaining_usd",
    ];
    let report = serde_json::json!({"budgets": lines});
    report_text::write(out, format, &report, ("budget", &columns, &rows))
}

fn line(
    kind: &str,
    name: &str,
    limit: &SpendLimit,
    today: &[(String, String, f64, f64)],
    month: &[(String, String, f64, f64)],
) -> BudgetLine {
    let spent = |rows: &[(String, String, f64, f64)]| {
        rows.iter()
            .find(|(k, n, _, _)| k == kind && n == name)
            .map_or(0.0, |(_, _, cloud, total)| match limit.scope {
                SpendScope::Cloud => *cloud,
                SpendScope::Total => *total,
            })
    };
    let (spent_today_usd, spent_this_month_usd) = (spent(today), spent(month));
    let left = |cap: Option<f64>, spent: f64| cap.map(|cap| (cap - spent).max(0.0));
    let remaining_usd = match (
        left(limit.daily_usd, spent_today_usd),
        left(limit.monthly_usd, spent_this_month_usd),
    ) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    BudgetLine {
        budget: format!("{kind}:{name}"),
        scope: match limit.scope {
            SpendScope::Cloud => "cloud",
            SpendScope::Total => "total",
        },
        daily_usd: limit.daily_usd,
        spent_today_usd,
        monthly_usd: limit.monthly_usd,
        spent_this_month_usd,
        remaining_usd,
    }
}
