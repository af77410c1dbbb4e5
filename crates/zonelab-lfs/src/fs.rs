//! The file system: in-memory state, mkfs and mount, and the [`FileSystem`] calls.
//!
//! State lives in one `RefCell` that no code holds across an `.await`: every call runs as
//! short synchronous steps between device I/O, so simulated threads interleave as they would on
//! a real kernel. Locks are simulated where F2FS takes them: `cp_lock` (F2FS's cp_rwsem; every
//! call that changes the file system holds a share, a checkpoint takes it whole so it blocks
//! them), `ns_lock` (directory changes), and per-inode locks for writes and truncation. Calls
//! that only read (read, lookup, getattr, readdir, readlink) take no share, as F2FS's read paths
//! take no cp_rwsem, so a checkpoint does not wait for their device reads; instead each device
//! read pins its zone ([`ReadPin`]) so that a cleaned zone is not reset under it.

use crate::cache::{Cache, PageData, UnderWriteback};
use crate::dev::{Dev, Devices, Traffic, TrafficBytes, join_all, merged_runs};
use crate::gc_log::{
    CompactionEvent, CompactionMethod, CompactionTime, GcEvent, PeriodicCheckpoint,
};
use crate::layout::{DeviceShape, FormatOptions, Layout, plan};
use crate::ondisk::{
    BLOCK, BlkAddr, Checkpoint, DENT_SPACE, Dentry, FLAG_DENT, FLAG_FSYNC, Footer, INODE_ADDRS,
    INODE_NIDS, InodeData, NAT_PER_BLOCK, NODE_ENTRIES, NULL_ADDR, NatEntry, Nid, Node, NodeBody,
    SSA_PER_BLOCK, Summary, Superblock, decode_dentries, decode_nat, decode_sit, decode_ssa,
    encode_dentries,
};
use crate::policy::{
    Allocation, CachedPages, HsrProfile, InStorage, Migration, Policy, VictimKind,
};
use crate::segment::{Segments, Superseded, Temp, Threaded, ThreadedStats, ZoneJob, ZoneUse};
use crate::vfs::{
    Attr, DirEntry, FileKind, FileSystem, FsError, FsResult, Ino, LINK_MAX, NAME_MAX, ROOT_INO,
    SetAttr, StatFs,
};
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use zonelab_device::host_stack::StackDevice;
use zonelab_device::payload::fingerprint;
use zonelab_device::{OwnedData, PayloadMode, ZoneAction, ZoneState};
use zonelab_sim::sync::{Mutex, Notify, Semaphore};
use zonelab_sim::{Nanos, Sim};

/// Shares of `cp_lock` (a checkpoint takes all of them).
const CP_SHARES: u64 = 1 << 32;

/// CPU costs of the host (seed 000 §3.1: request handling and page-cache work are part of
/// compaction time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HostModel {
    pub cores: u32,
    /// Entering and leaving the kernel for one file-system call.
    pub syscall: Nanos,
    /// Copying one 4 KiB page between user buffer and page cache.
    pub copy_page: Nanos,
    /// Allocating a page-cache page.
    pub page_alloc: Nanos,
    /// The host's write request handling for one dirty page (file data or node) it hands to
    /// the device: F2FS's do_write_data_page and __write_node_page lock the page, mark it
    /// under writeback, allocate its block and add it to a bio, page by page on the writing
    /// thread (writeback, fsync, checkpoint, and cleaning's move_data_page). The device's
    /// in-storage copies (IZC, plugging) need none of it (seed 000 §3.1, §4.1). Zero (not
    /// modelled) unless an experiment gives it (`[host] write_page`).
    pub write_page: Nanos,
}

impl Default for HostModel {
    fn default() -> Self {
        HostModel {
            cores: 4,
            syscall: Nanos(1_000),
            copy_page: Nanos(600),
            page_alloc: Nanos(250),
            write_page: Nanos::ZERO,
        }
    }
}

/// Who holds the data of a valid block of a compaction victim (IZC, seed 000 §3.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Holder {
    /// Only the device: it copies the block.
    Device,
    /// The host's cache, unchanged since the block was written.
    HostClean,
    /// The host's cache, changed since: the host must write it.
    HostDirty,
}

impl Holder {
    fn host(dirty: bool) -> Holder {
        if dirty {
            Holder::HostDirty
        } else {
            Holder::HostClean
        }
    }
}

/// IZC's cached-page choice (seed 000 §3.2.1 "Cached Page Handling", §4.1 Table 4): for each
/// valid block of a victim, as (chunk, holder), whether the host writes it. Dirty blocks
/// always; under IZC-H also the clean cached blocks of a fully cached chunk (every valid
/// block of it in the host), whose flash reads the host write saves; a chunk with a block
/// only the device has is copied by the device, copyback whole when it can.
fn written_by_host(
    cached: CachedPages,
    blocks: impl Iterator<Item = (u64, Holder)> + Clone,
) -> Vec<bool> {
    let device_chunks: BTreeSet<u64> = blocks
        .clone()
        .filter(|&(_, h)| h == Holder::Device)
        .map(|(chunk, _)| chunk)
        .collect();
    blocks
        .map(|(chunk, h)| match h {
            Holder::Device => false,
            Holder::HostDirty => true,
            Holder::HostClean => cached == CachedPages::Host && !device_chunks.contains(&chunk),
        })
        .collect()
}

/// A valid block of a compaction victim whose data the host holds (IZC, seed 000 §3.2.1).
#[derive(Clone, Copy)]
enum HeldBlock {
    /// A node block cached in the host.
    Node(Nid),
    /// A file page cached in the host.
    Data { ino: Ino, idx: u64 },
}

/// The fewest pages the page cache holds, whatever `FsOptions::cache_bytes` asks (a call may
/// pin a few dozen pages at once).
pub const MIN_CACHE_PAGES: u64 = 64;

/// Mount options.
#[derive(Clone, Debug)]
pub struct FsOptions {
    pub host: HostModel,
    /// Page cache size in bytes (data and node pages), at least [`MIN_CACHE_PAGES`] pages.
    pub cache_bytes: u64,
    /// How many times the inactive list the cache's active list may hold (Linux's
    /// inactive_ratio). None: Linux's for a cache of `cache_bytes`
    /// ([`crate::cache::linux_inactive_ratio`]); a scaled-down model of a larger host gives
    /// the larger host's, so that its cache keeps the same share of pages active.
    pub inactive_ratio: Option<u32>,
    /// Share of the cache that may be dirty before background writeback starts, and before
    /// writers must write back themselves (Linux dirty_background_ratio and dirty_ratio).
    pub dirty_background_ratio: f64,
    pub dirty_ratio: f64,
    /// Background writeback period (dirty_writeback_centisecs).
    pub writeback_interval: Nanos,
    /// Longest time between checkpoints (F2FS cp_interval).
    pub checkpoint_interval: Nanos,
    /// Zones kept free for cleaning; writers clean when fewer are free. None: 4 + 2% of zones.
    pub reserved_zones: Option<u32>,
    /// Zones beyond the reserve left out of the capacity users see (F2FS's overprovision
    /// segments, `overprov_segment_count` less the reserve): free space cleaning can use.
    /// None: as many as the reserve.
    pub overprovision_zones: Option<u32>,
    /// Raise the cleaning threshold and threaded logging's by the zones the dirty nodes and
    /// dentry blocks would fill ([`State::dirty_zones`]), as F2FS 4.10 and the published
    /// ZNS+ F2FS do. Off by default: F2FS counts whole sections, so one dirty page holds a
    /// whole zone free, three in all once a node and a dentry block are dirty, which is 0.6%
    /// of the paper's 512 zones but a share that grows as the file system shrinks (2.3% of
    /// the reproduction's 128, 15% of 20), and small file systems then clean far more.
    pub dirty_zones_raise_thresholds: bool,
    /// Added (wrapping) to the virtual clock to stamp inode times (atime, mtime, ctime). 0
    /// stamps virtual time itself; the FUSE mount sets it so that the mount's start is the
    /// wall-clock time in ns since the Unix epoch, so stamped times are Unix times and times
    /// set by utimes, stored as given, keep their meaning across mounts. Nothing else in the
    /// file system reads it.
    pub timestamp_offset: u64,
}

/// An inactive ratio of 0 would keep no page active.
fn check_inactive_ratio(opts: &FsOptions) -> FsResult<()> {
    if opts.inactive_ratio == Some(0) {
        return Err(FsError::Invalid(
            "inactive_ratio = 0: give at least 1 (the active list may hold that many times \
             the inactive one), or leave it unset for Linux's ratio for the cache's size"
                .into(),
        ));
    }
    Ok(())
}

/// The zones kept free for cleaning on a file system of `zones` main zones, and the zones
/// beyond them left out of the capacity users see: `opts`'s, or a reserve of 4 + 2% of the
/// zones and as many again. The reserve is at most half the zones, and the two together
/// leave users at least a quarter of them.
fn spare_zones(opts: &FsOptions, zones: u32) -> FsResult<Spare> {
    let most = zones / 2;
    let reserved = match opts.reserved_zones {
        None => default_reserved_zones(zones),
        Some(r) if (3..=most).contains(&r) => r,
        Some(r) => {
            return Err(FsError::Invalid(format!(
                "reserved_zones = {r} does not fit a file system of {zones} zones: give 3 to \
                 {most}, or leave it unset for 4 + 2% of the zones"
            )));
        }
    };
    let most_op = (zones - zones / 4).saturating_sub(reserved);
    let overprovision = match opts.overprovision_zones {
        None if reserved <= most_op => reserved,
        Some(o) if o <= most_op => o,
        o => {
            return Err(FsError::Invalid(format!(
                "overprovision_zones = {} with a reserve of {reserved} does not fit a file \
                 system of {zones} zones: give at most {most_op} (users keep at least a quarter \
                 of the zones), or a smaller reserve",
                o.unwrap_or(reserved)
            )));
        }
    };
    Ok(Spare {
        reserved,
        overprovision,
    })
}

/// The cleaning reserve of a file system of `zones` main zones when none is set: 4 + 2% of
/// the zones, at least 3 and at most half of them (when that leaves 3).
pub fn default_reserved_zones(zones: u32) -> u32 {
    (4 + zones / 50).clamp(3, (zones / 2).max(3))
}

/// The spare space mkfs.f2fs (f2fs-tools 1.x, `get_best_overprovision` and
/// `f2fs_prepare_super_block`) gives a main area of `main_segments` 2 MiB segments in sections
/// of `segs_per_sec`, in segments: (reserved, overprovision beyond the reserve). It tries
/// overprovision ratios c (0.01% to 10% in steps of 0.01%, or 10% to 95% in steps of 5% below
/// 256 segments), reserves (2 (100/c + 1) + 6) sections' worth of segments for cleaning, and
/// leaves c% of the rest out as overprovision, keeping the c that leaves users the most.
/// The reserve does not shrink with the device, so small main areas lose a large share.
pub fn f2fs_tools_spare(main_segments: u32, segs_per_sec: u32) -> (u32, u32) {
    let main = main_segments as f64;
    let sps = segs_per_sec.max(1) as f64;
    let reserve = |c: f64| (2.0 * (100.0 / c + 1.0) + 6.0) * sps;
    let (mut c, end, step) = if main_segments < 256 {
        (10.0, 95.0, 5.0)
    } else {
        (0.01, 10.0, 0.01)
    };
    let (mut best, mut most) = (0.0, 0.0);
    while c <= end {
        let r = reserve(c);
        let space = main - r - (main - r) * c / 100.0;
        if space > most {
            (best, most) = (c, space);
        }
        c += step;
    }
    if best == 0.0 {
        // No ratio leaves users anything: everything is spare.
        return (main_segments, 0);
    }
    let reserved = (reserve(best) as u32).min(main_segments);
    let op = ((main_segments - reserved) as f64 * best / 100.0) as u32;
    (reserved, op)
}

/// Zones a file system holds back from its users (F2FS's `rsvd_segment_count` and
/// `overprov_segment_count`, in zones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spare {
    /// Kept free for cleaning.
    reserved: u32,
    /// Left out of the capacity beyond the reserve.
    overprovision: u32,
}

/// Free zones a victim's cleaning may start with at the least: its moves may open a zone in
/// the data log they go to and in the cold node log, and one more is left for the logs.
const CLEANER_FREE_ZONES: usize = 3;

/// Percent of the NAT's entries freed since the last checkpoint at which a call that writes
/// checkpoints first, so the freed node IDs can be reused (F2FS's DEF_DIRTY_NAT_RATIO_THRESHOLD).
const DIRTY_NAT_RATIO_PERCENT: u64 = 10;

/// Foreground cleaning runs while fewer zones than this are free (`reserved` zones in
/// reserve). As in the published ZNS+ F2FS (`has_not_enough_free_secs`, kernel/fs/f2fs/
/// segment.h), at most the reserve is left free without threaded logging, and half of it with
/// threaded logging, where logs weigh threaded logging against compaction from one zone
/// above the reserve down and take it unweighed at this threshold (`need_SSR`,
/// `get_new_ssr_segment`, seed 000 §3.3.2). Cleaning starts while two zones are still free
/// at the latest, so the cleaner always has a destination beside the logs' current zones.
/// With [`FsOptions::dirty_zones_raise_thresholds`], both rise by the zones the dirty nodes
/// and dentry blocks would fill ([`State::dirty_zones`]), as F2FS's do.
pub(crate) fn cleaning_threshold(reserved: u32, threaded_logging: bool) -> u32 {
    if threaded_logging {
        (reserved / 2 + 1)
            .max(CLEANER_FREE_ZONES as u32)
            .min(reserved)
    } else {
        reserved
    }
}

impl Default for FsOptions {
    fn default() -> Self {
        FsOptions {
            host: HostModel::default(),
            cache_bytes: 256 << 20,
            inactive_ratio: None,
            dirty_background_ratio: 0.10,
            dirty_ratio: 0.20,
            writeback_interval: Nanos::from_secs(5),
            checkpoint_interval: Nanos::from_secs(60),
            reserved_zones: None,
            overprovision_zones: None,
            dirty_zones_raise_thresholds: false,
            timestamp_offset: 0,
        }
    }
}

/// The host's share of cleaning one segment of a victim ([`Fs::plan_segment`]): the data
/// blocks the host moves, as (victim address, file, block index), in address order, and the
/// time taken to find them (the init phase).
struct SegmentPlan {
    init: Nanos,
    data: Vec<(BlkAddr, Ino, u64)>,
}

/// What the host's moves of one segment's blocks did ([`Fs::move_by_host`]).
struct HostMoves {
    /// Time in the read and write phases.
    read: Nanos,
    write: Nanos,
    /// Blocks moved.
    moved: u64,
    /// Their writes, in flight.
    writes: Vec<zonelab_sim::JoinHandle<FsResult<()>>>,
}

impl HostMoves {
    /// Adds these moves to a victim's phase times, its count of moved blocks and its moves
    /// in flight.
    fn count_in(
        self,
        time: &mut CompactionTime,
        moved: &mut u64,
        moves: &mut Vec<zonelab_sim::JoinHandle<FsResult<()>>>,
    ) {
        time.read += self.read;
        time.write += self.write;
        *moved += self.moved;
        moves.extend(self.writes);
    }
}

/// A victim [`Fs::clean_zone`] has cleaned: prefree until a checkpoint makes its moves
/// durable ([`Fs::checkpoint_cleaned`]).
struct Cleaned {
    /// What it did so far (the checkpoint phase and the time it is durable are added by
    /// [`Fs::checkpoint_cleaned`]).
    event: CompactionEvent,
    /// The host's writes and the device's copies of its blocks, in flight.
    moves: Vec<zonelab_sim::JoinHandle<FsResult<()>>>,
    /// Node and metadata blocks its moves modify (HSR's N_node + N_meta).
    modified_meta: u64,
}

/// A count of zones per log (the six of [`Temp`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ZonesByLog {
    pub hot_data: u64,
    pub warm_data: u64,
    pub cold_data: u64,
    pub hot_node: u64,
    pub warm_node: u64,
    pub cold_node: u64,
}

impl ZonesByLog {
    /// Counts one zone of log `t`.
    pub fn add(&mut self, t: Temp) {
        *match t {
            Temp::HotData => &mut self.hot_data,
            Temp::WarmData => &mut self.warm_data,
            Temp::ColdData => &mut self.cold_data,
            Temp::HotNode => &mut self.hot_node,
            Temp::WarmNode => &mut self.warm_node,
            Temp::ColdNode => &mut self.cold_node,
        } += 1;
    }
}

/// File-system counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FsStats {
    pub checkpoints: u64,
    pub zones_cleaned: u64,
    pub foreground_cleanings: u64,
    pub background_cleanings: u64,
    pub blocks_moved: u64,
    /// Of `zones_cleaned`, those whose copies the device made (IZC's zone_compaction).
    pub zones_cleaned_in_device: u64,
    /// `zones_cleaned` by the log that wrote the victim: which zones the cleaner reclaims,
    /// beside those threaded logging reopens (seed 000 Table 5 counts both).
    pub zones_cleaned_by_log: ZonesByLog,
    /// Of `blocks_moved`, those the device copied (IZC's zone_compaction).
    pub blocks_copied_in_device: u64,
    /// Of `blocks_copied_in_device`, those in fully valid source chunks: the most copyback
    /// could move (seed 000 §3.2.1).
    pub device_copy_full_chunk_blocks: u64,
    /// Of those, the blocks the allocation placed as a whole chunk on the source's chip, for
    /// the device to copy back (seed 000 §3.3.1).
    pub device_copy_copyback_blocks: u64,
    pub zone_resets: u64,
    /// Checkpoints taken because pre-invalid blocks exceeded theta_PI (seed 000 §3.3.2).
    pub periodic_checkpoints: u64,
    /// Threaded logging (znsplus policy).
    pub threaded: ThreadedStats,
    /// What hybrid segment recycling profiled (znsplus policy): alpha's and beta's sums.
    pub hsr: HsrProfile,
    pub traffic: TrafficBytes,
}

/// NAT in memory.
pub(crate) struct Nat {
    pub entries: Vec<NatEntry>,
    pub dirty: BTreeSet<u32>,
    pub copy: Vec<bool>,
    pub next_nid: Nid,
    pub free: BTreeSet<Nid>,
    /// Freed since the checkpoint; reusable after the next one.
    pub pending_free: Vec<Nid>,
    pub valid_nodes: u64,
    pub valid_inodes: u64,
}

impl Nat {
    pub(crate) fn set(&mut self, nid: Nid, e: NatEntry) {
        self.entries[nid as usize] = e;
        self.dirty.insert(nid / NAT_PER_BLOCK as u32);
    }
}

/// A directory's entries by name, and which dentry block holds each.
#[derive(Default)]
pub(crate) struct DirIndex {
    pub by_name: BTreeMap<Vec<u8>, (u32, FileKind, u64)>,
    /// Entries of each dentry block (the block's content).
    blocks: Vec<Vec<Dentry>>,
    /// Bytes each block's entries take (so placing an entry does not sum every entry of a
    /// large directory).
    used: Vec<usize>,
}

