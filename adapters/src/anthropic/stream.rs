//! Canonical chat chunks -> the Anthropic event sequence: `message_start`,
//! `ping`, per block `content_block_start` / `content_block_delta` /
//! `content_block_stop`, then `message_delta` (stop reason, usage) and
//! `message_stop`.

use serde_json::{Value, json};

use super::from_chat::{finish_to_stop_reason, redacted_thinking, usage_from_chat};
use crate::types::ChatChunk;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text,
    Thinking,
    /// A tool-use block for the chat tool call with this index.
    Tool(u32),
}

/// Translates one streamed answer. Feed it every chunk, then `finish`.
#[derive(Debug)]
pub struct MessageStream {
    id: String,
    model: String,
    /// Prompt tokens estimated before the call, for `message_start` (the
    /// exact count arrives with `message_delta`).
    input_estimate: u64,
    started: bool,
    open: Option<(u32, Open)>,
    next_index: u32,
    stop_reason: Option<&'static str>,
    usage: Option<Value>,
}

/// An event: its name and data.
pub type Event = (&'static str, Value);

impl MessageStream {
    pub fn new(model: &str, input_estimate: u64) -> Self {
        MessageStream {
            id: String::new(),
            model: model.to_owned(),
            input_estimate,
            started: false,
            open: None,
            next_index: 0,
            stop_reason: None,
            usage: None,
        }
    }

    fn start(&mut self, chunk: &ChatChunk, events: &mut Vec<Event>) {
        if self.started {
            return;
        }
        self.started = true;
        self.id = format!("msg_{}", chunk.id);
        if !chunk.model.is_empty() {
            self.model.clone_from(&chunk.model);
        }
        events.push((
            "message_start",
            json!({"type": "message_start", "message": {
                "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.input_estimate, "output_tokens": 0}
            }}),
        ));
        events.push(("ping", json!({"type": "ping"})));
    }

    fn close(&mut self, events: &mut Vec<Event>) {
        if let Some((index, _)) = self.open.take() {
            events.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
    }

    /// The open thinking block's index, opening one if need be.
    fn thinking(&mut self, events: &mut Vec<Event>) -> u32 {
        self.ensure(
            Open::Thinking,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            events,
        )
    }

    /// Opens a block of `kind` unless it is the one open; returns its index.
    fn ensure(&mut self, kind: Open, block: Value, events: &mut Vec<Event>) -> u32 {
        if let Some((index, open)) = self.open
            && open == kind
        {
            return index;
        }
        self.close(events);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((index, kind));
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        index
    }

    pub fn on_chunk(&mut self, chunk: &ChatChunk) -> Vec<Event> {
        let mut events = Vec::new();
        self.start(chunk, &mut events);
        if let Some(usage) = &chunk.usage {
            self.usage = Some(json!(usage_from_chat(usage)));
        }
        // Anthropic answers have one choice.
        let Some(choice) = chunk.choices.iter().find(|c| c.index == 0) else {
            return events;
        };
        if let Some(thinking) = choice
            .delta
            .extra
            .get("reasoning_content")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
        {
            let index = self.thinking(&mut events);
            events.push(delta(
                index,
                json!({"type": "thinking_delta", "thinking": thinking}),
            ));
        }
        // The signature closes a thinking block: a client sends the block
        // back with it on its next turn, and the provider checks it.
        if let Some(signature) = choice.delta.extra.get("reasoning_signature") {
            let index = self.thinking(&mut events);
            events.push(delta(
                index,
                json!({"type": "signature_delta", "signature": signature}),
            ));
        }
        for data in redacted_thinking(&choice.delta.extra) {
            self.close(&mut events);
            let index = self.next_index;
            self.next_index += 1;
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": index,
                       "content_block": {"type": "redacted_thinking", "data": data}}),
            ));
            events.push((
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        if let Some(text) = choice.delta.content.as_deref().filter(|t| !t.is_empty()) {
            let index = self.ensure(Open::Text, json!({"type": "text", "text": ""}), &mut events);
            events.push(delta(index, json!({"type": "text_delta", "text": text})));
        }
        for call in choice.delta.tool_calls.iter().flatten() {
            let function = call.function.as_ref();
            let starts = call.id.is_some() || function.and_then(|f| f.name.as_ref()).is_some();
            let open_for_call = matches!(self.open, Some((_, Open::Tool(i))) if i == call.index);
            let index = if starts && !open_for_call {
                self.close(&mut events);
                let block = json!({
                    "type": "tool_use",
                    "id": call.id.clone().unwrap_or_default(),
                    "name": function.and_then(|f| f.name.clone()).unwrap_or_default(),
                    "input": {}
                });
                self.ensure(Open::Tool(call.index), block, &mut events)
            } else {
                match self.open {
                    Some((index, Open::Tool(i))) if i == call.index => index,
                    // Arguments for a call that is not open: nothing to attach them to.
                    _ => continue,
                }
            };
            if let Some(arguments) = function
                .and_then(|f| f.arguments.as_deref())
                .filter(|a| !a.is_empty())
            {
                events.push(delta(
                    index,
                    json!({"type": "input_json_delta", "partial_json": arguments}),
                ));
            }
        }
        if let Some(finish) = choice.finish_reason.as_deref() {
            self.stop_reason = Some(finish_to_stop_reason(finish));
        }
        events
    }

    /// Closes the answer: the last block, the stop reason and usage, the end.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        if !self.started {
            let empty = ChatChunk {
                id: "empty".into(),
                object: "chat.completion.chunk".into(),
                created: 0,
                model: String::new(),
                choices: Vec::new(),
                usage: None,
                system_fingerprint: None,
                timings: None,
                extra: Default::default(),
                verbatim: None,
                spec_fields_sent: false,
                usage_sent: false,
            };
            self.start(&empty, &mut events);
        }
        self.close(&mut events);
        let usage = self
            .usage
            .clone()
            .unwrap_or_else(|| json!({"output_tokens": 0}));
        events.push((
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": self.stop_reason.unwrap_or("end_turn"), "stop_sequence": null}, "usage": usage}),
        ));
        events.push(("message_stop", json!({"type": "message_stop"})));
        events
    }
}

