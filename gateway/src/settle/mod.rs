//! Settlement: what a call cost and who pays. `record` turns one backend
//! call into usage, cost and a ledger row, settles the budget reservation,
//! and feeds metrics and the attempt's span (`attempt_span`); `refusal`
//! leaves a row for requests refused before any call; `billed_fields`
//! prices the request fields that change a provider's bill.
//!
//! May import: state, ledger, metrics, telemetry, http, error. Nothing
//! above it (dispatch, route, ingress).

pub mod attempt_span;
pub mod billed_fields;
pub mod record;
pub mod refusal;
pub mod row;