impl DirIndex {
    fn from_blocks(blocks: Vec<Vec<Dentry>>) -> DirIndex {
        let mut by_name = BTreeMap::new();
        for (b, ents) in blocks.iter().enumerate() {
            for d in ents {
                by_name.insert(d.name.clone(), (d.ino, d.kind, b as u64));
            }
        }
        let used = blocks
            .iter()
            .map(|ents| ents.iter().map(Dentry::size).sum())
            .collect();
        DirIndex {
            by_name,
            blocks,
            used,
        }
    }

    /// Adds `d` to the first block with room (a new block when none has); returns the block
    /// and whether it is new.
    fn add(&mut self, d: Dentry) -> (usize, bool) {
        let need = d.size();
        let found = self.used.iter().position(|&u| u + need <= DENT_SPACE);
        let b = found.unwrap_or_else(|| {
            self.blocks.push(Vec::new());
            self.used.push(0);
            self.blocks.len() - 1
        });
        self.used[b] += need;
        self.by_name
            .insert(d.name.clone(), (d.ino, d.kind, b as u64));
        self.blocks[b].push(d);
        (b, found.is_none())
    }

    /// Removes the entry `name` of block `b` (names are unique in a directory: the scan stops
    /// at it). Names of one length mostly differ in their last bytes (numbered files), so
    /// those are compared before the whole name.
    fn remove(&mut self, b: usize, name: &[u8]) {
        let last = name.last();
        if let Some(i) = self.blocks[b]
            .iter()
            .position(|d| d.name.last() == last && d.name == name)
        {
            let d = self.blocks[b].remove(i);
            self.used[b] -= d.size();
        }
    }

    fn block(&self, b: usize) -> &[Dentry] {
        &self.blocks[b]
    }
}

pub(crate) struct State {
    pub segs: Segments,
    pub nat: Nat,
    pub cache: Cache,
    pub dirs: BTreeMap<Ino, DirIndex>,
    pub cp_ver: u64,
    pub payload: PayloadMode,
    pub reserved_zones: u32,
    /// Zones beyond the reserve left out of the capacity users see.
    pub overprovision_zones: u32,
    /// Foreground cleaning runs while fewer zones than this are free: the reserve, or with
    /// threaded logging half of it ([`cleaning_threshold`]), and [`State::dirty_zones`] more.
    pub clean_below: u32,
    /// [`FsOptions::dirty_zones_raise_thresholds`].
    pub dirty_zones_raise_thresholds: bool,
    pub stats: FsStats,
    /// Space reclamation so far, event by event ([`crate::gc_log`]).
    pub gc_log: Vec<GcEvent>,
    /// Inodes renamed or linked since the checkpoint, and inodes created since it: an fsync
    /// touching them checkpoints instead of relying on roll-forward.
    pub renamed_since_cp: BTreeSet<Ino>,
    pub created_since_cp: BTreeSet<Ino>,
    pub unmounted: bool,
}

impl State {
    /// The zones a checkpoint would fill with the dirty nodes and dentry blocks, by which
    /// F2FS raises its free-section thresholds (`has_not_enough_free_secs` and `need_SSR`,
    /// F2FS 4.10 segment.h, as in the published ZNS+ F2FS: `node_secs + 2 * dent_secs +
    /// imeta_secs`). Here an inode's change dirties its node at once, so F2FS's dirty inode
    /// metadata (imeta) is among the dirty nodes. 0 unless
    /// [`FsOptions::dirty_zones_raise_thresholds`].
    pub fn dirty_zones(&self) -> u32 {
        if !self.dirty_zones_raise_thresholds {
            return 0;
        }
        let l = &self.segs.layout;
        l.zones_for_dirty(self.cache.dirty_node_pages() as u64)
            + 2 * l.zones_for_dirty(self.cache.dirty_dentry_pages() as u64)
    }

    /// Whether the free zones, with `prefree` more a checkpoint would free, are fewer than
    /// the cleaning threshold (`clean_below`, raised by [`State::dirty_zones`]).
    fn zones_short(&self, prefree: usize) -> bool {
        self.segs.free_zones.len() + prefree
            < self.clean_below.saturating_add(self.dirty_zones()) as usize
    }

    /// Hands threaded logging the thresholds' rise now ([`State::dirty_zones`]) before the
    /// logs take blocks.
    fn set_dirty_zones(&mut self) {
        let d = self.dirty_zones();
        if let Some(th) = &mut self.segs.threaded {
            th.dirty_zones = d;
        }
    }
}

pub(crate) struct Inner {
    pub sim: Sim,
    pub dev: Dev,
    pub opts: FsOptions,
    pub policy: Box<dyn Policy>,
    pub st: RefCell<State>,
    pub cp_lock: Semaphore,
    pub ns_lock: Mutex<()>,
    pub gc_lock: Mutex<()>,
    pub cores: Semaphore,
    /// Per-inode locks, looked up by number only (never walked, so hash order cannot leak).
    pub inode_locks: RefCell<rustc_hash::FxHashMap<Ino, Rc<Mutex<()>>>>,
    pub flusher_wake: Notify,
    pub last_cp: Cell<Nanos>,
    /// When the last file-system call began (idle detection for background cleaning).
    pub last_call: Cell<Nanos>,
    /// The first failure of a zone command issued in the background (TL_open, finish of a
    /// threaded-logging zone); the next checkpoint reports it.
    pub zone_job_error: RefCell<Option<FsError>>,
    /// Device reads in flight per main-area zone ([`ReadPin`]), and the wake-up for a reset
    /// waiting for a zone's to end.
    pub read_pins: RefCell<BTreeMap<u32, u32>>,
    pub reads_unpinned: Notify,
    /// Woken whenever writes of cached pages or nodes complete ([`Fs::write_back`]).
    pub writeback_ended: Notify,
    /// fsck holds the background work off while it reads the state ([`BackgroundHold`]):
    /// how many hold it, whether a round is under way, and the end of one.
    pub background_held: Cell<u32>,
    pub background_busy: Cell<bool>,
    pub background_done: Notify,
}

/// While it lives, the background work (writeback, idle cleaning, periodic checkpoints)
/// starts no round, so a reader of the whole state (fsck) sees one state. Nothing else
/// changes it while no call is made.
pub(crate) struct BackgroundHold {
    inner: Rc<Inner>,
}

impl Drop for BackgroundHold {
    fn drop(&mut self) {
        let held = &self.inner.background_held;
        held.set(held.get() - 1);
    }
}

/// A device read in flight from a main-area zone, taken in the same step as the block's address
/// is looked up: a block cleaning moves meanwhile stays readable at its old address until the
/// pin drops, since the checkpoint that frees its zone waits for that before resetting it. (In
/// F2FS a reader holds the page it reads locked, which cleaning must take to move the block.)
pub(crate) struct ReadPin {
    inner: Rc<Inner>,
    zone: u32,
}

impl Drop for ReadPin {
    fn drop(&mut self) {
        let mut pins = self.inner.read_pins.borrow_mut();
        let n = pins.get_mut(&self.zone).expect("a pinned zone has a count");
        *n -= 1;
        if *n == 0 {
            pins.remove(&self.zone);
            self.inner.reads_unpinned.notify_all();
        }
    }
}

/// A mounted file system; clones share it.
#[derive(Clone)]
pub struct Fs {
    pub(crate) inner: Rc<Inner>,
}

fn now_ns(sim: &Sim) -> u64 {
    sim.now().0
}

impl Fs {
    /// The time stamped on inodes now: the virtual clock plus
    /// [`FsOptions::timestamp_offset`].
    fn stamp(&self) -> u64 {
        now_ns(&self.inner.sim).wrapping_add(self.inner.opts.timestamp_offset)
    }
}

fn check_name(name: &str) -> FsResult<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(FsError::Invalid(format!("bad file name {name:?}")));
    }
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    Ok(())
}

/// Where a file block's address lives: the node and the slot in it, plus the nodes on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// In the inode, slot i.
    Inode(usize),
    /// Through the inode's nid slot `top`, then `path` entries of indirect nodes (0, 1 or 2
    /// levels), ending at slot `slot` of a direct node whose first file block is `base`.
    Tree {
        top: usize,
        path: [usize; 2],
        depth: usize,
        slot: usize,
        base: u64,
    },
}

fn slot_of(idx: u64) -> FsResult<Slot> {
    let n = NODE_ENTRIES as u64;
    let mut i = idx;
    if i < INODE_ADDRS as u64 {
        return Ok(Slot::Inode(i as usize));
    }
    i -= INODE_ADDRS as u64;
    if i < 2 * n {
        return Ok(Slot::Tree {
            top: (i / n) as usize,
            path: [0; 2],
            depth: 0,
            slot: (i % n) as usize,
            base: idx - i % n,
        });
    }
    i -= 2 * n;
    if i < 2 * n * n {
        return Ok(Slot::Tree {
            top: 2 + (i / (n * n)) as usize,
            path: [((i % (n * n)) / n) as usize, 0],
            depth: 1,
            slot: (i % n) as usize,
            base: idx - i % n,
        });
    }
    i -= 2 * n * n;
    if i < n * n * n {
        return Ok(Slot::Tree {
            top: 4,
            path: [(i / (n * n)) as usize, ((i % (n * n)) / n) as usize],
            depth: 2,
            slot: (i % n) as usize,
            base: idx - i % n,
        });
    }
    Err(FsError::TooLarge)
}

/// Where the blocks of one zone_compaction go, and how many of them the device can copy back.
pub(crate) struct Placement {
    /// The destination of each source block, in the order of the sources.
    pub(crate) to: Vec<BlkAddr>,
    /// Source blocks in fully valid chunks: the most that copyback could move (seed 000
    /// §3.2.1: "a chunk is copybackable only when all the blocks in it must be copied").
    pub(crate) full_chunk_blocks: u64,
    /// Of those, the blocks placed as a whole chunk on the source's chip, which the device
    /// copies back (unless its consecutive-copyback limit stops it).
    pub(crate) copyback_blocks: u64,
}

/// Destinations for blocks `src` (in address order) among the reserved blocks `dst` (seed 000
/// §3.3.1, Fig. 5). Copyback-aware: each fully valid source chunk takes a whole reserved chunk
/// on the same flash chip while one is left, so the device can copy it back; then the other
/// blocks fill the remaining reserved blocks in order. Sequential: `dst` in order.
pub(crate) fn assign_destinations(
    src: &[BlkAddr],
    dst: &[BlkAddr],
    allocation: Allocation,
    dev: &Dev,
) -> Placement {
    assert_eq!(src.len(), dst.len(), "one destination per block");
    let per_chunk = dev.blocks_per_chunk() as usize;
    // Runs of blocks sharing a chunk, as (first index, length, chip).
    let runs = |v: &[BlkAddr]| {
        let mut out: Vec<(usize, usize, (u32, u32))> = Vec::new();
        let mut last_chunk = None;
        for (i, &a) in v.iter().enumerate() {
            let (chip, chunk) = dev.chip_of(a as u64);
            match out.last_mut() {
                Some(r) if last_chunk == Some(chunk) => r.1 += 1,
                _ => out.push((i, 1, chip)),
            }
            last_chunk = Some(chunk);
        }
        out
    };
    let full_chunks: Vec<(usize, usize, (u32, u32))> =
        runs(src).into_iter().filter(|r| r.1 == per_chunk).collect();
    let to = match allocation {
        Allocation::Sequential => dst.to_vec(),
        Allocation::CopybackAware => {
            let mut free: BTreeMap<(u32, u32), std::collections::VecDeque<usize>> = BTreeMap::new();
            for (i, len, chip) in runs(dst) {
                if len == per_chunk {
                    free.entry(chip).or_default().push_back(i);
                }
            }
            let mut out = vec![NULL_ADDR; src.len()];
            let mut taken = vec![false; dst.len()];
            for &(i, len, chip) in &full_chunks {
                if let Some(j) = free.get_mut(&chip).and_then(|q| q.pop_front()) {
                    for k in 0..len {
                        out[i + k] = dst[j + k];
                        taken[j + k] = true;
                    }
                }
            }
            let mut rest = dst
                .iter()
                .zip(&taken)
                .filter(|(_, t)| !**t)
                .map(|(&d, _)| d);
            for o in out.iter_mut().filter(|o| **o == NULL_ADDR) {
                *o = rest.next().expect("as many destinations as blocks");
            }
            out
        }
    };
    // A fully valid chunk is copied back when its blocks fill one chunk on its chip in the same
    // order, whichever allocation placed them there.
    let copyback_chunks = full_chunks
        .iter()
        .filter(|&&(i, len, chip)| {
            let (d_chip, d_chunk) = dev.chip_of(to[i] as u64);
            d_chip == chip
                && (0..len).all(|k| {
                    to[i + k] == to[i] + k as BlkAddr && dev.chip_of(to[i + k] as u64).1 == d_chunk
                })
        })
        .count();
    Placement {
        to,
        full_chunk_blocks: (full_chunks.len() * per_chunk) as u64,
        copyback_blocks: (copyback_chunks * per_chunk) as u64,
    }
}

/// Clears a node's block slots from `from` on: the (slot, address) of each that held a block.
fn clear_slots(addrs: &mut [BlkAddr], from: usize) -> Vec<(usize, BlkAddr)> {
    addrs
        .iter_mut()
        .enumerate()
        .skip(from)
        .filter(|(_, a)| **a != NULL_ADDR)
        .map(|(s, a)| (s, std::mem::replace(a, NULL_ADDR)))
        .collect()
}

/// Temperature of a node (F2FS: hot = direct nodes of directories, warm = direct nodes of
/// files, cold = indirect nodes).
fn node_temp(node: &Node, dir: bool) -> Temp {
    match node.body {
        NodeBody::Indirect(_) => Temp::ColdNode,
        _ if dir => Temp::HotNode,
        _ => Temp::WarmNode,
    }
}

impl Fs {
    /// Formats the zoned device behind `devices` (with the metadata on its companion
    /// conventional device when it has one) and mounts the new file system.
    pub async fn mkfs(
        sim: Sim,
        devices: impl Into<Devices>,
        format: FormatOptions,
        opts: FsOptions,
        policy: Box<dyn Policy>,
    ) -> FsResult<Fs> {
        let devices = devices.into();
        let stack = devices.zoned.clone();
        let (mut shape, payload) = {
            let d = stack.device().borrow();
            let z = d.zoned().ok_or_else(|| {
                FsError::Invalid("the file system needs a zoned namespace".into())
            })?;
            let p = d.profile();
            (DeviceShape::of(p), z.payload_mode())
        };
        if let Some(c) = &devices.companion {
            let c = c.device().borrow();
            if c.conventional().is_none() {
                return Err(FsError::Invalid(format!(
                    "the companion device (profile {}) is a zoned namespace; it must be a conventional one (a profile with namespace = \"conventional\", e.g. sn640)",
                    c.profile().name
                )));
            }
            if c.lba_size() != 4096 {
                return Err(FsError::Invalid(format!(
                    "the file system needs 4096-byte LBAs; the companion device has {} (set lba_size = 4096 in its profile)",
                    c.lba_size()
                )));
            }
            shape = shape.with_companion(c.total_lbas());
        }
        let sb = plan(shape, format, payload == PayloadMode::Fingerprint)?;
        let layout = Layout::new(sb.clone())?;
        spare_zones(&opts, sb.main_zones)?;
        check_inactive_ratio(&opts)?;
        let dev = Dev::new(sim.clone(), devices)?;
        // Empty every sequential zone, then write the superblock twice.
        for z in 0..sb.main_zones {
            let state = stack
                .device()
                .borrow()
                .zoned()
                .map(|d| d.zone(layout.zone_id(z)).state);
            if state.is_some_and(|s| s != ZoneState::Empty) {
                dev.zone(ZoneAction::Reset, layout.zone_start(z)).await?;
            }
        }
        let sbb = sb.encode();
        dev.write_now(0, OwnedData::Bytes(sbb.clone()), Traffic::Meta)
            .await?;
        dev.write_now(1, OwnedData::Bytes(sbb), Traffic::Meta)
            .await?;
        let fs = Fs::assemble(sim, dev, layout, opts, policy, payload, 0);
        // The root directory, then the first checkpoint (version 1).
        {
            let mut st = fs.inner.st.borrow_mut();
            let t = fs.stamp();
            st.nat.next_nid = ROOT_INO as Nid + 1;
            let root = new_inode(
                ROOT_INO as Nid,
                FileKind::Dir,
                0o755,
                0,
                0,
                t,
                ROOT_INO,
                b"",
            );
            st.nat.set(
                ROOT_INO as Nid,
                NatEntry {
                    ino: ROOT_INO as u32,
                    addr: NULL_ADDR,
                },
            );
            st.nat.valid_nodes += 1;
            st.nat.valid_inodes += 1;
            st.cache.put_node(ROOT_INO as Nid, root, true);
            // The first checkpoint writes every NAT and SIT block.
            st.nat.dirty = (0..st.segs.layout.sb.nat_blocks).collect();
            st.segs.sit_dirty = (0..st.segs.layout.sb.sit_blocks).collect();
            st.dirs.insert(ROOT_INO, DirIndex::default());
        }
        fs.checkpoint().await?;
        fs.start_background();
        Ok(fs)
    }

