//! A future polled again only once it has woken its task. For a branch of
//! a `select!` that runs each time its task does (a connection's task runs
//! once per event of a streamed answer) but whose own answer changes
//! rarely: the drain signal. tokio's watch registers the task's waker
//! again at every poll (a lock and about 90 instructions); this asks it
//! only when it may have news, as `LazyTimer` does for a timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use pin_project_lite::pin_project;

pin_project! {
    /// `inner`, polled with a waker of its own that notes the wake and
    /// passes it on to the task that last polled.
    pub struct PolledWhenWoken<F> {
        #[pin]
        inner: F,
        signal: Arc<Signal>,
        waker: Waker,
        // The task `signal` wakes, as it was last polled.
        task: Option<Waker>,
    }
}

struct Signal {
    woken: AtomicBool,
    task: Mutex<Option<Waker>>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted before the task is woken, so the poll it runs sees it.
        self.woken.store(true, Ordering::Release);
        let task = self
            .task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl<F> PolledWhenWoken<F> {
    pub fn new(inner: F) -> Self {
        let signal = Arc::new(Signal {
            woken: AtomicBool::new(false),
            task: Mutex::new(None),
        });
        PolledWhenWoken {
            inner,
            waker: Waker::from(signal.clone()),
            signal,
            task: None,
        }
    }
}

impl<F: Future> Future for PolledWhenWoken<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let same_task = this
            .task
            .as_ref()
            .is_some_and(|task| task.will_wake(cx.waker()));
        // Taken either way: a wake from here on comes after this poll.
        let woken = this.signal.woken.swap(false, Ordering::AcqRel);
        if same_task && !woken {
            return Poll::Pending;
        }
        if !same_task {
            let task = cx.waker().clone();
            *this
                .signal
                .task
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(task.clone());
            *this.task = Some(task);
        }
        this.inner.poll(&mut Context::from_waker(this.waker))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A future that counts its polls and answers once `ready` is set,
    /// waking what last polled it when set (as a channel would).
    struct Probe {
        polls: Arc<AtomicUsize>,
        state: Arc<Mutex<(bool, Option<Waker>)>>,
    }

    impl Future for Probe {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            let mut state = self.state.lock().unwrap();
            if state.0 {
                return Poll::Ready(());
            }
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    struct Counted(AtomicUsize);
    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn polls_its_future_only_after_a_wake_or_for_another_task() {
        let polls = Arc::new(AtomicUsize::new(0));
        let state = Arc::new(Mutex::new((false, None::<Waker>)));
        let mut future = Box::pin(PolledWhenWoken::new(Probe {
            polls: polls.clone(),
            state: state.clone(),
        }));
        let first = Arc::new(Counted(AtomicUsize::new(0)));
        let first_waker = Waker::from(first.clone());
        let mut cx = Context::from_waker(&first_waker);
        // The first poll asks; those after it, with no wake, do not.
        for _ in 0..5 {
            assert!(future.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1);
        // Another task's waker: asked again, and the wake goes to it.
        let second = Arc::new(Counted(AtomicUsize::new(0)));
        let second_waker = Waker::from(second.clone());
        let mut other = Context::from_waker(&second_waker);
        assert!(future.as_mut().poll(&mut other).is_pending());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
        // The future becomes ready and wakes what it was polled with.
        let waker = {
            let mut state = state.lock().unwrap();
            state.0 = true;
            state.1.take().unwrap()
        };
        waker.wake();
        assert_eq!(second.0.load(Ordering::SeqCst), 1);
        assert_eq!(first.0.load(Ordering::SeqCst), 0);
        assert!(future.as_mut().poll(&mut other).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn ends_when_a_watch_turns_true() {
        let (tx, mut rx) = tokio::sync::watch::channel(false);
        let waiting =
            tokio::spawn(async move { PolledWhenWoken::new(rx.wait_for(|d| *d)).await.is_ok() });
        tokio::task::yield_now().await;
        tx.send(true).unwrap();
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(matches!(ended, Ok(Ok(true))));
    }
}
