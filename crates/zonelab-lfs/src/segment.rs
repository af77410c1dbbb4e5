//! Segment management: the SIT (valid blocks per segment), the SSA (owner of every main-area
//! block), zone use, and the six logs that append into zones (seed 000 §2.3: "six types of
//! segments ... multihead logging ... only one segment can be open for each type at a time").

use crate::gc_log::{HsrWeighed, Reclaim, ReclaimChoice};
use crate::layout::Layout;
pub use crate::ondisk::Temp;
use crate::ondisk::{BlkAddr, CursegState, NULL_ADDR, Nid, SitEntry, Summary};
use crate::policy::Hsr;
use std::collections::{BTreeMap, BTreeSet};
use zonelab_sim::Nanos;

/// What a main-area zone is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneUse {
    /// Empty on the device, ready for a log.
    Free,
    /// A log appends into it.
    Log(Temp),
    /// Written up to where it was closed; blocks become invalid over time.
    Used,
    /// Emptied by cleaning; free once the next checkpoint makes that durable.
    Prefree,
}

/// SIT, SSA, zones and logs.
pub struct Segments {
    pub layout: Layout,
    pub sit: Vec<SitEntry>,
    /// SIT blocks changed since the checkpoint.
    pub sit_dirty: BTreeSet<u32>,
    pub sit_copy: Vec<bool>,
    pub ssa: Vec<Summary>,
    /// Segments whose SSA changed since the checkpoint.
    pub ssa_dirty: BTreeSet<u32>,
    pub zones: Vec<ZoneUse>,
    /// Next block offset the device will accept in each zone (its write pointer).
    pub wp: Vec<u32>,
    pub logs: [Option<CursegState>; 6],
    /// The zone each log moves to when its zone fills, chosen when the last block of the
    /// current one is taken, so a node's footer can name the next block of its log (F2FS
    /// allocates the next segment in advance for the same reason: roll-forward follows it).
    pub next_zone: [Option<u32>; 6],
    pub free_zones: BTreeSet<u32>,
    /// Valid blocks in the main area.
    pub valid_blocks: u64,
    /// The log that last wrote each zone. The SIT keeps it for every segment holding valid
    /// blocks ([`SitEntry::log`]), so a mount restores it ([`Segments::log_in_sit`]).
    pub zone_temp: Vec<Option<Temp>>,
    /// The zone being cleaned (no log may reopen it).
    pub cleaning: Option<u32>,
    /// Zones logs left since the caller last issued the writes of the blocks it took
    /// ([`Segments::writes_issued`]): their last blocks may not have reached the device yet,
    /// so none may be reopened for threaded logging (TL_open needs the zone written in full,
    /// and would overtake those writes).
    left_unissued: Vec<u32>,
    /// Threaded logging, under the znsplus policy.
    pub threaded: Option<Threaded>,
}

/// A device command the file system owes a zone after handing out blocks: issued by the
/// caller of [`Segments::alloc`] before the writes of those blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZoneJob {
    /// TL_open the zone with this bitmap of blocks the log skips (seed 000 §3.2.2).
    TlOpen { zone: u32, skip: Vec<bool> },
    /// Finish the zone once its writes are done: a log left it with blocks it skipped.
    Finish { zone: u32 },
}

/// What a zone's last TL_open found (seed 000 §3.3.2's N_cold and the profiling of beta).
#[derive(Clone, Debug)]
struct LastOpen {
    /// Blocks valid then.
    valid: Vec<bool>,
    /// Of those, the ones valid at the TL_open before too (cold).
    cold: Vec<bool>,
    /// Blocks the log skipped then (valid or pre-invalid); it wrote the others.
    skipped: Vec<bool>,
}

/// Threaded logging with hybrid segment recycling (seed 000 §3.2.2, §3.3.2): when free zones
/// run low, a log may reopen one of its own type's dirty zones with TL_open and write into
/// its invalid blocks (the device plugs the rest) instead of taking a free zone.
pub struct Threaded {
    pub hsr: Hsr,
    /// Logs consider threaded logging while fewer zones than this are free (the published
    /// ZNS+ F2FS's `need_SSR`: one zone above the reserve).
    pub below_free: u32,
    /// And take it without weighing compaction while fewer than this are free: where
    /// foreground cleaning starts, as the published ZNS+ F2FS (`get_new_ssr_segment`
    /// takes SSR unweighed at the threshold of `has_not_enough_free_secs`).
    pub forced_below: u32,
    /// Zones the dirty nodes and dentry blocks would fill, which raise both thresholds
    /// (`need_SSR` and `get_new_ssr_segment` add them as `has_not_enough_free_secs` does):
    /// the file system sets it before it takes blocks.
    pub dirty_zones: u32,
    /// Blocks invalidated since the last checkpoint that a crash recovery still needs
    /// ("pre-invalid", §3.3.2): the checkpoint references them, or roll-forward does (a node
    /// of the warm node log's chain, a data block the newest durable fsynced copy of its node
    /// points to), so no log may overwrite them.
    pre_invalid: BTreeSet<BlkAddr>,
    /// Those of a checkpoint in progress (reusable once it is durable).
    pre_invalid_cp: BTreeSet<BlkAddr>,
    pre_invalid_zone: Vec<u32>,
    /// Blocks written since the last checkpoint began that no recovery needs yet, by owner
    /// node (the SSA names a block's owner): invalidated, they are free at once. The published
    /// ZNS+ F2FS counts as pre-invalid only blocks valid at the checkpoint (`update_sit_entry`
    /// adds to `uc_blocks` when the block's `ckpt_valid_map` bit is set), and its SSR reuses
    /// the rest. Here the blocks roll-forward reads are kept out: the warm node log's (never
    /// entered) and the data blocks of a node an fsync writes ([`Segments::made_durable`]).
    fresh: BTreeMap<Nid, BTreeSet<BlkAddr>>,
    /// Data blocks written since the last checkpoint began that the newest fsynced copy of
    /// their node points to, by node: roll-forward recovers that copy.
    fsynced: BTreeMap<Nid, BTreeSet<BlkAddr>>,
    /// Of those, the ones invalidated since (pre-invalid), by node: once a newer fsynced copy
    /// of the node is durable, roll-forward recovers that one and no longer reads them
    /// ([`Segments::release_superseded`]).
    superseded: BTreeMap<Nid, Vec<BlkAddr>>,
    /// Checkpoints begun, which tells a [`Superseded`] taken before the last one began.
    checkpoints_begun: u64,
    /// Per log: the blocks its threaded-logging zone skips; and those of its next zone.
    skip: [Option<Vec<bool>>; 6],
    next_skip: [Option<Vec<bool>>; 6],
    /// Per zone: what its last TL_open found, for B_cold and the profiling of beta.
    last_open: BTreeMap<u32, LastOpen>,
    pub jobs: Vec<ZoneJob>,
    /// The choices of zone made since the file system last collected them, for its log
    /// ([`crate::gc_log`]); their time is stamped then.
    pub choices: Vec<ReclaimChoice>,
    pub stats: ThreadedStats,
}

