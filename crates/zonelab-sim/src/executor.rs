//! The deterministic single-threaded executor.
//!
//! Tasks are polled in FIFO order of their wake-ups; timers fire in order of (deadline, order of
//! registration). Time only moves when no task is ready, and then jumps straight to the next
//! deadline, so a simulated second with a thousand events costs a thousand polls, not a second.
//!
//! Wakers carry the task's slot and generation in their data word and push it onto the ready
//! queue of the executor running on this thread; no allocation per wake-up.

use crate::Nanos;
use crate::timers::TimerQueue;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

// Task keys (slot and generation) are packed into a waker's pointer-sized data word.
const _: () = assert!(
    usize::BITS >= 64,
    "ZoneLab's executor needs a 64-bit target"
);

type TaskFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Task handle packed into a waker's data word: slot in the low 32 bits, generation above.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct TaskKey(u64);

impl TaskKey {
    fn new(slot: usize, generation: u32) -> TaskKey {
        TaskKey(((generation as u64) << 32) | slot as u64)
    }
    fn slot(self) -> usize {
        (self.0 & 0xFFFF_FFFF) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

struct Slot {
    generation: u32,
    future: Option<TaskFuture>,
    queued: bool,
}

struct Inner {
    now: Cell<Nanos>,
    seq: Cell<u64>,
    polls: Cell<u64>,
    slots: RefCell<Vec<Slot>>,
    free: RefCell<Vec<usize>>,
    ready: RefCell<VecDeque<TaskKey>>,
    timers: RefCell<TimerQueue>,
    /// Tasks spawned while the executor is polling another task.
    spawned: RefCell<Vec<(usize, TaskFuture)>>,
    live: Cell<usize>,
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Inner>>> = const { RefCell::new(None) };
}

/// Counters of the executor's work, for reports and benchmarks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Task polls performed.
    pub polls: u64,
    /// Timers registered.
    pub timers: u64,
}

/// A handle on the simulation: clock, timers and task spawning. Cheap to clone.
#[derive(Clone)]
pub struct Sim {
    inner: Rc<Inner>,
}

impl Default for Sim {
    fn default() -> Self {
        Sim::new()
    }
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_waker, wake, wake, drop_waker);

fn clone_waker(data: *const ()) -> RawWaker {
    RawWaker::new(data, &VTABLE)
}
fn wake(data: *const ()) {
    let key = TaskKey(data as usize as u64);
    CURRENT.with(|c| {
        if let Some(inner) = c.borrow().as_ref() {
            inner.schedule(key);
        }
    });
}
fn drop_waker(_: *const ()) {}

fn waker_for(key: TaskKey) -> Waker {
    // SAFETY: the data word is a plain integer never dereferenced; the vtable functions only
    // copy it or hand it to the thread's executor, which checks slot and generation.
    unsafe { Waker::from_raw(RawWaker::new(key.0 as usize as *const (), &VTABLE)) }
}

impl Inner {
    fn schedule(&self, key: TaskKey) {
        let mut slots = self.slots.borrow_mut();
        if let Some(slot) = slots.get_mut(key.slot())
            && slot.generation == key.generation()
            && !slot.queued
        {
            slot.queued = true;
            self.ready.borrow_mut().push_back(key);
        }
    }
}

impl Sim {
    pub fn new() -> Sim {
        Sim {
            inner: Rc::new(Inner {
                now: Cell::new(Nanos::ZERO),
                seq: Cell::new(0),
                polls: Cell::new(0),
                slots: RefCell::new(Vec::new()),
                free: RefCell::new(Vec::new()),
                ready: RefCell::new(VecDeque::new()),
                timers: RefCell::new(TimerQueue::new()),
                spawned: RefCell::new(Vec::new()),
                live: Cell::new(0),
            }),
        }
    }

    /// A simulation whose clock starts at `t` (continuing a device image's time line).
    pub fn starting_at(t: Nanos) -> Sim {
        let sim = Sim::new();
        sim.inner.now.set(t);
        sim
    }

    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        self.inner.now.get()
    }

    pub fn stats(&self) -> SimStats {
        SimStats {
            polls: self.inner.polls.get(),
            timers: self.inner.seq.get(),
        }
    }

