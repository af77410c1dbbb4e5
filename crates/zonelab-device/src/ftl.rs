//! A page-mapped flash translation layer with greedy garbage collection.
//!
//! It serves randomly writable space: the conventional zones of a zoned namespace now, and the
//! whole conventional namespace (the "block interface tax" baseline of seed 003) later. Logical
//! pages (one flash page of LBAs each) map to physical pages anywhere in a pool of blocks; a write
//! goes to the open block of the next die in round-robin order; when a die runs low on free blocks
//! the block with the fewest valid pages is cleaned (valid pages copied, by copyback within a
//! plane, then the block erased). The mapping holds only written pages, so memory follows data.
//!
//! The mapping unit may be smaller than a flash page (`slots` units per page): the conventional
//! namespace maps each logical block (4 KiB) on its own and packs any `slots` buffered blocks into
//! one flash page, as enterprise SSDs with a 4 KiB indirection table do (seed 003: "fine-grained
//! indirection table"). Cleaning then packs the valid units of victims into new pages (read, then
//! program) and uses copyback only for pages whose units are all still valid.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use zonelab_flash::{BlockAddr, FlashArray, PageAddr};
use zonelab_sim::Nanos;

const INVALID: u64 = u64::MAX;

#[derive(Clone, Debug, Serialize, Deserialize)]
struct PoolBlock {
    addr: BlockAddr,
    /// Logical unit stored in each slot of each programmed page (`page * slots + slot`; INVALID
    /// once overwritten, or for a slot programmed with padding).
    owners: Vec<u64>,
    valid: u32,
}

