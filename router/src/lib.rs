//! Switchyard's router: pure selection logic, apart from any I/O so it can be
//! tested and benchmarked alone. The gateway turns a request into the small
//! inputs used here.

mod split;

pub use split::{SplitPolicy, unit_from_key};

/// Why a request went where it went. Short and stable: it is sent to
/// callers in `x-switchyard-reason` and used as a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The caller named a backend, not a route.
    Direct,
    /// A weighted split, drawn at random.
    Split,
    /// A weighted split, drawn from the caller's session so a session
    /// stays on one backend and its prefix cache stays warm.
    SplitSticky,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Direct => "direct",
            Reason::Split => "split",
            Reason::SplitSticky => "split-sticky",
        }
    }
}
