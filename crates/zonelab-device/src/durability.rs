//! What survives a power loss (issue 4 item 6): the bookkeeping behind
//! [`ZonedDevice::power_cut`](crate::ZonedDevice::power_cut) and
//! [`ConventionalDevice::power_cut`](crate::ConventionalDevice::power_cut).
//!
//! The model applies a command to its state when the command is submitted, and a write
//! completes as soon as its data is in the controller's DRAM write buffer (early completion),
//! long before the flash program that makes it persistent. What a power loss keeps depends on
//! the profile's `controller.power_loss_protection`:
//!
//! * With power-loss protection (capacitors), the drive finishes the buffered work on stored
//!   energy, so every write it accepted survives; NVMe drives like this report no volatile write
//!   cache (Identify Controller VWC = 0). The model needs no bookkeeping for it.
//! * Without it, the buffer is volatile: data is durable once the flash program holding it has
//!   completed, or once a Flush submitted after it has completed (NVMe Base Specification,
//!   Flush command: data in a volatile write cache is made non-volatile before the command
//!   completes).
//!
//! The write path is hot, so the bookkeeping is small and pruned as virtual time passes (every
//! command's `now` is at most the time of any later power cut, so what is durable by `now` stays
//! durable):
//!
//! * [`SeqDurability`]: per sequential zone that holds data not yet durable, a durable base plus
//!   a short queue of `(time, blocks)` events, "from `time` on, the first `blocks` blocks of the
//!   zone are durable" — one per page program or flush, dropped once `time` has passed. Zones
//!   whose data is all durable have no entry.
//! * [`UndoLog`]: per random write (conventional zones, conventional namespace) not yet durable,
//!   the blocks it replaced, to put back if the write is lost. Records are dropped once durable,
//!   so the log holds about as much data as the write buffer.

use crate::payload::{DataStore, PayloadMode, Prior};
use crate::zone::ZoneId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use zonelab_sim::Nanos;

/// What a power cut did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PowerCutReport {
    /// Logical blocks whose last write was lost (sequential zones: blocks past the write
    /// pointer's new position; random writes: blocks put back to older contents).
    pub lost_blocks: u64,
    /// Sequential zones whose write pointer fell back, in zone order.
    pub rolled_back: Vec<ZoneId>,
    /// Zones the controller finished at power-up because closing them would have exceeded the
    /// active-zone limit (see [`ZoneSet::power_up`](crate::zone::ZoneSet::power_up)).
    pub finished_by_controller: Vec<ZoneId>,
}

/// A sequential zone with data that may not be durable yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PendingZone {
    zone: u32,
    /// Blocks from the zone start that are durable at any time from the last prune on.
    base: u64,
    /// `(t, n)`: from `t` on, the first `n` blocks are durable. Both grow along the queue.
    events: VecDeque<(Nanos, u64)>,
    /// Programs placed ahead of the durable prefix's frontier, as `from -> (to, done)`: the
    /// chips start a zone's queued copies as each becomes free, not in block order, and a
    /// program counts towards the prefix once every block before it has one.
    #[serde(default)]
    ahead: BTreeMap<u64, (u64, Nanos)>,
}

impl PendingZone {
    /// Blocks whose durability is settled or scheduled.
    fn covered(&self) -> u64 {
        self.events.back().map_or(self.base, |e| e.1)
    }

    /// Blocks durable at `at` (not before the last prune).
    fn durable_at(&self, at: Nanos) -> u64 {
        self.events
            .iter()
            .rev()
            .find(|e| e.0 <= at)
            .map_or(self.base, |e| e.1)
    }

    /// Blocks `from..to` are programmed by `done`: they join the durable prefix at once if
    /// they continue it, else once the blocks before them do.
    fn program(&mut self, done: Nanos, from: u64, to: u64) {
        self.ahead.insert(from, (to, done));
        self.join_ahead();
    }

    /// The programs ahead that now continue the prefix join it (in block order, so the
    /// prefix's time is the latest of its programs').
    fn join_ahead(&mut self) {
        while let Some((&from, &(to, done))) = self.ahead.first_key_value()
            && from <= self.covered()
        {
            self.ahead.remove(&from);
            self.push(done, to);
        }
    }

