//! An upstream streamed body as a stream of decoded items: its bytes cut
//! into frames (SSE events, or AWS event-stream messages) by a [`Framer`],
//! the frames turned into items by an [`EventDecoder`].

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use futures_util::stream::BoxStream;
use http_body_util::BodyExt;
use hyper::body::{Body, Incoming};
use tokio::time::Instant;

use crate::error::{AdapterError, TimeoutPhase};
use crate::sse::{SseEvent, SseParser};
use crate::timer::LazyTimer;

/// Cuts a body into frames.
pub trait Framer: Send + 'static {
    type Frame: Send + 'static;
    /// Pushes the frames `data` completes onto `out` (the stream's buffer,
    /// kept from piece to piece rather than a new `Vec` each); an error (a
    /// malformed or oversized frame) ends the stream.
    fn feed(&mut self, data: &[u8], out: &mut Vec<Self::Frame>) -> Result<(), AdapterError>;
    /// Whether the body ended inside a frame.
    fn has_partial(&self) -> bool;
}

/// Server-sent events, none larger than a bound: a stream may be long, but
/// no single event may pass it.
pub struct SseFramer {
    parser: SseParser,
    max_event_bytes: usize,
}

impl SseFramer {
    pub fn new(max_event_bytes: usize) -> Self {
        SseFramer {
            parser: SseParser::new(),
            max_event_bytes,
        }
    }
}

impl Framer for SseFramer {
    type Frame = SseEvent;

    fn feed(&mut self, data: &[u8], out: &mut Vec<SseEvent>) -> Result<(), AdapterError> {
        let before = out.len();
        self.parser.feed_into(data, out);
        let largest = out[before..]
            .iter()
            .map(|e| e.data.len())
            .max()
            .unwrap_or(0);
        if largest.max(self.parser.pending_bytes()) > self.max_event_bytes {
            return Err(AdapterError::Protocol {
                message: format!(
                    "a streamed event is larger than {} bytes (max_response_bytes)",
                    self.max_event_bytes
                ),
            });
        }
        Ok(())
    }

    fn has_partial(&self) -> bool {
        self.parser.has_partial()
    }
}

/// Items decoded and not yet taken, in order.
pub type Items<T> = VecDeque<Result<T, AdapterError>>;

/// Turns one dialect's frames (SSE events unless said) into items.
///
/// Items go straight into the stream's queue: a `Vec` returned for each
/// event cost an allocation and one more move of each item.
pub trait EventDecoder<T, F = SseEvent>: Send + 'static {
    /// Puts the items a frame stands for at the end of `out`; whether the
    /// frame ends the stream. An error item ends the stream too.
    fn decode(&mut self, event: F, out: &mut Items<T>) -> bool;

    /// Puts the items owed when the body ends cleanly without an end event
    /// (Google's streams have none: their last usage is sent here).
    fn finish(&mut self, _out: &mut Items<T>) {}
}

/// The stream [`decode_frames`] returns, written as a `Stream` rather than
/// with `futures::stream::unfold`: unfold moves its state into a new
/// future for each item and back out with the item, copies of a few
/// hundred bytes each, several times an item (this one saved about 7,100
/// instructions of `memcpy` on a 19-event stream in callgrind's count).
struct Frames<T, F: Framer, D> {
    /// Taken when the stream's end event arrives, to drain in the background.
    body: Option<Incoming>,
    framer: F,
    /// The frames a piece of the body completed, decoded before the next
    /// piece is read (kept empty, with its room, in between).
    frames: Vec<F::Frame>,
    decoder: D,
    pending: Items<T>,
    done: bool,
    idle: Duration,
    /// One timer for the whole stream, not one per frame: it is due
    /// `idle` after the frame it was last set from, and when it fires early
    /// (frames came since) it is moved to `idle` after the latest one.
    idle_timer: LazyTimer,
    last_frame: Instant,
}

// No field is pinned in place: the body is polled through `&mut` (it is
// `Unpin`) and the timer's `Sleep` is boxed.
impl<T, F: Framer, D> Unpin for Frames<T, F, D> {}

