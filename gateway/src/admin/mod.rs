//! The admin plane: the admin API (`api`), the built-in dashboard, health
//! and readiness, the model list and `POST /v1/route/explain`.
//!
//! May import: anything but ingress, and `cli`'s `advice` report. Only
//! `ingress::paths` (which routes admin paths here) imports admin.

pub mod api;
pub mod dashboard;
pub mod explain;
pub mod health;
pub mod keys;
pub mod models;
pub mod requests;
pub mod scrape;
