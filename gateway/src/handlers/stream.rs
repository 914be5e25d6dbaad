//! A backend's chunk stream as the SSE bytes the caller receives.

use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{Stream, StreamExt};
use serde_json::json;
use switchyard_adapters::AdapterError;
use switchyard_adapters::sse::{DONE, data_event};

use super::endpoint::Endpoint;
use super::record::RequestRecord;
use crate::app::Admission;
use crate::error::GatewayError;

struct State<C> {
    upstream: BoxStream<'static, Result<C, AdapterError>>,
    forward_usage_chunk: bool,
    record: RequestRecord,
    done: bool,
    /// Held until the stream ends or the client goes away.
    _admission: Admission,
}

/// Encodes chunks as `data:` events, ending with `[DONE]`. A backend failure
/// after the stream has started ends it with an OpenAI error event (which the
/// openai SDKs raise), never with a silent truncation.
pub fn encode<E: Endpoint>(
    upstream: BoxStream<'static, Result<E::Chunk, AdapterError>>,
    forward_usage_chunk: bool,
    record: RequestRecord,
    admission: Admission,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let state = State {
        upstream,
        forward_usage_chunk,
        record,
        done: false,
        _admission: admission,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            match st.upstream.next().await {
                Some(Ok(chunk)) => {
                    if E::chunk_has_output(&chunk) {
                        st.record.first_output();
                    }
                    st.record.usage(E::chunk_usage(&chunk));
                    E::chunk_output(&chunk, st.record.output());
                    st.record.timings(E::chunk_extra(&chunk));
                    if E::chunk_is_usage_only(&chunk) && !st.forward_usage_chunk {
                        continue;
                    }
                    let json = serde_json::to_vec(&chunk).unwrap_or_default();
                    return Some((data_event(&json), st));
                }
                Some(Err(err)) => {
                    let err = GatewayError::from(err);
                    st.record.finish(err.kind());
                    st.record.write().await;
                    st.done = true;
                    let event = serde_json::to_vec(&json!({ "error": err.error_object() }))
                        .unwrap_or_default();
                    return Some((data_event(&event), st));
                }
                None => {
                    st.record.finish("ok");
                    // Before the last bytes: in strict mode the row is
                    // committed before the client sees the stream end.
                    st.record.write().await;
                    st.done = true;
                    return Some((Bytes::from_static(DONE), st));
                }
            }
        }
    })
}
