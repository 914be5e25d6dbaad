//! What the gateway reads off any canonical request, answer or chunk,
//! whatever the endpoint: the model, streaming, usage, timings and the text
//! to count when a backend reports no usage. One implementation per type
//! here, so every dialect that shares a type (chat, Messages, Responses)
//! shares its reading too.

use super::{
    ChatChunk, ChatRequest, ChatResponse, CompletionRequest, CompletionResponse, EmbeddingRequest,
    Fields, StreamOptions, Timings, Usage,
};
use crate::tokens;

/// A canonical request.
pub trait CanonicalRequest {
    /// The model name the caller asked for.
    fn model(&self) -> &str;
    fn set_model(&mut self, model: &str);
    fn is_stream(&self) -> bool;
    /// Asks the backend for a final usage chunk, which accounting needs;
    /// returns whether the client asked for it too (else it is not
    /// forwarded).
    fn request_stream_usage(&mut self) -> bool;
    /// The prompt as text and the template's extra tokens, for counting
    /// usage when a backend reports none.
    fn prompt_for_count(&self) -> (String, usize);
    /// The request's `temperature` and `top_p`.
    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// The body's fields the type does not model, where an engine's extra
    /// fields go; `None` for requests that take none.
    fn engine_fields(&mut self) -> Option<&mut Fields> {
        None
    }
    /// The same fields as the caller sent them, where fields that change
    /// the bill are priced or removed: every request that keeps any. `None`
    /// when the caller sent none: there is nothing to price or remove, and
    /// asking for an `Extra`'s map makes one (`engine_fields` does).
    fn caller_fields(&mut self) -> Option<&mut Fields>;
}

/// A whole canonical answer.
pub trait CanonicalResponse {
    fn usage(&self) -> Option<&Usage>;
    /// llama.cpp's `timings`, when the backend sent them.
    fn timings(&self) -> Option<&Timings> {
        None
    }
    /// Generated text (content and tool-call names and arguments), for
    /// counting when no usage came.
    fn output_text(&self) -> String;
}

/// Where a chat delta carries reasoning: `reasoning_content` (DeepSeek,
/// vLLM, llama.cpp, and Anthropic thinking as this crate translates it) or
/// `reasoning` (Ollama, OpenRouter).
const REASONING_FIELDS: [&str; 2] = ["reasoning_content", "reasoning"];

/// One chunk of a streamed canonical answer.
pub trait CanonicalChunk {
    fn usage(&self) -> Option<&Usage>;
    fn timings(&self) -> Option<&Timings> {
        None
    }
    /// A chunk with no choices that only carries usage.
    fn is_usage_only(&self) -> bool;
    /// The chunk carries generated output (text or a tool call): the first
    /// one marks the time to first token.
    fn has_output(&self) -> bool;
    /// Appends the chunk's generated text (content, tool-call arguments).
    fn push_output(&self, out: &mut String);
    /// Appends the chunk's reasoning text (`reasoning_content`, as
    /// reasoning servers and the Anthropic adapter's thinking put it, or
    /// `reasoning`): output the provider bills, though no content.
    fn push_reasoning(&self, _out: &mut String) {}
    /// The bytes the chunk came in, when an OpenAI-dialect caller may get
    /// them as they are (chat chunks from an OpenAI-dialect backend);
    /// `usage_wanted` when the caller asked for usage in its stream.
    fn verbatim(&self, _usage_wanted: bool) -> Option<&[u8]> {
        None
    }
}

impl CanonicalRequest for ChatRequest {
    fn model(&self) -> &str {
        &self.model
    }

    fn set_model(&mut self, model: &str) {
        model.clone_into(&mut self.model);
    }

    fn is_stream(&self) -> bool {
        ChatRequest::is_stream(self)
    }

    fn request_stream_usage(&mut self) -> bool {
        let wanted = self.wants_stream_usage();
        self.stream_options
            .get_or_insert_with(StreamOptions::default)
            .include_usage = Some(true);
        wanted
    }

    fn prompt_for_count(&self) -> (String, usize) {
        tokens::prompt_text_and_overhead(self)
    }

    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        let top_p = self.extra.get("top_p").and_then(serde_json::Value::as_f64);
        (self.temperature, top_p)
    }

    fn engine_fields(&mut self) -> Option<&mut Fields> {
        Some(&mut self.extra)
    }

    fn caller_fields(&mut self) -> Option<&mut Fields> {
        self.extra.if_any()
    }
}

