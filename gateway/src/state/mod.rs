//! The running config: `App` (everything a request reads: backends,
//! router, keys, budgets, caches, ledger), `Live` (the current `App`,
//! swapped whole on reload), the config file, and the watchers that learn
//! backends' context windows and engine metrics while serving.
//!
//! May import: the types it holds (admit's access and breaker, dispatch's
//! prompt cache, hedge spend and response store, route's outcome logs,
//! ledger, metrics, telemetry), http, error. Those files import neither
//! state nor any stage's request handling: no stage is reached through
//! `App`.

pub mod app;
pub mod backends;
pub mod config_file;
pub mod context_watch;
pub mod engine_watch;
pub mod health_watch;
pub mod live;
pub mod stored_keys;
