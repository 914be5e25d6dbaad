//! Every subcommand but `serve`: arguments (`args`), the reports over the
//! ledger (`spend`, `sessions`, `budgets`, `advice`), the router's offline
//! tools (`route`: train-router, replay), `probe`, and the simulator
//! (`sim`, `sim_server`).
//!
//! May import: state, ledger, admin's explain, route, http, error. Nothing
//! on the request path imports cli, except admin serving a report.

pub mod advice;
pub mod args;
pub mod budgets;
pub mod probe;
pub mod report_text;
pub mod route;
pub mod sessions;
pub mod sim;
pub mod sim_server;
pub mod spend;
