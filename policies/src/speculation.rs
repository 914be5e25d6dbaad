//! Speculative decoding: the prompt classes whose acceptance differs, and a
//! route's settings for engines that draft.

use serde::Deserialize;

/// What a prompt asks for, as far as drafting is concerned: drafts of code
/// (repetitive, predictable tokens) are accepted far more often than drafts
/// of prose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptClass {
    Code,
    #[default]
    Prose,
}

impl PromptClass {
    pub const ALL: [PromptClass; 2] = [PromptClass::Code, PromptClass::Prose];

    pub fn as_str(self) -> &'static str {
        match self {
            PromptClass::Code => "code",
            PromptClass::Prose => "prose",
        }
    }

    /// Position in [`PromptClass::ALL`], for per-class arrays.
    pub fn index(self) -> usize {
        match self {
            PromptClass::Code => 0,
            PromptClass::Prose => 1,
        }
    }
}

/// A route's speculative-decoding settings, sent to engines that take them
/// per request (llama.cpp's `speculative.*` fields). Unset fields leave the
/// server's own settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Speculative {
    /// Most tokens drafted per step.
    pub n_max: Option<u32>,
    /// Fewest tokens worth a draft.
    pub n_min: Option<u32>,
    /// Smallest draft-token probability kept.
    pub p_min: Option<f64>,
    /// Prompt classes that are never drafted.
    pub disable_for: Vec<PromptClass>,
    /// Drafting stops for a class whose measured acceptance on a backend
    /// falls below this; a few requests keep drafting to notice a recovery.
    pub min_acceptance: Option<f64>,
    /// The backend that serves a request when drafting is off for it: the
    /// same model started without a draft. Engines that take no per-request
    /// drafting settings (the llama-server build tested, 0.10434.0 from
    /// PyPI, accepts them and ignores them) can only stop drafting this way.
    pub instead: Option<String>,
}
