//! A chat request, as callers send it.

use super::{Cursor, once, whole};
use crate::types::{ChatRequest, Extra};

/// `text` read as a chat request, or `None` where serde must read it (see
/// the module's note): the model, the messages, `stream` and the token
/// limits are read here, other fields (a temperature, tools) by serde alone.
pub(crate) fn read_chat_request(text: &str) -> Option<ChatRequest> {
    whole(text, Cursor::chat_request)
}

impl Cursor<'_> {
    fn chat_request(&mut self) -> Option<ChatRequest> {
        let (mut model, mut messages, mut stream, mut options) = (None, None, None, None);
        let (mut max_tokens, mut max_completion, mut temperature, mut n) = (None, None, None, None);
        let (mut seed, mut tools, mut tool_choice, mut parallel) = (None, None, None, None);
        let (mut format, mut logprobs, mut top_logprobs, mut user) = (None, None, None, None);
        let mut metadata = None;
        let mut extra = Extra::new();
        self.members(|c, key| match key {
            "model" => once(&mut model, c.string()),
            // Room for four, as a vector grown from none has.
            "messages" => once(&mut messages, c.list(4, Self::message)),
            "stream" => once(&mut stream, c.or_null(Self::boolean)),
            "max_tokens" => once(&mut max_tokens, c.or_null(Self::unsigned_32)),
            "max_completion_tokens" => once(&mut max_completion, c.or_null(Self::unsigned_32)),
            "temperature" => once(&mut temperature, c.or_null(Self::float)),
            "stream_options" => once(&mut options, c.by_serde()),
            "n" => once(&mut n, c.by_serde()),
            "seed" => once(&mut seed, c.by_serde()),
            "tools" => once(&mut tools, c.by_serde()),
            "tool_choice" => once(&mut tool_choice, c.by_serde()),
            "parallel_tool_calls" => once(&mut parallel, c.by_serde()),
            "response_format" => once(&mut format, c.by_serde()),
            "logprobs" => once(&mut logprobs, c.by_serde()),
            "top_logprobs" => once(&mut top_logprobs, c.by_serde()),
            "user" => once(&mut user, c.by_serde()),
            "metadata" => once(&mut metadata, c.by_serde()),
            _ => c.extra(&mut extra, key),
        })?;
        Some(ChatRequest {
            model: model?,
            messages: messages?,
            stream: stream.flatten(),
            stream_options: options.flatten(),
            max_tokens: max_tokens.flatten(),
            max_completion_tokens: max_completion.flatten(),
            temperature: temperature.flatten(),
            n: n.flatten(),
            seed: seed.flatten(),
            tools: tools.flatten(),
            tool_choice: tool_choice.flatten(),
            parallel_tool_calls: parallel.flatten(),
            response_format: format.flatten(),
            logprobs: logprobs.flatten(),
            top_logprobs: top_logprobs.flatten(),
            user: user.flatten(),
            metadata: metadata.flatten(),
            extra,
            forward_headers: Vec::new(),
            echo: None,
        })
    }

    fn boolean(&mut self) -> Option<bool> {
        match self.peek()? {
            b't' => self.word("true").map(|()| true),
            _ => self.word("false").map(|()| false),
        }
    }
}
