//! Settlement: what a call cost and who pays. `record` turns one backend
//! call into usage, cost and a ledger row, settles the budget reservation,
//! and feeds metrics and the attempt's span (`attempt_span`); `refusal`
//! leaves a row for requests refused before any call; `billed_fields`
//! prices the request fields that change a provider's bill; `context` is
//! what every call of one request shares (who asked, how it was routed);
//! `agreement` compares a shadow copy's answer with the served one.
//!
//! May import: admit (the caller, and the reservation, rate limits,
//! breaker and capacity slot it settles), state, ledger, metrics,
//! telemetry, http, error. Not dispatch, route or ingress: what the
//! stages above hand down (`context`) is defined here.

pub mod agreement;
pub mod attempt_span;
pub mod billed_fields;
pub mod context;
pub mod record;
pub mod refusal;
pub mod row;
