//! The texts a model reads and writes, field by field: what the gateway
//! scans for sensitive data, masks before a call leaves for the cloud, and
//! restores in the answer. Each walk visits every text field a backend is
//! sent or sends back (messages and their parts, tool results, tool
//! calls' arguments, earlier reasoning, tool descriptions, the caller's
//! `user`, completion prompts, embedding inputs), in order.

use serde_json::Value;

use super::{
    ChatChunk, ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, Content,
    EmbeddingRequest, FunctionCallDelta, Message, ToolCallDelta,
};

/// A request's prompt texts.
pub trait PromptTexts {
    /// Each text, in the order a model reads them.
    fn prompt_texts(&self) -> Vec<&str>;
    /// The same texts, in the same order, to rewrite.
    fn prompt_texts_mut(&mut self, f: &mut dyn FnMut(&mut String));
}

/// A whole answer's generated texts, to rewrite.
pub trait OutputTexts {
    fn output_texts_mut(&mut self, f: &mut dyn FnMut(&mut String));
}

/// A streamed chunk's generated text fields, each named by a slot (its
/// choice and field, see [`slot`]) so a rewrite can carry text over from
/// one chunk's field to the same field in the next.
pub trait ChunkTexts {
    fn output_fields_mut(&mut self, f: &mut dyn FnMut(u64, &mut String));
    /// Choices this chunk ends (it carries their finish reason).
    fn ended_choices(&self) -> Vec<u32>;
    /// Appends `text` to the field `slot` names, adding the field.
    fn append_output(&mut self, slot: u64, text: &str);
}

/// The slot of a choice's field: 0 its content, `1 + i` tool call `i`'s
/// arguments.
pub fn slot(choice: u32, field: u32) -> u64 {
    (u64::from(choice) << 32) | u64::from(field)
}

/// The choice a slot belongs to.
pub fn slot_choice(slot: u64) -> u32 {
    u32::try_from(slot >> 32).unwrap_or(u32::MAX)
}

/// Text a message carries beside its content: a model's earlier reasoning
/// (`reasoning_content`, as this crate puts Anthropic's thinking;
/// `reasoning`), and a refusal.
const MESSAGE_TEXT_FIELDS: [&str; 3] = ["reasoning_content", "reasoning", "refusal"];

fn message_texts<'a>(message: &'a Message, out: &mut Vec<&'a str>) {
    match &message.content {
        Some(Content::Text(text)) => out.push(text),
        Some(Content::Parts(parts)) => out.extend(parts.iter().filter_map(|p| p.text.as_deref())),
        None => {}
    }
    for call in message.tool_calls.iter().flatten() {
        out.push(&call.function.arguments);
    }
    for field in MESSAGE_TEXT_FIELDS {
        if let Some(Value::String(text)) = message.extra.get(field) {
            out.push(text);
        }
    }
}

fn message_texts_mut(message: &mut Message, f: &mut dyn FnMut(&mut String)) {
    match &mut message.content {
        Some(Content::Text(text)) => f(text),
        Some(Content::Parts(parts)) => {
            for text in parts.iter_mut().filter_map(|p| p.text.as_mut()) {
                f(text);
            }
        }
        None => {}
    }
    for call in message.tool_calls.iter_mut().flatten() {
        f(&mut call.function.arguments);
    }
    for field in MESSAGE_TEXT_FIELDS {
        if let Some(Value::String(text)) = message.extra.get_mut(field) {
            f(text);
        }
    }
}

/// A chat request's texts: every message's, then the tools' descriptions
/// and the caller's `user`, which a backend is sent too.
impl PromptTexts for ChatRequest {
    fn prompt_texts(&self) -> Vec<&str> {
        let mut out = Vec::with_capacity(self.messages.len());
        for message in &self.messages {
            message_texts(message, &mut out);
        }
        for tool in self.tools.iter().flat_map(|t| t.iter()) {
            out.extend(tool.function.description.as_deref());
        }
        out.extend(self.user.as_deref());
        out
    }