/// What threaded logging did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ThreadedStats {
    /// Zones reopened by TL_open.
    pub tl_opens: u64,
    /// Blocks the logs wrote into them.
    pub tl_blocks: u64,
    /// Blocks they skipped (valid or pre-invalid: plugged by the device).
    pub skipped_blocks: u64,
    /// Of those, the pre-invalid ones (§3.3.2: invalid, but a recovery still needs them).
    pub skipped_pre_invalid: u64,
    /// Times hybrid segment recycling chose segment compaction over a threaded-logging zone.
    pub compaction_preferred: u64,
    /// And why ([`CompactionCauses`]).
    pub compaction_preferred_for: CompactionCauses,
    /// Zones reopened without weighing compaction: fewer zones than `forced_below` were free.
    pub unweighed: u64,
}

/// Why hybrid segment recycling chose compaction over threaded logging, by the first of
/// these that holds. Seed 000 §3.3.2 gives `other_log` and `pre_invalid` as the reasons
/// threaded logging can reclaim less well than compaction, and B_cold as a third. The counts
/// sum to `compaction_preferred`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CompactionCauses {
    /// B_cold: without it, threaded logging would have been chosen.
    pub cold_benefit: u64,
    /// Reclaiming cost imbalance: the victim was another log's zone, cheaper to compact than
    /// the log's own cheapest zone was to reopen.
    pub other_log: u64,
    /// Pre-invalid blocks: the victim was the log's own zone, one threaded logging passed over
    /// because it would have had to plug the blocks deleted since the last checkpoint, which
    /// compaction's checkpoint frees (it kept no fewer valid and pre-invalid blocks than the
    /// candidate).
    pub pre_invalid: u64,
    /// The victim was the log's own zone and kept fewer blocks than the candidate, but
    /// threaded logging could not take it then (a log had just left it).
    pub unavailable: u64,
}

/// Pre-invalid blocks that only an older fsynced copy of their node points to, free once the
/// copies that replaced it are durable ([`Segments::made_durable`]).
#[derive(Debug, Default)]
pub struct Superseded {
    checkpoints_begun: u64,
    blocks: Vec<BlkAddr>,
}

impl Superseded {
    /// Adds the blocks of `other`, taken in the same checkpoint's time.
    pub fn merge(&mut self, other: Superseded) {
        if other.blocks.is_empty() {
            return;
        }
        if self.blocks.is_empty() {
            *self = other;
            return;
        }
        assert_eq!(
            self.checkpoints_begun, other.checkpoints_begun,
            "superseded blocks of two checkpoints' times"
        );
        self.blocks.extend(other.blocks);
    }
}

impl Threaded {
    pub fn new(hsr: Hsr, below_free: u32, forced_below: u32, zones: usize) -> Threaded {
        Threaded {
            hsr,
            below_free,
            forced_below,
            dirty_zones: 0,
            pre_invalid: BTreeSet::new(),
            pre_invalid_cp: BTreeSet::new(),
            pre_invalid_zone: vec![0; zones],
            fresh: BTreeMap::new(),
            fsynced: BTreeMap::new(),
            superseded: BTreeMap::new(),
            checkpoints_begun: 0,
            skip: Default::default(),
            next_skip: Default::default(),
            last_open: BTreeMap::new(),
            jobs: Vec::new(),
            choices: Vec::new(),
            stats: ThreadedStats::default(),
        }
    }

    /// Whether log `t` writes into a zone it reopened for threaded logging.
    #[cfg(test)]
    pub(crate) fn threads(&self, t: Temp) -> bool {
        self.skip[t as usize].is_some()
    }

    /// Pre-invalid blocks now.
    pub fn pre_invalid_blocks(&self) -> u64 {
        (self.pre_invalid.len() + self.pre_invalid_cp.len()) as u64
    }

    /// Drops block `a` of owner `nid` from the fresh blocks; whether it was one.
    fn forget_fresh(&mut self, nid: Nid, a: BlkAddr) -> bool {
        let Some(of) = self.fresh.get_mut(&nid) else {
            return false;
        };
        let was = of.remove(&a);
        if of.is_empty() {
            self.fresh.remove(&nid);
        }
        was
    }

    fn is_pre_invalid(&self, a: BlkAddr) -> bool {
        self.pre_invalid.contains(&a) || self.pre_invalid_cp.contains(&a)
    }
}

impl Segments {
    pub fn new(layout: Layout) -> Segments {
        let segs = layout.segments() as usize;
        let zones = layout.sb.main_zones as usize;
        let bps = layout.sb.blocks_per_seg;
        let sit_blocks = layout.sb.sit_blocks as usize;
        Segments {
            sit: vec![SitEntry::new(bps); segs],
            sit_dirty: BTreeSet::new(),
            sit_copy: vec![false; sit_blocks],
            ssa: vec![Summary::default(); layout.main_blocks() as usize],
            ssa_dirty: BTreeSet::new(),
            zones: vec![ZoneUse::Free; zones],
            wp: vec![0; zones],
            logs: [None; 6],
            next_zone: [None; 6],
            free_zones: (0..zones as u32).collect(),
            valid_blocks: 0,
            zone_temp: vec![None; zones],
            cleaning: None,
            left_unissued: Vec::new(),
            threaded: None,
            layout,
        }
    }

    /// The SIT entries of zone `z`'s segments.
    pub fn zone_sit(&self, z: u32) -> &[SitEntry] {
        let spz = self.layout.sb.segs_per_zone as usize;
        &self.sit[z as usize * spz..(z as usize + 1) * spz]
    }

    /// Valid blocks of a zone (all its segments).
    pub fn zone_valid(&self, z: u32) -> u32 {
        self.zone_sit(z).iter().map(|e| e.valid).sum()
    }