/// Counters of the FTL's own flash work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FtlCounters {
    /// Flash pages programmed with host data.
    pub host_pages: u64,
    /// Logical units moved by cleaning.
    pub gc_copies: u64,
    /// Victim blocks erased by cleaning.
    pub gc_erases: u64,
    pub rmw_reads: u64,
    /// Flash pages programmed by cleaning (copyback or read + program).
    pub gc_pages: u64,
    /// Cleaning passes (one per die stream that ran low on free blocks).
    pub gc_runs: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PageFtl {
    pages_per_block: u32,
    /// Logical units per flash page (1: page-mapped).
    #[serde(default = "one")]
    slots: u32,
    /// Free blocks each die stream keeps; cleaning starts below it (at least 2).
    #[serde(default = "two")]
    reserve: u32,
    /// Free blocks a cleaning burst leaves on a die before host writes resume (at least
    /// `reserve`): the hysteresis of firmware garbage collection.
    #[serde(default = "two")]
    burst_target: u32,
    blocks: Vec<PoolBlock>,
    /// Pool indices grouped by die (dies in the order first seen).
    dies: Vec<DieStream>,
    next_die: usize,
    /// logical unit -> (pool index, slot position `page * slots + slot`)
    map: HashMap<u64, (u32, u32)>,
    logical_pages: u64,
    counters: FtlCounters,
    /// The flash has no copyback (a profile's `znsplus.copyback = false`): cleaning reads and
    /// programs every page it moves.
    #[serde(default)]
    no_copyback: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct DieStream {
    free: VecDeque<u32>,
    open: Option<u32>,
    full: Vec<u32>,
}

fn one() -> u32 {
    1
}
fn two() -> u32 {
    2
}

/// A pool too small for the logical space it must hold.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct FtlConfigError(pub String);

impl PageFtl {
    /// An FTL over `pool` offering `logical_pages` logical pages. Every die in the pool needs
    /// at least two blocks beyond its share of the logical space (one open, one to clean into).
    pub fn new(
        pool: Vec<BlockAddr>,
        pages_per_block: u32,
        logical_pages: u64,
    ) -> Result<PageFtl, FtlConfigError> {
        PageFtl::with_units(pool, pages_per_block, 1, 2, 0.0, logical_pages)
    }

    /// The same FTL on flash without copyback: cleaning moves every page by read and program.
    pub fn without_copyback(mut self) -> PageFtl {
        self.no_copyback = true;
        self
    }

    /// An FTL whose mapping unit is `1 / slots` of a flash page, offering `logical_units` units,
    /// that cleans when every die stream has fewer than `reserve` free blocks (at least 2: one
    /// to program into, one to clean into). A cleaning burst then runs on every die until
    /// `burst` of the die's spare blocks (its blocks beyond its share of the logical space) are
    /// free, and never stops below `reserve`.
    pub fn with_units(
        pool: Vec<BlockAddr>,
        pages_per_block: u32,
        slots: u32,
        reserve: u32,
        burst: f64,
        logical_units: u64,
    ) -> Result<PageFtl, FtlConfigError> {
        assert!(slots >= 1 && pages_per_block >= 1, "FTL without pages");
        let reserve = reserve.max(2);
        let logical_pages = logical_units;
        let mut by_die: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (i, b) in pool.iter().enumerate() {
            by_die.entry(b.die.0).or_default().push(i as u32);
        }
        let units_per_block = pages_per_block as u64 * slots as u64;
        let physical = pool.len() as u64 * units_per_block;
        let spare_blocks = reserve as u64 * by_die.len() as u64;
        if physical < logical_pages + spare_blocks * units_per_block {
            return Err(FtlConfigError(format!(
                "randomly writable space of {logical_pages} units needs at least {} units of flash ({reserve} spare blocks per die), pool has {physical}",
                logical_pages + spare_blocks * units_per_block
            )));
        }
        // Spare blocks of the smallest die: its blocks minus its share of the logical space.
        let dies = by_die.len() as u64;
        let smallest = by_die.values().map(|v| v.len() as u64).min().unwrap_or(0);
        let share = (logical_pages / dies.max(1)).div_ceil(units_per_block);
        let spare = smallest.saturating_sub(share);
        let burst_target = ((spare as f64 * burst.clamp(0.0, 1.0)) as u32).max(reserve);
        Ok(PageFtl {
            pages_per_block,
            slots,
            reserve,
            burst_target,
            blocks: pool
                .into_iter()
                .map(|addr| PoolBlock {
                    addr,
                    owners: Vec::new(),
                    valid: 0,
                })
                .collect(),
            dies: by_die
                .into_values()
                .map(|v| DieStream {
                    free: v.into(),
                    open: None,
                    full: Vec::new(),
                })
                .collect(),
            next_die: 0,
            map: HashMap::new(),
            logical_pages,
            counters: FtlCounters::default(),
            no_copyback: false,
        })
    }

    pub fn counters(&self) -> FtlCounters {
        self.counters
    }
    pub fn logical_pages(&self) -> u64 {
        self.logical_pages
    }
    /// Logical units per flash page.
    pub fn slots(&self) -> u32 {
        self.slots
    }
    /// Units currently mapped to flash.
    pub fn mapped_units(&self) -> u64 {
        self.map.len() as u64
    }
    /// Free (erased or reclaimable) blocks over all die streams.
    pub fn free_blocks(&self) -> u64 {
        self.dies.iter().map(|d| d.free.len() as u64).sum()
    }

    /// Physical page of a logical unit, if written.
    pub fn lookup(&self, lp: u64) -> Option<PageAddr> {
        self.map.get(&lp).map(|&(b, pos)| PageAddr {
            block: self.blocks[b as usize].addr,
            page: pos / self.slots,
        })
    }

    fn invalidate(&mut self, lp: u64) {
        if let Some((b, p)) = self.map.remove(&lp) {
            let blk = &mut self.blocks[b as usize];
            blk.owners[p as usize] = INVALID;
            blk.valid -= 1;
        }
    }

    /// Pages programmed in pool block `b`.
    fn used_pages(&self, b: u32) -> u32 {
        self.blocks[b as usize].owners.len() as u32 / self.slots
    }

    /// Records `units` (padded with INVALID to a whole page) as the content of page `page` of
    /// pool block `b`, which must be the block's next page.
    fn place(&mut self, b: u32, page: u32, units: &[u64]) {
        let slots = self.slots as usize;
        debug_assert!(units.len() <= slots);
        assert_eq!(self.used_pages(b), page, "FTL places pages in order");
        for i in 0..slots {
            let lu = units.get(i).copied().unwrap_or(INVALID);
            self.blocks[b as usize].owners.push(lu);
            if lu != INVALID {
                self.blocks[b as usize].valid += 1;
                let pos = page * self.slots + i as u32;
                let old = self.map.insert(lu, (b, pos));
                assert!(old.is_none(), "logical unit {lu} mapped twice");
            }
        }
    }

    /// Forgets a logical page (trim / zone reset of a conventional range).
    pub fn trim(&mut self, lp: u64) {
        self.invalidate(lp);
    }

    /// Next free physical page on die stream `d`, opening (and erasing) a block when needed.
    /// Returns the page and when it can be programmed (after any erase).
    fn next_page(
        &mut self,
        flash: &mut FlashArray,
        now: Nanos,
        at: Nanos,
        d: usize,
    ) -> (u32, u32, Nanos) {
        let ppb = self.pages_per_block;
        if let Some(b) = self.dies[d].open {
            let used = self.used_pages(b);
            if used < ppb {
                return (b, used, at);
            }
            self.dies[d].full.push(b);
            self.dies[d].open = None;
        }
        let b = self.dies[d]
            .free
            .pop_front()
            .expect("FTL die stream without a free block: cleaning keeps two in reserve");
        let addr = self.blocks[b as usize].addr;
        let mut ready = at;
        if flash.programmed_pages(addr) > 0 {
            ready = flash.erase(now, at, addr);
        }
        self.blocks[b as usize].owners.clear();
        self.dies[d].open = Some(b);
        (b, 0, ready)
    }

    /// Cleans die stream `d` until it has `burst_target` free blocks (or nothing on it is
    /// reclaimable): greedy victim (fewest valid units), valid units moved within the die
    /// (copyback for a page whose units are all valid, else read and packed into new pages),
    /// victim erased. Returns when cleaning ends.
    fn clean(&mut self, flash: &mut FlashArray, now: Nanos, at: Nanos, d: usize) -> Nanos {
        let mut t = at;
        let slots = self.slots as usize;
        let units_per_block = self.pages_per_block * self.slots;
        // Units read out of victims and waiting to fill a destination page, with when their
        // data is in the controller.
        let mut pending: Vec<u64> = Vec::with_capacity(slots);
        let mut pending_ready = at;
        let mut passes = 0usize;
        let limit = 2 * self.blocks.len() + 2;
        self.counters.gc_runs += 1;
        while self.dies[d].free.len() < self.burst_target as usize && passes < limit {
            passes += 1;
            let Some((pos, &victim)) = self.dies[d]
                .full
                .iter()
                .enumerate()
                .min_by_key(|&(_, &b)| self.blocks[b as usize].valid)
            else {
                break;
            };
            if self.blocks[victim as usize].valid >= units_per_block {
                // Nothing reclaimable on this die.
                break;
            }
            self.dies[d].full.swap_remove(pos);
            let owners = std::mem::take(&mut self.blocks[victim as usize].owners);
            let src_addr = self.blocks[victim as usize].addr;
            for lu in owners.iter().copied().filter(|&lu| lu != INVALID) {
                self.map.remove(&lu);
            }
            self.blocks[victim as usize].valid = 0;
            for (p, page_units) in owners.chunks(slots).enumerate() {
                let live: Vec<u64> = page_units
                    .iter()
                    .copied()
                    .filter(|&lu| lu != INVALID)
                    .collect();
                if live.is_empty() {
                    continue;
                }
                let src = PageAddr {
                    block: src_addr,
                    page: p as u32,
                };
                self.counters.gc_copies += live.len() as u64;
                if live.len() == slots && pending.is_empty() {
                    let (b, page, ready) = self.next_page(flash, now, t, d);
                    let dst = PageAddr {
                        block: self.blocks[b as usize].addr,
                        page,
                    };
                    let done = if src.block.plane == dst.block.plane && !self.no_copyback {
                        flash.copyback(now, ready, src, dst)
                    } else {
                        let r = flash.read(now, ready, src, flash.geometry().page_size);
                        flash.program(now, r, dst)
                    };
                    t = t.max(done);
                    self.place(b, page, &live);
                    self.counters.gc_pages += 1;
                    continue;
                }
                let r = flash.read(now, t, src, flash.geometry().page_size);
                pending_ready = pending_ready.max(r);
                for lu in live {
                    pending.push(lu);
                    if pending.len() == slots {
                        t = t.max(self.program_gc_page(flash, now, pending_ready, d, &pending));
                        pending.clear();
                    }
                }
            }
            t = t.max(flash.erase(now, t, src_addr));
            self.counters.gc_erases += 1;
            self.dies[d].free.push_back(victim);
        }
        if !pending.is_empty() {
            t = t.max(self.program_gc_page(flash, now, pending_ready, d, &pending));
        }
        t
    }

    /// Programs one page of units collected by cleaning on die stream `d`.
    fn program_gc_page(
        &mut self,
        flash: &mut FlashArray,
        now: Nanos,
        ready: Nanos,
        d: usize,
        units: &[u64],
    ) -> Nanos {
        let (b, page, ready) = self.next_page(flash, now, ready, d);
        let done = flash.program(
            now,
            ready,
            PageAddr {
                block: self.blocks[b as usize].addr,
                page,
            },
        );
        self.place(b, page, units);
        self.counters.gc_pages += 1;
        done
    }

    /// Whether die stream `d` can take a page without cleaning (free blocks below the reserve
    /// are kept as the destination of cleaning).
    fn has_room(&self, d: usize) -> bool {
        let ds = &self.dies[d];
        ds.free.len() >= self.reserve as usize
            || ds
                .open
                .is_some_and(|b| self.used_pages(b) < self.pages_per_block)
    }

    /// The die stream for the next page: round-robin from `next_die`, skipping dies that need
    /// cleaning. When all do, a cleaning burst runs on every die at once (each die cleans on
    /// its own flash timeline) and the page goes to the die whose burst ends first. Firmware
    /// garbage collection with hysteresis like this is why a conventional SSD's write
    /// bandwidth swings between the write buffer's full speed and almost nothing (seed 001
    /// obs. 11, Fig. 6a).
    fn pick_die(&mut self, flash: &mut FlashArray, now: Nanos, at: Nanos) -> (usize, Nanos) {
        let n = self.dies.len();
        for k in 0..n {
            let d = (self.next_die + k) % n;
            if self.has_room(d) {
                return (d, at);
            }
        }
        let mut first: Option<(Nanos, usize)> = None;
        for k in 0..n {
            let d = (self.next_die + k) % n;
            let t = self.clean(flash, now, at, d);
            if self.has_room(d) && first.is_none_or(|(f, _)| t < f) {
                first = Some((t, d));
            }
        }
        if let Some((t, d)) = first {
            return (d, t);
        }
        panic!(
            "FTL has no reclaimable space on any die: {} logical pages mapped in {} blocks",
            self.map.len(),
            self.blocks.len()
        );
    }

    /// Writes logical page `lp` whose data is in the controller at `at`. When `partial` and the
    /// page held data, the old page is read first (read-modify-write). Returns when the program
    /// completes.
    pub fn write(
        &mut self,
        flash: &mut FlashArray,
        now: Nanos,
        at: Nanos,
        lp: u64,
        partial: bool,
    ) -> Nanos {
        let mut t = at;
        if partial && let Some(old) = self.lookup(lp) {
            t = flash.read(now, t, old, flash.geometry().page_size);
            self.counters.rmw_reads += 1;
        }
        self.program_units(flash, now, t, &[lp])
    }

    /// Programs one flash page holding `units` (at most `slots` logical units, the rest padded)
    /// whose data is in the controller at `at`; older copies of the units become invalid.
    /// Cleans first when every die stream is short of free blocks. Returns when the program
    /// completes.
    pub fn program_units(
        &mut self,
        flash: &mut FlashArray,
        now: Nanos,
        at: Nanos,
        units: &[u64],
    ) -> Nanos {
        assert!(
            !units.is_empty() && units.len() <= self.slots as usize,
            "a flash page holds 1 to {} units, got {}",
            self.slots,
            units.len()
        );
        for &lu in units {
            assert!(
                lu < self.logical_pages,
                "logical unit {lu} beyond the FTL's space"
            );
            self.invalidate(lu);
        }
        let (d, t) = self.pick_die(flash, now, at);
        self.next_die = (d + 1) % self.dies.len();
        let (b, page, ready) = self.next_page(flash, now, t, d);
        let done = flash.program(
            now,
            ready,
            PageAddr {
                block: self.blocks[b as usize].addr,
                page,
            },
        );
        self.place(b, page, units);
        self.counters.host_pages += 1;
        done
    }

    /// Checks the mapping against the blocks' owner lists (tests and fsck-like audits).
    pub fn check_invariants(&self) {
        let mut valid = 0u64;
        for (i, b) in self.blocks.iter().enumerate() {
            let live = b.owners.iter().filter(|&&o| o != INVALID).count() as u32;
            assert_eq!(live, b.valid, "valid count of pool block {i}");
            assert!(
                b.owners.len() as u64 <= self.pages_per_block as u64 * self.slots as u64
                    && b.owners.len().is_multiple_of(self.slots as usize),
                "pool block {i} holds {} slots",
                b.owners.len()
            );
            for (p, &o) in b.owners.iter().enumerate() {
                if o != INVALID {
                    assert_eq!(
                        self.map.get(&o),
                        Some(&(i as u32, p as u32)),
                        "owner of block {i} slot {p}"
                    );
                }
            }
            valid += b.valid as u64;
        }
        assert_eq!(valid, self.map.len() as u64, "mapped units vs valid units");
        let mut seen = vec![false; self.blocks.len()];
        for (d, ds) in self.dies.iter().enumerate() {
            for &b in ds.free.iter().chain(ds.full.iter()).chain(ds.open.iter()) {
                assert!(
                    !seen[b as usize],
                    "pool block {b} listed twice (die stream {d})"
                );
                seen[b as usize] = true;
            }
            for &b in &ds.free {
                assert_eq!(
                    self.blocks[b as usize].valid, 0,
                    "free block {b} holds data"
                );
            }
        }
        assert!(seen.iter().all(|&s| s), "a pool block is in no list");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use zonelab_flash::{DieId, FlashTiming, Geometry};

    fn flash() -> FlashArray {
        FlashArray::new(
            Geometry {
                channels: 2,
                chips_per_channel: 1,
                dies_per_chip: 1,
                planes_per_die: 1,
                blocks_per_plane: 8,
                pages_per_block: 4,
                page_size: 4096,
            },
            FlashTiming {
                read: Nanos(50),
                program: Nanos(500),
                erase: Nanos(3000),
                copyback: Nanos(520),
                page_transfer: Nanos(10),
                read_holds_die: false,
                cache_program: false,
            },
        )
    }

    fn pool() -> Vec<BlockAddr> {
        (0..2)
            .flat_map(|d| {
                (0..8).map(move |b| BlockAddr {
                    die: DieId(d),
                    plane: 0,
                    block: b,
                })
            })
            .collect()
    }

    #[test]
    fn too_small_a_pool_is_refused() {
        assert!(PageFtl::new(pool(), 4, 60).is_err());
        assert!(PageFtl::new(pool(), 4, 40).is_ok());
    }

    #[test]
    fn overwrites_trigger_cleaning_and_keep_the_map_exact() {
        let mut f = flash();
        let mut ftl = PageFtl::new(pool(), 4, 40).unwrap();
        let mut t = Nanos(0);
        let mut rng = zonelab_sim::SimRng::new(3);
        for i in 0..400u64 {
            // Every page once, then random overwrites (so victims still hold valid pages).
            let lp = if i < 40 { i } else { rng.below(40) };
            t = ftl.write(&mut f, Nanos(0), Nanos(0), lp, false).max(t);
        }
        ftl.check_invariants();
        let c = ftl.counters();
        assert_eq!(c.host_pages, 400);
        assert!(c.gc_erases > 0 && c.gc_copies > 0, "{c:?}");
        assert_eq!(
            f.counters().programs + f.counters().copybacks,
            400 + c.gc_copies
        );
        for lp in 0..40 {
            assert!(ftl.lookup(lp).is_some());
        }
    }

    #[test]
    fn cleaning_without_copyback_reads_and_programs() {
        for no_copyback in [false, true] {
            let mut f = flash();
            let mut ftl = PageFtl::new(pool(), 4, 40).unwrap();
            if no_copyback {
                ftl = ftl.without_copyback();
            }
            let mut rng = zonelab_sim::SimRng::new(3);
            for i in 0..400u64 {
                let lp = if i < 40 { i } else { rng.below(40) };
                ftl.write(&mut f, Nanos(0), Nanos(0), lp, false);
            }
            ftl.check_invariants();
            let c = f.counters();
            assert_eq!(c.copybacks == 0, no_copyback, "{c:?}");
            assert_eq!(c.programs + c.copybacks, 400 + ftl.counters().gc_copies);
        }
    }

    proptest! {
        #[test]
        fn any_write_trim_sequence_keeps_invariants(ops in proptest::collection::vec((0u64..40, any::<bool>()), 1..300)) {
            let mut f = flash();
            let mut ftl = PageFtl::new(pool(), 4, 40).unwrap();
            for (lp, trim) in ops {
                if trim { ftl.trim(lp) } else { ftl.write(&mut f, Nanos(0), Nanos(0), lp, false); }
            }
            ftl.check_invariants();
        }
    }
}