    fn prune(&mut self, now: Nanos) {
        while let Some(&(t, n)) = self.events.front()
            && t <= now
        {
            self.base = n;
            self.events.pop_front();
        }
    }

    /// The first `n` blocks are durable from `t` on — and not before the blocks ahead of them
    /// are, so an event earlier than the last one joins it (pages of a zone are programmed on
    /// several dies and may complete out of order; the durable part is a prefix).
    fn push(&mut self, t: Nanos, n: u64) {
        match self.events.back_mut() {
            Some(last) if t <= last.0 => last.1 = last.1.max(n),
            _ => {
                if n > self.covered() {
                    self.events.push_back((t, n));
                }
            }
        }
    }
}

/// Durability of the sequential zones of a device without power-loss protection.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct SeqDurability {
    /// Zones with data that may not be durable, in no particular (but deterministic) order.
    pending: Vec<PendingZone>,
    /// Per zone: 1 + its index in `pending`, or 0. Sized on first use.
    slot: Vec<u32>,
    /// Round-robin position for pruning zones that are no longer written.
    cursor: u32,
    /// Latest time written data was in the buffer (a flush saves partial pages after it).
    last_in_buffer: Nanos,
}

impl SeqDurability {
    fn index(&self, zone: u32) -> Option<usize> {
        match self.slot.get(zone as usize) {
            Some(&s) if s > 0 => Some(s as usize - 1),
            _ => None,
        }
    }

    fn remove_at(&mut self, i: usize) {
        let gone = self.pending.swap_remove(i);
        self.slot[gone.zone as usize] = 0;
        if let Some(moved) = self.pending.get(i) {
            self.slot[moved.zone as usize] = i as u32 + 1;
        }
    }

    /// Blocks are about to be written to `zone`, which holds `held` blocks, all durable unless
    /// the zone has an entry; their data is in the buffer at `in_buffer`. Prunes this zone and
    /// one other (`written` gives every zone's blocks, to drop entries that became durable).
    pub(crate) fn writing(
        &mut self,
        now: Nanos,
        zone: u32,
        held: u64,
        in_buffer: Nanos,
        written: impl Fn(u32) -> u64,
        zones: usize,
    ) {
        self.last_in_buffer = self.last_in_buffer.max(in_buffer);
        if self.slot.len() < zones {
            self.slot.resize(zones, 0);
        }
        match self.index(zone) {
            Some(i) => self.pending[i].prune(now),
            None => {
                self.pending.push(PendingZone {
                    zone,
                    base: held,
                    events: VecDeque::new(),
                    ahead: BTreeMap::new(),
                });
                self.slot[zone as usize] = self.pending.len() as u32;
            }
        }
        // Zones no longer written are pruned one per write, round-robin.
        let n = self.pending.len() as u32;
        if n > 1 {
            let i = (self.cursor % n) as usize;
            self.cursor = self.cursor.wrapping_add(1);
            let p = &mut self.pending[i];
            if p.zone != zone {
                p.prune(now);
                if p.events.is_empty() && p.base >= written(p.zone) {
                    self.remove_at(i);
                }
            }
        }
    }

    /// Blocks `from..to` of `zone` are on flash once a program completing at `done` has, and
    /// the zone's blocks before them once theirs have. The zone has an entry (its data was
    /// written, and the entry stays while any block of it has no program).
    pub(crate) fn programmed(&mut self, zone: u32, done: Nanos, from: u64, to: u64) {
        let i = self
            .index(zone)
            .expect("a zone being programmed was written");
        self.pending[i].program(done, from, to);
    }

    /// The zone's data no longer needs tracking (reset, or finish: a management command counts
    /// as completed once submitted).
    pub(crate) fn forget(&mut self, zone: u32) {
        if let Some(i) = self.index(zone) {
            self.remove_at(i);
        }
    }

