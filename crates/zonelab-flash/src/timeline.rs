//! A resource's reservations over simulated time, with gap filling.
//!
//! An operation asks for `duration` of the resource no earlier than `earliest`; it gets the first
//! free gap that fits. Gap filling matters because operations are planned eagerly: a read that
//! must wait for a die busy programming would otherwise block the channel for everyone until the
//! program ends (NVMeVirt and SimpleSSD fill gaps for the same reason).

use serde::{Deserialize, Serialize};
use zonelab_sim::Nanos;

/// Most live intervals remembered; beyond this the oldest two merge (conservative: the gap
/// between them counts as busy). Queued zone_compaction copies keep many on a die or channel
/// at once: with 16 remembered, 1,200 read-and-program chunk copies on 32 dies over 8
/// channels took twice the simulated time their dies' work needs, as the merged gaps pushed
/// reads and transfers later (the ZNS+ device test
/// `a_large_compaction_over_shared_channels_keeps_the_dies_busy`).
const MAX_INTERVALS: usize = 256;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(try_from = "TimelineFields")]
pub struct Timeline {
    /// Disjoint busy intervals `[start, end)`, sorted; entries before `head` are forgotten.
    /// A plain vector with a moving head: cheaper than a ring buffer for the short lists here.
    busy: Vec<(Nanos, Nanos)>,
    head: usize,
    /// Total reserved time, for utilization.
    busy_total: Nanos,
}

/// The serialized fields of a [`Timeline`], in order.
#[derive(Deserialize)]
struct TimelineFields {
    busy: Vec<(Nanos, Nanos)>,
    head: usize,
    busy_total: Nanos,
}

impl TryFrom<TimelineFields> for Timeline {
    type Error = String;
    /// Refuses fields no timeline could have (a corrupt device image): a head past the list,
    /// or live intervals reversed, overlapping or out of order.
    fn try_from(f: TimelineFields) -> Result<Timeline, String> {
        let live = f
            .busy
            .get(f.head..)
            .ok_or_else(|| format!("timeline starts at interval {} of {}", f.head, f.busy.len()))?;
        if let Some((s, e)) = live.iter().find(|(s, e)| s > e) {
            return Err(format!(
                "timeline interval ends before it starts: [{s}, {e})"
            ));
        }
        if let Some(w) = live.windows(2).find(|w| w[0].1 > w[1].0) {
            return Err(format!(
                "timeline intervals overlap or are out of order: [{}, {}) then [{}, {})",
                w[0].0, w[0].1, w[1].0, w[1].1
            ));
        }
        Ok(Timeline {
            busy: f.busy,
            head: f.head,
            busy_total: f.busy_total,
        })
    }
}

impl Timeline {
    pub fn new() -> Timeline {
        Timeline::default()
    }

    fn live(&self) -> &[(Nanos, Nanos)] {
        &self.busy[self.head..]
    }

    /// Reserves `duration` starting at the first free moment at or after `earliest`; returns the
    /// start. `now` is the simulation's current time: reservations that ended before it are
    /// forgotten.
    ///
    /// Most reservations take one of the short paths (after or during the last reservation);
    /// gap filling is out of line in [`Timeline::reserve_in_gap`].
    #[inline(always)]
    pub fn reserve(&mut self, now: Nanos, earliest: Nanos, duration: Nanos) -> Nanos {
        debug_assert!(
            earliest >= now,
            "reservation in the past: {earliest} < {now}"
        );
        self.forget_before(now);
        self.busy_total += duration;
        if duration == Nanos::ZERO {
            return earliest;
        }
        match self.busy.last_mut() {
            // At or after the end of the last reservation (the in-order case).
            Some(last) if earliest >= last.1 => {
                if earliest == last.1 {
                    last.1 = earliest + duration;
                } else {
                    self.push_interval(earliest, duration);
                }
                earliest
            }
            // During the last reservation: no gap can start early enough, so queue right
            // behind it (what first fit finds too; a busy resource's common case).
            Some(last) if earliest >= last.0 => {
                let start = last.1;
                last.1 = start + duration;
                start
            }
            None => {
                self.busy.push((earliest, earliest + duration));
                earliest
            }
            Some(_) => self.reserve_in_gap(earliest, duration),
        }
    }

    /// Drops the intervals that ended by `now`.
    #[inline(always)]
    fn forget_before(&mut self, now: Nanos) {
        let len = self.busy.len();
        let mut head = self.head;
        while head < len && self.busy[head].1 <= now {
            head += 1;
        }
        if head == len {
            self.busy.clear();
            self.head = 0;
        } else {
            self.head = head;
            if head >= MAX_INTERVALS {
                self.compact();
            }
        }
    }

    /// Drops the forgotten intervals from the front of the list.
    #[inline(never)]
    fn compact(&mut self) {
        self.busy.drain(..self.head);
        self.head = 0;
    }

    /// Appends a reservation that starts after the last one ends.
    #[inline]
    fn push_interval(&mut self, start: Nanos, duration: Nanos) {
        self.busy.push((start, start + duration));
        self.cap_intervals();
    }

