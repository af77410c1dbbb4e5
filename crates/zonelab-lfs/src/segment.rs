//! Segment management: the SIT (valid blocks per segment), the SSA (owner of every main-area
//! block), zone use, and the six logs that append into zones (seed 000 §2.3: "six types of
//! segments ... multihead logging ... only one segment can be open for each type at a time").

use crate::layout::Layout;
use crate::ondisk::{BlkAddr, CursegState, NULL_ADDR, SitEntry, Summary};
use std::collections::BTreeSet;

/// The six logs, in checkpoint order (F2FS's CURSEG_* numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Temp {
    HotData = 0,
    WarmData = 1,
    ColdData = 2,
    HotNode = 3,
    WarmNode = 4,
    ColdNode = 5,
}

impl Temp {
    pub const ALL: [Temp; 6] = [
        Temp::HotData,
        Temp::WarmData,
        Temp::ColdData,
        Temp::HotNode,
        Temp::WarmNode,
        Temp::ColdNode,
    ];
}

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
            layout,
        }
    }

    /// Valid blocks of a zone (all its segments).
    pub fn zone_valid(&self, z: u32) -> u32 {
        let spz = self.layout.sb.segs_per_zone;
        (z * spz..(z + 1) * spz)
            .map(|s| self.sit[s as usize].valid)
            .sum()
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
    }

    /// A block's data is dead (overwritten, truncated, moved).
    pub fn invalidate(&mut self, a: BlkAddr, now: u64) {
        if a != NULL_ADDR {
            self.mark(a, false, now);
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

    /// Takes the next block of log `t`, opening a free zone when its zone is full. `None`
    /// when no zone is free (the caller cleans first; running out is a bug in the reserve).
    pub fn alloc(&mut self, t: Temp) -> Option<BlkAddr> {
        let bpz = self.layout.blocks_per_zone;
        let need_zone = match self.logs[t as usize] {
            Some(c) => c.offset >= bpz,
            None => true,
        };
        if need_zone {
            if let Some(c) = self.logs[t as usize].take() {
                self.zones[c.zone as usize] = ZoneUse::Used;
            }
            let z = match self.next_zone[t as usize].take() {
                Some(z) => z,
                None => self.free_zones.pop_first()?,
            };
            self.zones[z as usize] = ZoneUse::Log(t);
            self.logs[t as usize] = Some(CursegState { zone: z, offset: 0 });
        }
        let c = self.logs[t as usize].as_mut().expect("log has a zone");
        assert_eq!(
            self.wp[c.zone as usize], c.offset,
            "log {t:?} out of step with zone {} write pointer",
            c.zone
        );
        let a = self.layout.addr(c.zone, c.offset);
        c.offset += 1;
        self.wp[c.zone as usize] = c.offset;
        if c.offset == bpz
            && self.next_zone[t as usize].is_none()
            && let Some(n) = self.free_zones.pop_first()
        {
            self.zones[n as usize] = ZoneUse::Log(t);
            self.next_zone[t as usize] = Some(n);
        }
        Some(a)
    }

    /// Gives log `t` a zone with room if it has none (without taking a block).
    pub fn ensure_zone(&mut self, t: Temp) {
        let bpz = self.layout.blocks_per_zone;
        if self.logs[t as usize].is_some_and(|c| c.offset < bpz) {
            return;
        }
        if let Some(c) = self.logs[t as usize].take() {
            self.zones[c.zone as usize] = ZoneUse::Used;
        }
        let z = match self.next_zone[t as usize].take() {
            Some(z) => Some(z),
            None => self.free_zones.pop_first(),
        };
        if let Some(z) = z {
            self.zones[z as usize] = ZoneUse::Log(t);
            self.logs[t as usize] = Some(CursegState { zone: z, offset: 0 });
        }
    }

    /// The address log `t` will write next (for node footers' `next` link), or NULL when it
    /// has nowhere to go.
    pub fn peek_next(&self, t: Temp) -> BlkAddr {
        match (self.logs[t as usize], self.next_zone[t as usize]) {
            (Some(c), _) if c.offset < self.layout.blocks_per_zone => {
                self.layout.addr(c.zone, c.offset)
            }
            (_, Some(n)) => self.layout.addr(n, 0),
            _ => NULL_ADDR,
        }
    }

    /// Zones cleaning may pick: written, not a log's, not already emptied.
    pub fn candidates(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.zones.len() as u32).filter(|&z| self.zones[z as usize] == ZoneUse::Used)
    }

    /// Newest modification time among a zone's segments (cost-benefit age).
    pub fn zone_mtime(&self, z: u32) -> u64 {
        let spz = self.layout.sb.segs_per_zone;
        (z * spz..(z + 1) * spz)
            .map(|s| self.sit[s as usize].mtime)
            .max()
            .unwrap_or(0)
    }
}
