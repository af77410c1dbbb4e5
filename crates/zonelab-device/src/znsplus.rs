//! The ZNS+ commands of seed 000 (Han et al., OSDI'21, §3.2, Table 1) on the zoned device:
//!
//! * `zone_compaction(source LBAs, destination LBAs)` (§3.2.1): an asynchronous in-storage copy.
//!   The device plans each destination chunk (one flash page of data, §2.1) on the flash
//!   timelines: a **copyback** when the whole chunk moves from one source chunk on the same
//!   chip (die and plane) and the data has not yet gone through `znsplus.copyback_limit`
//!   consecutive copybacks (§2.1), a flash **read + program** through the controller otherwise.
//!   Destinations may be non-contiguous: blocks the write pointer passes between them are
//!   padded (or, in a TL_opened zone, plugged with the zone's own data). Nothing else waits for
//!   the command: its chunk copies queue for their chips and start when a chip is idle, or in
//!   turn with normal requests when a chip is busy with those (the controller "can reorder
//!   normal requests to avoid the convoy effect"), so a normal request waits for at most one
//!   copy operation besides the one under way on its chip; reads of the
//!   destination blocks wait only until the write pointer has passed them (the copy of those
//!   blocks is in place); a write to the destination zone waits behind the copies queued to its
//!   flash blocks (a block's pages are programmed in order), queued with them
//!   ([`ZonedDevice::queue_program`]; its data in the write buffer if the write completed
//!   there, else outside it until its program starts), and zone management or TL_open of the
//!   zone starts all of them. The command completes when its last copy does, known once all
//!   have started: the host asks again until then ([`ZonedDevice::ticket_status`]), as for a
//!   write whose programs wait. Copies into a TL_opened zone are placed at once.
//! * `tl_open(zones, valid bitmaps)` (§3.2.2, Fig. 4): a Full zone is reopened for sparse
//!   sequential overwrite (threaded logging). The device gives it a LogFBG; blocks below the
//!   write pointer are read from the LogFBG, the others from the original FBG. The valid blocks
//!   the host skips are copied into the LogFBG by internal plugging: **LBA-ordered** at the
//!   write pointer (on demand when a write lands past it, or after every write with
//!   `znsplus.plugging = "lba"`), and with `"ppa"` **PPA-ordered** ahead of the write pointer,
//!   in the page order of each LogFBG block, in the background while the chip is idle. When the
//!   zone is full, finished or closed, every block is in the LogFBG, which replaces the
//!   original FBG (the original is freed for reuse).
//! * `identify_mapping` (§3.3.1): the FCG-ID and chip-ID bit fields of a logical chunk address.
//!
//! `znsplus.copyback = false` (§4 Fig. 7, "w/o cpbk") turns copyback off: every chunk of a
//! compaction or a plug is copied by read + program.
//!
//! Background plugging is found lazily: whenever the device acts at time `now` it first looks
//! at the time since it last looked and places the plugging a chip could have started while
//! idle (before `now`), so a plug never delays an operation planned before it. Fully valid
//! chunks are plugged ahead whole (by copyback, or read + program); of the first page of a
//! block that needs the host's data too, the valid blocks are read ahead into the controller,
//! and the write that completes the page merges them without a read.
//!
//! Power loss (without power-loss protection): a TL_opened zone falls back to its durable
//! prefix like any sequential zone, stays TL_opened (Closed, active) and keeps the valid blocks
//! past it, which are still in the original FBG; LogFBG pages past the prefix, plugged ones
//! included, are dropped and plugged again later. A zone whose LogFBG has replaced the original
//! (Full) counts as durable, as a finished zone does. Copies into any zone, and the plugging of
//! a TL_opened zone's valid blocks at its write pointer, are durable as their programs complete,
//! as written blocks are (the zone keeps its durable prefix, and a zone_compaction completes
//! only after its last program); a chunk plugged ahead joins the prefix when the write pointer
//! passes it. A Flush starts the queued copies and completes after them.

use crate::copy_queue::{BlockKey, CopyQueue, Queued};
use crate::payload::BlockCopy;
use crate::profile::Plugging;
use crate::status::NvmeStatus;
use crate::zns::{Completion, ZonedDevice};
use crate::zone::{Lba, ZoneId, ZoneSet, ZoneState, ZoneType};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use zonelab_flash::PageAddr;
use zonelab_sim::Nanos;

/// What the ZNS+ commands did, for reports (seed 000 Table 5, Fig. 11(b)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZnsPlusCounters {
    /// zone_compaction commands completed successfully.
    pub compactions: u64,
    /// Blocks they copied.
    pub compacted_blocks: u64,
    /// Chunks copied by copyback (compaction and plugging).
    pub copybacks: u64,
    /// Destination chunks filled with data copied by flash read + program.
    pub readprogram_copies: u64,
    /// Blocks copied by copyback (a whole chunk each time), and by read + program: the
    /// published ZNS+ F2FS counts its in-storage copies in blocks (debug.c's `DEV CPBK` and
    /// `DEV R/W`, `IM_cpbk_pages` and `IM_pages` in gc.c), so a partial chunk weighs its
    /// blocks, not a whole chunk (seed 000 Fig. 6 and 11(b) shares).
    #[serde(default)]
    pub copyback_blocks: u64,
    #[serde(default)]
    pub readprogram_blocks: u64,
    /// Whole-chunk same-chip copies done by read + program because the data had reached the
    /// consecutive-copyback limit.
    pub copyback_limit_hits: u64,
    /// Zones opened by TL_open.
    pub tl_opens: u64,
    /// Blocks plugged ahead of the write pointer while their chip was idle (PPA-ordered),
    /// and blocks of partly valid pages read ahead then (counted when the write pointer passes
    /// them: only the page's program was left for the write).
    pub plugged_blocks_background: u64,
    /// Blocks plugged at the write pointer (LBA-ordered: when the write pointer had to pass
    /// them, or right after a write).
    pub plugged_blocks_on_demand: u64,
}

/// A TL_opened zone (seed 000 §3.2.2). The zone mapping already points at the LogFBG.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct TlZone {
    /// The FBG that held the zone's data at TL_open (none if it held none); freed when the
    /// zone completes.
    orig_fbg: Option<u32>,
    /// Blocks of data the zone held at TL_open.
    extent: u64,
    /// Valid bitmap from the host, one bit per block of the zone's capacity.
    valid: Vec<u64>,
    /// LogFBG chunks programmed so far and when each program completes.
    done: BTreeMap<u64, Nanos>,
    /// When the LogFBG is erased and takes programs.
    ready: Nanos,
    /// Per parallel unit: the lowest chunk PPA-ordered plugging has not passed yet.
    next: Vec<u64>,
    /// Chunks whose valid blocks ahead of the write pointer PPA-ordered plugging has read into
    /// the controller (the next page of a LogFBG block, which waits for the host's data too),
    /// and when each read completes. Not kept in device images (nor across a power loss): a
    /// restored device reads them again when the write pointer passes.
    #[serde(skip)]
    read_ahead: BTreeMap<u64, Nanos>,
    /// Per parallel unit: the chunk at which PPA-ordered plugging waits for the host's data
    /// with nothing left to read ahead (until the programmed frontier passes it), so passes
    /// skip the unit without looking again. Dropped with `read_ahead`.
    #[serde(skip)]
    parked: Vec<Option<u64>>,
}

impl TlZone {
    fn is_valid(&self, off: u64) -> bool {
        off < self.extent && self.valid[(off / 64) as usize] >> (off % 64) & 1 == 1
    }

    fn chunk_fully_valid(&self, chunk: u64, lpc: u64) -> bool {
        (chunk * lpc..(chunk + 1) * lpc).all(|o| self.is_valid(o))
    }
}

/// ZNS+ state of the device (serialized last in device images, see
/// [`ZonedDevice::fields_added_since_image_v3`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ZnsPlus {
    pub(crate) tl: BTreeMap<u32, TlZone>,
    /// Consecutive copybacks the data now at (zone, chunk) went through (absent: none).
    pub(crate) copyback_runs: BTreeMap<(u32, u64), u32>,
    /// Per zone filled by in-device copies: `(from, to, t)`: blocks `from..to` (offsets in the
    /// zone) are in place at `t`, when the write pointer has passed them.
    pub(crate) wp_progress: BTreeMap<u32, Vec<(u64, u64, Nanos)>>,
    /// Entries pushed to `wp_progress` since it was last pruned, and how many there were
    /// after that pruning (see [`ZonedDevice::background_plugging`]).
    #[serde(skip)]
    pub(crate) wp_pushed: (usize, usize),
    /// Zones whose buffered partial chunk holds copied data: when it is all in the controller.
    pub(crate) tail_ready: BTreeMap<u32, Nanos>,
    /// When background plugging last looked for idle chips.
    pub(crate) last_pass: Nanos,
    pub(crate) counters: ZnsPlusCounters,
    /// Chunk copies of zone_compaction commands not yet started on the flash, in arrival
    /// order (see [`ZonedDevice::pump_copies`]). This and the fields below are not kept in
    /// device images: an image is written with every queued copy started
    /// ([`ZonedDevice::start_queued_copies`]).
    #[serde(skip)]
    pub(crate) copy_queue: CopyQueue<QueuedCopy>,
    /// Commands with flash operations still queued (zone_compaction copies, a write's programs
    /// behind them), by ticket.
    #[serde(skip)]
    pub(crate) pending: BTreeMap<u64, PendingCommand>,
    #[serde(skip)]
    pub(crate) next_ticket: u64,
    /// The ticket of the last command whose flash operations were queued, for its submitter.
    #[serde(skip)]
    pub(crate) last_ticket: Option<u64>,
    /// No queued copy can start before then (the earliest start the last pass found; new
    /// reservations only move starts later).
    #[serde(skip)]
    pub(crate) next_start: Nanos,
    /// Host data in the write buffer whose programs are queued (LBAs).
    #[serde(skip)]
    pub(crate) deferred_lbas: u64,
    /// Queued read-and-program copies whose data is being read into the write buffer (some
    /// of their reads placed): chunks of buffer they hold until their programs start.
    #[serde(skip)]
    pub(crate) staged_chunks: u64,
    /// Per die, when the last copy operation placed on it ends (see
    /// [`ZonedDevice::copy_turn`]).
    #[serde(skip)]
    pub(crate) copy_until: Vec<Nanos>,
}

impl ZnsPlus {
    /// A ticket for a command whose flash operations are queued.
    fn new_ticket(&mut self) -> u64 {
        self.next_ticket += 1;
        self.next_ticket - 1
    }
}

/// One destination chunk of a zone_compaction, or of a write behind one, waiting for its chips.
#[derive(Clone, Debug)]
pub(crate) struct QueuedCopy {
    /// Its place in arrival order.
    seq: u64,
    /// The command whose completion waits for it (none: a write that completed in the buffer).
    ticket: Option<u64>,
    zone: u32,
    chunk: u64,
    /// The destination blocks `from..to` of the zone it puts in place.
    from: u64,
    to: u64,
    /// Its first flash operation starts no earlier.
    earliest: Nanos,
    /// The die its destination page is on (copies to one block are programmed in order).
    die: zonelab_flash::DieId,
    op: CopyOp,
    /// Some of its reads are placed: its data takes room in the write buffer
    /// ([`ZnsPlus::staged_chunks`]).
    staged: bool,
}

/// How one destination chunk is filled.
#[derive(Clone, Debug)]
pub(crate) enum CopyOp {
    /// The whole chunk from one page on the same chip.
    Copyback { src: PageAddr, dst: PageAddr },
    /// Reads of the source pages (page, bytes) into the write buffer, `blocks` blocks in all;
    /// then the program of `dst` when this completes the chunk (else the chunk waits in the
    /// buffer for the rest of its data). A queued copy places its reads as their dies come
    /// free and drops them from `reads`; the data read so far (or read ahead by PPA-ordered
    /// plugging) is in the controller from `data_in` on.
    ReadProgram {
        reads: Vec<(PageAddr, u64)>,
        data_in: Nanos,
        blocks: u64,
        dst: Option<PageAddr>,
    },
    /// A host write's chunk, in the controller from `data_in` on, to be programmed at `dst`
    /// after the copies queued before it to the same flash block (pages are programmed in
    /// order): it waits for them, and they keep taking turns with normal requests instead of
    /// all going first (seed 000 §3.2.1, the convoy effect). It waits in the write buffer
    /// when the write completed there; when the write completes only as its pages are
    /// programmed, its `parked` LBAs of host data wait outside the buffer and enter it as the
    /// program starts ([`ZonedDevice::queue_program`]).
    Program {
        data_in: Nanos,
        dst: PageAddr,
        parked: Option<u64>,
    },
}

impl Queued for QueuedCopy {
    fn block(&self) -> BlockKey {
        (self.zone, self.die)
    }
    fn seq(&self) -> u64 {
        self.seq
    }
    fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }
}

impl QueuedCopy {
    /// Whether the copy's next flash operation is on `die` and could start by `by`: its
    /// copyback, one of its reads still to place, or its program once its data is in.
    fn next_op_on(&self, die: zonelab_flash::DieId, by: Nanos) -> bool {
        match &self.op {
            CopyOp::Copyback { dst, .. } => dst.block.die == die,
            CopyOp::ReadProgram { reads, .. } if !reads.is_empty() => {
                reads.iter().any(|(p, _)| p.block.die == die)
            }
            CopyOp::ReadProgram {
                dst: Some(_),
                data_in,
                ..
            }
            | CopyOp::Program { data_in, .. } => self.die == die && *data_in <= by,
            CopyOp::ReadProgram { dst: None, .. } => false,
        }
    }

    /// Whether it is a host write's program (not a copy).
    fn is_host_program(&self) -> bool {
        matches!(self.op, CopyOp::Program { .. })
    }

    /// Whether reads of the copy are still to be placed.
    fn has_reads(&self) -> bool {
        matches!(&self.op, CopyOp::ReadProgram { reads, .. } if !reads.is_empty())
    }
}

/// A command whose queued flash operations have not all started.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingCommand {
    /// Its chunk copies or programs still queued.
    left: u64,
    /// The flash blocks they were queued for.
    blocks: Vec<BlockKey>,
    /// When its last flash operation started so far completes.
    done: Nanos,
}

impl PendingCommand {
    /// One more operation queued for `block`.
    fn add(&mut self, block: BlockKey) {
        self.left += 1;
        if !self.blocks.contains(&block) {
            self.blocks.push(block);
        }
    }
}

/// What [`ZonedDevice::fill`] did.
struct Filled {
    /// When the last flash operation it placed completes.
    last: Nanos,
    /// Blocks already in place (plugged ahead into a LogFBG).
    in_place: u64,
    /// Blocks whose data PPA-ordered plugging had read ahead.
    read_ahead: u64,
}

/// Where the data of a block is when a copy needs it.
#[derive(Clone, Copy, Debug)]
enum Loc {
    /// Unwritten: zeros, made in the controller.
    Zero,
    /// In the controller's write buffer.
    Buffer,
    /// On flash: block `off` of `zone`, in chunk `chunk` at `page`.
    Flash {
        zone: u32,
        off: u64,
        chunk: u64,
        page: PageAddr,
    },
}

/// One zone of a TL_open command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlOpenZone {
    /// Start LBA of the zone (which must be Full).
    pub zslba: Lba,
    /// One entry per block of the zone's capacity: true for a valid block, which the host will
    /// skip and the device plugs.
    pub valid: Vec<bool>,
}

/// A bit field of an LBA: `bits` bits from bit `lsb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BitField {
    pub lsb: u32,
    pub bits: u32,
}

impl BitField {
    pub fn of(self, lba: u64) -> u64 {
        (lba >> self.lsb) & ((1u64 << self.bits) - 1)
    }
}

/// What identify_mapping returns (seed 000 §3.3.1, Fig. 1): how a logical chunk address
/// determines its flash chip. Two chunks with equal FCG ID and chip ID share a chip, so a copy
/// between them can be a copyback.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkMapping {
    /// LBAs per chunk (one flash page).
    pub lbas_per_chunk: u64,
    /// Zone size in LBAs.
    pub zone_size: u64,
    /// Flash chip groups: zone `i` is in group `i mod fcgs`.
    pub fcgs: u32,
    /// Chips (die and plane units) per group: chunk `j` of a zone is on chip `j mod chips`.
    pub chips: u32,
    /// The FCG ID field of an LBA, when `zone_size` and `fcgs` are powers of two.
    pub fcg_id: Option<BitField>,
    /// The chip ID field of an LBA, when `lbas_per_chunk` and `chips` are powers of two.
    pub chip_id: Option<BitField>,
}

impl ChunkMapping {
    /// (FCG ID, chip ID) of an LBA (by division, so also without bit fields).
    pub fn chip_of(&self, lba: Lba) -> (u32, u32) {
        let zone = lba.0 / self.zone_size;
        let chunk = lba.0 % self.zone_size / self.lbas_per_chunk;
        (
            (zone % self.fcgs as u64) as u32,
            (chunk % self.chips as u64) as u32,
        )
    }
}

fn field(lsb: u64, count: u64) -> Option<BitField> {
    (lsb.is_power_of_two() && count.is_power_of_two()).then(|| BitField {
        lsb: lsb.trailing_zeros(),
        bits: count.trailing_zeros(),
    })
}

/// The destinations of a zone_compaction in one zone, in order.
struct DstPlan {
    zone: u32,
    /// The zone's write pointer (offset) when the command arrived.
    from: u64,
    /// (destination offset, index into the command's lists).
    blocks: Vec<(u64, usize)>,
}

impl ZonedDevice {
    /// For readers of device images of formats 1 to 3: the field the device gained in format 4,
    /// at its default (no ZNS+ state). It is the last field of the device, so a format 3 body
    /// followed by its encoding (in this build's layout) is a current body.
    pub fn fields_added_since_image_v3() -> impl Serialize {
        ZnsPlus::default()
    }

    /// For readers of device images of format 4: the fields the device gained in format 5,
    /// at their defaults: the block counts of the ZNS+ counters (`copyback_blocks`,
    /// `readprogram_blocks`), the last fields of the counters, which are the last field of the
    /// ZNS+ state, the device's last field. So a format 4 body followed by their encoding is a
    /// format 5 body; the device counts copied blocks from then on.
    pub fn fields_added_since_image_v4() -> impl Serialize {
        let c = ZnsPlusCounters::default();
        (c.copyback_blocks, c.readprogram_blocks)
    }

    pub fn znsplus_counters(&self) -> ZnsPlusCounters {
        self.plus.counters
    }

    /// Whether a zone is TL_opened.
    pub fn is_tl_open(&self, zone: ZoneId) -> bool {
        self.plus.tl.contains_key(&zone.0)
    }

    /// identify_mapping (seed 000 §3.3.1): the chunk mapping the host needs for copyback-aware
    /// block allocation.
    pub fn identify_mapping(&mut self, now: Nanos, at: Nanos) -> (Completion, ChunkMapping) {
        let c = self.profile.controller;
        let at = at + c.sq_fetch.0;
        let m = self.chunk_mapping();
        let t = self.firmware.run(now, at, c.read_cost.0);
        let t = self
            .pcie
            .to_host(self.profile.controller.pcie_duplex, now, t, 64);
        (
            Completion {
                done: t + c.cq_post.0,
                status: Ok(None),
            },
            m,
        )
    }