    fn assemble(
        sim: Sim,
        dev: Dev,
        layout: Layout,
        opts: FsOptions,
        policy: Box<dyn Policy>,
        payload: PayloadMode,
        cp_ver: u64,
    ) -> Fs {
        let zones = layout.sb.main_zones;
        let spare = spare_zones(&opts, zones).expect("checked before assembling");
        let reserved = spare.reserved;
        let clean_below = cleaning_threshold(reserved, policy.threaded_logging().is_some());
        let max_nids = layout.sb.max_nids as usize;
        let nat_blocks = layout.sb.nat_blocks as usize;
        let cache_pages = (opts.cache_bytes / BLOCK as u64).max(MIN_CACHE_PAGES);
        let mut segs = Segments::new(layout);
        if let Some(tl) = policy.threaded_logging() {
            // HSR's unit costs from the device's flash timing (seed 000 §3.3.2): an in-device
            // copy of a block is its share of a chunk's copyback, or, on a device that does
            // not copy back, of a flash read, two page transfers and a program; a host write
            // its share of a page transfer and program.
            let (copy_ns, write_ns) = {
                let ns = dev.stack.device().borrow();
                let p = ns.profile();
                let per_chunk = dev.blocks_per_chunk().max(1) as f64;
                let f = &p.flash;
                let copy = if p.znsplus.copyback {
                    f.copyback.0.0
                } else {
                    f.read.0.0 + 2 * f.page_transfer.0.0 + f.program.0.0
                };
                (
                    copy as f64 / per_chunk,
                    (f.page_transfer.0.0 + f.program.0.0) as f64 / per_chunk,
                )
            };
            segs.threaded = Some(Threaded::new(
                crate::policy::Hsr::new(copy_ns, write_ns, &tl),
                reserved + 2,
                clean_below,
                zones as usize,
            ));
        }
        let st = State {
            segs,
            nat: Nat {
                entries: vec![NatEntry::default(); max_nids],
                dirty: BTreeSet::new(),
                copy: vec![false; nat_blocks],
                next_nid: ROOT_INO as Nid + 1,
                free: BTreeSet::new(),
                pending_free: Vec::new(),
                valid_nodes: 0,
                valid_inodes: 0,
            },
            cache: match opts.inactive_ratio {
                Some(r) => Cache::with_inactive_ratio(cache_pages, r),
                None => Cache::new(cache_pages),
            },
            dirs: BTreeMap::new(),
            cp_ver,
            payload,
            reserved_zones: reserved,
            overprovision_zones: spare.overprovision,
            clean_below,
            dirty_zones_raise_thresholds: opts.dirty_zones_raise_thresholds,
            stats: FsStats::default(),
            gc_log: Vec::new(),
            renamed_since_cp: BTreeSet::new(),
            created_since_cp: BTreeSet::new(),
            unmounted: false,
        };
        let cores = opts.host.cores.max(1) as u64;
        Fs {
            inner: Rc::new(Inner {
                sim,
                dev,
                opts,
                policy,
                st: RefCell::new(st),
                cp_lock: Semaphore::new(CP_SHARES),
                ns_lock: Mutex::new(()),
                gc_lock: Mutex::new(()),
                cores: Semaphore::new(cores),
                inode_locks: RefCell::new(rustc_hash::FxHashMap::default()),
                flusher_wake: Notify::new(),
                last_cp: Cell::new(Nanos::ZERO),
                last_call: Cell::new(Nanos::ZERO),
                zone_job_error: RefCell::new(None),
                read_pins: RefCell::new(BTreeMap::new()),
                reads_unpinned: Notify::new(),
                writeback_ended: Notify::new(),
                background_held: Cell::new(0),
                background_busy: Cell::new(false),
                background_done: Notify::new(),
            }),
        }
    }

    /// Whether `devices` hold a file system: an intact superblock copy (mkfs asks before it
    /// formats over one).
    pub async fn exists_on(sim: Sim, devices: impl Into<Devices>) -> FsResult<bool> {
        let dev = Dev::new(sim, devices.into())?;
        Ok(read_superblock(&dev).await.is_ok())
    }

    /// Mounts the file system on the device behind `stack`: the newest valid checkpoint is the
    /// state (roll-back); logs continue at the zones' write pointers; zones written after the
    /// checkpoint but free in it are reset.
    pub async fn mount(
        sim: Sim,
        devices: impl Into<Devices>,
        opts: FsOptions,
        policy: Box<dyn Policy>,
    ) -> FsResult<Fs> {
        let devices = devices.into();
        let stack = devices.zoned.clone();
        if stack.device().borrow().zoned().is_none() {
            return Err(FsError::Invalid(
                "the file system needs a zoned namespace".into(),
            ));
        }
        let companion_lbas = devices.companion_lbas();
        let has_companion = devices.companion.is_some();
        let dev = Dev::new(sim.clone(), devices)?;
        let sb = read_superblock(&dev).await;
        let no_conventional_zones = stack
            .device()
            .borrow()
            .zoned()
            .is_some_and(|z| z.profile().zns.conventional_zones == 0);
        // No intact superblock is no file system here (an unformatted device, or the metadata
        // on a companion not attached): a wrong request, as Linux's mount answers EINVAL when
        // it finds no file system, not damage for fsck to report.
        let sb = sb.map_err(|why| {
            FsError::Invalid(if has_companion {
                format!(
                    "no valid superblock on the companion device ({why}): attach the companion this file system was formatted with, or mount without a companion if its metadata is on conventional zones (or run mkfs)"
                )
            } else if no_conventional_zones {
                format!(
                    "no valid superblock ({why}); the zoned device has no conventional zones, so its metadata would be on a companion conventional device: attach that companion (--companion), or run mkfs"
                )
            } else {
                format!("no valid superblock ({why}); is this device formatted? run mkfs")
            })
        })?;
        if sb.companion_lbas != companion_lbas {
            return Err(FsError::Invalid(
                match (sb.companion_lbas, companion_lbas) {
                    (0, n) => format!(
                        "the file system keeps its metadata on conventional zones of the zoned device, but a companion device ({n} blocks) is attached: mount without the companion"
                    ),
                    (want, 0) => format!(
                        "the file system keeps its metadata on a companion conventional device of {want} blocks: attach it (--companion)"
                    ),
                    (want, n) => format!(
                        "the file system's companion device has {want} blocks but the attached companion has {n}: attach the companion it was formatted with"
                    ),
                },
            ));
        }
        {
            let d = stack.device().borrow();
            if d.total_lbas() != sb.device_lbas || d.zone_size() != Some(sb.zone_size) {
                return Err(FsError::Corrupt(
                    "the superblock describes a different device geometry".into(),
                ));
            }
        }
        let payload = if sb.payload == 1 {
            PayloadMode::Fingerprint
        } else {
            PayloadMode::Full
        };
        let layout = Layout::new(sb)?;
        // The newer of the two valid checkpoint packs.
        let mut best: Option<Checkpoint> = None;
        for p in 0..2 {
            let start = layout.cp_pack(p);
            let mut blocks = Vec::new();
            for i in 0..layout.sb.cp_blocks as u64 {
                match dev.read(start + i, 1, Traffic::Checkpoint).await {
                    Ok(d) if d.bytes.len() == BLOCK => blocks.push(d.bytes),
                    _ => break,
                }
            }
            if let Ok(cp) = Checkpoint::decode(&blocks)
                && best.as_ref().is_none_or(|b| cp.version > b.version)
            {
                best = Some(cp);
            }
        }
        let cp = best.ok_or_else(|| FsError::Corrupt("no valid checkpoint pack".into()))?;
        if cp.nat_copy.len() != layout.sb.nat_blocks as usize
            || cp.sit_copy.len() != layout.sb.sit_blocks as usize
        {
            return Err(FsError::Corrupt(
                "checkpoint does not match the superblock".into(),
            ));
        }
        spare_zones(&opts, layout.sb.main_zones)?;
        check_inactive_ratio(&opts)?;
        let fs = Fs::assemble(sim, dev, layout, opts, policy, payload, cp.version);
        fs.load(&cp).await?;
        fs.start_background();
        Ok(fs)
    }

    async fn load(&self, cp: &Checkpoint) -> FsResult<()> {
        let inner = &self.inner;
        let layout = inner.st.borrow().segs.layout.clone();
        let sb = &layout.sb;
        // NAT.
        let mut entries = Vec::with_capacity(sb.max_nids as usize);
        for i in 0..sb.nat_blocks {
            let b = inner
                .dev
                .read_meta(layout.nat_block(i, cp.nat_copy[i as usize]), Traffic::Meta)
                .await?;
            entries.extend(decode_nat(&b, i)?);
        }
        // SIT.
        let segments = layout.segments() as usize;
        let mut sit = Vec::with_capacity(segments);
        for i in 0..sb.sit_blocks {
            let count = layout.sit_per_block.min(segments - sit.len());
            let b = inner
                .dev
                .read_meta(layout.sit_block(i, cp.sit_copy[i as usize]), Traffic::Meta)
                .await?;
            sit.extend(decode_sit(&b, i, count, sb.blocks_per_seg)?);
        }
        // SSA of segments holding valid blocks.
        let mut ssa_parts = Vec::new();
        for (seg, e) in sit.iter().enumerate() {
            if e.valid == 0 {
                continue;
            }
            for part in 0..sb.ssa_per_seg {
                let count =
                    SSA_PER_BLOCK.min(sb.blocks_per_seg as usize - part as usize * SSA_PER_BLOCK);
                let b = inner
                    .dev
                    .read_meta(layout.ssa_block(seg as u32, part), Traffic::Meta)
                    .await?;
                ssa_parts.push((seg as u32, part, decode_ssa(&b, seg as u32, part, count)?));
            }
        }
        // Zones a log was writing by threaded logging: finished, so the device plugs what the
        // log skipped; the log moves on to another zone.
        let tl_open: Vec<u32> = {
            let d = inner.dev.stack.device().borrow();
            let z = d.zoned().expect("mounted on a zoned device");
            (0..sb.main_zones)
                .filter(|&i| z.is_tl_open(layout.zone_id(i)))
                .collect()
        };
        // What each zone holds before those finishes plug the TL_opened ones to the end:
        // roll-forward must not recover blocks past it (see the recovery module).
        let durable_offsets: Vec<u32> = {
            let d = inner.dev.stack.device().borrow();
            let z = d.zoned().expect("mounted on a zoned device");
            (0..sb.main_zones)
                .map(|i| {
                    let zone = z.zone(layout.zone_id(i));
                    (zone.wp.0 - zone.start.0).min(layout.blocks_per_zone as u64) as u32
                })
                .collect()
        };
        for z in tl_open {
            inner
                .dev
                .zone(ZoneAction::Finish, layout.zone_start(z))
                .await?;
        }
        let zone_states: Vec<(ZoneState, u64)> = {
            let d = inner.dev.stack.device().borrow();
            let z = d.zoned().expect("mounted on a zoned device");
            (0..sb.main_zones)
                .map(|i| {
                    let zone = z.zone(layout.zone_id(i));
                    (zone.state, zone.wp.0 - zone.start.0)
                })
                .collect()
        };
        {
            let mut st = inner.st.borrow_mut();
            let st = &mut *st;
            st.nat.entries = entries;
            st.nat.copy = cp.nat_copy.clone();
            st.nat.next_nid = cp.next_nid;
            st.nat.valid_nodes = cp.valid_nodes;
            st.nat.valid_inodes = cp.valid_inodes;
            st.nat.free = (ROOT_INO as Nid + 1..cp.next_nid)
                .filter(|&n| st.nat.entries[n as usize] == NatEntry::default())
                .collect();
            let segs = &mut st.segs;
            segs.valid_blocks = sit.iter().map(|e| e.valid as u64).sum();
            segs.sit = sit;
            segs.sit_copy = cp.sit_copy.clone();
            for (seg, part, sums) in ssa_parts {
                let (z, so) = (seg / sb.segs_per_zone, seg % sb.segs_per_zone);
                let first =
                    layout.main_index(z, so * sb.blocks_per_seg) + part as usize * SSA_PER_BLOCK;
                segs.ssa[first..first + sums.len()].copy_from_slice(&sums);
            }
            segs.free_zones.clear();
            for z in 0..sb.main_zones {
                let written = zone_states[z as usize].1;
                segs.wp[z as usize] = written.min(layout.blocks_per_zone as u64) as u32;
                if let Some(t) = cp.cursegs.iter().position(|c| c.zone == z) {
                    segs.zones[z as usize] = ZoneUse::Log(Temp::ALL[t]);
                    segs.zone_temp[z as usize] = Some(Temp::ALL[t]);
                    segs.logs[t] = Some(crate::ondisk::CursegState {
                        zone: z,
                        offset: segs.wp[z as usize],
                    });
                } else {
                    // Settled after roll-forward, which may find valid blocks here.
                    segs.zones[z as usize] = ZoneUse::Used;
                    segs.zone_temp[z as usize] = segs.log_in_sit(z);
                }
            }
        }
        let recovered = self.roll_forward(cp, &durable_offsets).await?;
        // Zones no log continues: emptied ones are reset and free; partly written ones with
        // data are finished, so they hold no active-zone slot (Z-LFS §4.7 finishes them after
        // a crash).
        let mut to_reset = Vec::new();
        let mut to_finish = Vec::new();
        {
            let mut st = inner.st.borrow_mut();
            let segs = &mut st.segs;
            for z in 0..sb.main_zones {
                if matches!(segs.zones[z as usize], ZoneUse::Log(_)) {
                    continue;
                }
                let state = zone_states[z as usize].0;
                if segs.zone_valid(z) > 0 {
                    if state != ZoneState::Full {
                        to_finish.push(z);
                    }
                } else {
                    segs.zones[z as usize] = ZoneUse::Free;
                    segs.free_zones.insert(z);
                    if state != ZoneState::Empty {
                        to_reset.push(z);
                    }
                }
            }
        }
        for z in to_reset {
            inner
                .dev
                .zone(ZoneAction::Reset, layout.zone_start(z))
                .await?;
            inner.st.borrow_mut().segs.wp[z as usize] = 0;
        }
        for z in to_finish {
            inner
                .dev
                .zone(ZoneAction::Finish, layout.zone_start(z))
                .await?;
        }
        if recovered {
            self.checkpoint().await?;
        }
        inner.last_cp.set(inner.sim.now());
        Ok(())
    }

    fn start_background(&self) {
        let weak = Rc::downgrade(&self.inner);
        let sim = self.inner.sim.clone();
        let interval = self.inner.opts.writeback_interval;
        sim.clone().spawn(async move {
            loop {
                let wake = {
                    let Some(inner) = weak.upgrade() else { return };
                    if inner.st.borrow().unmounted {
                        return;
                    }
                    let n = inner.flusher_wake.notified();
                    drop(inner);
                    n
                };
                let timer = sim.sleep(interval);
                futures_select(wake, timer).await;
                let Some(inner) = weak.upgrade() else { return };
                if inner.st.borrow().unmounted {
                    return;
                }
                if inner.background_held.get() > 0 {
                    continue;
                }
                inner.background_busy.set(true);
                let fs = Fs { inner };
                // Errors here surface to the next caller that writes; a flusher has no caller.
                let _ = fs.background_work().await;
                fs.inner.background_busy.set(false);
                fs.inner.background_done.notify_all();
            }
        });
    }

    async fn background_work(&self) -> FsResult<()> {
        let over = {
            let st = self.inner.st.borrow();
            st.cache.dirty_pages() as f64
                > self.inner.opts.dirty_background_ratio * st.cache.limit() as f64
        };
        self.writeback(!over).await?;
        // Background cleaning (cost-benefit victims) while no call has come for a whole
        // writeback period and free zones run below twice the reserve (seed 000 §2.3: "the
        // background compaction is triggered only when the file system is idle and the number
        // of free segments is below a threshold").
        let idle =
            self.inner.sim.now() - self.inner.last_call.get() >= self.inner.opts.writeback_interval;
        let low = {
            let st = self.inner.st.borrow();
            (st.segs.free_zones.len() as u32) < 2 * st.reserved_zones
        };
        if idle && low {
            let _gc = self.inner.gc_lock.lock().await;
            self.clean_one(false).await?;
        }
        if self.inner.sim.now() - self.inner.last_cp.get() >= self.inner.opts.checkpoint_interval {
            self.checkpoint().await?;
        }
        Ok(())
    }

    /// Simulated CPU work on one of the host's cores.
    pub(crate) async fn cpu(&self, t: Nanos) {
        if t == Nanos::ZERO {
            return;
        }
        let _core = self.inner.cores.acquire(1).await;
        self.inner.sim.sleep(t).await;
    }

    /// Entry of a call that only reads: no share of the checkpoint lock (its device reads pin
    /// their zones instead), pay the syscall.
    async fn enter_read(&self) -> FsResult<()> {
        self.begin_call()?;
        self.pay_syscall().await;
        Ok(())
    }

    /// What every call does first: refuse an unmounted file system, note the call's start.
    fn begin_call(&self) -> FsResult<()> {
        if self.inner.st.borrow().unmounted {
            return Err(FsError::Invalid("the file system is unmounted".into()));
        }
        self.inner.last_call.set(self.inner.sim.now());
        Ok(())
    }

    /// What every call does once admitted: keep the cache within its limit, pay the syscall.
    async fn pay_syscall(&self) {
        self.inner.st.borrow_mut().cache.shrink();
        self.cpu(self.inner.opts.host.syscall).await;
    }

    /// Pins the zone of main-area block `a` for a device read ([`ReadPin`]).
    pub(crate) fn pin_read(&self, a: BlkAddr) -> Option<ReadPin> {
        let (zone, _) = self.inner.st.borrow().segs.layout.locate(a)?;
        *self.inner.read_pins.borrow_mut().entry(zone).or_insert(0) += 1;
        Some(ReadPin {
            inner: self.inner.clone(),
            zone,
        })
    }

    /// Waits until no device read is in flight from zone `z`.
    pub(crate) async fn reads_done(&self, z: u32) {
        while self.inner.read_pins.borrow().contains_key(&z) {
            self.inner.reads_unpinned.notified().await;
        }
    }

    /// Entry of every call that may change the file system: clean if free zones ran low
    /// (F2FS's f2fs_balance_fs), throttle writers above the dirty limit, take a share of the
    /// checkpoint lock, pay the syscall.
    async fn enter(&self, writes: bool) -> FsResult<zonelab_sim::sync::SemaphorePermit> {
        self.begin_call()?;
        if writes {
            self.balance().await?;
        }
        let share = self.inner.cp_lock.acquire(1).await;
        self.pay_syscall().await;
        Ok(share)
    }

    async fn balance(&self) -> FsResult<()> {
        // Periodic checkpointing (seed 000 §3.3.2): pre-invalid blocks cannot be reused by
        // threaded logging until a checkpoint stops referencing them.
        if let Some(tl) = self.inner.policy.threaded_logging() {
            let over = |fs: &Fs| {
                fs.inner
                    .st
                    .borrow()
                    .segs
                    .threaded
                    .as_ref()
                    .is_some_and(|th| {
                        th.pre_invalid_blocks() * BLOCK as u64 > tl.checkpoint_pre_invalid_bytes
                    })
            };
            if over(self) {
                let _gc = self.inner.gc_lock.lock().await;
                if over(self) {
                    let start = self.inner.sim.now();
                    let pre_invalid = self
                        .inner
                        .st
                        .borrow()
                        .segs
                        .threaded
                        .as_ref()
                        .map_or(0, |th| th.pre_invalid_blocks());
                    self.checkpoint().await?;
                    let mut st = self.inner.st.borrow_mut();
                    st.stats.periodic_checkpoints += 1;
                    st.gc_log
                        .push(GcEvent::PeriodicCheckpoint(PeriodicCheckpoint {
                            start_ns: start,
                            end_ns: self.inner.sim.now(),
                            pre_invalid_blocks: pre_invalid,
                        }));
                }
            }
        }
        // A freed node ID is reused only once a checkpoint has recorded it free, so churn of
        // short-lived files between checkpoints (a page cache that never needs writing back)
        // would use up the NAT and fail creates with ENOSPC on a file system with room. F2FS
        // checkpoints when a tenth of the NAT entries are dirty (f2fs_balance_fs_bg,
        // excess_dirty_nats, DEF_DIRTY_NAT_RATIO_THRESHOLD); here when a tenth are freed.
        let nids_pending = |fs: &Fs| {
            let st = fs.inner.st.borrow();
            st.nat.pending_free.len() as u64 * 100
                >= st.nat.entries.len() as u64 * DIRTY_NAT_RATIO_PERCENT
        };
        if nids_pending(self) {
            let _gc = self.inner.gc_lock.lock().await;
            if nids_pending(self) {
                self.checkpoint().await?;
            }
        }
        self.clean_if_short().await?;
        let throttle = {
            let st = self.inner.st.borrow();
            st.cache.dirty_pages() as f64 > self.inner.opts.dirty_ratio * st.cache.limit() as f64
        };
        if throttle {
            self.writeback(false).await?;
        } else {
            let wake = {
                let st = self.inner.st.borrow();
                st.cache.dirty_pages() as f64
                    > self.inner.opts.dirty_background_ratio * st.cache.limit() as f64
            };
            if wake {
                self.inner.flusher_wake.notify_one();
            }
        }
        Ok(())
    }

