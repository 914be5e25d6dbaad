//! Deterministic simulated output: reply words, tool calls built from the
//! tools' JSON schemas, and logprobs. Same seed and prompt, same output.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use crate::types::{FunctionCall, Tool, ToolCall};

/// Words that are one cl100k token each with their leading space, so a reply
/// of N pieces is N tokens (a test checks this).
const WORDS: &[&str] = &[
    " the",
    " model",
    " token",
    " route",
    " cache",
    " local",
    " cloud",
    " prompt",
    " answer",
    " fast",
    " slow",
    " queue",
    " reply",
    " budget",
    " time",
    " first",
    " simulated",
    " data",
    " text",
    " and",
    " of",
    " to",
    " is",
    " a",
    " in",
    " for",
    " with",
    " this",
    " that",
    " on",
    " as",
    " it",
    " be",
    " by",
    " at",
    " from",
    " we",
    " will",
    " can",
    " more",
    " each",
    " when",
];

/// Opening pieces of every reply, so no one mistakes it for a model's words.
const PREAMBLE: &[&str] = &["[", "sim", "]"];

/// What one choice says.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// Text pieces, one token each.
    pub pieces: Vec<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: &'static str,
    pub completion_tokens: usize,
}

impl Generated {
    /// Text and no tool calls, a token a piece.
    fn text_only(pieces: Vec<String>, finish_reason: &'static str) -> Self {
        Generated {
            completion_tokens: pieces.len(),
            pieces,
            tool_calls: Vec::new(),
            finish_reason,
        }
    }

    pub fn text(&self) -> String {
        self.pieces.concat()
    }

    /// Ends the text where the first of `stops` begins, as the API does:
    /// the stop sequence itself is not returned, the finish reason is
    /// `stop`, and the tokens up to it are the ones counted.
    pub fn stop_at(&mut self, stops: &[String]) {
        let text = self.text();
        let Some(end) = stops
            .iter()
            .filter(|s| !s.is_empty())
            .filter_map(|s| text.find(s.as_str()))
            .min()
        else {
            return;
        };
        let mut kept = 0;
        let mut pieces = Vec::new();
        for piece in self.pieces.drain(..) {
            if kept + piece.len() <= end {
                kept += piece.len();
                pieces.push(piece);
                continue;
            }
            // The piece the stop sequence begins in: its part before it
            // is text, and the token was generated, so it counts.
            let before = &piece[..end - kept];
            if !before.is_empty() {
                pieces.push(before.to_owned());
            }
            self.completion_tokens = pieces.len() + usize::from(before.is_empty());
            break;
        }
        self.pieces = pieces;
        self.finish_reason = "stop";
    }
}

