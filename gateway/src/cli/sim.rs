//! `switchyard sim --profile NAME --set KEY=VALUE ...` -> simulator parameters.

use serde_json::{Map, Value};
use switchyard_policies::{SimParams, SimPreset, sim_params_from_yaml};

/// The preset with each `KEY=VALUE` applied; keys may be dotted
/// (`faults.stall_ms=2000`), values are YAML scalars.
pub fn params(profile: &str, overrides: &[String]) -> anyhow::Result<SimParams> {
    let preset = SimPreset::from_name(profile).ok_or_else(|| {
        let names: Vec<&str> = SimPreset::ALL.iter().map(|p| p.name()).collect();
        anyhow::anyhow!(
            "unknown --profile `{profile}`; use one of {}",
            names.join(", ")
        )
    })?;
    let mut root = Map::new();
    root.insert("preset".into(), Value::String(preset.name().into()));
    for item in overrides {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--set `{item}`: write KEY=VALUE"))?;
        let value: Value = serde_norway::from_str(value)
            .map_err(|err| anyhow::anyhow!("--set `{item}`: {err}"))?;
        insert_dotted(&mut root, key, value);
    }
    let yaml = serde_norway::to_string(&Value::Object(root))?;
    Ok(sim_params_from_yaml(&yaml, "--set")?)
}

fn insert_dotted(map: &mut Map<String, Value>, key: &str, value: Value) {
    match key.split_once('.') {
        None => {
            map.insert(key.to_owned(), value);
        }
        Some((head, rest)) => {
            let entry = map
                .entry(head.to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            if !entry.is_object() {
                *entry = Value::Object(Map::new());
            }
            if let Value::Object(inner) = entry {
                insert_dotted(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn overrides_apply_over_the_preset() {
        let p = params(
            "mid",
            &[
                "decode_tokens_per_s=200".into(),
                "faults.stall_ms=2000".into(),
                "faults.stall_rate=0.05".into(),
            ],
        )
        .unwrap();
        assert_eq!(p.decode_tokens_per_s, 200.0);
        assert_eq!(p.faults.stall, Duration::from_millis(2000));
        assert!(p.speculative.is_some(), "mid keeps its speculation");
    }

    #[test]
    fn bad_overrides_are_named() {
        let err = params("small", &["jitter=3".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("jitter"), "{err}");
        assert!(
            params("small", &["nonsense=1".into()])
                .unwrap_err()
                .to_string()
                .contains("nonsense")
        );
        assert!(params("huge", &[]).is_err());
    }
}
