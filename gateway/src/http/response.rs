use std::convert::Infallible;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use serde::Serialize;

/// Every response body: whole or streamed, never failing (stream errors
/// are sent as events in the stream's own dialect).
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A response with no body (202 Accepted, 405 with its `Allow`).
pub fn empty_response(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(BodyExt::boxed_unsync(
        http_body_util::Empty::<Bytes>::new().map_err(|never| match never {}),
    ));
    *response.status_mut() = status;
    response
}

pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response<Body> {
    // Serializing our own types to a Vec cannot fail (no maps with non-string keys).
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    json_bytes_response(status, Bytes::from(bytes))
}

/// A response whose body is JSON already encoded.
pub fn json_bytes_response(status: StatusCode, json: Bytes) -> Response<Body> {
    bytes_response(status, "application/json", json)
}

/// A response of `body`, whole, of the media type `content_type`.
pub fn bytes_response(
    status: StatusCode,
    content_type: &'static str,
    body: Bytes,
) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed_unsync());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    *headers = with_room_for_receipts(1);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The six decision receipts and the request id, added on the way out.
const RECEIPTS_AND_REQUEST_ID: usize = 7;

/// A header map with room for a model answer's `own` headers and those
/// added on the way out: one that starts empty grows (and rehashes) on the
/// seventh header.
fn with_room_for_receipts(own: usize) -> HeaderMap {
    HeaderMap::with_capacity(own + RECEIPTS_AND_REQUEST_ID)
}

/// A `text/event-stream` response whose events come from `events`, sent as
/// they arrive (no buffering: each event is its own frame).
pub fn sse_response<S>(events: S) -> Response<Body>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let body = StreamBody::new(events.map(|bytes| Ok::<_, Infallible>(Frame::data(bytes))));
    let mut response = Response::new(BodyExt::boxed_unsync(body));
    let headers = response.headers_mut();
    *headers = with_room_for_receipts(3);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Tells nginx-style proxies in front of us not to buffer the stream.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
