//! Canonical chat chunks -> the Responses event stream: `response.created`,
//! output items and their deltas, `response.completed`.

use serde_json::{Value, json};

use super::Echo;
use super::from_chat::{call_item, envelope, message_item, output_text, usage};
use crate::types::{ChatChunk, Usage};

#[derive(Debug)]
struct Call {
    item_id: String,
    call_id: String,
    name: String,
    arguments: String,
    output_index: usize,
}

/// Translates one streamed answer. Feed it every chunk, then `finish`.
#[derive(Debug, Default)]
pub struct ResponseStream {
    id: String,
    model: String,
    created: u64,
    started: bool,
    sequence: u64,
    /// The message item: its output index and the text so far.
    text: Option<(usize, String)>,
    calls: Vec<Call>,
    next_output: usize,
    length_cut: bool,
    usage: Option<Usage>,
    echo: Echo,
}

pub type Event = (&'static str, Value);

impl ResponseStream {
    /// `echo`: what the answer repeats of the request it answers.
    pub fn new(model: &str, echo: Echo) -> Self {
        ResponseStream {
            model: model.to_owned(),
            echo,
            ..Self::default()
        }
    }

    fn event(&mut self, name: &'static str, mut data: Value) -> Event {
        data["type"] = json!(name);
        data["sequence_number"] = json!(self.sequence);
        self.sequence += 1;
        (name, data)
    }

    fn message_id(&self) -> String {
        format!("msg_{}", self.id)
    }

    fn start(&mut self, chunk: &ChatChunk, events: &mut Vec<Event>) {
        if self.started {
            return;
        }
        self.started = true;
        self.id.clone_from(&chunk.id);
        self.created = chunk.created;
        if !chunk.model.is_empty() {
            self.model.clone_from(&chunk.model);
        }
        let response = envelope(
            &format!("resp_{}", self.id),
            &self.model,
            self.created,
            "in_progress",
            Vec::new(),
            None,
            &self.echo,
        );
        let created = self.event("response.created", json!({"response": response}));
        let in_progress = self.event("response.in_progress", json!({"response": response}));
        events.extend([created, in_progress]);
    }

    pub fn on_chunk(&mut self, chunk: &ChatChunk) -> Vec<Event> {
        let mut events = Vec::new();
        self.start(chunk, &mut events);
        if let Some(usage) = &chunk.usage {
            self.usage = Some(Usage::clone(usage));
        }
        let Some(choice) = chunk.choices.iter().find(|c| c.index == 0) else {
            return events;
        };
        if let Some(delta) = choice.delta.content.as_deref().filter(|t| !t.is_empty()) {
            if self.text.is_none() {
                let index = self.next_output;
                self.next_output += 1;
                self.text = Some((index, String::new()));
                let item = json!({"type": "message", "id": self.message_id(), "status": "in_progress", "role": "assistant", "content": []});
                let added = self.event(
                    "response.output_item.added",
                    json!({"output_index": index, "item": item}),
                );
                let part = self.event(
                    "response.content_part.added",
                    json!({"item_id": self.message_id(), "output_index": index, "content_index": 0, "part": output_text("")}),
                );
                events.extend([added, part]);
            }
            if let Some((index, text)) = self.text.as_mut() {
                text.push_str(delta);
                let index = *index;
                let data = json!({"item_id": self.message_id(), "output_index": index, "content_index": 0, "delta": delta, "logprobs": []});
                events.push(self.event("response.output_text.delta", data));
            }
        }
        for call in choice.delta.tool_calls.iter().flatten() {
            let position = call.index as usize;
            let function = call.function.as_ref();
            if position >= self.calls.len() {
                let call_id = call.id.clone().unwrap_or_default();
                let name = function.and_then(|f| f.name.clone()).unwrap_or_default();
                let output_index = self.next_output;
                self.next_output += 1;
                let item_id = format!("fc_{call_id}");
                let item = call_item(&self.echo, (&item_id, &call_id), &name, "", "in_progress");
                events.push(self.event(
                    "response.output_item.added",
                    json!({"output_index": output_index, "item": item}),
                ));
                self.calls.push(Call {
                    item_id,
                    call_id,
                    name,
                    arguments: String::new(),
                    output_index,
                });
            }
            if let Some(fragment) = function
                .and_then(|f| f.arguments.as_deref())
                .filter(|a| !a.is_empty())
                && let Some(open) = self.calls.get_mut(position)
            {
                open.arguments.push_str(fragment);
                let data = json!({"item_id": open.item_id, "output_index": open.output_index, "delta": fragment});
                events.push(self.event("response.function_call_arguments.delta", data));
            }
        }
        if choice.finish_reason.as_deref() == Some("length") {
            self.length_cut = true;
        }
        events
    }

    /// The `error` event that ends a stream whose backend failed; `error`
    /// is the OpenAI error object (`code`, `message`, `param`).
    pub fn error(&mut self, error: &Value) -> Event {
        let data =
            json!({"code": error["code"], "message": error["message"], "param": error["param"]});
        self.event("error", data)
    }

    /// Closes every item and the response.
    pub fn finish(&mut self) -> Vec<Event> {
        let mut events = Vec::new();
        let mut output: Vec<(usize, Value)> = Vec::new();
        let status = if self.length_cut {
            "incomplete"
        } else {
            "completed"
        };
        if let Some((index, text)) = self.text.take() {
            let id = self.message_id();
            let part = output_text(&text);
            let done = self.event("response.output_text.done", json!({"item_id": id, "output_index": index, "content_index": 0, "text": text, "logprobs": []}));
            let part_done = self.event(
                "response.content_part.done",
                json!({"item_id": id, "output_index": index, "content_index": 0, "part": part}),
            );
            let item = message_item(&id, &text, status);
            let item_done = self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            );
            events.extend([done, part_done, item_done]);
            output.push((index, item));
        }
        for call in std::mem::take(&mut self.calls) {
            let (_, name) = self.echo.called(&call.name);
            let data = json!({"item_id": call.item_id, "output_index": call.output_index, "name": name, "arguments": call.arguments});
            let args_done = self.event("response.function_call_arguments.done", data);
            let item = call_item(
                &self.echo,
                (&call.item_id, &call.call_id),
                &call.name,
                &call.arguments,
                "completed",
            );
            let item_done = self.event(
                "response.output_item.done",
                json!({"output_index": call.output_index, "item": item}),
            );
            events.extend([args_done, item_done]);
            output.push((call.output_index, item));
        }
        output.sort_by_key(|(i, _)| *i);
        let mut response = envelope(
            &format!("resp_{}", self.id),
            &self.model,
            self.created,
            status,
            output.into_iter().map(|(_, item)| item).collect(),
            Some(usage(self.usage.as_ref())),
            &self.echo,
        );
        let name = if self.length_cut {
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
            "response.incomplete"
        } else {
            "response.completed"
        };
        events.push(self.event(name, json!({"response": response})));
        events
    }
}
