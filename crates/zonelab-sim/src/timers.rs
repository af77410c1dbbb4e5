//! The executor's timer queue: a binary min-heap on one `u128` key.
//!
//! Timers fire in order of (deadline, order of registration). Both go into a single key,
//! `deadline << 64 | sequence number`, so ordering two timers is one 128-bit comparison instead
//! of a field-by-field one, and keys are unique (the sequence number never repeats), so the
//! order is total and independent of the heap's shape.
//!
//! Removal uses the "hole" technique (as `std`'s `BinaryHeap` does): the hole left by the
//! minimum sinks to a leaf along the smaller children, one comparison per level, and the last
//! entry is then sifted up from there, which is cheaper than sifting it down from the root
//! because it usually belongs near the bottom. (A 4-ary heap was measured: it saves levels but
//! costs three comparisons per level, more in total for the tens of timers a simulation keeps.)

use crate::Nanos;

/// Three words rather than a `u128` field, whose 16-byte alignment would pad the entry to 32
/// bytes; `key()` assembles the 128-bit key in registers.
#[derive(Clone, Copy, Debug)]
struct Entry {
    at: u64,
    seq: u64,
    /// The waker's data word of the task to wake.
    task: u64,
}

impl Entry {
    /// `deadline << 64 | sequence`.
    #[inline(always)]
    fn key(&self) -> u128 {
        ((self.at as u128) << 64) | self.seq as u128
    }
}

#[derive(Debug, Default)]
pub(crate) struct TimerQueue {
    heap: Vec<Entry>,
}

impl TimerQueue {
    pub(crate) fn new() -> TimerQueue {
        TimerQueue::default()
    }

    pub(crate) fn clear(&mut self) {
        self.heap.clear();
    }

    /// Adds a timer for `task` at `at`; `seq` must be unique and increase with registration.
    #[inline(always)]
    pub(crate) fn push(&mut self, at: Nanos, seq: u64, task: u64) {
        let entry = Entry {
            at: at.0,
            seq,
            task,
        };
        self.heap.push(entry);
        let pos = self.heap.len() - 1;
        Self::sift_up(&mut self.heap, pos, entry);
    }

    /// The earliest timer's deadline.
    pub(crate) fn peek_deadline(&self) -> Option<Nanos> {
        self.heap.first().map(|e| Nanos(e.at))
    }

    /// Removes the earliest timer; returns its deadline and task.
    #[inline(always)]
    pub(crate) fn pop(&mut self) -> Option<(Nanos, u64)> {
        let last = self.heap.pop()?;
        let Some(&top) = self.heap.first() else {
            return Some((Nanos(last.at), last.task));
        };
        // Sink the hole at the root to a leaf, always moving the smaller child up. The child is
        // picked arithmetically: which one is smaller is a coin toss a branch would mispredict.
        let heap = &mut self.heap[..];
        let len = heap.len();
        let mut hole = 0;
        let mut child = 1;
        while child + 1 < len {
            // SAFETY: `child + 1 < len`, so `child` and `child + 1` are in bounds, and so is
            // `hole`: it is 0 (len > 2 here) or an earlier `child`. This loop runs once per
            // heap level on every timer, and the bounds checks are a fifth of its work.
            unsafe {
                child += (heap.get_unchecked(child + 1).key() < heap.get_unchecked(child).key())
                    as usize;
                *heap.get_unchecked_mut(hole) = *heap.get_unchecked(child);
            }
            hole = child;
            child = 2 * hole + 1;
        }
        if child < len {
            heap[hole] = heap[child];
            hole = child;
        }
        Self::sift_up(heap, hole, last);
        Some((Nanos(top.at), top.task))
    }

    /// [`TimerQueue::pop`] out of line, for the rarer call sites.
    #[inline(never)]
    pub(crate) fn pop_cold(&mut self) -> Option<(Nanos, u64)> {
        self.pop()
    }

    /// Places `entry` at `pos` or above it, moving larger parents down.
    #[inline(always)]
    fn sift_up(heap: &mut [Entry], mut pos: usize, entry: Entry) {
        while pos > 0 {
            let parent = (pos - 1) / 2;
            if heap[parent].key() <= entry.key() {
                break;
            }
            heap[pos] = heap[parent];
            pos = parent;
        }
        heap[pos] = entry;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Timers come out sorted by (deadline, registration), whatever the interleaving of
        /// pushes and pops.
        #[test]
        fn pops_in_deadline_then_registration_order(
            ops in proptest::collection::vec(proptest::option::of(0u64..50), 1..200)
        ) {
            let mut q = TimerQueue::new();
            let mut model: Vec<(u64, u64)> = Vec::new();
            for (seq, op) in ops.into_iter().enumerate() {
                match op {
                    Some(at) => {
                        q.push(Nanos(at), seq as u64, seq as u64);
                        model.push((at, seq as u64));
                    }
                    None => {
                        model.sort();
                        let want = if model.is_empty() { None } else { Some(model.remove(0)) };
                        prop_assert_eq!(q.pop().map(|(t, task)| (t.0, task)), want);
                    }
                }
                model.sort();
                prop_assert_eq!(q.peek_deadline().map(|t| t.0), model.first().map(|m| m.0));
            }
        }
    }
}
