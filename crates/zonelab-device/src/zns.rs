//! The zoned namespace device: the zone state machine ([`ZoneSet`]) with timing, flash mapping,
//! write buffer and stored data around it.
//!
//! Each command is processed when it arrives: its effect on zones and data is immediate, and its
//! completion time comes from reserving the resources it uses in order — firmware core, append
//! engine, PCIe link, write buffer, channels and dies (DESIGN.md "Resources are timelines"). The
//! caller (the host stack model) waits until that time.

use crate::ftl::PageFtl;
use crate::mapping::ZoneMapper;
use crate::payload::{DataStore, PayloadMode, ReadData, WriteData};
use crate::status::NvmeStatus;
use crate::write_buffer::WriteBuffer;
use crate::zone::{
    Lba, MgmtOutcome, ReportFilter, Zone, ZoneGeometry, ZoneId, ZoneSet, ZoneState, ZoneType,
};
use crate::{Profile, ProfileError};
use serde::{Deserialize, Serialize};
use zonelab_flash::{Firmware, FlashArray, FlashCounters, PcieLink, Timeline};
use zonelab_sim::{Divisor, Nanos};

/// Zone Send Action (Zone Management Send).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZoneAction {
    Open,
    Close,
    Finish,
    Reset,
    Offline,
}

impl std::str::FromStr for ZoneAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "open" => Ok(ZoneAction::Open),
            "close" => Ok(ZoneAction::Close),
            "finish" => Ok(ZoneAction::Finish),
            "reset" => Ok(ZoneAction::Reset),
            "offline" => Ok(ZoneAction::Offline),
            _ => Err(format!(
                "zone action '{s}': use open, close, finish, reset or offline"
            )),
        }
    }
}

/// The outcome of a command: when it completes, and its status (for an append, the LBA the data
/// went to).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    pub done: Nanos,
    pub status: Result<Option<Lba>, NvmeStatus>,
}

/// Device-level counters (flash operations come from the flash array).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceCounters {
    pub reads: u64,
    pub writes: u64,
    pub appends: u64,
    pub read_lbas: u64,
    pub written_lbas: u64,
    pub padded_pages: u64,
    pub zone_opens: u64,
    pub implicit_opens: u64,
    pub zone_closes: u64,
    pub zone_finishes: u64,
    pub zone_resets: u64,
    pub errors: u64,
    pub buffer_hits: u64,
}

/// Per sequential zone: how many of its chunks are scheduled for program. Chunks from there to
/// the write pointer are in the write buffer.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub(crate) struct ZoneProgress {
    pub(crate) programmed_chunks: u64,
    /// Data blocks written since the last reset (finish moves the write pointer, not this).
    pub(crate) written: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ZonedDevice {
    pub(crate) profile: Profile,
    pub(crate) lba_size: u64,
    /// LBAs per flash page (serialized as the number).
    pub(crate) lbas_per_chunk: Divisor,
    pub(crate) zones: ZoneSet,
    pub(crate) map: ZoneMapper,
    pub(crate) flash: FlashArray,
    pub(crate) pcie: PcieLink,
    pub(crate) firmware: Firmware,
    pub(crate) append_engines: Vec<Timeline>,
    pub(crate) buffer: WriteBuffer,
    pub(crate) data: DataStore,
    pub(crate) progress: Vec<ZoneProgress>,
    pub(crate) conventional: Option<PageFtl>,
    pub(crate) counters: DeviceCounters,
    /// Zone resets in progress on the firmware's low-priority management path.
    #[serde(default)]
    pub(crate) management: Management,
}

/// Zone management work runs on the firmware core at lower priority than I/O: it uses the core
/// only when no command needs it, so every I/O command handled while a reset is in progress
/// delays that reset by the command's firmware time, and I/O latency never waits for a reset
/// (seed 001 obs. 12 and 13). Resets run one at a time.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Management {
    /// (completion first promised, completion now expected) per reset not yet complete.
    pending: Vec<(Nanos, Nanos)>,
    /// When the management path is free of all queued work.
    free_at: Nanos,
}

impl Management {
    /// Queues `work` arriving at `at`; returns its provisional completion time.
    fn submit(&mut self, now: Nanos, at: Nanos, work: Nanos) -> Nanos {
        self.pending.retain(|&(_, done)| done > now);
        let start = at.max(self.free_at);
        let done = start + work;
        self.free_at = done;
        self.pending.push((done, done));
        done
    }

    /// An I/O command took `fw` of firmware time at `at`: work in progress or queued then is
    /// pushed back by as much.
    fn preempt(&mut self, at: Nanos, fw: Nanos) {
        if self.free_at <= at {
            return;
        }
        for (_, done) in self.pending.iter_mut() {
            if *done > at {
                *done += fw;
            }
        }
        self.free_at += fw;
    }

    fn current(&self, promised: Nanos) -> Nanos {
        self.pending
            .iter()
            .find(|&&(p, _)| p == promised)
            .map_or(promised, |&(_, done)| done)
    }
}

