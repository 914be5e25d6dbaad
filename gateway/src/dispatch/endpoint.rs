//! What the pipeline needs of an endpoint: the small `Endpoint` trait every
//! dialect implements (decode, respond, encode), the `Call` trait each
//! canonical request type implements (the router's view, checks, the
//! backend call), the `StreamEncoder` a dialect writes its streams with,
//! and what one backend gave (`Answer`). Usage, timings and
//! text are read through the adapters' canonical accessors. Defined here,
//! below ingress, so the dialects depend on dispatch and never the other way.

use crate::telemetry::AnswerMeta;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use http::{Response, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use switchyard_adapters::types::{CanonicalChunk, CanonicalRequest, CanonicalResponse};
use switchyard_adapters::{AdapterError, Provider};
use switchyard_router::prefix::PrefixChain;
use switchyard_router::sensitive::{Masker, StreamRestorer};
use switchyard_router::{AnswerSummary, RequestView};

use crate::error::{Dialect, GatewayError};
use crate::http::{Body, json_response, parse_json};
use crate::route::view::BodyHints;

/// A backend's chunks.
pub type Chunks<C> = BoxStream<'static, Result<C, AdapterError>>;

/// A kind of model call, implemented once per canonical request type (chat,
/// completions, embeddings): how the router sees it, how its answers are
/// checked and described, and how a backend is called with it. Dialects
/// that share a request type (chat, Messages, Responses) share this.
pub trait Call:
    CanonicalRequest + DeserializeOwned + Clone + Send + Sync + Sized + 'static
{
    type Response: CanonicalResponse + Serialize + Send + 'static;
    type Chunk: CanonicalChunk + Serialize + Send + 'static;

    /// The router's view of the request (session, profile and headers are
    /// filled in by the caller).
    fn view(&self) -> RequestView<'_>;
    fn hints(&self) -> BodyHints<'_>;
    /// The canonical prompt's prefix chain, for requests with a prompt.
    fn prefix_chain(&self) -> Option<PrefixChain> {
        None
    }
    /// Checks serde cannot express (empty lists, zero counts).
    fn validate(&self) -> Result<(), GatewayError>;
    /// Checks that depend on who calls: what one key may ask of a backend
    /// account every key shares.
    fn check_caller(&self, _caller: &crate::admit::access::Caller) -> Result<(), GatewayError> {
        Ok(())
    }
    /// What a whole answer or a chunk says of itself (id, model, finish
    /// reasons), for its attempt's span; nothing for calls without.
    fn answer_meta(_resp: &Self::Response, _meta: &mut AnswerMeta) {}
    fn chunk_meta(_chunk: &Self::Chunk, _meta: &mut AnswerMeta) {}
    /// What cascade checks look at, from a whole answer or a streamed one.
    fn summarize(resp: &Self::Response) -> AnswerSummary;
    fn summarize_chunks(chunks: &[Self::Chunk]) -> AnswerSummary;

    /// Whether a backend can take this kind of call at all (a passthrough
    /// needs a backend that speaks its dialect): dispatch skips those that
    /// cannot, fallbacks and hedges included.
    fn served_by(_provider: &dyn Provider) -> bool {
        true
    }

    /// Whether [`Self::mask_prompt`] masks every text a backend reads: a
    /// request that cannot be masked is kept on local backends instead
    /// when its policy masks.
    const MASKABLE: bool = false;
    /// The texts scanned for sensitive data, in the order a model reads
    /// them (a number split between two is found at their junction).
    fn prompt_texts(&self) -> Vec<std::borrow::Cow<'_, str>> {
        vec![std::borrow::Cow::Owned(self.prompt_for_count().0)]
    }
    /// Replaces each value `masker` holds by its placeholder.
    fn mask_prompt(&mut self, _masker: &Masker) {}
    /// Puts the values back in a whole answer.
    fn restore_answer(_answer: &mut Self::Response, _masker: &Masker) {}
    /// Puts the values back in a streamed answer, chunk by chunk.
    fn restore_chunk(_chunk: &mut Self::Chunk, _restorer: &mut StreamRestorer) {}

    fn call(self, provider: &dyn Provider) -> BoxFuture<'_, Result<Self::Response, AdapterError>>;
    fn call_stream(
        self,
        provider: &dyn Provider,
    ) -> BoxFuture<'_, Result<Chunks<Self::Chunk>, AdapterError>>;
}

/// Writes one dialect's stream.
pub trait StreamEncoder<C>: Send + 'static {
    /// The bytes for one chunk, if any.
    fn chunk(&mut self, chunk: &C) -> Option<Bytes>;
    /// The event that ends a stream whose backend failed.
    fn error(&mut self, err: &GatewayError) -> Bytes;
    /// The end of a complete stream.
    fn done(&mut self) -> Bytes;
}

/// One model endpoint in one dialect: how its body is decoded and its
/// answers and chunks are written. Everything else is its request type's
/// ([`Call`]) and the canonical types' own accessors.
pub trait Endpoint: Sized + 'static {
    /// For logs and metrics.
    const NAME: &'static str;
    /// The caller's dialect: errors and the ledger's `dialect` follow it.
    const DIALECT: Dialect;
    /// Whether a cascade's checks (which read an answer's text) apply; an
    /// endpoint without text (embeddings) takes a cascade's first backend.
    const CHECKED_BY_CASCADES: bool = true;
    type Request: Call<Response = Self::Response, Chunk = Self::Chunk>;
    type Response: CanonicalResponse + Serialize + Send + 'static;
    type Chunk: CanonicalChunk + Serialize + Send + 'static;
    /// Writes streamed chunks in the caller's dialect.
    type Encoder: StreamEncoder<Self::Chunk> + Unpin;

    /// The request body in the caller's dialect, as the canonical request.
    fn decode(body: &[u8]) -> Result<Self::Request, GatewayError> {
        parse_json(body)
    }
    /// The same, for dialects whose path says part of the request (Gemini
    /// names the model and whether to stream there).
    fn decode_request(
        _parts: &http::request::Parts,
        body: &[u8],
    ) -> Result<Self::Request, GatewayError> {
        Self::decode(body)
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
}

/// What one backend gave.
pub enum Answer<E: Endpoint> {
    Whole(E::Response),
    Stream(Chunks<E::Chunk>),
    /// A streamed answer held back for a cascade check.
    Collected(Vec<E::Chunk>),
}
