//! `switchyard batches`: the batches in the store beside the ledger,
//! newest first, each with a progress bar of its answered lines.

use std::io::Write;

use crate::batch::objects::batch_object;
use crate::batch::store::{self, BatchRow};
use crate::cli::report_text::{self, Rows};

pub fn run(
    config: &switchyard_policies::Config,
    limit: usize,
    format: &str,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    // The SQLite store is not made here when no gateway has made it.
    let path = config.batches.store_path(&config.ledger.path);
    if store::in_postgres(config).is_none() && !path.exists() {
        anyhow::bail!(
            "no batch store at {}: no batch has been made with this config yet",
            path.display()
        );
    }
    let batches = store::open(config, None)?.recent(limit)?;
    let report: Vec<serde_json::Value> = batches
        .iter()
        .map(|b| {
            let mut object = batch_object(b);
            object["key"] = serde_json::json!(b.owner);
            object
        })
        .collect();
    let rows: Rows = batches.iter().map(|b| (b.id.clone(), cells(b))).collect();
    report_text::write(out, format, &report, ("batch", &COLUMNS, &rows))
}

const COLUMNS: [&str; 6] = [
    "key", "status", "progress", "answered", "failed", "endpoint",
];

/// Width of the progress bar, in characters.
const BAR: usize = 20;

fn cells(batch: &BatchRow) -> Vec<String> {
    let answered = batch.completed + batch.failed;
    vec![
        if batch.owner.is_empty() {
            "-".into()
        } else {
            batch.owner.clone()
        },
        batch.status.clone(),
        bar(answered, batch.total),
        format!("{answered}/{}", batch.total),
        batch.failed.to_string(),
        batch.endpoint.clone(),
    ]
}

/// `[#########-----------]  45%`: the share of `total` that is `done`.
fn bar(done: u64, total: u64) -> String {
    let share = if total == 0 {
        1.0
    } else {
        done as f64 / total as f64
    };
    let filled = ((share * BAR as f64).round() as usize).min(BAR);
    format!(
        "[{}{}] {:>3.0}%",
        "#".repeat(filled),
        "-".repeat(BAR - filled),
        share * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_answered_share() {
        assert_eq!(bar(0, 200), "[--------------------]   0%");
        assert_eq!(bar(90, 200), "[#########-----------]  45%");
        assert_eq!(bar(200, 200), "[####################] 100%");
        assert_eq!(bar(0, 0), "[####################] 100%");
    }
}
