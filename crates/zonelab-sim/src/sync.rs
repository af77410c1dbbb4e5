//! Simulated synchronization for tasks on the [`Sim`](crate::Sim) executor.
//!
//! All primitives are single-threaded (`Rc`/`RefCell`) and FIFO-fair, so which waiter runs
//! first is a deterministic function of the order in which tasks arrived.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Waiters registered in arrival order; each has a ticket so a woken waiter knows it was chosen.
/// Tickets rise along the queue, so a waiter is found by binary search: a lock many tasks wait
/// for costs each of them O(log n), not a walk of the queue, when it is polled again or leaves.
#[derive(Default)]
struct WaitQueue {
    next_ticket: Cell<u64>,
    waiters: RefCell<VecDeque<(u64, Waker)>>,
}

impl WaitQueue {
    fn register(&self, waker: &Waker) -> u64 {
        let t = self.next_ticket.get();
        self.next_ticket.set(t + 1);
        self.waiters.borrow_mut().push_back((t, waker.clone()));
        t
    }
    fn update(&self, ticket: u64, waker: &Waker) {
        let mut waiters = self.waiters.borrow_mut();
        if let Ok(i) = waiters.binary_search_by_key(&ticket, |w| w.0) {
            waiters[i].1.clone_from(waker);
        }
    }
    fn remove(&self, ticket: u64) {
        let mut waiters = self.waiters.borrow_mut();
        if let Ok(i) = waiters.binary_search_by_key(&ticket, |w| w.0) {
            waiters.remove(i);
        }
    }
    fn front(&self) -> Option<u64> {
        self.waiters.borrow().front().map(|(t, _)| *t)
    }
    fn wake_front(&self) {
        if let Some((_, w)) = self.waiters.borrow().front() {
            w.wake_by_ref();
        }
    }
}

/// Wakes tasks waiting for an event. `notify_one` stores a permit if nobody waits.
#[derive(Clone, Default)]
pub struct Notify {
    inner: Rc<NotifyInner>,
}

/// A waiting task: its arrival number (rising along the queue, for a binary search), its
/// "notified" flag, its waker.
type NotifyWaiter = (u64, Rc<Cell<bool>>, Waker);

#[derive(Default)]
struct NotifyInner {
    permit: Cell<bool>,
    /// Arrival number of the next waiter.
    next_seq: Cell<u64>,
    waiters: RefCell<VecDeque<NotifyWaiter>>,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    /// Wakes the longest-waiting task, or leaves a permit for the next `notified()`.
    pub fn notify_one(&self) {
        let w = self.inner.waiters.borrow_mut().pop_front();
        match w {
            Some((_, flag, waker)) => {
                flag.set(true);
                waker.wake();
            }
            None => self.inner.permit.set(true),
        }
    }

    /// Wakes every task waiting now.
    pub fn notify_all(&self) {
        let ws: Vec<_> = self.inner.waiters.borrow_mut().drain(..).collect();
        for (_, flag, waker) in ws {
            flag.set(true);
            waker.wake();
        }
    }

    pub fn notified(&self) -> Notified {
        Notified {
            notify: self.clone(),
            waiting: None,
        }
    }

    /// Number of tasks waiting.
    pub fn waiters(&self) -> usize {
        self.inner.waiters.borrow().len()
    }
}

/// Future returned by [`Notify::notified`].
pub struct Notified {
    notify: Notify,
    /// Once registered: its arrival number and its "notified" flag.
    waiting: Option<(u64, Rc<Cell<bool>>)>,
}

impl Notified {
    /// Where this waiter is in the queue (it is there until notified).
    fn position(&self, seq: u64) -> Option<usize> {
        self.notify
            .inner
            .waiters
            .borrow()
            .binary_search_by_key(&seq, |w| w.0)
            .ok()
    }
}

impl Future for Notified {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match &self.waiting {
            None => {
                let inner = &self.notify.inner;
                if inner.permit.replace(false) {
                    return Poll::Ready(());
                }
                let flag = Rc::new(Cell::new(false));
                let seq = inner.next_seq.get();
                inner.next_seq.set(seq + 1);
                inner
                    .waiters
                    .borrow_mut()
                    .push_back((seq, flag.clone(), cx.waker().clone()));
                self.waiting = Some((seq, flag));
                Poll::Pending
            }
            Some((_, flag)) if flag.get() => Poll::Ready(()),
            Some((seq, _)) => {
                if let Some(i) = self.position(*seq) {
                    self.notify.inner.waiters.borrow_mut()[i]
                        .2
                        .clone_from(cx.waker());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        if let Some((seq, flag)) = &self.waiting
            && !flag.get()
            && let Some(i) = self.position(*seq)
        {
            self.notify.inner.waiters.borrow_mut().remove(i);
        }
    }
}

/// A counting semaphore with FIFO admission: a large request is not overtaken by small ones.
#[derive(Clone)]
pub struct Semaphore {
    inner: Rc<SemInner>,
}

struct SemInner {
    permits: Cell<u64>,
    queue: WaitQueue,
}

impl Semaphore {
    pub fn new(permits: u64) -> Semaphore {
        Semaphore {
            inner: Rc::new(SemInner {
                permits: Cell::new(permits),
                queue: WaitQueue::default(),
            }),
        }
    }