fn delta(index: u32, delta: Value) -> Event {
    (
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(body: Value) -> ChatChunk {
        serde_json::from_value(body).unwrap()
    }

    fn names(events: &[Event]) -> Vec<&str> {
        events.iter().map(|(name, _)| *name).collect()
    }

    #[test]
    fn text_then_a_tool_call_make_two_blocks() {
        let mut stream = MessageStream::new("m", 10);
        let mut events = Vec::new();
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}))));
        events.extend(stream.on_chunk(&chunk(
            json!({"id": "c", "choices": [{"index": 0, "delta": {"content": "Let me check"}}]}),
        )));
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "t1", "type": "function", "function": {"name": "w", "arguments": ""}}]}}]}))));
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"a\":"}}]}}]}))));
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}}]}))));
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))));
        events.extend(stream.on_chunk(&chunk(json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}}))));
        events.extend(stream.finish());
        assert_eq!(
            names(&events),
            [
                "message_start",
                "ping",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        let json: String = events
            .iter()
            .filter_map(|(_, e)| e["delta"]["partial_json"].as_str())
            .collect();
        assert_eq!(json, "{\"a\":1}");
        let delta = &events[9].1;
        assert_eq!(delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(delta["usage"]["input_tokens"], 12);
        assert_eq!(delta["usage"]["output_tokens"], 7);
        assert_eq!(events[5].1["content_block"]["name"], "w");
    }

    #[test]
    fn an_empty_stream_is_still_a_whole_message() {
        let events = MessageStream::new("m", 3).finish();
        assert_eq!(
            names(&events),
            ["message_start", "ping", "message_delta", "message_stop"]
        );
    }
}
