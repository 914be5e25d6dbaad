//! What the pipeline needs of an endpoint: the `Endpoint` trait every
//! dialect implements (decode, view, encode, and reading usage and text off
//! its answers), and what one backend gave (`Answer`). Defined here, below
//! ingress, so the dialects depend on dispatch and never the other way.

use crate::telemetry::AnswerMeta;

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::{Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_adapters::types::{Extra, Timings, Usage};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::prefix::PrefixChain;
use switchyard_router::{AnswerSummary, RequestView};

use crate::dispatch::stream::StreamEncoder;
use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::route::view::BodyHints;

/// A backend's chunks.
pub type Chunks<C> = BoxStream<'static, Result<C, AdapterError>>;

/// One OpenAI-compatible model endpoint that can answer whole or streamed.
pub trait Endpoint: Sized + 'static {
    /// For logs and metrics.
    const NAME: &'static str;
    /// The caller's dialect: errors and the ledger's `dialect` follow it.
    const DIALECT: Dialect;
    /// Whether a cascade's checks (which read an answer's text) apply; an
    /// endpoint without text (embeddings) takes a cascade's first backend.
    const CHECKED_BY_CASCADES: bool = true;
    type Request: DeserializeOwned + Clone + Send + Sync + 'static;
    type Response: Serialize + Send + 'static;
    type Chunk: Serialize + Send + 'static;
    /// Writes streamed chunks in the caller's dialect.
    type Encoder: StreamEncoder<Self::Chunk>;

    /// The request body in the caller's dialect, as the canonical request.
    fn decode(body: &[u8]) -> Result<Self::Request, GatewayError> {
        parse_json(body)
    }
    /// Keeps the caller's protocol headers that a backend of the same
    /// dialect should receive (nothing, unless the dialect has such headers).
    fn forward_headers(_req: &mut Self::Request, _headers: &http::HeaderMap) {}
    /// A whole answer to `req` in the caller's dialect.
    fn respond(_req: &Self::Request, resp: &Self::Response) -> Response<Body> {
        json_response(StatusCode::OK, resp)
    }
    /// The stream writer for the answer to `req`. `client_wants_usage`: the
    /// client asked for the final usage chunk; `prompt_tokens`: the estimate
    /// made at admission.
    fn encoder(
        req: &Self::Request,
        client_wants_usage: bool,
        model: &str,
        prompt_tokens: u32,
    ) -> Self::Encoder;

    /// The router's view of the request (session, profile and headers are
    /// filled in by the caller).
    fn view(req: &Self::Request) -> RequestView<'_>;
    fn hints(req: &Self::Request) -> BodyHints<'_>;
    fn set_model(req: &mut Self::Request, model: &str);
    /// The request body's fields the canonical type does not model, where
    /// engine extras go; `None` for endpoints that take none.
    fn body_extra(_req: &mut Self::Request) -> Option<&mut Extra> {
        None
    }
    /// The same fields as the caller sent them, where fields that change
    /// the bill are priced or removed: every endpoint that keeps any.
    fn caller_fields(req: &mut Self::Request) -> Option<&mut Extra> {
        Self::body_extra(req)
    }
    /// The canonical prompt's prefix chain, for endpoints with a prompt.
    fn prefix_chain(_req: &Self::Request) -> Option<PrefixChain> {
        None
    }
    /// The model name the caller asked for.
    fn model_name(req: &Self::Request) -> &str;
    /// Checks serde cannot express (empty lists, zero counts).
    fn validate(req: &Self::Request) -> Result<(), GatewayError>;
    fn is_stream(req: &Self::Request) -> bool;
    /// Asks the backend for a final usage chunk, which accounting needs;
    /// returns whether the client asked for it too (else it is not forwarded).
    fn request_stream_usage(req: &mut Self::Request) -> bool;
    fn response_usage(resp: &Self::Response) -> Option<&Usage>;
    fn chunk_usage(chunk: &Self::Chunk) -> Option<&Usage>;
    /// A chunk with no choices that only carries usage.
    fn chunk_is_usage_only(chunk: &Self::Chunk) -> bool;
    /// A chunk carrying generated output (text or a tool call): the first one
    /// marks the time to first token.
    fn chunk_has_output(chunk: &Self::Chunk) -> bool;
    /// The prompt as text and the template's extra tokens, for counting
    /// usage when a backend reports none.
    fn prompt_for_count(req: &Self::Request) -> (String, usize);
    /// Generated text of a whole answer, for counting when no usage came.
    fn output_text(resp: &Self::Response) -> String;
    /// Appends a chunk's generated text (content, tool-call arguments).
    fn chunk_output(chunk: &Self::Chunk, out: &mut String);
    /// llama.cpp's `timings` of an answer, or on a chunk.
    fn response_timings(resp: &Self::Response) -> Option<&Timings>;
    fn chunk_timings(chunk: &Self::Chunk) -> Option<&Timings>;
    /// What a whole answer or a chunk says of itself (id, model, finish
    /// reasons), for its attempt's span; nothing for endpoints without.
    fn answer_meta(_resp: &Self::Response, _meta: &mut AnswerMeta) {}
    fn chunk_meta(_chunk: &Self::Chunk, _meta: &mut AnswerMeta) {}
    /// The request's `temperature` and `top_p`, for its attempts' spans.
    fn sampling(_req: &Self::Request) -> (Option<f64>, Option<f64>) {
        (None, None)
    }
    /// What cascade checks look at, from a whole answer or a streamed one.
    fn summarize(resp: &Self::Response) -> AnswerSummary;
    fn summarize_chunks(chunks: &[Self::Chunk]) -> AnswerSummary;

    fn call(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Self::Response, AdapterError>>;
    fn call_stream(
        provider: &dyn Provider,
        req: Self::Request,
    ) -> BoxFuture<'_, Result<Chunks<Self::Chunk>, AdapterError>>;
}

/// What one backend gave.
pub enum Answer<E: Endpoint> {
    Whole(E::Response),
    Stream(Chunks<E::Chunk>),
    /// A streamed answer held back for a cascade check.
    Collected(Vec<E::Chunk>),
}
