//! Rule conditions, compiled for matching.

use std::sync::OnceLock;

use switchyard_policies::Condition;

use crate::embed::{cosine, embed};
use crate::features::{Features, RequestView};

/// A condition with its example prompts embedded: by the built-in
/// embedding at build time, or by an encoder backend once the gateway has
/// asked it (`provide_examples`).
#[derive(Debug)]
pub struct CompiledCondition {
    pub condition: Condition,
    examples: Examples,
}

#[derive(Debug)]
enum Examples {
    None,
    BuiltIn(Vec<Vec<f32>>),
    /// Embedded by backend `backend`; empty until the gateway provides them.
    Encoder {
        backend: usize,
        vectors: OnceLock<Vec<Vec<f32>>>,
    },
}

impl CompiledCondition {
    /// `encoder` is the backend index of `similar_to.encoder`, if any.
    pub fn new(condition: Condition, encoder: Option<usize>) -> Self {
        let examples = match (&condition.similar_to, encoder) {
            (None, _) => Examples::None,
            (Some(_), Some(backend)) => Examples::Encoder {
                backend,
                vectors: OnceLock::new(),
            },
            (Some(similar), None) => {
                Examples::BuiltIn(similar.examples.iter().map(|e| embed(e)).collect())
            }
        };
        CompiledCondition {
            condition,
            examples,
        }
    }

    /// Whether the built-in embedding of the request is needed.
    pub fn needs_embedding(&self) -> bool {
        matches!(self.examples, Examples::BuiltIn(_))
    }

    /// The encoder backend this condition needs, if any.
    pub fn encoder(&self) -> Option<usize> {
        match &self.examples {
            Examples::Encoder { backend, .. } => Some(*backend),
            _ => None,
        }
    }

    /// The examples still to be embedded by the encoder.
    pub fn missing_examples(&self) -> Option<&[String]> {
        match &self.examples {
            Examples::Encoder { vectors, .. } if vectors.get().is_none() => self
                .condition
                .similar_to
                .as_ref()
                .map(|s| s.examples.as_slice()),
            _ => None,
        }
    }

    /// Stores the encoder's vectors for the examples (first call wins).
    pub fn provide_examples(&self, embedded: Vec<Vec<f32>>) {
        if let Examples::Encoder { vectors, .. } = &self.examples {
            let _ = vectors.set(embedded);
        }
    }

    /// Whether the request meets every part of the condition. `embedding` is
    /// the last user message's built-in embedding, computed by the caller
    /// once for all rules.
    pub fn matches(
        &self,
        view: &RequestView<'_>,
        features: &Features,
        embedding: Option<&[f32]>,
    ) -> bool {
        let c = &self.condition;
        let text = view.last_user_text;
        c.model.as_ref().is_none_or(|m| m == view.model)
            && c.keys
                .as_ref()
                .is_none_or(|keys| view.key.is_some_and(|k| keys.iter().any(|x| x == k)))
            && c.teams
                .as_ref()
                .is_none_or(|teams| view.team.is_some_and(|t| teams.iter().any(|x| x == t)))
            && c.header.as_ref().is_none_or(|h| {
                view.headers.iter().any(|(name, value)| {
                    *name == h.name && h.value.as_ref().is_none_or(|v| v == value)
                })
            })
            && c.profile
                .as_ref()
                .is_none_or(|ps| features.profile.is_some_and(|p| ps.contains(&p)))
            && c.tools.is_none_or(|t| t == (features.tools > 0))
            && c.images.is_none_or(|i| i == features.images)
            && c.streaming.is_none_or(|s| s == features.streaming)
            && c.min_prompt_tokens
                .is_none_or(|m| features.prompt_tokens >= m)
            && c.max_prompt_tokens
                .is_none_or(|m| features.prompt_tokens <= m)
            && c.min_score.is_none_or(|m| features.score >= m)
            && c.predicted_fail.as_ref().is_none_or(|p| {
                // The route computed it, since a rule asks (0.5 otherwise:
                // a predictor with nothing learnt).
                let fail = features.predicted_fail.unwrap_or(0.5);
                p.min.is_none_or(|m| fail >= m) && p.max.is_none_or(|m| fail <= m)
            })
            && c.max_score.is_none_or(|m| features.score <= m)
            && c.regex.as_ref().is_none_or(|r| r.0.is_match(text))
            && c.keywords
                .as_ref()
                .is_none_or(|words| contains_any_word(text, words))
            && c.similar_to
                .as_ref()
                .is_none_or(|s| self.best_similarity(view, embedding) >= s.threshold)
    }