    /// Resolves when simulated time reaches `at` (at once if it already has).
    pub fn sleep_until(&self, at: Nanos) -> Sleep<'_> {
        Sleep {
            sim: self,
            at,
            registered: false,
        }
    }

    /// Resolves after `span` of simulated time.
    pub fn sleep(&self, span: Nanos) -> Sleep<'_> {
        self.sleep_until(self.now() + span)
    }

    /// Lets every other ready task run before this one continues, without moving time.
    pub fn yield_now(&self) -> YieldNow {
        YieldNow { yielded: false }
    }

    #[inline(always)]
    fn add_timer(&self, at: Nanos, waker: &Waker) {
        let seq = self.inner.seq.get();
        self.inner.seq.set(seq + 1);
        self.inner
            .timers
            .borrow_mut()
            .push(at, seq, waker.data() as usize as u64);
    }

    /// Starts `future` as a new simulated thread. It first runs after the caller yields.
    pub fn spawn<T: 'static>(&self, future: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = Rc::new(RefCell::new(JoinState {
            output: None,
            waiter: None,
        }));
        let st = state.clone();
        let task: TaskFuture = Box::pin(async move {
            let out = future.await;
            let mut s = st.borrow_mut();
            s.output = Some(out);
            if let Some(w) = s.waiter.take() {
                w.wake();
            }
        });
        let slot = self.alloc_slot();
        self.inner.spawned.borrow_mut().push((slot, task));
        JoinHandle { state }
    }

    fn alloc_slot(&self) -> usize {
        let mut slots = self.inner.slots.borrow_mut();
        let slot = match self.inner.free.borrow_mut().pop() {
            Some(s) => s,
            None => {
                slots.push(Slot {
                    generation: 0,
                    future: None,
                    queued: false,
                });
                slots.len() - 1
            }
        };
        assert!(slot < u32::MAX as usize, "too many simulated tasks");
        let generation = slots[slot].generation;
        slots[slot].queued = true;
        self.inner
            .ready
            .borrow_mut()
            .push_back(TaskKey::new(slot, generation));
        self.inner.live.set(self.inner.live.get() + 1);
        slot
    }

    /// Moves tasks spawned since the last call into their slots.
    #[inline]
    fn install_spawned(&self) {
        if !self.inner.spawned.borrow().is_empty() {
            self.install_spawned_slow();
        }
    }

    #[inline(never)]
    fn install_spawned_slow(&self) {
        let mut spawned = self.inner.spawned.borrow_mut();
        let mut slots = self.inner.slots.borrow_mut();
        for (slot, fut) in spawned.drain(..) {
            slots[slot].future = Some(fut);
        }
    }

    /// Runs the simulation until `main` completes and returns its output. Other tasks still
    /// pending at that moment are dropped. Fails if `main` can never complete (every task waits
    /// on something no timer or task will deliver).
    pub fn block_on<T: 'static>(
        &self,
        main: impl Future<Output = T> + 'static,
    ) -> Result<T, Deadlock> {
        let handle = self.spawn(main);
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.inner.clone()));
        let result = self.run_loop(&handle);
        CURRENT.with(|c| *c.borrow_mut() = previous);
        // Drop leftover tasks so their resources (and Rc cycles through Sim) are released.
        let leftovers: Vec<_> = self
            .inner
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| s.future.take())
            .collect();
        drop(leftovers);
        self.inner.spawned.borrow_mut().clear();
        self.inner.ready.borrow_mut().clear();
        self.inner.timers.borrow_mut().clear();
        result
    }

    fn run_loop<T>(&self, handle: &JoinHandle<T>) -> Result<T, Deadlock> {
        // `main`'s output appears only when the poll of its task completes it, so the handle is
        // looked at only after polls that complete a task.
        let finished = || handle.state.borrow_mut().output.take();
        loop {
            self.install_spawned();
            loop {
                let key = self.inner.ready.borrow_mut().pop_front();
                let Some(key) = key else { break };
                if self.poll_task(key)
                    && let Some(out) = finished()
                {
                    return Ok(out);
                }
            }
            // Nothing ready: jump to the next deadline and wake everything due then.
            let mut timers = self.inner.timers.borrow_mut();
            let Some((at, task)) = timers.pop() else {
                return Err(Deadlock {
                    at: self.now(),
                    tasks: self.inner.live.get(),
                });
            };
            debug_assert!(at >= self.now(), "timer in the past");
            let now = at.max(self.now());
            self.inner.now.set(now);
            if timers.peek_deadline().is_none_or(|t| t > now) {
                // One task wakes and none is ready: the ready queue would hold just this task,
                // so poll it at once (the same poll, without the queue's round trip).
                drop(timers);
                if self.poll_task(TaskKey(task))
                    && let Some(out) = finished()
                {
                    return Ok(out);
                }
                continue;
            }
            self.inner.schedule(TaskKey(task));
            while timers.peek_deadline().is_some_and(|t| t <= now) {
                let (_, task) = timers.pop_cold().expect("peeked");
                self.inner.schedule(TaskKey(task));
            }
        }
    }

    /// Runs the simulation up to virtual time `limit` and returns, keeping every task and
    /// timer for the next call (where [`Sim::block_on`] runs one future to its end and drops
    /// the rest). Ready tasks run, timers due by `limit` fire in order, and the clock then
    /// stands at `limit` (or stays where it is if it was already later). For a simulation fed
    /// from outside between calls: the FUSE mount spawns a task per kernel request and moves
    /// the model forward as far as its pacing allows ([`Sim::next_deadline`] says how far the
    /// next event is). Tasks spawned before the call first run in it.
    pub fn run_until(&self, limit: Nanos) {
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.inner.clone()));
        loop {
            self.install_spawned();
            loop {
                let key = self.inner.ready.borrow_mut().pop_front();
                let Some(key) = key else { break };
                self.poll_task(key);
            }
            let mut timers = self.inner.timers.borrow_mut();
            match timers.peek_deadline() {
                Some(at) if at <= limit => {
                    let now = at.max(self.now());
                    self.inner.now.set(now);
                    while timers.peek_deadline().is_some_and(|t| t <= now) {
                        let (_, task) = timers.pop_cold().expect("peeked");
                        self.inner.schedule(TaskKey(task));
                    }
                }
                _ => break,
            }
        }
        if limit > self.now() {
            self.inner.now.set(limit);
        }
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }

    /// When the earliest pending timer fires, if any: the next moment anything happens in the
    /// simulation unless a task is spawned or woken from outside.
    pub fn next_deadline(&self) -> Option<Nanos> {
        self.inner.timers.borrow().peek_deadline()
    }

    /// Tasks spawned and not yet finished.
    pub fn live_tasks(&self) -> usize {
        self.inner.live.get()
    }

    /// Polls the task `key` names (nothing if it has completed since); true when this poll
    /// completed it.
    #[inline(always)]
    fn poll_task(&self, key: TaskKey) -> bool {
        let slot = key.slot();
        let fut = {
            let mut slots = self.inner.slots.borrow_mut();
            let s = &mut slots[slot];
            if s.generation != key.generation() {
                return false;
            }
            s.queued = false;
            match s.future.take() {
                Some(f) => f,
                None => {
                    // Spawned during this round and not yet installed: install now.
                    drop(slots);
                    self.install_spawned();
                    let mut slots = self.inner.slots.borrow_mut();
                    match slots[slot].future.take() {
                        Some(f) => f,
                        None => return false,
                    }
                }
            }
        };
        let mut fut = fut;
        self.inner.polls.set(self.inner.polls.get() + 1);
        let waker = waker_for(key);
        let mut cx = Context::from_waker(&waker);
        let done = fut.as_mut().poll(&mut cx).is_ready();
        // Dropping this waker does nothing (`drop_waker`); skip the call through its vtable.
        std::mem::forget(waker);
        let mut slots = self.inner.slots.borrow_mut();
        if done {
            let s = &mut slots[slot];
            s.generation = s.generation.wrapping_add(1);
            s.queued = false;
            drop(slots);
            drop(fut);
            self.inner.free.borrow_mut().push(slot);
            self.inner.live.set(self.inner.live.get() - 1);
        } else {
            slots[slot].future = Some(fut);
        }
        done
    }
}

