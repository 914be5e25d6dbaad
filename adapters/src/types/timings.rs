use serde::Serialize;
use serde_json::Value;

use super::Extra;
use super::with_extra::with_extra;

/// llama.cpp's `timings` on whole answers and final chunks: what the engine
/// measured of prefill, decode and speculative drafts.
///
/// Typed rather than left in `extra`: a generic JSON object costs an
/// allocation per key and a map insert, about a third of decoding a short
/// answer. Values stay JSON values, so a server that writes one as a string
/// or null is not rejected.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Timings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_n: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_n: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_per_token_ms: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_per_second: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_n: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_per_token_ms: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_per_second: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_n: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft_n_accepted: Option<Value>,
    #[serde(flatten)]
    pub extra: Extra,
}

with_extra!(Timings { cache_n = "cache_n": optional, prompt_n = "prompt_n": optional, prompt_ms = "prompt_ms": optional, prompt_per_token_ms = "prompt_per_token_ms": optional, prompt_per_second = "prompt_per_second": optional, predicted_n = "predicted_n": optional, predicted_ms = "predicted_ms": optional, predicted_per_token_ms = "predicted_per_token_ms": optional, predicted_per_second = "predicted_per_second": optional, draft_n = "draft_n": optional, draft_n_accepted = "draft_n_accepted": optional });

fn number(value: Option<&Value>) -> Option<f64> {
    value.and_then(Value::as_f64)
}

/// Tokens per second from a count and the milliseconds it took.
fn rate(n: Option<&Value>, ms: Option<&Value>) -> Option<f64> {
    let (n, ms) = (number(n)?, number(ms)?);
    (n > 0.0 && ms > 0.0).then(|| n / ms * 1000.0)
}

impl Timings {
    /// Prefill tokens per second, from `prompt_n` over `prompt_ms`.
    pub fn prompt_rate(&self) -> Option<f64> {
        rate(self.prompt_n.as_ref(), self.prompt_ms.as_ref())
    }

    /// Decode tokens per second, from `predicted_n` over `predicted_ms`.
    pub fn predicted_rate(&self) -> Option<f64> {
        rate(self.predicted_n.as_ref(), self.predicted_ms.as_ref())
    }

    /// The engine's own prefill rate (`prompt_per_second`), when it is a
    /// positive finite number.
    pub fn prompt_per_second(&self) -> Option<f64> {
        number(self.prompt_per_second.as_ref()).filter(|r| r.is_finite() && *r > 0.0)
    }

    /// Draft tokens proposed and accepted, when the engine drafted; the
    /// accepted count is clamped to the drafted one.
    pub fn drafts(&self) -> Option<(u64, u64)> {
        let drafted = self.draft_n.as_ref().and_then(Value::as_u64)?;
        let accepted = self
            .draft_n_accepted
            .as_ref()
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Some((drafted, accepted.min(drafted)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn llama_cpp_timings_round_trip_with_unknown_fields_kept() {
        let text = json!({
            "cache_n": 3, "prompt_n": 24, "prompt_ms": 12.5, "prompt_per_token_ms": 0.52,
            "prompt_per_second": 1920.0, "predicted_n": 16, "predicted_ms": 160.0,
            "predicted_per_token_ms": 10.0, "predicted_per_second": 100.0,
            "draft_n": 10, "draft_n_accepted": 7, "n_ctx": 4096
        });
        let timings: Timings = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(timings.extra.get("n_ctx"), Some(&json!(4096)));
        assert_eq!(serde_json::to_value(&timings).unwrap(), text);
        assert_eq!(timings.prompt_rate(), Some(1920.0));
        assert_eq!(timings.predicted_rate(), Some(100.0));
        assert_eq!(timings.prompt_per_second(), Some(1920.0));
        assert_eq!(timings.drafts(), Some((10, 7)));
    }

    #[test]
    fn odd_values_are_kept_but_give_no_rates() {
        let timings: Timings = serde_json::from_value(
            json!({"prompt_n": "24", "prompt_ms": 0, "draft_n": 2, "draft_n_accepted": 9}),
        )
        .unwrap();
        assert_eq!(timings.prompt_n, Some(json!("24")));
        assert_eq!(timings.prompt_rate(), None);
        assert_eq!(timings.predicted_rate(), None);
        assert_eq!(timings.drafts(), Some((2, 2)));
    }
}