    /// First fit for a request that starts before the end of the last reservation.
    #[inline(never)]
    fn reserve_in_gap(&mut self, earliest: Nanos, duration: Nanos) -> Nanos {
        // Skip the intervals that end by the request (ends increase along the list, so a
        // binary search: a deep copy queue keeps up to `MAX_INTERVALS` live); then first fit.
        let mut idx = self.head + self.live().partition_point(|&(_, e)| e <= earliest);
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
        let touches_next = idx < self.busy.len() && self.busy[idx].0 == end;
        let touches_prev = idx > self.head && self.busy[idx - 1].1 == start;
        match (touches_prev, touches_next) {
            (true, true) => {
                self.busy[idx - 1].1 = self.busy[idx].1;
                self.busy.remove(idx);
            }
            (true, false) => self.busy[idx - 1].1 = end,
            (false, true) => self.busy[idx].0 = start,
            (false, false) => {
                self.busy.insert(idx, (start, end));
                self.cap_intervals();
            }
        }
        start
    }

    /// Merges the two oldest live intervals when there are too many. The merged interval
    /// replaces the second one and the head moves past the first: no element moves.
    fn cap_intervals(&mut self) {
        if self.busy.len() - self.head > MAX_INTERVALS {
            let h = self.head;
            self.busy[h + 1].0 = self.busy[h].0;
            self.head += 1;
        }
    }

    /// Drops every reservation from `at` on, cutting one that spans `at` short: the work was
    /// aborted (a power loss at `at`). The reserved total shrinks by the time given back.
    pub fn cancel_after(&mut self, at: Nanos) {
        while self.busy.len() > self.head {
            let last = self.busy.len() - 1;
            let (s, e) = self.busy[last];
            if e <= at {
                break;
            }
            let keep_from = s.max(at);
            self.busy_total = self.busy_total.saturating_sub(e - keep_from);
            if s >= at {
                self.busy.pop();
            } else {
                self.busy[last].1 = at;
                break;
            }
        }
        if self.head >= self.busy.len() {
            self.busy.clear();
            self.head = 0;
        }
    }

    /// When the resource is free from then on (end of the last reservation, or `now`).
    pub fn free_after(&self, now: Nanos) -> Nanos {
        self.live().last().map_or(now, |&(_, e)| e.max(now))
    }

    /// The earliest start at or after `from` of a free span of `duration`, without reserving
    /// it. Reservations forgotten before the last [`Timeline::reserve`]'s `now` count as free,
    /// so `from` should not be earlier than that.
    pub fn first_fit(&self, from: Nanos, duration: Nanos) -> Nanos {
        let mut start = from;
        for &(s, e) in self.live() {
            if e <= start {
                continue;
            }
            if start + duration <= s {
                break;
            }
            start = start.max(e);
        }
        start
    }

    /// Whether the resource is idle at `t`.
    pub fn idle_at(&self, t: Nanos) -> bool {
        !self.live().iter().any(|&(s, e)| s <= t && t < e)
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
    fn first_fit_finds_gaps_without_reserving() {
        let mut t = Timeline::new();
        t.reserve(Nanos(0), Nanos(10), Nanos(10));
        t.reserve(Nanos(0), Nanos(30), Nanos(10));
        assert_eq!(t.first_fit(Nanos(0), Nanos(10)), Nanos(0));
        assert_eq!(t.first_fit(Nanos(5), Nanos(10)), Nanos(20));
        assert_eq!(t.first_fit(Nanos(5), Nanos(11)), Nanos(40));
        assert_eq!(t.first_fit(Nanos(45), Nanos(11)), Nanos(45));
        assert_eq!(t.busy_total(), Nanos(20));
    }

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

    #[test]
    fn cancel_after_gives_back_the_aborted_time() {
        let mut t = Timeline::new();
        t.reserve(Nanos(0), Nanos(0), Nanos(10));
        t.reserve(Nanos(0), Nanos(20), Nanos(10));
        t.reserve(Nanos(0), Nanos(40), Nanos(10));
        t.cancel_after(Nanos(25));
        assert_eq!(t.busy_total(), Nanos(15));
        assert_eq!(t.free_after(Nanos(0)), Nanos(25));
        assert!(t.idle_at(Nanos(45)));
        // Nothing after the cut: unchanged; everything after: empty.
        t.cancel_after(Nanos(100));
        assert_eq!(t.busy_total(), Nanos(15));
        t.cancel_after(Nanos(0));
        assert_eq!(t.busy_total(), Nanos(0));
        assert_eq!(t.free_after(Nanos(3)), Nanos(3));
        assert_eq!(t.reserve(Nanos(0), Nanos(0), Nanos(5)), Nanos(0));
    }

    /// A timeline's fields are checked when it is read back: a corrupt one is refused, not
    /// used (and sliced out of range) later.
    #[test]
    fn corrupt_fields_are_refused() {
        let fields = |busy: Vec<(u64, u64)>, head| TimelineFields {
            busy: busy
                .into_iter()
                .map(|(s, e)| (Nanos(s), Nanos(e)))
                .collect(),
            head,
            busy_total: Nanos(0),
        };
        assert!(Timeline::try_from(fields(vec![(0, 10), (10, 20)], 1)).is_ok());
        let err = |f| Timeline::try_from(f).expect_err("corrupt");
        assert!(err(fields(vec![(0, 10)], 2)).contains("interval 2 of 1"));
        assert!(err(fields(vec![(10, 5)], 0)).contains("ends before it starts"));
        assert!(err(fields(vec![(0, 10), (5, 20)], 0)).contains("overlap"));
        // Forgotten intervals are not checked.
        assert!(Timeline::try_from(fields(vec![(9, 1), (0, 10)], 1)).is_ok());
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
