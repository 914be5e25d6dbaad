//! `POST /v1/chat/completions`.

use crate::telemetry::AnswerMeta;
use futures_util::future::BoxFuture;
use http::{Response, StatusCode};
use serde_json::Value;
use switchyard_adapters::tokens;
use switchyard_adapters::types::{ChatChunk, ChatRequest, ChatResponse, Content, Role};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::prefix::PrefixChain;
use switchyard_router::{AnswerSummary, RequestView};

use crate::dispatch::endpoint::{Call, Chunks, Endpoint};
use crate::dispatch::stream::OpenAiEvents;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_bytes_response, json_response, parse_json};
use crate::route::view::BodyHints;

pub struct Chat;

/// Content part types that carry an image.
const IMAGE_PARTS: [&str; 3] = ["image_url", "input_image", "image"];

/// The text of the last user message, borrowed: the whole string, or the
/// last text part of multi-part content.
fn last_user_text(req: &ChatRequest) -> &str {
    let last_user = req.messages.iter().rev().find(|m| m.role == Role::User);
    match last_user.and_then(|m| m.content.as_ref()) {
        Some(Content::Text(text)) => text,
        Some(Content::Parts(parts)) => parts
            .iter()
            .rev()
            .find_map(|p| p.text.as_deref())
            .unwrap_or(""),
        None => "",
    }
}

fn has_images(req: &ChatRequest) -> bool {
    req.messages.iter().any(|m| match &m.content {
        Some(Content::Parts(parts)) => parts.iter().any(|p| IMAGE_PARTS.contains(&p.kind.as_str())),
        _ => false,
    })
}

/// Mean token log-probability over every choice's content tokens.
fn mean_logprob<'a>(logprobs: impl Iterator<Item = &'a Value>) -> Option<f64> {
    let (mut sum, mut n) = (0.0, 0u32);
    for entry in logprobs {
        for token in entry
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(lp) = token.get("logprob").and_then(Value::as_f64) {
                sum += lp;
                n += 1;
            }
        }
    }
    (n > 0).then(|| sum / f64::from(n))
}

impl Endpoint for Chat {
    const DIALECT: Dialect = Dialect::OpenAi;
    const NAME: &'static str = "chat";
    type Request = ChatRequest;
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    type Encoder = OpenAiEvents<Self>;
    /// Read by the adapters' own reader when it can, else by serde (which
    /// gives the same request, or the error the caller gets).
    fn decode(body: &[u8]) -> Result<ChatRequest, GatewayError> {
        match switchyard_adapters::json::chat_request(body) {
            Some(request) => Ok(request),
            None => parse_json(body),
        }
    }
    /// The backend's own bytes when it spoke this dialect (the answer is
    /// not changed on the way), else the answer encoded.
    fn respond(_req: &ChatRequest, resp: &ChatResponse) -> Response<Body> {
        match &resp.verbatim {
            Some(body) => json_bytes_response(StatusCode::OK, body.clone()),
            None => json_response(StatusCode::OK, resp),
        }
    }
    fn encoder(
        _req: &ChatRequest,
        client_wants_usage: bool,
        _model: &str,
        _prompt_tokens: u32,
    ) -> Self::Encoder {
        OpenAiEvents::new(client_wants_usage)
    }
}

