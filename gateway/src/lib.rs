//! The Switchyard gateway: the hyper server and tower stack, the OpenAI
//! endpoints, routing through the router crate, and the simulator server.
//! The `switchyard` binary (`main.rs`) parses arguments and calls in here.

pub mod access;
pub mod advice;
pub mod app;
pub mod breaker;
pub mod budgets_cli;
pub mod cli;
pub mod config_file;
pub mod context_watch;
pub mod engine_watch;
pub mod error;
pub mod handlers;
pub mod http;
pub mod ledger;
pub mod live;
pub mod metrics;
pub mod outcomes;
pub mod probe;
pub mod receipts;
pub mod redact;
pub mod report_text;
pub mod route_cli;
pub mod routing;
pub mod sessions_cli;
pub mod sim_cli;
pub mod sim_server;
pub mod spend_cli;
pub mod stack;
pub mod telemetry;
