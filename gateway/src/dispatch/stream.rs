//! A backend's chunk stream as the SSE bytes the caller receives, in the
//! caller's dialect.

use std::any::Any;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use serde_json::json;
use switchyard_adapters::AdapterError;
use switchyard_adapters::anthropic::MessageStream;
use switchyard_adapters::gemini::GenerateStream;
use switchyard_adapters::responses::ResponseStream;
use switchyard_adapters::sse::{DONE, data_event, named_event};
use switchyard_adapters::types::ChatChunk;

use crate::admit::capacity::Admission;
use crate::dispatch::endpoint::{Call, Endpoint, StreamEncoder};
use crate::dispatch::response_cache::Slot;
use crate::error::GatewayError;
use crate::settle::record::{RequestRecord, RowWritten};
use switchyard_adapters::types::CanonicalChunk;

/// OpenAI: `data: <chunk>` events and `data: [DONE]`; the final usage chunk
/// only when the client asked for it.
pub struct OpenAiEvents<E> {
    forward_usage_chunk: bool,
    endpoint: PhantomData<fn() -> E>,
}

impl<E> OpenAiEvents<E> {
    pub fn new(forward_usage_chunk: bool) -> Self {
        OpenAiEvents {
            forward_usage_chunk,
            endpoint: PhantomData,
        }
    }
}

impl<E: Endpoint + 'static> StreamEncoder<E::Chunk> for OpenAiEvents<E> {
    fn chunk(&mut self, chunk: &E::Chunk) -> Option<Bytes> {
        if chunk.is_usage_only() && !self.forward_usage_chunk {
            return None;
        }
        // The backend's own bytes when it spoke this dialect (the chunk
        // was not changed on the way), else the chunk encoded.
        Some(match chunk.verbatim(self.forward_usage_chunk) {
            Some(data) => data_event(data),
            None => data_event(&serde_json::to_vec(chunk).unwrap_or_default()),
        })
    }

    /// The openai SDKs raise on an `error` object in the stream.
    fn error(&mut self, err: &GatewayError) -> Bytes {
        data_event(&serde_json::to_vec(&json!({ "error": err.error_object() })).unwrap_or_default())
    }

    fn done(&mut self) -> Bytes {
        Bytes::from_static(DONE)
    }
}

/// Anthropic: the Messages event sequence.
pub struct AnthropicEvents(pub MessageStream);

