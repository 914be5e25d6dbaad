//! `POST /v1/completions` (legacy text completions).

use crate::telemetry::AnswerMeta;
use futures_util::future::BoxFuture;
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{CompletionRequest, CompletionResponse};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::prefix::PrefixChain;
use switchyard_router::{AnswerSummary, RequestView};

use crate::dispatch::endpoint::{Call, Chunks, Endpoint};
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
    type Encoder = OpenAiEvents<Self>;
    fn encoder(
        _req: &CompletionRequest,
        client_wants_usage: bool,
        _model: &str,
        _prompt_tokens: u32,
    ) -> Self::Encoder {
        OpenAiEvents::new(client_wants_usage)
    }
}

impl Call for CompletionRequest {
    type Response = CompletionResponse;
    type Chunk = CompletionResponse;
    fn view(&self) -> RequestView<'_> {
        let req = self;
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
    fn hints(&self) -> BodyHints<'_> {
        let req = self;
        BodyHints {
            user: req.user.as_deref(),
            profile: None,
        }
    }
    fn prefix_chain(&self) -> Option<PrefixChain> {
        let req = self;
        Some(crate::route::prefix::completion_chain(req))
    }
    fn validate(&self) -> Result<(), GatewayError> {
        let req = self;
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
    crate::dispatch::masking::maskable!(answers);
    fn call(
        self,
        provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<CompletionResponse, AdapterError>> {
        provider.completion(self)
    }
    fn call_stream(
        self,
        provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<Chunks<CompletionResponse>, AdapterError>> {
        provider.completion_stream(self)
    }
}
