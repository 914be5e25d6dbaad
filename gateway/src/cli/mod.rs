//! Every subcommand: arguments (`args`) and their dispatch (`commands`),
//! `serve` and `sim` (`serve`, `sim_server`), the reports over the ledger
//! (`spend`, `sessions`, `budgets`, `advice`, `compare`), the batch store's
//! (`batches`), the router's offline tools
//! (`route`: train-router, replay) and `probe`.
//!
//! May import: anything. Nothing on the request path imports cli; the
//! admin plane serves one of its reports (`advice`).

pub mod advice;
pub mod args;
pub mod batches;
pub mod budgets;
pub mod commands;
pub mod compare;
pub mod keys;
pub mod probe;
pub mod report_text;
pub mod requests;
pub mod route;
pub mod serve;
pub mod sessions;
pub mod sim;
pub mod sim_server;
pub mod spend;
pub mod spend_budgets;
