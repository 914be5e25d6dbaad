//! The Switchyard gateway. The folders follow a request's path:
//! `ingress` (endpoint by path, one module per dialect) -> `admit` (one
//! admission step) -> `route` (the router's view, the decision, receipts)
//! -> `dispatch` (backends tried, hedged, streamed, cached) -> `settle`
//! (usage, cost, the ledger row, budgets, metrics, spans). `state` is the
//! running config they all read; `admin` the admin plane; `cli` every
//! subcommand, `serve` included. `http` is the edge (server, TLS, the tower
//! stack); `ledger`, `metrics` and `telemetry` are the stores settlement
//! feeds; `error` turns every failure into an answer. `mcp` is the MCP
//! gateway (`/mcp`); `batch` the Files and Batches API, whose runner sends
//! each line down the same path. The `switchyard`
//! binary (`main.rs`) parses arguments and calls `cli::commands::run`.

pub mod admin;
pub mod admit;
pub mod batch;
pub mod cli;
pub mod dispatch;
pub mod error;
pub mod http;
pub mod ingress;
pub mod ledger;
pub mod mcp;
pub mod metrics;
pub mod route;
pub mod settle;
pub mod state;
pub mod telemetry;