    /// Whether fewer zones than the cleaning threshold are free.
    pub(crate) fn free_zones_short(&self) -> bool {
        self.inner.st.borrow().zones_short(0)
    }

    /// Foreground cleaning while free zones run short (F2FS's f2fs_balance_fs). A caller must
    /// hold no share of the checkpoint lock: the round's checkpoint takes all of them.
    async fn clean_if_short(&self) -> FsResult<()> {
        if self.free_zones_short() {
            let _gc = self.inner.gc_lock.lock().await;
            if self.free_zones_short() {
                // A foreground round of F2FS 4.10's f2fs_gc (as the published ZNS+ F2FS,
                // kernel/fs/f2fs/gc.c) opens with a checkpoint, which frees the zones cleaned
                // or emptied since the last one, then cleans (`foreground_round`).
                let t = self.inner.sim.now();
                self.checkpoint().await?;
                let opening = self.inner.sim.now() - t;
                self.foreground_round(opening).await?;
            }
        }
        Ok(())
    }

    fn inode_lock(&self, ino: Ino) -> Rc<Mutex<()>> {
        self.inner
            .inode_locks
            .borrow_mut()
            .entry(ino)
            .or_insert_with(|| Rc::new(Mutex::new(())))
            .clone()
    }

    // ---- nodes ----

    /// Makes node `nid` resident in the cache (reading it if needed).
    pub(crate) async fn ensure_node(&self, nid: Nid) -> FsResult<()> {
        let addr = {
            let mut st = self.inner.st.borrow_mut();
            if st.cache.touch_node(nid) {
                return Ok(());
            }
            let e = st
                .nat
                .entries
                .get(nid as usize)
                .copied()
                .ok_or_else(|| FsError::Corrupt(format!("node id {nid} beyond the NAT")))?;
            if e.ino == 0 {
                // Freed (its file deleted) by another thread.
                return Err(FsError::NotFound);
            }
            e.addr
        };
        if addr == NULL_ADDR {
            return Err(FsError::Corrupt(format!(
                "node {nid} has no address and is not cached"
            )));
        }
        let pin = self.pin_read(addr);
        self.cpu(self.inner.opts.host.page_alloc).await;
        let b = self.inner.dev.read_meta(addr as u64, Traffic::Node).await?;
        drop(pin);
        let node = Node::decode(&b)?;
        if node.footer.nid != nid {
            return Err(FsError::Corrupt(format!(
                "block {addr} holds node {} where the NAT says node {nid}",
                node.footer.nid
            )));
        }
        let moved = {
            let mut st = self.inner.st.borrow_mut();
            let now = st.nat.entries[nid as usize];
            if now.ino == 0 {
                // Freed while it was read.
                return Err(FsError::NotFound);
            }
            if st.cache.touch_node(nid) {
                false
            } else if now.addr != addr {
                true
            } else {
                st.cache.put_node(nid, node, false);
                false
            }
        };
        if moved {
            // Rewritten elsewhere while it was read (and since evicted): read again.
            return Box::pin(self.ensure_node(nid)).await;
        }
        Ok(())
    }

    /// Loads an inode and returns a copy of its data.
    pub(crate) async fn inode(&self, ino: Ino) -> FsResult<InodeData> {
        if ino == 0 || ino > u32::MAX as u64 {
            return Err(FsError::NotFound);
        }
        {
            let st = self.inner.st.borrow();
            let e = st.nat.entries.get(ino as usize);
            if e.is_none_or(|e| e.ino != ino as u32) {
                return Err(FsError::NotFound);
            }
        }
        self.ensure_node(ino as Nid).await?;
        let st = self.inner.st.borrow();
        st.cache
            .node(ino as Nid)
            .and_then(|n| n.inode().cloned())
            .ok_or_else(|| FsError::Corrupt(format!("node {ino} is not an inode")))
    }

    fn with_inode<R>(&self, ino: Ino, f: impl FnOnce(&mut InodeData) -> R) -> R {
        let mut st = self.inner.st.borrow_mut();
        let n = st
            .cache
            .node_mut(ino as Nid)
            .expect("inode made resident before use");
        f(n.inode_mut().expect("node is an inode"))
    }

    /// `stat` of an inode: `blocks` counts blocks on the device plus new dirty pages.
    fn attr_of(&self, ino: Ino, i: &InodeData) -> Attr {
        let fresh = self.inner.st.borrow().cache.fresh_of(ino);
        Fs::attr_raw(ino, i, fresh)
    }

    fn attr_raw(ino: Ino, i: &InodeData, fresh: u64) -> Attr {
        Attr {
            ino,
            kind: i.kind,
            perm: i.perm,
            nlink: i.nlink,
            uid: i.uid,
            gid: i.gid,
            size: i.size,
            blocks: i.blocks + fresh,
            atime: Nanos(i.atime),
            mtime: Nanos(i.mtime),
            ctime: Nanos(i.ctime),
        }
    }

    fn alloc_nid(&self, ino: u32) -> FsResult<Nid> {
        let mut st = self.inner.st.borrow_mut();
        let nid = match st.nat.free.pop_first() {
            Some(n) => n,
            None => {
                let n = st.nat.next_nid;
                if n as usize >= st.nat.entries.len() {
                    return Err(FsError::NoSpace);
                }
                st.nat.next_nid += 1;
                n
            }
        };
        let ino = if ino == 0 { nid } else { ino };
        st.nat.set(
            nid,
            NatEntry {
                ino,
                addr: NULL_ADDR,
            },
        );
        st.nat.valid_nodes += 1;
        Ok(nid)
    }

    /// Frees a node: its block becomes invalid and its id reusable after the checkpoint.
    fn free_node(&self, nid: Nid) {
        let mut st = self.inner.st.borrow_mut();
        let t = now_ns(&self.inner.sim);
        let e = st.nat.entries[nid as usize];
        st.segs.invalidate(e.addr, Summary { nid, ofs: 0 }, t);
        if e.ino == nid {
            st.nat.valid_inodes -= 1;
        }
        st.nat.set(nid, NatEntry::default());
        st.nat.valid_nodes -= 1;
        st.nat.pending_free.push(nid);
        st.cache.drop_node(nid);
    }