    /// The log the SIT names for zone `z`'s valid blocks, if any (its segments agree: a log
    /// writes a zone from its start, and a segment forgets its log with its last valid block).
    pub fn log_in_sit(&self, z: u32) -> Option<Temp> {
        self.zone_sit(z).iter().find_map(|e| e.log)
    }

    /// Written zones whose blocks are all invalid now become prefree, as F2FS's segments
    /// with no valid block do (its PRE dirty list): the checkpoint being written frees them
    /// without cleaning. A zone being cleaned is left to the cleaner.
    pub fn release_empty_zones(&mut self) {
        for z in 0..self.zones.len() as u32 {
            if self.zones[z as usize] == ZoneUse::Used
                && self.cleaning != Some(z)
                && self.zone_valid(z) == 0
            {
                self.zones[z as usize] = ZoneUse::Prefree;
            }
        }
    }

    /// Prefree zone `z` was reset on the device: it is free, and what threaded logging knew
    /// of its blocks (their validity at its TL_opens) belongs to data no longer there.
    pub fn zone_reset(&mut self, z: u32) {
        assert_eq!(
            self.zones[z as usize],
            ZoneUse::Prefree,
            "zone {z} reset while in use"
        );
        self.zones[z as usize] = ZoneUse::Free;
        self.wp[z as usize] = 0;
        self.free_zones.insert(z);
        if let Some(th) = &mut self.threaded {
            th.last_open.remove(&z);
        }
    }

    fn mark(&mut self, a: BlkAddr, valid: bool, now: u64) {
        let (z, off) = self
            .layout
            .locate(a)
            .unwrap_or_else(|| panic!("block {a} is not in the main area"));
        let (seg, so) = self.layout.seg_of(z, off);
        let e = &mut self.sit[seg as usize];
        let changed = e.set(so, valid);
        assert!(
            changed,
            "block {a} (zone {z} offset {off}) marked {} twice",
            if valid { "valid" } else { "invalid" }
        );
        e.mtime = now;
        if valid {
            if let Some(t) = self.zone_temp[z as usize] {
                e.log = Some(t);
            }
        } else if e.valid == 0 {
            e.log = None;
        }
        self.sit_dirty
            .insert(seg / self.layout.sit_per_block as u32);
        if valid {
            self.valid_blocks += 1;
        } else {
            self.valid_blocks -= 1;
        }
    }

    /// A block now holds live data owned by `owner`.
    pub fn validate(&mut self, a: BlkAddr, owner: Summary, now: u64) {
        self.mark(a, true, now);
        let (z, off) = self.layout.locate(a).expect("checked in mark");
        let i = self.layout.main_index(z, off);
        self.ssa[i] = owner;
        let (seg, _) = self.layout.seg_of(z, off);
        self.ssa_dirty.insert(seg);
        if let Some(th) = &mut self.threaded
            && self.zone_temp[z as usize] != Some(Temp::WarmNode)
        {
            th.fresh.entry(owner.nid).or_default().insert(a);
        }
    }

    /// An fsync writes node `nid` for roll-forward: the blocks it points to that were written
    /// since the last checkpoint are now needed by recovery, until the next checkpoint or
    /// until a newer fsynced copy of the node is durable. Returns the blocks an earlier copy
    /// pointed to that this one no longer does: once this copy is durable (the fsync's
    /// flush), the caller hands them to [`Segments::release_superseded`] and they are free.
    pub fn made_durable(&mut self, nid: Nid) -> Superseded {
        let Some(th) = &mut self.threaded else {
            return Superseded::default();
        };
        let fresh = th.fresh.remove(&nid).unwrap_or_default();
        th.fsynced.entry(nid).or_default().extend(fresh);
        Superseded {
            checkpoints_begun: th.checkpoints_begun,
            blocks: th.superseded.remove(&nid).unwrap_or_default(),
        }
    }

    /// The fsynced node copies that superseded `s` are durable: its blocks are no longer
    /// pre-invalid, unless a checkpoint has begun since (which frees them when durable).
    pub fn release_superseded(&mut self, s: Superseded) {
        let Some(th) = &mut self.threaded else { return };
        if s.checkpoints_begun != th.checkpoints_begun {
            return;
        }
        for a in s.blocks {
            assert!(
                th.pre_invalid.remove(&a),
                "superseded block {a} is not pre-invalid"
            );
            let (z, _) = self.layout.locate(a).expect("a main-area block");
            th.pre_invalid_zone[z as usize] -= 1;
        }
    }

    /// The owner of valid block `a` is `owner` (a block reserved valid before its owner was
    /// known).
    pub fn set_owner(&mut self, a: BlkAddr, owner: Summary) {
        assert!(self.is_valid(a), "owner set on invalid block {a}");
        let (z, off) = self.layout.locate(a).expect("a main-area block");
        let i = self.layout.main_index(z, off);
        let was = std::mem::replace(&mut self.ssa[i], owner);
        let (seg, _) = self.layout.seg_of(z, off);
        self.ssa_dirty.insert(seg);
        if let Some(th) = &mut self.threaded
            && th.forget_fresh(was.nid, a)
        {
            th.fresh.entry(owner.nid).or_default().insert(a);
        }
    }

    /// A block's data is dead (overwritten, truncated, moved). `owner` is whom the caller
    /// frees it for (a node, or a node's slot), which its summary must name: a stale address
    /// would otherwise free a block another owner has since been given. (A node block and the
    /// data of its slot 0 have the same summary, as neither names a kind.)
    pub fn invalidate(&mut self, a: BlkAddr, owner: Summary, now: u64) {
        if a != NULL_ADDR {
            self.mark(a, false, now);
            let (z, off) = self.layout.locate(a).expect("checked in mark");
            let held = self.ssa[self.layout.main_index(z, off)];
            assert_eq!(
                held, owner,
                "block {a} (zone {z} offset {off}) freed for {owner:?} but its summary names {held:?}"
            );
            let Some(th) = &mut self.threaded else { return };
            if !th.forget_fresh(owner.nid, a) && th.pre_invalid.insert(a) {
                th.pre_invalid_zone[z as usize] += 1;
                if th.fsynced.get_mut(&owner.nid).is_some_and(|f| f.remove(&a)) {
                    th.superseded.entry(owner.nid).or_default().push(a);
                }
            }
        }
    }

