//! Reading a whole HTTP body into one buffer.

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;

/// The body's bytes. A body that arrives in one frame (most JSON bodies of
/// a few kilobytes) is returned as that frame, without a copy; frames after
/// the first are joined in a buffer sized from the body's length hint.
/// `http_body_util`'s `collect` queues every frame first (a `VecDeque`
/// allocated per body) and then copies them out.
pub async fn collect<B>(body: B) -> Result<Bytes, B::Error>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let body = std::pin::pin!(body);
    match collect_at_most(body, usize::MAX).await? {
        Ok(bytes) => Ok(bytes),
        // Nothing is larger than the address space.
        Err(TooLarge) => Ok(Bytes::new()),
    }
}

/// A body longer than the limit it was read with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// As `collect`, but stops reading once the body passes `limit` bytes: a
/// peer cannot make the reader hold more than that. The body is borrowed,
/// so a caller can still read (or drop) what is left of one too large.
pub async fn collect_at_most<B>(
    mut body: std::pin::Pin<&mut B>,
    limit: usize,
) -> Result<Result<Bytes, TooLarge>, B::Error>
where
    B: hyper::body::Body<Data = Bytes>,
{
    let mut read = 0usize;
    let mut first: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    while let Some(frame) = body.frame().await {
        // Trailers carry nothing a JSON exchange uses.
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        read = read.saturating_add(data.len());
        if read > limit {
            return Ok(Err(TooLarge));
        }
        match (&mut joined, first.take()) {
            (Some(buffer), _) => buffer.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(earlier)) => {
                let rest = usize::try_from(body.size_hint().lower()).unwrap_or(0);
                let mut buffer = BytesMut::with_capacity(earlier.len() + data.len() + rest);
                buffer.extend_from_slice(&earlier);
                buffer.extend_from_slice(&data);
                joined = Some(buffer);
            }
        }
    }
    Ok(Ok(joined.map_or_else(
        || first.unwrap_or_default(),
        BytesMut::freeze,
    )))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures_util::stream;
    use http_body_util::StreamBody;
    use hyper::body::Frame;

    use super::*;

    type Frames = stream::Iter<std::vec::IntoIter<Result<Frame<Bytes>, Infallible>>>;

    fn body(parts: &[&'static str]) -> StreamBody<Frames> {
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect();
        StreamBody::new(stream::iter(frames))
    }

    #[tokio::test]
    async fn one_frame_comes_back_as_it_is() {
        let whole = collect(body(&["{\"a\":1}"])).await.unwrap();
        assert_eq!(whole, "{\"a\":1}");
        // The frame itself, not a copy of it.
        assert_eq!(whole.as_ptr(), "{\"a\":1}".as_ptr());
    }

    #[tokio::test]
    async fn frames_are_joined_in_order() {
        let whole = collect(body(&["{\"a\"", "", ":1,", "\"b\":2}"]))
            .await
            .unwrap();
        assert_eq!(whole, "{\"a\":1,\"b\":2}");
        assert_eq!(collect(body(&[])).await.unwrap(), "");
    }

    #[tokio::test]
    async fn reading_stops_past_the_limit() {
        let parts = ["0123456789", "0123456789", "0123456789"];
        assert_eq!(
            collect_at_most(std::pin::pin!(body(&parts)), 30)
                .await
                .unwrap()
                .unwrap()
                .len(),
            30
        );
        assert_eq!(
            collect_at_most(std::pin::pin!(body(&parts)), 29)
                .await
                .unwrap(),
            Err(TooLarge)
        );
    }
}
