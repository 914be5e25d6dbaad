//! Reading configuration: a file, or the embedded default.

use std::path::Path;

use switchyard_policies::Config;
use switchyard_router::learned::{Weights, builtin};

/// The config `switchyard serve` uses when given no file.
pub const EMBEDDED_DEFAULT: &str = include_str!("default.yaml");

pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
    load_with(path, WeightsFiles::Read)
}

/// The config `switchyard train-router` learns under: its predictors'
/// weights are not read (training computes features only, and the file
/// a predictor names may be the one about to be written).
pub fn load_for_training(path: Option<&Path>) -> anyhow::Result<Config> {
    load_with(path, WeightsFiles::Skip)
}

/// Whether predictors' weights files are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WeightsFiles {
    Read,
    Skip,
}

fn load_with(path: Option<&Path>, weights: WeightsFiles) -> anyhow::Result<Config> {
    let (mut config, source) = match path {
        None => (
            Config::from_yaml(EMBEDDED_DEFAULT, "<embedded default>")?,
            "<embedded default>".to_owned(),
        ),
        Some(path) => (
            Config::from_yaml(&read(path)?, &path.display().to_string())?,
            path.display().to_string(),
        ),
    };
    // Files a config names are relative to it, as a user reading it expects.
    let beside = path.and_then(Path::parent).unwrap_or(Path::new("."));
    if let Some(hints) = config.latency_hints.clone() {
        let hints = beside.join(hints);
        config.apply_latency_hints(&read(&hints)?, &hints.display().to_string())?;
    }
    let predictors: Vec<(String, String)> = config
        .predictors
        .values()
        .filter_map(|p| Some((p.name.clone(), p.weights.clone()?)))
        .collect();
    for (name, file) in predictors {
        let text = match file.strip_prefix(builtin::PREFIX) {
            Some(named) => builtin::weights(named).map(str::to_owned).ok_or_else(|| {
                anyhow::anyhow!(
                    "{source}: predictors.{name}.weights: no compiled-in weights `{named}`; \
                     known: {}",
                    builtin::NAMES
                        .map(|n| format!("{}{n}", builtin::PREFIX))
                        .join(", ")
                )
            })?,
            // Training computes features only, and the file a predictor
            // names may be the one about to be written.
            None if weights == WeightsFiles::Skip => continue,
            None => read(&beside.join(&file))?,
        };
        if let Err(err) = Weights::from_json(&text) {
            anyhow::bail!("{source}: predictors.{name}.weights: {file}: {err}");
        }
        config.apply_predictor_weights(&name, &text);
    }
    Ok(config)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|err| anyhow::anyhow!("cannot read {}: {err}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_default_serves_auto_and_every_backend() {
        let config = load(None).unwrap();
        assert_eq!(config.model_names(), ["auto", "large", "mid", "small"]);
    }
}