impl CanonicalResponse for ChatResponse {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn timings(&self) -> Option<&Timings> {
        self.timings.as_deref()
    }

    fn output_text(&self) -> String {
        let mut out = String::new();
        for choice in &self.choices {
            choice.message.push_text(&mut out);
            for call in choice.message.tool_calls.iter().flatten() {
                out.push_str(&call.function.name);
                out.push_str(&call.function.arguments);
            }
        }
        out
    }
}

impl CanonicalChunk for ChatChunk {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_deref()
    }

    fn verbatim(&self, usage_wanted: bool) -> Option<&[u8]> {
        // A caller that did not ask for usage gets no `usage` key, even
        // `null` (the encoding leaves out a null one).
        self.verbatim
            .as_deref()
            .filter(|_| usage_wanted || !self.usage_sent)
    }

    fn timings(&self) -> Option<&Timings> {
        self.timings.as_deref()
    }

    fn is_usage_only(&self) -> bool {
        ChatChunk::is_usage_only(self)
    }

    fn has_output(&self) -> bool {
        self.choices.iter().any(|c| {
            c.delta.content.as_deref().is_some_and(|s| !s.is_empty())
                || c.delta.tool_calls.is_some()
        })
    }

    fn push_reasoning(&self, out: &mut String) {
        for choice in &self.choices {
            for field in REASONING_FIELDS {
                if let Some(text) = choice.delta.extra.get(field).and_then(|v| v.as_str()) {
                    out.push_str(text);
                }
            }
        }
    }

    fn push_output(&self, out: &mut String) {
        for choice in &self.choices {
            out.push_str(choice.delta.content.as_deref().unwrap_or(""));
            for call in choice.delta.tool_calls.iter().flatten() {
                if let Some(function) = &call.function {
                    out.push_str(function.name.as_deref().unwrap_or(""));
                    out.push_str(function.arguments.as_deref().unwrap_or(""));
                }
            }
        }
    }
}

impl CanonicalRequest for CompletionRequest {
    fn model(&self) -> &str {
        &self.model
    }

    fn set_model(&mut self, model: &str) {
        model.clone_into(&mut self.model);
    }

    fn is_stream(&self) -> bool {
        CompletionRequest::is_stream(self)
    }

    fn request_stream_usage(&mut self) -> bool {
        let options = self
            .stream_options
            .get_or_insert_with(StreamOptions::default);
        let wanted = options.include_usage.unwrap_or(false);
        options.include_usage = Some(true);
        wanted
    }

    fn prompt_for_count(&self) -> (String, usize) {
        (self.prompt_text(), 0)
    }

    fn sampling(&self) -> (Option<f64>, Option<f64>) {
        let number = |name| self.extra.get(name).and_then(serde_json::Value::as_f64);
        (number("temperature"), number("top_p"))
    }

    fn engine_fields(&mut self) -> Option<&mut Fields> {
        Some(&mut self.extra)
    }

    fn caller_fields(&mut self) -> Option<&mut Fields> {
        self.extra.if_any()
    }
}

/// A completions answer and its chunks have one shape.
impl CanonicalResponse for CompletionResponse {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn timings(&self) -> Option<&Timings> {
        self.timings.as_deref()
    }

    fn output_text(&self) -> String {
        self.choices.iter().map(|c| c.text.as_str()).collect()
    }
}

impl CanonicalChunk for CompletionResponse {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn timings(&self) -> Option<&Timings> {
        self.timings.as_deref()
    }

    fn is_usage_only(&self) -> bool {
        self.choices.is_empty() && self.usage.is_some()
    }

    fn has_output(&self) -> bool {
        self.choices.iter().any(|c| !c.text.is_empty())
    }

    fn push_output(&self, out: &mut String) {
        self.choices.iter().for_each(|c| out.push_str(&c.text));
    }
}

/// Embeddings are never streamed and generate no text.
impl CanonicalRequest for EmbeddingRequest {
    fn model(&self) -> &str {
        &self.model
    }

    fn set_model(&mut self, model: &str) {
        model.clone_into(&mut self.model);
    }

    fn is_stream(&self) -> bool {
        false
    }

    fn request_stream_usage(&mut self) -> bool {
        false
    }

    fn prompt_for_count(&self) -> (String, usize) {
        (self.texts().join("\n"), 0)
    }

    /// No engine extras for an encoder, but `passthrough.deny` applies.
    fn caller_fields(&mut self) -> Option<&mut Fields> {
        self.extra.if_any()
    }
}

#[cfg(test)]
mod tests;