    /// The chunk mapping identify_mapping reports (the paper's host asks once, at mount:
    /// "no additional inquiry is required at run time", §3.3.1).
    pub fn chunk_mapping(&self) -> ChunkMapping {
        let lpc = self.lbas_per_chunk.get();
        let zone_size = self.zones.geometry().zone_size;
        ChunkMapping {
            lbas_per_chunk: lpc,
            zone_size,
            fcgs: self.map.fcgs(),
            chips: self.map.width(),
            fcg_id: field(zone_size, self.map.fcgs() as u64),
            chip_id: field(lpc, self.map.width() as u64),
        }
    }

    /// Where block `off` of sequential `zone` is now.
    fn locate(&self, zone: u32, off: u64) -> Loc {
        let z = self.zones.zone(ZoneId(zone));
        let wp_off = z.wp.0 - z.start.0;
        let chunk = self.lbas_per_chunk.quotient(off);
        if let Some(tl) = self.plus.tl.get(&zone)
            && off >= wp_off
        {
            if off >= tl.extent {
                return Loc::Zero;
            }
            let page = if tl.done.contains_key(&chunk) {
                self.map.page_of(zone, chunk)
            } else {
                let orig = tl
                    .orig_fbg
                    .expect("a TL zone with data has its original FBG");
                self.map.page_in_fbg(zone, orig, chunk)
            };
            return Loc::Flash {
                zone,
                off,
                chunk,
                page,
            };
        }
        if off >= wp_off || self.map.fbg_of(zone).is_none() {
            return Loc::Zero;
        }
        let plugged = self
            .plus
            .tl
            .get(&zone)
            .is_some_and(|t| t.done.contains_key(&chunk));
        if chunk < self.progress[zone as usize].programmed_chunks || plugged {
            Loc::Flash {
                zone,
                off,
                chunk,
                page: self.map.page_of(zone, chunk),
            }
        } else {
            Loc::Buffer
        }
    }

    /// Writes blocks `from..from + locs.len()` of sequential `zone` (its write pointer is at
    /// `from`) with data found at `locs`, chunk by chunk: copyback for a whole chunk from one
    /// chunk on the same chip (within the consecutive-copyback limit), read into the write
    /// buffer and program otherwise. Moves the zone's programming progress at once (the zone
    /// state and stored data are the caller's). With `ticket` (a zone_compaction) and a zone
    /// not TL_opened, the chunk copies are queued for the chips ([`ZonedDevice::pump_copies`]);
    /// otherwise (plugging) they are placed on the flash timelines now, programs no earlier
    /// than `at`. Blocks of a TL_opened zone's own chunk that PPA-ordered plugging read ahead
    /// are not read again.
    fn fill(
        &mut self,
        now: Nanos,
        at: Nanos,
        zone: u32,
        from: u64,
        locs: &[Loc],
        ticket: Option<u64>,
    ) -> Filled {
        let lpc = self.lbas_per_chunk.get();
        let limit = self.profile.znsplus.copyback_limit;
        let copyback = self.profile.znsplus.copyback;
        let lba_size = self.lba_size;
        let z = zone as usize;
        let queued = ticket.filter(|_| !self.plus.tl.contains_key(&zone));
        if !self.profile.controller.power_loss_protection {
            // The copied blocks are durable as their programs complete
            // ([`ZonedDevice::note_copy_durable`]).
            self.track_sequential_write(now, ZoneId(zone), now);
        }
        let base = at.max(self.plus.tl.get(&zone).map_or(Nanos::ZERO, |t| t.ready));
        let mut off = from;
        let mut i = 0;
        let mut last = at;
        let mut passed = now;
        let mut in_place = 0;
        let mut read_ahead = 0;
        while i < locs.len() {
            let (c, k0) = self.lbas_per_chunk.div_rem(off);
            let n = ((lpc - k0) as usize).min(locs.len() - i);
            let seg = &locs[i..i + n];
            let plugged = self
                .plus
                .tl
                .get(&zone)
                .and_then(|t| t.done.get(&c).copied());
            let dst = self.map.page_of(zone, c);
            let op = if let Some(plugged_at) = plugged {
                // Plugged ahead of the write pointer (PPA-ordered): already in the LogFBG.
                assert!(
                    k0 == 0 && n as u64 == lpc,
                    "zone {zone}: the write pointer stops inside chunk {c}, which was plugged ahead"
                );
                if self.progress[z].programmed_chunks == c {
                    self.progress[z].programmed_chunks = c + 1;
                }
                self.note_copy_durable(zone, c, plugged_at);
                in_place += lpc;
                None
            } else {
                assert_eq!(
                    self.progress[z].programmed_chunks, c,
                    "zone {zone}: a copy must continue at the programmed frontier"
                );
                let whole = match seg[0] {
                    Loc::Flash {
                        zone: sz,
                        chunk: sc,
                        page,
                        ..
                    } if k0 == 0
                        && n as u64 == lpc
                        && seg.iter().enumerate().all(|(k, l)| {
                            matches!(*l, Loc::Flash { zone: lz, off: lo, .. }
                                if lz == sz && lo == sc * lpc + k as u64)
                        })
                        && self.map.same_chip(sz, sc, zone, c) =>
                    {
                        Some((sz, sc, page))
                    }
                    _ => None,
                };
                let run = whole.map_or(0, |(sz, sc, _)| {
                    self.plus.copyback_runs.get(&(sz, sc)).copied().unwrap_or(0)
                });
                Some(match whole {
                    Some((_, _, src)) if copyback && (limit == 0 || run < limit) => {
                        self.count_copyback(zone, c, run);
                        self.progress[z].programmed_chunks = c + 1;
                        CopyOp::Copyback { src, dst }
                    }
                    _ => {
                        if whole.is_some() && copyback {
                            self.plus.counters.copyback_limit_hits += 1;
                        }
                        // Read each source page once for the blocks it holds, but for the
                        // zone's own blocks of this chunk read ahead (still in the controller).
                        let ahead = self
                            .plus
                            .tl
                            .get(&zone)
                            .and_then(|t| t.read_ahead.get(&c).copied());
                        let mut reads = Vec::new();
                        let mut j = 0;
                        while j < n {
                            if let Loc::Flash {
                                page,
                                zone: lz,
                                chunk: lc,
                                ..
                            } = seg[j]
                            {
                                let mut m = 1;
                                while j + m < n
                                    && matches!(seg[j + m], Loc::Flash { page: p, .. } if p == page)
                                {
                                    m += 1;
                                }
                                if ahead.is_some() && lz == zone && lc == c {
                                    read_ahead += m as u64;
                                } else {
                                    reads.push((page, m as u64 * lba_size));
                                }
                                j += m;
                            } else {
                                j += 1;
                            }
                        }
                        let copied = seg.iter().filter(|l| !matches!(l, Loc::Zero)).count() as u64;
                        if copied > 0 {
                            self.plus.counters.readprogram_copies += 1;
                            self.plus.counters.readprogram_blocks += copied;
                        }
                        let completes = k0 + n as u64 == lpc;
                        if completes {
                            self.progress[z].programmed_chunks = c + 1;
                            self.plus.copyback_runs.remove(&(zone, c));
                            if let Some(t) = self.plus.tl.get_mut(&zone) {
                                t.read_ahead.remove(&c);
                            }
                        }
                        CopyOp::ReadProgram {
                            reads,
                            data_in: ahead.unwrap_or(Nanos::ZERO),
                            blocks: n as u64,
                            dst: completes.then_some(dst),
                        }
                    }
                })
            };
            let ready = match (op, queued) {
                (None, _) => plugged,
                (Some(op), Some(ticket)) => {
                    let die = dst.block.die;
                    self.plus.copy_queue.push(QueuedCopy {
                        seq: 0,
                        ticket: Some(ticket),
                        zone,
                        chunk: c,
                        from: off,
                        to: off + n as u64,
                        earliest: at,
                        die,
                        op,
                        staged: false,
                    });
                    self.plus
                        .pending
                        .entry(ticket)
                        .or_default()
                        .add((zone, die));
                    self.plus.next_start = self.plus.next_start.min(at);
                    None
                }
                (Some(op), None) => {
                    let (ready, end) = self.run_copy(now, at, base, zone, c, &op);
                    if let Some(end) = end {
                        self.note_copy_durable(zone, c, end);
                    }
                    // A chunk left in the buffer is done when its data is in.
                    last = last.max(end.unwrap_or(ready));
                    Some(ready)
                }
            };
            if let Some(ready) = ready {
                passed = passed.max(ready);
                if passed > now {
                    self.note_in_place(zone, off, off + n as u64, passed);
                }
            }
            self.progress[z].written += n as u64;
            off += n as u64;
            i += n;
        }
        Filled {
            last,
            in_place,
            read_ahead,
        }
    }

    /// Places the flash operations of chunk copy `op` into chunk `chunk` of `zone`: reads
    /// from `at`, the program or copyback from `base`. Returns when the chunk's data is in
    /// place for reads (in the write buffer or programmed), and when its last flash operation
    /// completes (none for a chunk left in the buffer).
    fn run_copy(
        &mut self,
        now: Nanos,
        at: Nanos,
        base: Nanos,
        zone: u32,
        chunk: u64,
        op: &CopyOp,
    ) -> (Nanos, Option<Nanos>) {
        match *op {
            CopyOp::Copyback { src, dst } => {
                let done = self.flash.copyback(now, base, src, dst);
                self.note_copy_op(dst.block.die, done);
                if let Some(t) = self.plus.tl.get_mut(&zone) {
                    t.done.insert(chunk, done);
                }
                (done, Some(done))
            }
            CopyOp::ReadProgram {
                ref reads,
                data_in,
                blocks,
                dst,
            } => {
                let in_buffer = self.read_into_buffer(now, at, reads, data_in, blocks);
                match dst {
                    Some(dst) => {
                        let tail = self.plus.tail_ready.remove(&zone).unwrap_or(Nanos::ZERO);
                        let done = self.program_chunk(
                            now,
                            in_buffer.max(tail).max(base),
                            zone,
                            chunk,
                            dst,
                        );
                        (in_buffer, Some(done))
                    }
                    None => {
                        let t = self.plus.tail_ready.entry(zone).or_insert(in_buffer);
                        *t = (*t).max(in_buffer);
                        (in_buffer, None)
                    }
                }
            }
            CopyOp::Program {
                data_in,
                dst,
                parked,
            } => {
                let lpc = self.lbas_per_chunk.get();
                let mut ready = base.max(data_in);
                if let Some(host) = parked {
                    ready = self.buffer.admit(ready, host);
                } else {
                    self.plus.deferred_lbas -= lpc;
                }
                // A chunk a copy queued before it left partly filled: its data read by then.
                let tail = self.plus.tail_ready.remove(&zone).unwrap_or(Nanos::ZERO);
                let done = self.program_chunk(now, ready.max(tail), zone, chunk, dst);
                (data_in, Some(done))
            }
        }
    }

    /// Without power-loss protection: chunk `chunk` of `zone`, which the write pointer has
    /// passed, is on flash at `done` (its copy's program, or its plugging ahead of the write
    /// pointer), and the zone's blocks before it once they are. Plugging ahead of the write
    /// pointer makes nothing durable by itself: the zone's prefix has not reached the chunk.
    pub(crate) fn note_copy_durable(&mut self, zone: u32, chunk: u64, done: Nanos) {
        if !self.profile.controller.power_loss_protection {
            self.track_program(ZoneId(zone), done, chunk);
        }
    }

    /// Reads `reads` (page, bytes) from `at` into the write buffer, with the data read before
    /// in the controller from `data_in` on: `blocks` blocks in all. Returns when they are in.
    fn read_into_buffer(
        &mut self,
        now: Nanos,
        at: Nanos,
        reads: &[(PageAddr, u64)],
        data_in: Nanos,
        blocks: u64,
    ) -> Nanos {
        let mut data_at = at.max(data_in);
        for &(page, bytes) in reads {
            data_at = data_at.max(self.copy_read(now, at, page, bytes));
        }
        self.buffer.admit(data_at, blocks)
    }

    /// Places a copy's read of `bytes` of `page` from `at`; returns when its data is in the
    /// controller.
    fn copy_read(&mut self, now: Nanos, at: Nanos, page: PageAddr, bytes: u64) -> Nanos {
        let done = self.flash.read(now, at, page, bytes);
        self.note_copy_op(page.block.die, done);
        done
    }

    /// Programs chunk `chunk` of `zone` at `dst` from the write buffer, no earlier than `at`,
    /// in its die's idle time (a copy the controller schedules, §3.2.1), and frees its buffer
    /// space then. Returns when the program completes.
    fn program_chunk(
        &mut self,
        now: Nanos,
        at: Nanos,
        zone: u32,
        chunk: u64,
        dst: PageAddr,
    ) -> Nanos {
        let done = self.flash.program_in_idle_time(now, at, dst);
        self.note_copy_op(dst.block.die, done);
        self.buffer.release_at(done, self.lbas_per_chunk.get());
        if let Some(t) = self.plus.tl.get_mut(&zone) {
            t.done.insert(chunk, done);
        }
        done
    }

    /// Counts a copyback into chunk `c` of `zone` of data that had gone through `run`
    /// consecutive copybacks.
    fn count_copyback(&mut self, zone: u32, c: u64, run: u32) {
        self.plus.copyback_runs.insert((zone, c), run + 1);
        self.plus.counters.copybacks += 1;
        self.plus.counters.copyback_blocks += self.lbas_per_chunk.get();
    }

    /// When the next flash operation of queued copy `q` could start at or after `from`
    /// without delaying anything placed: its copyback, the first of its reads still to
    /// place, or its program once its data is in (a chunk left in the buffer has none).
    fn copy_start(&self, q: &QueuedCopy, from: Nanos) -> Nanos {
        let t = self.flash.timing();
        match &q.op {
            CopyOp::Copyback { dst, .. } => {
                self.flash.die_free_span(dst.block.die, from, t.copyback)
            }
            CopyOp::ReadProgram { reads, .. } if !reads.is_empty() => reads
                .iter()
                .map(|(p, _)| self.flash.die_free_span(p.block.die, from, t.read))
                .min()
                .expect("not empty"),
            CopyOp::ReadProgram {
                dst: Some(_),
                data_in,
                ..
            }
            | CopyOp::Program { data_in, .. } => {
                self.flash
                    .die_free_span(q.die, from.max(*data_in), t.program)
            }
            CopyOp::ReadProgram { dst: None, .. } => from,
        }
    }

    /// Places, from `from`, the reads of queued copy `q` still to place that are on die
    /// `only` (any die with `None`) and whose die is free for them by `by`; its data is in
    /// the controller when they complete. The copy's program waits for its own die's turn.
    fn place_copy_reads(
        &mut self,
        now: Nanos,
        from: Nanos,
        q: &mut QueuedCopy,
        by: Nanos,
        only: Option<zonelab_flash::DieId>,
    ) {
        let CopyOp::ReadProgram { reads, data_in, .. } = &mut q.op else {
            return;
        };
        let t_read = self.flash.timing().read;
        let reads_before = reads.len();
        let mut left = Vec::new();
        for (page, bytes) in std::mem::take(reads) {
            let die = page.block.die;
            if only.is_some_and(|d| d != die) || self.flash.die_free_span(die, from, t_read) > by {
                left.push((page, bytes));
                continue;
            }
            *data_in = (*data_in).max(self.copy_read(now, from, page, bytes));
        }
        if !q.staged && left.len() < reads_before {
            q.staged = true;
            self.plus.staged_chunks += 1;
        }
        *reads = left;
    }

    /// Starts queued copy `q` at `from` or later (placing its flash operations; `now` is the
    /// time the timelines were last brought to, not after `from`).
    fn start_copy(&mut self, now: Nanos, from: Nanos, q: &QueuedCopy) {
        if q.staged {
            self.plus.staged_chunks -= 1;
        }
        let (ready, end) = self.run_copy(now, from, from, q.zone, q.chunk, &q.op);
        if let Some(end) = end {
            self.note_copy_durable(q.zone, q.chunk, end);
        }
        self.note_in_place(q.zone, q.from, q.to, ready);
        if let Some(ticket) = q.ticket {
            let p = self
                .plus
                .pending
                .get_mut(&ticket)
                .expect("a queued operation with a ticket belongs to a pending command");
            p.left -= 1;
            // A chunk left in the buffer is done when its data is in.
            p.done = p.done.max(end.unwrap_or(ready));
        }
    }

    /// The chips take queued compaction copies when idle (seed 000 §3.2.1: the controller
    /// schedules the copies and "can reorder normal requests to avoid the convoy effect"):
    /// called whenever the device acts at `now`, it places each flash operation of a queued
    /// chunk copy that could have started since the last call (`since`) and by `now` on an
    /// idle die: first the reads of read-and-program copies, as far as the write buffer has
    /// room for their data ([`ZonedDevice::copy_staging_room`]; each block's first copy, then
    /// each block's second, and so on), then, in arrival order, each copyback, and each
    /// program whose data is in. (Were a die's next program placed before a read another
    /// die's program waits for, that die would idle until the program is done; were every
    /// queued copy read first, the reads of copies far down the queue would fill the dies'
    /// gaps ahead of the programs waiting for the data of the first ones.) Each operation
    /// waits for its own die, so a host request arriving at `now` waits at most for the copy
    /// operations already under way on its chip, not for the whole command (a chip busy with
    /// normal requests gives the copies turns between them: [`ZonedDevice::copy_turn`]).
    /// Copies into one block keep their order (a copy waits behind an earlier one to the same
    /// zone and die). Like background plugging this is found lazily, which is close to but
    /// not the same as pumping at every time an operation could start: a pass places its
    /// interval's reads before its programs (pumping at each such time moved IZC-CUB on
    /// fileserver, 16 chips, from 250 to 236 MB/s on one seed, at twice the run time).
    pub(crate) fn pump_copies(&mut self, now: Nanos, since: Nanos) {
        if self.plus.copy_queue.is_empty() || now < self.plus.next_start {
            return;
        }
        let mut next = Nanos::MAX;
        // The reads first: a read waits for no other copy, and a program waits for its data.
        let mut queue = std::mem::take(&mut self.plus.copy_queue);
        let room = self.copy_staging_room();
        // Placing reads takes no operation off the queue: these stay the heads below.
        let mut fifos = queue.fifos_mut();
        let blocks: Vec<(u64, BlockKey)> = fifos
            .iter()
            .map(|(block, fifo)| (fifo.front().expect("no empty FIFO").seq(), *block))
            .collect();
        for depth in 0.. {
            let mut deeper = false;
            for (_, fifo) in fifos.iter_mut() {
                let Some(q) = fifo.get_mut(depth) else {
                    continue;
                };
                deeper = true;
                if !q.has_reads() || (!q.staged && self.plus.staged_chunks >= room) {
                    continue;
                }
                let from = q.earliest.max(since);
                self.place_copy_reads(since, from, q, now, None);
                if q.has_reads() {
                    // Behind their blocks' first operations, reads may go meanwhile.
                    next = next.min(self.copy_start(q, from));
                }
            }
            if !deeper || self.plus.staged_chunks >= room {
                break;
            }
        }
        // Then each block's first operation, oldest first; one that cannot start by `now`
        // holds its block back.
        let mut heads: BinaryHeap<Reverse<(u64, BlockKey)>> =
            blocks.into_iter().map(Reverse).collect();
        while let Some(Reverse((_, block))) = heads.pop() {
            let q = queue.head(block).expect("a queued head");
            let from = q.earliest.max(since);
            let s = self.copy_start(q, from);
            if s > now {
                next = next.min(s);
                continue;
            }
            let q = queue.pop_head(block).expect("a queued head");
            self.start_copy(since, from, &q);
            if let Some(h) = queue.head(block) {
                heads.push(Reverse((h.seq, block)));
            }
        }
        self.plus.copy_queue = queue;
        self.plus.next_start = next;
    }