    fn prompt_texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        for message in &mut self.messages {
            message_texts_mut(message, f);
        }
        // Shared with the request's other tries: copied only here.
        for tool in self
            .tools
            .iter_mut()
            .flat_map(|t| std::sync::Arc::make_mut(t).iter_mut())
        {
            if let Some(description) = &mut tool.function.description {
                f(description);
            }
        }
        if let Some(user) = &mut self.user {
            f(user);
        }
    }
}

/// The strings of a completion prompt or embedding input: a string or an
/// array of them (token arrays hold no text).
fn value_texts(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => vec![text],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn value_texts_mut(value: &mut Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        Value::String(text) => f(text),
        Value::Array(items) => {
            for item in items {
                if let Value::String(text) = item {
                    f(text);
                }
            }
        }
        _ => {}
    }
}

impl PromptTexts for CompletionRequest {
    fn prompt_texts(&self) -> Vec<&str> {
        value_texts(&self.prompt)
    }

    fn prompt_texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        value_texts_mut(&mut self.prompt, f);
    }
}

impl PromptTexts for EmbeddingRequest {
    fn prompt_texts(&self) -> Vec<&str> {
        value_texts(&self.input)
    }

    fn prompt_texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        value_texts_mut(&mut self.input, f);
    }
}

impl OutputTexts for ChatResponse {
    fn output_texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        // The bytes as the backend sent them no longer say what the
        // answer does.
        self.verbatim = None;
        for choice in &mut self.choices {
            message_texts_mut(&mut choice.message, f);
        }
    }
}

impl OutputTexts for CompletionResponse {
    fn output_texts_mut(&mut self, f: &mut dyn FnMut(&mut String)) {
        for choice in &mut self.choices {
            f(&mut choice.text);
        }
    }
}

impl ChunkTexts for ChatChunk {
    fn output_fields_mut(&mut self, f: &mut dyn FnMut(u64, &mut String)) {
        // The bytes as the backend sent them no longer say what it says.
        self.verbatim = None;
        for choice in &mut self.choices {
            if let Some(content) = &mut choice.delta.content {
                f(slot(choice.index, 0), content);
            }
            for call in choice.delta.tool_calls.iter_mut().flatten() {
                if let Some(arguments) = call.function.as_mut().and_then(|f| f.arguments.as_mut()) {
                    f(slot(choice.index, 1 + call.index), arguments);
                }
            }
        }
    }

    fn ended_choices(&self) -> Vec<u32> {
        self.choices
            .iter()
            .filter(|c| c.finish_reason.is_some())
            .map(|c| c.index)
            .collect()
    }

    fn append_output(&mut self, at: u64, text: &str) {
        self.verbatim = None;
        let (index, field) = (slot_choice(at), (at & u64::from(u32::MAX)) as u32);
        let Some(choice) = self.choices.iter_mut().find(|c| c.index == index) else {
            return;
        };
        if field == 0 {
            choice
                .delta
                .content
                .get_or_insert_with(String::new)
                .push_str(text);
            return;
        }
        let calls = choice.delta.tool_calls.get_or_insert_with(Vec::new);
        let at = match calls.iter().position(|c| c.index == field - 1) {
            Some(at) => at,
            None => {
                calls.push(ToolCallDelta {
                    index: field - 1,
                    id: None,
                    kind: None,
                    function: None,
                    extra: Default::default(),
                });
                calls.len() - 1
            }
        };
        let call = &mut calls[at];
        call.function
            .get_or_insert_with(FunctionCallDelta::default)
            .arguments
            .get_or_insert_with(String::new)
            .push_str(text);
    }
}

impl ChunkTexts for CompletionResponse {
    fn output_fields_mut(&mut self, f: &mut dyn FnMut(u64, &mut String)) {
        for choice in &mut self.choices {
            f(slot(choice.index, 0), &mut choice.text);
        }
    }

    fn ended_choices(&self) -> Vec<u32> {
        self.choices
            .iter()
            .filter(|c| c.finish_reason.is_some())
            .map(|c| c.index)
            .collect()
    }

    fn append_output(&mut self, at: u64, text: &str) {
        let index = slot_choice(at);
        if let Some(choice) = self.choices.iter_mut().find(|c| c.index == index) {
            choice.text.push_str(text);
        }
    }
}