    /// A checkpoint is being written: the blocks pre-invalid now become reusable when it is
    /// durable ([`Segments::checkpoint_durable`]).
    pub fn checkpoint_begins(&mut self) {
        if let Some(th) = &mut self.threaded {
            let now = std::mem::take(&mut th.pre_invalid);
            th.pre_invalid_cp.extend(now);
            th.fresh.clear();
            th.fsynced.clear();
            th.superseded.clear();
            th.checkpoints_begun += 1;
        }
    }

    /// The checkpoint begun last is durable.
    pub fn checkpoint_durable(&mut self) {
        if let Some(th) = &mut self.threaded {
            for a in std::mem::take(&mut th.pre_invalid_cp) {
                let (z, _) = self.layout.locate(a).expect("a main-area block");
                th.pre_invalid_zone[z as usize] -= 1;
            }
        }
    }

    pub fn is_valid(&self, a: BlkAddr) -> bool {
        self.layout.locate(a).is_some_and(|(z, off)| {
            let (seg, so) = self.layout.seg_of(z, off);
            self.sit[seg as usize].is_valid(so)
        })
    }

    pub fn owner(&self, a: BlkAddr) -> Summary {
        let (z, off) = self.layout.locate(a).expect("main-area block");
        self.ssa[self.layout.main_index(z, off)]
    }

    /// Takes the next block of log `t`, moving the log to another zone when its zone has no
    /// block left (a free zone, or under threaded logging possibly a dirty zone of its type,
    /// see [`Segments::choose_zone`]). `None` when no zone is free (the caller cleans first;
    /// running out is a bug in the reserve). Device commands the move needs are left in
    /// `threaded.jobs` for the caller to issue before the block's write.
    pub fn alloc(&mut self, t: Temp) -> Option<BlkAddr> {
        let bpz = self.layout.blocks_per_zone;
        if self.logs[t as usize].is_none_or(|c| c.offset >= bpz) {
            self.leave_zone(t);
            let (z, skip) = match self.next_zone[t as usize].take() {
                Some(z) => (z, self.take_next_skip(t)),
                None => self.choose_zone(t)?,
            };
            self.enter_zone(t, z, skip);
        }
        let c = self.logs[t as usize].expect("log has a zone");
        assert_eq!(
            self.wp[c.zone as usize], c.offset,
            "log {t:?} out of step with zone {} write pointer",
            c.zone
        );
        let a = self.layout.addr(c.zone, c.offset);
        assert!(
            !self.is_valid(a),
            "log {t:?} handed out block {a}, which holds live data"
        );
        let next = self.next_free(t, c.offset + 1);
        self.logs[t as usize] = Some(CursegState {
            zone: c.zone,
            offset: next,
        });
        self.wp[c.zone as usize] = next;
        if let Some(th) = &mut self.threaded
            && th.skip[t as usize].is_some()
        {
            th.stats.tl_blocks += 1;
        }
        if next == bpz
            && self.next_zone[t as usize].is_none()
            && let Some((n, skip)) = self.choose_zone(t)
        {
            self.zones[n as usize] = ZoneUse::Log(t);
            self.next_zone[t as usize] = Some(n);
            if let Some(th) = &mut self.threaded {
                th.next_skip[t as usize] = skip;
            }
        }
        Some(a)
    }

    /// Gives log `t` a zone with room if it has none (without taking a block).
    pub fn ensure_zone(&mut self, t: Temp) {
        let bpz = self.layout.blocks_per_zone;
        if self.logs[t as usize].is_some_and(|c| c.offset < bpz) {
            return;
        }
        self.leave_zone(t);
        let z = match self.next_zone[t as usize].take() {
            Some(z) => Some((z, self.take_next_skip(t))),
            None => self.choose_zone(t),
        };
        if let Some((z, skip)) = z {
            self.enter_zone(t, z, skip);
        }
    }

    fn take_next_skip(&mut self, t: Temp) -> Option<Vec<bool>> {
        self.threaded
            .as_mut()
            .and_then(|th| th.next_skip[t as usize].take())
    }

    /// Log `t` leaves its zone (if it has one), which is now written as far as the log goes; a
    /// threaded-logging zone is finished so the device plugs its remaining blocks.
    fn leave_zone(&mut self, t: Temp) {
        if let Some(c) = self.logs[t as usize].take() {
            self.zones[c.zone as usize] = ZoneUse::Used;
            self.left_unissued.push(c.zone);
            if let Some(th) = &mut self.threaded
                && th.skip[t as usize].take().is_some()
            {
                th.jobs.push(ZoneJob::Finish { zone: c.zone });
            }
        }
    }

    /// Log `t` starts writing zone `z` (a free zone, or with `skip` a dirty zone reopened for
    /// threaded logging).
    fn enter_zone(&mut self, t: Temp, z: u32, skip: Option<Vec<bool>>) {
        self.zones[z as usize] = ZoneUse::Log(t);
        self.zone_temp[z as usize] = Some(t);
        let offset = match (&mut self.threaded, skip) {
            (Some(th), Some(skip)) => {
                let first = skip.iter().position(|&s| !s).unwrap_or(skip.len()) as u32;
                th.stats.tl_opens += 1;
                th.stats.skipped_blocks += skip.iter().filter(|&&s| s).count() as u64;
                th.jobs.push(ZoneJob::TlOpen {
                    zone: z,
                    skip: skip.clone(),
                });
                th.skip[t as usize] = Some(skip);
                first
            }
            _ => 0,
        };
        self.wp[z as usize] = offset;
        self.logs[t as usize] = Some(CursegState { zone: z, offset });
    }

    /// The first block at or after `from` log `t` may write in its zone (the zone's size when
    /// none is left).
    fn next_free(&self, t: Temp, from: u32) -> u32 {
        let bpz = self.layout.blocks_per_zone;
        match self
            .threaded
            .as_ref()
            .and_then(|th| th.skip[t as usize].as_ref())
        {
            Some(skip) => (from..bpz).find(|&o| !skip[o as usize]).unwrap_or(bpz),
            None => from.min(bpz),
        }
    }