    /// Zones holding blocks that nothing has scheduled to become durable (a partial page in the
    /// buffer), in zone order, with their block count.
    pub(crate) fn unscheduled(&self, written: impl Fn(u32) -> u64) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .pending
            .iter()
            .filter(|p| written(p.zone) > p.covered())
            .map(|p| p.zone)
            .collect();
        v.sort_unstable();
        v
    }

    /// When data written before a flush is all in the buffer.
    pub(crate) fn last_in_buffer(&self) -> Nanos {
        self.last_in_buffer
    }

    /// When every block written so far is durable by the programs and flushes already
    /// scheduled (`Nanos::ZERO` if nothing is pending): a flush must not complete earlier,
    /// even when an earlier flush already scheduled the programs it waits for. A zone whose
    /// newest blocks nothing covers yet counts its last scheduled event, which the flush's own
    /// event joins ([`PendingZone::push`]).
    pub(crate) fn scheduled_by(&self, written: impl Fn(u32) -> u64) -> Nanos {
        self.pending
            .iter()
            .filter_map(|p| {
                let w = written(p.zone);
                p.events
                    .iter()
                    .find(|e| e.1 >= w)
                    .or(p.events.back())
                    .map(|e| e.0)
            })
            .max()
            .unwrap_or(Nanos::ZERO)
    }

    /// A Flush completing at `done` makes every block written so far durable then.
    pub(crate) fn flushed(&mut self, now: Nanos, done: Nanos, written: impl Fn(u32) -> u64) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            p.prune(now);
            let w = written(p.zone);
            if p.events.is_empty() && p.base >= w {
                self.remove_at(i);
                continue;
            }
            p.push(done, w);
            p.join_ahead();
            i += 1;
        }
    }

    /// Blocks of each tracked zone durable at `at`, in zone order; forgets everything.
    pub(crate) fn take_at(&mut self, at: Nanos) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .pending
            .iter()
            .map(|p| (p.zone, p.durable_at(at)))
            .collect();
        v.sort_unstable();
        *self = SeqDurability::default();
        v
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Zones tracked and events held (memory bounds in tests).
    #[cfg(test)]
    pub(crate) fn size(&self) -> (usize, usize) {
        (
            self.pending.len(),
            self.pending.iter().map(|p| p.events.len()).sum(),
        )
    }

    /// Consistency of a loaded image: `written` gives a zone's blocks, `None` for a zone that
    /// does not exist or is not sequential.
    pub(crate) fn check(
        &self,
        zones: usize,
        written: impl Fn(u32) -> Option<u64>,
    ) -> Result<(), String> {
        if !self.slot.is_empty() && self.slot.len() != zones {
            return Err(format!(
                "durability slots for {} zones, the device has {zones}",
                self.slot.len()
            ));
        }
        for (i, p) in self.pending.iter().enumerate() {
            let Some(w) = written(p.zone) else {
                return Err(format!(
                    "durability kept for zone {}, not a sequential zone",
                    p.zone
                ));
            };
            if self.slot.get(p.zone as usize) != Some(&(i as u32 + 1)) {
                return Err(format!("durability of zone {} is not indexed", p.zone));
            }
            let mut last = (Nanos::ZERO, p.base);
            for (k, &(t, n)) in p.events.iter().enumerate() {
                if n <= last.1 || (k > 0 && t <= last.0) {
                    return Err(format!("durability events of zone {} out of order", p.zone));
                }
                last = (t, n);
            }
            if last.1 > w {
                return Err(format!(
                    "zone {}: {} blocks durable of {w} written",
                    p.zone, last.1
                ));
            }
            if let Some((&from, &(to, _))) = p.ahead.iter().next_back()
                && to > w
            {
                return Err(format!(
                    "zone {}: blocks {from}..{to} programmed of {w} written",
                    p.zone
                ));
            }
            if p.ahead.keys().next().is_some_and(|&from| from <= last.1)
                || p.ahead.iter().any(|(&from, &(to, _))| to <= from)
            {
                return Err(format!(
                    "zone {}: programs ahead of its durable prefix out of order",
                    p.zone
                ));
            }
        }
        let indexed = self.slot.iter().filter(|&&s| s > 0).count();
        if indexed != self.pending.len() {
            return Err(format!(
                "{indexed} zones indexed for durability, {} tracked",
                self.pending.len()
            ));
        }
        Ok(())
    }
}

