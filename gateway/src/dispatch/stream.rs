//! A backend's chunk stream as the SSE bytes the caller receives, in the
//! caller's dialect.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

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
use crate::settle::record::RequestRecord;
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

struct State<C, W> {
    upstream: BoxStream<'static, Result<C, AdapterError>>,
    encoder: W,
    record: Box<RequestRecord>,
    done: bool,
    /// Its backend's part held until the backend's stream ends or the
    /// client goes away, the gateway's until the stream's state is dropped
    /// (none for a stream replayed from the response cache).
    admission: Option<Admission>,
    /// Chunks kept for the response cache, and the backend they came from.
    keep: Option<(Slot, Vec<ChatChunk>, Arc<str>)>,
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
) -> impl Stream<Item = Bytes> + Send + 'static {
    let state = State {
        upstream,
        encoder,
        record,
        done: false,
        admission,
        keep: keep.map(|(slot, backend)| (slot, Vec::new(), backend)),
    };
    futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            match st.upstream.next().await {
                Some(Ok(chunk)) => {
                    if chunk.has_output() {
                        st.record.first_output();
                    }
                    st.record.usage(chunk.usage());
                    st.record
                        .answer_meta(|meta| E::Request::chunk_meta(&chunk, meta));
                    if !st.record.output_counted {
                        chunk.push_output(st.record.output());
                        chunk.push_reasoning(st.record.reasoning());
                    }
                    st.record.timings(chunk.timings());
                    if let Some((_, kept, _)) = &mut st.keep
                        && let Some(chunk) = (&chunk as &dyn Any).downcast_ref::<ChatChunk>()
                    {
                        kept.push(chunk.clone());
                    }
                    match st.encoder.chunk(&chunk) {
                        Some(bytes) => return Some((bytes, st)),
                        None => continue,
                    }
                }
                Some(Err(err)) => {
                    if let Some(admission) = &mut st.admission {
                        admission.backend_done();
                    }
                    let err = GatewayError::from(err);
                    st.record.failed(&err);
                    // The stream ends with the backend's error either way.
                    let _ = st.record.write().await;
                    st.done = true;
                    err.log_detail();
                    let event = st.encoder.error(&err);
                    return Some((event, st));
                }
                None => {
                    // The backend is done with it: its slot and its place in
                    // the latency model's queue go now, not once the last
                    // bytes have reached the caller (whose next request can
                    // be routed before this stream's state is dropped, and
                    // would count it as still running there).
                    if let Some(admission) = &mut st.admission {
                        admission.backend_done();
                    }
                    if let Some((slot, kept, backend)) = st.keep.take() {
                        slot.put_stream(kept, backend);
                    }
                    st.record.finish("ok");
                    // Before the last bytes: in strict mode the row is
                    // committed before the client sees the stream end, and
                    // a row that was not ends it with an error instead.
                    let written = st.record.write().await;
                    st.done = true;
                    let end = match written {
                        Ok(()) => st.encoder.done(),
                        Err(err) => st.encoder.error(&err),
                    };
                    return Some((end, st));
                }
            }
        }
    })
}
