//! Admission: whether a request may go on, decided in one step before any
//! backend is called: the caller's key and model access, rate limits,
//! budget reservations, the breaker and the capacity queue (by priority
//! class: interactive, unattended, batch; `priority`).
//! `access` holds the state admission checks against (keys, limiters,
//! budgets, in memory or in Redis); `admission` is the step itself.
//!
//! May import: state (the running config), settle's billed fields (what a
//! reservation must allow for a service tier), ledger, http, error.
//! `access` (but its tower `layer`), `breaker` and `priority` import
//! nothing of the request path or of state: the running config holds them.

pub mod access;
pub mod admission;
pub mod breaker;
pub mod capacity;
pub mod priority;
