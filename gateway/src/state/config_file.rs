//! Reading configuration: a file, or the embedded default.

use std::path::Path;

use switchyard_policies::Config;
use switchyard_router::learned::Weights;

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
    match path {
        None => Ok(Config::from_yaml(EMBEDDED_DEFAULT, "<embedded default>")?),
        Some(path) => {
            let mut config = Config::from_yaml(&read(path)?, &path.display().to_string())?;
            if let Some(hints) = config.latency_hints.clone() {
                // Relative to the config file, as a user reading it expects.
                let hints = path.parent().unwrap_or(Path::new(".")).join(hints);
                config.apply_latency_hints(&read(&hints)?, &hints.display().to_string())?;
            }
            let predictors: Vec<(String, String)> = config
                .predictors
                .values()
                .filter(|_| weights == WeightsFiles::Read)
                .filter_map(|p| Some((p.name.clone(), p.weights.clone()?)))
                .collect();
            for (name, file) in predictors {
                let file = path.parent().unwrap_or(Path::new(".")).join(file);
                let text = read(&file)?;
                if let Err(err) = Weights::from_json(&text) {
                    anyhow::bail!(
                        "{}: predictors.{name}.weights: {}: {err}",
                        path.display(),
                        file.display()
                    );
                }
                config.apply_predictor_weights(&name, &text);
            }
            Ok(config)
        }
    }
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