/// A request's stop sequences, as the API takes them: a string or a list of
/// strings.
pub fn stop_sequences(stop: Option<&Value>) -> Vec<String> {
    match stop {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// A seed for one choice: the backend's seed, the request's `seed`, the
/// prompt text and the choice index all feed it.
pub fn choice_seed(backend_seed: u64, req_seed: Option<i64>, prompt: &str, index: u32) -> u64 {
    // FNV-1a: stable across runs and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ backend_seed;
    let mut mix = |bytes: &[u8]| {
        for &b in bytes {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    mix(&req_seed.unwrap_or(0).to_le_bytes());
    mix(prompt.as_bytes());
    mix(&index.to_le_bytes());
    hash
}

/// A reply of about `natural` tokens, cut at `limit` (finish reason `length`).
pub fn text_reply(seed: u64, natural_max: u32, limit: Option<u32>, json_mode: bool) -> Generated {
    let mut rng = StdRng::seed_from_u64(seed);
    let natural = rng.random_range(natural_max.min(12)..=natural_max) as usize;
    let (len, finish_reason) = match limit {
        Some(limit) if (limit as usize) < natural => (limit as usize, "length"),
        _ => (natural, "stop"),
    };
    let mut pieces: Vec<String> = Vec::with_capacity(len);
    if json_mode {
        pieces.extend(
            [
                "{\"", "sim", "ulated", "\":", " true", ",", " \"", "text", "\":", " \"",
            ]
            .map(String::from),
        );
    } else {
        pieces.extend(PREAMBLE.iter().map(|p| (*p).to_owned()));
    }
    let closing = usize::from(json_mode);
    for _ in 0..len.saturating_sub(pieces.len() + closing) {
        pieces.push(WORDS[rng.random_range(0..WORDS.len())].to_owned());
    }
    if json_mode {
        pieces.push("\"}".to_owned());
    }
    pieces.truncate(len.max(1));
    Generated::text_only(pieces, finish_reason)
}

/// A reply that is JSON valid against `schema` (a `json_schema` response
/// format, or Responses' `text.format`), cut at `limit` tokens (finish
/// reason `length`, and then, as with a real model, not valid JSON).
pub fn schema_reply(seed: u64, schema: &Value, limit: Option<u32>) -> Generated {
    let mut rng = StdRng::seed_from_u64(seed);
    let value = value_in(schema, schema, &mut rng, &mut Budget::new());
    let mut pieces = crate::tokens::pieces(&value.to_string());
    let finish_reason = match limit {
        Some(limit) if (limit as usize) < pieces.len() => {
            pieces.truncate((limit as usize).max(1));
            "length"
        }
        _ => "stop",
    };
    Generated::text_only(pieces, finish_reason)
}

/// Calls to `tools` with arguments that satisfy their schemas.
pub fn tool_calls(seed: u64, tools: &[&Tool]) -> Vec<ToolCall> {
    let mut rng = StdRng::seed_from_u64(seed);
    tools
        .iter()
        .map(|tool| {
            let args = tool
                .function
                .parameters
                .as_ref()
                .map(|s| value_in(s, s, &mut rng, &mut Budget::new()))
                .unwrap_or_else(|| json!({}));
            ToolCall {
                id: format!("call_{:016x}", rng.random::<u64>()),
                kind: "function".to_owned(),
                function: FunctionCall {
                    name: tool.function.name.clone(),
                    arguments: args.to_string(),
                    extra: Default::default(),
                },
                extra: Default::default(),
            }
        })
        .collect()
}

/// Schemas nested deeper than this get `null`: a recursive schema (a tree
/// node holding nodes) must end somewhere.
const MAX_DEPTH: usize = 12;
/// The schema comes from the caller, so what it may make the simulator
/// build is bounded: values in all, characters of a string, items of an
/// array.
const MAX_VALUES: usize = 10_000;
const MAX_STRING: u64 = 4096;
const MAX_ITEMS: u64 = 64;

/// Values still to be made for one answer, and the nesting reached.
struct Budget {
    left: usize,
    depth: usize,
}

impl Budget {
    fn new() -> Self {
        Budget {
            left: MAX_VALUES,
            depth: 0,
        }
    }

    /// Takes one value from the budget; false when it is spent.
    fn take(&mut self) -> bool {
        self.left = self.left.saturating_sub(1);
        self.left > 0
    }
}

/// A value valid against `schema`, whose `$ref`s point into `root`: the
/// first `enum` or `const` value; objects with every property; arrays of
/// `minItems` items (at least one); strings of `minLength` or more; the
/// first branch of `anyOf`/`oneOf` (the first non-null one for an optional
/// field, as pydantic writes them); `allOf` merged.
fn value_in(schema: &Value, root: &Value, rng: &mut StdRng, budget: &mut Budget) -> Value {
    if !budget.take() {
        return Value::Null;
    }
    let depth = budget.depth;
    budget.depth += 1;
    let value = value_at(schema, root, rng, budget, depth);
    budget.depth -= 1;
    value
}

fn value_at(
    schema: &Value,
    root: &Value,
    rng: &mut StdRng,
    budget: &mut Budget,
    depth: usize,
) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        // `#/$defs/Name` (or `#/definitions/Name`): a JSON pointer into the root.
        let target = reference
            .strip_prefix('#')
            .and_then(|pointer| root.pointer(pointer))
            .unwrap_or(&Value::Null);
        return value_in(target, root, rng, budget);
    }
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            let branch = branches
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .or(branches.first());
            return branch.map_or(Value::Null, |b| value_in(b, root, rng, budget));
        }
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        let mut merged = Map::new();
        for part in parts {
            if let Value::Object(fields) = value_in(part, root, rng, budget) {
                merged.extend(fields);
            }
        }
        return Value::Object(merged);
    }
    let kind = match schema.get("type") {
        // `["string", "null"]`: the first type that is not null.
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .or(Some("null")),
        Some(kind) => kind.as_str(),
        None => None,
    };
    match kind {
        Some("object") | None => {
            let mut out = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), value_in(sub, root, rng, budget));
                }
            }
            Value::Object(out)
        }
        Some("string") => {
            let mut text = format!("sim-{}", WORDS[rng.random_range(0..WORDS.len())].trim());
            // Bounded: the schema is the caller's.
            let min = schema
                .get("minLength")
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(MAX_STRING) as usize;
            while text.len() < min {
                text.push('x');
            }
            if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
                text.truncate(max as usize);
            }
            Value::String(text)
        }
        Some("integer") => json!(bounded(schema, rng.random_range(1..100) as f64).round() as i64),
        Some("number") => json!(bounded(schema, f64::from(rng.random_range(1..1000)) / 10.0)),
        Some("boolean") => json!(true),
        Some("array") => {
            let count = schema
                .get("minItems")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, MAX_ITEMS);
            let count = schema
                .get("maxItems")
                .and_then(Value::as_u64)
                .map_or(count, |max| count.min(max));
            let items = schema.get("items").unwrap_or(&Value::Null);
            Value::Array(
                (0..count)
                    .map(|_| value_in(items, root, rng, budget))
                    .collect(),
            )
        }
        _ => Value::Null,
    }
}

