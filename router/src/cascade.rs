//! Cascade checks: does a cheap model's answer need a stronger model?

use switchyard_policies::CascadeCheck;

/// What the checks look at in an answer, from whatever dialect it came in.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerSummary {
    /// Finish reasons of the choices (`stop`, `length`, `tool_calls`, ...).
    pub finish_reasons: Vec<String>,
    pub text: String,
    /// Arguments of every tool call, as the model wrote them.
    pub tool_arguments: Vec<String>,
    /// The model set an explicit refusal (OpenAI's `refusal` field).
    pub refused: bool,
    /// Mean log-probability of the answer's tokens, when the backend sent them.
    pub mean_logprob: Option<f64>,
}

/// Openings of answers that decline; compared case-insensitively against
/// the start of the text.
const REFUSALS: &[&str] = &[
    "i can't help",
    "i cannot help",
    "i can't assist",
    "i cannot assist",
    "i'm sorry, but i can't",
    "i'm sorry, but i cannot",
    "i am unable to",
    "i'm unable to",
    "i won't be able to",
    "as an ai",
];

/// The first check the answer fails, if any.
pub fn failed_check(
    answer: &AnswerSummary,
    checks: &[CascadeCheck],
    min_mean_logprob: f64,
) -> Option<CascadeCheck> {
    checks.iter().copied().find(|check| match check {
        CascadeCheck::Length => answer.finish_reasons.iter().any(|r| r == "length"),
        CascadeCheck::Empty => answer.text.trim().is_empty() && answer.tool_arguments.is_empty(),
        CascadeCheck::Refusal => answer.refused || starts_with_refusal(&answer.text),
        CascadeCheck::InvalidToolJson => answer
            .tool_arguments
            .iter()
            .any(|args| is_invalid_json_object(args)),
        CascadeCheck::LowLogprob => answer.mean_logprob.is_some_and(|m| m < min_mean_logprob),
    })
}

fn starts_with_refusal(text: &str) -> bool {
    let start = text.trim_start();
    let start = &start.as_bytes()[..start.len().min(64)];
    REFUSALS
        .iter()
        .any(|r| start.len() >= r.len() && start[..r.len()].eq_ignore_ascii_case(r.as_bytes()))
}

/// Tool arguments must be a JSON object.
fn is_invalid_json_object(args: &str) -> bool {
    !serde_json::from_str::<serde_json::Value>(args).is_ok_and(|v| v.is_object())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[CascadeCheck] = &CascadeCheck::ALL;

    fn answer(text: &str) -> AnswerSummary {
        AnswerSummary {
            finish_reasons: vec!["stop".into()],
            text: text.into(),
            ..Default::default()
        }
    }

    #[test]
    fn good_answers_pass() {
        assert_eq!(
            failed_check(&answer("Paris is the capital."), ALL, -1.5),
            None
        );
        let tool = AnswerSummary {
            tool_arguments: vec![r#"{"city": "Oslo", "tags": ["a}"]}"#.into()],
            ..answer("")
        };
        assert_eq!(failed_check(&tool, ALL, -1.5), None);
    }

    #[test]
    fn each_failure_is_caught() {
        let cut = AnswerSummary {
            finish_reasons: vec!["length".into()],
            ..answer("Paris is")
        };
        assert_eq!(failed_check(&cut, ALL, -1.5), Some(CascadeCheck::Length));
        assert_eq!(
            failed_check(&answer("  "), ALL, -1.5),
            Some(CascadeCheck::Empty)
        );
        assert_eq!(
            failed_check(&answer("I'm sorry, but I can't do that."), ALL, -1.5),
            Some(CascadeCheck::Refusal)
        );
        let broken = AnswerSummary {
            tool_arguments: vec![r#"{"city": "Oslo""#.into()],
            ..answer("")
        };
        assert_eq!(
            failed_check(&broken, ALL, -1.5),
            Some(CascadeCheck::InvalidToolJson)
        );
        let unsure = AnswerSummary {
            mean_logprob: Some(-2.3),
            ..answer("maybe")
        };
        assert_eq!(
            failed_check(&unsure, ALL, -1.5),
            Some(CascadeCheck::LowLogprob)
        );
        // Only the configured checks count.
        assert_eq!(failed_check(&unsure, &[CascadeCheck::Length], -1.5), None);
    }
}
