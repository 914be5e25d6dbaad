//! The running config: `App` (everything a request reads: backends,
//! router, keys, budgets, caches, ledger), `Live` (the current `App`,
//! swapped whole on reload), the config file, and the watchers that learn
//! backends' context windows and engine metrics while serving.
//!
//! May import: the shared state types it holds (admit::access, admit::breaker,
//! caches, ledger, metrics, telemetry), http, error. Never a stage's
//! request handling.

pub mod app;
pub mod backends;
pub mod config_file;
pub mod context_watch;
pub mod engine_watch;
pub mod live;