    /// The zone log `t` moves to, with the blocks it must skip when it is a dirty zone
    /// reopened for threaded logging. While free zones are plenty, a free zone (append
    /// logging). Below `threaded.below_free` (both thresholds here raised by
    /// `threaded.dirty_zones`), hybrid segment recycling (seed 000 §3.3.2)
    /// weighs the cheapest threaded-logging zone of the log's type,
    /// `C_TL = f_plugging(N_pre-inv + N_valid)`, against the zone segment compaction would
    /// clean, `C_SC = f_copy(N_valid) + f_write(alpha N_valid) - B_cold` (eq. 1 and 2, the
    /// costs of reclaiming one segment each way, as the published ZNS+ F2FS compares them); a
    /// free zone is taken when compaction is cheaper (the cleaner then reclaims). Below
    /// `threaded.forced_below` free zones (the cleaner's threshold), threaded logging it is.
    ///
    /// The cold data log never reopens a zone: it takes the blocks compaction moves (§2.3),
    /// which stay valid, so its zones would be reopened to plug almost every block; the
    /// published ZNS+ F2FS (`allocate_segment_by_default`) gives it a new segment always.
    fn choose_zone(&mut self, t: Temp) -> Option<(u32, Option<Vec<bool>>)> {
        let free = self.free_zones.len() as u32;
        if let Some(th) = &self.threaded
            && free < th.below_free.saturating_add(th.dirty_zones)
            && t != Temp::ColdData
            && let Some((z, keep)) = self.threaded_candidate(t)
        {
            let th = self.threaded.as_ref().expect("checked");
            let unweighed = free < th.forced_below.saturating_add(th.dirty_zones).max(1);
            let victim = if unweighed {
                None
            } else {
                self.compaction_victim()
            };
            let weighed = victim.map(|v| {
                let (valid, cold) = (self.zone_valid(v) as u64, self.cold_blocks(v));
                let verdict = th.hsr.weigh(
                    keep,
                    self.victim_temp(v),
                    valid,
                    cold,
                    self.layout.blocks_per_zone as u64,
                );
                let w = HsrWeighed {
                    c_tl_ns: verdict.c_tl,
                    c_sc_ns: verdict.c_sc,
                    victim_zone: v,
                    victim_valid_blocks: valid,
                    victim_cold_blocks: cold,
                    victim_pre_invalid_blocks: th.pre_invalid_zone[v as usize] as u64,
                };
                (verdict.threaded_logging, w)
            });
            let prefer_tl = weighed.is_none_or(|(threaded_logging, _)| threaded_logging);
            let pre_invalid = th.pre_invalid_zone[z as usize] as u64;
            let th = self.threaded.as_mut().expect("checked");
            th.choices.push(ReclaimChoice {
                at_ns: Nanos::ZERO,
                log: t,
                chose: if prefer_tl {
                    Reclaim::ThreadedLogging
                } else {
                    Reclaim::Compaction
                },
                zone: z,
                valid_blocks: keep - pre_invalid,
                pre_invalid_blocks: pre_invalid,
                weighed: weighed.map(|(_, w)| w),
            });
            if prefer_tl {
                if unweighed {
                    th.stats.unweighed += 1;
                }
                return Some((z, Some(self.open_for_threaded_logging(z))));
            }
            th.stats.compaction_preferred += 1;
            let (_, w) = weighed.expect("compaction is chosen only when weighed");
            self.count_compaction_cause(t, keep, &w);
        }
        self.free_zones.pop_first().map(|z| (z, None))
    }

    /// Counts why hybrid segment recycling preferred compacting the victim `w` weighed to
    /// reopening log `t`'s candidate, which keeps `keep` blocks ([`CompactionCauses`]).
    fn count_compaction_cause(&mut self, t: Temp, keep: u64, w: &HsrWeighed) {
        let (valid, pre_invalid) = (w.victim_valid_blocks, w.victim_pre_invalid_blocks);
        let victim = self.victim_temp(w.victim_zone);
        let zone_blocks = self.layout.blocks_per_zone as u64;
        let th = self.threaded.as_mut().expect("threaded logging is on");
        let causes = &mut th.stats.compaction_preferred_for;
        if th
            .hsr
            .weigh(keep, victim, valid, 0, zone_blocks)
            .threaded_logging
        {
            causes.cold_benefit += 1;
        } else if victim != t {
            causes.other_log += 1;
        } else if valid + pre_invalid >= keep {
            causes.pre_invalid += 1;
        } else {
            causes.unavailable += 1;
        }
    }

    /// The caller has handed the device the writes of every block it took: the zones logs
    /// left may be reopened.
    pub fn writes_issued(&mut self) {
        self.left_unissued.clear();
    }

    /// The zone of log `t`'s type with the fewest blocks to skip (valid or pre-invalid), if one
    /// has a block to write, and that count.
    fn threaded_candidate(&self, t: Temp) -> Option<(u32, u64)> {
        let th = self.threaded.as_ref()?;
        let bpz = self.layout.blocks_per_zone as u64;
        (0..self.zones.len() as u32)
            .filter(|&z| {
                self.zones[z as usize] == ZoneUse::Used
                    && self.zone_temp[z as usize] == Some(t)
                    && self.cleaning != Some(z)
                    && !self.left_unissued.contains(&z)
            })
            .map(|z| {
                let keep = self.zone_valid(z) as u64 + th.pre_invalid_zone[z as usize] as u64;
                (z, keep)
            })
            .filter(|&(_, keep)| keep < bpz)
            .min_by_key(|&(z, keep)| (keep, z))
    }

    /// The log that wrote zone `z`; a zone whose log is not known (its blocks recovered by
    /// roll-forward, or an image from before the SIT named logs) counts as warm data (the log
    /// of file data).
    pub fn victim_temp(&self, z: u32) -> Temp {
        self.zone_temp[z as usize].unwrap_or(Temp::WarmData)
    }

    /// The zone greedy segment compaction would clean.
    fn compaction_victim(&self) -> Option<u32> {
        let cap = self.layout.blocks_per_zone;
        self.candidates()
            .filter(|&z| self.cleaning != Some(z))
            .map(|z| (self.zone_valid(z), z))
            .filter(|&(v, _)| v < cap)
            .min()
            .map(|(_, z)| z)
    }

    /// N_cold of zone `z` (§3.3.2): "the number of blocks unchanged across two consecutive
    /// TL-based segment recyclings" of the zone (valid at both of its last two TL_opens), of
    /// those still valid (the ones a compaction would move). A zone reopened once has none.
    fn cold_blocks(&self, z: u32) -> u64 {
        let Some(th) = &self.threaded else { return 0 };
        th.last_open.get(&z).map_or(0, |last| {
            last.cold
                .iter()
                .enumerate()
                .filter(|&(o, &v)| v && self.is_valid(self.layout.addr(z, o as u32)))
                .count() as u64
        })
    }