    /// Makes resident every node on the way to file block `idx`, creating missing ones when
    /// `create`. Returns the direct node (or inode) holding the address and its slot, or None
    /// when the block is unmapped and `create` is false.
    async fn map_path(&self, ino: Ino, idx: u64, create: bool) -> FsResult<Option<(Nid, usize)>> {
        let slot = slot_of(idx)?;
        self.ensure_node(ino as Nid).await?;
        let Slot::Tree {
            top,
            path,
            depth,
            slot,
            base,
        } = slot
        else {
            let Slot::Inode(s) = slot else { unreachable!() };
            return Ok(Some((ino as Nid, s)));
        };
        // Walk: inode.nids[top] -> (indirect path[0] -> (indirect path[1])) -> direct. A node
        // evicted while a child was read (memory pressure) restarts the walk.
        'walk: loop {
            self.ensure_node(ino as Nid).await?;
            let mut parent = ino as Nid;
            let mut parent_slot = ParentSlot::InodeNid(top);
            for (level, &next) in path
                .iter()
                .chain(std::iter::once(&0))
                .take(depth + 1)
                .enumerate()
            {
                let child = {
                    let st = self.inner.st.borrow();
                    let Some(p) = st.cache.node(parent) else {
                        continue 'walk;
                    };
                    parent_slot.get(p)
                };
                let child = if child == 0 {
                    if !create {
                        return Ok(None);
                    }
                    let nid = self.alloc_nid(ino as u32)?;
                    let body = if level < depth {
                        NodeBody::Indirect(Vec::new())
                    } else {
                        NodeBody::Direct
                    };
                    let node = Node {
                        body,
                        addrs: Vec::new(),
                        footer: Footer {
                            nid,
                            ino: ino as u32,
                            base: if level == depth { base } else { 0 },
                            ..Default::default()
                        },
                    };
                    let mut st = self.inner.st.borrow_mut();
                    st.cache.put_node(nid, node, true);
                    let p = st
                        .cache
                        .node_mut(parent)
                        .expect("resident: no await since checked");
                    parent_slot.set(p, nid);
                    st.cache.dirty_node(parent);
                    nid
                } else {
                    self.ensure_node(child).await?;
                    child
                };
                parent = child;
                parent_slot = ParentSlot::Indirect(next);
            }
            return Ok(Some((parent, slot)));
        }
    }

    /// The address of file block `idx` (NULL when a hole).
    pub(crate) async fn block_addr(&self, ino: Ino, idx: u64) -> FsResult<BlkAddr> {
        loop {
            let Some((nid, slot)) = self.map_path(ino, idx, false).await? else {
                return Ok(NULL_ADDR);
            };
            let st = self.inner.st.borrow();
            if let Some(n) = st.cache.node(nid) {
                return Ok(n.addrs.get(slot).copied().unwrap_or(NULL_ADDR));
            }
        }
    }

    // ---- directories ----

    pub(crate) async fn load_dir(&self, dir: Ino) -> FsResult<()> {
        let i = self.inode(dir).await?;
        if i.kind != FileKind::Dir {
            return Err(FsError::NotDir);
        }
        if self.inner.st.borrow().dirs.contains_key(&dir) {
            return Ok(());
        }
        let nblocks = i.size / BLOCK as u64;
        let mut blocks = Vec::with_capacity(nblocks as usize);
        for b in 0..nblocks {
            let data = self.read_page(dir, b, Traffic::UserRead).await?;
            let PageData::Bytes(bytes) = data else {
                return Err(FsError::Corrupt(format!(
                    "directory {dir} block {b} holds file data"
                )));
            };
            blocks.push(decode_dentries(&bytes)?);
        }
        self.inner
            .st
            .borrow_mut()
            .dirs
            .entry(dir)
            .or_insert_with(|| DirIndex::from_blocks(blocks));
        Ok(())
    }

    pub(crate) fn dir_entry(&self, dir: Ino, name: &str) -> Option<(u32, FileKind)> {
        let st = self.inner.st.borrow();
        st.dirs
            .get(&dir)
            .and_then(|d| d.by_name.get(name.as_bytes()))
            .map(|&(i, k, _)| (i, k))
    }

    /// Adds an entry (the directory is loaded); the dentry block becomes a dirty page.
    pub(crate) async fn dir_add(
        &self,
        dir: Ino,
        name: &str,
        ino: u32,
        kind: FileKind,
    ) -> FsResult<()> {
        self.ensure_node(dir as Nid).await?;
        let t = self.stamp();
        let d = Dentry {
            ino,
            kind,
            name: name.as_bytes().to_vec(),
        };
        let mut st = self.inner.st.borrow_mut();
        let st = &mut *st;
        let idx = st.dirs.get_mut(&dir).expect("directory loaded");
        let (b, new_block) = idx.add(d);
        let content = encode_dentries(idx.block(b));
        st.cache.put_page_with(
            dir,
            b as u64,
            PageData::Bytes(content.into()),
            true,
            new_block,
        );
        let n = st
            .cache
            .node_mut(dir as Nid)
            .expect("directory inode resident");
        let i = n.inode_mut().expect("inode");
        i.size = i.size.max((b as u64 + 1) * BLOCK as u64);
        i.mtime = t;
        i.ctime = t;
        st.cache.dirty_node(dir as Nid);
        Ok(())
    }

    pub(crate) async fn dir_remove(&self, dir: Ino, name: &str) -> FsResult<()> {
        self.ensure_node(dir as Nid).await?;
        let t = self.stamp();
        let mut st = self.inner.st.borrow_mut();
        let st = &mut *st;
        let idx = st.dirs.get_mut(&dir).expect("directory loaded");
        let (_, _, b) = idx.by_name.remove(name.as_bytes()).expect("entry exists");
        idx.remove(b as usize, name.as_bytes());
        let content = encode_dentries(idx.block(b as usize));
        st.cache
            .put_page(dir, b, PageData::Bytes(content.into()), true);
        let n = st
            .cache
            .node_mut(dir as Nid)
            .expect("directory inode resident");
        let i = n.inode_mut().expect("inode");
        i.mtime = t;
        i.ctime = t;
        st.cache.dirty_node(dir as Nid);
        Ok(())
    }

    /// Puts new contents of a file page in the cache, dirty; a page without a device block
    /// holds a space reservation until written.
    async fn dirty_page(&self, ino: Ino, idx: u64, data: PageData) -> FsResult<()> {
        let has_block = self.block_addr(ino, idx).await? != NULL_ADDR;
        self.inner
            .st
            .borrow_mut()
            .cache
            .put_page_with(ino, idx, data, true, !has_block);
        Ok(())
    }

    /// Changes an inode (made resident first) and marks it dirty.
    pub(crate) async fn modify_inode<R>(
        &self,
        ino: Ino,
        f: impl FnOnce(&mut InodeData) -> R,
    ) -> FsResult<R> {
        self.ensure_node(ino as Nid).await?;
        let r = self.with_inode(ino, f);
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        Ok(r)
    }

    // ---- data pages ----

    /// The content of file block `idx` (zeros for a hole), through the page cache.
    async fn read_page(&self, ino: Ino, idx: u64, class: Traffic) -> FsResult<PageData> {
        if let Some(p) = self.inner.st.borrow_mut().cache.page(ino, idx) {
            return Ok(p);
        }
        let addr = self.block_addr(ino, idx).await?;
        let fp_mode = self.inner.st.borrow().payload == PayloadMode::Fingerprint;
        if addr == NULL_ADDR {
            return Ok(PageData::zero(fp_mode));
        }
        let pin = self.pin_read(addr);
        self.cpu(self.inner.opts.host.page_alloc).await;
        let d = self.inner.dev.read(addr as u64, 1, class).await?;
        drop(pin);
        let page = if d.bytes.len() == BLOCK {
            PageData::Bytes(d.bytes.into())
        } else if let Some(&fp) = d.fingerprints.first() {
            PageData::Fp(fp)
        } else {
            return Err(FsError::Io(format!(
                "read of block {addr} returned nothing"
            )));
        };
        let mut st = self.inner.st.borrow_mut();
        // Another thread may have dirtied the page meanwhile: its copy wins.
        if let Some(p) = st.cache.page(ino, idx) {
            return Ok(p);
        }
        st.cache.put_page(ino, idx, page.clone(), false);
        Ok(page)
    }

    /// Writes back dirty data pages (all, or only down to the background threshold when
    /// `partial`), then nothing else: nodes go at checkpoints and fsync. The files' writes are
    /// issued one file after another and waited for together at the end, under a share of the
    /// checkpoint lock. When free zones run short meanwhile it waits for the writes issued so
    /// far, lets the share go and cleans before it goes on, as F2FS's writeback calls
    /// f2fs_balance_fs after each data page it writes (`f2fs_write_data_page`): without that, a
    /// large page cache's dirty data could fill every free zone in one pass and leave the
    /// next checkpoint no room for its nodes. The caller holds no share.
    pub(crate) async fn writeback(&self, partial: bool) -> FsResult<()> {
        let mut in_flight = Vec::new();
        let mut _share = self.inner.cp_lock.acquire(1).await;
        loop {
            if self.free_zones_short() {
                join_all(std::mem::take(&mut in_flight)).await?;
                drop(_share);
                self.clean_if_short().await?;
                _share = self.inner.cp_lock.acquire(1).await;
            }
            let target = {
                let st = self.inner.st.borrow();
                if partial
                    && st.cache.dirty_pages() as f64
                        <= self.inner.opts.dirty_background_ratio * st.cache.limit() as f64 / 2.0
                {
                    None
                } else {
                    st.cache.oldest_dirty_inode()
                }
            };
            let Some(ino) = target else {
                return join_all(in_flight).await;
            };
            // Under the file's lock, so a concurrent unlink cannot free it halfway (and its
            // node tree cannot grow again after truncation).
            let lock = self.inode_lock(ino);
            let _l = lock.lock().await;
            in_flight.extend(self.issue_inode_pages(ino, None).await?);
        }
    }

    /// Writes the dirty data pages of `ino` (only `only` if given) to its data log and waits
    /// for the writes.
    pub(crate) async fn write_inode_pages(&self, ino: Ino, only: Option<&[u64]>) -> FsResult<()> {
        let writes = self.issue_inode_pages(ino, only).await?;
        join_all(writes).await
    }

    /// Takes blocks in its data log for the dirty data pages of `ino` (only `only` if given)
    /// and hands their writes to the device; returns the writes in flight. The caller waits
    /// for them when it must (fsync, a checkpoint), not file by file: Linux's writeback and
    /// F2FS's cleaning (move_data_page into a merged bio) submit the pages of one file after
    /// another without waiting for the device in between.
    async fn issue_inode_pages(
        &self,
        ino: Ino,
        only: Option<&[u64]>,
    ) -> FsResult<Vec<zonelab_sim::JoinHandle<FsResult<()>>>> {
        let (idxs, kind) = {
            let st = self.inner.st.borrow();
            let idxs: Vec<u64> = match only {
                Some(v) => v.to_vec(),
                None => st.cache.dirty_of(ino),
            };
            let kind = st
                .cache
                .node(ino as Nid)
                .and_then(|n| n.inode().map(|i| i.kind));
            (idxs, kind)
        };
        if idxs.is_empty() {
            return Ok(Vec::new());
        }
        let kind = match kind {
            Some(k) => k,
            None => self.inode(ino).await?.kind,
        };
        let temp = if kind == FileKind::Dir {
            Temp::HotData
        } else if only.is_some() {
            Temp::ColdData
        } else {
            Temp::WarmData
        };
        let class = if only.is_some() {
            Traffic::GcWrite
        } else {
            Traffic::UserWrite
        };
        // Chunk by chunk: make the nodes on every page's path resident (may wait for reads),
        // then, without waiting in between, take the blocks and hand the writes to the device,
        // so a zone receives its writes in the order its blocks were taken.
        let mut handles = Vec::new();
        for chunk in idxs.chunks(256) {
            self.cpu(self.inner.opts.host.write_page.times(chunk.len() as u64))
                .await;
            let mut paths = Vec::with_capacity(chunk.len());
            'ensure: loop {
                paths.clear();
                for &idx in chunk {
                    match self.map_path(ino, idx, true).await {
                        // Deleted meanwhile: its pages went with it.
                        Err(FsError::NotFound) => return Ok(handles),
                        r => paths.push(r?.expect("created")),
                    }
                }
                let st = self.inner.st.borrow();
                if st.cache.node(ino as Nid).is_none() {
                    continue 'ensure;
                }
                for &(nid, _) in &paths {
                    if st.cache.node(nid).is_none() {
                        continue 'ensure;
                    }
                }
                break;
            }
            let t = now_ns(&self.inner.sim);
            let mut st = self.inner.st.borrow_mut();
            let st = &mut *st;
            let zone_size = st.segs.layout.sb.zone_size;
            let zoned_base = st.segs.layout.zoned_base() as BlkAddr;
            let mut run: Option<(BlkAddr, Vec<PageData>, Vec<UnderWriteback>)> = None;
            for (&idx, &(nid, slot)) in chunk.iter().zip(&paths) {
                let Some((data, w)) = st.cache.take_dirty(ino, idx) else {
                    continue;
                };
                let new = self.take_block(st, temp)?;
                let n = st.cache.node_mut(nid).expect("resident: checked above");
                if n.addrs.len() <= slot {
                    n.addrs.resize(slot + 1, NULL_ADDR);
                }
                let old = std::mem::replace(&mut n.addrs[slot], new);
                st.cache.dirty_node(nid);
                if old == NULL_ADDR {
                    let i = st
                        .cache
                        .node_mut(ino as Nid)
                        .and_then(|x| x.inode_mut())
                        .expect("inode resident: checked above");
                    i.blocks += 1;
                    st.cache.dirty_node(ino as Nid);
                }
                let owner = Summary {
                    nid,
                    ofs: slot as u16,
                };
                st.segs.invalidate(old, owner, t);
                st.segs.validate(new, owner, t);
                match &mut run {
                    // A run stays inside one zone (the next zone may start right after).
                    Some((start, v, ws))
                        if *start + v.len() as BlkAddr == new
                            && !((new - zoned_base) as u64).is_multiple_of(zone_size)
                            && v.len() < 128 =>
                    {
                        v.push(data);
                        ws.push(w);
                    }
                    _ => {
                        if let Some((start, v, ws)) = run.take() {
                            handles.push(self.write_back(start, pages_data(v), class, ws));
                        }
                        run = Some((new, vec![data], vec![w]));
                    }
                }
            }
            if let Some((start, v, ws)) = run.take() {
                handles.push(self.write_back(start, pages_data(v), class, ws));
            }
            self.issue_zone_jobs(st);
        }
        Ok(handles)
    }

    /// Writes every dirty node (all, or those of one inode for fsync) to the node logs. For
    /// fsync, returns the pre-invalid blocks only the nodes' earlier fsynced copies pointed to
    /// ([`Segments::made_durable`]), free once these copies are durable.
    pub(crate) async fn write_nodes(
        &self,
        of_ino: Option<Ino>,
        fsync: bool,
    ) -> FsResult<Superseded> {
        let mut handles = Vec::new();
        let mut superseded = Superseded::default();
        let nids: Vec<Nid> = {
            let st = self.inner.st.borrow();
            match of_ino {
                None => st.cache.dirty_nodes().collect(),
                Some(i) => {
                    let of: Vec<Nid> = st.cache.dirty_nodes_of(i as u32).collect();
                    debug_assert_eq!(
                        of,
                        st.cache
                            .dirty_nodes()
                            .filter(|&n| st.nat.entries[n as usize].ino == i as u32)
                            .collect::<Vec<_>>(),
                        "node footers and the NAT disagree on the owner of inode {i}'s nodes"
                    );
                    of
                }
            }
        };
        self.cpu(self.inner.opts.host.write_page.times(nids.len() as u64))
            .await;
        for nid in nids {
            let t = now_ns(&self.inner.sim);
            let mut st = self.inner.st.borrow_mut();
            let st = &mut *st;
            let ino = st.nat.entries[nid as usize].ino;
            assert!(ino != 0, "dirty node {nid} is not allocated");
            let is_dir = if ino == nid {
                st.cache
                    .node(nid)
                    .and_then(|n| n.inode())
                    .is_some_and(|i| i.kind == FileKind::Dir)
            } else {
                st.cache
                    .node(ino)
                    .and_then(|n| n.inode())
                    .is_some_and(|i| i.kind == FileKind::Dir)
            };
            let Some((node, w)) = st.cache.take_dirty_node(nid) else {
                continue;
            };
            // Nodes an fsync writes all go to the warm node log, the chain roll-forward walks.
            let temp = if fsync {
                Temp::WarmNode
            } else {
                node_temp(&node, is_dir)
            };
            let new = self.take_block(st, temp)?;
            let old = st.nat.entries[nid as usize].addr;
            let owner = Summary { nid, ofs: 0 };
            st.segs.invalidate(old, owner, t);
            st.segs.validate(new, owner, t);
            if fsync {
                superseded.merge(st.segs.made_durable(nid));
            }
            st.nat.set(nid, NatEntry { ino, addr: new });
            let mut n = node;
            n.footer.cp_ver = st.cp_ver;
            n.footer.flags = match (fsync, ino == nid) {
                (false, _) => 0,
                (true, false) => FLAG_FSYNC,
                (true, true) => FLAG_FSYNC | FLAG_DENT,
            };
            n.footer.next = st.segs.peek_next(temp);
            let bytes = n.encode();
            handles.push(self.write_back(new, OwnedData::Bytes(bytes), Traffic::Node, vec![w]));
            self.issue_zone_jobs(st);
        }
        join_all(handles).await?;
        Ok(superseded)
    }

    /// Hands the device the write of cached pages or nodes `written` (taken from the cache
    /// for it) at `addr`; they stay resident until the write completes.
    fn write_back(
        &self,
        addr: BlkAddr,
        data: OwnedData,
        class: Traffic,
        written: Vec<UnderWriteback>,
    ) -> zonelab_sim::JoinHandle<FsResult<()>> {
        let write = self.inner.dev.write(addr as u64, data, class);
        let fs = self.clone();
        self.inner.sim.spawn(async move {
            let r = write.await;
            let mut st = fs.inner.st.borrow_mut();
            for w in written {
                st.cache.end_writeback(w);
            }
            fs.inner.writeback_ended.notify_all();
            r
        })
    }

    /// Waits until no write of a page of `ino` is in flight, whoever issued it.
    async fn wait_on_writeback(&self, ino: Ino) {
        while self.inner.st.borrow().cache.under_writeback(ino) {
            self.inner.writeback_ended.notified().await;
        }
    }

    // ---- inode lifetime ----

    /// Releases every block and node of an inode whose last link is gone.
    async fn evict_inode(&self, ino: Ino) -> FsResult<()> {
        self.truncate_blocks(ino, 0).await?;
        let top: Vec<Nid> = {
            let st = self.inner.st.borrow();
            st.cache
                .node(ino as Nid)
                .and_then(|n| n.inode().map(|i| i.nids.to_vec()))
                .unwrap_or_default()
        };
        debug_assert!(top.iter().all(|&n| n == 0), "truncation freed the tree");
        {
            let mut st = self.inner.st.borrow_mut();
            st.dirs.remove(&ino);
            // Cleaning may have read pages of the file in while it was being truncated.
            st.cache.drop_inode_pages(ino);
        }
        self.free_node(ino as Nid);
        self.inner.inode_locks.borrow_mut().remove(&ino);
        Ok(())
    }

    /// Drops file blocks from `from` on (pages, addresses and emptied nodes).
    async fn truncate_blocks(&self, ino: Ino, from: u64) -> FsResult<()> {
        let t = now_ns(&self.inner.sim);
        // Cached pages beyond the end go first (dirty ones held a reservation).
        {
            let mut st = self.inner.st.borrow_mut();
            st.cache.drop_pages_from(ino, from);
        }
        // Inode slots.
        {
            let mut st = self.inner.st.borrow_mut();
            let st = &mut *st;
            let n = st.cache.node_mut(ino as Nid).expect("resident");
            let freed = clear_slots(&mut n.addrs, from.min(INODE_ADDRS as u64) as usize);
            let i = n.inode_mut().expect("inode");
            i.blocks -= freed.len() as u64;
            for (s, a) in freed {
                let owner = Summary {
                    nid: ino as Nid,
                    ofs: s as u16,
                };
                st.segs.invalidate(a, owner, t);
            }
            st.cache.dirty_node(ino as Nid);
        }
        // The node tree: walk each top-level subtree.
        let n = NODE_ENTRIES as u64;
        let tops: [(usize, u64, usize); INODE_NIDS] = [
            (0, INODE_ADDRS as u64, 0),
            (1, INODE_ADDRS as u64 + n, 0),
            (2, INODE_ADDRS as u64 + 2 * n, 1),
            (3, INODE_ADDRS as u64 + 2 * n + n * n, 1),
            (4, INODE_ADDRS as u64 + 2 * n + 2 * n * n, 2),
        ];
        for (top, base, depth) in tops {
            let nid = {
                let st = self.inner.st.borrow();
                st.cache
                    .node(ino as Nid)
                    .and_then(|x| x.inode().map(|i| i.nids[top]))
                    .expect("resident")
            };
            if nid == 0 {
                continue;
            }
            let span = n.pow(depth as u32 + 1);
            if from >= base + span {
                continue;
            }
            let removed = Box::pin(self.truncate_subtree(ino, nid, base, depth, from)).await?;
            if removed {
                self.ensure_node(ino as Nid).await?;
                let mut st = self.inner.st.borrow_mut();
                let x = st.cache.node_mut(ino as Nid).expect("resident");
                x.inode_mut().expect("inode").nids[top] = 0;
                st.cache.dirty_node(ino as Nid);
            }
        }
        Ok(())
    }

    /// Truncates the subtree at `nid` (first file block `base`, `depth` indirect levels) from
    /// `from`; returns whether the node itself was freed.
    async fn truncate_subtree(
        &self,
        ino: Ino,
        nid: Nid,
        base: u64,
        depth: usize,
        from: u64,
    ) -> FsResult<bool> {
        self.ensure_node(nid).await?;
        let t = now_ns(&self.inner.sim);
        let n = NODE_ENTRIES as u64;
        if depth == 0 {
            let empty = {
                let mut st = self.inner.st.borrow_mut();
                let st = &mut *st;
                let node = st.cache.node_mut(nid).expect("resident");
                let start = from.saturating_sub(base) as usize;
                let freed = clear_slots(&mut node.addrs, start);
                let empty = node.addrs.iter().all(|&a| a == NULL_ADDR);
                st.cache.dirty_node(nid);
                let count = freed.len() as u64;
                for (s, a) in freed {
                    let owner = Summary { nid, ofs: s as u16 };
                    st.segs.invalidate(a, owner, t);
                }
                if let Some(i) = st.cache.node_mut(ino as Nid).and_then(|x| x.inode_mut()) {
                    i.blocks -= count;
                }
                empty
            };
            if empty {
                self.free_node(nid);
            }
            return Ok(empty);
        }
        let child_span = n.pow(depth as u32);
        let children: Vec<Nid> = {
            let st = self.inner.st.borrow();
            match &st.cache.node(nid).expect("resident").body {
                NodeBody::Indirect(v) => v.clone(),
                _ => return Err(FsError::Corrupt(format!("node {nid} should be indirect"))),
            }
        };
        for (k, &c) in children.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let cbase = base + k as u64 * child_span;
            if from >= cbase + child_span {
                continue;
            }
            if Box::pin(self.truncate_subtree(ino, c, cbase, depth - 1, from)).await? {
                self.ensure_node(nid).await?;
                let mut st = self.inner.st.borrow_mut();
                if let NodeBody::Indirect(v) = &mut st.cache.node_mut(nid).expect("resident").body {
                    v[k] = 0;
                }
                st.cache.dirty_node(nid);
            }
        }
        let empty = {
            let st = self.inner.st.borrow();
            match &st.cache.node(nid).map(|x| &x.body) {
                Some(NodeBody::Indirect(v)) => v.iter().all(|&c| c == 0),
                _ => false,
            }
        };
        if empty {
            self.free_node(nid);
        }
        Ok(empty)
    }

    // ---- checkpoint ----

    /// Writes a checkpoint: dirty directory pages and every dirty node, then NAT, SIT and SSA
    /// changes, then the checkpoint pack; zones emptied by cleaning become free (and are
    /// reset). Blocks every other call while it runs (seed 000 §3.1, "metadata update").
    pub async fn checkpoint(&self) -> FsResult<()> {
        self.checkpoint_after(Vec::new()).await
    }

    /// A checkpoint whose pack waits for `moves` (a cleaning's writes and copies): its nodes
    /// and metadata are written meanwhile, as F2FS's write_checkpoint writes the dirty nodes
    /// and meta pages, then waits for all writeback (the pages cleaning moved among them)
    /// before it commits the pack. The pack still follows every moved block, so a crash
    /// before it leaves the last checkpoint, whose blocks the moves did not touch.
    async fn checkpoint_after(
        &self,
        moves: Vec<zonelab_sim::JoinHandle<FsResult<()>>>,
    ) -> FsResult<()> {
        let _all = self.inner.cp_lock.acquire(CP_SHARES).await;
        if let Some(e) = self.inner.zone_job_error.borrow_mut().take() {
            return Err(e);
        }
        // Directory blocks first (F2FS syncs dentries at a checkpoint), then nodes.
        let dirs: Vec<Ino> = {
            let st = self.inner.st.borrow();
            st.cache
                .dirty_inodes()
                .filter(|&i| {
                    st.cache
                        .node(i as Nid)
                        .and_then(|n| n.inode())
                        .is_some_and(|x| x.kind != FileKind::File)
                })
                .collect()
        };
        for d in dirs {
            self.write_inode_pages(d, None).await?;
        }
        self.write_nodes(None, false).await?;
        let layout = self.inner.st.borrow().segs.layout.clone();
        // NAT, SIT and SSA blocks, written together in address runs (F2FS's sync_meta_pages).
        let mut meta = Vec::new();
        let mut ssa_written = Vec::new();
        let (cp, prefree) = {
            let mut st = self.inner.st.borrow_mut();
            let st = &mut *st;
            for b in std::mem::take(&mut st.nat.dirty) {
                let copy = !st.nat.copy[b as usize];
                st.nat.copy[b as usize] = copy;
                let first = b as usize * NAT_PER_BLOCK;
                let block =
                    crate::ondisk::encode_nat(b, &st.nat.entries[first..first + NAT_PER_BLOCK]);
                meta.push((layout.nat_block(b, copy), block));
            }
            let per = layout.sit_per_block;
            for b in std::mem::take(&mut st.segs.sit_dirty) {
                let copy = !st.segs.sit_copy[b as usize];
                st.segs.sit_copy[b as usize] = copy;
                let first = b as usize * per;
                let last = (first + per).min(st.segs.sit.len());
                let block = crate::ondisk::encode_sit(b, &st.segs.sit[first..last]);
                meta.push((layout.sit_block(b, copy), block));
            }
            let bps = layout.sb.blocks_per_seg as usize;
            let spz = layout.sb.segs_per_zone;
            for seg in std::mem::take(&mut st.segs.ssa_dirty) {
                let first = layout.main_index(seg / spz, (seg % spz) * layout.sb.blocks_per_seg);
                for (part, chunk) in st.segs.ssa[first..first + bps]
                    .chunks(SSA_PER_BLOCK)
                    .enumerate()
                {
                    let at = layout.ssa_block(seg, part as u32);
                    ssa_written.push(at);
                    meta.push((at, crate::ondisk::encode_ssa(seg, part as u32, chunk)));
                }
            }
            // Roll-forward starts where the warm node log continues: give it a zone now.
            st.set_dirty_zones();
            st.segs.ensure_zone(Temp::WarmNode);
            self.log_reclaim_choices(st);
            self.issue_zone_jobs(st);
            st.segs.checkpoint_begins();
            st.renamed_since_cp.clear();
            st.created_since_cp.clear();
            let mut cursegs = [crate::ondisk::CursegState {
                zone: u32::MAX,
                offset: 0,
            }; 6];
            for (i, c) in st.segs.logs.iter().enumerate() {
                if let Some(c) = c {
                    cursegs[i] = *c;
                }
            }
            st.segs.release_empty_zones();
            let prefree: Vec<u32> = (0..st.segs.zones.len() as u32)
                .filter(|&z| st.segs.zones[z as usize] == ZoneUse::Prefree)
                .collect();
            st.cp_ver += 1;
            let cp = Checkpoint {
                version: st.cp_ver,
                time: now_ns(&self.inner.sim),
                cursegs,
                next_nid: st.nat.next_nid,
                valid_nodes: st.nat.valid_nodes,
                valid_inodes: st.nat.valid_inodes,
                valid_blocks: st.segs.valid_blocks,
                nat_copy: st.nat.copy.clone(),
                sit_copy: st.segs.sit_copy.clone(),
                orphans: Vec::new(),
            };
            (cp, prefree)
        };
        join_all(self.inner.dev.write_merged(meta, Traffic::Meta)).await?;
        {
            // Written SSA blocks stay in the page cache (F2FS writes them from its meta mapping).
            let mut st = self.inner.st.borrow_mut();
            ssa_written.into_iter().for_each(|a| st.cache.put_meta(a));
        }
        join_all(moves).await?;
        self.inner.dev.flush().await?;
        let pack = layout.cp_pack((cp.version % 2) as u32);
        let blocks = cp.encode();
        let blocks = (pack..).zip(blocks).collect();
        join_all(self.inner.dev.write_merged(blocks, Traffic::Checkpoint)).await?;
        self.inner.dev.flush().await?;
        // Durable now: emptied zones are free, freed node ids and pre-invalid blocks reusable.
        self.inner.st.borrow_mut().segs.checkpoint_durable();
        for z in prefree {
            let left = self.inner.st.borrow().segs.zone_valid(z);
            assert_eq!(left, 0, "cleaned zone {z} still holds {left} valid blocks");
            self.reads_done(z).await;
            self.inner
                .dev
                .zone(ZoneAction::Reset, layout.zone_start(z))
                .await?;
            let mut st = self.inner.st.borrow_mut();
            st.segs.zone_reset(z);
            st.stats.zone_resets += 1;
        }
        {
            let mut st = self.inner.st.borrow_mut();
            let freed = std::mem::take(&mut st.nat.pending_free);
            st.nat.free.extend(freed);
            st.stats.checkpoints += 1;
            st.cache.shrink();
        }
        self.inner.last_cp.set(self.inner.sim.now());
        Ok(())
    }

    /// Takes the next block of log `t`. A TL_open the log's move to another zone needs is
    /// issued now, before the block's write (which the caller issues next); the finish of the
    /// zone it left waits for [`Fs::issue_zone_jobs`], which callers call once they have
    /// issued the writes of the blocks they took (the finish must come after those).
    fn take_block(&self, st: &mut State, t: Temp) -> FsResult<BlkAddr> {
        st.set_dirty_zones();
        let a = st.segs.alloc(t).ok_or(FsError::NoSpace)?;
        self.log_reclaim_choices(st);
        self.issue_zone_jobs_where(st, |j| matches!(j, ZoneJob::TlOpen { .. }));
        Ok(a)
    }

    /// Moves the choices of zone the logs just made (threaded logging or compaction) into the
    /// reclamation log, stamped now.
    fn log_reclaim_choices(&self, st: &mut State) {
        let Some(th) = &mut st.segs.threaded else {
            return;
        };
        let at = self.inner.sim.now();
        st.gc_log.extend(th.choices.drain(..).map(|mut c| {
            c.at_ns = at;
            GcEvent::ReclaimChoice(c)
        }));
    }

    /// Issues the TL_opens and finishes threaded logging asked for; a failure is reported by
    /// the next checkpoint.
    fn issue_zone_jobs(&self, st: &mut State) {
        st.segs.writes_issued();
        self.issue_zone_jobs_where(st, |_| true);
    }

    fn issue_zone_jobs_where(&self, st: &mut State, now: impl Fn(&ZoneJob) -> bool) {
        let Some(th) = &mut st.segs.threaded else {
            return;
        };
        if th.jobs.is_empty() {
            return;
        }
        let (go, stay): (Vec<ZoneJob>, Vec<ZoneJob>) = std::mem::take(&mut th.jobs)
            .into_iter()
            .partition(|j| now(j));
        th.jobs = stay;
        for job in go {
            let handle = match job {
                ZoneJob::TlOpen { zone, skip } => self
                    .inner
                    .dev
                    .tl_open(st.segs.layout.zone_start(zone), skip),
                ZoneJob::Finish { zone } => self
                    .inner
                    .dev
                    .zone_cmd(ZoneAction::Finish, st.segs.layout.zone_start(zone)),
            };
            let inner = Rc::downgrade(&self.inner);
            self.inner.sim.spawn(async move {
                if let Err(e) = handle.await
                    && let Some(i) = inner.upgrade()
                {
                    i.zone_job_error.borrow_mut().get_or_insert(e);
                }
            });
        }
    }

    // ---- cleaning ----

    /// The rest of a foreground round after its opening checkpoint (taking `opening`), as the
    /// published ZNS+ F2FS's f2fs_gc (kernel/fs/f2fs/gc.c, from F2FS 4.10): it cleans victim
    /// after victim, leaving each prefree, one at least and more until the free zones and
    /// those it freed reach the threshold, and closes with one checkpoint. Its only
    /// checkpoints on the way come once the round has freed more than half the reserve, after
    /// every further victim while zones are still short. So the copies of one victim (IZC's
    /// zone_compaction, asynchronous, seed 000 §3.2.1) overlap the cleaning of the next, and
    /// only the last waits for them.
    ///
    /// Fig. 6's per-victim times follow the authors' accounting (f2fs_gc times each victim
    /// from the end of the one before): the opening checkpoint counts in the first victim's
    /// checkpoint phase, and a checkpoint (with its wait for the moves) in that of the victim
    /// it follows.
    pub(crate) async fn foreground_round(&self, opening: Nanos) -> FsResult<()> {
        let half_reserve = self.inner.st.borrow().reserved_zones / 2;
        let mut opening = Some(opening);
        let mut prefree: Vec<Cleaned> = Vec::new();
        let mut freed = 0u32;
        let short = |fs: &Fs, prefree: usize| fs.inner.st.borrow().zones_short(prefree);
        // At least one victim, though the opening checkpoint may have freed enough: f2fs_gc
        // looks for its victim after that checkpoint and cleans it either way.
        while freed == 0 || short(self, prefree.len()) {
            // A victim's moves may need a new zone in two logs: with too few zones free
            // for that (a small reserve), the victims cleaned so far are made free first.
            if !prefree.is_empty()
                && self.inner.st.borrow().segs.free_zones.len() < CLEANER_FREE_ZONES
            {
                self.checkpoint_cleaned(std::mem::take(&mut prefree))
                    .await?;
                continue;
            }
            let Some(mut c) = self.clean_zone(true).await? else {
                break;
            };
            c.event.phases_ns.checkpoint += opening.take().unwrap_or(Nanos::ZERO);
            prefree.push(c);
            freed += 1;
            if freed > half_reserve && short(self, prefree.len()) {
                self.checkpoint_cleaned(std::mem::take(&mut prefree))
                    .await?;
            }
        }
        if !prefree.is_empty() {
            self.checkpoint_cleaned(prefree).await?;
        }
        Ok(())
    }

    /// Cleans one zone and checkpoints at once (background cleaning, which frees a victim at
    /// a time). Returns false when no zone would free space.
    pub(crate) async fn clean_one(&self, foreground: bool) -> FsResult<bool> {
        match self.clean_zone(foreground).await? {
            Some(c) => {
                self.checkpoint_cleaned(vec![c]).await?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Makes cleaned victims durable: a checkpoint that writes its nodes and metadata while
    /// their moves (host writes and device copies) are still under way and its pack once they
    /// are done ([`Fs::checkpoint_after`]), which frees their zones; and counts them. The
    /// checkpoint, with its wait, counts in the last one's checkpoint phase (seed 000 §4.1
    /// Fig. 6: "the checkpoint phase must wait for the persistent completion of the previous
    /// phases").
    async fn checkpoint_cleaned(&self, mut cleaned: Vec<Cleaned>) -> FsResult<()> {
        let t = self.inner.sim.now();
        let moves = cleaned
            .iter_mut()
            .flat_map(|c| std::mem::take(&mut c.moves))
            .collect();
        self.checkpoint_after(moves).await?;
        let durable = self.inner.sim.now();
        if let Some(last) = cleaned.last_mut() {
            last.event.phases_ns.checkpoint += durable - t;
        }
        let mut st = self.inner.st.borrow_mut();
        for Cleaned {
            mut event,
            modified_meta,
            ..
        } in cleaned
        {
            // HSR's alpha (seed 000 §3.3.2): `modified_meta` per block moved. (The
            // checkpoint's own writes also carry nodes other calls dirtied, so they are not
            // counted.) Profiled per log that wrote the victim (Hsr): node victims' moves
            // update no node, and directory blocks each have their own owner.
            if let Some(th) = &mut st.segs.threaded {
                th.hsr
                    .observe_alpha(event.log, modified_meta, event.valid_blocks);
            }
            st.stats.zones_cleaned += 1;
            st.stats.zones_cleaned_by_log.add(event.log);
            if event.method == CompactionMethod::InDevice {
                st.stats.zones_cleaned_in_device += 1;
            }
            st.stats.blocks_moved += event.moved_blocks;
            if event.foreground {
                st.stats.foreground_cleanings += 1;
            } else {
                st.stats.background_cleanings += 1;
            }
            event.durable_ns = durable;
            st.gc_log.push(GcEvent::Compaction(event));
        }
        Ok(())
    }

    /// Cleans one victim zone up to its checkpoint: moves its valid blocks (host copies, or
    /// IZC's device copies) and leaves it prefree; the moves are still in flight. None when
    /// no zone would free space.
    async fn clean_zone(&self, foreground: bool) -> FsResult<Option<Cleaned>> {
        let t0 = self.inner.sim.now();
        let victim = {
            let st = self.inner.st.borrow();
            let v = if foreground {
                self.inner.policy.foreground_victim()
            } else {
                self.inner.policy.background_victim()
            };
            v.pick(&st.segs, now_ns(&self.inner.sim))
        };
        let Some(z) = victim else { return Ok(None) };
        self.inner.st.borrow_mut().segs.cleaning = Some(z);
        let layout = self.inner.st.borrow().segs.layout.clone();
        // Writes to the victim still on their way complete first (it just filled, or a log
        // just left it).
        self.inner.dev.quiesce(layout.zone_start(z)).await;
        // Init: the summary blocks of the victim's segments, read ahead together (F2FS's
        // do_garbage_collect reads a section's SSA blocks ahead before its segments) unless
        // the page cache holds them.
        let first_seg = z * layout.sb.segs_per_zone;
        let ssa = layout.ssa_block(first_seg, 0)
            ..layout.ssa_block(first_seg + layout.sb.segs_per_zone, 0);
        let missing: Vec<u64> = {
            let mut st = self.inner.st.borrow_mut();
            ssa.filter(|&a| !st.cache.touch_meta(a)).collect()
        };
        let summaries = merged_runs(&missing, |_| false)
            .into_iter()
            .map(|run| {
                let (at, n) = (missing[run.start], run.len() as u64);
                let fs = self.clone();
                self.inner.sim.spawn(async move {
                    fs.inner.dev.read(at, n, Traffic::Meta).await?;
                    let mut st = fs.inner.st.borrow_mut();
                    (at..at + n).for_each(|a| st.cache.put_meta(a));
                    Ok::<(), FsError>(())
                })
            })
            .collect();
        join_all(summaries).await?;
        let valid: Vec<(BlkAddr, Summary)> = {
            let st = self.inner.st.borrow();
            (0..layout.blocks_per_zone)
                .map(|off| layout.addr(z, off))
                .filter(|&a| st.segs.is_valid(a))
                .map(|a| (a, st.segs.owner(a)))
                .collect()
        };
        // IZC offloads the copies of data victims only: the published ZNS+ F2FS sends
        // zone_compaction from gc_data_segment and cleans node segments with F2FS's own
        // gc_node_segment (node pages read, dirtied and written back by the host), so node
        // reclaiming stays expensive under IZC, and is where threaded logging gains most
        // (seed 000 §4.2: "high reclaiming efficiency during node segment reclaiming").
        let temp = self.inner.st.borrow().segs.victim_temp(z);
        let kind = VictimKind::of(temp);
        let in_storage = match (self.inner.policy.migration(), kind) {
            (Migration::InStorage(c), VictimKind::Data) => Some(c),
            _ => None,
        };
        // N_node + N_meta of HSR's C_SC (seed 000 §3.3.2), counted for alpha below: the owner
        // nodes of the moved data blocks (each rewritten), the NAT blocks of the moved nodes
        // and of those owners (their addresses change), the SIT blocks of the segments the
        // owners' old copies leave, the SSA blocks of the destinations, and the victim's and
        // destinations' SIT blocks.
        let modified_meta = {
            let st = self.inner.st.borrow();
            let layout = &st.segs.layout;
            let mut owners = BTreeSet::new();
            let mut nat_blocks = BTreeSet::new();
            let mut sit_blocks = BTreeSet::new();
            for &(a, sum) in &valid {
                nat_blocks.insert(sum.nid / NAT_PER_BLOCK as u32);
                let node_at = st.nat.entries[sum.nid as usize].addr;
                if node_at != a
                    && owners.insert(sum.nid)
                    && let Some((oz, ooff)) = layout.locate(node_at)
                {
                    sit_blocks.insert(layout.seg_of(oz, ooff).0 as usize / layout.sit_per_block);
                }
            }
            owners.len() as u64
                + nat_blocks.len() as u64
                + sit_blocks.len() as u64
                + (valid.len() as u64).div_ceil(SSA_PER_BLOCK as u64)
                + 2
        };
        // The victim's segments one after another, each through its phases (F2FS's
        // gc_data_segment and gc_node_segment run per segment: read ahead, wait, move), the
        // times of each phase summed over them.
        let mut time = CompactionTime {
            init: self.inner.sim.now() - t0,
            ..CompactionTime::default()
        };
        let mut moved = 0u64;
        // The host's writes and the device's copies, in flight.
        let mut moves = Vec::new();
        let bps = layout.sb.blocks_per_seg;
        // Under IZC, the blocks the host moves, segment by segment, once the device's copy
        // is under way.
        let mut host_plans = Vec::new();
        for s in 0..layout.sb.segs_per_zone {
            let plan = self
                .plan_segment(z, s * bps..(s + 1) * bps, in_storage)
                .await?;
            time.init += plan.init;
            if in_storage.is_some() {
                host_plans.push(plan.data);
            } else {
                let m = self.move_by_host(plan.data).await?;
                m.count_in(&mut time, &mut moved, &mut moves);
            }
        }
        // IZC: the device copies what the host does not move (seed 000 §3.2.1 "Copy
        // Offloading"), into one reserved region for the whole victim (a zone_compaction per
        // destination zone it falls in). The paper's F2FS segment is the zone (§4; §4.4: "as
        // the number of flash chips increased, the segment size also increased"), so CAB
        // (§3.3.1) pairs source and destination chunks over the zone; with a 2 MiB segment's
        // region, a chip holding more whole chunks than the region gives it copies the rest
        // by read and program. The copy goes first and the host's writes follow while it
        // runs, as the published ZNS+ F2FS's gc_data_segment sends a segment's
        // zone_compaction without waiting (its phase 3) before it moves the blocks the host
        // keeps (phase 4); the host does not wait for the copy before the checkpoint.
        let mut device_copied = 0;
        if let Some(c) = in_storage {
            let by_host: BTreeSet<BlkAddr> = host_plans.iter().flatten().map(|d| d.0).collect();
            let t = self.inner.sim.now();
            let (copy, n) = self.copy_in_device(z, temp, c, &by_host).await?;
            time.write += self.inner.sim.now() - t;
            device_copied = n;
            moves.push(copy);
            for data in host_plans {
                let m = self.move_by_host(data).await?;
                m.count_in(&mut time, &mut moved, &mut moves);
            }
        }
        {
            let mut st = self.inner.st.borrow_mut();
            st.segs.zones[z as usize] = ZoneUse::Prefree;
            st.segs.cleaning = None;
        }
        Ok(Some(Cleaned {
            event: CompactionEvent {
                zone: z,
                log: temp,
                method: match in_storage {
                    Some(_) => CompactionMethod::InDevice,
                    None => CompactionMethod::HostCopy,
                },
                foreground,
                start_ns: t0,
                durable_ns: Nanos::ZERO,
                valid_blocks: valid.len() as u64,
                moved_blocks: moved + device_copied,
                device_copied_blocks: device_copied,
                phases_ns: time,
            },
            moves,
            modified_meta,
        }))
    }

    /// Plans the cleaning of the blocks `offs` (one segment) of victim zone `z`: reads the
    /// nodes it needs ahead, dirties its node blocks the host rewrites (the checkpoint writes
    /// them), and lists the data blocks the host moves ([`Fs::move_by_host`]); with
    /// `in_storage` (IZC) the host takes only the blocks it holds as the cached-page choice
    /// says, and the device copies the rest ([`Fs::clean_zone`] offloads them).
    async fn plan_segment(
        &self,
        z: u32,
        offs: std::ops::Range<u32>,
        in_storage: Option<InStorage>,
    ) -> FsResult<SegmentPlan> {
        let t0 = self.inner.sim.now();
        let valid: Vec<(BlkAddr, Summary)> = {
            let st = self.inner.st.borrow();
            offs.clone()
                .map(|off| st.segs.layout.addr(z, off))
                .filter(|&a| st.segs.is_valid(a))
                .map(|a| (a, st.segs.owner(a)))
                .collect()
        };
        // Read the nodes cleaning needs all at once, as F2FS's gc_data_segment and
        // gc_node_segment read them ahead (their phase 0) before they move any block: the
        // owners of the segment's data blocks, and its node blocks when the host copies them.
        // The loops below then find them cached instead of reading them one at a time.
        let owners: BTreeSet<Nid> = {
            let st = self.inner.st.borrow();
            valid
                .iter()
                .filter(|&&(a, sum)| {
                    in_storage.is_none() || st.nat.entries[sum.nid as usize].addr != a
                })
                .map(|&(_, sum)| sum.nid)
                .filter(|&nid| st.cache.node(nid).is_none())
                .collect()
        };
        self.read_nodes_at_once(owners).await?;
        // Owners: node blocks are rewritten by dirtying them; data blocks are read into the
        // page cache and written to the cold data log (a directory's to the hot data log, as
        // F2FS's `__get_segment_type_6` places them). With IZC only the blocks the host
        // writes are handled here (seed 000 §3.2.1 "Cached Page Handling" and §4.1): dirty
        // cached pages always, and under IZC-H the clean cached ones of a chunk whose every
        // valid block is cached (a fully cached chunk); the device copies the rest below.
        // The data blocks the host moves, as (victim address, file, block index), in address
        // order (both loops below go through `valid`).
        let mut data: Vec<(BlkAddr, Ino, u64)> = Vec::new();
        // IZC: the valid blocks the host holds.
        let mut held: BTreeMap<BlkAddr, (HeldBlock, Holder)> = BTreeMap::new();
        for &(a, sum) in &valid {
            let e = {
                let st = self.inner.st.borrow();
                if !st.segs.is_valid(a) {
                    // Freed since the victim was listed (this loop waits for node reads).
                    continue;
                }
                st.nat.entries[sum.nid as usize]
            };
            if e.ino == 0 {
                return Err(FsError::Corrupt(format!(
                    "valid block {a} owned by free node {}",
                    sum.nid
                )));
            }
            if in_storage.is_some() && e.addr == a {
                let st = self.inner.st.borrow();
                if st.cache.node(sum.nid).is_some() {
                    let holder = Holder::host(st.cache.is_dirty_node(sum.nid));
                    held.insert(a, (HeldBlock::Node(sum.nid), holder));
                }
                continue;
            }
            match self.ensure_node(sum.nid).await {
                // Freed meanwhile (its blocks with it).
                Err(FsError::NotFound) => continue,
                r => r?,
            }
            let mut st = self.inner.st.borrow_mut();
            // The node may have moved or been freed while it was read.
            let e = st.nat.entries[sum.nid as usize];
            if e.ino == 0 || !st.segs.is_valid(a) {
                continue;
            }
            if e.addr == a {
                st.cache.dirty_node(sum.nid);
                continue;
            }
            let n = st.cache.node(sum.nid).expect("resident");
            if n.addrs.get(sum.ofs as usize) != Some(&a) {
                return Err(FsError::Corrupt(format!(
                    "block {a}: its summary names node {} slot {}, which points elsewhere",
                    sum.nid, sum.ofs
                )));
            }
            let idx = n.footer.base + sum.ofs as u64;
            let ino = e.ino as Ino;
            if in_storage.is_none() {
                data.push((a, ino, idx));
            } else if st.cache.has_page(ino, idx) {
                let holder = Holder::host(st.cache.is_dirty(ino, idx));
                held.insert(a, (HeldBlock::Data { ino, idx }, holder));
            }
        }
        if let Some(c) = in_storage {
            let blocks: Vec<(BlkAddr, u64, Holder)> = {
                let st = self.inner.st.borrow();
                valid
                    .iter()
                    .filter(|&&(a, _)| st.segs.is_valid(a))
                    .map(|&(a, _)| {
                        let holder = held.get(&a).map_or(Holder::Device, |&(_, h)| h);
                        (a, self.inner.dev.chip_of(a as u64).1, holder)
                    })
                    .collect()
            };
            let chosen = written_by_host(c.cached, blocks.iter().map(|&(_, ch, h)| (ch, h)));
            let mut st = self.inner.st.borrow_mut();
            for (&(a, _, _), _) in blocks.iter().zip(chosen).filter(|&(_, host)| host) {
                match held[&a].0 {
                    // A dirty node stays dirty: the next checkpoint writes it.
                    HeldBlock::Node(nid) => st.cache.dirty_node(nid),
                    HeldBlock::Data { ino, idx } => data.push((a, ino, idx)),
                }
            }
        }
        Ok(SegmentPlan {
            init: self.inner.sim.now() - t0,
            data,
        })
    }

    /// Moves the data blocks of a segment's plan ([`Fs::plan_segment`]): reads those not in
    /// the page cache, then issues their writes to the cold logs.
    async fn move_by_host(&self, data: Vec<(BlkAddr, Ino, u64)>) -> FsResult<HostMoves> {
        let t_init = self.inner.sim.now();
        // Read phase: blocks not in the page cache, in address runs.
        debug_assert!(
            data.is_sorted_by_key(|d| d.0),
            "victim blocks out of address order"
        );
        let reads: Vec<(Ino, u64, BlkAddr)> = {
            let st = self.inner.st.borrow();
            data.iter()
                .filter(|&&(_, ino, idx)| !st.cache.has_page(ino, idx))
                .map(|&(a, ino, idx)| (ino, idx, a))
                .collect()
        };
        // Every run is read ahead at once (F2FS's gc_data_segment reads the victim's pages
        // ahead before moving them); the pages enter the cache as their reads complete.
        let mut runs = Vec::new();
        let mut i = 0;
        while i < reads.len() {
            let mut j = i + 1;
            while j < reads.len() && reads[j].2 == reads[j - 1].2 + 1 && j - i < 128 {
                j += 1;
            }
            self.cpu(self.inner.opts.host.page_alloc.times((j - i) as u64))
                .await;
            let fs = self.clone();
            let (addr, n) = (reads[i].2 as u64, (j - i) as u64);
            let read = self
                .inner
                .sim
                .spawn(async move { fs.inner.dev.read(addr, n, Traffic::GcRead).await });
            runs.push((i..j, read));
            i = j;
        }
        for (run, read) in runs {
            let d = read.await?;
            let n = run.len();
            let mut st = self.inner.st.borrow_mut();
            for (k, r) in reads[run].iter().enumerate() {
                let page = if d.bytes.len() == n * BLOCK {
                    PageData::Bytes(d.bytes[k * BLOCK..(k + 1) * BLOCK].into())
                } else {
                    PageData::Fp(d.fingerprints[k])
                };
                if !st.cache.has_page(r.0, r.1) {
                    st.cache.put_page(r.0, r.1, page, false);
                }
            }
        }
        let t_read = self.inner.sim.now();
        // Write phase: under each file's lock, blocks still at their victim address move, in
        // the order of their victim addresses: F2FS's gc_data_segment calls move_data_page
        // block after block through the segment, and foreground cleaning writes each page at
        // once, so the cold log receives the victim's survivors in the order they had (the
        // order they were written in), a run of one file's blocks at a time. The checkpoint
        // phase waits for the writes.
        let mut moved = 0u64;
        let mut writes = Vec::new();
        for run in data.chunk_by(|x, y| x.1 == y.1) {
            let ino = run[0].1;
            let lock = self.inode_lock(ino);
            let _l = lock.lock().await;
            let alive = self.inner.st.borrow().nat.entries[ino as usize].ino == ino as u32;
            if !alive {
                continue;
            }
            let mut idxs = Vec::with_capacity(run.len());
            for &(a, _, idx) in run {
                if self.block_addr(ino, idx).await? != a {
                    continue;
                }
                let page = self.read_page(ino, idx, Traffic::GcRead).await?;
                self.inner
                    .st
                    .borrow_mut()
                    .cache
                    .mark_for_move(ino, idx, page);
                idxs.push(idx);
            }
            moved += idxs.len() as u64;
            writes.extend(self.issue_inode_pages(ino, Some(&idxs)).await?);
        }
        let t_write = self.inner.sim.now();
        Ok(HostMoves {
            read: t_read - t_init,
            write: t_write - t_read,
            moved,
            writes,
        })
    }

    /// Makes the nodes `nids` resident, reading all that are not cached at once (F2FS reads
    /// the nodes cleaning needs ahead, then waits). A node freed meanwhile is skipped: its
    /// blocks went with it.
    async fn read_nodes_at_once(&self, nids: BTreeSet<Nid>) -> FsResult<()> {
        let reads = nids
            .into_iter()
            .map(|nid| {
                let fs = self.clone();
                self.inner.sim.spawn(async move {
                    match fs.ensure_node(nid).await {
                        Err(FsError::NotFound) => Ok(()),
                        r => r,
                    }
                })
            })
            .collect();
        join_all(reads).await?;
        Ok(())
    }

    /// IZC's copy offloading (seed 000 §3.2.1) of a data victim: every block still valid in victim
    /// `z`, which the log `victim` wrote, except those the host moves (`by_host`, the cached-page
    /// choice) and dirty nodes (the checkpoint writes those; node blocks are here only in a zone no
    /// log has written since mount, whose kind is not known), gets a destination in a log and is
    /// copied there by the device with one zone_compaction per destination zone. Data blocks go
    /// where the host copy sends them: the hot data log holds the directories' blocks, which stay
    /// hot (F2FS's `__get_segment_type_6`; the published ZNS+ F2FS's `gc_data_segment` sends a hot
    /// victim's blocks to the hot log), the rest to the cold data log (§2.2: "cold blocks in the
    /// hot and warm segments are moved into the cold segments"); node blocks go to the cold node
    /// log. A destination log that threads gives sparse destinations, which zone_compaction takes
    /// (§3.2.1). Node pointers and NAT entries are repointed at once (the copy is readable as soon
    /// as the device's write pointer passes it). Returns the copy's handle and its block count.
    async fn copy_in_device(
        &self,
        z: u32,
        victim: Temp,
        copy: InStorage,
        by_host: &BTreeSet<BlkAddr>,
    ) -> FsResult<(zonelab_sim::JoinHandle<FsResult<()>>, u64)> {
        let offs = 0..self.inner.st.borrow().segs.layout.blocks_per_zone;
        loop {
            // Data blocks are repointed in their owner nodes, which must be resident; node
            // blocks are repointed in the NAT and need not be read (seed 000 §3.2.1).
            let missing = {
                let st = self.inner.st.borrow();
                let layout = &st.segs.layout;
                offs.clone()
                    .map(|off| layout.addr(z, off))
                    .filter(|&a| st.segs.is_valid(a) && !by_host.contains(&a))
                    .filter(|&a| st.nat.entries[st.segs.owner(a).nid as usize].addr != a)
                    .map(|a| st.segs.owner(a).nid)
                    .filter(|&nid| st.nat.entries[nid as usize].ino != 0)
                    .filter(|&nid| st.cache.node(nid).is_none())
                    .collect::<BTreeSet<Nid>>()
            };
            if missing.is_empty() {
                break;
            }
            self.read_nodes_at_once(missing).await?;
        }
        // From here to the submission nothing waits, so the destinations are taken and handed
        // to the device in one step (a zone receives its writes in the order of its blocks).
        let t = now_ns(&self.inner.sim);
        let mut st = self.inner.st.borrow_mut();
        let st = &mut *st;
        let layout = st.segs.layout.clone();
        let mut data_src: Vec<(BlkAddr, Summary)> = Vec::new();
        let mut node_src: Vec<(BlkAddr, Summary)> = Vec::new();
        for off in offs {
            let a = layout.addr(z, off);
            if !st.segs.is_valid(a) || by_host.contains(&a) {
                continue;
            }
            let sum = st.segs.owner(a);
            let e = st.nat.entries[sum.nid as usize];
            if e.ino == 0 {
                return Err(FsError::Corrupt(format!(
                    "valid block {a} owned by free node {}",
                    sum.nid
                )));
            }
            if e.addr == a {
                if !st.cache.is_dirty_node(sum.nid) {
                    node_src.push((a, sum));
                }
                continue;
            }
            let n = st.cache.node(sum.nid).expect("made resident above");
            if n.addrs.get(sum.ofs as usize) != Some(&a) {
                return Err(FsError::Corrupt(format!(
                    "block {a}: its summary names node {} slot {}, which points elsewhere",
                    sum.nid, sum.ofs
                )));
            }
            data_src.push((a, sum));
        }
        let mut pairs = Vec::with_capacity(data_src.len() + node_src.len());
        let data_dst = match victim {
            Temp::HotData => Temp::HotData,
            _ => Temp::ColdData,
        };
        for (srcs, temp) in [(data_src, data_dst), (node_src, Temp::ColdNode)] {
            if srcs.is_empty() {
                continue;
            }
            // The reserved region: valid from the start (owners follow below), so a log that
            // reopens a zone for threaded logging meanwhile does not take these blocks again.
            let mut dsts = Vec::with_capacity(srcs.len());
            for &(_, sum) in &srcs {
                let d = self.take_block(st, temp)?;
                st.segs.validate(d, sum, t);
                dsts.push(d);
            }
            let from: Vec<BlkAddr> = srcs.iter().map(|s| s.0).collect();
            let placed = assign_destinations(&from, &dsts, copy.allocation, &self.inner.dev);
            st.stats.device_copy_full_chunk_blocks += placed.full_chunk_blocks;
            st.stats.device_copy_copyback_blocks += placed.copyback_blocks;
            for (&(a, sum), d) in srcs.iter().zip(placed.to) {
                st.segs.invalidate(a, sum, t);
                st.segs.set_owner(d, sum);
                let e = st.nat.entries[sum.nid as usize];
                if temp == Temp::ColdNode {
                    st.nat.set(
                        sum.nid,
                        NatEntry {
                            ino: e.ino,
                            addr: d,
                        },
                    );
                } else {
                    let n = st.cache.node_mut(sum.nid).expect("made resident above");
                    n.addrs[sum.ofs as usize] = d;
                    st.cache.dirty_node(sum.nid);
                }
                pairs.push((a as u64, d as u64));
            }
        }
        let n = pairs.len() as u64;
        st.stats.blocks_copied_in_device += n;
        let copy = self.inner.dev.compact(pairs);
        self.issue_zone_jobs(st);
        Ok((copy, n))
    }

    // ---- public extras ----

    /// Writes everything back and checkpoints; later calls fail.
    pub async fn unmount(&self) -> FsResult<()> {
        self.sync().await?;
        let mut st = self.inner.st.borrow_mut();
        st.unmounted = true;
        drop(st);
        self.inner.flusher_wake.notify_all();
        Ok(())
    }

    pub fn stats(&self) -> FsStats {
        let st = self.inner.st.borrow();
        let mut s = st.stats.clone();
        s.traffic = self.inner.dev.traffic();
        if let Some(th) = &st.segs.threaded {
            s.threaded = th.stats;
            s.hsr = th.hsr.profile();
        }
        s
    }

    /// Events of the reclamation log ([`crate::gc_log`]) from the `from`th on.
    pub fn gc_log(&self, from: usize) -> Vec<GcEvent> {
        let st = self.inner.st.borrow();
        st.gc_log[from.min(st.gc_log.len())..].to_vec()
    }

    /// Events in the reclamation log so far.
    pub fn gc_log_len(&self) -> usize {
        self.inner.st.borrow().gc_log.len()
    }

    /// Segments per zone, as formatted.
    pub fn segs_per_zone(&self) -> u32 {
        self.inner.st.borrow().segs.layout.sb.segs_per_zone
    }

    pub fn free_zones(&self) -> u32 {
        self.inner.st.borrow().segs.free_zones.len() as u32
    }

    pub fn sim(&self) -> &Sim {
        &self.inner.sim
    }

    /// The inode of `path` ("/a/b"), following no symlinks.
    pub async fn resolve(&self, path: &str) -> FsResult<Ino> {
        let mut ino = ROOT_INO;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            ino = self.lookup(ino, part).await?.ino;
        }
        Ok(ino)
    }

    fn user_capacity(&self, st: &State) -> u64 {
        let bpz = st.segs.layout.blocks_per_zone as u64;
        (st.segs.layout.sb.main_zones as u64)
            .saturating_sub((st.reserved_zones + st.overprovision_zones) as u64)
            * bpz
    }

    /// Blocks in use, counting dirty pages not yet written.
    fn used_blocks(&self, st: &State) -> u64 {
        st.segs.valid_blocks + st.cache.new_pages()
    }

    fn check_space(&self, blocks: u64) -> FsResult<()> {
        let st = self.inner.st.borrow();
        if self.used_blocks(&st) + blocks > self.user_capacity(&st) {
            return Err(FsError::NoSpace);
        }
        Ok(())
    }

    async fn create_node(
        &self,
        parent: Ino,
        name: &str,
        kind: FileKind,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        check_name(name)?;
        let _share = self.enter(true).await?;
        let _ns = self.inner.ns_lock.lock().await;
        self.load_dir(parent).await?;
        if self.dir_entry(parent, name).is_some() {
            return Err(FsError::Exists);
        }
        self.check_space(2)?;
        if kind == FileKind::Dir {
            let p = self.inode(parent).await?;
            if p.nlink >= LINK_MAX {
                return Err(FsError::TooManyLinks);
            }
        }
        let nid = self.alloc_nid(0)?;
        let t = self.stamp();
        let node = new_inode(
            nid,
            kind,
            perm & 0o7777,
            uid,
            gid,
            t,
            parent,
            name.as_bytes(),
        );
        {
            let mut st = self.inner.st.borrow_mut();
            st.nat.valid_inodes += 1;
            st.created_since_cp.insert(nid as Ino);
            st.cache.put_node(nid, node, true);
            if kind == FileKind::Dir {
                st.dirs.insert(nid as Ino, DirIndex::default());
            }
        }
        self.dir_add(parent, name, nid, kind).await?;
        if kind == FileKind::Dir {
            self.modify_inode(parent, |i| i.nlink += 1).await?;
        }
        let i = self.inode(nid as Ino).await?;
        Ok(self.attr_of(nid as Ino, &i))
    }

    /// Drops one link of `ino` (its entry already removed); evicts the inode at zero.
    pub(crate) async fn drop_link(&self, ino: Ino) -> FsResult<()> {
        self.ensure_node(ino as Nid).await?;
        let t = self.stamp();
        let (nlink, kind) = self.with_inode(ino, |i| {
            i.nlink = i.nlink.saturating_sub(1);
            i.ctime = t;
            (i.nlink, i.kind)
        });
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        if nlink == 0 || (kind == FileKind::Dir && nlink <= 1) {
            self.evict_inode(ino).await?;
        }
        Ok(())
    }

    /// Whether `anc` is `ino` or one of its ancestors (following parents up to the root).
    async fn is_ancestor(&self, anc: Ino, mut ino: Ino) -> FsResult<bool> {
        loop {
            if ino == anc {
                return Ok(true);
            }
            if ino == ROOT_INO {
                return Ok(false);
            }
            ino = self.inode(ino).await?.parent as Ino;
        }
    }

    /// Checks the in-memory state against itself (tests and fsck): SIT counts equal the
    /// blocks NAT and nodes point to, no block is owned twice, SSA names every owner.
    pub async fn check(&self) -> FsResult<Vec<String>> {
        let _hold = self.hold_background().await;
        crate::fsck::check_mounted(self).await
    }

    /// Holds the background work off ([`BackgroundHold`]) once its round under way, if any,
    /// has ended.
    pub(crate) async fn hold_background(&self) -> BackgroundHold {
        let inner = &self.inner;
        inner.background_held.set(inner.background_held.get() + 1);
        // Made before the wait, so a caller dropped while waiting lets go too.
        let hold = BackgroundHold {
            inner: inner.clone(),
        };
        while inner.background_busy.get() {
            inner.background_done.notified().await;
        }
        hold
    }

    /// [`Fs::check`] and what only a file system at rest can be checked for (a fresh mount,
    /// before it writes anything): intact superblock copies, and valid blocks the zoned device
    /// still holds.
    pub async fn check_at_rest(&self) -> FsResult<Vec<String>> {
        let _hold = self.hold_background().await;
        let mut problems = crate::fsck::check_at_rest(self).await?;
        problems.extend(crate::fsck::check_mounted(self).await?);
        Ok(problems)
    }
}

/// The first intact superblock copy (mount reads copy 0, then copy 1), or why neither is.
async fn read_superblock(dev: &Dev) -> Result<Superblock, String> {
    let mut why = String::new();
    for copy in [0, 1] {
        match superblock_copy(dev, copy).await {
            Ok(s) => return Ok(s),
            Err(FsError::Corrupt(e)) => why = e,
            Err(e) => why = e.to_string(),
        }
    }
    Err(why)
}

/// Superblock copy `copy` (0 or 1, at blocks 0 and 1), decoded.
pub(crate) async fn superblock_copy(dev: &Dev, copy: u64) -> FsResult<Superblock> {
    Superblock::decode(&dev.read_meta(copy, Traffic::Meta).await?)
}

/// Which child pointer of a node the tree walk follows.
#[derive(Clone, Copy)]
enum ParentSlot {
    InodeNid(usize),
    Indirect(usize),
}

impl ParentSlot {
    fn get(self, n: &Node) -> Nid {
        match (self, &n.body) {
            (ParentSlot::InodeNid(i), NodeBody::Inode(x)) => x.nids[i],
            (ParentSlot::Indirect(i), NodeBody::Indirect(v)) => v.get(i).copied().unwrap_or(0),
            _ => 0,
        }
    }
    fn set(self, n: &mut Node, nid: Nid) {
        match (self, &mut n.body) {
            (ParentSlot::InodeNid(i), NodeBody::Inode(x)) => x.nids[i] = nid,
            (ParentSlot::Indirect(i), NodeBody::Indirect(v)) => {
                if v.len() <= i {
                    v.resize(i + 1, 0);
                }
                v[i] = nid;
            }
            _ => panic!("tree walk reached a node of the wrong type"),
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn new_inode(
    nid: Nid,
    kind: FileKind,
    perm: u16,
    uid: u32,
    gid: u32,
    t: u64,
    parent: Ino,
    name: &[u8],
) -> Node {
    Node {
        body: NodeBody::Inode(Box::new(InodeData {
            kind,
            perm,
            uid,
            gid,
            nlink: if kind == FileKind::Dir { 2 } else { 1 },
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            parent: parent as u32,
            name: name.to_vec(),
            nids: [0; INODE_NIDS],
        })),
        addrs: Vec::new(),
        footer: Footer {
            nid,
            ino: nid,
            ..Default::default()
        },
    }
}

fn pages_data(v: Vec<PageData>) -> OwnedData {
    if v.iter().all(|p| matches!(p, PageData::Fp(_))) {
        OwnedData::Fingerprints(
            v.into_iter()
                .map(|p| match p {
                    PageData::Fp(f) => f,
                    PageData::Bytes(_) => unreachable!(),
                })
                .collect(),
        )
    } else {
        let mut out = Vec::with_capacity(v.len() * BLOCK);
        for p in v {
            match p {
                PageData::Bytes(b) => out.extend_from_slice(&b),
                PageData::Fp(f) => {
                    zonelab_device::payload::block_from_fingerprint(f, BLOCK as u64, &mut out)
                }
            }
        }
        OwnedData::Bytes(out)
    }
}

/// Waits for whichever of two futures finishes first.
async fn futures_select(
    a: impl std::future::Future<Output = ()>,
    b: impl std::future::Future<Output = ()>,
) {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() || b.as_mut().poll(cx).is_ready() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

impl FileSystem for Fs {
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        self.enter_read().await?;
        self.load_dir(parent).await?;
        let (ino, _) = self.dir_entry(parent, name).ok_or(FsError::NotFound)?;
        let i = self.inode(ino as Ino).await?;
        Ok(self.attr_of(ino as Ino, &i))
    }

    async fn getattr(&self, ino: Ino) -> FsResult<Attr> {
        self.enter_read().await?;
        let i = self.inode(ino).await?;
        Ok(self.attr_of(ino, &i))
    }

    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr> {
        let _share = self.enter(set.size.is_some()).await?;
        let lock = self.inode_lock(ino);
        let _l = lock.lock().await;
        let i = self.inode(ino).await?;
        let t = self.stamp();
        if let Some(size) = set.size {
            if i.kind == FileKind::Dir {
                return Err(FsError::IsDir);
            }
            if i.kind != FileKind::File {
                return Err(FsError::Invalid(
                    "only regular files can be truncated".into(),
                ));
            }
            self.resize(ino, &i, size).await?;
            self.with_inode(ino, |x| x.mtime = t);
        }
        self.ensure_node(ino as Nid).await?;
        let attr = self.with_inode(ino, |x| {
            if let Some(p) = set.perm {
                x.perm = p & 0o7777;
            }
            if let Some(u) = set.uid {
                x.uid = u;
            }
            if let Some(g) = set.gid {
                x.gid = g;
            }
            if let Some(a) = set.atime {
                x.atime = a.0;
            }
            if let Some(m) = set.mtime {
                x.mtime = m.0;
            }
            x.ctime = t;
            x.clone()
        });
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        Ok(self.attr_of(ino, &attr))
    }

    async fn create(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.create_node(parent, name, FileKind::File, perm, uid, gid)
            .await
    }

    async fn mkdir(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.create_node(parent, name, FileKind::Dir, perm, uid, gid)
            .await
    }

    async fn symlink(
        &self,
        parent: Ino,
        name: &str,
        target: &str,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        if target.is_empty() || target.len() >= BLOCK {
            return Err(FsError::Invalid(format!(
                "symlink target of {} bytes (1 to {} allowed)",
                target.len(),
                BLOCK - 1
            )));
        }
        let a = self
            .create_node(parent, name, FileKind::Symlink, 0o777, uid, gid)
            .await?;
        let _share = self.enter(false).await?;
        let mut block = vec![0u8; BLOCK];
        block[..target.len()].copy_from_slice(target.as_bytes());
        self.inner.st.borrow_mut().cache.put_page_with(
            a.ino,
            0,
            PageData::Bytes(block.into()),
            true,
            true,
        );
        let i = self
            .modify_inode(a.ino, |i| {
                i.size = target.len() as u64;
                i.clone()
            })
            .await?;
        Ok(self.attr_of(a.ino, &i))
    }

    async fn readlink(&self, ino: Ino) -> FsResult<String> {
        self.enter_read().await?;
        let i = self.inode(ino).await?;
        if i.kind != FileKind::Symlink {
            return Err(FsError::Invalid("not a symbolic link".into()));
        }
        let PageData::Bytes(b) = self.read_page(ino, 0, Traffic::UserRead).await? else {
            return Err(FsError::Corrupt(format!(
                "symlink {ino} has no target block"
            )));
        };
        String::from_utf8(b[..i.size as usize].to_vec())
            .map_err(|_| FsError::Corrupt(format!("symlink {ino} target is not UTF-8")))
    }

    async fn link(&self, ino: Ino, newparent: Ino, newname: &str) -> FsResult<Attr> {
        check_name(newname)?;
        let _share = self.enter(true).await?;
        let _ns = self.inner.ns_lock.lock().await;
        let i = self.inode(ino).await?;
        if i.kind == FileKind::Dir {
            return Err(FsError::Invalid(
                "hard links to directories are not allowed".into(),
            ));
        }
        if i.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        self.load_dir(newparent).await?;
        if self.dir_entry(newparent, newname).is_some() {
            return Err(FsError::Exists);
        }
        self.dir_add(newparent, newname, ino as u32, i.kind).await?;
        self.inner.st.borrow_mut().renamed_since_cp.insert(ino);
        self.ensure_node(ino as Nid).await?;
        let t = self.stamp();
        let attr = self.with_inode(ino, |x| {
            x.nlink += 1;
            x.ctime = t;
            x.clone()
        });
        let attr = self.attr_of(ino, &attr);
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        Ok(attr)
    }

    async fn unlink(&self, parent: Ino, name: &str) -> FsResult<()> {
        let _share = self.enter(true).await?;
        let _ns = self.inner.ns_lock.lock().await;
        self.load_dir(parent).await?;
        let (ino, kind) = self.dir_entry(parent, name).ok_or(FsError::NotFound)?;
        if kind == FileKind::Dir {
            return Err(FsError::IsDir);
        }
        self.dir_remove(parent, name).await?;
        self.inner
            .st
            .borrow_mut()
            .renamed_since_cp
            .insert(ino as Ino);
        let lock = self.inode_lock(ino as Ino);
        let _l = lock.lock().await;
        self.drop_link(ino as Ino).await
    }

    async fn rmdir(&self, parent: Ino, name: &str) -> FsResult<()> {
        let _share = self.enter(true).await?;
        let _ns = self.inner.ns_lock.lock().await;
        self.load_dir(parent).await?;
        let (ino, kind) = self.dir_entry(parent, name).ok_or(FsError::NotFound)?;
        if kind != FileKind::Dir {
            return Err(FsError::NotDir);
        }
        self.load_dir(ino as Ino).await?;
        if !self.inner.st.borrow().dirs[&(ino as Ino)]
            .by_name
            .is_empty()
        {
            return Err(FsError::NotEmpty);
        }
        let lock = self.inode_lock(ino as Ino);
        let _l = lock.lock().await;
        self.dir_remove(parent, name).await?;
        self.modify_inode(parent, |i| i.nlink -= 1).await?;
        self.evict_inode(ino as Ino).await
    }

    async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str) -> FsResult<()> {
        check_name(newname)?;
        let _share = self.enter(true).await?;
        let _ns = self.inner.ns_lock.lock().await;
        self.load_dir(parent).await?;
        self.load_dir(newparent).await?;
        let (ino, kind) = self.dir_entry(parent, name).ok_or(FsError::NotFound)?;
        if parent == newparent && name == newname {
            return Ok(());
        }
        if kind == FileKind::Dir && self.is_ancestor(ino as Ino, newparent).await? {
            return Err(FsError::Invalid(
                "cannot move a directory into itself".into(),
            ));
        }
        let target = self.dir_entry(newparent, newname);
        if let Some((tino, tkind)) = target {
            if tino == ino {
                // Both names link the same inode: POSIX says do nothing.
                return Ok(());
            }
            match (kind == FileKind::Dir, tkind == FileKind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) => {
                    self.load_dir(tino as Ino).await?;
                    if !self.inner.st.borrow().dirs[&(tino as Ino)]
                        .by_name
                        .is_empty()
                    {
                        return Err(FsError::NotEmpty);
                    }
                }
                (false, false) => {}
            }
        }
        let victim_lock = target.map(|(tino, _)| self.inode_lock(tino as Ino));
        let _victim = match &victim_lock {
            Some(l) => Some(l.lock().await),
            None => None,
        };
        if let Some((tino, tkind)) = target {
            self.dir_remove(newparent, newname).await?;
            // The replaced file loses a link: like an unlink, its fsync needs a checkpoint
            // (roll-forward would restore its inode's link count, not the entry removed here).
            self.inner
                .st
                .borrow_mut()
                .renamed_since_cp
                .insert(tino as Ino);
            if tkind == FileKind::Dir {
                self.modify_inode(newparent, |i| i.nlink -= 1).await?;
                self.evict_inode(tino as Ino).await?;
            } else {
                self.drop_link(tino as Ino).await?;
            }
        }
        self.dir_remove(parent, name).await?;
        self.dir_add(newparent, newname, ino, kind).await?;
        if kind == FileKind::Dir && parent != newparent {
            self.modify_inode(parent, |i| i.nlink -= 1).await?;
            self.modify_inode(newparent, |i| i.nlink += 1).await?;
        }
        self.inner
            .st
            .borrow_mut()
            .renamed_since_cp
            .insert(ino as Ino);
        let t = self.stamp();
        self.modify_inode(ino as Ino, |i| {
            i.parent = newparent as u32;
            i.name = newname.as_bytes().to_vec();
            i.ctime = t;
        })
        .await?;
        Ok(())
    }

    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>> {
        self.enter_read().await?;
        self.load_dir(ino).await?;
        let st = self.inner.st.borrow();
        Ok(st.dirs[&ino]
            .by_name
            .iter()
            .map(|(n, &(i, k, _))| DirEntry {
                name: String::from_utf8_lossy(n).into_owned(),
                ino: i as Ino,
                kind: k,
            })
            .collect())
    }

    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData> {
        self.enter_read().await?;
        let i = self.inode(ino).await?;
        match i.kind {
            FileKind::Dir => return Err(FsError::IsDir),
            FileKind::Symlink => return Err(FsError::Invalid("read of a symlink".into())),
            FileKind::File => {}
        }
        let fp = self.inner.st.borrow().payload == PayloadMode::Fingerprint;
        let end = (off.saturating_add(len)).min(i.size);
        if fp
            && (!off.is_multiple_of(BLOCK as u64)
                || (!end.is_multiple_of(BLOCK as u64) && end != i.size))
        {
            return Err(FsError::Invalid(format!(
                "fingerprint payload: read of {len} bytes at {off} is not 4 KiB aligned"
            )));
        }
        if off >= end {
            return Ok(if fp {
                OwnedData::Fingerprints(Vec::new())
            } else {
                OwnedData::Bytes(Vec::new())
            });
        }
        let first = off / BLOCK as u64;
        let last = (end - 1) / BLOCK as u64;
        let mut bytes = Vec::new();
        let mut fps = Vec::new();
        for idx in first..=last {
            let p = self.read_page(ino, idx, Traffic::UserRead).await?;
            match p {
                PageData::Fp(f) => fps.push(f),
                PageData::Bytes(b) => {
                    if fp {
                        fps.push(fingerprint(&b));
                    } else {
                        let s = if idx == first {
                            (off % BLOCK as u64) as usize
                        } else {
                            0
                        };
                        let e = if idx == last {
                            ((end - 1) % BLOCK as u64) as usize + 1
                        } else {
                            BLOCK
                        };
                        bytes.extend_from_slice(&b[s..e]);
                    }
                }
            }
        }
        self.cpu(self.inner.opts.host.copy_page.times(last - first + 1))
            .await;
        let t = self.stamp();
        self.with_inode_if_resident(ino, |x| x.atime = t);
        Ok(if fp {
            OwnedData::Fingerprints(fps)
        } else {
            OwnedData::Bytes(bytes)
        })
    }

    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64> {
        let _share = self.enter(true).await?;
        let lock = self.inode_lock(ino);
        let _l = lock.lock().await;
        let i = self.inode(ino).await?;
        match i.kind {
            FileKind::Dir => return Err(FsError::IsDir),
            FileKind::Symlink => return Err(FsError::Invalid("write to a symlink".into())),
            FileKind::File => {}
        }
        let fp = self.inner.st.borrow().payload == PayloadMode::Fingerprint;
        let bs = BLOCK as u64;
        // Pages to put: (index, content).
        let mut pages: Vec<(u64, PageData)> = Vec::new();
        let len;
        match (&data, fp) {
            (OwnedData::Bytes(b), false) => {
                len = b.len() as u64;
                let mut pos = 0usize;
                let mut o = off;
                while pos < b.len() {
                    let idx = o / bs;
                    let in_page = (o % bs) as usize;
                    let n = (BLOCK - in_page).min(b.len() - pos);
                    let mut page = if n == BLOCK {
                        vec![0u8; BLOCK]
                    } else {
                        match self.read_page(ino, idx, Traffic::UserRead).await? {
                            PageData::Bytes(p) => p.into_vec(),
                            PageData::Fp(_) => unreachable!("full payload mode"),
                        }
                    };
                    page[in_page..in_page + n].copy_from_slice(&b[pos..pos + n]);
                    pages.push((idx, PageData::Bytes(page.into())));
                    pos += n;
                    o += n as u64;
                }
            }
            (_, true) => {
                if !off.is_multiple_of(bs) {
                    return Err(FsError::Invalid(format!(
                        "fingerprint payload: write at {off} is not 4 KiB aligned"
                    )));
                }
                let f: Vec<u64> = match &data {
                    OwnedData::Bytes(b) if b.len() % BLOCK == 0 => {
                        b.chunks(BLOCK).map(fingerprint).collect()
                    }
                    OwnedData::Bytes(_) => {
                        return Err(FsError::Invalid(
                            "fingerprint payload: writes must be whole 4 KiB blocks".into(),
                        ));
                    }
                    other => other.fingerprints(bs),
                };
                len = f.len() as u64 * bs;
                for (k, fpv) in f.into_iter().enumerate() {
                    pages.push((off / bs + k as u64, PageData::Fp(fpv)));
                }
            }
            (_, false) => {
                return Err(FsError::Invalid(
                    "full payload mode: write bytes, not fingerprints".into(),
                ));
            }
        }
        if len == 0 {
            return Ok(0);
        }
        if off
            .checked_add(len)
            .is_none_or(|e| slot_of(e.div_ceil(bs)).is_err())
        {
            return Err(FsError::TooLarge);
        }
        self.check_space(pages.len() as u64)?;
        self.cpu(self.inner.opts.host.copy_page.times(pages.len() as u64))
            .await;
        for (idx, data) in pages {
            self.dirty_page(ino, idx, data).await?;
        }
        self.ensure_node(ino as Nid).await?;
        let t = self.stamp();
        self.with_inode(ino, |x| {
            x.size = x.size.max(off + len);
            x.mtime = t;
            x.ctime = t;
        });
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        Ok(len)
    }

    async fn fsync(&self, ino: Ino, _datasync: bool) -> FsResult<()> {
        let share = self.enter(true).await?;
        let lock = self.inode_lock(ino);
        let l = lock.lock().await;
        let i = self.inode(ino).await?;
        self.write_inode_pages(ino, None).await?;
        // Pages the flusher (or a cleaning) took are written by it, and may not have reached
        // the device yet: wait for them too, as F2FS's fsync waits on every page of the file
        // under writeback (file_write_and_wait_range) before it writes the inode.
        self.wait_on_writeback(ino).await;
        // F2FS's rule: roll-forward can restore a regular file with one link whose directory
        // entry is recoverable from the inode; anything else needs a checkpoint. The name the
        // inode keeps must be its entry: after a hard link and the unlink of the first name it
        // names the removed entry (F2FS's "wrong pino" case, which also checkpoints), and
        // roll-forward would give that name back to this inode.
        let own_name = i.kind == FileKind::File
            && self.load_dir(i.parent as Ino).await.is_ok()
            && self
                .dir_entry(i.parent as Ino, &String::from_utf8_lossy(&i.name))
                .is_some_and(|(e, _)| e as Ino == ino);
        let needs_cp = {
            let st = self.inner.st.borrow();
            i.kind != FileKind::File
                || i.nlink != 1
                || !own_name
                || st.renamed_since_cp.contains(&ino)
                || st.created_since_cp.contains(&(i.parent as Ino))
        };
        if needs_cp {
            drop(l);
            drop(share);
            return self.checkpoint().await;
        }
        let superseded = self.write_nodes(Some(ino), true).await?;
        self.inner.dev.flush().await?;
        // The nodes are durable: roll-forward recovers them, not the copies they replaced.
        self.inner
            .st
            .borrow_mut()
            .segs
            .release_superseded(superseded);
        Ok(())
    }

    async fn sync(&self) -> FsResult<()> {
        drop(self.enter(true).await?);
        self.writeback(false).await?;
        self.checkpoint().await
    }

    fn statfs(&self) -> StatFs {
        let st = self.inner.st.borrow();
        let blocks = self.user_capacity(&st);
        let used = self.used_blocks(&st).min(blocks);
        let files = st.nat.entries.len() as u64;
        StatFs {
            block_size: BLOCK as u64,
            blocks,
            blocks_free: blocks - used,
            files,
            files_free: files.saturating_sub(st.nat.valid_nodes),
        }
    }
}

impl Fs {
    fn with_inode_if_resident(&self, ino: Ino, f: impl FnOnce(&mut InodeData)) {
        let mut st = self.inner.st.borrow_mut();
        if let Some(i) = st.cache.node_mut(ino as Nid).and_then(|n| n.inode_mut()) {
            f(i);
        }
    }

    /// Changes a file's size: shrinking frees blocks and zeroes the tail of the last page.
    async fn resize(&self, ino: Ino, i: &InodeData, size: u64) -> FsResult<()> {
        let bs = BLOCK as u64;
        if size < i.size {
            let keep = size.div_ceil(bs);
            self.truncate_blocks(ino, keep).await?;
            if !size.is_multiple_of(bs) {
                let idx = size / bs;
                let page = self.read_page(ino, idx, Traffic::UserRead).await?;
                if let PageData::Bytes(b) = page {
                    let mut v = b.into_vec();
                    v[(size % bs) as usize..].fill(0);
                    self.inner.st.borrow_mut().cache.put_page(
                        ino,
                        idx,
                        PageData::Bytes(v.into()),
                        true,
                    );
                }
            }
        } else if slot_of(size.div_ceil(bs)).is_err() {
            return Err(FsError::TooLarge);
        }
        self.ensure_node(ino as Nid).await?;
        self.with_inode(ino, |x| x.size = size);
        self.inner.st.borrow_mut().cache.dirty_node(ino as Nid);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 000 §4.1: IZC-H writes fully cached chunks from the host; IZC-D copies every chunk
    /// in the device; dirty blocks are the host's either way.
    #[test]
    fn the_host_writes_only_fully_cached_chunks() {
        use Holder::*;
        // Chunk 0 all cached, chunk 1 half cached, chunk 2 one dirty among device blocks,
        // chunk 3 cached and dirty.
        let blocks = [
            (0, HostClean),
            (0, HostClean),
            (1, HostClean),
            (1, Device),
            (2, Device),
            (2, HostDirty),
            (3, HostClean),
            (3, HostDirty),
        ];
        let host = written_by_host(CachedPages::Host, blocks.iter().copied());
        assert_eq!(host, [true, true, false, false, false, true, true, true]);
        let device = written_by_host(CachedPages::Device, blocks.iter().copied());
        assert_eq!(
            device,
            [false, false, false, false, false, true, false, true]
        );
    }
}
