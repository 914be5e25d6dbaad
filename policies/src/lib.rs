//! Switchyard's policies: configuration types and their validation.
//!
//! Everything here is pure: it parses text the gateway has already read and
//! turns it into the validated types the rest of the program uses. No I/O.

pub mod config;

pub use config::{
    Backend, BackendAdapter, Config, ConfigError, OpenAiBackend, Route, RouteStrategy,
    ServerSettings, SimFaults, SimParams, SimPreset, SimSpeculation, Tier, Timeouts,
    sim_params_from_yaml,
};