/// One random write that may not be durable yet.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct UndoRecord {
    zone: u32,
    off: u64,
    /// The blocks it replaced.
    prior: Prior,
    /// When its data is on flash (once `open` is false).
    durable_at: Nanos,
    /// Its blocks wait in a partial page with no program scheduled.
    open: bool,
}

/// Undo records of random writes on a device without power-loss protection, oldest first.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct UndoLog {
    records: VecDeque<UndoRecord>,
    /// Records left by the last full pass of [`UndoLog::prune`].
    #[serde(default)]
    compacted: usize,
}

/// Records kept before [`UndoLog::prune`] looks past the oldest one.
const UNDO_COMPACT_MIN: usize = 64;

impl UndoLog {
    /// Drops the records durable by `now`: the oldest ones at once, and, when the log has
    /// doubled since the last full pass, every durable one (programs complete out of order, so
    /// a slow oldest record must not hold the rest). Amortized O(1) per record; the log stays
    /// within about twice the data not yet durable.
    pub(crate) fn prune(&mut self, now: Nanos) {
        while let Some(r) = self.records.front()
            && !r.open
            && r.durable_at <= now
        {
            self.records.pop_front();
        }
        if self.records.len() > UNDO_COMPACT_MIN.max(2 * self.compacted) {
            self.records.retain(|r| r.open || r.durable_at > now);
            self.compacted = self.records.len();
        }
    }

    /// Records a write of `prior.len()` blocks at `off` of `zone`, durable at `durable_at`
    /// unless `open`.
    pub(crate) fn push(
        &mut self,
        zone: u32,
        off: u64,
        prior: Prior,
        durable_at: Nanos,
        open: bool,
    ) {
        self.records.push_back(UndoRecord {
            zone,
            off,
            prior,
            durable_at,
            open,
        });
    }

    /// The partial page the newest writes wait in is programmed, completing at `done`.
    pub(crate) fn page_programmed(&mut self, done: Nanos) {
        for r in self.records.iter_mut().rev() {
            if !r.open {
                break;
            }
            r.open = false;
            r.durable_at = r.durable_at.max(done);
        }
    }

    /// Puts back the blocks of every write not durable at `at`: each block gets the contents of
    /// the newest write to it that is durable (or its contents from before the log). Returns
    /// the blocks changed; forgets every record.
    pub(crate) fn revert(&mut self, at: Nanos, data: &mut DataStore) -> u64 {
        let mut settled: BTreeSet<(u32, u64)> = BTreeSet::new();
        let mut lost: BTreeSet<(u32, u64)> = BTreeSet::new();
        for r in self.records.iter().rev() {
            let durable = !r.open && r.durable_at <= at;
            for i in 0..r.prior.len() {
                let key = (r.zone, r.off + i);
                if settled.contains(&key) {
                    continue;
                }
                if durable {
                    settled.insert(key);
                } else {
                    data.restore(r.zone, r.off, &r.prior, i as usize);
                    lost.insert(key);
                }
            }
        }
        self.records.clear();
        self.compacted = 0;
        lost.len() as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// Records and blocks held (memory bounds in tests).
    #[cfg(test)]
    pub(crate) fn size(&self) -> (usize, u64) {
        (
            self.records.len(),
            self.records.iter().map(|r| r.prior.len()).sum(),
        )
    }

    /// Consistency of a loaded image: `zone_blocks` gives the blocks of a randomly written
    /// zone, `None` for any other zone.
    pub(crate) fn check(
        &self,
        mode: PayloadMode,
        data: &DataStore,
        zone_blocks: impl Fn(u32) -> Option<u64>,
    ) -> Result<(), String> {
        for r in &self.records {
            let Some(size) = zone_blocks(r.zone) else {
                return Err(format!(
                    "undo record for zone {}, not randomly writable",
                    r.zone
                ));
            };
            if r.off
                .checked_add(r.prior.len())
                .is_none_or(|end| end > size)
                || !r.prior.fits(mode)
                || data.is_sequential(r.zone) != Some(false)
            {
                return Err(format!(
                    "undo record of {} blocks at {} of zone {} does not fit its zone",
                    r.prior.len(),
                    r.off,
                    r.zone
                ));
            }
        }
        Ok(())
    }
}

/// All power-loss bookkeeping of a zoned device.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Durability {
    pub(crate) seq: SeqDurability,
    pub(crate) undo: UndoLog,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::{ReadData, WriteData};