fn named(events: Vec<(&'static str, serde_json::Value)>) -> Bytes {
    let mut out = BytesMut::new();
    for (name, data) in events {
        out.extend_from_slice(&named_event(
            name,
            &serde_json::to_vec(&data).unwrap_or_default(),
        ));
    }
    out.freeze()
}

impl StreamEncoder<ChatChunk> for AnthropicEvents {
    fn chunk(&mut self, chunk: &ChatChunk) -> Option<Bytes> {
        let events = self.0.on_chunk(chunk);
        (!events.is_empty()).then(|| named(events))
    }

    /// The anthropic SDKs raise on an `error` event.
    fn error(&mut self, err: &GatewayError) -> Bytes {
        named(vec![(
            "error",
            json!({"type": "error", "error": err.anthropic_error_object()}),
        )])
    }

    fn done(&mut self) -> Bytes {
        named(self.0.finish())
    }
}

/// OpenAI Responses: the `response.*` event sequence.
pub struct ResponsesEvents(pub ResponseStream);

impl StreamEncoder<ChatChunk> for ResponsesEvents {
    fn chunk(&mut self, chunk: &ChatChunk) -> Option<Bytes> {
        let events = self.0.on_chunk(chunk);
        (!events.is_empty()).then(|| named(events))
    }

    /// The openai SDKs raise on an `error` event.
    fn error(&mut self, err: &GatewayError) -> Bytes {
        named(vec![self.0.error(&err.error_object())])
    }

    fn done(&mut self) -> Bytes {
        named(self.0.finish())
    }
}

/// Gemini: one `data:` event per `GenerateContentResponse`, no end marker;
/// the last carries the calls, the finish reason and the usage.
pub struct GeminiEvents(pub GenerateStream);

fn data_events(responses: impl IntoIterator<Item = serde_json::Value>) -> Bytes {
    let mut out = BytesMut::new();
    for response in responses {
        out.extend_from_slice(&data_event(
            &serde_json::to_vec(&response).unwrap_or_default(),
        ));
    }
    out.freeze()
}

impl StreamEncoder<ChatChunk> for GeminiEvents {
    fn chunk(&mut self, chunk: &ChatChunk) -> Option<Bytes> {
        let responses = self.0.on_chunk(chunk);
        (!responses.is_empty()).then(|| data_events(responses))
    }

    /// google-genai raises on a `data: {"error": ...}` event.
    fn error(&mut self, err: &GatewayError) -> Bytes {
        data_events([json!({ "error": err.gemini_error_object() })])
    }

    fn done(&mut self) -> Bytes {
        data_events(self.0.finish())
    }
}

/// The caller's stream: the backend's chunks as the encoder writes them,
/// then the event that ends it once the row is handed over.
///
/// A struct with its own `poll_next` rather than `stream::unfold`, which
/// moved its whole state into a new future for each event.
pub struct Encoded<E: Endpoint> {
    upstream: BoxStream<'static, Result<E::Chunk, AdapterError>>,
    encoder: E::Encoder,
    /// Its backend's part held until the backend's stream ends or the
    /// client goes away, the gateway's until the stream is dropped (none
    /// for a stream replayed from the response cache).
    admission: Option<Admission>,
    /// Chunks kept for the response cache, and the backend they came from.
    keep: Option<(Slot, Vec<ChatChunk>, Arc<str>)>,
    end: End,
}

enum End {
    /// Reading the backend; the record's row is handed over when it ends
    /// (or, should the caller go away first, as the record is dropped).
    Streaming(Box<RequestRecord>),
    /// The row being handed over; then the stream's last event: the error
    /// event already made, or else the dialect's end (an error event if a
    /// strict ledger did not commit the row).
    Writing(RowWritten, Option<Bytes>),
    Done,
}

/// Streams the chunks as the encoder writes them. A backend failure after
/// the stream has started ends it with the dialect's error event, never
/// with a silent truncation.
pub fn encode<E: Endpoint>(
    upstream: BoxStream<'static, Result<E::Chunk, AdapterError>>,
    encoder: E::Encoder,
    record: Box<RequestRecord>,
    admission: Option<Admission>,
    keep: Option<(Slot, Arc<str>)>,
) -> Encoded<E> {
    Encoded {
        upstream,
        encoder,
        admission,
        keep: keep.map(|(slot, backend)| (slot, Vec::new(), backend)),
        end: End::Streaming(record),
    }
}

impl<E: Endpoint> Stream for Encoded<E> {
    type Item = Bytes;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = self.get_mut();
        loop {
            let record = match &mut this.end {
                End::Streaming(record) => record,
                End::Writing(written, error_event) => {
                    let written = ready!(Pin::new(written).poll(cx));
                    let event = match (error_event.take(), written) {
                        // The stream ends with the backend's error either way.
                        (Some(event), _) => event,
                        (None, Ok(())) => this.encoder.done(),
                        (None, Err(err)) => this.encoder.error(&err),
                    };
                    this.end = End::Done;
                    return Poll::Ready(Some(event));
                }
                End::Done => return Poll::Ready(None),
            };
            match ready!(this.upstream.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => {
                    note::<E>(record, &mut this.keep, &chunk);
                    if let Some(bytes) = this.encoder.chunk(&chunk) {
                        return Poll::Ready(Some(bytes));
                    }
                }
                Some(Err(err)) => {
                    if let Some(admission) = &mut this.admission {
                        admission.backend_done();
                    }
                    let err = GatewayError::from(err);
                    record.failed(&err);
                    err.log_detail();
                    let event = this.encoder.error(&err);
                    this.hand_over_row(Some(event));
                }
                None => {
                    // The backend is done with it: its slot and its place in
                    // the latency model's queue go now, not once the last
                    // bytes have reached the caller (whose next request can
                    // be routed before this stream is dropped, and would
                    // count it as still running there).
                    if let Some(admission) = &mut this.admission {
                        admission.backend_done();
                    }
                    if let Some((slot, kept, backend)) = this.keep.take() {
                        slot.put_stream(kept, backend);
                    }
                    record.finish("ok");
                    // Before the last bytes: in strict mode the row is
                    // committed before the client sees the stream end, and
                    // a row that was not ends it with an error instead.
                    // Otherwise the row is made once those bytes are handed
                    // to the socket, as a whole answer's is.
                    this.hand_over_row(None);
                }
            }
        }
    }
}

impl<E: Endpoint> Encoded<E> {
    /// Hands the record's row over to the ledger, `event` (an error's) to
    /// end the stream with once it is. Called while streaming, the only
    /// state that holds a record.
    fn hand_over_row(&mut self, event: Option<Bytes>) {
        if let End::Streaming(record) = std::mem::replace(&mut self.end, End::Done) {
            self.end = End::Writing(record.write_after_reply(), event);
        }
    }
}

/// Notes a chunk in the request's record, and keeps it for the response
/// cache.
fn note<E: Endpoint>(
    record: &mut RequestRecord,
    keep: &mut Option<(Slot, Vec<ChatChunk>, Arc<str>)>,
    chunk: &E::Chunk,
) {
    if chunk.has_output() {
        record.first_output();
    }
    record.usage(chunk.usage());
    record.answer_meta(|meta| E::Request::chunk_meta(chunk, meta));
    if !record.output_counted {
        chunk.push_output(record.stream_output());
        chunk.push_reasoning(record.reasoning());
    }
    record.timings(chunk.timings());
    if let Some((_, kept, _)) = keep
        && let Some(chunk) = (chunk as &dyn Any).downcast_ref::<ChatChunk>()
    {
        kept.push(chunk.clone());
    }
}