impl Call for ChatRequest {
    type Response = ChatResponse;
    type Chunk = ChatChunk;
    fn view(&self) -> RequestView<'_> {
        let req = self;
        let media = switchyard_adapters::media::chat_media(req);
        let media_tokens = u32::try_from(media.tokens).unwrap_or(u32::MAX);
        let text = u32::try_from(tokens::estimate_chat_prompt(req)).unwrap_or(u32::MAX);
        RequestView {
            model: &req.model,
            prompt_tokens: text.saturating_add(media_tokens),
            media_tokens,
            media_unknown_size: media.unknown_size,
            max_tokens: req.output_limit(),
            choices: req.n.unwrap_or(1),
            tool_count: u32::try_from(req.tool_defs().len()).unwrap_or(u32::MAX),
            images: has_images(req),
            streaming: req.is_stream(),
            turns: u32::try_from(req.messages.len()).unwrap_or(u32::MAX),
            // Results of the tools the model just called: the request's
            // last message (earlier ones are the conversation's history).
            tool_results: req.messages.last().is_some_and(|m| m.role == Role::Tool),
            last_user_text: last_user_text(req),
            ..RequestView::default()
        }
    }
    fn hints(&self) -> BodyHints<'_> {
        let req = self;
        let metadata = |key: &str| {
            req.metadata
                .as_ref()
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
        };
        BodyHints {
            user: req.user.as_deref().or(metadata("user_id")),
            profile: metadata("profile"),
        }
    }
    fn prefix_chain(&self) -> Option<PrefixChain> {
        Some(crate::route::prefix::chat_chain(self))
    }
    fn validate(&self) -> Result<(), GatewayError> {
        let req = self;
        if req.messages.is_empty() {
            return Err(GatewayError::InvalidField {
                param: "messages".into(),
                message: "must hold at least one message".into(),
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
    fn answer_meta(resp: &ChatResponse, meta: &mut AnswerMeta) {
        meta.note(
            &resp.id,
            &resp.model,
            resp.choices.iter().map(|c| c.finish_reason.as_ref()),
        );
    }
    fn chunk_meta(chunk: &ChatChunk, meta: &mut AnswerMeta) {
        meta.note(
            &chunk.id,
            &chunk.model,
            chunk.choices.iter().map(|c| c.finish_reason.as_ref()),
        );
    }
    fn summarize(resp: &ChatResponse) -> AnswerSummary {
        AnswerSummary {
            finish_reasons: resp
                .choices
                .iter()
                .filter_map(|c| c.finish_reason.clone())
                .collect(),
            text: resp
                .choices
                .iter()
                .map(|c| c.message.text())
                .collect::<Vec<_>>()
                .join("\n"),
            tool_arguments: resp
                .choices
                .iter()
                .flat_map(|c| c.message.tool_calls.iter().flatten())
                .map(|t| t.function.arguments.clone())
                .collect(),
            refused: resp
                .choices
                .iter()
                .any(|c| c.message.extra.get("refusal").is_some_and(|r| !r.is_null())),
            mean_logprob: mean_logprob(resp.choices.iter().filter_map(|c| c.logprobs.as_ref())),
        }
    }
    fn summarize_chunks(chunks: &[ChatChunk]) -> AnswerSummary {
        let choices = || chunks.iter().flat_map(|c| &c.choices);
        // Tool-call arguments arrive in fragments keyed by (choice, call index).
        let mut arguments: Vec<((u32, u32), String)> = Vec::new();
        for choice in choices() {
            for call in choice.delta.tool_calls.iter().flatten() {
                let key = (choice.index, call.index);
                let fragment = call
                    .function
                    .as_ref()
                    .and_then(|f| f.arguments.as_deref())
                    .unwrap_or("");
                match arguments.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, args)) => args.push_str(fragment),
                    None => arguments.push((key, fragment.to_owned())),
                }
            }
        }
        AnswerSummary {
            finish_reasons: choices().filter_map(|c| c.finish_reason.clone()).collect(),
            text: choices()
                .filter_map(|c| c.delta.content.as_deref())
                .collect(),
            tool_arguments: arguments.into_iter().map(|(_, args)| args).collect(),
            refused: choices().any(|c| c.delta.extra.get("refusal").is_some_and(|r| !r.is_null())),
            mean_logprob: mean_logprob(choices().filter_map(|c| c.logprobs.as_ref())),
        }
    }
    crate::dispatch::masking::maskable!(answers);
    fn call(self, provider: &dyn Provider) -> BoxFuture<'_, Result<ChatResponse, AdapterError>> {
        provider.chat(self)
    }
    fn call_stream(
        self,
        provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<Chunks<ChatChunk>, AdapterError>> {
        provider.chat_stream(self)
    }
}
