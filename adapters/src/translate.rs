//! What every translation between dialects shares: the error that names a
//! field with no equivalent on the other side (the caller gets a 400
//! naming it rather than a silently different request), and the checks
//! each backend's translator makes of the canonical request's fields.

use crate::types::{ChatRequest, Extra};

/// Something in the request that has no equivalent on the other side.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("`{param}`: {message}")]
pub struct TranslateError {
    pub param: String,
    pub message: String,
}

/// The error for `param`, which has no equivalent on the other side.
pub(crate) fn untranslatable(
    param: impl Into<String>,
    message: impl Into<String>,
) -> TranslateError {
    TranslateError {
        param: param.into(),
        message: message.into(),
    }
}

/// Refuses the request fields a `backend` (`an Anthropic backend`) cannot
/// honour: more than one answer, when `one_answer`; a response format, when
/// `no_format`; log-probabilities always (no provider API here returns them
/// through chat); and any extra field neither `translated` nor `advisory`
/// (left behind on purpose).
pub(crate) fn refuse_unhonoured(
    req: &ChatRequest,
    backend: &str,
    (one_answer, no_format): (bool, bool),
    (translated, advisory): (&[&str], &[&str]),
) -> Result<(), TranslateError> {
    if one_answer && req.n.is_some_and(|n| n > 1) {
        return Err(untranslatable(
            "n",
            format!("{backend} gives one answer per request"),
        ));
    }
    for (field, set) in [
        (
            "response_format",
            no_format && req.response_format.is_some(),
        ),
        ("logprobs", req.logprobs == Some(true)),
    ] {
        if set {
            return Err(untranslatable(
                field,
                format!("{backend} cannot honour this"),
            ));
        }
    }
    unknown_extra(&req.extra, translated, advisory, backend)
}

fn unknown_extra(
    extra: &Extra,
    translated: &[&str],
    advisory: &[&str],
    backend: &str,
) -> Result<(), TranslateError> {
    match extra
        .keys()
        .find(|k| !translated.contains(&k.as_str()) && !advisory.contains(&k.as_str()))
    {
        Some(field) => Err(untranslatable(
            field.clone(),
            format!("this field has no equivalent for {backend}"),
        )),
        None => Ok(()),
    }
}