    pub fn available(&self) -> u64 {
        self.inner.permits.get()
    }

    /// Waits until `n` permits are free and takes them; they return when the guard drops.
    pub fn acquire(&self, n: u64) -> Acquire {
        Acquire {
            sem: self.clone(),
            n,
            ticket: None,
        }
    }

    /// Takes `n` permits now if they are free and nobody waits ahead; `None` otherwise.
    pub fn try_acquire(&self, n: u64) -> Option<SemaphorePermit> {
        let free = self.inner.queue.front().is_none() && self.inner.permits.get() >= n;
        free.then(|| {
            self.inner.permits.set(self.inner.permits.get() - n);
            SemaphorePermit {
                sem: self.clone(),
                n,
            }
        })
    }

    fn release(&self, n: u64) {
        self.inner.permits.set(self.inner.permits.get() + n);
        self.inner.queue.wake_front();
    }
}

/// Future returned by [`Semaphore::acquire`].
pub struct Acquire {
    sem: Semaphore,
    n: u64,
    ticket: Option<u64>,
}

impl Future for Acquire {
    type Output = SemaphorePermit;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<SemaphorePermit> {
        let sem = self.sem.clone();
        let q = &sem.inner.queue;
        let first = match self.ticket {
            None => q.front().is_none(),
            Some(t) => q.front() == Some(t),
        };
        if first && sem.inner.permits.get() >= self.n {
            sem.inner.permits.set(sem.inner.permits.get() - self.n);
            if let Some(t) = self.ticket.take() {
                q.remove(t);
            }
            // The next waiter may fit in what is left.
            q.wake_front();
            return Poll::Ready(SemaphorePermit {
                sem: sem.clone(),
                n: self.n,
            });
        }
        match self.ticket {
            None => {
                let t = q.register(cx.waker());
                self.ticket = Some(t);
            }
            Some(t) => q.update(t, cx.waker()),
        }
        Poll::Pending
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            let q = &self.sem.inner.queue;
            let was_front = q.front() == Some(t);
            q.remove(t);
            if was_front {
                q.wake_front();
            }
        }
    }
}

/// Permits held from a [`Semaphore`]; released on drop.
pub struct SemaphorePermit {
    sem: Semaphore,
    n: u64,
}

impl Drop for SemaphorePermit {
    fn drop(&mut self) {
        self.sem.release(self.n);
    }
}

/// An async mutex: FIFO, held across `.await` points (as F2FS holds its locks across I/O).
pub struct Mutex<T> {
    sem: Semaphore,
    value: RefCell<T>,
}

impl<T> Mutex<T> {
    pub fn new(value: T) -> Mutex<T> {
        Mutex {
            sem: Semaphore::new(1),
            value: RefCell::new(value),
        }
    }

    pub async fn lock(&self) -> MutexGuard<'_, T> {
        let permit = self.sem.acquire(1).await;
        MutexGuard {
            _permit: permit,
            value: self.value.borrow_mut(),
        }
    }

    pub fn is_locked(&self) -> bool {
        self.sem.available() == 0
    }
}

/// Access to a locked [`Mutex`].
pub struct MutexGuard<'a, T> {
    // Field order: the borrow ends before the permit is handed to the next waiter.
    value: std::cell::RefMut<'a, T>,
    _permit: SemaphorePermit,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}
impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

/// A one-shot channel: one value from a sender to a receiver.
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let slot = Rc::new(RefCell::new(OneshotSlot {
        value: None,
        waker: None,
        sender_gone: false,
    }));
    (
        OneshotSender { slot: slot.clone() },
        OneshotReceiver { slot },
    )
}

struct OneshotSlot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    sender_gone: bool,
}

pub struct OneshotSender<T> {
    slot: Rc<RefCell<OneshotSlot<T>>>,
}

impl<T> OneshotSender<T> {
    pub fn send(self, value: T) {
        let mut s = self.slot.borrow_mut();
        s.value = Some(value);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        let mut s = self.slot.borrow_mut();
        s.sender_gone = true;
        if let Some(w) = s.waker.take() {
            w.wake();
        }
    }
}

pub struct OneshotReceiver<T> {
    slot: Rc<RefCell<OneshotSlot<T>>>,
}

/// The sender was dropped without sending.
#[derive(Debug, PartialEq, Eq)]
pub struct Canceled;