    /// A copy's flash operation on `die` ends at `end`.
    fn note_copy_op(&mut self, die: zonelab_flash::DieId, end: Nanos) {
        let i = die.0 as usize;
        if self.plus.copy_until.len() <= i {
            self.plus.copy_until.resize(i + 1, Nanos::ZERO);
        }
        self.plus.copy_until[i] = self.plus.copy_until[i].max(end);
    }

    /// Before a normal flash operation of `duration` is placed on `die` from `at`: the die
    /// serves normal requests and queued zone_compaction copies in turn (round robin). If
    /// the operation must wait there, and the operation it would follow is a normal one (no
    /// copy operation on the die ends at or after the time it would start), the first queued
    /// copy whose next operation is on that die takes it ahead of it. So a normal request
    /// waits for at most one copy operation besides the one under way, as §3.2.1 of seed 000
    /// asks (the controller reorders normal requests to avoid the convoy effect), and a
    /// stream of normal requests to a busy die cannot pass a copy over for ever: without
    /// this, a copy started only when its die was idle.
    pub(crate) fn copy_turn(
        &mut self,
        now: Nanos,
        at: Nanos,
        die: zonelab_flash::DieId,
        duration: Nanos,
    ) {
        if self.plus.copy_queue.is_empty() {
            return;
        }
        let start = self.flash.die_free_span(die, at, duration);
        let last_copy = self.plus.copy_until.get(die.0 as usize).copied();
        if start <= at || last_copy.is_some_and(|t| t >= start) {
            return;
        }
        // Copies into one block keep their order: only the first queued of each (zone, die).
        let next = self
            .plus
            .copy_queue
            .heads()
            .into_iter()
            .find_map(|(_, block)| {
                let q = self.plus.copy_queue.head(block).expect("a queued head");
                (q.earliest <= start && q.next_op_on(die, start)).then_some(block)
            });
        if let Some(block) = next {
            let mut queue = std::mem::take(&mut self.plus.copy_queue);
            let q = queue.head_mut(block).expect("a queued head");
            let from = q.earliest.max(at);
            if q.has_reads() {
                // Its reads on this die; the rest wait for their own dies.
                self.place_copy_reads(now, from, q, Nanos::MAX, Some(die));
            } else {
                let q = queue.pop_head(block).expect("a queued head");
                self.start_copy(now, from, &q);
            }
            self.plus.copy_queue = queue;
            self.plus.next_start = Nanos::ZERO;
        }
    }

    /// Starts at once (from `now`, ahead of the chips' turn) the queued copies into `zone`
    /// (every zone with `None`) at blocks below `below`: a command needs them in place (a
    /// read of those blocks, which the write pointer must have passed, zone management, a
    /// power loss).
    pub(crate) fn force_copies(&mut self, now: Nanos, zone: Option<u32>, below: u64) {
        self.force_copies_where(now, |q| zone.is_none_or(|z| z == q.zone) && q.from < below);
    }

    /// Before a write of `nlb` blocks at zone offset `off` of `zone` on a drive without
    /// power-loss protection (whose writes' durability is tracked as their programs are
    /// placed, so they cannot wait in the queue): starts at once the zone's queued copies to
    /// the dies the write's chunks are programmed on, since a page is programmed after the
    /// pages before it in its flash block (and a chunk a copy left partly filled is completed
    /// by this write). The zone's copies to other dies stay queued; the write's blocks are
    /// durable only once theirs are too (the durable part of a zone is a prefix).
    pub(crate) fn force_copies_before_write(&mut self, now: Nanos, zone: u32, off: u64, nlb: u64) {
        if !self.plus.copy_queue.has_zone(zone) {
            return;
        }
        let lpc = self.lbas_per_chunk.get();
        let first = off / lpc;
        let chunks = (off + nlb.max(1)).div_ceil(lpc) - first;
        let dies: Vec<zonelab_flash::DieId> = (first..first + chunks.min(self.map.width() as u64))
            .map(|c| self.map.die_of(zone, c))
            .collect();
        self.force_copies_where(now, |q| q.zone == zone && dies.contains(&q.die));
    }

    /// Starts at once the queued copies `pick` selects: first the reads of the read-and-program
    /// ones, each where its die is free, then each copy's program or copyback, in queue order,
    /// a normal read's turn apart on a die that is still busy with a copy (a die that no read
    /// comes to idles for it).
    /// The reads are short and a program waits for its data: a read placed behind another
    /// copy's program on its die would leave the destination die idle until that program is
    /// done, so the controller reads the batch ahead, as the chips do for queued copies
    /// ([`ZonedDevice::pump_copies`]).
    fn force_copies_where(&mut self, now: Nanos, pick: impl Fn(&QueuedCopy) -> bool) {
        if self.plus.copy_queue.is_empty() {
            return;
        }
        let mut picked = self.plus.copy_queue.take_where(pick);
        for q in &mut picked {
            let from = q.earliest.max(now);
            self.place_copy_reads(now, from, q, Nanos::MAX, None);
        }
        // Between two of them on a die, a normal read's turn (§3.2.1: a normal request waits
        // for at most one copy operation besides the one under way, as `copy_turn` gives the
        // queued copies): otherwise a read arriving later would wait for the whole chain.
        let t = self.flash.timing();
        let turn = t.read + t.page_transfer;
        for q in picked {
            let mut from = q.earliest.max(now);
            if let Some(&last) = self.plus.copy_until.get(q.die.0 as usize)
                && last > now
            {
                from = from.max(last + turn);
            }
            self.start_copy(now, from, &q);
        }
        self.plus.next_start = Nanos::ZERO;
    }

    /// The device acts at `now` with no command: the chips take the queued copies they could
    /// have started by then ([`ZonedDevice::pump_copies`]) and plug in the background.
    pub fn settle(&mut self, now: Nanos) {
        self.background_plugging(now);
    }

    /// The completion of the command with queued operations `ticket` when no other command
    /// reaches the device meanwhile: it settles at each time one can start until all have.
    pub fn ticket_completion(&mut self, ticket: u64) -> Nanos {
        loop {
            match self.ticket_status(ticket) {
                Ok(done) => return done,
                Err(t) => {
                    let t = t.max(self.plus.last_pass);
                    self.settle(t);
                }
            }
        }
    }

    /// Whether zone_compaction copies (or writes behind them) wait for their chips: a write
    /// may then complete only as they go.
    pub fn has_queued_copies(&self) -> bool {
        !self.plus.copy_queue.is_empty()
    }

    /// Starts every queued copy now (from when the device last acted), as before writing a
    /// device image, which keeps no queue.
    pub fn start_queued_copies(&mut self) {
        let now = self.plus.last_pass;
        self.force_copies(now, None, u64::MAX);
    }

    /// The ticket of the command just submitted (a zone_compaction, or a write) if flash
    /// operations it completes after were queued (its completion then comes from
    /// [`ZonedDevice::ticket_status`]).
    pub fn take_ticket(&mut self) -> Option<u64> {
        self.plus.last_ticket.take()
    }

    /// The completion of a command with queued operations: `Ok(done)` once all have started
    /// (their completions known), else `Err(next)`: act again then ([`ZonedDevice::settle`]).
    /// `next` is the earliest time the last of them could start (none starts before its die
    /// is free, nor before any queued operation could), so the completion, which follows the
    /// last start, is never found late.
    pub fn ticket_status(&mut self, ticket: u64) -> Result<Nanos, Nanos> {
        match self.plus.pending.get(&ticket) {
            // Not known (dropped by a power loss): nothing to wait for.
            None => Ok(Nanos::ZERO),
            Some(p) if p.left == 0 => {
                let done = p.done + self.profile.controller.cq_post.0;
                self.plus.pending.remove(&ticket);
                Ok(done)
            }
            Some(p) => {
                let since = self.plus.last_pass;
                let last_start = p
                    .blocks
                    .iter()
                    .flat_map(|&b| self.plus.copy_queue.block_ops(b))
                    .filter(|q| q.ticket == Some(ticket))
                    .map(|q| self.copy_start(q, q.earliest.max(since)))
                    .max()
                    .unwrap_or(Nanos::ZERO);
                Err(self.plus.next_start.max(last_start))
            }
        }
    }

    /// Blocks `from..to` of `zone`, filled by a copy, are in place for reads at `t`.
    fn note_in_place(&mut self, zone: u32, from: u64, to: u64, t: Nanos) {
        self.plus
            .wp_progress
            .entry(zone)
            .or_default()
            .push((from, to, t));
        self.plus.wp_pushed.0 += 1;
    }

    /// When the blocks of `zone` below `hi` are in place for a read: the write pointer has
    /// passed them (every copy to the blocks before them is done).
    pub(crate) fn copy_wait(&self, zone: u32, hi: u64) -> Nanos {
        self.plus.wp_progress.get(&zone).map_or(Nanos::ZERO, |v| {
            v.iter()
                .filter(|&&(a, _, _)| a < hi)
                .map(|&(_, _, t)| t)
                .max()
                .unwrap_or(Nanos::ZERO)
        })
    }

