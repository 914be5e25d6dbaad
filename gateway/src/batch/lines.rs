//! A batch's input file read into lines: each a request for the batch's
//! endpoint, or, for a line that cannot be one, its entry for the error
//! file (the line fails alone; the batch goes on).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::batch::new_id;
use crate::batch::store::Line;

/// Why a whole input file cannot be a batch.
pub enum Unreadable {
    NotText,
    TooManyLines { max: usize },
    Empty,
}

impl Unreadable {
    /// The batch's `errors`, in the API's shape.
    pub fn errors(&self) -> Value {
        let (code, message) = match self {
            Unreadable::NotText => (
                "invalid_file",
                "the input file is not UTF-8 text".to_owned(),
            ),
            Unreadable::TooManyLines { max } => (
                "too_many_requests",
                format!("the input file has more than {max} lines"),
            ),
            Unreadable::Empty => ("empty_file", "the input file has no lines".to_owned()),
        };
        json!({"object": "list", "data": [{"code": code, "message": message, "param": null, "line": null}]})
    }
}

/// The file's lines for a batch on `endpoint` (`/v1/chat/completions`).
pub fn read(content: &[u8], endpoint: &str, max: usize) -> Result<Vec<Line>, Unreadable> {
    let text = std::str::from_utf8(content).map_err(|_| Unreadable::NotText)?;
    let mut seen = HashSet::new();
    let mut lines = Vec::new();
    for (at, text) in text.lines().enumerate() {
        if text.trim().is_empty() {
            continue;
        }
        if lines.len() == max {
            return Err(Unreadable::TooManyLines { max });
        }
        let number = at as u64 + 1;
        lines.push(match request(text, endpoint) {
            Ok((custom_id, body)) if seen.insert(custom_id.clone()) => Line {
                line: number,
                custom_id: Some(custom_id),
                body: Some(body.to_string()),
                state: "pending",
                result: None,
            },
            Ok((custom_id, _)) => failed(
                number,
                Some(custom_id),
                "duplicate_custom_id",
                "another line has this custom_id".into(),
            ),
            Err((custom_id, why)) => failed(number, custom_id, "invalid_request", why),
        });
    }
    if lines.is_empty() {
        return Err(Unreadable::Empty);
    }
    Ok(lines)
}

/// A line's `custom_id` and request body, or why it is not a request.
fn request(text: &str, endpoint: &str) -> Result<(String, Value), (Option<String>, String)> {
    let Ok(Value::Object(mut line)) = serde_json::from_str::<Value>(text) else {
        return Err((None, "the line is not a JSON object".into()));
    };
    let custom_id = match line.remove("custom_id") {
        Some(Value::String(id)) if !id.is_empty() => id,
        _ => return Err((None, "`custom_id` must be a non-empty string".into())),
    };
    let fail = |why: String| Err((Some(custom_id.clone()), why));
    if line.get("method").and_then(Value::as_str) != Some("POST") {
        return fail("`method` must be \"POST\"".into());
    }
    let url = line.get("url").and_then(Value::as_str).unwrap_or_default();
    if url != endpoint {
        return fail(format!(
            "`url` must be the batch's endpoint, {endpoint}, not `{url}`"
        ));
    }
    match line.remove("body") {
        Some(body @ Value::Object(_)) if body.get("stream") == Some(&json!(true)) => {
            let _ = body;
            fail("a batch line cannot stream (`stream: true`)".into())
        }
        Some(body @ Value::Object(_)) => Ok((custom_id, body)),
        _ => fail("`body` must be a JSON object".into()),
    }
}

/// A line failed before it ran: its error file entry.
fn failed(line: u64, custom_id: Option<String>, code: &str, message: String) -> Line {
    Line {
        line,
        result: Some(
            json!({
                "id": new_id("batch_req_"), "custom_id": custom_id, "response": null,
                "error": {"code": code, "message": message, "line": line},
            })
            .to_string(),
        ),
        custom_id,
        body: None,
        state: "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_lines_fail_alone() {
        let file = concat!(
            r#"{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}"#,
            "\n",
            "not json\n",
            "\n",
            r#"{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}"#,
            "\n",
            r#"{"custom_id": "b", "method": "POST", "url": "/v1/embeddings", "body": {"model": "m"}}"#,
            "\n",
            r#"{"custom_id": "c", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m", "stream": true}}"#,
            "\n",
        );
        let lines = read(file.as_bytes(), "/v1/chat/completions", 10)
            .ok()
            .unwrap();
        let states: Vec<(u64, &str)> = lines.iter().map(|l| (l.line, l.state)).collect();
        assert_eq!(
            states,
            [
                (1, "pending"),
                (2, "failed"),
                (4, "failed"),
                (5, "failed"),
                (6, "failed")
            ]
        );
        let error: Value = serde_json::from_str(lines[2].result.as_deref().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], "duplicate_custom_id");
        assert_eq!(error["error"]["line"], 4);
        assert!(matches!(
            read(b"", "/v1/chat/completions", 10),
            Err(Unreadable::Empty)
        ));
        assert!(matches!(
            read(file.as_bytes(), "/v1/chat/completions", 2),
            Err(Unreadable::TooManyLines { .. })
        ));
    }
}
