//! `POST /v1/completions` (legacy text completions).

use crate::telemetry::AnswerMeta;
use futures_util::future::BoxFuture;
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{
    CompletionRequest, CompletionResponse, Extra, StreamOptions, Timings, Usage,
};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::prefix::PrefixChain;
use switchyard_router::{AnswerSummary, RequestView};

use crate::dispatch::endpoint::{Chunks, Endpoint};
use crate::dispatch::stream::OpenAiEvents;
use crate::error::{Dialect, GatewayError};
use crate::route::view::BodyHints;

pub struct Completions;

impl Endpoint for Completions {
    const DIALECT: Dialect = Dialect::OpenAi;
    const NAME: &'static str = "completions";
    type Request = CompletionRequest;
    type Response = CompletionResponse;
    type Chunk = CompletionResponse;

    fn view(req: &CompletionRequest) -> RequestView<'_> {
        let prompt = match &req.prompt {
            Value::String(s) => s.as_str(),
            Value::Array(items) => items.iter().rev().find_map(Value::as_str).unwrap_or(""),
            _ => "",
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        // A batch of prompts: each is its own sequence in a context window.
        let longest = match &req.prompt {
            Value::Array(items) if req.prompt_count() > 1 => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => tokens::estimate(text),
                    Value::Array(ids) => ids.len(),
                    _ => 0,
                })
                .max()
                .map(count),
            _ => None,
        };
        RequestView {
            model: &req.model,
            prompt_tokens: count(tokens::estimate(&req.prompt_text())),
            sequence_tokens: longest,
            max_tokens: req.max_tokens,
            choices: req.choices(),
            streaming: req.is_stream(),
            turns: 1,
            last_user_text: prompt,
            ..RequestView::default()
        }
    }

    fn hints(req: &CompletionRequest) -> BodyHints<'_> {
        BodyHints {
            user: req.user.as_deref(),
            profile: None,
        }
    }

    type Encoder = OpenAiEvents<Self>;

    fn encoder(
        _req: &CompletionRequest,
        client_wants_usage: bool,
        _model: &str,
        _prompt_tokens: u32,
    ) -> Self::Encoder {
        OpenAiEvents::new(client_wants_usage)
    }

    fn model_name(req: &CompletionRequest) -> &str {
        &req.model
    }

    fn set_model(req: &mut CompletionRequest, model: &str) {
        model.clone_into(&mut req.model);
    }

    fn body_extra(req: &mut CompletionRequest) -> Option<&mut Extra> {
        Some(&mut req.extra)
    }

    fn prefix_chain(req: &CompletionRequest) -> Option<PrefixChain> {
        Some(crate::route::prefix::completion_chain(req))
    }

    fn validate(req: &CompletionRequest) -> Result<(), GatewayError> {
        let empty = match &req.prompt {
            Value::String(_) => false,
            Value::Array(items) => items.is_empty(),
            _ => true,
        };
        if empty {
            return Err(GatewayError::InvalidField {
                param: "prompt".into(),
                message: "must be a string or a non-empty array".into(),
            });
        }
        if req.n == Some(0) {
            return Err(GatewayError::InvalidField {
                param: "n".into(),
                message: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    fn is_stream(req: &CompletionRequest) -> bool {
        req.is_stream()
    }

    fn request_stream_usage(req: &mut CompletionRequest) -> bool {
        let options = req
            .stream_options
            .get_or_insert_with(StreamOptions::default);
        let wanted = options.include_usage.unwrap_or(false);
        options.include_usage = Some(true);
        wanted
    }

    fn response_usage(resp: &CompletionResponse) -> Option<&Usage> {
        resp.usage.as_ref()
    }

    fn chunk_usage(chunk: &CompletionResponse) -> Option<&Usage> {
        chunk.usage.as_ref()
    }

    fn chunk_is_usage_only(chunk: &CompletionResponse) -> bool {
        chunk.choices.is_empty() && chunk.usage.is_some()
    }

    fn chunk_has_output(chunk: &CompletionResponse) -> bool {
        chunk.choices.iter().any(|c| !c.text.is_empty())
    }

    fn prompt_for_count(req: &CompletionRequest) -> (String, usize) {
        (req.prompt_text(), 0)
    }

    fn output_text(resp: &CompletionResponse) -> String {
        resp.choices.iter().map(|c| c.text.as_str()).collect()
    }

    fn chunk_output(chunk: &CompletionResponse, out: &mut String) {
        chunk.choices.iter().for_each(|c| out.push_str(&c.text));
    }

    fn response_timings(resp: &CompletionResponse) -> Option<&Timings> {
        resp.timings.as_deref()
    }

    fn chunk_timings(chunk: &CompletionResponse) -> Option<&Timings> {
        chunk.timings.as_deref()
    }

    fn answer_meta(resp: &CompletionResponse, meta: &mut AnswerMeta) {
        meta.note(
            &resp.id,
            &resp.model,
            resp.choices.iter().map(|c| c.finish_reason.as_ref()),
        );
    }

    fn chunk_meta(chunk: &CompletionResponse, meta: &mut AnswerMeta) {
        Self::answer_meta(chunk, meta);
    }

    fn sampling(req: &CompletionRequest) -> (Option<f64>, Option<f64>) {
        let number = |name| req.extra.get(name).and_then(serde_json::Value::as_f64);
        (number("temperature"), number("top_p"))
    }

    fn summarize(resp: &CompletionResponse) -> AnswerSummary {
        Self::summarize_chunks(std::slice::from_ref(resp))
    }

    fn summarize_chunks(chunks: &[CompletionResponse]) -> AnswerSummary {
        let choices = || chunks.iter().flat_map(|c| &c.choices);
        AnswerSummary {
            finish_reasons: choices().filter_map(|c| c.finish_reason.clone()).collect(),
            text: choices().map(|c| c.text.as_str()).collect(),
            ..AnswerSummary::default()
        }
    }

    fn call(
        provider: &dyn Provider,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        provider.completion(req)
    }

    fn call_stream(
        provider: &dyn Provider,
        req: CompletionRequest,
    ) -> BoxFuture<'_, Result<Chunks<CompletionResponse>, AdapterError>> {
        provider.completion_stream(req)
    }
}