    /// zone_compaction (seed 000 §3.2.1): copies block `src[i]` to `dst[i]` for every `i`.
    ///
    /// Sources must hold data (written blocks of sequential zones). In each destination zone the
    /// destinations must rise and start at or after the write pointer; the write pointer moves
    /// past the last one, padding the blocks it skips (in a TL_opened zone those are plugged
    /// with the zone's own data, and destinations must be blocks the valid bitmap marks
    /// invalid). Errors (nothing changes): lists empty or of different lengths, a source
    /// without data or in a conventional zone, a conventional destination: Invalid Field in
    /// Command; past the namespace: LBA Out of Range; destinations that fall or lie behind the
    /// write pointer: Zone Invalid Write; and the write errors of the destination zones (Zone Is
    /// Full, Zone Boundary Error, Too Many Active/Open Zones, ...).
    ///
    /// The command completes when its last copy is programmed (or, for a chunk it leaves
    /// partly filled in the write buffer, read into it); it is asynchronous for the host
    /// (other commands do not wait for it) and only blocks reads of its own destinations until
    /// the write pointer has passed them.
    pub fn zone_compaction(
        &mut self,
        now: Nanos,
        at: Nanos,
        src: &[Lba],
        dst: &[Lba],
    ) -> Completion {
        self.background_plugging(now);
        let c = self.profile.controller;
        let at = at + c.sq_fetch.0;
        let (zs, plans) = match self.plan_compaction(src, dst) {
            Ok(p) => p,
            Err((s, _)) => return self.error(now, at, c.write_cost.0, s),
        };
        let t = self.firmware.run(now, at, c.write_cost.0);
        let t = self.pcie.to_device(now, t, 16 * src.len() as u64);
        let zdiv = self.zones.zone_div();
        // Data and locations as the command found them.
        let split = |l: Lba| {
            let (z, off) = zdiv.div_rem(l.0);
            (z as u32, off)
        };
        let snaps: Vec<BlockCopy> = src
            .iter()
            .map(|&l| {
                let (z, off) = split(l);
                self.data.snapshot(z, off)
            })
            .collect();
        let src_locs: Vec<Loc> = src
            .iter()
            .map(|&l| {
                let (z, off) = split(l);
                self.locate(z, off)
            })
            .collect();
        let mut fills = Vec::new();
        for p in &plans {
            let end = p.blocks.last().expect("a plan has blocks").0 + 1;
            let tl = self.plus.tl.contains_key(&p.zone);
            let mut locs = Vec::with_capacity((end - p.from) as usize);
            let mut k = 0;
            for off in p.from..end {
                if p.blocks[k].0 == off {
                    locs.push(src_locs[p.blocks[k].1]);
                    k += 1;
                } else if tl {
                    locs.push(self.locate(p.zone, off));
                } else {
                    locs.push(Loc::Zero);
                }
            }
            fills.push(locs);
        }
        self.zones = zs;
        let ticket = self.plus.new_ticket();
        let mut done = t;
        for (p, locs) in plans.iter().zip(fills) {
            let tl = self.plus.tl.contains_key(&p.zone);
            let mut k = 0;
            for off in p.from..p.from + locs.len() as u64 {
                if p.blocks[k].0 == off {
                    self.data.put(p.zone, off, &snaps[p.blocks[k].1]);
                    k += 1;
                } else if !tl || off >= self.data.seq_len(p.zone) {
                    self.data.put(p.zone, off, &BlockCopy::Zero);
                }
            }
            let ready = self.ensure_mapped(now, t, ZoneId(p.zone));
            let f = self.fill(now, ready, p.zone, p.from, &locs, Some(ticket));
            if tl {
                self.count_plugged(locs.len() as u64 - p.blocks.len() as u64, &f);
                self.tl_complete_if_full(p.zone);
            }
            done = done.max(f.last);
        }
        self.plus.counters.compactions += 1;
        self.plus.counters.compacted_blocks += src.len() as u64;
        if self.plus.pending.contains_key(&ticket) {
            return self.queued_completion(now, ticket, done, Ok(None));
        }
        Completion {
            done: done + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// The completion of command `ticket`, whose flash operations not queued complete by
    /// `done`, with `status`: the completion comes when its last queued operation has started;
    /// until then the submitter asks again from the earliest time one could start
    /// ([`ZonedDevice::ticket_status`]).
    pub(crate) fn queued_completion(
        &mut self,
        now: Nanos,
        ticket: u64,
        done: Nanos,
        status: Result<Option<Lba>, NvmeStatus>,
    ) -> Completion {
        let p = self
            .plus
            .pending
            .get_mut(&ticket)
            .expect("a ticket handed out is pending");
        p.done = p.done.max(done);
        self.plus.last_ticket = Some(ticket);
        self.pump_copies(now, now);
        Completion {
            done: self.plus.next_start.max(now),
            status,
        }
    }

    /// Whether a program to `die` in `zone` must wait for operations queued to the same flash
    /// block (a zone has one block per die).
    pub(crate) fn queued_before(&self, zone: u32, die: zonelab_flash::DieId) -> bool {
        self.plus.copy_queue.has_block((zone, die))
    }

    /// Queues the program of chunk `chunk` of `zone` at `dst`, a host write's data in the
    /// controller from `data_in`, behind the operations queued to its flash block. With
    /// `completes` (writes complete when programmed), the write's completion waits for it (the
    /// write's ticket, made by its first queued program, is then
    /// [`ZonedDevice::take_ticket`]'s) and its data waits outside the write buffer; else in it.
    pub(crate) fn queue_program(
        &mut self,
        zone: u32,
        chunk: u64,
        data_in: Nanos,
        dst: PageAddr,
        completes: bool,
    ) {
        let ticket = completes.then(|| match self.plus.last_ticket {
            Some(t) => t,
            None => {
                let t = self.plus.new_ticket();
                self.plus.last_ticket = Some(t);
                t
            }
        });
        if let Some(t) = ticket {
            self.plus
                .pending
                .entry(t)
                .or_default()
                .add((zone, dst.block.die));
        }
        let lpc = self.lbas_per_chunk.get();
        // Without a write-back buffer (the write completes when programmed, as in the authors'
        // FEMU, which keeps the data of commands in its own memory) nothing needs the data in
        // the buffer before the program: the host's part of the chunk leaves the buffer's
        // room free until then, so host data waiting behind copies neither fills the buffer
        // nor makes the controller start the copies ahead of their turn to drain it
        // ([`ZonedDevice::make_room_in_buffer`]). What queued copies put in the chunk
        // enters the buffer when they start.
        let parked = completes.then(|| {
            let from_copies: u64 = self
                .plus
                .copy_queue
                .block_ops((zone, dst.block.die))
                .filter(|q| q.chunk == chunk)
                .map(|q| match q.op {
                    CopyOp::ReadProgram {
                        dst: None, blocks, ..
                    } => blocks,
                    _ => 0,
                })
                .sum();
            assert!(
                from_copies < lpc,
                "a host write fills part of every chunk it queues"
            );
            lpc - from_copies
        });
        if let Some(host) = parked {
            self.buffer.release_at(data_in, host);
        } else {
            self.plus.deferred_lbas += lpc;
        }
        self.plus.copy_queue.push(QueuedCopy {
            seq: 0,
            ticket,
            zone,
            chunk,
            from: chunk * lpc,
            to: (chunk + 1) * lpc,
            earliest: data_in,
            die: dst.block.die,
            op: CopyOp::Program {
                data_in,
                dst,
                parked,
            },
            staged: false,
        });
        self.plus.next_start = self.plus.next_start.min(data_in);
    }

    /// Starts at once the queued host programs, with the operations queued before them to
    /// their flash blocks: a flush waits for the buffer to drain.
    pub(crate) fn force_queued_programs(&mut self, now: Nanos) {
        if self.plus.deferred_lbas == 0 {
            return;
        }
        // Per block, the arrival of its last queued host program.
        let mut last: BTreeMap<BlockKey, u64> = BTreeMap::new();
        for q in self.plus.copy_queue.iter() {
            if q.is_host_program() {
                let seq = last.entry(q.block()).or_default();
                *seq = (*seq).max(q.seq);
            }
        }
        self.force_copies_where(now, |q| last.get(&q.block()).is_some_and(|&s| q.seq <= s));
    }

    /// Before a write of `lbas` is admitted to the write buffer: while host data waiting
    /// behind queued copies would leave too little room, the oldest queued host program starts
    /// at once, with the operations queued before it to its flash block (the controller drains
    /// the buffer; [`ZonedDevice::buffer_room_for_queued`]). The operations queued after it
    /// keep waiting for their turn.
    pub(crate) fn make_room_in_buffer(&mut self, now: Nanos, lbas: u64) {
        let room = self.buffer_room_for_queued();
        while self.plus.deferred_lbas + lbas > room {
            let Some((block, seq)) = self
                .plus
                .copy_queue
                .iter()
                .filter(|q| q.is_host_program())
                .min_by_key(|q| q.seq)
                .map(|q| (q.block(), q.seq))
            else {
                return;
            };
            self.force_copies_where(now, |q| q.block() == block && q.seq <= seq);
        }
    }

    /// The write buffer's room (LBAs) for data that waits for queued flash operations: host
    /// data behind queued copies and the data copies read ahead. The rest is what the profile
    /// requires of the buffer besides: a partly filled page per active zone and two pages in
    /// flight.
    fn buffer_room_for_queued(&self) -> u64 {
        let kept = self.profile.write_buffer_reserve_pages() * self.lbas_per_chunk.get();
        self.buffer.capacity().saturating_sub(kept)
    }

    /// Chunks of copy data the controller may read ahead for queued read-and-program copies:
    /// what the buffer's room leaves besides the host data waiting behind copies. A real
    /// controller reads a copy's source pages into its buffer and holds them until the
    /// program; reading every queued copy's pages at once would need a buffer as large as
    /// the compaction, and would put all the reads ahead of the programs that wait for them.
    fn copy_staging_room(&self) -> u64 {
        self.buffer_room_for_queued()
            .saturating_sub(self.plus.deferred_lbas)
            / self.lbas_per_chunk.get()
    }

    /// Why the device would refuse zone_compaction from `src` to `dst` (the NVMe status it
    /// returns and, for the user, which block breaks which rule), or None if it would accept
    /// it. Changes nothing.
    pub fn compaction_refusal(&self, src: &[Lba], dst: &[Lba]) -> Option<(NvmeStatus, String)> {
        self.plan_compaction(src, dst).err()
    }

    /// Checks a zone_compaction without changing anything: the zone set after it, and the
    /// destinations per zone; or the status it fails with and why.
    fn plan_compaction(
        &self,
        src: &[Lba],
        dst: &[Lba],
    ) -> Result<(ZoneSet, Vec<DstPlan>), (NvmeStatus, String)> {
        let refuse = |s: NvmeStatus, why: String| Err((s, why));
        if src.is_empty() || src.len() != dst.len() {
            return refuse(
                NvmeStatus::InvalidFieldInCommand,
                format!(
                    "{} source and {} destination blocks: give one destination per source block, at least one",
                    src.len(),
                    dst.len()
                ),
            );
        }
        let total = self.zones.total_lbas();
        if let Some(l) = src.iter().chain(dst).find(|l| l.0 >= total) {
            return refuse(
                NvmeStatus::LbaOutOfRange,
                format!("LBA {:#x} is past the namespace's {total} LBAs", l.0),
            );
        }
        let zdiv = self.zones.zone_div();
        for &l in src {
            let (zi, off) = zdiv.div_rem(l.0);
            let z = self.zones.zone(ZoneId(zi as u32));
            match (z.ztype, z.state) {
                (ZoneType::Conventional, _) => {
                    return refuse(
                        NvmeStatus::InvalidFieldInCommand,
                        format!(
                            "source LBA {:#x} is in conventional zone {zi}: zone_compaction copies between sequential zones",
                            l.0
                        ),
                    );
                }
                (_, ZoneState::Offline) => {
                    return refuse(
                        NvmeStatus::ZoneIsOffline,
                        format!("source LBA {:#x} is in offline zone {zi}", l.0),
                    );
                }
                _ => {}
            }
            let written = self.data.seq_len(zi as u32);
            if off >= written {
                return refuse(
                    NvmeStatus::InvalidFieldInCommand,
                    format!(
                        "source LBA {:#x} holds no data: zone {zi} has {written} blocks written, and it is block {off}",
                        l.0
                    ),
                );
            }
        }
        let mut plans: Vec<DstPlan> = Vec::new();
        for (i, &l) in dst.iter().enumerate() {
            let (zi, off) = zdiv.div_rem(l.0);
            let zone = zi as u32;
            match plans.iter_mut().find(|p| p.zone == zone) {
                Some(p) => p.blocks.push((off, i)),
                None => {
                    let z = self.zones.zone(ZoneId(zone));
                    plans.push(DstPlan {
                        zone,
                        from: z.wp.0 - z.start.0,
                        blocks: vec![(off, i)],
                    })
                }
            }
        }
        let mut zs = self.zones.clone();
        for p in &plans {
            let z = zs.zone(ZoneId(p.zone)).clone();
            let zi = p.zone;
            let state = |s: NvmeStatus, what: &str| {
                refuse(
                    s,
                    format!(
                        "destination zone {zi} is {what}: it takes no copies (see report-zones)"
                    ),
                )
            };
            match (z.ztype, z.state) {
                (ZoneType::Conventional, _) => {
                    return refuse(
                        NvmeStatus::InvalidFieldInCommand,
                        format!(
                            "destination zone {zi} is conventional: zone_compaction copies between sequential zones"
                        ),
                    );
                }
                (_, ZoneState::Full) => return state(NvmeStatus::ZoneIsFull, "full"),
                (_, ZoneState::ReadOnly) => return state(NvmeStatus::ZoneIsReadOnly, "read-only"),
                (_, ZoneState::Offline) => return state(NvmeStatus::ZoneIsOffline, "offline"),
                _ => {}
            }
            if p.blocks[0].0 < p.from {
                return refuse(
                    NvmeStatus::ZoneInvalidWrite,
                    format!(
                        "destination LBA {:#x} is below zone {zi}'s write pointer ({:#x}): destinations start at or after it",
                        z.start.0 + p.blocks[0].0,
                        z.wp.0
                    ),
                );
            }
            if let Some(w) = p.blocks.windows(2).find(|w| w[1].0 <= w[0].0) {
                return refuse(
                    NvmeStatus::ZoneInvalidWrite,
                    format!(
                        "destinations in zone {zi} must rise: LBA {:#x} comes after {:#x}",
                        z.start.0 + w[1].0,
                        z.start.0 + w[0].0
                    ),
                );
            }
            if let Some(tl) = self.plus.tl.get(&p.zone)
                && let Some(&(off, _)) = p.blocks.iter().find(|&&(off, _)| tl.is_valid(off))
            {
                return refuse(
                    NvmeStatus::ZoneInvalidWrite,
                    format!(
                        "destination LBA {:#x} is a valid block of TL_opened zone {zi}, which threaded logging keeps",
                        z.start.0 + off
                    ),
                );
            }
            let end = p.blocks.last().expect("not empty").0 + 1;
            if let Err(s) = zs.write(z.wp, end - p.from, false) {
                return refuse(
                    s,
                    format!(
                        "zone {zi} cannot take {} more blocks from its write pointer: {}",
                        end - p.from,
                        s.hint()
                    ),
                );
            }
        }
        Ok((zs, plans))
    }

    /// TL_open (seed 000 §3.2.2): opens Full zones for threaded logging with their valid
    /// bitmaps. Each zone gets a LogFBG (erased if it holds old data) and its write pointer goes
    /// back to the zone start; it counts as explicitly opened. Errors (nothing changes): no
    /// zones, a zone listed twice, a bitmap not of the zone capacity, a conventional zone:
    /// Invalid Field in Command; not a zone start: Invalid Field in Command / LBA Out of Range;
    /// a zone not Full: Invalid Zone State Transition; open/active limits: Too Many Open / Too
    /// Many Active Zones, also when a chip group has no free FBG left for a LogFBG.
    pub fn tl_open(&mut self, now: Nanos, at: Nanos, zones: &[TlOpenZone]) -> Completion {
        self.background_plugging(now);
        for z in zones {
            if !self.plus.copy_queue.is_empty()
                && let Ok(id) = self.zones.zone_of(z.zslba)
            {
                self.force_copies(now, Some(id.0), u64::MAX);
            }
        }
        let c = self.profile.controller;
        let at = at + c.sq_fetch.0;
        let cost = c.open_cost.0.times(zones.len().max(1) as u64);
        let (zs, ids) = match self.plan_tl_open(zones) {
            Ok(p) => p,
            Err(s) => return self.error(now, at, cost, s),
        };
        let t = self.firmware.run(now, at, cost);
        let bitmap_bytes: u64 = zones.iter().map(|z| z.valid.len().div_ceil(8) as u64).sum();
        let t = self.pcie.to_device(now, t, bitmap_bytes);
        let extents: Vec<u64> = ids.iter().map(|id| self.zones.zone(*id).written).collect();
        self.zones = zs;
        let width = self.map.width() as u64;
        for ((id, z), extent) in ids.iter().zip(zones).zip(extents) {
            let zone = id.0;
            let log = self.map.take_log_fbg(zone).expect("free FBGs were checked");
            let mut ready = t;
            for b in self.map.blocks_of_fbg(self.map.fcg_of(zone), log) {
                if self.flash.programmed_pages(b) > 0 {
                    ready = ready.max(self.flash.erase(now, t, b));
                }
            }
            // A zone finished empty holds no FBG: it is mapped afresh (its blocks erased if a
            // reset zone left them programmed), with nothing to plug.
            let orig_fbg = match self.map.fbg_of(zone) {
                Some(_) => Some(self.map.swap_fbg(zone, log)),
                None => {
                    self.map.release_fbg(zone, log);
                    ready = ready.max(self.map_zone(now, t, ZoneId(zone)));
                    None
                }
            };
            self.progress[zone as usize] = Default::default();
            self.durability.seq.forget(zone);
            self.plus.tail_ready.remove(&zone);
            self.plus.wp_progress.remove(&zone);
            let mut valid = vec![0u64; z.valid.len().div_ceil(64)];
            for (k, &v) in z.valid.iter().enumerate() {
                if v {
                    valid[k / 64] |= 1 << (k % 64);
                }
            }
            self.plus.tl.insert(
                zone,
                TlZone {
                    orig_fbg,
                    extent,
                    valid,
                    done: BTreeMap::new(),
                    ready,
                    next: (0..width).collect(),
                    read_ahead: BTreeMap::new(),
                    parked: Vec::new(),
                },
            );
            self.counters.zone_opens += 1;
            self.plus.counters.tl_opens += 1;
            self.lba_ordered_plugging(now, t, zone);
        }
        Completion {
            done: t + c.cq_post.0,
            status: Ok(None),
        }
    }

    fn plan_tl_open(&self, zones: &[TlOpenZone]) -> Result<(ZoneSet, Vec<ZoneId>), NvmeStatus> {
        if zones.is_empty() {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        let mut zs = self.zones.clone();
        let mut ids: Vec<ZoneId> = Vec::new();
        let mut per_fcg: BTreeMap<u32, usize> = BTreeMap::new();
        for z in zones {
            let id = zs.zone_at_start(z.zslba)?;
            let zone = zs.zone(id);
            if zone.ztype == ZoneType::Conventional
                || ids.contains(&id)
                || z.valid.len() as u64 != zone.capacity
            {
                return Err(NvmeStatus::InvalidFieldInCommand);
            }
            zs.reopen_for_overwrite(id)?;
            let fcg = self.map.fcg_of(id.0);
            let need = per_fcg.entry(fcg).or_default();
            *need += 1;
            if *need > self.map.free_fbgs(fcg) {
                return Err(NvmeStatus::TooManyActiveZones);
            }
            ids.push(id);
        }
        Ok((zs, ids))
    }

    /// A write of `nlb` blocks at `slba` (an append when `append`) to a TL_opened zone: checks
    /// it is sparse sequential (at or after the write pointer, only on blocks the valid bitmap
    /// marks invalid, Zone Invalid Write otherwise; within the capacity, Zone Boundary Error
    /// otherwise) and plugs the blocks it skips (LBA-ordered, on demand). Other zones: nothing.
    pub(crate) fn tl_before_write(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        nlb: u64,
        append: bool,
    ) -> Result<(), NvmeStatus> {
        let Ok(id) = self.zones.zone_of(slba) else {
            return Ok(());
        };
        let Some(tl) = self.plus.tl.get(&id.0) else {
            return Ok(());
        };
        let z = self.zones.zone(id);
        if z.state == ZoneState::ReadOnly {
            return Err(NvmeStatus::ZoneIsReadOnly);
        }
        let wp_off = z.wp.0 - z.start.0;
        let off = if append { wp_off } else { slba.0 - z.start.0 };
        if append && slba != z.start {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        if off < wp_off {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if off + nlb > z.capacity {
            return Err(NvmeStatus::ZoneBoundaryError);
        }
        if (off..off + nlb).any(|o| tl.is_valid(o)) {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if off > wp_off {
            self.plug_to(now, at, id.0, off);
        }
        Ok(())
    }

    /// Moves the write pointer of TL_opened `zone` to block `to`, copying the blocks it passes
    /// into the LogFBG (LBA-ordered plugging at the write pointer).
    fn plug_to(&mut self, now: Nanos, at: Nanos, zone: u32, to: u64) -> Nanos {
        let z = self.zones.zone(ZoneId(zone));
        let (start, from) = (z.start, z.wp.0 - z.start.0);
        if to <= from {
            return at;
        }
        let locs: Vec<Loc> = (from..to).map(|o| self.locate(zone, o)).collect();
        self.zones
            .write(start + from, to - from, false)
            .expect("plugging stays inside an opened zone");
        for off in from..to {
            if off >= self.data.seq_len(zone) {
                self.data.put(zone, off, &BlockCopy::Zero);
            }
        }
        let f = self.fill(now, at, zone, from, &locs, None);
        self.count_plugged(to - from, &f);
        f.last
    }

    /// Counts `blocks` plugged at the write pointer by `f`: on demand, but for those plugged
    /// ahead (counted when plugged) and those read ahead, whose copy was started in the
    /// background.
    fn count_plugged(&mut self, blocks: u64, f: &Filled) {
        let c = &mut self.plus.counters;
        c.plugged_blocks_on_demand += blocks - f.in_place - f.read_ahead;
        c.plugged_blocks_background += f.read_ahead;
    }

    /// After a write to TL_opened `zone` (and at TL_open) with `plugging = "lba"`: plugs the
    /// valid blocks that follow the write pointer, so it waits at the next invalid block (seed
    /// 000 §3.2.2, Fig. 4 ②-P). Completes the zone when that fills it.
    pub(crate) fn lba_ordered_plugging(&mut self, now: Nanos, at: Nanos, zone: u32) {
        let Some(tl) = self.plus.tl.get(&zone) else {
            return;
        };
        if self.profile.znsplus.plugging == Plugging::Lba {
            let z = self.zones.zone(ZoneId(zone));
            let from = z.wp.0 - z.start.0;
            let mut to = from;
            while to < z.capacity && tl.is_valid(to) {
                to += 1;
            }
            self.plug_to(now, at, zone, to);
        }
        self.tl_complete_if_full(zone);
    }

    /// A TL_opened zone that is Full has every block in its LogFBG, which replaces the original
    /// FBG for good (seed 000 §3.2.2): the original is freed. Like a finish, the switch counts
    /// as done once the command that fills the zone is submitted: the zone's data survives a
    /// power loss from then on (the original blocks it replaces are gone).
    pub(crate) fn tl_complete_if_full(&mut self, zone: u32) {
        if self.zones.zone(ZoneId(zone)).state == ZoneState::Full {
            self.tl_end(zone);
        }
    }

    /// A TL_opened zone a media failure took offline (at once, or by the Offline action from
    /// Read Only) has lost its data: its threaded logging ends and the original FBG is freed.
    /// A Read Only one keeps its state, as its valid blocks past the write pointer still lie
    /// in the original FBG where reads find them; it is plugged and written no more.
    pub(crate) fn tl_zone_offline(&mut self, zone: u32) {
        if self.zones.zone(ZoneId(zone)).state == ZoneState::Offline
            && self.is_tl_open(ZoneId(zone))
        {
            self.tl_end(zone);
            // The original data past the write pointer went with it.
            self.data
                .truncate(zone, self.progress[zone as usize].written);
        }
    }

    /// Ends threaded logging of `zone`, if it is TL_opened: the LogFBG is the zone's FBG from
    /// now on and the original FBG is freed.
    fn tl_end(&mut self, zone: u32) {
        if let Some(tl) = self.plus.tl.remove(&zone) {
            self.durability.seq.forget(zone);
            if let Some(orig) = tl.orig_fbg {
                self.map.release_fbg(zone, orig);
            }
        }
    }

    /// Close or Finish of a TL_opened zone: the rest of its data is plugged into the LogFBG and
    /// the zone is finished (padded past its data), so that the LogFBG replaces the original
    /// FBG (seed 000 §3.2.2). Returns when the last copy or pad completes.
    pub(crate) fn tl_finish(&mut self, now: Nanos, at: Nanos, zone: u32) -> Nanos {
        let extent = self.plus.tl[&zone].extent;
        let z = self.zones.zone(ZoneId(zone));
        let to = extent.min(z.capacity).max(z.wp.0 - z.start.0);
        let mut done = self.plug_to(now, at, zone, to);
        if self.zones.zone(ZoneId(zone)).state != ZoneState::Full {
            let o = self
                .zones
                .finish(ZoneId(zone))
                .expect("an opened zone can be finished");
            debug_assert_eq!(o.to, ZoneState::Full);
            self.counters.zone_finishes += 1;
            self.durability.seq.forget(zone);
            done = done.max(self.pad_zone(now, at, ZoneId(zone)));
        }
        self.tl_complete_if_full(zone);
        done
    }

    /// Drops the ZNS+ state of a zone being reset (its LogFBG, if TL_opened, is the mapped FBG
    /// the reset releases; the original FBG is released here).
    pub(crate) fn znsplus_forget(&mut self, zone: u32) {
        if let Some(tl) = self.plus.tl.remove(&zone)
            && let Some(orig) = tl.orig_fbg
        {
            self.map.release_fbg(zone, orig);
        }
        self.plus.tail_ready.remove(&zone);
        self.plus.wp_progress.remove(&zone);
        if !self.plus.copyback_runs.is_empty() {
            let keys: Vec<(u32, u64)> = self
                .plus
                .copyback_runs
                .range((zone, 0)..(zone + 1, 0))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                self.plus.copyback_runs.remove(&k);
            }
        }
    }

    /// Drops everything of TL_opened `zone` past its first `kept` blocks at a power loss
    /// (without power-loss protection): the host's writes there and the LogFBG pages from the
    /// first chunk not kept on (plugged ones too: their data is still in the original FBG, and
    /// the plugging is redone when the write pointer passes or the zone is finished). The
    /// valid blocks past `kept` keep their contents: the host never overwrote them.
    pub(crate) fn roll_back_tl_zone(&mut self, zone: u32, kept: u64) {
        let lpc = self.lbas_per_chunk.get();
        let width = self.map.width() as u64;
        let p = self.progress[zone as usize];
        let keep_chunks = kept / lpc;
        let tl = &self.plus.tl[&zone];
        // In order at the write pointer, or plugged ahead.
        crate::zns::forget_programs_from(&self.map, &mut self.flash, zone, keep_chunks, |c| {
            c < p.programmed_chunks || tl.done.contains_key(&c)
        });
        let written = p.written;
        let extent = tl.extent;
        let lost: Vec<u64> = (kept..written.min(extent))
            .filter(|&o| !tl.is_valid(o))
            .collect();
        let tl = self.plus.tl.get_mut(&zone).expect("TL_opened");
        let dropped: Vec<u64> = tl.done.range(keep_chunks..).map(|(&c, _)| c).collect();
        for c in &dropped {
            tl.done.remove(c);
        }
        for (u, next) in tl.next.iter_mut().enumerate() {
            let first = keep_chunks + (u as u64 + width - keep_chunks % width) % width;
            *next = (*next).min(first);
        }
        tl.parked.clear();
        // The copies dropped took one copyback each off the data's run.
        for c in dropped {
            if let Some(r) = self.plus.copyback_runs.get_mut(&(zone, c)) {
                *r = r.saturating_sub(1);
                if *r == 0 {
                    self.plus.copyback_runs.remove(&(zone, c));
                }
            }
        }
        // Blocks past the original data were all written since TL_open.
        if written > extent {
            self.data.truncate(zone, kept.max(extent));
        }
        for off in lost {
            self.data.put(zone, off, &BlockCopy::Zero);
        }
        self.progress[zone as usize] = crate::zns::ZoneProgress {
            programmed_chunks: keep_chunks.min(p.programmed_chunks),
            written: kept,
        };
    }

    /// Power loss at `at`: copies in flight are aborted (the device is idle afterwards), and
    /// background plugging resumes from `at`.
    pub(crate) fn tl_power_cut(&mut self, at: Nanos) {
        self.plus.pending.clear();
        self.plus.last_ticket = None;
        self.plus.wp_progress.clear();
        self.plus.tail_ready.clear();
        self.plus.last_pass = at;
        for t in &mut self.plus.copy_until {
            *t = (*t).min(at);
        }
        for tl in self.plus.tl.values_mut() {
            tl.ready = tl.ready.min(at);
            tl.read_ahead.clear();
            tl.parked.clear();
        }
    }

    /// Whether chunk `chunk` of `zone` was plugged ahead into its LogFBG.
    pub(crate) fn plugged_ahead(&self, zone: u32, chunk: u64) -> Option<Nanos> {
        self.plus.tl.get(&zone)?.done.get(&chunk).copied()
    }

    /// Records the program of LogFBG chunk `chunk` of a TL_opened zone, completing at `done`.
    pub(crate) fn note_program(&mut self, zone: u32, chunk: u64, done: Nanos) {
        if let Some(t) = self.plus.tl.get_mut(&zone) {
            t.done.insert(chunk, done);
        }
        self.plus.copyback_runs.remove(&(zone, chunk));
    }

    /// Blocks a TL_opened zone holds beyond those its write pointer has passed (its data not
    /// yet overwritten or plugged), for image checks.
    pub(crate) fn tl_blocks_ahead(&self, zone: u32, written: u64) -> u64 {
        self.plus
            .tl
            .get(&zone)
            .map_or(0, |t| t.extent.saturating_sub(written))
    }

    /// PPA-ordered plugging in the background (seed 000 §3.2.2): called whenever the device
    /// acts at `now`, it places the plugging work that chips idle since the last call could
    /// have started before `now` ([`ZonedDevice::plug_ahead`]). The work is reserved from the
    /// time it starts (the timelines were last brought to the previous call), so two zones
    /// plugging on one chip never overlap.
    pub(crate) fn background_plugging(&mut self, now: Nanos) {
        // Blocks in place by `now` no longer delay a read (which completes after `now`): their
        // entries are dropped in batches, once as many were pushed as were left last time
        // (at least 64), so the lists stay short at O(1) amortized cost per entry.
        let (pushed, left) = self.plus.wp_pushed;
        if pushed > left.max(64) {
            self.plus.wp_progress.retain(|_, v| {
                v.retain(|&(_, _, t)| t > now);
                !v.is_empty()
            });
            let left = self.plus.wp_progress.values().map(Vec::len).sum();
            self.plus.wp_pushed = (0, left);
        }
        let since = self.plus.last_pass.min(now);
        self.pump_copies(now, since);
        if !self.plus.tl.is_empty() && self.profile.znsplus.plugging == Plugging::Ppa {
            // Not into a zone a media failure made Read Only.
            let zones: Vec<u32> = self
                .plus
                .tl
                .keys()
                .copied()
                .filter(|&z| self.zones.zone(ZoneId(z)).state != ZoneState::ReadOnly)
                .collect();
            for zone in zones {
                self.plug_ahead(now, since, zone);
            }
        }
        self.plus.last_pass = now;
    }

    /// PPA-ordered plugging of TL_opened `zone` on chips idle between `since` and `now`: per
    /// LogFBG block, the next pages in order whose chunk is fully valid are copied from the
    /// original FBG (by copyback within the consecutive-copyback limit, by read + program
    /// otherwise). At the first page that needs the host's data too (a partly valid chunk, or
    /// the one the write pointer is in), its valid blocks ahead of the write pointer are read
    /// into the controller, so the write that completes the page waits only for its program.
    /// The authors' FEMU reads those blocks ahead as well and counts them with background
    /// plugging (github.com/eslab-skku/ZNSplus, bast_util.c, `SSR_back_padding`).
    fn plug_ahead(&mut self, now: Nanos, since: Nanos, zone: u32) {
        let lpc = self.lbas_per_chunk.get();
        let width = self.map.width() as u64;
        let ppb = self.profile.geometry.pages_per_block as u64;
        let chunks = self.map.chunks_per_zone();
        let limit = self.profile.znsplus.copyback_limit;
        let copyback = self.profile.znsplus.copyback;
        let timing = self.flash.timing().clone();
        let page_bytes = lpc * self.lba_size;
        let z = self.zones.zone(ZoneId(zone));
        let wp = z.wp.0 - z.start.0;
        let first = wp.div_ceil(lpc);
        let frontier = self.progress[zone as usize].programmed_chunks;
        // The shortest work a plug starts with (a copyback, or a read of at most a page).
        let shortest = timing.copyback.min(timing.read + timing.page_transfer);
        // Chunks at or past the frontier are programmed only if plugged ahead: none below the
        // first such (plugs in this pass only take chunks no unit will look at again).
        let ahead_from = self.plus.tl[&zone]
            .done
            .range(frontier..)
            .next()
            .map_or(u64::MAX, |(&c, _)| c);
        for u in 0..width as usize {
            // A unit waiting for the host's data stays so until the frontier passes its chunk.
            let tl = &self.plus.tl[&zone];
            if tl.parked.get(u).copied().flatten() == Some(tl.next[u]) && tl.next[u] >= frontier {
                continue;
            }
            // Nothing starts on a die busy from `since` to `now`: skip the unit's bookkeeping.
            let die = self.map.page_of(zone, u as u64).block.die;
            if self.flash.die_free_span(die, since, shortest) > now {
                continue;
            }
            loop {
                let tl = &self.plus.tl[&zone];
                let c = tl.next[u];
                if c >= chunks {
                    break;
                }
                if c < frontier || (c >= ahead_from && tl.done.contains_key(&c)) {
                    self.plus.tl.get_mut(&zone).expect("listed").next[u] += width;
                    continue;
                }
                let Some(orig) = tl.orig_fbg else { break };
                if c < first || !tl.chunk_fully_valid(c, lpc) {
                    if self.read_ahead(now, since, zone, c, wp, orig) {
                        let parked = &mut self.plus.tl.get_mut(&zone).expect("listed").parked;
                        parked.resize(width as usize, None);
                        parked[u] = Some(c);
                    }
                    break;
                }
                let src = self.map.page_in_fbg(zone, orig, c);
                let run = self
                    .plus
                    .copyback_runs
                    .get(&(zone, c))
                    .copied()
                    .unwrap_or(0);
                let by_copyback = copyback && (limit == 0 || run < limit);
                // Pages of a block are programmed in order: the previous page first.
                let prev = if (c / width).is_multiple_of(ppb) {
                    Nanos::ZERO
                } else {
                    *tl.done
                        .get(&(c - width))
                        .expect("the previous page of a plugged page is programmed")
                };
                let dst = self.map.page_of(zone, c);
                if by_copyback {
                    let from = since.max(tl.ready).max(prev);
                    let s = self
                        .flash
                        .die_free_span(dst.block.die, from, timing.copyback);
                    if s > now {
                        break;
                    }
                    self.count_copyback(zone, c, run);
                    self.run_copy(since, s, s, zone, c, &CopyOp::Copyback { src, dst });
                } else {
                    let (ready, busy) = (tl.ready, timing.read + timing.page_transfer);
                    let s = self.flash.die_free_span(src.block.die, since, busy);
                    if s > now {
                        break;
                    }
                    if copyback {
                        self.plus.counters.copyback_limit_hits += 1;
                    }
                    self.plus.copyback_runs.remove(&(zone, c));
                    self.plus.counters.readprogram_copies += 1;
                    self.plus.counters.readprogram_blocks += lpc;
                    let in_buffer =
                        self.read_into_buffer(since, s, &[(src, page_bytes)], Nanos::ZERO, lpc);
                    self.program_chunk(since, in_buffer.max(ready).max(prev), zone, c, dst);
                }
                self.plus.tl.get_mut(&zone).expect("listed").next[u] += width;
                self.plus.counters.plugged_blocks_background += lpc;
            }
        }
    }

    /// Reads ahead into the controller the valid blocks of chunk `c` of TL_opened `zone` past
    /// its write pointer `wp` (from original FBG `orig`), if not yet read and the chip was
    /// idle between `since` and `now` (see [`ZonedDevice::plug_ahead`]). Returns whether
    /// nothing is left to read ahead there (read now or before, or no such block: the write
    /// pointer only moves on).
    fn read_ahead(
        &mut self,
        now: Nanos,
        since: Nanos,
        zone: u32,
        c: u64,
        wp: u64,
        orig: u32,
    ) -> bool {
        let lpc = self.lbas_per_chunk.get();
        let tl = &self.plus.tl[&zone];
        if tl.read_ahead.contains_key(&c) {
            return true;
        }
        let blocks = ((c * lpc).max(wp)..(c + 1) * lpc)
            .filter(|&o| tl.is_valid(o))
            .count() as u64;
        if blocks == 0 {
            return true;
        }
        let src = self.map.page_in_fbg(zone, orig, c);
        let t = self.flash.timing();
        let s = self
            .flash
            .die_free_span(src.block.die, since, t.read + t.page_transfer);
        if s > now {
            return false;
        }
        let done = self.flash.read(since, s, src, blocks * self.lba_size);
        self.plus
            .tl
            .get_mut(&zone)
            .expect("listed")
            .read_ahead
            .insert(c, done);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;
    use crate::payload::{PayloadMode, ReadData, WriteData};
    use crate::zns::ZoneAction;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// 8 zones of 64 LBAs: 16 chunks of 4 LBAs over 4 dies (one FCG unless `zone_dies=2`).
    fn small(sets: &[&str]) -> ZonedDevice {
        let items: Vec<String> = [
            "channels=2",
            "chips_per_channel=2",
            "pages_per_block=4",
            "blocks_per_plane=12",
            "zone_dies=4",
            "zones=8",
            "zone_size=256KiB",
            "max_open=4",
            "max_active=5",
            "write_buffer=256KiB",
        ]
        .iter()
        .chain(sets)
        .map(|s| s.to_string())
        .collect();
        let p = Profile::load("znsplus-mlc", &Profile::parse_overrides(&items).unwrap()).unwrap();
        ZonedDevice::new(p, PayloadMode::Full).unwrap()
    }

    /// Writes fingerprints `fp0..` to the whole of `zone`; returns when the last write completes.
    fn fill(d: &mut ZonedDevice, zone: u64, fp0: u64, mut t: Nanos) -> Nanos {
        let zs = d.zones().geometry().zone_size;
        for k in 0..d.zones().geometry().zone_capacity {
            let c = d.write(
                t,
                t,
                Lba(zone * zs + k),
                WriteData::Fingerprints(&[fp0 + k]),
                false,
            );
            assert!(c.status.is_ok(), "{:?}", c.status);
            t = c.done;
        }
        t
    }

    fn fp_of(d: &mut ZonedDevice, t: Nanos, lba: u64) -> u64 {
        let mut out = ReadData::default();
        assert!(d.read(t, t, Lba(lba), 1, Some(&mut out)).status.is_ok());
        crate::payload::fingerprint(&out.bytes)
    }

    fn fp(v: u64) -> u64 {
        let mut b = Vec::new();
        crate::payload::block_from_fingerprint(v, 4096, &mut b);
        crate::payload::fingerprint(&b)
    }

    fn lbas(r: std::ops::Range<u64>) -> Vec<Lba> {
        r.map(Lba).collect()
    }

    const LATER: Nanos = Nanos(50_000_000);

    /// Writes complete once their data is in the write buffer.
    const BUFFERED: &str = "write_completion=\"buffered\"";

    /// The small device with zones 0 (fingerprints 0..) and 2 (900..) written, and a time a
    /// while after: a compaction out of zone 0 and reads of zone 2 use the same dies.
    fn zones_0_and_2_full() -> (ZonedDevice, Nanos) {
        zones_0_and_2_full_with(&[])
    }

    /// [`zones_0_and_2_full`] on [`small`] with `sets`.
    fn zones_0_and_2_full_with(sets: &[&str]) -> (ZonedDevice, Nanos) {
        let mut d = small(sets);
        let t = fill(&mut d, 0, 0, Nanos(0));
        let t = fill(&mut d, 2, 900, t) + LATER;
        (d, t)
    }

    /// zone_compaction at `t` whose copies are queued: its ticket.
    fn queue_compaction(d: &mut ZonedDevice, t: Nanos, src: &[Lba], dst: &[Lba]) -> u64 {
        let c = d.zone_compaction(t, t, src, dst);
        assert!(c.status.is_ok(), "{:?}", c.status);
        d.take_ticket().expect("copies queued")
    }

    /// [`zones_0_and_2_full`] with read + program copies (chunk k -> chunk k + 1) of zone 0's
    /// first 56 blocks queued into zone 1 from block 68, keeping every chip busy: the device,
    /// the compaction's ticket, its time, and a time 300 us later (zone 1's write pointer is
    /// then at block 124, chunk 15).
    fn copies_queued_into_zone_1() -> (ZonedDevice, u64, Nanos, Nanos) {
        copies_queued_into_zone_1_with(&[])
    }

    /// [`copies_queued_into_zone_1`] on [`small`] with `sets`.
    fn copies_queued_into_zone_1_with(sets: &[&str]) -> (ZonedDevice, u64, Nanos, Nanos) {
        let (mut d, t) = zones_0_and_2_full_with(sets);
        let ticket = queue_compaction(&mut d, t, &lbas(0..56), &lbas(68..124));
        (d, ticket, t, t + Nanos::from_us(300))
    }

    /// Writes `fps` at zone 1's block 124 (chunk 15, behind the copies of
    /// [`copies_queued_into_zone_1`]) at `t`: the write's ticket, its program queued behind them.
    fn write_behind_copies_into_zone_1(d: &mut ZonedDevice, t: Nanos, fps: &[u64]) -> u64 {
        let w = d.write(t, t, Lba(124), WriteData::Fingerprints(fps), false);
        assert!(w.status.is_ok(), "{:?}", w.status);
        d.take_ticket()
            .expect("the write's program waits behind the copies")
    }

    /// The first block of zone 2 whose die `pick` accepts.
    fn zone_2_block_where(d: &ZonedDevice, pick: impl Fn(zonelab_flash::DieId) -> bool) -> u64 {
        (0..16u64)
            .map(|c| 128 + 4 * c)
            .find(|&l| pick(d.map.die_of(2, (l - 128) / 4)))
            .expect("zone 2 has a chunk on every die")
    }

    /// zone_compaction at `t` with nothing else reaching the device until it completes.
    fn compact(d: &mut ZonedDevice, t: Nanos, src: &[Lba], dst: &[Lba]) -> Completion {
        let mut c = d.zone_compaction(t, t, src, dst);
        if let Some(ticket) = d.take_ticket() {
            c.done = d.ticket_completion(ticket);
        }
        c
    }

    #[test]
    fn copyback_only_for_a_whole_chunk_on_the_same_chip() {
        let mut d = small(&[]);
        fill(&mut d, 0, 1000, Nanos(0));
        let t = LATER;
        // Chunk 0 -> chunk 0 of zone 1 and chunk 1 -> chunk 1: whole and same chip.
        let c = compact(&mut d, t, &lbas(0..8), &lbas(64..72));
        assert!(c.status.is_ok(), "{:?}", c.status);
        assert_eq!(d.znsplus_counters().copybacks, 2);
        assert_eq!(d.flash_counters().copybacks, 2);
        assert_eq!(d.znsplus_counters().readprogram_copies, 0);
        // Chunk 3 -> chunk 2: another chip, read + program.
        let c = compact(&mut d, t, &lbas(12..16), &lbas(72..76));
        assert!(c.status.is_ok());
        assert_eq!(d.znsplus_counters().copybacks, 2);
        assert_eq!(d.znsplus_counters().readprogram_copies, 1);
        // Half of chunk 4 and half of chunk 6 -> chunk 3 (same chip as chunk 3? no whole chunk).
        let src = [lbas(16..18), lbas(24..26)].concat();
        let c = compact(&mut d, t, &src, &lbas(76..80));
        assert!(c.status.is_ok());
        assert_eq!(d.znsplus_counters().copybacks, 2);
        assert_eq!(d.znsplus_counters().readprogram_copies, 2);
        // In blocks: 8 by copyback; 4 (chunk 3) and 2 + 2 (the halves) by read + program.
        assert_eq!(d.znsplus_counters().copyback_blocks, 8);
        assert_eq!(d.znsplus_counters().readprogram_blocks, 8);
        assert_eq!(d.znsplus_counters().compacted_blocks, 16);
        let t = c.done;
        let want: Vec<u64> = (0..8)
            .chain(12..18)
            .chain(24..26)
            .map(|k| fp(1000 + k))
            .collect();
        let got: Vec<u64> = (64..80).map(|l| fp_of(&mut d, t, l)).collect();
        assert_eq!(got, want);
        assert_eq!(d.zone(ZoneId(1)).wp, Lba(80));
        d.validate_loaded().unwrap();
    }

    #[test]
    fn without_copyback_every_chunk_is_read_and_programmed() {
        let mut d = small(&["znsplus.copyback=false"]);
        fill(&mut d, 0, 1000, Nanos(0));
        let t = LATER;
        // Whole chunks on the same chip, which would be copybacks.
        let c = compact(&mut d, t, &lbas(0..8), &lbas(64..72));
        assert!(c.status.is_ok(), "{:?}", c.status);
        assert_eq!(d.znsplus_counters().copybacks, 0);
        assert_eq!(d.flash_counters().copybacks, 0);
        assert_eq!(d.znsplus_counters().readprogram_copies, 2);
        assert_eq!(d.znsplus_counters().copyback_limit_hits, 0);
        let got: Vec<u64> = (64..72).map(|l| fp_of(&mut d, c.done, l)).collect();
        assert_eq!(got, (0..8).map(|k| fp(1000 + k)).collect::<Vec<_>>());
        d.validate_loaded().unwrap();
    }

    /// A copy that leaves its destination chunk partly filled stays in the write buffer, but
    /// the command completes only once the source data is read into it: the host may reset
    /// the source zone after the completion.
    #[test]
    fn a_copy_into_a_partial_chunk_completes_once_its_data_is_read() {
        for tl_open in [false, true] {
            let mut d = small(&[]);
            fill(&mut d, 0, 1000, Nanos(0));
            let mut t = LATER;
            if tl_open {
                // Zone 1 full, then TL_opened with every block invalid: the copy's path
                // through a TL-opened zone (not queued).
                t = fill(&mut d, 1, 2000, t) + LATER;
                let c = d.tl_open(
                    t,
                    t,
                    &[TlOpenZone {
                        zslba: Lba(64),
                        valid: vec![false; 64],
                    }],
                );
                assert!(c.status.is_ok(), "{:?}", c.status);
                t = c.done;
            }
            let c = compact(&mut d, t, &lbas(8..10), &lbas(64..66));
            assert!(c.status.is_ok(), "{:?}", c.status);
            assert_eq!(d.znsplus_counters().readprogram_copies, 1);
            let read = d.flash.timing().read;
            assert!(
                c.done >= t + read,
                "TL-opened {tl_open}: completed {} after submission, before its read ({read})",
                c.done - t
            );
            let got: Vec<u64> = (64..66).map(|l| fp_of(&mut d, c.done, l)).collect();
            assert_eq!(got, vec![fp(1008), fp(1009)]);
            d.validate_loaded().unwrap();
        }
    }

    #[test]
    fn consecutive_copybacks_are_limited() {
        let mut d = small(&["copyback_limit=1"]);
        fill(&mut d, 0, 0, Nanos(0));
        let t = LATER;
        let c1 = compact(&mut d, t, &lbas(0..4), &lbas(64..68));
        assert_eq!(d.znsplus_counters().copybacks, 1);
        // Copied once by copyback: the next copy of the same data goes through the controller.
        let t = c1.done;
        let c2 = compact(&mut d, t, &lbas(64..68), &lbas(128..132));
        assert!(c2.status.is_ok());
        assert_eq!(d.znsplus_counters().copybacks, 1);
        assert_eq!(d.znsplus_counters().copyback_limit_hits, 1);
        assert_eq!(d.znsplus_counters().readprogram_copies, 1);
        // ECC-checked and programmed afresh: copyback is allowed again.
        let t = c2.done;
        let c3 = compact(&mut d, t, &lbas(128..132), &lbas(192..196));
        assert!(c3.status.is_ok());
        assert_eq!(d.znsplus_counters().copybacks, 2);
        assert_eq!(fp_of(&mut d, c3.done, 194), fp(2));
    }

    #[test]
    fn unrelated_zones_are_not_held_behind_a_compaction() {
        // Two chip groups: even zones on dies 0-1, odd zones on dies 2-3.
        let run = |compact: bool| -> (Nanos, Nanos, Nanos) {
            let mut d = small(&["zone_dies=2"]);
            let t = fill(&mut d, 0, 0, Nanos(0));
            let t = fill(&mut d, 1, 500, t);
            let t = t + LATER;
            let ticket =
                compact.then(|| queue_compaction(&mut d, t, &lbas(0..30), &lbas(128..158)));
            // Once the command is handed to the flash (its firmware and transfer done), I/O to
            // other chips proceeds as if it were not there.
            let t2 = t + Nanos::from_us(20);
            let r = d.read(t2, t2, Lba(64 + 9), 1, None);
            let w = d.write(t2, t2, Lba(192 + 64), WriteData::Fingerprints(&[1]), false);
            let cc = ticket.map_or(t, |k| d.ticket_completion(k));
            (r.done - t2, w.done - t2, cc - t)
        };
        let (r0, w0, _) = run(false);
        let (r1, w1, cc) = run(true);
        assert!(cc > r1.times(10), "the compaction is long: {cc} vs {r1}");
        assert_eq!(r1, r0, "a read of another chip group waits for nothing");
        assert_eq!(w1, w0, "a write to an unrelated zone completes as before");
    }

    #[test]
    fn a_read_on_a_chip_the_copies_use_waits_only_for_the_copy_under_way() {
        // Read + program copies (chunk k -> chunk k + 1) keep every chip busy for a while.
        let run = |compact: bool| -> (Nanos, Nanos) {
            let (mut d, t) = zones_0_and_2_full();
            let ticket = compact.then(|| queue_compaction(&mut d, t, &lbas(0..56), &lbas(68..124)));
            // A read of another zone on the same chips, while the copies run.
            let t2 = t + Nanos::from_us(300);
            let r = d.read(t2, t2, Lba(128 + 5), 1, None);
            let cc = ticket.map_or(t, |k| d.ticket_completion(k));
            (r.done - t2, cc - t)
        };
        let (alone, _) = run(false);
        let (beside, copies) = run(true);
        let f = &small(&[]).profile.flash;
        let longest_op = f.read.0 + f.program.0 + f.copyback.0;
        // The read (300 us in) arrives while the copies run.
        assert!(
            copies > longest_op.times(2),
            "the copies are long: {copies}"
        );
        assert!(
            beside <= alone + longest_op,
            "the read waits for the operations under way only: {beside} vs {alone} alone"
        );
    }

    #[test]
    fn a_read_on_a_chip_waits_for_one_forced_copy_not_the_whole_chain() {
        // Chunk k of zone 0 to chunk k of zone 1: copybacks, four on each die, started at once
        // (as a flush or a full buffer does). A read arriving while they run waits for the
        // copyback under way and at most one more, not for the four.
        let run = |compact: bool| -> Nanos {
            let (mut d, t) = zones_0_and_2_full();
            if compact {
                queue_compaction(&mut d, t, &lbas(0..56), &lbas(64..120));
                d.start_queued_copies();
                assert_eq!(d.znsplus_counters().copybacks, 14);
            }
            let t2 = t + Nanos::from_us(300);
            d.read(t2, t2, Lba(128 + 5), 1, None).done - t2
        };
        let copyback = small(&[]).profile.flash.copyback.0;
        let (alone, beside) = (run(false), run(true));
        assert!(
            beside <= alone + copyback.times(2),
            "the read waits for two copybacks at most: {beside} vs {alone} alone"
        );
    }

    #[test]
    fn read_and_program_copies_place_each_operation_when_its_die_is_free() {
        // Two chip groups: even zones on dies 0-1, odd zones on dies 2-3. Copies of zone 0
        // into zone 1 read on dies 0-1 and program on dies 2-3, so reads are quick on idle
        // dies and programs slow on the others. A copy whose reads could run would, if it
        // placed its program then, pile programs up on dies 2-3, and a read of zone 3
        // arriving later would wait for all of them.
        let f = &small(&[]).profile.flash;
        let longest_op = f.read.0 + f.program.0 + f.copyback.0;
        for k in 1..=12u64 {
            let run = |compact: bool| -> Nanos {
                let mut d = small(&["zone_dies=2"]);
                let t = fill(&mut d, 0, 0, Nanos(0));
                let t = fill(&mut d, 3, 500, t) + LATER;
                if compact {
                    queue_compaction(&mut d, t, &lbas(0..28), &lbas(64..92));
                }
                let t2 = t + Nanos(f.program.0.0 * k / 2);
                d.read(t2, t2, Lba(192 + 5), 1, None).done - t2
            };
            let (alone, beside) = (run(false), run(true));
            assert!(
                beside <= alone + longest_op,
                "a read {k} half-programs in waits for the operations under way only: \
                 {beside} vs {alone} alone"
            );
        }
    }

    #[test]
    fn a_stream_of_reads_to_busy_chips_takes_turns_with_the_copies() {
        // Copybacks of zone 0 into zone 1 (4 per die) while reads of zone 2 arrive on every
        // die twice as fast as the dies serve them: the dies never idle until the reads stop.
        let run = |compact: bool| -> (Nanos, Nanos, Nanos) {
            let (mut d, t) = zones_0_and_2_full();
            let step = Nanos(d.profile.flash.read.0.0 / 2);
            let mut worst = Nanos::ZERO;
            let mut last = t;
            let mut ticket = None;
            for k in 0..120u64 {
                let at = t + Nanos(step.0 * k);
                if compact && k == 10 {
                    ticket = Some(queue_compaction(&mut d, at, &lbas(0..64), &lbas(64..128)));
                }
                for c in 0..4 {
                    let r = d.read(at, at, Lba(128 + 4 * c), 1, None);
                    assert!(r.status.is_ok(), "{:?}", r.status);
                    worst = worst.max(r.done - at);
                    last = last.max(r.done);
                }
            }
            let done = ticket.map_or(t, |k| d.ticket_completion(k));
            if compact {
                assert_eq!(fp_of(&mut d, done, 64), fp(0));
                assert_eq!(fp_of(&mut d, done, 127), fp(63));
            }
            (done, last, worst)
        };
        let (_, last_alone, worst_alone) = run(false);
        let (done, last, worst) = run(true);
        let copyback = small(&[]).profile.flash.copyback.0;
        assert!(
            done < last_alone,
            "the copies get turns while the reads keep the dies busy: done {done}, reads until {last_alone}"
        );
        assert!(
            last <= last_alone + copyback.times(4),
            "the reads are delayed by their dies' four copies at most: {last} vs {last_alone}"
        );
        assert!(
            worst <= worst_alone + copyback.times(4),
            "no read waits for more than its die's copies: {worst} vs {worst_alone}"
        );
    }

    /// One zone_compaction of 1,200 whole chunks, each to the chunk before it (another chip,
    /// so read and program), on 32 dies sharing 8 channels: the dies' own work (a read and a
    /// program per chunk, ~17 ms) bounds it; the channels carry two transfers a chunk, well
    /// within their time. Remembering too few gaps on the dies' and channels' timelines
    /// pushed reads and transfers later, to 2.2 times the bound.
    #[test]
    fn a_large_compaction_over_shared_channels_keeps_the_dies_busy() {
        let items: Vec<String> = [
            "channels=8",
            "chips_per_channel=4",
            "zone_dies=32",
            "zones=4",
            "zone_size=64MiB",
            "blocks_per_plane=12",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = Profile::load("znsplus-mlc", &Profile::parse_overrides(&items).unwrap()).unwrap();
        let mut d = ZonedDevice::new(p, PayloadMode::Fingerprint).unwrap();
        let zs = d.zones().geometry().zone_size;
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let chunks = 1200u64;
        let src: Vec<Lba> = (0..chunks * 4).map(|b| Lba(b + 4)).collect();
        let dst: Vec<Lba> = (0..chunks * 4).map(|b| Lba(zs + b)).collect();
        let c = compact(&mut d, t, &src, &dst);
        assert!(c.status.is_ok(), "{:?}", c.status);
        assert_eq!(d.znsplus_counters().readprogram_copies, chunks);
        let f = d.flash.timing();
        let per_die = chunks.div_ceil(32) * (f.read + f.page_transfer + f.program).0;
        let took = (c.done - t).0;
        assert!(
            took < per_die * 3 / 2,
            "{took} ns for {chunks} copies; the dies' own work takes {per_die} ns"
        );
    }

    #[test]
    fn a_write_after_a_compaction_holds_back_only_its_own_chips_copies() {
        // Read + program copies (chunk k -> chunk k + 1) into zone 1 keep every chip busy;
        // then the host writes zone 1 at its write pointer (offset 60: chunk 15, one die) and
        // reads zone 2 on another die.
        let run = |write: bool| -> (Nanos, Nanos) {
            let (mut d, ticket, t, t2) = copies_queued_into_zone_1();
            let written_die = d.map.die_of(1, 15);
            let read_lba = zone_2_block_where(&d, |die| die != written_die);
            if write {
                let w = d.write(t2, t2, Lba(124), WriteData::Fingerprints(&[77]), false);
                assert!(w.status.is_ok(), "{:?}", w.status);
            }
            let r = d.read(t2, t2, Lba(read_lba), 1, None);
            let done = d.ticket_completion(ticket);
            assert_eq!(fp_of(&mut d, done, 68), fp(0));
            assert_eq!(fp_of(&mut d, done, 123), fp(55));
            if write {
                assert_eq!(fp_of(&mut d, done, 124), fp(77));
            }
            (r.done - t2, done - t)
        };
        let (alone, copies) = run(false);
        let (after_write, _) = run(true);
        let f = &small(&[]).profile.flash;
        assert!(
            copies > (f.read.0 + f.program.0).times(3),
            "the copies are long: {copies}"
        );
        // The write needs the copies to its own die's block first, not those to the others.
        assert!(
            after_write <= alone + Nanos::from_us(100),
            "a read of another die waits as without the write: {after_write} vs {alone}"
        );
    }

    #[test]
    fn a_write_behind_queued_copies_waits_in_the_buffer_not_the_reads() {
        // Read + program copies (chunk k -> chunk k + 1) into zone 1 keep every chip busy;
        // then the host writes a whole chunk of zone 1 at its write pointer (offset 60: chunk
        // 15), on a die with copies queued before it in the same flash block, and reads zone
        // 2 on that die.
        let run = |write: bool| -> (Nanos, Option<Nanos>, Nanos, ZonedDevice) {
            let (mut d, ticket, _, t2) = copies_queued_into_zone_1();
            let die = d.map.die_of(1, 15);
            let read_lba = zone_2_block_where(&d, |on| on == die);
            let w = write.then(|| write_behind_copies_into_zone_1(&mut d, t2, &[77, 78, 79, 80]));
            let r = d.read(t2, t2, Lba(read_lba), 1, None);
            let written = w.map(|w| d.ticket_completion(w));
            let copies = d.ticket_completion(ticket);
            (r.done - t2, written, copies, d)
        };
        let (alone, _, _, _) = run(false);
        let (after_write, written, copies, mut d) = run(true);
        let f = d.profile.flash.clone();
        // The copies to the written die were not all put ahead of the read.
        assert!(
            after_write <= alone + f.program.0,
            "a read of the written die waits as without the write: {after_write} vs {alone}"
        );
        // The write completes once its page is programmed, after the pages before it.
        let written = written.expect("written");
        let die = d.map.die_of(1, 15);
        let last_copy_on_die = (1..15u64).filter(|&c| d.map.die_of(1, c) == die).count();
        assert!(last_copy_on_die > 1, "copies queued on the written die");
        assert!(written <= copies + f.program.0 + f.page_transfer.0.times(2));
        for (k, v) in [77u64, 78, 79, 80].into_iter().enumerate() {
            assert_eq!(fp_of(&mut d, written, 124 + k as u64), fp(v));
        }
        assert_eq!(fp_of(&mut d, written, 123), fp(55));
    }

    #[test]
    fn a_flush_programs_host_data_waiting_behind_copies() {
        // Writes complete in the write buffer: the data waits there behind the copies, and a
        // flush must see it programmed.
        let (mut d, ticket, _, t2) = copies_queued_into_zone_1_with(&[BUFFERED]);
        let w = d.write(
            t2,
            t2,
            Lba(124),
            WriteData::Fingerprints(&[1, 2, 3, 4]),
            false,
        );
        assert!(w.status.is_ok(), "{:?}", w.status);
        assert!(
            d.plus.deferred_lbas > 0,
            "the write's chunk waits behind the copies"
        );
        let f = d.flush(t2, t2);
        // The write's program and the copies before it are placed, and the flush completes
        // once it is done (the buffer drains), not before.
        assert_eq!(
            d.plus.deferred_lbas, 0,
            "a flush leaves no host data waiting"
        );
        let program = d.flash.timing().program;
        assert!(f.done >= t2 + program, "{} < {}", f.done, t2 + program);
        assert!(d.ticket_completion(ticket) > Nanos(0));
        assert_eq!(fp_of(&mut d, f.done, 124), fp(1));
    }

    #[test]
    fn host_data_behind_copies_leaves_the_buffer_its_reserved_room() {
        // Writes complete in the write buffer. A 256 KiB buffer (64 LBAs, 16 chunks) keeps 7
        // chunks for partly filled pages and pages in flight: of twelve chunks written behind
        // queued copies, the oldest go.
        let (mut d, t) = zones_0_and_2_full_with(&[BUFFERED]);
        let ticket = queue_compaction(&mut d, t, &lbas(0..8), &lbas(68..76));
        let mut tickets = Vec::new();
        let mut deferred = 0;
        for k in 0..12u64 {
            let at = t + Nanos::from_us(10 * (k + 1));
            let fps: Vec<u64> = (0..4).map(|i| 500 + 4 * k + i).collect();
            let w = d.write(
                at,
                at,
                Lba(76 + 4 * k),
                WriteData::Fingerprints(&fps),
                false,
            );
            assert!(w.status.is_ok(), "{:?}", w.status);
            tickets.extend(d.take_ticket());
            assert!(d.plus.deferred_lbas <= d.buffer.capacity() - 7 * 4);
            deferred = deferred.max(d.plus.deferred_lbas);
        }
        assert!(deferred > 4, "host data waited behind the copies");
        let mut done = d.ticket_completion(ticket);
        for wt in tickets {
            done = done.max(d.ticket_completion(wt));
        }
        for k in 0..48u64 {
            assert_eq!(fp_of(&mut d, done, 76 + k), fp(500 + k));
        }
    }

    /// Without power-loss protection, copied blocks are durable as their programs complete, as
    /// written ones are: a power cut as zone_compaction is submitted (its copies queued) keeps
    /// none of them and zone 1 falls back to empty; a cut once the compaction has completed, or
    /// after a flush, keeps all; the source zone is untouched either way.
    #[test]
    fn without_power_loss_protection_copies_are_durable_once_programmed() {
        let no_plp = "power_loss_protection=false";
        let check_source = |d: &mut ZonedDevice, t: Nanos| {
            for k in 0..56u64 {
                assert_eq!(fp_of(d, t, k), fp(k), "source block {k}");
            }
        };
        // Cut at once: nothing of the copy was programmed.
        let (mut d, _, t, _) = copies_queued_into_zone_1_with(&[no_plp]);
        let r = d.power_cut(t);
        assert!(r.rolled_back.contains(&ZoneId(1)), "{r:?}");
        assert_eq!(
            d.zone(ZoneId(1)).wp,
            Lba(64),
            "zone 1 falls back to its start"
        );
        assert_eq!(d.zone(ZoneId(1)).state, ZoneState::Empty);
        check_source(&mut d, t);
        // Cut once the command has completed: every copy is programmed by then.
        let (mut d, ticket, _, _) = copies_queued_into_zone_1_with(&[no_plp]);
        let done = d.ticket_completion(ticket);
        let r = d.power_cut(done);
        assert!(!r.rolled_back.contains(&ZoneId(1)), "{r:?}");
        assert_eq!(d.zone(ZoneId(1)).wp, Lba(124));
        for k in 0..56u64 {
            assert_eq!(fp_of(&mut d, done, 68 + k), fp(k), "copied block {k}");
        }
        check_source(&mut d, done);
        // A flush at once starts the queued copies and completes after them.
        let (mut d, _, t, _) = copies_queued_into_zone_1_with(&[no_plp]);
        let f = d.flush(t, t);
        assert!(f.status.is_ok());
        assert!(!d.has_queued_copies(), "the flush started every copy");
        let r = d.power_cut(f.done);
        assert!(!r.rolled_back.contains(&ZoneId(1)), "{r:?}");
        assert_eq!(d.zone(ZoneId(1)).wp, Lba(124));
        for k in 0..56u64 {
            assert_eq!(fp_of(&mut d, f.done, 68 + k), fp(k), "copied block {k}");
        }
    }

    /// Without power-loss protection a write behind copies queued into its zone starts those
    /// on its own dies only; the zone's durable part is a prefix, so a cut at the write's
    /// completion, with copies to other dies still queued, keeps neither them nor the write.
    /// Once everything is programmed (and later writes elsewhere have pruned the records), a
    /// cut keeps all.
    #[test]
    fn without_power_loss_protection_a_write_is_durable_only_after_the_copies_before_it() {
        let (mut d, ticket, t, _) =
            copies_queued_into_zone_1_with(&["power_loss_protection=false"]);
        let w = d.write(
            t,
            t,
            Lba(124),
            WriteData::Fingerprints(&[900, 901, 902, 903]),
            false,
        );
        assert!(w.status.is_ok(), "{:?}", w.status);
        assert!(d.has_queued_copies(), "copies to other dies stay queued");
        let mut cut = d.clone();
        let r = cut.power_cut(w.done);
        assert!(r.rolled_back.contains(&ZoneId(1)), "{r:?}");
        assert!(
            cut.zone(ZoneId(1)).wp < Lba(124),
            "the write outlived copies before it"
        );
        // Writes to zone 3 until the copies are done prune the durability records.
        let end = d.ticket_completion(ticket).max(w.done);
        let mut at = w.done;
        for k in 0..64u64 {
            let c = d.write(
                at,
                at,
                Lba(192 + k),
                WriteData::Fingerprints(&[2000 + k]),
                false,
            );
            assert!(c.status.is_ok(), "{:?}", c.status);
            at = c.done.max(at + Nanos((end - w.done).0 / 32));
        }
        let r = d.power_cut(at);
        assert!(!r.rolled_back.contains(&ZoneId(1)), "{r:?}");
        assert_eq!(d.zone(ZoneId(1)).wp, Lba(128));
        for k in 0..56u64 {
            assert_eq!(fp_of(&mut d, at, 68 + k), fp(k), "copied block {k}");
        }
        for k in 0..4u64 {
            assert_eq!(fp_of(&mut d, at, 124 + k), fp(900 + k), "written block {k}");
        }
    }

    /// The same holds for copies into a TL_opened zone (placed at once, with the plugging of
    /// the zone's own valid blocks the write pointer passes): a cut as the compaction is
    /// submitted rolls the zone back to the prefix durable before it (the valid chunks plugged
    /// ahead), keeping its valid blocks and dropping the copies; a cut at its completion keeps
    /// all.
    #[test]
    fn without_power_loss_protection_copies_into_a_tl_opened_zone_are_durable_once_programmed() {
        let setup = || {
            let (mut d, t) = zones_0_and_2_full_with(&["power_loss_protection=false"]);
            // Chunks 0 and 1 stay valid; zone 2's chunks 2 and 3 go to blocks 16..24.
            let o = tl_open_zone0(&mut d, t, &[0..4, 4..8]);
            assert!(o.status.is_ok(), "{:?}", o.status);
            let t = o.done + LATER;
            let c = d.zone_compaction(t, t, &lbas(136..144), &lbas(16..24));
            assert!(c.status.is_ok(), "{:?}", c.status);
            assert_eq!(d.zone(ZoneId(0)).wp, Lba(24));
            (d, t, c.done)
        };
        let (mut d, t, _) = setup();
        let r = d.power_cut(t);
        assert!(r.rolled_back.contains(&ZoneId(0)), "{r:?}");
        assert!(d.is_tl_open(ZoneId(0)));
        assert_eq!(
            d.zone(ZoneId(0)).wp,
            Lba(8),
            "chunks 0 and 1 were plugged ahead while the chips idled, nothing later by then"
        );
        for k in 0..8u64 {
            assert_eq!(fp_of(&mut d, t, k), fp(k), "valid block {k}");
        }
        for k in 16..24u64 {
            assert_ne!(
                fp_of(&mut d, t, k),
                fp(900 + k - 16 + 8),
                "copied block {k}"
            );
        }
        let (mut d, _, done) = setup();
        let r = d.power_cut(done);
        assert!(!r.rolled_back.contains(&ZoneId(0)), "{r:?}");
        assert_eq!(d.zone(ZoneId(0)).wp, Lba(24));
        for k in 0..8u64 {
            assert_eq!(fp_of(&mut d, done, k), fp(k), "valid block {k}");
        }
        for k in 16..24u64 {
            assert_eq!(fp_of(&mut d, done, k), fp(900 + k - 8), "copied block {k}");
        }
    }

    #[test]
    fn without_a_write_back_buffer_host_data_behind_copies_waits_outside_it() {
        // Writes complete when programmed (the znsplus profiles, as the authors' FEMU): twelve
        // chunks written behind the copies of zone 1's first four chunks, one on each die,
        // are more than the buffer's room (9 chunks), yet their data stays out of the buffer
        // until each program starts, so no copy is started ahead of its turn to drain it, and
        // a flush does not wait for them (it covers completed writes only).
        let (mut d, t) = zones_0_and_2_full();
        // Sources one block off the chunks: read + program copies, queued until their reads.
        let ticket = queue_compaction(&mut d, t, &lbas(1..17), &lbas(64..80));
        let mut tickets = Vec::new();
        for k in 0..12u64 {
            let fps: Vec<u64> = (0..4).map(|i| 500 + 4 * k + i).collect();
            let w = d.write(t, t, Lba(80 + 4 * k), WriteData::Fingerprints(&fps), false);
            assert!(w.status.is_ok(), "{:?}", w.status);
            tickets.push(d.take_ticket().expect("the chunk waits behind the copies"));
            assert_eq!(d.plus.deferred_lbas, 0, "no host data waits in the buffer");
        }
        let parked = d
            .plus
            .copy_queue
            .iter()
            .filter(|q| {
                matches!(
                    q.op,
                    CopyOp::Program {
                        parked: Some(4),
                        ..
                    }
                )
            })
            .count();
        assert_eq!(parked, 12);
        let copies = d
            .plus
            .copy_queue
            .iter()
            .filter(|q| matches!(q.op, CopyOp::ReadProgram { .. }))
            .count();
        assert_eq!(copies, 4, "every copy still waits for its turn");
        let f = d.flush(t, t);
        let mut done = d.ticket_completion(ticket);
        let mut first = Nanos::MAX;
        for wt in tickets {
            let w = d.ticket_completion(wt);
            first = first.min(w);
            done = done.max(w);
        }
        assert!(f.done < first, "the flush waited for uncompleted writes");
        for k in 0..48u64 {
            assert_eq!(fp_of(&mut d, done, 80 + k), fp(500 + k));
        }
        for k in 0..16u64 {
            assert_eq!(fp_of(&mut d, done, 64 + k), fp(1 + k));
        }
    }

    #[test]
    fn read_and_program_copies_read_ahead_of_their_programs() {
        // Read + program copies (chunk k -> chunk k + 1): every die reads for the next die
        // and programs for the one before, four of each at most. A die that does its next
        // program before a read another die waits for leaves that die idle; reading first,
        // every die finishes its reads and programs back to back once the first data is in.
        // So it is whether the chips take the copies as they come idle, or a command
        // starts them at once (then a normal read's turn is left before each of a die's
        // programs).
        let f = &small(&[]).profile.flash;
        let (read, program) = (
            f.read.0 + f.page_transfer.0,
            f.program.0 + f.page_transfer.0,
        );
        for at_once in [false, true] {
            let turns = if at_once { read.times(4) } else { Nanos::ZERO };
            let bound = read.times(5) + program.times(4) + turns;
            let (mut d, t) = zones_0_and_2_full();
            let ticket = queue_compaction(&mut d, t, &lbas(0..56), &lbas(68..124));
            if at_once {
                d.start_queued_copies();
            }
            let done = d.ticket_completion(ticket);
            assert_eq!(fp_of(&mut d, done, 68), fp(0));
            assert_eq!(fp_of(&mut d, done, 123), fp(55));
            assert!(
                done - t <= bound,
                "copies (started at once: {at_once}) take {}, more than {bound}",
                done - t
            );
        }
    }

    #[test]
    fn copies_read_ahead_only_what_the_write_buffer_holds() {
        // 14 read + program copies; the small device's 256 KiB buffer keeps 7 of its 16 pages
        // for partly filled pages and pages in flight, so it holds the data of 9. All 14 could
        // read within a few reads per die; the rest must wait for programs to free room.
        let (mut d, t) = zones_0_and_2_full();
        let room = d.copy_staging_room();
        assert_eq!(room, 9);
        let ticket = queue_compaction(&mut d, t, &lbas(0..56), &lbas(68..124));
        let (mut now, mut most) = (t, 0);
        let done = loop {
            match d.ticket_status(ticket) {
                Ok(done) => break done,
                Err(_) => {
                    now += Nanos::from_us(10);
                    d.settle(now);
                    most = most.max(d.plus.staged_chunks);
                }
            }
        };
        assert_eq!(
            most, room,
            "the copies read ahead as far as the buffer holds, no further"
        );
        assert_eq!(d.plus.staged_chunks, 0);
        assert_eq!(fp_of(&mut d, done, 68), fp(0));
        assert_eq!(fp_of(&mut d, done, 123), fp(55));
    }

    #[test]
    fn destination_reads_wait_only_until_the_write_pointer_passes() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        // Read + program copies (chunk k -> chunk k + 1: another chip).
        let ticket = queue_compaction(&mut d, t, &lbas(0..56), &lbas(68..124));
        let first = d.read(t, t, Lba(68), 1, None).done;
        let last = d.read(t, t, Lba(123), 1, None).done;
        let done = d.ticket_completion(ticket);
        assert!(first < last, "{first} {last}");
        assert!(first < done && last <= done + Nanos::from_us(100));
    }

    fn bitmap(cap: u64, valid: &[std::ops::Range<u64>]) -> Vec<bool> {
        (0..cap)
            .map(|k| valid.iter().any(|r| r.contains(&k)))
            .collect()
    }

    /// TL_open of zone 0 at `t` with the blocks in `valid` valid.
    fn tl_open_zone0(d: &mut ZonedDevice, t: Nanos, valid: &[std::ops::Range<u64>]) -> Completion {
        let valid = bitmap(64, valid);
        d.tl_open(
            t,
            t,
            &[TlOpenZone {
                zslba: Lba(0),
                valid,
            }],
        )
    }

    /// A media failure on a TL_opened zone: Read Only keeps its data readable (the valid
    /// blocks past the write pointer from the original FBG) and refuses writes, close and
    /// finish without plugging; Offline ends its threaded logging and frees the original FBG.
    #[test]
    fn a_tl_opened_zone_a_media_failure_takes_is_neither_plugged_nor_written() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let c = tl_open_zone0(&mut d, t, &[8..12, 40..41]);
        assert!(c.status.is_ok());
        let w = d.write(
            c.done,
            c.done,
            Lba(0),
            WriteData::Fingerprints(&[7; 4]),
            false,
        );
        assert!(w.status.is_ok());
        let fcg = d.map.fcg_of(0);
        let free = d.map.free_fbgs(fcg);
        d.inject_state(ZoneId(0), ZoneState::ReadOnly).unwrap();
        let t = w.done + LATER;
        assert_eq!(fp_of(&mut d, t, 2), fp(7));
        assert_eq!(
            fp_of(&mut d, t, 40),
            fp(40),
            "a valid block past the write pointer"
        );
        let programs = d.flash_counters().programs;
        let bad = d.write(t, t, Lba(16), WriteData::Fingerprints(&[1]), false);
        assert_eq!(bad.status, Err(NvmeStatus::ZoneIsReadOnly));
        for (action, all) in [(ZoneAction::Finish, false), (ZoneAction::Close, true)] {
            let m = d.zone_mgmt(t, t, action, Lba(0), all);
            if !all {
                assert_eq!(m.status, Err(NvmeStatus::InvalidZoneStateTransition));
            }
        }
        let later = t + LATER;
        assert_eq!(fp_of(&mut d, later, 41), fp(41));
        assert_eq!(
            d.flash_counters().programs,
            programs,
            "nothing plugged or written"
        );
        assert!(d.is_tl_open(ZoneId(0)));
        assert_eq!(d.zone(ZoneId(0)).state, ZoneState::ReadOnly);
        // Taken offline (the Offline action, allowed from Read Only): the data is gone.
        let m = d.zone_mgmt(later, later, ZoneAction::Offline, Lba(0), false);
        assert!(m.status.is_ok(), "{:?}", m.status);
        assert!(!d.is_tl_open(ZoneId(0)));
        assert_eq!(d.map.free_fbgs(fcg), free + 1, "the original FBG is freed");
        let r = d.read(later, later, Lba(40), 1, None);
        assert_eq!(r.status, Err(NvmeStatus::ZoneIsOffline));
        // Injected offline at once, a TL_opened zone ends its threaded logging too.
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        assert!(tl_open_zone0(&mut d, t, &[8..12, 20..21]).status.is_ok());
        d.inject_state(ZoneId(0), ZoneState::Offline).unwrap();
        assert!(!d.is_tl_open(ZoneId(0)));
        let m = d.zone_mgmt(t, t, ZoneAction::Close, Lba(0), true);
        assert!(m.status.is_ok(), "{:?}", m.status);
    }

    #[test]
    fn lba_ordered_plugging_moves_the_write_pointer_past_valid_blocks() {
        let mut d = small(&["plugging=lba"]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let c = tl_open_zone0(&mut d, t, &[0..4, 8..10]);
        assert!(c.status.is_ok(), "{:?}", c.status);
        assert!(d.is_tl_open(ZoneId(0)));
        assert_eq!(d.zone(ZoneId(0)).state, ZoneState::ExplicitlyOpened);
        // Chunk 0 is valid: plugged at once, the write pointer waits at block 4.
        assert_eq!(d.zone(ZoneId(0)).wp, Lba(4));
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 4);
        let w = d.write(
            c.done,
            c.done,
            Lba(4),
            WriteData::Fingerprints(&[1, 2, 3, 4]),
            false,
        );
        assert!(w.status.is_ok());
        assert_eq!(d.zone(ZoneId(0)).wp, Lba(10));
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 6);
        // Writes to valid blocks or behind the write pointer are refused.
        let bad = d.write(w.done, w.done, Lba(2), WriteData::Fingerprints(&[9]), false);
        assert_eq!(bad.status, Err(NvmeStatus::ZoneInvalidWrite));
        assert_eq!(fp_of(&mut d, w.done, 9), fp(9));
        assert_eq!(fp_of(&mut d, w.done, 5), fp(2));
        assert_eq!(
            fp_of(&mut d, w.done, 30),
            fp(30),
            "old data ahead of the write pointer"
        );
    }

    #[test]
    fn ppa_ordered_plugging_runs_in_idle_time_and_on_demand() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        // Chunks 1 and 2 fully valid, block 17 valid alone.
        let c = tl_open_zone0(&mut d, t, &[4..12, 17..18]);
        assert!(c.status.is_ok());
        assert_eq!(
            d.zone(ZoneId(0)).wp,
            Lba(0),
            "nothing is plugged at the write pointer"
        );
        // The chips idle for a while: chunks 1 and 2 are plugged ahead (page 0 of their blocks).
        let t = c.done + LATER;
        let cb_before = d.flash_counters().copybacks;
        let w = d.write(t, t, Lba(0), WriteData::Fingerprints(&[1, 2, 3, 4]), false);
        assert!(w.status.is_ok());
        assert_eq!(d.znsplus_counters().plugged_blocks_background, 8);
        assert_eq!(d.flash_counters().copybacks, cb_before + 2);
        // Passing them costs nothing more.
        let programs = d.flash_counters().programs;
        let w = d.write(
            w.done,
            w.done,
            Lba(12),
            WriteData::Fingerprints(&[5; 5]),
            false,
        );
        assert!(w.status.is_ok());
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 0);
        assert_eq!(d.flash_counters().programs, programs + 1, "chunk 3 only");
        // Block 17 is in a partly valid chunk, the next page of its block: while the chip is
        // idle it is read ahead, and the write that passes it reads nothing.
        let t = w.done + LATER;
        d.settle(t);
        let reads = d.flash_counters().reads;
        let w = d.write(t, t, Lba(18), WriteData::Fingerprints(&[6, 7]), false);
        assert!(w.status.is_ok());
        assert_eq!(d.flash_counters().reads, reads, "read ahead");
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 0);
        assert_eq!(d.znsplus_counters().plugged_blocks_background, 9);
        let f = d.flash.timing();
        assert!(
            w.done - t < f.read + f.page_transfer + f.program,
            "the write waits for its program, not for a read too: {:?}",
            w.done - t
        );
        assert_eq!(fp_of(&mut d, w.done, 17), fp(17));
        assert_eq!(fp_of(&mut d, w.done, 8), fp(8));
        assert_eq!(fp_of(&mut d, w.done, 16), fp(5));
    }

    #[test]
    fn without_idle_time_plugging_happens_on_demand() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let c = tl_open_zone0(&mut d, t, &[4..8, 8..12, 17..18]);
        // Writes follow at once, before the device had a moment with an idle chip.
        let w = d.write(t, c.done, Lba(0), WriteData::Fingerprints(&[1; 4]), false);
        let w = d.write(t, w.done, Lba(12), WriteData::Fingerprints(&[2; 5]), false);
        let reads = d.flash_counters().reads;
        let w = d.write(t, w.done, Lba(18), WriteData::Fingerprints(&[3; 2]), false);
        assert!(w.status.is_ok());
        assert_eq!(
            d.flash_counters().reads,
            reads + 1,
            "block 17 read on demand"
        );
        assert_eq!(d.znsplus_counters().plugged_blocks_background, 0);
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 9);
        assert_eq!(
            d.znsplus_counters().copybacks,
            2,
            "whole valid chunks by copyback"
        );
    }

    #[test]
    fn without_copyback_whole_valid_chunks_are_plugged_ahead_by_read_and_program() {
        let mut d = small(&["znsplus.copyback=false"]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let c = tl_open_zone0(&mut d, t, &[4..8, 8..12]);
        assert!(c.status.is_ok());
        let (reads, programs) = (d.flash_counters().reads, d.flash_counters().programs);
        d.settle(c.done + LATER);
        assert_eq!(d.znsplus_counters().plugged_blocks_background, 8);
        assert_eq!(d.znsplus_counters().copybacks, 0);
        assert_eq!(d.znsplus_counters().readprogram_blocks, 8);
        assert_eq!(d.flash_counters().reads, reads + 2);
        assert_eq!(d.flash_counters().programs, programs + 2);
        let t = c.done + LATER + LATER;
        let w = d.write(t, t, Lba(0), WriteData::Fingerprints(&[1; 4]), false);
        let w = d.write(
            w.done,
            w.done,
            Lba(12),
            WriteData::Fingerprints(&[2; 4]),
            false,
        );
        assert!(w.status.is_ok());
        assert_eq!(d.znsplus_counters().plugged_blocks_on_demand, 0);
        assert_eq!(fp_of(&mut d, w.done, 9), fp(9));
    }

    /// Plugs found in one pass over the idle time are reserved from their start: two zones
    /// plugging into one chip take turns.
    #[test]
    fn two_zones_plugging_on_one_chip_take_turns() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0));
        let t = fill(&mut d, 1, 100, t) + LATER;
        // Chunk 1 of each zone is fully valid: page 0 of a LogFBG block on the same die.
        let zones = [0u64, 1].map(|z| TlOpenZone {
            zslba: Lba(z * 64),
            valid: bitmap(64, &[4..6, 6..8]),
        });
        let c = d.tl_open(t, t, &zones);
        assert!(c.status.is_ok());
        d.settle(c.done + LATER);
        assert_eq!(d.znsplus_counters().plugged_blocks_background, 8);
        let (a, b) = (d.plus.tl[&0].done[&1], d.plus.tl[&1].done[&1]);
        let cb = d.flash.timing().copyback;
        assert!(
            a.max(b) - a.min(b) >= cb,
            "copybacks on one die overlap: they end at {a:?} and {b:?}"
        );
    }

    #[test]
    fn the_log_fbg_replaces_the_original_on_close() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let orig = d.mapper().fbg_of(0).unwrap();
        let free = d.mapper().free_fbgs(0);
        let c = tl_open_zone0(&mut d, t, &[0..30, 40..64]);
        let log = d.mapper().fbg_of(0).unwrap();
        assert_ne!(log, orig);
        assert_eq!(d.mapper().free_fbgs(0), free - 1);
        d.validate_loaded().unwrap();
        let w = d.write(
            c.done,
            c.done,
            Lba(30),
            WriteData::Fingerprints(&[7; 10]),
            false,
        );
        assert!(w.status.is_ok());
        let cl = d.zone_mgmt(w.done, w.done, ZoneAction::Close, Lba(0), false);
        assert!(cl.status.is_ok());
        assert!(!d.is_tl_open(ZoneId(0)));
        assert_eq!(d.zone(ZoneId(0)).state, ZoneState::Full);
        assert_eq!(d.mapper().fbg_of(0), Some(log));
        assert_eq!(
            d.mapper().free_fbgs(0),
            free,
            "the original FBG is free again"
        );
        let t = cl.done;
        assert_eq!(fp_of(&mut d, t, 3), fp(3));
        assert_eq!(fp_of(&mut d, t, 35), fp(7));
        assert_eq!(fp_of(&mut d, t, 63), fp(63));
        d.validate_loaded().unwrap();
        // The zone resets and is reused as usual.
        let r = d.zone_mgmt(t, t, ZoneAction::Reset, Lba(0), false);
        assert!(r.status.is_ok());
        assert_eq!(d.mapper().free_fbgs(0), free + 1);
    }

    #[test]
    fn identify_mapping_fields_match_the_mapper() {
        for sets in [&["zone_dies=2"][..], &[][..]] {
            let mut d = small(sets);
            let (c, m) = d.identify_mapping(Nanos(0), Nanos(0));
            assert!(c.status.is_ok());
            let (fcg, chip) = (m.fcg_id.unwrap(), m.chip_id.unwrap());
            for lba in (0..8 * 64).step_by(3) {
                let zone = (lba / 64) as u32;
                let chunk = lba % 64 / 4;
                let want = d.mapper().chip_fields(zone, chunk);
                assert_eq!(m.chip_of(Lba(lba)), want);
                assert_eq!((fcg.of(lba) as u32, chip.of(lba) as u32), want);
            }
        }
    }

    #[test]
    fn bad_commands_change_nothing() {
        let mut d = small(&[]);
        let t = fill(&mut d, 0, 0, Nanos(0)) + LATER;
        let before = d.clone();
        let cases: Vec<(Vec<Lba>, Vec<Lba>, NvmeStatus)> = vec![
            (lbas(0..2), lbas(64..65), NvmeStatus::InvalidFieldInCommand),
            (lbas(0..1), vec![Lba(1 << 20)], NvmeStatus::LbaOutOfRange),
            (
                lbas(64..65),
                lbas(128..129),
                NvmeStatus::InvalidFieldInCommand,
            ),
            (
                lbas(0..2),
                vec![Lba(65), Lba(64)],
                NvmeStatus::ZoneInvalidWrite,
            ),
            (lbas(0..1), lbas(10..11), NvmeStatus::ZoneIsFull),
        ];
        for (s, dst, want) in cases {
            assert_eq!(d.zone_compaction(t, t, &s, &dst).status, Err(want));
        }
        let bad = [TlOpenZone {
            zslba: Lba(64),
            valid: vec![false; 64],
        }];
        assert_eq!(
            d.tl_open(t, t, &bad).status,
            Err(NvmeStatus::InvalidZoneStateTransition)
        );
        let bad = [TlOpenZone {
            zslba: Lba(0),
            valid: vec![false; 3],
        }];
        assert_eq!(
            d.tl_open(t, t, &bad).status,
            Err(NvmeStatus::InvalidFieldInCommand)
        );
        assert_eq!(d.zones().zones(), before.zones().zones());
        assert_eq!(d.znsplus_counters(), before.znsplus_counters());
        assert_eq!(d.flash_counters(), before.flash_counters());
    }

    #[test]
    fn the_host_stack_submits_compactions_and_tl_opens() {
        use crate::{HostStack, IoCmd, IoEngine, IoScheduler, Namespace};
        use zonelab_sim::Sim;
        let sim = Sim::new();
        let mut d = small(&[]);
        fill(&mut d, 0, 0, Nanos(0));
        let dev = Namespace::from(d).shared();
        let stack =
            HostStack::new(sim.clone(), dev.clone(), IoEngine::Spdk, IoScheduler::None).unwrap();
        let st = stack.clone();
        let (a, b) = sim
            .block_on(async move {
                let a = st
                    .submit(IoCmd::ZoneCompaction {
                        src: lbas(0..8),
                        dst: lbas(64..72),
                    })
                    .await;
                let b = st
                    .submit(IoCmd::TlOpen {
                        zones: vec![TlOpenZone {
                            zslba: Lba(0),
                            valid: vec![false; 64],
                        }],
                    })
                    .await;
                (a, b)
            })
            .unwrap();
        assert!(a.status.is_ok() && b.status.is_ok());
        assert!(a.completed > a.submitted);
        let d = dev.borrow();
        let z = d.zoned().unwrap();
        assert_eq!(z.znsplus_counters().copybacks, 2);
        assert!(z.is_tl_open(ZoneId(0)));
    }

    #[test]
    fn the_host_stack_waits_for_a_write_queued_behind_copies() {
        use crate::{HostStack, IoCmd, IoEngine, IoScheduler, Namespace, OwnedData};
        use zonelab_sim::Sim;
        let sim = Sim::new();
        let (d, t) = zones_0_and_2_full();
        let dev = Namespace::from(d).shared();
        let stack =
            HostStack::new(sim.clone(), dev.clone(), IoEngine::Spdk, IoScheduler::None).unwrap();
        let st = stack.clone();
        let s2 = sim.clone();
        let (c, w) = sim
            .block_on(async move {
                s2.sleep_until(t).await;
                let st2 = st.clone();
                let c = s2.spawn(async move {
                    st2.submit(IoCmd::ZoneCompaction {
                        src: lbas(0..56),
                        dst: lbas(68..124),
                    })
                    .await
                });
                s2.sleep_until(t + Nanos::from_us(300)).await;
                let w = st
                    .submit(IoCmd::Write {
                        slba: Lba(124),
                        data: OwnedData::Fingerprints(vec![7, 8, 9, 10]),
                    })
                    .await;
                (c.await, w)
            })
            .unwrap();
        assert!(c.status.is_ok() && w.status.is_ok());
        let mut dev = dev.borrow_mut();
        let d = dev.zoned_mut().unwrap();
        let program = d.profile.flash.program.0;
        // Its page waited for the copies queued before it in its flash block.
        assert!(
            w.completed - w.submitted > program.times(2),
            "{} - {}",
            w.completed,
            w.submitted
        );
        assert_eq!(fp_of(d, w.completed, 124), fp(7));
        assert_eq!(fp_of(d, w.completed, 127), fp(10));
    }

    type Op = (u8, u64, u64, u64);

    /// Blocks last written or copied, by LBA (fingerprints).
    type Model = HashMap<u64, u64>;

    /// Per zone, the valid bitmap of its last TL_open.
    type Bitmaps = HashMap<u64, Vec<bool>>;

    /// What [`drive`] did.
    struct Driven {
        /// Blocks last written or copied.
        model: Model,
        valid: Bitmaps,
        /// The time after the last command.
        t: Nanos,
        /// Per zone: the block after the last copy of a completed zone_compaction (its copies
        /// placed, none queued) since the zone was last reset or TL_opened.
        copied_to: HashMap<u64, u64>,
    }

    /// Runs `ops` (host writes, compactions, TL_opens, threaded-logging writes, closes,
    /// finishes, resets and media failures on zones 0-5), checking the zone invariants after
    /// each.
    fn drive(d: &mut ZonedDevice, ops: &[Op]) -> Result<Driven, TestCaseError> {
        let mut model: HashMap<u64, u64> = HashMap::new();
        let mut valid: Bitmaps = HashMap::new();
        let mut copied_to: HashMap<u64, u64> = HashMap::new();
        let mut t = Nanos(0);
        let mut stamp = 0u64;
        for &(op, zone, off, n) in ops {
            let zs = zone * 64;
            let z = d.zone(ZoneId(zone as u32)).clone();
            let wp = z.wp.0 - zs;
            let c = match op {
                0 | 1 => {
                    // A write at (TL zones: at or after) the write pointer.
                    let start = match valid
                        .get(&zone)
                        .filter(|_| d.is_tl_open(ZoneId(zone as u32)))
                    {
                        Some(v) => (wp + off % 8..64).find(|&k| !v[k as usize]),
                        None => Some(wp),
                    };
                    let Some(start) = start else { continue };
                    let mut n = n.min(64 - start);
                    if let Some(v) = valid
                        .get(&zone)
                        .filter(|_| d.is_tl_open(ZoneId(zone as u32)))
                    {
                        n = (start..start + n).take_while(|&k| !v[k as usize]).count() as u64;
                    }
                    if n == 0 {
                        continue;
                    }
                    let fps: Vec<u64> = (0..n)
                        .map(|_| {
                            stamp += 1;
                            stamp
                        })
                        .collect();
                    let c = d.write(t, t, Lba(zs + start), WriteData::Fingerprints(&fps), false);
                    if c.status.is_ok() {
                        for (k, f) in fps.iter().enumerate() {
                            model.insert(zs + start + k as u64, fp(*f));
                        }
                    }
                    c
                }
                2 => {
                    // Compact written blocks of another zone to this zone's write pointer (in a
                    // TL_opened zone, to blocks its bitmap marks invalid).
                    let from = (zone + 1 + off % 5) % 6;
                    let written: Vec<u64> = (0..64)
                        .map(|k| from * 64 + k)
                        .filter(|l| model.contains_key(l))
                        .collect();
                    if written.is_empty() {
                        continue;
                    }
                    let tl = valid
                        .get(&zone)
                        .filter(|_| d.is_tl_open(ZoneId(zone as u32)));
                    // Free destinations from the write pointer; every other one is skipped
                    // when `n` is odd (non-contiguous).
                    let free: Vec<u64> = (wp..64)
                        .filter(|&k| tl.is_none_or(|v| !v[k as usize]))
                        .enumerate()
                        .filter(|&(i, _)| n % 2 == 0 || i % 3 != 2)
                        .map(|(_, k)| k)
                        .collect();
                    let k = (n as usize * 3).min(written.len()).min(free.len());
                    let src: Vec<Lba> = written
                        .iter()
                        .skip(off as usize % written.len())
                        .take(k)
                        .map(|&l| Lba(l))
                        .collect();
                    if src.is_empty() {
                        continue;
                    }
                    let dst: Vec<Lba> = free[..k].iter().map(|&o| Lba(zs + o)).collect();
                    let c = d.zone_compaction(t, t, &src, &dst);
                    if c.status.is_ok() {
                        let vals: Vec<u64> = src.iter().map(|l| model[&l.0]).collect();
                        let last = dst.last().unwrap().0;
                        // Blocks passed over are padded; valid ones of a TL_opened zone keep
                        // their data (plugged).
                        for l in zs + wp..=last {
                            if tl.is_none_or(|v| !v[(l - zs) as usize]) {
                                model.remove(&l);
                            }
                        }
                        for (l, v) in dst.iter().zip(vals) {
                            model.insert(l.0, v);
                        }
                        if d.take_ticket().is_none() {
                            copied_to.insert(zone, last + 1 - zs);
                        }
                    }
                    c
                }
                3 => {
                    if z.state != ZoneState::Full {
                        continue;
                    }
                    let v: Vec<bool> = (0..64).map(|k| (k * 7 + off) % (n + 1) != 0).collect();
                    let c = d.tl_open(
                        t,
                        t,
                        &[TlOpenZone {
                            zslba: Lba(zs),
                            valid: v.clone(),
                        }],
                    );
                    if c.status.is_ok() {
                        valid.insert(zone, v);
                        copied_to.remove(&zone);
                    }
                    c
                }
                6 => {
                    // A media failure (`zonelab zns inject`): Read Only keeps the zone's data
                    // readable, Offline loses it.
                    let state = if n % 2 == 0 {
                        ZoneState::Offline
                    } else {
                        ZoneState::ReadOnly
                    };
                    if d.inject_state(ZoneId(zone as u32), state).is_ok()
                        && state == ZoneState::Offline
                    {
                        model.retain(|&l, _| l / 64 != zone);
                        copied_to.remove(&zone);
                    }
                    Completion {
                        done: t,
                        status: Ok(None),
                    }
                }
                4 => d.zone_mgmt(
                    t,
                    t,
                    if off % 2 == 0 {
                        ZoneAction::Close
                    } else {
                        ZoneAction::Finish
                    },
                    Lba(zs),
                    false,
                ),
                _ => {
                    let c = d.zone_mgmt(t, t, ZoneAction::Reset, Lba(zs), false);
                    if c.status.is_ok() {
                        model.retain(|&l, _| l / 64 != zone);
                        copied_to.remove(&zone);
                    }
                    c
                }
            };
            prop_assert!(c.done >= t);
            t = c.done + Nanos(off * n * 20_000);
            let inv = d.zones().check_invariants();
            prop_assert!(inv.is_ok(), "{:?}", inv);
        }
        Ok(Driven {
            model,
            valid,
            t,
            copied_to,
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// After any sequence of host writes, compactions, TL_opens, threaded-logging writes,
        /// closes, resets and media failures, every block reads back the data last written or
        /// copied to it (full payload) but in offline zones, the device stays consistent, and
        /// the flash order invariants hold.
        #[test]
        fn copies_and_threaded_logging_keep_every_block(
            lba_plugging in any::<bool>(),
            ops in proptest::collection::vec((0u8..7, 0u64..6, 0u64..64, 1u64..9), 1..60),
        ) {
            let mut d = small(if lba_plugging { &["plugging=lba"] } else { &[] });
            let Driven { model, t, .. } = drive(&mut d, &ops)?;
            let v = d.validate_loaded();
            prop_assert!(v.is_ok(), "{:?}", v);
            for (&lba, &want) in &model {
                prop_assert_eq!(fp_of(&mut d, t, lba), want, "lba {}", lba);
            }
            // A copyback moves a whole chunk; a read + program fills a destination chunk with
            // one block of data or more.
            let (c, lpc) = (d.znsplus_counters(), d.lbas_per_chunk.get());
            prop_assert_eq!(c.copyback_blocks, lpc * c.copybacks);
            prop_assert!(
                (c.readprogram_copies..=lpc * c.readprogram_copies).contains(&c.readprogram_blocks),
                "{:?}",
                c
            );
        }

    }

    proptest! {
        // Few of the sequences leave a TL_opened zone with data not yet durable: many cases.
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// A power cut (no power-loss protection) at any time after such a sequence: the
        /// device stays consistent; every zone keeps a prefix of what was written or copied
        /// to it (each block below its write pointer reads the data last put there), and at
        /// least the copies of every zone_compaction that completed, but for a partial last
        /// chunk (programmed before the command completed); a zone still TL_opened keeps every block its bitmap
        /// marks valid (the host never overwrote them), and finishing it plugs them into its
        /// LogFBG without breaking the flash order.
        #[test]
        fn power_cuts_keep_the_valid_blocks_of_tl_opened_zones(
            lba_plugging in any::<bool>(),
            ops in proptest::collection::vec((0u8..6, 0u64..6, 0u64..64, 1u64..9), 1..60),
            cut_after in 0u64..3_000_000,
        ) {
            let mut sets = vec!["power_loss_protection=false"];
            if lba_plugging { sets.push("plugging=lba"); }
            let mut d = small(&sets);
            let Driven { model, valid, t, copied_to } = drive(&mut d, &ops)?;
            let lpc = d.lbas_per_chunk.get();
            let at = t + Nanos(cut_after);
            d.power_cut(at);
            let inv = d.zones().check_invariants();
            prop_assert!(inv.is_ok(), "{:?}", inv);
            let v = d.validate_loaded();
            prop_assert!(v.is_ok(), "{:?}", v);
            for z in 0..6u64 {
                let wp = d.zone(ZoneId(z as u32)).wp.0;
                for lba in z * 64..wp.min(z * 64 + 64) {
                    if let Some(&want) = model.get(&lba) {
                        prop_assert_eq!(fp_of(&mut d, at, lba), want, "lba {} below zone {}'s write pointer", lba, z);
                    }
                }
                if let Some(&end) = copied_to.get(&z) {
                    // A partial last chunk waits in the write buffer for a flush, as written
                    // blocks do.
                    let programmed = end / lpc * lpc;
                    prop_assert!(wp >= z * 64 + programmed, "zone {} lost copies of a completed compaction (write pointer {}, copies programmed to block {})", z, wp, programmed);
                }
            }
            let tl: Vec<u64> = (0..6).filter(|&z| d.is_tl_open(ZoneId(z as u32))).collect();
            let mut t = at;
            for &z in &tl {
                let c = d.zone_mgmt(t, t, ZoneAction::Finish, Lba(z * 64), false);
                prop_assert!(c.status.is_ok(), "finish of TL zone {}: {:?}", z, c.status);
                prop_assert_eq!(d.zone(ZoneId(z as u32)).state, ZoneState::Full);
                t = c.done;
            }
            let v = d.validate_loaded();
            prop_assert!(v.is_ok(), "{:?}", v);
            for &z in &tl {
                for (k, &is_valid) in valid[&z].iter().enumerate() {
                    let lba = z * 64 + k as u64;
                    if let (true, Some(&want)) = (is_valid, model.get(&lba)) {
                        prop_assert_eq!(fp_of(&mut d, t, lba), want, "valid lba {} of TL zone {}", lba, z);
                    }
                }
            }
        }
    }
}