    /// The closest example's similarity to the request; 0 when the request
    /// or the examples have no vector (an encoder that failed never matches).
    pub fn best_similarity(&self, view: &RequestView<'_>, embedding: Option<&[f32]>) -> f64 {
        let (examples, request) = match &self.examples {
            Examples::None => return 0.0,
            Examples::BuiltIn(examples) => (examples.as_slice(), embedding),
            Examples::Encoder { backend, vectors } => (
                vectors.get().map_or(&[][..], Vec::as_slice),
                view.encoded
                    .iter()
                    .find(|(b, _)| b == backend)
                    .map(|(_, v)| v.as_slice()),
            ),
        };
        let Some(request) = request else { return 0.0 };
        examples
            .iter()
            .map(|e| cosine(e, request))
            .fold(0.0, f64::max)
    }
}

/// Case-insensitive substring search for lower-case `words`, without
/// allocating a lower-cased copy of the text.
fn contains_any_word(text: &str, words: &[String]) -> bool {
    words.iter().any(|word| {
        let word = word.as_bytes();
        !word.is_empty()
            && text
                .as_bytes()
                .windows(word.len())
                .any(|w| w.eq_ignore_ascii_case(word))
    })
}

#[cfg(test)]
mod tests {
    use switchyard_policies::{HeaderMatch, Profile, Similar};

    use super::*;

    fn check(condition: Condition, view: &RequestView<'_>) -> bool {
        let compiled = CompiledCondition::new(condition, None);
        let features = Features::of(view, None);
        let embedding = compiled
            .needs_embedding()
            .then(|| embed(view.last_user_text));
        compiled.matches(view, &features, embedding.as_deref())
    }

    #[test]
    fn each_part_must_hold() {
        let view = RequestView {
            model: "auto",
            prompt_tokens: 500,
            tool_count: 1,
            last_user_text: "Please REFACTOR this module",
            profile: Some(Profile::Code),
            headers: vec![("x-team", "research")],
            ..Default::default()
        };
        assert!(check(Condition::default(), &view));
        assert!(check(
            Condition {
                tools: Some(true),
                min_prompt_tokens: Some(100),
                ..Default::default()
            },
            &view
        ));
        assert!(!check(
            Condition {
                tools: Some(true),
                min_prompt_tokens: Some(1000),
                ..Default::default()
            },
            &view
        ));
        assert!(check(
            Condition {
                keywords: Some(vec!["refactor".into()]),
                ..Default::default()
            },
            &view
        ));
        assert!(check(
            Condition {
                profile: Some(vec![Profile::Code, Profile::Agentic]),
                ..Default::default()
            },
            &view
        ));
        assert!(!check(
            Condition {
                profile: Some(vec![Profile::Chat]),
                ..Default::default()
            },
            &view
        ));
        let team = |value: &str| Condition {
            header: Some(HeaderMatch {
                name: "x-team".into(),
                value: Some(value.into()),
            }),
            ..Default::default()
        };
        assert!(check(team("research"), &view));
        assert!(!check(team("sales"), &view));
        assert!(!check(
            Condition {
                model: Some("other".into()),
                ..Default::default()
            },
            &view
        ));
        let keyed = RequestView {
            key: Some("alice"),
            team: Some("research"),
            ..view.clone()
        };
        assert!(check(
            Condition {
                teams: Some(vec!["research".into()]),
                ..Default::default()
            },
            &keyed
        ));
        assert!(!check(
            Condition {
                keys: Some(vec!["bob".into()]),
                ..Default::default()
            },
            &keyed
        ));
        assert!(
            !check(
                Condition {
                    teams: Some(vec!["research".into()]),
                    ..Default::default()
                },
                &view
            ),
            "anonymous callers have no team"
        );
    }

    #[test]
    fn similar_prompts_match_by_example() {
        let coding = Condition {
            similar_to: Some(Similar {
                examples: vec!["write a python function".into(), "fix this bug".into()],
                threshold: 0.5,
                encoder: None,
            }),
            ..Default::default()
        };
        let view = RequestView {
            last_user_text: "Write a Python function that parses dates",
            ..Default::default()
        };
        assert!(check(coding.clone(), &view));
        let view = RequestView {
            last_user_text: "what a lovely morning",
            ..Default::default()
        };
        assert!(!check(coding, &view));
    }
}
