//! Switchyard's policies: configuration types and their validation.
//!
//! Everything here is pure: it parses text the gateway has already read and
//! turns it into the validated types the rest of the program uses. No I/O.

pub mod config;
pub mod profiles;

pub use config::{
    Backend, BackendAdapter, CascadeCheck, Condition, Config, ConfigError, HeaderMatch,
    OpenAiBackend, Pattern, Route, RouteStrategy, Rule, ServerSettings, SimFaults, SimParams,
    SimPreset, SimSpeculation, Similar, Tier, Timeouts, sim_params_from_yaml,
};
pub use profiles::{Budget, Profile};
