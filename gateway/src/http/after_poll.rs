//! Work that runs right after the poll that queued it, in the same task.
//!
//! A request's bookkeeping (pricing, budgets, the latency model, its ledger
//! row) must not delay its answer, so it used to run in a task of its own.
//! But a task spawned while another worker is idle wakes that worker. An
//! HTTP/1 connection's task instead runs what its request queued at the
//! end of the poll in progress, once hyper has handed the answer to the
//! socket (all of it, unless the socket's buffer filled) and the connection
//! waits for its next request. At one request at a time (2,000 of the
//! overhead benchmark's, `/proc`'s counts) the workers' voluntary context
//! switches per request went from 4.9 to 3.0, the bare hop's.
//!
//! HTTP/2 is left as it was: a stream's task only hands its frames to the
//! connection's task, which writes them after the stream's poll ends, so
//! work run there would come before the answer is written.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A piece of queued work.
pub type Work = Box<dyn FnOnce() + Send>;

thread_local! {
    /// How many [`RunsQueued`] polls are in progress on this thread.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// Work queued by those polls, run when the outermost one ends.
    static QUEUED: RefCell<Vec<Work>> = const { RefCell::new(Vec::new()) };
}

/// Queues `work` to run when the poll in progress ends, or gives it back
/// when no [`RunsQueued`] poll is in progress on this thread (a request
/// served outside a connection's task, say), for the caller to run it
/// some other way.
pub fn queue(work: Work) -> Result<(), Work> {
    if DEPTH.get() == 0 {
        return Err(work);
    }
    QUEUED.with_borrow_mut(|queued| queued.push(work));
    Ok(())
}

pin_project_lite::pin_project! {
    /// A future whose every poll is followed by the work queued during it.
    pub struct RunsQueued<F> {
        #[pin]
        inner: F,
    }
}

impl<F: Future> RunsQueued<F> {
    pub fn new(inner: F) -> Self {
        RunsQueued { inner }
    }
}

impl<F: Future> Future for RunsQueued<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let polled = {
            let _depth = Depth::enter();
            self.project().inner.poll(cx)
        };
        if DEPTH.get() == 0 {
            run_queued();
        }
        polled
    }
}

/// One poll in progress; left even when the poll unwinds, so that a panic
/// does not leave this thread queueing work nobody runs.
struct Depth;

impl Depth {
    fn enter() -> Depth {
        DEPTH.set(DEPTH.get() + 1);
        Depth
    }
}

impl Drop for Depth {
    fn drop(&mut self) {
        let depth = DEPTH.get() - 1;
        DEPTH.set(depth);
        // The poll panicked: its work is not run during the unwind, nor
        // left waiting for the next poll on this thread (there may be none
        // before shutdown, which waits for rows); each piece gets a task.
        if depth == 0 && std::thread::panicking() {
            let queued = QUEUED.take();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                for work in queued {
                    runtime.spawn(async move { work() });
                }
            }
        }
    }
}

/// Runs everything queued, in the order queued, each piece on its own: one
/// that panics is logged, as a spawned task's panic would be, and the rest
/// still run. (Nothing is queued meanwhile: no poll is in progress.)
fn run_queued() {
    let mut queued = QUEUED.take();
    for work in queued.drain(..) {
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err() {
            tracing::error!("work queued after a request panicked");
        }
    }
    // Kept, with its room, for the next poll's work.
    QUEUED.set(queued);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Work queued in a poll runs when that poll ends, before the future
    /// is polled again; outside a poll it is given back.
    #[test]
    fn queued_work_runs_at_the_end_of_its_poll() {
        let ran = Arc::new(AtomicUsize::new(0));
        assert!(queue(Box::new(|| {})).is_err());
        let (counter, seen) = (ran.clone(), ran.clone());
        let mut polls = 0;
        let future = RunsQueued::new(std::future::poll_fn(move |cx| {
            polls += 1;
            // Each poll sees the work the poll before it queued done.
            assert_eq!(seen.load(Ordering::SeqCst), polls - 1);
            let counter = counter.clone();
            assert!(
                queue(Box::new(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                }))
                .is_ok()
            );
            assert_eq!(seen.load(Ordering::SeqCst), polls - 1);
            if polls < 3 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }));
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future);
        assert_eq!(ran.load(Ordering::SeqCst), 3);
        assert!(queue(Box::new(|| {})).is_err());
    }

    /// A piece of work that panics does not keep the others from running.
    #[test]
    fn a_panicking_piece_leaves_the_rest_to_run() {
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        let future = RunsQueued::new(async move {
            let _ = queue(Box::new(|| panic!("queued work panics")));
            let _ = queue(Box::new(move || {
                counter.fetch_add(1, Ordering::SeqCst);
            }));
        });
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future);
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }

    /// Work queued by a poll that panics is not lost: it gets a task.
    #[test]
    fn work_queued_by_a_panicking_poll_still_runs() {
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = ran.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let polled = tokio::spawn(RunsQueued::new(async move {
                let _ = queue(Box::new(move || {
                    counter.fetch_add(1, Ordering::SeqCst);
                }));
                panic!("the poll panics");
            }));
            assert!(polled.await.is_err());
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
}