    #[test]
    fn durable_prefix_waits_for_earlier_pages() {
        let mut p = PendingZone {
            zone: 0,
            base: 0,
            events: VecDeque::new(),
            ahead: BTreeMap::new(),
        };
        p.push(Nanos(500), 4); // page 0 on a busy die
        p.push(Nanos(300), 8); // page 1 done earlier: durable only with page 0
        p.push(Nanos(700), 12);
        assert_eq!(
            p.events,
            VecDeque::from(vec![(Nanos(500), 8), (Nanos(700), 12)])
        );
        assert_eq!(p.durable_at(Nanos(400)), 0);
        assert_eq!(p.durable_at(Nanos(500)), 8);
        assert_eq!(p.durable_at(Nanos(10_000)), 12);
        p.prune(Nanos(600));
        assert_eq!((p.base, p.events.len()), (8, 1));
        assert_eq!(p.durable_at(Nanos(600)), 8);
    }

    /// Queued copies start as their chips become free, so a zone's chunks may be programmed
    /// out of block order: a later chunk counts only once the chunks before it have programs,
    /// and then from the latest of their completions.
    #[test]
    fn a_chunk_programmed_ahead_waits_for_the_chunks_before_it() {
        let written = |_| 12;
        let mut s = SeqDurability::default();
        s.writing(Nanos(0), 0, 0, Nanos(1), written, 1);
        s.programmed(0, Nanos(100), 8, 12);
        s.programmed(0, Nanos(900), 4, 8);
        let none = s.clone().take_at(Nanos(10_000));
        assert_eq!(none, vec![(0, 0)], "chunk 0 has no program");
        s.programmed(0, Nanos(300), 0, 4);
        // Pruning by a later write must not drop the zone while its prefix is short.
        s.writing(Nanos(200), 0, 12, Nanos(201), written, 1);
        assert_eq!(s.clone().take_at(Nanos(899)), vec![(0, 4)]);
        assert_eq!(s.take_at(Nanos(900)), vec![(0, 12)]);
    }

    #[test]
    fn zones_leave_the_table_once_durable() {
        let mut s = SeqDurability::default();
        let written = [6u64, 4, 0];
        s.writing(Nanos(0), 0, 0, Nanos(1), |z| written[z as usize], 3);
        s.programmed(0, Nanos(100), 0, 4);
        s.writing(Nanos(0), 1, 0, Nanos(1), |z| written[z as usize], 3);
        s.programmed(1, Nanos(200), 0, 4);
        assert_eq!(s.unscheduled(|z| written[z as usize]), vec![0]);
        s.flushed(Nanos(50), Nanos(300), |z| written[z as usize]);
        // Zone 1's data was all scheduled already: the flush adds an event to zone 0 only.
        assert_eq!(s.size(), (2, 3));
        // Past every event: zone 0 is pruned by a write to zone 1 ...
        s.writing(Nanos(400), 1, 4, Nanos(401), |z| written[z as usize], 3);
        s.writing(Nanos(400), 1, 4, Nanos(401), |z| written[z as usize], 3);
        assert_eq!(s.index(0), None);
        // ... and a flush drops zone 1 once its events passed.
        s.flushed(Nanos(500), Nanos(500), |z| written[z as usize]);
        assert_eq!(s.size(), (0, 0));
        s.check(3, |z| Some(written[z as usize])).unwrap();
    }

    #[test]
    fn a_cut_keeps_the_prefix_durable_then() {
        let mut s = SeqDurability::default();
        s.writing(Nanos(0), 2, 0, Nanos(1), |_| 10, 4);
        s.programmed(2, Nanos(100), 0, 4);
        s.programmed(2, Nanos(150), 4, 8);
        s.flushed(Nanos(0), Nanos(400), |_| 10);
        assert_eq!(s.clone().take_at(Nanos(99)), vec![(2, 0)]);
        assert_eq!(s.clone().take_at(Nanos(120)), vec![(2, 4)]);
        assert_eq!(s.clone().take_at(Nanos(399)), vec![(2, 8)]);
        assert_eq!(s.take_at(Nanos(400)), vec![(2, 10)]);
        assert_eq!(s.size(), (0, 0));
    }