    /// Reopens Used zone `z` for threaded logging: the blocks to skip (valid and pre-invalid),
    /// and the profiling of beta (the share of a zone's cold blocks still valid at its next
    /// TL_open).
    fn open_for_threaded_logging(&mut self, z: u32) -> Vec<bool> {
        let bpz = self.layout.blocks_per_zone;
        let valid: Vec<bool> = (0..bpz)
            .map(|o| self.is_valid(self.layout.addr(z, o)))
            .collect();
        let th = self.threaded.as_mut().expect("threaded logging is on");
        let skip: Vec<bool> = valid
            .iter()
            .enumerate()
            .map(|(o, &v)| v || th.is_pre_invalid(self.layout.addr(z, o as u32)))
            .collect();
        th.stats.skipped_pre_invalid +=
            skip.iter().zip(&valid).filter(|&(&s, &v)| s && !v).count() as u64;
        let cold: Vec<bool> = match th.last_open.get(&z) {
            Some(last) => {
                // (still valid, of how many): the blocks cold at the previous TL_open, and
                // those the log wrote since (the ones it did not skip then; a pre-invalid
                // block it skipped was never rewritten, so its staying invalid says nothing
                // of how long new blocks live).
                let mut seen = [(0u64, 0u64); 2];
                for (o, &v) in valid.iter().enumerate() {
                    let group = if last.cold[o] {
                        0
                    } else if !last.skipped[o] {
                        1
                    } else {
                        continue;
                    };
                    seen[group].0 += u64::from(v);
                    seen[group].1 += 1;
                }
                th.hsr.observe_beta(seen[0], seen[1]);
                last.valid
                    .iter()
                    .zip(&valid)
                    .map(|(&p, &v)| p && v)
                    .collect()
            }
            None => vec![false; bpz as usize],
        };
        th.last_open.insert(
            z,
            LastOpen {
                valid,
                cold,
                skipped: skip.clone(),
            },
        );
        skip
    }

    /// The address log `t` will write next (for node footers' `next` link), or NULL when it
    /// has nowhere to go.
    pub fn peek_next(&self, t: Temp) -> BlkAddr {
        match (self.logs[t as usize], self.next_zone[t as usize]) {
            (Some(c), _) if c.offset < self.layout.blocks_per_zone => {
                self.layout.addr(c.zone, c.offset)
            }
            (_, Some(n)) => {
                let first = self
                    .threaded
                    .as_ref()
                    .and_then(|th| th.next_skip[t as usize].as_ref())
                    .map_or(0, |skip| {
                        skip.iter().position(|&s| !s).unwrap_or(skip.len()) as u32
                    });
                self.layout.addr(n, first)
            }
            _ => NULL_ADDR,
        }
    }

