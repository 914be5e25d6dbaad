//! Fields OpenAI's spec requires on a chat answer that OpenAI-compatible
//! servers (llama.cpp, vLLM, the simulator) and translated answers leave
//! out: `logprobs` on every choice, `refusal` on every message and on every
//! logprobs object, each `null` when there is no value. Clients generated
//! from the spec (Java, .NET and others) reject an answer without them.
//! Only what is missing is added: what the backend sent stays as it sent it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use memchr::memmem::Finder;

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

use super::Message;

/// Writes an answer's message with `refusal: null` unless it has one.
pub(super) fn message_with_refusal<S: Serializer>(
    message: &Message,
    out: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct WithRefusal<'a> {
        #[serde(flatten)]
        message: &'a Message,
        refusal: Option<()>,
    }
    if message.extra.contains_key("refusal") {
        message.serialize(out)
    } else {
        WithRefusal {
            message,
            refusal: None,
        }
        .serialize(out)
    }
}

/// Writes a choice's logprobs (`null` when none) with `refusal: null` in
/// the object unless it has one.
pub(super) fn logprobs_with_refusal<S: Serializer>(
    logprobs: &Option<Value>,
    out: S,
) -> Result<S::Ok, S::Error> {
    match logprobs {
        Some(Value::Object(fields)) if !fields.contains_key("refusal") => {
            let mut map = out.serialize_map(Some(fields.len() + 1))?;
            for (name, value) in fields {
                map.serialize_entry(name, value)?;
            }
            map.serialize_entry("refusal", &Value::Null)?;
            map.end()
        }
        other => other.serialize(out),
    }
}

/// A chat answer's body with the missing required fields spliced in, every
/// byte the backend sent kept as it was; `None` when nothing is missing (or
/// the body is not a chat answer this can read).
pub fn fill_chat_answer(body: &[u8]) -> Option<Vec<u8>> {
    #[derive(serde::Deserialize)]
    struct Answer<'a> {
        #[serde(borrow, default)]
        choices: Vec<&'a RawValue>,
    }
    type Fields<'a> = BTreeMap<Cow<'a, str>, &'a RawValue>;
    let answer: Answer<'_> = serde_json::from_slice(body).ok()?;
    let mut inserts: Vec<(usize, &str)> = Vec::new();
    // Inserted right after the object's opening brace (with no comma when
    // the object is empty).
    let mut add_unless =
        |object: &RawValue, fields: &Fields<'_>, name: &str, text: &'static str| {
            if !fields.contains_key(name) {
                let at = object.get().as_ptr() as usize - body.as_ptr() as usize + 1;
                let text = if fields.is_empty() {
                    text.trim_end_matches(',')
                } else {
                    text
                };
                inserts.push((at, text));
            }
        };
    for choice in &answer.choices {
        let fields: Fields<'_> = serde_json::from_str(choice.get()).ok()?;
        add_unless(choice, &fields, "logprobs", r#""logprobs":null,"#);
        if let Some(message) = fields.get("message") {
            let message_fields: Fields<'_> = serde_json::from_str(message.get()).ok()?;
            add_unless(message, &message_fields, "refusal", r#""refusal":null,"#);
        }
        if let Some(logprobs) = fields.get("logprobs").filter(|l| l.get().starts_with('{')) {
            let logprob_fields: Fields<'_> = serde_json::from_str(logprobs.get()).ok()?;
            add_unless(logprobs, &logprob_fields, "refusal", r#""refusal":null,"#);
        }
    }
    if inserts.is_empty() {
        return None;
    }
    inserts.sort_unstable();
    let mut filled = Vec::with_capacity(body.len() + inserts.len() * 16);
    let mut from = 0;
    for (at, text) in inserts {
        filled.extend_from_slice(&body[from..at]);
        filled.extend_from_slice(text.as_bytes());
        from = at;
    }
    filled.extend_from_slice(&body[from..]);
    Some(filled)
}

/// How many times `key` (a name with its quotes) is an object key in a
/// JSON body: followed, past any whitespace, by a colon. Inside a string
/// the name's quotes would be escaped, and a value is never followed by a
/// colon, so only keys count.
pub(super) fn keys_found(body: &[u8], key: &Finder<'_>) -> usize {
    // memchr's search, not `str::match_indices`: on a short answer the
    // standard library's two-way search cost about 2,400 instructions per
    // request (callgrind), most of what this check costs. The body is the
    // one just read as JSON, so it is UTF-8 and needs no second check.
    let length = key.needle().len();
    key.find_iter(body)
        .filter(|at| {
            let after = &body[at + length..];
            after.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b':')
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_fields_are_spliced_in_and_every_sent_byte_kept() {
        let body = br#"{"id":"x", "choices": [ {"index":0,"message": {"role":"assistant","content":"1.50000"},"finish_reason":"stop"},
            {"index":1, "logprobs": {"content": []}, "message": {"role":"assistant","content":"hi","refusal":"no"}}]}"#;
        let filled = String::from_utf8(fill_chat_answer(body).unwrap()).unwrap();
        assert_eq!(
            filled,
            r#"{"id":"x", "choices": [ {"logprobs":null,"index":0,"message": {"refusal":null,"role":"assistant","content":"1.50000"},"finish_reason":"stop"},
            {"index":1, "logprobs": {"refusal":null,"content": []}, "message": {"role":"assistant","content":"hi","refusal":"no"}}]}"#
        );
        let parsed: Value = serde_json::from_str(&filled).unwrap();
        assert_eq!(parsed["choices"][1]["message"]["refusal"], "no");
    }

    #[test]
    fn keys_are_counted_and_values_are_not() {
        let body = br#"{"choices":[{"logprobs" : null,"message":{"content":"logprobs"}},{"logprobs":null}],"x":"\"logprobs\": 1"}"#;
        assert_eq!(keys_found(body, &Finder::new(br#""logprobs""#)), 2);
        assert_eq!(keys_found(b"{}", &Finder::new(br#""logprobs""#)), 0);
    }

    #[test]
    fn empty_objects_stay_valid_json() {
        let body = br#"{"choices":[{"message": { }, "logprobs": {}}]}"#;
        let filled = fill_chat_answer(body).unwrap();
        let parsed: Value = serde_json::from_slice(&filled).unwrap();
        assert_eq!(
            parsed["choices"][0]["message"],
            serde_json::json!({"refusal": null})
        );
        assert_eq!(
            parsed["choices"][0]["logprobs"],
            serde_json::json!({"refusal": null})
        );
        let bare = fill_chat_answer(br#"{"choices":[{}]}"#).unwrap();
        assert_eq!(bare, br#"{"choices":[{"logprobs":null}]}"#);
    }

    #[test]
    fn a_complete_answer_is_left_alone() {
        let body = br#"{"choices":[{"logprobs":null,"message":{"refusal":null,"content":"a"}}]}"#;
        assert_eq!(fill_chat_answer(body), None);
        assert_eq!(fill_chat_answer(b"not json"), None);
        // Escaped keys are read as the names they spell.
        let escaped = br#"{"choices":[{"logprob\u0073":null,"message":{"refusal":null}}]}"#;
        assert_eq!(fill_chat_answer(escaped), None);
    }
}