    #[test]
    fn revert_keeps_the_newest_durable_write_of_each_block() {
        let mut d = DataStore::new(PayloadMode::Fingerprint, 4096, 1);
        let mut log = UndoLog::default();
        let write = |d: &mut DataStore, log: &mut UndoLog, off: u64, fps: &[u64], t: u64| {
            let prior = d.prior(0, off, fps.len() as u64);
            d.write(0, off, None, WriteData::Fingerprints(fps));
            log.push(0, off, prior, Nanos(t), false);
        };
        write(&mut d, &mut log, 0, &[1, 1], 100); // durable
        write(&mut d, &mut log, 1, &[2, 2], 500); // lost
        write(&mut d, &mut log, 2, &[3], 200); // durable: block 2 keeps 3
        write(&mut d, &mut log, 0, &[4], 600); // lost: block 0 back to 1
        assert_eq!(log.revert(Nanos(300), &mut d), 2);
        let mut out = ReadData::default();
        d.read(0, 0, 4, &mut out);
        let zero = crate::payload::fingerprint(&[0u8; 4096]);
        assert_eq!(out.fingerprints, vec![1, 1, 3, zero]);
        assert_eq!(log.size(), (0, 0));
    }

    #[test]
    fn open_records_wait_for_their_page() {
        let mut log = UndoLog::default();
        let d = DataStore::new(PayloadMode::Fingerprint, 4096, 1);
        log.push(0, 0, d.prior(0, 0, 1), Nanos(50), false);
        log.push(0, 1, d.prior(0, 1, 1), Nanos::ZERO, true);
        log.push(0, 2, d.prior(0, 2, 1), Nanos::ZERO, true);
        log.prune(Nanos(60));
        assert_eq!(log.size(), (2, 2));
        log.page_programmed(Nanos(90));
        log.prune(Nanos(89));
        assert_eq!(log.size(), (2, 2));
        log.prune(Nanos(90));
        assert_eq!(log.size(), (0, 0));
    }

    proptest::proptest! {
        /// Whatever order a zone's chunks are programmed in, and however writes to another zone
        /// prune the records meanwhile, a cut at `cut` keeps exactly the longest prefix of
        /// chunks whose programs have all completed by then.
        #[test]
        fn the_durable_prefix_is_the_longest_run_of_completed_chunks(
            programs in proptest::collection::vec((proptest::prelude::any::<u32>(), 1u64..1000), 1..12),
            prunes in proptest::collection::vec(0u64..1000, 0..12),
            cut in 0u64..1200,
        ) {
            const LPC: u64 = 4;
            let chunks = programs.len() as u64;
            let written = |z: u32| if z == 0 { chunks * LPC } else { 1 };
            let mut s = SeqDurability::default();
            s.writing(Nanos(0), 0, 0, Nanos(0), written, 2);
            s.writing(Nanos(0), 1, 0, Nanos(0), written, 2);
            // Chunk c is programmed by programs[c].1, in the order of the random keys.
            let mut order: Vec<u64> = (0..chunks).collect();
            order.sort_by_key(|&c| programs[c as usize].0);
            let mut nows: Vec<u64> = prunes.iter().map(|&t| t.min(cut)).collect();
            nows.sort_unstable();
            for (k, &c) in order.iter().enumerate() {
                s.programmed(0, Nanos(programs[c as usize].1), c * LPC, (c + 1) * LPC);
                if let Some(&now) = nows.get(k) {
                    s.writing(Nanos(now), 1, 1, Nanos(now), written, 2);
                }
            }
            let kept = (0..chunks)
                .take_while(|&c| programs[c as usize].1 <= cut)
                .count() as u64
                * LPC;
            let durable = s
                .take_at(Nanos(cut))
                .into_iter()
                .find(|&(z, _)| z == 0)
                .map_or(chunks * LPC, |(_, n)| n);
            proptest::prop_assert_eq!(durable, kept);
        }
    }
}