impl ZonedDevice {
    pub fn new(profile: Profile, payload: PayloadMode) -> Result<ZonedDevice, ProfileError> {
        profile.validate()?;
        if profile.namespace != crate::profile::NamespaceKind::Zoned {
            return Err(ProfileError::Invalid(format!(
                "profile '{}' describes a conventional namespace, not a zoned one; use a zoned profile such as zn540",
                profile.name
            )));
        }
        let lba_size = profile.lba_size();
        let z = &profile.zns;
        let geom = ZoneGeometry {
            zone_size: profile.zone_size_lbas(),
            zone_capacity: profile.zone_capacity_lbas(),
            zones: z.zones,
            conventional_zones: z.conventional_zones,
            max_open: z.max_open,
            max_active: z.max_active,
        };
        let zones = ZoneSet::new(geom).map_err(|e| ProfileError::Invalid(e.to_string()))?;
        let mut map = ZoneMapper::new(&profile);
        let c = &profile.controller;
        let lbas_per_chunk = Divisor::new(profile.lbas_per_chunk());
        let conventional = if z.conventional_zones > 0 {
            // Conventional zones are page-mapped over their own block groups plus two spare
            // groups per chip group they use (the over-provisioning garbage collection needs).
            let mut pool = Vec::new();
            for zid in 0..z.conventional_zones {
                map.allocate(zid);
                pool.extend(map.blocks_of(zid));
            }
            let fcgs_used = z.conventional_zones.min(profile.fcg_count());
            for fcg in 0..fcgs_used {
                for _ in 0..2 {
                    let fbg = map.take_free(fcg).ok_or_else(|| {
                        ProfileError::Invalid(
                            "conventional zones need two spare flash block groups per chip group; raise blocks_per_plane or lower zones".into(),
                        )
                    })?;
                    pool.extend(map.blocks_of_fbg(fcg, fbg));
                }
            }
            let pages = z.conventional_zones as u64 * map.chunks_per_zone();
            Some(
                PageFtl::new(pool, profile.geometry.pages_per_block, pages)
                    .map_err(|e| ProfileError::Invalid(e.to_string()))?,
            )
        } else {
            None
        };
        Ok(ZonedDevice {
            lba_size,
            lbas_per_chunk,
            flash: FlashArray::new(profile.flash_geometry(), profile.flash_timing()),
            pcie: PcieLink::new(
                c.pcie_lanes,
                c.pcie_lane_bandwidth.0,
                c.pcie_transfer_cost.0,
            ),
            firmware: Firmware::new(c.firmware_cores),
            append_engines: vec![Timeline::new(); c.append_engines as usize],
            buffer: WriteBuffer::new(c.write_buffer.0 / lba_size),
            data: DataStore::new(payload, lba_size, z.zones),
            progress: vec![ZoneProgress::default(); z.zones as usize],
            counters: DeviceCounters::default(),
            zones,
            map,
            conventional,
            management: Management::default(),
            profile,
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }
    pub fn lba_size(&self) -> u64 {
        self.lba_size
    }
    pub fn zones(&self) -> &ZoneSet {
        &self.zones
    }
    pub fn zone(&self, id: ZoneId) -> &Zone {
        self.zones.zone(id)
    }
    pub fn payload_mode(&self) -> PayloadMode {
        self.data.mode()
    }
    pub fn data(&self) -> &DataStore {
        &self.data
    }
    pub fn counters(&self) -> DeviceCounters {
        self.counters
    }
    pub fn flash(&self) -> &FlashArray {
        &self.flash
    }
    pub fn flash_counters(&self) -> FlashCounters {
        self.flash.counters()
    }
    pub fn mapper(&self) -> &ZoneMapper {
        &self.map
    }
    pub fn ftl(&self) -> Option<&PageFtl> {
        self.conventional.as_ref()
    }
    pub fn buffer_stall(&self) -> Nanos {
        self.buffer.stalled()
    }

    /// Flash bytes programmed per byte the host wrote (padding, conventional-zone garbage
    /// collection and copies included).
    pub fn write_amplification(&self) -> f64 {
        let host = self.counters.written_lbas * self.lba_size;
        if host == 0 {
            return 0.0;
        }
        let c = self.flash.counters();
        let programmed = (c.programs + c.copybacks) * self.profile.geometry.page_size.0;
        programmed as f64 / host as f64
    }

    fn error(&mut self, now: Nanos, at: Nanos, cost: Nanos, status: NvmeStatus) -> Completion {
        self.counters.errors += 1;
        let t = self.firmware.run(now, at, cost);
        Completion {
            done: t + self.profile.controller.cq_post.0,
            status: Err(status),
        }
    }

    fn arrive(&self, at: Nanos) -> Nanos {
        at + self.profile.controller.sq_fetch.0
    }

    /// Gives a zone its flash block group when it first becomes active, erasing blocks that
    /// still hold old data. Returns when the zone's first program may start.
    #[inline]
    fn ensure_mapped(&mut self, now: Nanos, at: Nanos, zone: ZoneId) -> Nanos {
        if self.map.fbg_of(zone.0).is_some() {
            return at;
        }
        self.map_zone(now, at, zone)
    }

    /// [`ZonedDevice::ensure_mapped`] for a zone without a flash block group.
    #[inline(never)]
    fn map_zone(&mut self, now: Nanos, at: Nanos, zone: ZoneId) -> Nanos {
        self.map.allocate(zone.0);
        let mut ready = at;
        for b in self.map.blocks_of(zone.0) {
            if self.flash.programmed_pages(b) > 0 {
                ready = ready.max(self.flash.erase(now, at, b));
            }
        }
        ready
    }

    /// Schedules programs for every chunk of `zone` that is full in the buffer, with data ready
    /// at `ready`. Returns when the last scheduled program completes.
    fn program_full_chunks(&mut self, now: Nanos, ready: Nanos, zone: ZoneId) -> Nanos {
        let z = self.zones.zone(zone);
        let written = z.wp.0 - z.start.0;
        let full_chunks = self.lbas_per_chunk.quotient(written);
        let mut last = ready;
        let lpc = self.lbas_per_chunk.get();
        while self.progress[zone.0 as usize].programmed_chunks < full_chunks {
            let c = self.progress[zone.0 as usize].programmed_chunks;
            let page = self.map.page_of(zone.0, c);
            let done = self.flash.program(now, ready, page);
            self.buffer.release_at(done, lpc);
            self.progress[zone.0 as usize].programmed_chunks = c + 1;
            last = last.max(done);
        }
        last
    }

    /// Write (`append` false) or Zone Append (`append` true, `slba` the zone start).
    pub fn write(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        data: WriteData<'_>,
        append: bool,
    ) -> Completion {
        let c = self.profile.controller;
        let at = self.arrive(at);
        let nlb = data.blocks(self.lba_size);
        if let WriteData::Bytes(b) = data
            && !(b.len() as u64).is_multiple_of(self.lba_size)
        {
            return self.error(now, at, c.write_cost.0, NvmeStatus::InvalidFieldInCommand);
        }
        if nlb > self.buffer_limit() {
            return self.error(now, at, c.write_cost.0, NvmeStatus::InvalidFieldInCommand);
        }
        let outcome = match self.zones.write(slba, nlb, append) {
            Ok(o) => o,
            Err(s) => return self.error(now, at, c.write_cost.0, s),
        };
        let zone = outcome.zone;
        let zinfo = self.zones.zone(zone);
        let zstart = zinfo.start;
        let conventional = zinfo.ztype == ZoneType::Conventional;
        let off = outcome.lba.0 - zstart.0;
        let mut cost = c.write_cost.0;
        let mut append_cost = c.append_cost.0;
        if outcome.implicitly_opened {
            // The open is done on the path that handles the command.
            if append {
                append_cost += c.implicit_open_append_cost.0;
            } else {
                cost += c.implicit_open_cost.0;
            }
            self.counters.implicit_opens += 1;
        }
        let bytes = nlb * self.lba_size;
        self.management.preempt(
            at,
            if append {
                c.append_dispatch_cost.0
            } else {
                cost
            },
        );
        let t = if append {
            // Appends take their own path: the core hands them to an append engine, and the
            // data moves over PCIe while the engine assigns the LBA (seed 001 obs. 4-6).
            let t = self.firmware.run(now, at, c.append_dispatch_cost.0);
            let engine = (0..self.append_engines.len())
                .min_by_key(|&i| self.append_engines[i].free_after(t))
                .expect("at least one append engine");
            let assigned = self.append_engines[engine].reserve(now, t, append_cost) + append_cost;
            self.counters.appends += 1;
            assigned.max(self.pcie.to_device(now, t, bytes))
        } else {
            let t = self.firmware.run(now, at, cost);
            self.counters.writes += 1;
            self.pcie.to_device(now, t, bytes)
        };
        let in_buffer = self.buffer.admit(t, nlb);
        self.counters.written_lbas += nlb;
        self.data.write(zone.0, off, !conventional, data);
        self.progress[zone.0 as usize].written += nlb;
        if conventional {
            self.program_conventional(now, in_buffer, zone, off, nlb);
        } else {
            let ready = self.ensure_mapped(now, in_buffer, zone);
            self.program_full_chunks(now, ready, zone);
        }
        Completion {
            done: in_buffer + c.cq_post.0,
            status: Ok(Some(outcome.lba)),
        }
    }

    /// The current completion time of a management command (zone reset) that promised
    /// `promised`: later when I/O handled in the meantime took the firmware core first.
    pub fn management_completion(&self, promised: Nanos) -> Nanos {
        let cq = self.profile.controller.cq_post.0;
        self.management.current(promised.saturating_sub(cq)) + cq
    }

    /// Largest transfer one command may carry (the buffer must hold it; MDTS-like).
    pub fn buffer_limit(&self) -> u64 {
        // The buffer holds `write_buffer / lba_size` LBAs.
        (self.buffer.capacity() / 4).max(1)
    }

    fn program_conventional(&mut self, now: Nanos, ready: Nanos, zone: ZoneId, off: u64, nlb: u64) {
        let div = self.lbas_per_chunk;
        let lpc = div.get();
        let base = zone.0 as u64 * self.map.chunks_per_zone();
        let ftl = self
            .conventional
            .as_mut()
            .expect("conventional zones have an FTL");
        let first = div.quotient(off);
        let last = div.quotient(off + nlb - 1);
        let mut release = ready;
        for chunk in first..=last {
            let lo = (chunk * lpc).max(off);
            let hi = ((chunk + 1) * lpc).min(off + nlb);
            let partial = hi - lo < lpc;
            release = release.max(ftl.write(&mut self.flash, now, ready, base + chunk, partial));
        }
        self.buffer.release_at(release, nlb);
    }

    /// Read of `nlb` blocks from `slba`; the data is appended to `out` when given.
    pub fn read(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        nlb: u64,
        out: Option<&mut ReadData>,
    ) -> Completion {
        let read_cost = self.profile.controller.read_cost.0;
        let cq_post = self.profile.controller.cq_post.0;
        let at = self.arrive(at);
        if nlb == 0 || nlb > self.buffer_limit() {
            return self.error(now, at, read_cost, NvmeStatus::InvalidFieldInCommand);
        }
        if let Err(s) = self.zones.check_read(slba, nlb) {
            return self.error(now, at, read_cost, s);
        }
        self.counters.reads += 1;
        self.counters.read_lbas += nlb;
        self.management.preempt(at, read_cost);
        let t = self.firmware.run(now, at, read_cost);
        let mut data_ready = t;
        let mut out = out;
        let zdiv = self.zones.zone_div();
        let mut lba = slba.0;
        let end = slba.0 + nlb;
        while lba < end {
            let zone = ZoneId(zdiv.quotient(lba) as u32);
            let z = self.zones.zone(zone);
            let (zstart, wp, ztype) = (z.start.0, z.wp.0, z.ztype);
            let seg_end = end.min(zstart + zdiv.get());
            let off = lba - zstart;
            let n = seg_end - lba;
            if let Some(o) = out.as_deref_mut() {
                self.data.read(zone.0, off, n, o);
            }
            data_ready = data_ready.max(self.read_timing(now, t, zone, zstart, off, n, wp, ztype));
            lba = seg_end;
        }
        let done = self.pcie.to_host(now, data_ready, nlb * self.lba_size);
        Completion {
            done: done + cq_post,
            status: Ok(None),
        }
    }

    /// Flash work of reading blocks `off..off+n` of one zone; returns when the data is in the
    /// controller. Unwritten blocks need no flash access; buffered ones are served from DRAM.
    #[allow(clippy::too_many_arguments)]
    fn read_timing(
        &mut self,
        now: Nanos,
        at: Nanos,
        zone: ZoneId,
        zstart: u64,
        off: u64,
        n: u64,
        wp: u64,
        ztype: ZoneType,
    ) -> Nanos {
        let div = self.lbas_per_chunk;
        let lpc = div.get();
        let mut ready = at;
        let first = div.quotient(off);
        let last = div.quotient(off + n - 1);
        for chunk in first..=last {
            let lo = (chunk * lpc).max(off);
            let hi = ((chunk + 1) * lpc).min(off + n);
            let bytes = (hi - lo) * self.lba_size;
            let die = match ztype {
                ZoneType::Conventional => {
                    let base = zone.0 as u64 * self.map.chunks_per_zone();
                    self.conventional
                        .as_ref()
                        .and_then(|f| f.lookup(base + chunk))
                        .map(|p| p.block.die)
                }
                ZoneType::SequentialWriteRequired => {
                    if zstart + lo >= wp {
                        None
                    } else if chunk >= self.progress[zone.0 as usize].programmed_chunks {
                        self.counters.buffer_hits += 1;
                        None
                    } else {
                        Some(self.map.die_of(zone.0, chunk))
                    }
                }
            };
            if let Some(die) = die {
                ready = ready.max(self.flash.read_on_die(now, at, die, bytes));
            }
        }
        ready
    }

    /// Zone Management Send for one zone (`select_all` false) or all zones.
    pub fn zone_mgmt(
        &mut self,
        now: Nanos,
        at: Nanos,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> Completion {
        let c = self.profile.controller;
        let at = self.arrive(at);
        let base_cost = match action {
            ZoneAction::Open => c.open_cost.0,
            ZoneAction::Close => c.close_cost.0,
            ZoneAction::Finish => c.finish_cost.0,
            ZoneAction::Reset => c.reset_cost.0,
            ZoneAction::Offline => c.close_cost.0,
        };
        let results: Vec<(ZoneId, MgmtOutcome)> = if select_all {
            let r = match action {
                ZoneAction::Open => self.zones.open_all(),
                ZoneAction::Close => self.zones.close_all(),
                ZoneAction::Finish => self.zones.finish_all(),
                ZoneAction::Reset => self.zones.reset_all(),
                ZoneAction::Offline => self.zones.offline_all(),
            };
            match r {
                Ok(v) => v,
                Err(s) => return self.error(now, at, c.open_cost.0, s),
            }
        } else {
            let zone = match self.zones.zone_of(zslba) {
                Ok(z) => z,
                Err(s) => return self.error(now, at, c.open_cost.0, s),
            };
            if self.zones.zone(zone).start != zslba {
                return self.error(now, at, c.open_cost.0, NvmeStatus::InvalidFieldInCommand);
            }
            let r = match action {
                ZoneAction::Open => self.zones.open(zone),
                ZoneAction::Close => self.zones.close(zone),
                ZoneAction::Finish => self.zones.finish(zone),
                ZoneAction::Reset => self.zones.reset(zone),
                ZoneAction::Offline => self.zones.offline(zone),
            };
            match r {
                Ok(o) => vec![(zone, o)],
                Err(s) => return self.error(now, at, c.open_cost.0, s),
            }
        };
        let mut t = at;
        let mut done = at;
        for (zone, o) in results {
            let (end, fin) = self.apply_mgmt(now, t, action, zone, o, base_cost);
            t = end;
            done = done.max(fin);
        }
        Completion {
            done: done.max(t) + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// The device-side work of one zone transition; returns (firmware done, command done).
    fn apply_mgmt(
        &mut self,
        now: Nanos,
        at: Nanos,
        action: ZoneAction,
        zone: ZoneId,
        o: MgmtOutcome,
        cost: Nanos,
    ) -> (Nanos, Nanos) {
        let noop = o.from == o.to;
        match action {
            ZoneAction::Open => {
                if !noop {
                    self.counters.zone_opens += 1;
                }
                let t = self.firmware.run(now, at, cost);
                self.ensure_mapped(now, t, zone);
                (t, t)
            }
            ZoneAction::Close | ZoneAction::Offline => {
                if !noop && action == ZoneAction::Close {
                    self.counters.zone_closes += 1;
                }
                let t = self.firmware.run(now, at, cost);
                (t, t)
            }
            ZoneAction::Reset => {
                if noop {
                    let t = self.management.submit(now, at, cost);
                    return (t, t);
                }
                self.counters.zone_resets += 1;
                let t = self
                    .management
                    .submit(now, at, cost + self.reset_work(zone, o));
                self.discard_buffered(zone);
                self.data.clear(zone.0);
                self.progress[zone.0 as usize] = ZoneProgress::default();
                // Blocks are erased when the group is next handed out, not now.
                self.map.release(zone.0);
                (t, t)
            }
            ZoneAction::Finish => {
                if noop {
                    let t = self.firmware.run(now, at, cost);
                    return (t, t);
                }
                self.counters.zone_finishes += 1;
                if o.written == 0 {
                    // Nothing written: no flash block is open, so nothing needs padding; the
                    // zone is only marked full (the ZN540 finishes an empty zone in ~13 us).
                    let c = self.profile.controller;
                    let t = self.firmware.run(now, at, c.close_cost.0);
                    return (t, t);
                }
                let t = self.management.submit(now, at, cost);
                let ready = self.ensure_mapped(now, t, zone);
                let end = self.pad_zone(now, ready, zone);
                (t, end)
            }
        }
    }

    /// Firmware work of resetting `zone` beyond the fixed cost (seed 001 obs. 10): unmapping
    /// each flash page of data, and closing the open block on every die an unfinished zone
    /// wrote to (a zone filled by writes or padded by finish has all its blocks closed).
    fn reset_work(&self, zone: ZoneId, o: MgmtOutcome) -> Nanos {
        let c = &self.profile.controller;
        let pages = o.written.div_ceil(self.lbas_per_chunk.get());
        let unmap = c.reset_cost_per_page.0.times(pages);
        let sealed = self.progress[zone.0 as usize].programmed_chunks >= self.map.chunks_per_zone();
        let open_blocks = if sealed {
            0
        } else {
            pages.min(self.map.width() as u64)
        };
        unmap + c.reset_open_block_cost.0.times(open_blocks)
    }

    /// Drops the buffered (unprogrammed) data of a zone.
    fn discard_buffered(&mut self, zone: ZoneId) {
        let buffered = self.buffered_lbas(zone);
        self.buffer.discard(buffered);
    }

    /// Blocks of a sequential zone in the buffer with no program scheduled: the partial chunk
    /// past the last full one.
    fn buffered_lbas(&self, zone: ZoneId) -> u64 {
        let p = self.progress[zone.0 as usize];
        p.written
            .saturating_sub(p.programmed_chunks * self.lbas_per_chunk.get())
    }

    /// Programs the rest of a zone with padding (finish, seed 001 obs. 10: finish time falls as
    /// occupancy rises because less must be padded). Returns when the last pad program ends.
    fn pad_zone(&mut self, now: Nanos, ready: Nanos, zone: ZoneId) -> Nanos {
        let total = self.map.chunks_per_zone();
        let buffered = self.buffered_lbas(zone);
        let mut end = ready;
        let mut first_pad = true;
        while self.progress[zone.0 as usize].programmed_chunks < total {
            let c = self.progress[zone.0 as usize].programmed_chunks;
            let page = self.map.page_of(zone.0, c);
            let done = self.flash.program(now, ready, page);
            if first_pad && buffered > 0 {
                self.buffer.release_at(done, buffered);
            }
            first_pad = false;
            self.counters.padded_pages += 1;
            self.progress[zone.0 as usize].programmed_chunks = c + 1;
            end = end.max(done);
        }
        end
    }

    /// Flush: completes when every buffered full page is programmed. Partial pages stay in the
    /// buffer, which is protected against power loss on every shipped profile.
    pub fn flush(&mut self, now: Nanos, at: Nanos) -> Completion {
        let c = self.profile.controller;
        let at = self.arrive(at);
        let t = self.firmware.run(now, at, c.read_cost.0);
        Completion {
            done: self.buffer.drained_at(now).max(t) + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// Zone Management Receive (Report Zones): descriptors from `start`, at most `max`.
    pub fn report_zones(
        &mut self,
        now: Nanos,
        at: Nanos,
        filter: ReportFilter,
        start: ZoneId,
        max: usize,
    ) -> (Completion, Vec<Zone>) {
        let c = self.profile.controller;
        let at = self.arrive(at);
        let zones = self.zones.report(filter, start, max);
        let t = self.firmware.run(now, at, c.read_cost.0);
        let t = self.pcie.to_host(now, t, 64 * (zones.len() as u64 + 1));
        (
            Completion {
                done: t + c.cq_post.0,
                status: Ok(None),
            },
            zones,
        )
    }

    /// Marks a zone read-only or offline (media failure injection for tests and tools).
    pub fn inject_state(&mut self, zone: ZoneId, state: ZoneState) -> Result<(), String> {
        let r = match state {
            ZoneState::ReadOnly => self.zones.set_read_only(zone),
            ZoneState::Offline => self.zones.set_offline(zone),
            other => {
                return Err(format!(
                    "cannot inject state {other}: only read-only and offline"
                ));
            }
        };
        r.map(|_| ()).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::OwnedData;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// A small ZNS+-like device: 8 zones of 16 chunks (4 dies x 4 pages), 4 LBAs per chunk.
    fn small(sets: &[&str]) -> ZonedDevice {
        let items: Vec<String> = [
            "channels=2",
            "chips_per_channel=2",
            "pages_per_block=4",
            "blocks_per_plane=10",
            "zone_dies=4",
            "zones=8",
            "zone_size=256KiB",
            "max_open=3",
            "max_active=4",
            "write_buffer=256KiB",
        ]
        .iter()
        .chain(sets)
        .map(|s| s.to_string())
        .collect();
        let p = Profile::load("znsplus-mlc", &Profile::parse_overrides(&items).unwrap()).unwrap();
        ZonedDevice::new(p, PayloadMode::Full).unwrap()
    }

    fn block(v: u8) -> Vec<u8> {
        vec![v; 4096]
    }

    #[test]
    fn geometry_of_the_small_device() {
        let d = small(&[]);
        assert_eq!(d.zones().geometry().zone_capacity, 64);
        assert_eq!(d.zones().geometry().zone_size, 64);
        assert_eq!(d.lbas_per_chunk.get(), 4);
    }

    #[test]
    fn qd1_write_completes_from_the_buffer() {
        let mut d = small(&[]);
        let c = d.profile.controller;
        let got = d.write(
            Nanos(0),
            Nanos(0),
            Lba(0),
            WriteData::Bytes(&block(1)),
            false,
        );
        assert_eq!(got.status, Ok(Some(Lba(0))));
        let pcie = c.pcie_transfer_cost.0
            + Nanos::for_transfer(4096, c.pcie_lanes as u64 * c.pcie_lane_bandwidth.0);
        let expect = c.sq_fetch.0 + c.write_cost.0 + c.implicit_open_cost.0 + pcie + c.cq_post.0;
        assert_eq!(got.done, expect);
        // A partial flash page is not programmed yet.
        assert_eq!(d.flash_counters().programs, 0);
    }

    #[test]
    fn a_full_chunk_is_programmed_and_later_read_from_flash() {
        let mut d = small(&[]);
        let mut t = Nanos(0);
        for i in 0..4u8 {
            t = d
                .write(t, t, Lba(i as u64), WriteData::Bytes(&block(i)), false)
                .done;
        }
        assert_eq!(d.flash_counters().programs, 1);
        let mut out = ReadData::default();
        let r = d.read(t, t, Lba(0), 4, Some(&mut out));
        assert!(r.status.is_ok());
        assert_eq!(d.flash_counters().reads, 1);
        assert_eq!(out.bytes[..4096], block(0)[..]);
        assert_eq!(out.bytes[3 * 4096..], block(3)[..]);
        // Read latency includes the array read.
        assert!(r.done - t >= d.profile.flash.read.0);
        // Data of the partial page is served from the buffer.
        t = d
            .write(r.done, r.done, Lba(4), WriteData::Bytes(&block(9)), false)
            .done;
        let mut out = ReadData::default();
        d.read(t, t, Lba(4), 1, Some(&mut out));
        assert_eq!(d.flash_counters().reads, 1);
        assert_eq!(d.counters().buffer_hits, 1);
        assert_eq!(out.bytes, block(9));
    }

    #[test]
    fn rule_violations_change_nothing() {
        let mut d = small(&[]);
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(3),
            WriteData::Bytes(&block(1)),
            false,
        );
        assert_eq!(c.status, Err(NvmeStatus::ZoneInvalidWrite));
        assert_eq!(d.zone(ZoneId(0)).state, ZoneState::Empty);
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(1 << 30),
            WriteData::Bytes(&block(1)),
            false,
        );
        assert_eq!(c.status, Err(NvmeStatus::LbaOutOfRange));
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(0),
            WriteData::Bytes(&[0u8; 100]),
            false,
        );
        assert_eq!(c.status, Err(NvmeStatus::InvalidFieldInCommand));
        let c = d.zone_mgmt(Nanos(0), Nanos(0), ZoneAction::Close, Lba(0), false);
        assert_eq!(c.status, Err(NvmeStatus::InvalidZoneStateTransition));
        let c = d.zone_mgmt(Nanos(0), Nanos(0), ZoneAction::Open, Lba(5), false);
        assert_eq!(c.status, Err(NvmeStatus::InvalidFieldInCommand));
        assert_eq!(d.counters().errors, 5);
        assert_eq!(d.counters().written_lbas, 0);
        assert_eq!(d.flash_counters(), FlashCounters::default());
    }

    #[test]
    fn append_returns_consecutive_lbas() {
        let mut d = small(&[]);
        let zslba = Lba(64);
        let mut lbas = Vec::new();
        for i in 0..3u8 {
            let c = d.write(Nanos(0), Nanos(0), zslba, WriteData::Bytes(&block(i)), true);
            lbas.push(c.status.unwrap().unwrap());
        }
        assert_eq!(lbas, vec![Lba(64), Lba(65), Lba(66)]);
        assert_eq!(d.counters().appends, 3);
    }

    #[test]
    fn finish_pads_the_rest_and_costs_less_when_fuller() {
        let mut lat = Vec::new();
        for filled in [1u64, 16, 32, 63] {
            let mut d = small(&[]);
            let mut t = Nanos(0);
            for i in 0..filled {
                t = d
                    .write(t, t, Lba(i), WriteData::Bytes(&block(1)), false)
                    .done;
            }
            let settle = d.buffer.drained_at(t);
            let c = d.zone_mgmt(settle, settle, ZoneAction::Finish, Lba(0), false);
            assert!(c.status.is_ok());
            assert_eq!(d.zone(ZoneId(0)).state, ZoneState::Full);
            let chunks = d.mapper().chunks_per_zone();
            assert_eq!(
                d.flash_counters().programs,
                chunks,
                "every page of the zone programmed"
            );
            assert_eq!(d.counters().padded_pages, chunks - filled / 4);
            lat.push(c.done - settle);
        }
        assert!(
            lat.windows(2).all(|w| w[0] >= w[1]),
            "finish latency by occupancy: {lat:?}"
        );
        assert!(lat[0] > lat[3]);
    }

    #[test]
    fn reset_costs_more_with_more_data_and_blocks_are_erased_on_reuse() {
        // No spare block groups: a reset zone gets its own group back and must erase it.
        let mut d = small(&["blocks_per_plane=8"]);
        let mut t = Nanos(0);
        for i in 0..64u64 {
            t = d
                .write(t, t, Lba(i), WriteData::Fingerprints(&[i]), false)
                .done;
        }
        assert_eq!(d.zone(ZoneId(0)).state, ZoneState::Full);
        let full_reset = d.zone_mgmt(t, t, ZoneAction::Reset, Lba(0), false);
        let t = full_reset.done;
        let empty_reset = d.zone_mgmt(t, t, ZoneAction::Reset, Lba(64), false);
        assert!(
            full_reset.done - t > empty_reset.done - t
                || d.profile.controller.reset_cost_per_page.0 == Nanos::ZERO
        );
        assert_eq!(
            d.counters().zone_resets,
            1,
            "resetting an empty zone is a no-op"
        );
        assert_eq!(d.flash_counters().erases, 0, "reset itself does not erase");
        // Reopen every zone so zone 0's old group is handed out again.
        let mut t = empty_reset.done;
        for z in 0..8u64 {
            t = d
                .write(t, t, Lba(z * 64), WriteData::Fingerprints(&[7]), false)
                .done;
            if d.zones().active_count() >= 3 {
                let zs = Lba(z * 64);
                t = d.zone_mgmt(t, t, ZoneAction::Finish, zs, false).done;
            }
        }
        assert!(
            d.flash_counters().erases > 0,
            "a reused block group is erased before programming"
        );
        let (total, max) = d.flash().wear_summary();
        assert!(total > 0 && max == 1);
    }

    #[test]
    fn the_write_buffer_pushes_back_when_full() {
        let mut d = small(&["write_buffer=96KiB"]);
        let mut t = Nanos(0);
        let mut lat = Vec::new();
        for i in 0..64u64 {
            let c = d.write(t, t, Lba(i), WriteData::Fingerprints(&[i]), false);
            lat.push(c.done - t);
            t = c.done;
        }
        assert!(d.buffer_stall() > Nanos::ZERO);
        assert!(lat.iter().max() > lat.iter().min());
    }

    #[test]
    fn conventional_zones_take_random_overwrites() {
        let mut d = small(&["conventional_zones=2"]);
        assert_eq!(d.zone(ZoneId(0)).ztype, ZoneType::Conventional);
        let mut t = Nanos(0);
        let mut rng = zonelab_sim::SimRng::new(5);
        let mut model: HashMap<u64, u8> = HashMap::new();
        for i in 0..2000u64 {
            let lba = rng.below(128);
            let v = (i % 251) as u8;
            let c = d.write(t, t, Lba(lba), WriteData::Bytes(&block(v)), false);
            assert!(c.status.is_ok(), "{:?}", c.status);
            model.insert(lba, v);
            t = c.done;
        }
        for (lba, v) in model {
            let mut out = ReadData::default();
            d.read(t, t, Lba(lba), 1, Some(&mut out));
            assert_eq!(out.bytes, block(v), "lba {lba}");
        }
        let ftl = d.ftl().unwrap();
        ftl.check_invariants();
        assert!(ftl.counters().gc_erases > 0);
        assert!(d.write_amplification() > 1.0);
        // Zone management does not apply to conventional zones.
        let c = d.zone_mgmt(t, t, ZoneAction::Reset, Lba(0), false);
        assert!(c.status.is_err());
    }

    #[test]
    fn host_stack_merges_sequential_writes_under_mq_deadline() {
        use crate::{HostStack, IoCmd, IoEngine, IoScheduler};
        use std::cell::RefCell;
        use std::rc::Rc;
        use zonelab_sim::Sim;
        let sim = Sim::new();
        let dev = Rc::new(RefCell::new(small(&[])));
        assert!(
            HostStack::new(
                sim.clone(),
                dev.clone(),
                IoEngine::Spdk,
                IoScheduler::MqDeadline
            )
            .is_err()
        );
        let stack = HostStack::new(
            sim.clone(),
            dev.clone(),
            IoEngine::IoUring,
            IoScheduler::MqDeadline,
        )
        .unwrap();
        let s = sim.clone();
        let st = stack.clone();
        let statuses = sim
            .block_on(async move {
                let mut hs = Vec::new();
                for i in 0..16u64 {
                    let st = st.clone();
                    hs.push(s.spawn(async move {
                        st.submit(IoCmd::Write {
                            slba: Lba(i),
                            data: OwnedData::Fingerprints(vec![i]),
                        })
                        .await
                        .status
                    }));
                }
                let mut out = Vec::new();
                for h in hs {
                    out.push(h.await);
                }
                out
            })
            .unwrap();
        assert!(statuses.iter().all(|s| s.is_ok()));
        let c = stack.counters();
        assert_eq!(c.dispatched + c.merged, 16);
        assert!(c.merged >= 8, "{c:?}");
        assert_eq!(dev.borrow().zone(ZoneId(0)).wp, Lba(16));
    }

    proptest! {
        /// Random command streams never panic, keep zone invariants, and every read returns what
        /// the last successful write put there (zeros elsewhere).
        #[test]
        fn random_commands_keep_data_and_rules(ops in proptest::collection::vec((0u8..6, 0u64..8, 0u64..70, 1u64..6), 1..120)) {
            let mut d = small(&["conventional_zones=1"]);
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut t = Nanos(0);
            let mut stamp = 0u64;
            for (op, zone, off, n) in ops {
                let zslba = zone * 64;
                let c = match op {
                    0 | 1 => {
                        let slba = if op == 0 { d.zone(ZoneId(zone as u32)).wp.0 } else { zslba + off };
                        let fps: Vec<u64> = (0..n).map(|k| { stamp += 1; stamp * 100 + k }).collect();
                        let c = d.write(t, t, Lba(slba), WriteData::Fingerprints(&fps), false);
                        if c.status.is_ok() {
                            for (k, fp) in fps.iter().enumerate() { model.insert(slba + k as u64, *fp); }
                        }
                        c
                    }
                    2 => {
                        let fps: Vec<u64> = (0..n).map(|k| { stamp += 1; stamp * 100 + k }).collect();
                        let c = d.write(t, t, Lba(zslba), WriteData::Fingerprints(&fps), true);
                        if let Ok(Some(l)) = c.status {
                            for (k, fp) in fps.iter().enumerate() { model.insert(l.0 + k as u64, *fp); }
                        }
                        c
                    }
                    3 => {
                        let action = [ZoneAction::Open, ZoneAction::Close, ZoneAction::Finish, ZoneAction::Reset][(off % 4) as usize];
                        let c = d.zone_mgmt(t, t, action, Lba(zslba), false);
                        if action == ZoneAction::Reset && c.status.is_ok() {
                            model.retain(|&l, _| l / 64 != zone);
                        }
                        c
                    }
                    _ => {
                        let slba = zslba + off;
                        let mut out = ReadData::default();
                        let c = d.read(t, t, Lba(slba), n, Some(&mut out));
                        if c.status.is_ok() {
                            let mut expect = Vec::new();
                            for k in 0..n {
                                match model.get(&(slba + k)) {
                                    Some(fp) => crate::payload::block_from_fingerprint(*fp, 4096, &mut expect),
                                    None => expect.resize(expect.len() + 4096, 0),
                                }
                            }
                            prop_assert_eq!(out.bytes.len(), expect.len());
                            prop_assert!(out.bytes == expect, "read of {}+{} differs", slba, n);
                        }
                        c
                    }
                };
                prop_assert!(c.done >= t);
                t = t.max(c.done.saturating_sub(Nanos(1)));
                let inv = d.zones().check_invariants();
                prop_assert!(inv.is_ok(), "{:?}", inv);
            }
        }
    }
}
