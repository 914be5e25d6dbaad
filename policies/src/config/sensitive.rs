//! `sensitive: {action, detect}` on a route, a team or a key: what happens
//! to a request that holds sensitive data (router's `sensitive` finds it).
//! Where several apply, the strictest action wins: refuse, then
//! local_only, then mask, then allow.

use serde::Deserialize;

use super::ConfigError;
use super::validate::Checker;

/// The kinds of finding, as config, receipts and the ledger name them.
pub const SENSITIVE_KINDS: [&str; 8] = [
    "card",
    "iban",
    "email",
    "phone",
    "national_id",
    "ip",
    "credential",
    "private_key",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSensitive {
    pub action: String,
    /// Every kind when absent.
    pub detect: Option<Vec<String>>,
}

/// What is done with a request holding a kind the policy detects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SensitiveAction {
    /// Served as routed; the kinds are recorded.
    Allow,
    /// Served as routed, each value replaced by a placeholder before a
    /// backend that is not local sees it, and restored in the answer.
    Mask,
    /// Only local tiers may serve it; refused when none can.
    LocalOnly,
    /// Refused: a 400 naming the kinds, never the values.
    Refuse,
}

impl SensitiveAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SensitiveAction::Allow => "allow",
            SensitiveAction::Mask => "mask",
            SensitiveAction::LocalOnly => "local_only",
            SensitiveAction::Refuse => "refuse",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SensitivePolicy {
    pub action: SensitiveAction,
    /// Kinds (of [`SENSITIVE_KINDS`]) this policy acts on.
    pub detect: Vec<&'static str>,
}

pub(super) fn sensitive(
    ck: &Checker<'_>,
    path: &[&str],
    raw: Option<RawSensitive>,
) -> Result<Option<SensitivePolicy>, ConfigError> {
    let Some(raw) = raw else { return Ok(None) };
    let at = |field: &'static str| [path, &[field]].concat();
    let action = match raw.action.as_str() {
        "allow" => SensitiveAction::Allow,
        "local_only" => SensitiveAction::LocalOnly,
        "refuse" => SensitiveAction::Refuse,
        "mask" => SensitiveAction::Mask,
        other => {
            return Err(ck.error(
                &at("action"),
                format!("`{other}` is not one of local_only, mask, refuse, allow"),
            ));
        }
    };
    let detect = match raw.detect {
        None => SENSITIVE_KINDS.to_vec(),
        Some(kinds) => kinds
            .iter()
            .enumerate()
            .map(|(i, kind)| {
                SENSITIVE_KINDS
                    .iter()
                    .copied()
                    .find(|k| k == kind)
                    .ok_or_else(|| {
                        ck.error(
                            &[path, &["detect", i.to_string().as_str()]].concat(),
                            format!("`{kind}` is not one of {}", SENSITIVE_KINDS.join(", ")),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    Ok(Some(SensitivePolicy { action, detect }))
}