/// `value` moved inside the schema's `minimum` and `maximum`.
fn bounded(schema: &Value, value: f64) -> f64 {
    let min = schema
        .get("minimum")
        .and_then(Value::as_f64)
        .unwrap_or(f64::MIN);
    let max = schema
        .get("maximum")
        .and_then(Value::as_f64)
        .unwrap_or(f64::MAX);
    value.clamp(min, max.max(min))
}

/// OpenAI-shaped logprobs for the pieces:
/// `{"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}`.
pub fn logprobs(seed: u64, pieces: &[String], top: u32) -> Value {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    let content: Vec<Value> = pieces
        .iter()
        .map(|piece| {
            let logprob = -rng.random_range(0.0..2.0_f64);
            let alternatives: Vec<Value> = (0..top)
                .map(|i| {
                    let alt = WORDS[rng.random_range(0..WORDS.len())];
                    json!({"token": alt, "logprob": logprob - 1.0 - f64::from(i), "bytes": alt.as_bytes()})
                })
                .collect();
            json!({"token": piece, "logprob": logprob, "bytes": piece.as_bytes(), "top_logprobs": alternatives})
        })
        .collect();
    json!({ "content": content, "refusal": null })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens;

    #[test]
    fn text_ends_before_the_first_stop_sequence() {
        let mut generated = text_reply(5, 40, None, false);
        let whole = generated.text();
        let word = generated.pieces[4].clone();
        let at = whole.find(&word).unwrap();
        generated.stop_at(&["never said".to_owned(), word.clone()]);
        assert_eq!(generated.text(), whole[..at]);
        assert_eq!(generated.finish_reason, "stop");
        assert!(
            generated.completion_tokens <= 5,
            "{}",
            generated.completion_tokens
        );
        // A stop that falls inside a token keeps that token's part before it.
        let mut generated =
            Generated::text_only(vec!["ab".into(), "cd".into(), "ef".into()], "length");
        generated.stop_at(&["de".to_owned()]);
        assert_eq!(generated.pieces, ["ab", "c"]);
        assert_eq!(
            (generated.completion_tokens, generated.finish_reason),
            (2, "stop")
        );
        assert_eq!(stop_sequences(Some(&json!(["a", 1, "b"]))), ["a", "b"]);
        assert_eq!(stop_sequences(Some(&json!("x"))), ["x"]);
    }

    #[test]
    fn every_piece_is_one_token() {
        for word in WORDS.iter().chain(PREAMBLE) {
            assert_eq!(tokens::count(word), 1, "{word:?}");
        }
    }

    #[test]
    fn replies_are_deterministic_and_respect_limits() {
        let a = text_reply(7, 40, None, false);
        assert_eq!(a, text_reply(7, 40, None, false));
        assert!(a.text().starts_with("[sim]"));
        assert_eq!(a.finish_reason, "stop");
        let cut = text_reply(7, 40, Some(5), false);
        assert_eq!(cut.completion_tokens, 5);
        assert_eq!(cut.finish_reason, "length");
        assert_eq!(tokens::count(&a.text()), a.completion_tokens);
    }

    #[test]
    fn json_mode_replies_parse() {
        let reply = text_reply(3, 40, None, true);
        let parsed: Value = serde_json::from_str(&reply.text()).unwrap();
        assert_eq!(parsed["simulated"], true);
    }

    #[test]
    fn schema_replies_follow_the_schema_as_pydantic_writes_it() {
        // A pydantic model with a nested model ($defs), an optional field
        // (anyOf with null), a list with a minimum and a bounded number.
        let schema = json!({
            "$defs": {"Address": {"type": "object", "properties": {"city": {"type": "string"}},
                "required": ["city"], "additionalProperties": false}},
            "type": "object", "additionalProperties": false,
            "required": ["name", "address", "nickname", "tags", "score", "kind"],
            "properties": {
                "name": {"type": "string", "minLength": 12},
                "address": {"$ref": "#/$defs/Address"},
                "nickname": {"anyOf": [{"type": "null"}, {"type": "string"}]},
                "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "score": {"type": "number", "minimum": 0, "maximum": 1},
                "kind": {"const": "person"}
            }
        });
        let reply = schema_reply(5, &schema, None);
        assert_eq!(reply.finish_reason, "stop");
        assert_eq!(tokens::count(&reply.text()), reply.completion_tokens);
        let value: Value = serde_json::from_str(&reply.text()).unwrap();
        assert!(value["name"].as_str().unwrap().len() >= 12);
        assert!(value["address"]["city"].is_string());
        assert!(value["nickname"].is_string());
        assert_eq!(value["tags"].as_array().unwrap().len(), 2);
        assert!((0.0..=1.0).contains(&value["score"].as_f64().unwrap()));
        assert_eq!(value["kind"], "person");
        let cut = schema_reply(5, &schema, Some(3));
        assert_eq!((cut.finish_reason, cut.completion_tokens), ("length", 3));
    }

    #[test]
    fn a_hostile_schema_costs_bounded_work() {
        // Huge minimums, and a node whose hundred fields each hold the node
        // again: without bounds, memory and time without end.
        let fields: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("f{i}"), json!({"$ref": "#"})))
            .collect();
        let schema = json!({"type": "object", "properties": fields,
            "additionalProperties": {"type": "string", "minLength": 1_000_000_000_000u64}});
        let reply = schema_reply(1, &schema, None);
        assert!(reply.text().len() < 1 << 20, "{} bytes", reply.text().len());
        let long = json!({"type": "array", "minItems": 4_000_000_000u64, "items": {"type": "string", "minLength": 1_000_000_000_000u64}});
        let reply = schema_reply(1, &long, None);
        assert!(reply.text().len() < 1 << 20, "{} bytes", reply.text().len());
    }

    #[test]
    fn tool_arguments_follow_the_schema() {
        let tool: Tool = serde_json::from_value(json!({"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}, "days": {"type": "integer"}}}}}))
        .unwrap();
        let calls = tool_calls(1, &[&tool]);
        let args: Value = serde_json::from_str(&calls[0].function.arguments).unwrap();
        assert_eq!(args["unit"], "c");
        assert!(args["city"].as_str().unwrap().starts_with("sim-"));
        assert!(args["days"].is_i64());
    }
}
