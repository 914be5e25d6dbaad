//! A timer that a stream or connection checks each time it is polled, but
//! that asks tokio only when tokio may have something new to say.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use tokio::time::{Instant, Sleep};

/// A deadline checked on every poll of whatever it guards (a stream's
/// idle time, a connection's idle time).
///
/// Polling a tokio `Sleep` registers the task's waker with the timer each
/// time, about 150 instructions, and a streamed answer polls its guards
/// once per event. Once the timer holds this task's waker it will wake the
/// task when it fires, so until then (`Sleep::is_elapsed`) there is
/// nothing to ask it. It is polled again after a reset, or when another
/// task (another waker) polls it.
pub struct LazyTimer {
    sleep: Pin<Box<Sleep>>,
    /// The waker the timer was last polled with, since it was last set.
    registered: Option<Waker>,
}

impl LazyTimer {
    pub fn new(deadline: Instant) -> Self {
        LazyTimer {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            registered: None,
        }
    }

    pub fn deadline(&self) -> Instant {
        self.sleep.deadline()
    }

    /// Moves the deadline, whether or not the old one has passed.
    pub fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.registered = None;
    }

    /// Ready once the deadline has passed.
    pub fn poll_due(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let waits_for_this_task = self
            .registered
            .as_ref()
            .is_some_and(|waker| waker.will_wake(cx.waker()));
        if waits_for_this_task && !self.sleep.is_elapsed() {
            return Poll::Pending;
        }
        let due = self.sleep.as_mut().poll(cx);
        if due.is_pending() {
            self.registered = Some(cx.waker().clone());
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fires_once_due_after_polls_that_skipped_the_timer() {
        let mut timer = LazyTimer::new(Instant::now() + Duration::from_secs(5));
        // Many polls before the deadline, all from this task: only the
        // first registers with tokio, and all are pending.
        for _ in 0..3 {
            let pending = std::future::poll_fn(|cx| Poll::Ready(timer.poll_due(cx))).await;
            assert!(pending.is_pending());
        }
        // Woken by the timer itself, not by another poll.
        let started = Instant::now();
        let due = std::future::poll_fn(|cx| timer.poll_due(cx));
        tokio::time::timeout(Duration::from_secs(60), due)
            .await
            .expect("woken when the timer fired");
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_moves_the_deadline_a_registered_timer_had() {
        let start = Instant::now();
        let mut timer = LazyTimer::new(start + Duration::from_secs(1));
        let pending = std::future::poll_fn(|cx| Poll::Ready(timer.poll_due(cx))).await;
        assert!(pending.is_pending());
        timer.reset(start + Duration::from_secs(3));
        let due = std::future::poll_fn(|cx| timer.poll_due(cx));
        tokio::time::timeout(Duration::from_secs(60), due)
            .await
            .expect("woken when the timer fired");
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        assert_eq!(timer.deadline(), start + Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn another_task_polling_it_is_woken_too() {
        let mut timer = LazyTimer::new(Instant::now() + Duration::from_secs(2));
        let pending = std::future::poll_fn(|cx| Poll::Ready(timer.poll_due(cx))).await;
        assert!(pending.is_pending());
        // Handed to another task, which must get the wake-up.
        let other = tokio::spawn(async move {
            std::future::poll_fn(|cx| timer.poll_due(cx)).await;
        });
        tokio::time::timeout(Duration::from_secs(10), other)
            .await
            .expect("the other task was woken when the timer fired")
            .unwrap();
    }
}
