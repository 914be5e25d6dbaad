//! Priority classes in a backend's queue. Interactive requests (a person
//! waits: chat, code, agentic, rag, or a request that names no profile)
//! are served ahead of unattended ones, and those ahead of batch lines. A
//! batch line also leaves the backend's reserve of slots
//! (`interactive_reserve`) free for interactive requests still to come; the
//! reserve never holds the last slot, so a one-slot server drains a batch
//! between interactive requests.
//!
//! Interactive requests wait in the backend's semaphore itself (first come,
//! first served). The lower classes wait beside it, each in a queue of its
//! own (first come, first served too), whose head takes a free slot only
//! when no higher class is waiting: it is woken whenever a slot comes free
//! or a class stops waiting, and looks again.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use switchyard_policies::Profile;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A request's place in a backend's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Interactive,
    Unattended,
    Batch,
}

impl Class {
    /// The class of a request of `profile` (none named: a person waits).
    pub fn of(profile: Option<Profile>) -> Class {
        match profile {
            Some(Profile::Unattended) => Class::Unattended,
            Some(Profile::Batch) => Class::Batch,
            _ => Class::Interactive,
        }
    }

    /// The class of a request: a batch line's is batch whatever its
    /// profile (its route may name one for its budgets), else its
    /// profile's.
    pub fn of_request(profile: Option<Profile>, batch_line: bool) -> Class {
        if batch_line {
            Class::Batch
        } else {
            Class::of(profile)
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Who waits for one backend's slots, by class.
#[derive(Debug, Default)]
pub struct Classes {
    waiting: [AtomicUsize; 3],
    /// Slots batch lines leave free.
    reserve: AtomicUsize,
    /// Told when a slot comes free or a class stops waiting.
    changed: Notify,
    /// The unattended and the batch queues: the head of each (holding its
    /// turn) looks for a slot; the rest wait for their turn, in order.
    turns: [tokio::sync::Mutex<()>; 2],
}

impl Classes {
    pub fn new(reserve: usize) -> Self {
        let classes = Classes::default();
        classes.set_reserve(reserve);
        classes
    }

    /// The reserve under a new config (the classes, and who waits, stay).
    pub fn set_reserve(&self, reserve: usize) {
        self.reserve.store(reserve, Ordering::Release);
    }

    /// Wakes the lower classes to look again (slots added, the reserve
    /// lowered).
    pub fn wake(&self) {
        self.changed.notify_waiters();
    }

    /// Requests of `class` waiting now.
    pub fn waiting(&self, class: Class) -> usize {
        self.waiting[class.index()].load(Ordering::Acquire)
    }

    /// Whether a request of `class` may take a free slot of `limit` now.
    fn may_take(&self, class: Class, limit: &Semaphore) -> bool {
        let none_waiting = |above: &[Class]| above.iter().all(|c| self.waiting(*c) == 0);
        match class {
            Class::Interactive => true,
            Class::Unattended => none_waiting(&[Class::Interactive]),
            Class::Batch => {
                none_waiting(&[Class::Interactive, Class::Unattended])
                    && limit.available_permits() > self.reserve.load(Ordering::Acquire)
            }
        }
    }

    /// A free slot of `limit` at once, if `class` may take one.
    pub fn try_take(self: &Arc<Self>, class: Class, limit: &Arc<Semaphore>) -> Option<Slot> {
        if !self.may_take(class, limit) {
            return None;
        }
        let permit = limit.clone().try_acquire_owned().ok()?;
        Some(Slot::new(permit, self))
    }

    /// Waits for a slot of `limit` (the caller bounds the wait). `None`
    /// when the semaphore is closed.
    pub async fn take(self: &Arc<Self>, class: Class, limit: &Arc<Semaphore>) -> Option<Slot> {
        let _waiting = Waiting::new(self, class);
        if class == Class::Interactive {
            let permit = limit.clone().acquire_owned().await.ok()?;
            return Some(Slot::new(permit, self));
        }
        // First come, first served within the class (tokio's mutex is
        // fair): only the head of its queue looks for a slot.
        let _turn = self.turns[class.index() - 1].lock().await;
        loop {
            // Registered before looking, so a slot freed between the look
            // and the wait still wakes it.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(slot) = self.try_take(class, limit) {
                return Some(slot);
            }
            changed.await;
        }
    }
}

/// A request counted as waiting in its class while it waits; when it
/// stops (served, or given up), the classes below look again.
struct Waiting<'a> {
    classes: &'a Classes,
    class: Class,
}

impl<'a> Waiting<'a> {
    fn new(classes: &'a Classes, class: Class) -> Self {
        classes.waiting[class.index()].fetch_add(1, Ordering::AcqRel);
        Waiting { classes, class }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.classes.waiting[self.class.index()].fetch_sub(1, Ordering::AcqRel);
        self.classes.changed.notify_waiters();
    }
}

/// A backend slot a request holds while it runs; given back, it wakes the
/// lower classes to look again.
#[derive(Debug)]
pub struct Slot {
    permit: Option<OwnedSemaphorePermit>,
    classes: Arc<Classes>,
}

impl Slot {
    fn new(permit: OwnedSemaphorePermit, classes: &Arc<Classes>) -> Self {
        Slot {
            permit: Some(permit),
            classes: Arc::clone(classes),
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        drop(self.permit.take());
        self.classes.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn setup(slots: usize, reserve: usize) -> (Arc<Classes>, Arc<Semaphore>) {
        (
            Arc::new(Classes::new(reserve)),
            Arc::new(Semaphore::new(slots)),
        )
    }

    #[test]
    fn profiles_fall_in_three_classes() {
        assert_eq!(Class::of(None), Class::Interactive);
        assert_eq!(Class::of(Some(Profile::Code)), Class::Interactive);
        assert_eq!(Class::of(Some(Profile::Unattended)), Class::Unattended);
        assert_eq!(Class::of(Some(Profile::Batch)), Class::Batch);
    }

    #[test]
    fn batch_lines_leave_the_reserve_free() {
        let (classes, limit) = setup(4, 1);
        let held: Vec<Slot> = (0..3)
            .map(|_| classes.try_take(Class::Batch, &limit).unwrap())
            .collect();
        assert!(
            classes.try_take(Class::Batch, &limit).is_none(),
            "the reserve"
        );
        assert!(classes.try_take(Class::Interactive, &limit).is_some());
        drop(held);
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_highest_class_waiting() {
        let (classes, limit) = setup(1, 0);
        let running = classes.try_take(Class::Batch, &limit).unwrap();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        // Batch first, then unattended, then interactive: served the other
        // way round.
        for class in [Class::Batch, Class::Unattended, Class::Interactive] {
            let (mine, limit, order) = (classes.clone(), limit.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let slot = mine.take(class, &limit).await.unwrap();
                order.lock().unwrap().push(class);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(slot);
            }));
            // Each is waiting before the next comes.
            while classes.waiting(class) == 0 {
                tokio::task::yield_now().await;
            }
        }
        drop(running);
        for task in tasks {
            task.await.unwrap();
        }
        let served = order.lock().unwrap().clone();
        assert_eq!(
            served,
            [Class::Interactive, Class::Unattended, Class::Batch]
        );
    }
}
