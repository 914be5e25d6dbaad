//! Fuzz targets for every parser that reads outside input; see `targets.rs`.

pub mod targets;
