//! Reading only the outline of an OpenAI-dialect chat answer that goes on to
//! an OpenAI-dialect caller as its bytes.
//!
//! The gateway needs usage and timings of such an answer, and to know it is
//! a chat answer at all; the choices go out as they came. Decoding them
//! (every string copied, every unknown field a JSON value) was the largest
//! cost left on a request's path, so this reading checks their shape (each
//! choice has a message with a known role) and skips their content.
//! [`ChatResponse::whole`] reads the rest when something asks for it.

use std::borrow::Cow;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::{ChatResponse, Extra, Role, Timings, Usage};

#[derive(Deserialize)]
struct Outline<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow, default)]
    object: Option<Cow<'a, str>>,
    #[serde(default)]
    created: Option<u64>,
    #[serde(borrow, default)]
    model: Option<Cow<'a, str>>,
    /// Checked for shape, then dropped.
    #[serde(rename = "choices")]
    _choices: Vec<ChoiceOutline>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(borrow, default)]
    system_fingerprint: Option<Cow<'a, str>>,
    #[serde(default)]
    timings: Option<Timings>,
}

#[derive(Deserialize)]
struct ChoiceOutline {
    #[serde(rename = "message")]
    _message: MessageOutline,
}

#[derive(Deserialize)]
struct MessageOutline {
    #[serde(rename = "role")]
    _role: Role,
    #[serde(rename = "content", default)]
    _content: Option<IgnoredAny>,
}

impl ChatResponse {
    /// An answer to send on as `body`, with only its outline read: `None`
    /// when the body is not plainly a chat answer with `object`, `created`
    /// and `model` set (read it whole then, which reports what is wrong or
    /// fills those fields in).
    pub fn outline(body: Bytes) -> Option<ChatResponse> {
        let outline: Outline<'_> = serde_json::from_slice(&body).ok()?;
        let object = outline.object.filter(|o| !o.is_empty())?;
        let created = outline.created.filter(|c| *c != 0)?;
        let model = outline.model.filter(|m| !m.is_empty())?;
        Some(ChatResponse {
            id: outline.id.into_owned(),
            object: object.into_owned(),
            created,
            model: model.into_owned(),
            choices: Vec::new(),
            usage: outline.usage,
            system_fingerprint: outline.system_fingerprint.map(Cow::into_owned),
            timings: outline.timings,
            extra: Extra::new(),
            verbatim: Some(body),
            outlined: true,
        })
    }

    /// The answer with its choices and unmodelled fields read: itself, or,
    /// for an outline, its bytes read whole. An outline whose choices fail
    /// to read (a shape the outline does not check) stays as it is.
    pub fn whole(&self) -> Cow<'_, ChatResponse> {
        if !self.outlined {
            return Cow::Borrowed(self);
        }
        let read = self
            .verbatim
            .as_ref()
            .and_then(|body| serde_json::from_slice::<ChatResponse>(body).ok());
        match read {
            Some(mut whole) => {
                whole.verbatim.clone_from(&self.verbatim);
                Cow::Owned(whole)
            }
            None => Cow::Borrowed(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Rivers run.","refusal":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12},"system_fingerprint":"fp","timings":{"prompt_n":9,"prompt_ms":3.0},"service_tier":"default"}"#;

    #[test]
    fn an_outline_reads_usage_and_timings_and_keeps_the_bytes() {
        let body = Bytes::from_static(ANSWER.as_bytes());
        let outline = ChatResponse::outline(body.clone()).unwrap();
        assert_eq!(outline.usage.as_ref().unwrap().completion_tokens, 3);
        assert_eq!(
            outline.timings.as_ref().unwrap().prompt_rate(),
            Some(3000.0)
        );
        assert_eq!(outline.verbatim, Some(body.clone()));
        assert!(outline.choices.is_empty());

        let whole = outline.whole();
        let read = serde_json::from_slice::<ChatResponse>(&body)
            .unwrap()
            .with_verbatim(body);
        assert_eq!(*whole, read);
        assert_eq!(whole.choices[0].message.text(), "Rivers run.");
    }

    #[test]
    fn what_is_not_plainly_a_chat_answer_is_not_outlined() {
        for body in [
            // Fields a re-encoding fills in.
            r#"{"id":"x","created":7,"model":"m","choices":[]}"#,
            r#"{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[]}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"choices":[]}"#,
            // Not chat answers.
            r#"{"error":{"message":"overloaded"}}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"model":"m"}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"model":"m","choices":[{"text":"hi"}]}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"model":"m","choices":[{"message":{"role":"robot"}}]}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"model":"m","choices":[],"usage":{"prompt_tokens":"many"}}"#,
            r#"{"id":"x","object":"chat.completion","created":7,"model":"m","choices":[]"#,
        ] {
            assert!(
                ChatResponse::outline(Bytes::from_static(body.as_bytes())).is_none(),
                "{body}"
            );
        }
    }

    #[test]
    fn an_outline_whose_choices_do_not_read_stays_an_outline() {
        let body = r#"{"id":"x","object":"chat.completion","created":7,"model":"m","choices":[{"message":{"role":"assistant","content":7}}]}"#;
        let outline = ChatResponse::outline(Bytes::from_static(body.as_bytes())).unwrap();
        assert!(outline.whole().choices.is_empty());
    }
}
