//! A timed script of stream items, played back as a stream: each item waits
//! its delay, then is yielded. Holding the backend's slot until the end.

use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::error::AdapterError;

pub type Script<T> = Vec<(Duration, Result<T, AdapterError>)>;

/// Plays `script`; the permit (a decode slot) is released when the stream
/// ends or is dropped (the client went away).
pub fn play<T: Send + 'static>(
    script: Script<T>,
    permit: OwnedSemaphorePermit,
) -> BoxStream<'static, Result<T, AdapterError>> {
    futures_util::stream::unfold(
        (script.into_iter(), permit),
        |(mut items, permit)| async move {
            let (delay, item) = items.next()?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Some((item, (items, permit)))
        },
    )
    .boxed()
}

/// Cuts a script half way and ends it with a reset, as a dropped connection would.
pub fn cut_with_reset<T>(script: &mut Script<T>) {
    script.truncate(script.len() / 2);
    script.push((
        Duration::ZERO,
        Err(AdapterError::Reset {
            message: "simulated connection reset mid-stream".into(),
        }),
    ));
}
