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

    /// Moves the deadline, whether or not the old one has passed. The next
    /// poll asks tokio again. (tokio 1.54's `is_elapsed` also reads true
    /// until a reset timer is polled again, so this type's tests pass
    /// without this line; it stays so that a wake does not rest on that
    /// detail of tokio's.)
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
        // Outside tokio's budget: with the task's budget spent, `Sleep`
        // answers `Pending` without taking the waker, and a timer noted as
        // holding it would never wake the task.
        let due = Pin::new(&mut tokio::task::unconstrained(self.sleep.as_mut())).poll(cx);
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
        fired(&mut timer).await;
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    /// Waits for the timer, failing past a minute (of paused time).
    async fn fired(timer: &mut LazyTimer) {
        let due = std::future::poll_fn(|cx| timer.poll_due(cx));
        tokio::time::timeout(Duration::from_secs(60), due)
            .await
            .expect("woken when the timer fired");
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_after_it_fired_waits_for_the_new_deadline() {
        let start = Instant::now();
        let mut timer = LazyTimer::new(start + Duration::from_secs(1));
        fired(&mut timer).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        // As a stream's idle timer is moved on after it fired early.
        timer.reset(start + Duration::from_secs(3));
        fired(&mut timer).await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
        assert_eq!(timer.deadline(), start + Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_before_it_fired_moves_the_deadline() {
        let start = Instant::now();
        let mut timer = LazyTimer::new(start + Duration::from_secs(1));
        let pending = std::future::poll_fn(|cx| Poll::Ready(timer.poll_due(cx))).await;
        assert!(pending.is_pending());
        timer.reset(start + Duration::from_secs(3));
        fired(&mut timer).await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_first_poll_with_the_budget_spent_still_hands_over_the_waker() {
        let start = Instant::now();
        let mut timer = LazyTimer::new(start + Duration::from_secs(1));
        let pending = std::future::poll_fn(|cx| {
            // Spend the task's budget, as a stream that read many frames
            // in one poll has.
            while tokio::task::coop::has_budget_remaining() {
                if let Poll::Ready(progress) = tokio::task::coop::poll_proceed(cx) {
                    progress.made_progress();
                }
            }
            Poll::Ready(timer.poll_due(cx))
        })
        .await;
        assert!(pending.is_pending());
        fired(&mut timer).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
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
