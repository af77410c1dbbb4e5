//! A resource's reservations over simulated time, with gap filling.
//!
//! An operation asks for `duration` of the resource no earlier than `earliest`; it gets the first
//! free gap that fits. Gap filling matters because operations are planned eagerly: a read that
//! must wait for a die busy programming would otherwise block the channel for everyone until the
//! program ends (NVMeVirt and SimpleSSD fill gaps for the same reason).

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use zonelab_sim::Nanos;

/// Most gaps remembered; beyond this the oldest two reservations merge (a conservative
/// approximation that keeps every reservation O(1)).
const MAX_INTERVALS: usize = 32;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timeline {
    /// Disjoint busy intervals `[start, end)`, sorted, all ending after the last pruning time.
    busy: VecDeque<(Nanos, Nanos)>,
    /// Total reserved time, for utilization.
    busy_total: Nanos,
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    /// Reserves `duration` starting at the first free moment at or after `earliest`; returns the
    /// start. `now` is the simulation's current time: reservations that ended before it are
    /// forgotten.
    pub fn reserve(&mut self, now: Nanos, earliest: Nanos, duration: Nanos) -> Nanos {
        debug_assert!(
            earliest >= now,
            "reservation in the past: {earliest} < {now}"
        );
        while matches!(self.busy.front(), Some(&(_, e)) if e <= now) {
            self.busy.pop_front();
        }
        self.busy_total += duration;
        if duration == Nanos::ZERO {
            return earliest;
        }
        // Fast path: at or after the last reservation (the common, in-order case).
        if let Some(&(_, last_end)) = self.busy.back()
            && earliest >= last_end
        {
            if earliest == last_end {
                self.busy.back_mut().expect("non-empty").1 = earliest + duration;
            } else {
                self.busy.push_back((earliest, earliest + duration));
                self.cap_intervals();
            }
            return earliest;
        }
        // Skip intervals that end before the request; then first fit.
        let mut idx = self.busy.partition_point(|&(_, e)| e <= earliest);
        let mut start = earliest;
        while idx < self.busy.len() {
            let (s, e) = self.busy[idx];
            if start + duration <= s {
                break;
            }
            start = start.max(e);
            idx += 1;
        }
        let end = start + duration;
        // Insert and coalesce with touching neighbours.
        self.busy.insert(idx, (start, end));
        if idx + 1 < self.busy.len() && self.busy[idx + 1].0 == end {
            let (_, e2) = self.busy.remove(idx + 1).expect("exists");
            self.busy[idx].1 = e2;
        }
        if idx > 0 && self.busy[idx - 1].1 == start {
            let (_, e1) = self.busy.remove(idx).expect("exists");
            self.busy[idx - 1].1 = e1;
        }
        self.cap_intervals();
        start
    }

    fn cap_intervals(&mut self) {
        if self.busy.len() > MAX_INTERVALS {
            let (_, e) = self.busy.remove(1).expect("exists");
            self.busy[0].1 = e;
        }
    }

    /// When the resource is free from then on (end of the last reservation, or `now`).
    pub fn free_after(&self, now: Nanos) -> Nanos {
        self.busy.back().map_or(now, |&(_, e)| e.max(now))
    }

    /// Whether the resource is idle at `t`.
    pub fn idle_at(&self, t: Nanos) -> bool {
        !self.busy.iter().any(|&(s, e)| s <= t && t < e)
    }

    /// Total time ever reserved.
    pub fn busy_total(&self) -> Nanos {
        self.busy_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn back_to_back_when_in_order() {
        let mut t = Timeline::new();
        assert_eq!(t.reserve(Nanos(0), Nanos(0), Nanos(10)), Nanos(0));
        assert_eq!(t.reserve(Nanos(0), Nanos(0), Nanos(10)), Nanos(10));
        assert_eq!(t.reserve(Nanos(0), Nanos(5), Nanos(10)), Nanos(20));
        assert_eq!(t.free_after(Nanos(0)), Nanos(30));
    }

    #[test]
    fn fills_gaps_before_future_reservations() {
        let mut t = Timeline::new();
        assert_eq!(t.reserve(Nanos(0), Nanos(100), Nanos(10)), Nanos(100));
        assert_eq!(t.reserve(Nanos(0), Nanos(0), Nanos(10)), Nanos(0));
        assert_eq!(t.reserve(Nanos(0), Nanos(95), Nanos(10)), Nanos(110));
        assert_eq!(t.reserve(Nanos(0), Nanos(10), Nanos(90)), Nanos(10));
        assert!(!t.idle_at(Nanos(50)));
        assert!(t.idle_at(Nanos(125)));
    }

    proptest! {
        /// Reservations never overlap and never start before they were asked to.
        #[test]
        fn reservations_are_disjoint(reqs in proptest::collection::vec((0u64..1000, 1u64..50), 1..40)) {
            let mut t = Timeline::new();
            let mut got: Vec<(u64, u64)> = Vec::new();
            for (e, d) in reqs {
                let s = t.reserve(Nanos(0), Nanos(e), Nanos(d)).0;
                prop_assert!(s >= e);
                got.push((s, s + d));
            }
            if got.len() <= MAX_INTERVALS {
                got.sort();
                for w in got.windows(2) {
                    prop_assert!(w[0].1 <= w[1].0, "overlap {:?}", w);
                }
            }
        }
    }
}