impl<T> Future for OneshotReceiver<T> {
    type Output = Result<T, Canceled>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, Canceled>> {
        let mut s = self.slot.borrow_mut();
        if let Some(v) = s.value.take() {
            return Poll::Ready(Ok(v));
        }
        if s.sender_gone {
            return Poll::Ready(Err(Canceled));
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Nanos, Sim};

    #[test]
    fn mutex_is_fifo_and_exclusive() {
        let sim = Sim::new();
        let m = Rc::new(Mutex::new(Vec::new()));
        let (s, m2) = (sim.clone(), m.clone());
        sim.block_on(async move {
            let mut hs = Vec::new();
            for i in 0..5u64 {
                let (s2, m3) = (s.clone(), m2.clone());
                hs.push(s.spawn(async move {
                    let mut g = m3.lock().await;
                    let start = s2.now();
                    s2.sleep(Nanos(10)).await;
                    g.push((i, start.0));
                }));
            }
            for h in hs {
                h.await;
            }
        })
        .unwrap();
        let v = m.value.borrow().clone();
        assert_eq!(v, vec![(0, 0), (1, 10), (2, 20), (3, 30), (4, 40)]);
    }

    #[test]
    fn try_acquire_takes_only_free_permits() {
        let s = Semaphore::new(2);
        let a = s.try_acquire(2).expect("free");
        assert!(s.try_acquire(1).is_none());
        drop(a);
        assert_eq!(s.available(), 2);
        assert!(s.try_acquire(3).is_none());
        let _b = s.try_acquire(1).expect("free");
        assert_eq!(s.available(), 1);
    }

    #[test]
    fn semaphore_bounds_concurrency() {
        let sim = Sim::new();
        let sem = Semaphore::new(2);
        let s = sim.clone();
        let end = sim
            .block_on(async move {
                let mut hs = Vec::new();
                for _ in 0..6 {
                    let (s2, sem2) = (s.clone(), sem.clone());
                    hs.push(s.spawn(async move {
                        let _p = sem2.acquire(1).await;
                        s2.sleep(Nanos(100)).await;
                    }));
                }
                for h in hs {
                    h.await;
                }
                s.now()
            })
            .unwrap();
        assert_eq!(end, Nanos(300));
    }

    #[test]
    fn notify_permit_and_all() {
        let sim = Sim::new();
        let n = Notify::new();
        let s = sim.clone();
        let woke = sim
            .block_on(async move {
                n.notify_one();
                n.notified().await; // consumes the permit
                let mut hs = Vec::new();
                for _ in 0..3 {
                    let n2 = n.clone();
                    hs.push(s.spawn(async move { n2.notified().await }));
                }
                s.sleep(Nanos(5)).await;
                assert_eq!(n.waiters(), 3);
                n.notify_all();
                for h in hs {
                    h.await;
                }
                s.now()
            })
            .unwrap();
        assert_eq!(woke, Nanos(5));
    }

    /// A waiter that leaves the middle of a queue (its future dropped) is skipped, and one
    /// polled again stays in its place: the others are served in arrival order.
    #[test]
    fn waiters_leaving_or_polled_again_keep_the_queue_order() {
        let mut cx = Context::from_waker(Waker::noop());
        let sem = Semaphore::new(0);
        let mut a = Box::pin(sem.acquire(1));
        let mut b = Box::pin(sem.acquire(1));
        let mut c = Box::pin(sem.acquire(1));
        for f in [&mut a, &mut b, &mut c] {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        drop(b);
        assert!(
            c.as_mut().poll(&mut cx).is_pending(),
            "polled again, still waiting"
        );
        sem.release(1);
        assert!(c.as_mut().poll(&mut cx).is_pending(), "a is ahead");
        assert!(matches!(a.as_mut().poll(&mut cx), Poll::Ready(_)));
        sem.release(1);
        assert!(matches!(c.as_mut().poll(&mut cx), Poll::Ready(_)));
        assert!(sem.inner.queue.waiters.borrow().is_empty());

        let n = Notify::new();
        let mut x = Box::pin(n.notified());
        let mut y = Box::pin(n.notified());
        let mut z = Box::pin(n.notified());
        for f in [&mut x, &mut y, &mut z] {
            assert!(f.as_mut().poll(&mut cx).is_pending());
        }
        assert!(z.as_mut().poll(&mut cx).is_pending());
        drop(y);
        assert_eq!(n.waiters(), 2);
        n.notify_one();
        assert!(z.as_mut().poll(&mut cx).is_pending(), "x is first");
        assert!(x.as_mut().poll(&mut cx).is_ready());
        n.notify_one();
        assert!(z.as_mut().poll(&mut cx).is_ready());
        assert_eq!(n.waiters(), 0);
    }

    #[test]
    fn oneshot_delivers_or_cancels() {
        let sim = Sim::new();
        let s = sim.clone();
        let r = sim
            .block_on(async move {
                let (tx, rx) = oneshot::<u32>();
                let s2 = s.clone();
                s.spawn(async move {
                    s2.sleep(Nanos(7)).await;
                    tx.send(42);
                });
                let v = rx.await;
                let (tx2, rx2) = oneshot::<u32>();
                drop(tx2);
                (v, rx2.await)
            })
            .unwrap();
        assert_eq!(r, (Ok(42), Err(Canceled)));
    }
}