    /// Zones cleaning may pick: written, not a log's, not already emptied.
    pub fn candidates(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.zones.len() as u32).filter(|&z| self.zones[z as usize] == ZoneUse::Used)
    }

    /// Newest modification time among a zone's segments (cost-benefit age).
    pub fn zone_mtime(&self, z: u32) -> u64 {
        self.zone_sit(z).iter().map(|e| e.mtime).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Segments {
        /// Frees block `a` for whoever owns it.
        fn free(&mut self, a: BlkAddr, now: u64) {
            let owner = self.owner(a);
            self.invalidate(a, owner, now);
        }
    }
    use crate::layout::{DeviceShape, FormatOptions, plan};
    use crate::policy::{Hsr, ThreadedLogging};

    fn segments() -> Segments {
        let zone = 512u64;
        let shape = DeviceShape {
            lba_size: 4096,
            total_lbas: 40 * zone,
            zone_size: zone,
            zone_capacity: zone,
            zones: 40,
            conventional_zones: 2,
            companion_lbas: None,
        };
        let sb = plan(shape, FormatOptions::default(), true).expect("a valid plan");
        let mut s = Segments::new(Layout::new(sb).expect("a valid layout"));
        s.threaded = Some(Threaded::new(
            Hsr::new(1.0, 1.0, &ThreadedLogging::default()),
            4,
            0,
            s.zones.len(),
        ));
        s
    }

    /// A zone a log left while the writes of its last blocks have not reached the device is
    /// not reopened for threaded logging before they have: the TL_open would overtake them.
    #[test]
    fn a_zone_left_with_unissued_writes_is_not_reopened() {
        let mut s = segments();
        let t = Temp::WarmNode;
        let owner = Summary { nid: 7, ofs: 0 };
        let bpz = s.layout.blocks_per_zone;
        let take = |s: &mut Segments| {
            let a = s.alloc(t).expect("a zone has room");
            s.validate(a, owner, 0);
            s.layout.locate(a).expect("main area").0
        };
        // Fill zones until only two are free (below `below_free`, 4).
        while s.free_zones.len() > 3 {
            take(&mut s);
        }
        let first = take(&mut s);
        while take(&mut s) == first {}
        // `first` is left and half dead; the log fills its next zone without the caller
        // having issued any write.
        for off in 0..bpz / 2 {
            s.free(s.layout.addr(first, off), 1);
        }
        s.checkpoint_begins();
        s.checkpoint_durable();
        // The zone the log moves to once it has filled its current one.
        let next_zone = |s: &mut Segments| {
            let current = s.logs[t as usize].expect("a zone").zone;
            while s.logs[t as usize].expect("a zone").zone == current {
                take(s);
            }
            s.logs[t as usize].expect("a zone").zone
        };
        assert_ne!(next_zone(&mut s), first);
        assert_eq!(s.threaded.as_ref().expect("on").stats.tl_opens, 0);
        // Once the writes are issued, `first` is the cheapest zone to reopen.
        s.writes_issued();
        assert_eq!(next_zone(&mut s), first);
        assert_eq!(s.threaded.as_ref().expect("on").stats.tl_opens, 1);
    }

    /// Log `t` writes blocks of `owner` until `done` says stop; the zones it wrote, in order.
    fn zones_of(
        s: &mut Segments,
        t: Temp,
        owner: Summary,
        done: &dyn Fn(&Segments, &[u32]) -> bool,
    ) -> Vec<u32> {
        let mut zs: Vec<u32> = Vec::new();
        while !done(s, &zs) {
            let a = s.alloc(t).expect("room");
            s.validate(a, owner, 0);
            let z = s.layout.locate(a).expect("main area").0;
            if zs.last() != Some(&z) {
                zs.push(z);
            }
        }
        zs
    }

    /// Hybrid segment recycling weighs a costly threaded-logging zone against a cheap
    /// compaction victim and takes a free zone; below the cleaning threshold it reopens the
    /// zone unweighed, as the published ZNS+ F2FS does.
    #[test]
    fn below_the_cleaning_threshold_threaded_logging_is_not_weighed() {
        let owner = Summary { nid: 7, ofs: 0 };
        let setup = |forced_below: u32| {
            let mut s = segments();
            s.threaded.as_mut().expect("on").forced_below = forced_below;
            let data = zones_of(&mut s, Temp::HotData, owner, &|_, zs| zs.len() == 2);
            let node = zones_of(&mut s, Temp::WarmNode, owner, &|s, _| {
                s.free_zones.len() <= 3
            });
            let bpz = s.layout.blocks_per_zone;
            // A data zone all but dead; a node zone 90% valid.
            for off in 1..bpz {
                s.free(s.layout.addr(data[0], off), 1);
            }
            for off in 0..bpz / 10 {
                s.free(s.layout.addr(node[0], off), 1);
            }
            s.checkpoint_begins();
            s.checkpoint_durable();
            s.writes_issued();
            (s, node[0])
        };
        let (mut weighed, _) = setup(0);
        let (_, skip) = weighed.choose_zone(Temp::WarmNode).expect("a free zone");
        assert!(skip.is_none(), "compaction of the data zone is far cheaper");
        assert_eq!(
            weighed
                .threaded
                .as_ref()
                .expect("on")
                .stats
                .compaction_preferred,
            1
        );
        let st = weighed.threaded.as_ref().expect("on").stats;
        assert_eq!(st.unweighed, 0);
        assert_eq!(
            st.compaction_preferred_for,
            CompactionCauses {
                other_log: 1,
                ..CompactionCauses::default()
            },
            "the victim was the data log's"
        );
        let (mut forced, node) = setup(4);
        assert_eq!(
            forced
                .choose_zone(Temp::WarmNode)
                .map(|(z, k)| (z, k.is_some())),
            Some((node, true))
        );
        let st = forced.threaded.as_ref().expect("on").stats;
        assert_eq!((st.unweighed, st.compaction_preferred), (1, 0));
    }

    /// Hybrid segment recycling says why it chose compaction: a zone of the log's own that
    /// threaded logging passed over for its pre-invalid blocks, or B_cold (§3.3.2).
    #[test]
    fn hybrid_segment_recycling_names_why_it_chose_compaction() {
        let owner = Summary { nid: 7, ofs: 0 };
        // The warm data log fills zones until three are free; its first two, each with
        // `freed` of its blocks dropped before a checkpoint and `pre_invalid` after it.
        let setup = |freed: [u32; 2], pre_invalid: [u32; 2]| {
            let mut s = segments();
            let zones = zones_of(&mut s, Temp::WarmData, owner, &|s, _| {
                s.free_zones.len() <= 3
            });
            for (i, n) in freed.into_iter().enumerate() {
                for off in 0..n {
                    s.free(s.layout.addr(zones[i], off), 1);
                }
            }
            s.checkpoint_begins();
            s.checkpoint_durable();
            for (i, n) in pre_invalid.into_iter().enumerate() {
                for off in freed[i]..freed[i] + n {
                    s.free(s.layout.addr(zones[i], off), 2);
                }
            }
            s.writes_issued();
            (s, [zones[0], zones[1]])
        };
        // The log takes a free zone (compaction), for the cause `why` alone.
        let chooses_compaction_for = |mut s: Segments, why: CompactionCauses| {
            let (_, skip) = s.choose_zone(Temp::WarmData).expect("a free zone");
            assert!(skip.is_none(), "compaction");
            let st = s.threaded.as_ref().expect("on").stats;
            assert_eq!(st.compaction_preferred_for, why);
        };
        let bpz = segments().layout.blocks_per_zone;
        // The first zone keeps 40% of its blocks valid and 60% pre-invalid, the second 70%
        // valid: threaded logging would reopen the second, compaction cleans the first.
        let (s, _) = setup([0, bpz * 3 / 10], [bpz * 6 / 10, 0]);
        chooses_compaction_for(
            s,
            CompactionCauses {
                pre_invalid: 1,
                ..CompactionCauses::default()
            },
        );
        // Half of the second zone valid, every block of it cold at its last TL_open, and cold
        // blocks always outlive the others: B_cold makes compacting it cheaper than reopening it.
        let (mut s, [_, z]) = setup([0, bpz / 2], [0, 0]);
        let valid: Vec<bool> = (0..bpz).map(|o| s.is_valid(s.layout.addr(z, o))).collect();
        let th = s.threaded.as_mut().expect("on");
        th.hsr.observe_beta((10, 10), (0, 10));
        th.last_open.insert(
            z,
            LastOpen {
                cold: valid.clone(),
                skipped: valid.clone(),
                valid,
            },
        );
        chooses_compaction_for(
            s,
            CompactionCauses {
                cold_benefit: 1,
                ..CompactionCauses::default()
            },
        );
    }

    /// Pre-invalid blocks (seed 000 §3.3.2: invalid, "but a crash recovery will need to
    /// restore" them) are those valid at the last checkpoint, the warm node log's (the chain
    /// roll-forward follows) and the data blocks an fsynced node points to; a block both
    /// written and dropped since the checkpoint is free at once. The next checkpoint frees
    /// them all.
    #[test]
    fn only_blocks_a_recovery_needs_are_pre_invalid() {
        let mut s = segments();
        let take = |s: &mut Segments, t: Temp, nid: Nid| {
            let a = s.alloc(t).expect("room");
            s.validate(a, Summary { nid, ofs: 0 }, 0);
            a
        };
        let checkpointed = take(&mut s, Temp::WarmData, 10);
        s.checkpoint_begins();
        s.checkpoint_durable();
        let dropped = take(&mut s, Temp::WarmData, 11);
        let fsynced = take(&mut s, Temp::WarmData, 12);
        let chained = take(&mut s, Temp::WarmNode, 13);
        // A block reserved for one owner and given to another (IZC's destinations) follows
        // its final owner.
        let moved = take(&mut s, Temp::ColdData, 14);
        s.set_owner(moved, Summary { nid: 12, ofs: 1 });
        s.made_durable(12);
        for a in [checkpointed, dropped, fsynced, chained, moved] {
            s.free(a, 1);
        }
        let th = s.threaded.as_ref().expect("on");
        let pre: Vec<bool> = [checkpointed, dropped, fsynced, chained, moved]
            .iter()
            .map(|&a| th.is_pre_invalid(a))
            .collect();
        assert_eq!(pre, [true, false, true, true, true]);
        assert_eq!(th.pre_invalid_blocks(), 4);
        // Reopened for threaded logging, the data zone skips its two pre-invalid blocks.
        let z = s.layout.locate(checkpointed).expect("main area").0;
        assert_eq!(s.layout.locate(fsynced).expect("main area").0, z);
        let skip = s.open_for_threaded_logging(z);
        let offs = |a| s.layout.locate(a).expect("main area").1 as usize;
        assert!(skip[offs(checkpointed)] && skip[offs(fsynced)] && !skip[offs(dropped)]);
        assert_eq!(
            s.threaded.as_ref().expect("on").stats.skipped_pre_invalid,
            2
        );
        s.checkpoint_begins();
        s.checkpoint_durable();
        assert_eq!(s.threaded.as_ref().expect("on").pre_invalid_blocks(), 0);
    }

    /// A data block an fsynced node points to stays pre-invalid until a newer fsynced copy of
    /// the node is durable (roll-forward then recovers that copy), or until a checkpoint.
    #[test]
    fn an_fsynced_block_is_free_once_a_newer_fsynced_copy_is_durable() {
        let mut s = segments();
        let owner = Summary { nid: 12, ofs: 0 };
        let take = |s: &mut Segments| {
            let a = s.alloc(Temp::WarmData).expect("room");
            s.validate(a, owner, 0);
            a
        };
        let pre_invalid = |s: &Segments, a| s.threaded.as_ref().expect("on").is_pre_invalid(a);
        let first = take(&mut s);
        drop(s.made_durable(12));
        // Rewritten: the old block is pre-invalid while the fsync of the new copy runs.
        let second = take(&mut s);
        s.free(first, 1);
        assert!(pre_invalid(&s, first));
        let superseded = s.made_durable(12);
        assert!(pre_invalid(&s, first), "the new copy is not durable yet");
        s.release_superseded(superseded);
        assert!(!pre_invalid(&s, first));
        assert_eq!(s.threaded.as_ref().expect("on").pre_invalid_blocks(), 0);
        // A checkpoint begun meanwhile takes the block: it frees it when durable.
        let third = take(&mut s);
        s.free(second, 2);
        let superseded = s.made_durable(12);
        s.checkpoint_begins();
        s.release_superseded(superseded);
        assert!(
            pre_invalid(&s, second),
            "the checkpoint in progress holds it"
        );
        s.checkpoint_durable();
        assert!(!pre_invalid(&s, second));
        // Written before the checkpoint began, the third block is the checkpoint's to free.
        s.free(third, 3);
        let superseded = s.made_durable(12);
        s.release_superseded(superseded);
        assert!(pre_invalid(&s, third));
        // An fsync frees only the blocks superseded before it wrote its copy.
        let fifth = take(&mut s);
        drop(s.made_durable(12));
        let sixth = take(&mut s);
        s.free(fifth, 4);
        let superseded = s.made_durable(12);
        s.free(sixth, 5);
        s.release_superseded(superseded);
        assert!(!pre_invalid(&s, fifth) && pre_invalid(&s, sixth));
    }

    /// beta's "other" blocks are those the log wrote since the zone's last TL_open: a
    /// pre-invalid block it skipped then stays invalid without having been written, so it is
    /// left out rather than counted as a new block that died.
    #[test]
    fn beta_counts_only_the_blocks_the_log_wrote() {
        let mut s = segments();
        let z = 3;
        let bpz = s.layout.blocks_per_zone;
        let owner = Summary { nid: 7, ofs: 0 };
        for off in 0..8 {
            s.validate(s.layout.addr(z, off), owner, 0);
        }
        s.checkpoint_begins();
        s.checkpoint_durable();
        // Valid at the checkpoint: pre-invalid once dropped.
        s.free(s.layout.addr(z, 0), 1);
        let skip = s.open_for_threaded_logging(z);
        assert!(skip[0], "the pre-invalid block is skipped");
        // The log writes every block it does not skip; every fourth of them dies again.
        for off in (0..bpz).filter(|&o| !skip[o as usize]) {
            s.validate(s.layout.addr(z, off), owner, 2);
        }
        let died = (8..bpz).step_by(4).count() as u64;
        for off in (8..bpz).step_by(4) {
            s.free(s.layout.addr(z, off), 3);
        }
        s.checkpoint_begins();
        s.checkpoint_durable();
        s.open_for_threaded_logging(z);
        let b = s.threaded.as_ref().expect("on").hsr.profile().beta;
        let written = u64::from(bpz - 8);
        assert_eq!(b.other_seen, written, "the skipped block is not among them");
        assert_eq!(b.other_still, written - died);
        assert_eq!(b.cold_seen, 0, "nothing was cold at the first TL_open");
    }

    /// N_cold (seed 000 §3.3.2) counts blocks unchanged across two consecutive TL_opens of
    /// the zone, and only those still valid: none after the first TL_open.
    #[test]
    fn cold_blocks_are_valid_across_two_tl_opens() {
        let mut s = segments();
        let z = 3;
        let owner = Summary { nid: 7, ofs: 0 };
        for off in 0..8 {
            s.validate(s.layout.addr(z, off), owner, 0);
        }
        s.open_for_threaded_logging(z);
        assert_eq!(
            s.cold_blocks(z),
            0,
            "one TL_open: nothing is known to be cold"
        );
        s.free(s.layout.addr(z, 0), 1);
        s.checkpoint_begins();
        s.checkpoint_durable();
        s.open_for_threaded_logging(z);
        assert_eq!(s.cold_blocks(z), 7, "valid at both opens");
        s.free(s.layout.addr(z, 1), 2);
        assert_eq!(
            s.cold_blocks(z),
            6,
            "a cold block since invalidated is not moved"
        );
        // The zone (written, as a log would leave it) empties, is reset and takes new data:
        // none of that is known to be cold.
        s.free_zones.remove(&z);
        s.zones[z as usize] = ZoneUse::Used;
        for off in 2..8 {
            s.free(s.layout.addr(z, off), 3);
        }
        s.release_empty_zones();
        s.zone_reset(z);
        s.free_zones.remove(&z);
        s.zones[z as usize] = ZoneUse::Used;
        for off in 0..8 {
            s.validate(s.layout.addr(z, off), owner, 4);
        }
        assert_eq!(s.cold_blocks(z), 0, "cold in the zone's previous life");
    }
}
