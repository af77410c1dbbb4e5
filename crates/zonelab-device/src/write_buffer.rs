//! The controller's write buffer (DRAM): writes complete once their data is here (early
//! completion); space returns when the flash program of that data completes. A full buffer
//! holds new writes back until the earliest program finishes (back-pressure).

use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use zonelab_sim::Nanos;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteBuffer {
    capacity: u64,
    /// LBAs admitted and not yet released (some have a scheduled release in `releases`).
    used: u64,
    /// (time the space frees, LBAs) for data whose program is scheduled.
    releases: BinaryHeap<Reverse<(Nanos, u64)>>,
    /// Time writes spent waiting for space, for reports.
    stalled: Nanos,
}

impl WriteBuffer {
    pub fn new(capacity_lbas: u64) -> WriteBuffer {
        assert!(capacity_lbas > 0, "write buffer without space");
        WriteBuffer {
            capacity: capacity_lbas,
            used: 0,
            releases: BinaryHeap::new(),
            stalled: Nanos::ZERO,
        }
    }

    /// Admits `lbas` of data arriving at `at`; returns when the data is in the buffer (later than
    /// `at` when space must first be freed by programs in flight).
    pub fn admit(&mut self, at: Nanos, lbas: u64) -> Nanos {
        assert!(
            lbas <= self.capacity,
            "a single write larger than the write buffer ({lbas} > {} LBAs)",
            self.capacity
        );
        // Space whose program has completed by `at` is free again.
        while let Some(&Reverse((free_at, n))) = self.releases.peek()
            && free_at <= at
        {
            self.releases.pop();
            self.used -= n;
        }
        let mut t = at;
        while self.used + lbas > self.capacity {
            let Reverse((free_at, n)) = self
                .releases
                .pop()
                .expect("write buffer full of data with no program scheduled: the device sized it below max_active partial pages");
            t = t.max(free_at);
            self.used -= n;
        }
        self.stalled += t - at;
        self.used += lbas;
        t
    }

    /// Space of `lbas` frees at `at` (their program completes then).
    pub fn release_at(&mut self, at: Nanos, lbas: u64) {
        if lbas > 0 {
            self.releases.push(Reverse((at, lbas)));
        }
    }

    /// Space of `lbas` frees at once (buffered data discarded, e.g. by a zone reset).
    pub fn discard(&mut self, lbas: u64) {
        assert!(lbas <= self.used, "discarding more than the buffer holds");
        self.used -= lbas;
    }

    /// The buffer as power returns after a power loss: it holds `lbas` (the partial pages the
    /// device keeps across the loss, reloaded from where they were saved) and no program is
    /// scheduled. Everything else was either programmed or lost.
    pub fn power_up(&mut self, lbas: u64) {
        assert!(
            lbas <= self.capacity,
            "{lbas} LBAs kept across a power loss do not fit the write buffer"
        );
        self.releases.clear();
        self.used = lbas;
    }

    /// LBAs held (admitted and not yet freed as of the last admission).
    pub fn used(&self) -> u64 {
        self.used
    }

    /// When every scheduled program has completed.
    pub fn drained_at(&self, now: Nanos) -> Nanos {
        self.releases
            .iter()
            .map(|Reverse((t, _))| *t)
            .max()
            .unwrap_or(now)
            .max(now)
    }

    /// Capacity in LBAs.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn stalled(&self) -> Nanos {
        self.stalled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_completion_until_full_then_back_pressure() {
        let mut b = WriteBuffer::new(8);
        assert_eq!(b.admit(Nanos(10), 4), Nanos(10));
        b.release_at(Nanos(500), 4);
        assert_eq!(b.admit(Nanos(20), 4), Nanos(20));
        b.release_at(Nanos(900), 4);
        // Full: the next write waits for the first program.
        assert_eq!(b.admit(Nanos(30), 4), Nanos(500));
        assert_eq!(b.stalled(), Nanos(470));
        assert_eq!(b.drained_at(Nanos(0)), Nanos(900));
    }
}
