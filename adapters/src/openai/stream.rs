//! An upstream SSE body as a stream of parsed chunks.

use std::collections::VecDeque;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde::de::DeserializeOwned;

use super::convert::parse_json;
use crate::error::{AdapterError, TimeoutPhase};
use crate::sse::SseParser;

struct State<T> {
    /// Taken when `[DONE]` arrives, to drain in the background.
    body: Option<Incoming>,
    parser: SseParser,
    pending: VecDeque<Result<T, AdapterError>>,
    done: bool,
    idle: Duration,
}

/// Chunks from an SSE body, ended by `[DONE]` or a clean end of body. A gap
/// longer than `idle`, or a body cut mid-way, ends the stream with an error.
pub(super) fn json_events<T>(
    body: Incoming,
    idle: Duration,
) -> BoxStream<'static, Result<T, AdapterError>>
where
    T: DeserializeOwned + Send + 'static,
{
    let state = State {
        body: Some(body),
        parser: SseParser::new(),
        pending: VecDeque::new(),
        done: false,
        idle,
    };
    futures_util::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Some((item, st));
            }
            if st.done {
                return None;
            }
            let body = st.body.as_mut()?;
            match tokio::time::timeout(st.idle, body.frame()).await {
                Err(_) => {
                    st.done = true;
                    let err = AdapterError::Timeout {
                        phase: TimeoutPhase::Idle,
                        after: st.idle,
                    };
                    return Some((Err(err), st));
                }
                Ok(None) => {
                    st.done = true;
                    if st.parser.has_partial() {
                        let err = AdapterError::Reset {
                            message: "stream ended inside an event".into(),
                        };
                        return Some((Err(err), st));
                    }
                }
                Ok(Some(Err(err))) => {
                    st.done = true;
                    return Some((
                        Err(AdapterError::Reset {
                            message: err.to_string(),
                        }),
                        st,
                    ));
                }
                Ok(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    for event in st.parser.feed(&data) {
                        if event.data == "[DONE]" {
                            st.done = true;
                            if let Some(body) = st.body.take() {
                                tokio::spawn(drain(body));
                            }
                            break;
                        }
                        let item = parse_json(event.data.as_bytes());
                        let failed = item.is_err();
                        st.pending.push_back(item);
                        if failed {
                            st.done = true;
                            break;
                        }
                    }
                }
            }
        }
    })
    .boxed()
}

/// How long to wait for the end of a body after `[DONE]`.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Reads what follows `[DONE]` (normally just the end of the body) so the
/// connection goes back to the pool instead of being closed; the caller's
/// stream has already ended.
async fn drain(mut body: Incoming) {
    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
        while let Some(Ok(_)) = body.frame().await {}
    })
    .await;
}