/// Items from an SSE body, ended by the decoder or a clean end of body. A
/// gap longer than `idle`, or a body cut mid-way, ends it with an error.
pub fn decode_events<T, D>(
    body: Incoming,
    idle: Duration,
    max_event_bytes: usize,
    decoder: D,
) -> BoxStream<'static, Result<T, AdapterError>>
where
    T: Send + 'static,
    D: EventDecoder<T>,
{
    decode_frames(body, idle, SseFramer::new(max_event_bytes), decoder)
}

/// Items from a body cut into frames by `framer`, as [`decode_events`].
pub fn decode_frames<T, F, D>(
    body: Incoming,
    idle: Duration,
    framer: F,
    decoder: D,
) -> BoxStream<'static, Result<T, AdapterError>>
where
    T: Send + 'static,
    F: Framer,
    D: EventDecoder<T, F::Frame>,
{
    Box::pin(Frames {
        body: Some(body),
        framer,
        frames: Vec::new(),
        decoder,
        pending: VecDeque::new(),
        done: false,
        idle,
        idle_timer: LazyTimer::new(Instant::now() + idle),
        last_frame: Instant::now(),
    })
}

impl<T, F, D> Stream for Frames<T, F, D>
where
    F: Framer,
    D: EventDecoder<T, F::Frame>,
{
    type Item = Result<T, AdapterError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let st = self.get_mut();
        loop {
            if let Some(item) = st.pending.pop_front() {
                return Poll::Ready(Some(item));
            }
            if st.done {
                return Poll::Ready(None);
            }
            let Some(body) = st.body.as_mut() else {
                return Poll::Ready(None);
            };
            // Tokio's budget, as the `select!` this replaced kept it: a
            // task that has used up its share yields here, even when the
            // body has a frame ready (hyper's body does not count it).
            let coop = std::task::ready!(tokio::task::coop::poll_proceed(cx));
            // The body first, then the timer (a frame that is ready wins
            // over a timer due at the same moment).
            let frame = match Pin::new(body).poll_frame(cx) {
                Poll::Ready(frame) => {
                    coop.made_progress();
                    Ok(frame)
                }
                Poll::Pending => match st.idle_timer.poll_due(cx) {
                    Poll::Ready(()) => Err(()),
                    Poll::Pending => return Poll::Pending,
                },
            };
            if frame.is_ok() {
                st.last_frame = Instant::now();
            }
            match frame {
                Err(()) if st.last_frame.elapsed() < st.idle => {
                    let due = st.last_frame + st.idle;
                    st.idle_timer.reset(due);
                }
                Err(()) => {
                    st.done = true;
                    return Poll::Ready(Some(Err(AdapterError::Timeout {
                        phase: TimeoutPhase::Idle,
                        after: st.idle,
                    })));
                }
                Ok(None) => {
                    st.done = true;
                    if st.framer.has_partial() {
                        return Poll::Ready(Some(Err(AdapterError::Reset {
                            message: "stream ended inside an event".into(),
                        })));
                    }
                    st.decoder.finish(&mut st.pending);
                }
                Ok(Some(Err(err))) => {
                    st.done = true;
                    return Poll::Ready(Some(Err(AdapterError::Reset {
                        message: err.to_string(),
                    })));
                }
                Ok(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    if let Err(err) = st.framer.feed(&data, &mut st.frames) {
                        st.frames.clear();
                        st.done = true;
                        st.body = None;
                        return Poll::Ready(Some(Err(err)));
                    }
                    for event in st.frames.drain(..) {
                        let before = st.pending.len();
                        let end = st.decoder.decode(event, &mut st.pending);
                        let failed = st.pending.range(before..).any(Result::is_err);
                        if end || failed {
                            st.done = true;
                            if let Some(body) = st.body.take() {
                                tokio::spawn(drain(body));
                            }
                            break;
                        }
                    }
                }
            }
        }
    }
}

/// How long to wait for the end of a body after the stream's last event.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Reads what follows the last event (normally just the end of the body) so
/// the connection goes back to the pool instead of being closed; the
/// caller's stream has already ended.
async fn drain(mut body: Incoming) {
    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
        while let Some(Ok(_)) = body.frame().await {}
    })
    .await;
}
