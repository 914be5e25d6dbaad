//! Routing: from a decoded request to the router crate's view of it
//! (`view`, `prefix`, `encoder`), to a decision, and to the receipts that
//! tell the caller what was decided (`receipts`). Predictors' outcomes for
//! offline training are recorded here too (`outcomes`).
//!
//! May import: state, error, the router crate, and for the encoder's own
//! model call (`encoder`) the admission and settlement it goes through.
//! Not dispatch: a decision is made before anything is called.

pub mod encoder;
pub mod outcomes;
pub mod prefix;
pub mod receipts;
pub mod sensitive;
pub mod view;
