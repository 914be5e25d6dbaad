//! `POST /v1/embeddings`. `encoding_format` (float or base64) goes to the
//! backend as the caller sent it. An endpoint like the others: the same
//! admission (keys, budgets, rate limits, breakers, fallbacks, retries);
//! it answers whole, and a cascade's checks, which read an answer's text,
//! do not apply to it.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use switchyard_adapters::types::{
    CanonicalChunk, CanonicalResponse, EmbeddingRequest, EmbeddingResponse, Usage,
};
use switchyard_adapters::{AdapterError, Provider, tokens};
use switchyard_router::{AnswerSummary, RequestView};

use crate::dispatch::endpoint::{Call, Chunks, Endpoint};
use crate::dispatch::stream::OpenAiEvents;
use crate::error::{Dialect, GatewayError};
use crate::route::view::BodyHints;

pub struct Embeddings;

/// A backend's embeddings with their usage in chat terms (prompt tokens
/// only), which the records read.
#[derive(Debug, Clone, Serialize)]
pub struct Embedded {
    #[serde(flatten)]
    response: EmbeddingResponse,
    #[serde(skip)]
    usage: Option<Usage>,
}

/// The texts of an embeddings input: a string, or an array of strings;
/// token arrays have no text.
fn texts(input: &Value) -> impl Iterator<Item = &str> {
    let items: &[Value] = match input {
        Value::Array(items) => items,
        single => std::slice::from_ref(single),
    };
    items.iter().filter_map(Value::as_str)
}

impl Endpoint for Embeddings {
    const NAME: &'static str = "embeddings";
    const DIALECT: Dialect = Dialect::OpenAi;
    const CHECKED_BY_CASCADES: bool = false;
    type Request = EmbeddingRequest;
    type Response = Embedded;
    /// Never streamed: the type only fills the trait.
    type Chunk = Embedded;
    type Encoder = OpenAiEvents<Self>;
    fn encoder(
        _req: &EmbeddingRequest,
        client_wants_usage: bool,
        _model: &str,
        _prompt_tokens: u32,
    ) -> Self::Encoder {
        OpenAiEvents::new(client_wants_usage)
    }
}

/// An embedding answer has usage and no text; "chunks" exist only to fill
/// the types (embeddings are never streamed).
impl CanonicalResponse for Embedded {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn output_text(&self) -> String {
        String::new()
    }
}

impl CanonicalChunk for Embedded {
    fn usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    fn is_usage_only(&self) -> bool {
        false
    }

    fn has_output(&self) -> bool {
        true
    }

    fn push_output(&self, _out: &mut String) {}
}

impl Call for EmbeddingRequest {
    type Response = Embedded;
    type Chunk = Embedded;
    /// Every input of a batch is billed: all are reserved for and counted
    /// against tokens-per-minute, not only the first. (Token arrays count
    /// by their JSON text, more than their tokens: a reservation errs high.)
    fn view(&self) -> RequestView<'_> {
        let req = self;
        // Each input is its own sequence: a context window holds the
        // longest, a budget pays for all.
        let each: Vec<usize> = match &req.input {
            Value::Array(items) if items.iter().all(Value::is_number) => vec![items.len()],
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(text) => tokens::estimate(text),
                    other => tokens::estimate(&other.to_string()),
                })
                .collect(),
            Value::String(text) => vec![tokens::estimate(text)],
            other => vec![tokens::estimate(&other.to_string())],
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        RequestView {
            model: &req.model,
            prompt_tokens: count(each.iter().sum()),
            sequence_tokens: Some(count(each.iter().copied().max().unwrap_or(0))),
            // An encoder only reads: no output to reserve for.
            max_tokens: Some(0),
            turns: 1,
            last_user_text: texts(&req.input).next().unwrap_or(""),
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
    fn validate(&self) -> Result<(), GatewayError> {
        let req = self;
        let empty = match &req.input {
            Value::String(s) => s.is_empty(),
            Value::Array(items) => items.is_empty(),
            _ => true,
        };
        if empty {
            return Err(GatewayError::InvalidField {
                param: "input".into(),
                message: "must be a non-empty string or array".into(),
            });
        }
        if let Some(format) = req.encoding_format.as_deref()
            && format != "float"
            && format != "base64"
        {
            return Err(GatewayError::InvalidField {
                param: "encoding_format".into(),
                message: format!("`{format}` is not one of float, base64"),
            });
        }
        Ok(())
    }
    fn summarize(_resp: &Embedded) -> AnswerSummary {
        AnswerSummary::default()
    }
    fn summarize_chunks(_chunks: &[Embedded]) -> AnswerSummary {
        AnswerSummary::default()
    }
    // Vectors hold no text to restore.
    crate::dispatch::masking::maskable!();
    fn call(self, provider: &dyn Provider) -> BoxFuture<'_, Result<Embedded, AdapterError>> {
        let req = self;
        provider
            .embeddings(req)
            .map(|answer| {
                answer.map(|response| Embedded {
                    usage: response
                        .usage
                        .as_ref()
                        .map(|u| Usage::new(u.prompt_tokens, 0)),
                    response,
                })
            })
            .boxed()
    }
    fn call_stream(
        self,
        _provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<Chunks<Embedded>, AdapterError>> {
        // `is_stream` is false: dispatch never asks for a stream.
        async {
            Err(AdapterError::Internal {
                message: "embeddings are not streamed".into(),
            })
        }
        .boxed()
    }
}