/// `block_on` found the main task waiting with nothing left that could wake it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deadlock {
    pub at: Nanos,
    pub tasks: usize,
}

impl std::fmt::Display for Deadlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "simulation deadlock at {}: {} task(s) wait and nothing can wake them",
            self.at, self.tasks
        )
    }
}
impl std::error::Error for Deadlock {}

/// Future returned by [`Sim::sleep_until`]. It borrows the [`Sim`] rather than cloning its
/// handle: sleeps are the most frequent future of a simulation.
pub struct Sleep<'a> {
    sim: &'a Sim,
    at: Nanos,
    registered: bool,
}

impl Future for Sleep<'_> {
    type Output = ();
    #[inline(always)]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.sim.now() >= self.at {
            return Poll::Ready(());
        }
        if !self.registered {
            self.registered = true;
            let at = self.at;
            self.sim.add_timer(at, cx.waker());
        }
        Poll::Pending
    }
}

/// Future returned by [`Sim::yield_now`].
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            Poll::Ready(())
        } else {
            self.yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

struct JoinState<T> {
    output: Option<T>,
    waiter: Option<Waker>,
}

/// Awaits a spawned task's output.
pub struct JoinHandle<T> {
    state: Rc<RefCell<JoinState<T>>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.state.borrow_mut();
        match s.output.take() {
            Some(v) => Poll::Ready(v),
            None => {
                s.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[test]
    fn sleep_advances_virtual_time_only() {
        let sim = Sim::new();
        let s = sim.clone();
        let t = sim
            .block_on(async move {
                s.sleep(Nanos::from_secs(3600)).await;
                s.now()
            })
            .unwrap();
        assert_eq!(t, Nanos::from_secs(3600));
    }

    #[test]
    fn tasks_interleave_by_deadline_then_registration() {
        let sim = Sim::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        let (s, l) = (sim.clone(), log.clone());
        sim.block_on(async move {
            let mut hs = Vec::new();
            for (i, d) in [30u64, 10, 20, 10].into_iter().enumerate() {
                let (s2, l2) = (s.clone(), l.clone());
                hs.push(s.spawn(async move {
                    s2.sleep(Nanos(d)).await;
                    l2.borrow_mut().push((s2.now().0, i));
                    i
                }));
            }
            let mut sum = 0;
            for h in hs {
                sum += h.await;
            }
            sum
        })
        .unwrap();
        assert_eq!(*log.borrow(), vec![(10, 1), (10, 3), (20, 2), (30, 0)]);
    }

    #[test]
    fn run_until_steps_time_and_keeps_tasks() {
        let sim = Sim::new();
        let log = Rc::new(RefCell::new(Vec::new()));
        for d in [10u64, 30] {
            let (s, l) = (sim.clone(), log.clone());
            sim.spawn(async move {
                s.sleep(Nanos(d)).await;
                l.borrow_mut().push(s.now().0);
            });
        }
        assert_eq!(sim.live_tasks(), 2);
        sim.run_until(Nanos(5));
        assert_eq!(sim.now(), Nanos(5));
        assert!(log.borrow().is_empty());
        assert_eq!(sim.next_deadline(), Some(Nanos(10)));
        sim.run_until(Nanos(20));
        assert_eq!((sim.now(), log.borrow().clone()), (Nanos(20), vec![10]));
        // A task spawned between calls starts at the current time.
        let (s, l) = (sim.clone(), log.clone());
        sim.spawn(async move {
            s.sleep(Nanos(1)).await;
            l.borrow_mut().push(s.now().0);
        });
        sim.run_until(Nanos(20));
        assert_eq!(sim.next_deadline(), Some(Nanos(21)));
        sim.run_until(Nanos(100));
        assert_eq!(*log.borrow(), vec![10, 21, 30]);
        assert_eq!(
            (sim.now(), sim.live_tasks(), sim.next_deadline()),
            (Nanos(100), 0, None)
        );
        // The clock never goes back.
        sim.run_until(Nanos(50));
        assert_eq!(sim.now(), Nanos(100));
    }

    #[test]
    fn deadlock_is_reported() {
        let sim = Sim::new();
        let n = crate::sync::Notify::new();
        let err = sim
            .block_on(async move {
                n.notified().await;
            })
            .unwrap_err();
        assert_eq!(err.tasks, 1);
    }

    #[test]
    fn many_tasks_reuse_slots() {
        let sim = Sim::new();
        let s = sim.clone();
        let total = sim
            .block_on(async move {
                let mut acc = 0u64;
                for round in 0..100u64 {
                    let s2 = s.clone();
                    acc += s
                        .spawn(async move {
                            s2.sleep(Nanos(round)).await;
                            round
                        })
                        .await;
                }
                acc
            })
            .unwrap();
        assert_eq!(total, 4950);
        assert!(sim.inner.slots.borrow().len() <= 3);
    }
}
