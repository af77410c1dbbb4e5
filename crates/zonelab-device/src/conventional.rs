//! The conventional namespace: an NVMe NVM-command-set (block interface) SSD over the same flash
//! and controller as the zoned device — the baseline of seed 003 and of seed 001 §III-F.
//!
//! * Capacity: the host sees the raw flash times (1 - `ftl.over_provisioning`), rounded down to
//!   whole flash pages ([`Profile::host_pages`]); the rest is the FTL's spare space.
//! * Mapping: a [`PageFtl`] over every block of every die, mapping each logical block on its own
//!   (a 4 KiB indirection table for 4 KiB LBAs). Written blocks wait in the write buffer until a
//!   flash page's worth of them (any LBAs) is there; that page is then programmed on the next die
//!   in round-robin order. A write therefore never reads old data (no read-modify-write): a
//!   logical block is always written whole, and partial pages are filled by other blocks. A
//!   block overwritten while still buffered replaces its buffered copy.
//! * Garbage collection: greedy, inside the FTL, when every die is short of free blocks
//!   (`ftl.gc_free_blocks`), as a burst on every die until `ftl.gc_burst` of each die's spare
//!   blocks are free. It reserves real time on the dies (copyback or read + program,
//!   then erase), so host programs queue behind it: the write buffer fills, writes stall
//!   (back-pressure), and reads of data on a die being cleaned wait — the interference of seed 001
//!   observation 11.
//! * Costs: the same firmware, PCIe, `sq_fetch` and `cq_post` costs as [`ZonedDevice`]
//!   (`controller.read_cost` / `write_cost`).
//! * Zoned commands (Zone Management Send/Receive, Zone Append) are not part of the NVM command
//!   set: they complete with Invalid Command Opcode, as a conventional namespace returns for an
//!   opcode of another command set.
//!
//! [`ZonedDevice`]: crate::ZonedDevice

use crate::durability::{PowerCutReport, UndoLog};
use crate::ftl::{FtlCounters, PageFtl};
use crate::payload::{DataStore, PayloadMode, ReadData, WriteData};
use crate::profile::NamespaceKind;
use crate::status::NvmeStatus;
use crate::write_buffer::WriteBuffer;
use crate::zns::{Completion, DeviceCounters};
use crate::zone::Lba;
use crate::{Profile, ProfileError};
use serde::{Deserialize, Serialize};
use zonelab_flash::{BlockAddr, DieId, Firmware, FlashArray, FlashCounters, PcieLink};
use zonelab_sim::Nanos;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConventionalDevice {
    /// Stored as its TOML text in device images, so profile fields added later (with serde
    /// defaults) load from older images ([`crate::profile::as_toml_text`]).
    #[serde(with = "crate::profile::as_toml_text")]
    profile: Profile,
    lba_size: u64,
    /// Logical blocks per flash page.
    lbas_per_page: u64,
    total_lbas: u64,
    flash: FlashArray,
    pcie: PcieLink,
    firmware: Firmware,
    buffer: WriteBuffer,
    ftl: PageFtl,
    /// Logical blocks in the write buffer that do not yet fill a flash page (at most
    /// `lbas_per_page - 1`), in arrival order.
    open_page: Vec<u64>,
    /// When the data of `open_page` is all in the buffer.
    open_page_ready: Nanos,
    data: DataStore,
    counters: DeviceCounters,
    /// Writes not yet durable, to undo at a power loss (kept only without power-loss
    /// protection).
    #[serde(default)]
    undo: UndoLog,
}

impl ConventionalDevice {
    pub fn new(profile: Profile, payload: PayloadMode) -> Result<ConventionalDevice, ProfileError> {
        profile.validate()?;
        if profile.namespace != NamespaceKind::Conventional {
            return Err(ProfileError::Invalid(format!(
                "profile '{}' describes a zoned namespace; a conventional device needs namespace = \"conventional\"",
                profile.name
            )));
        }
        let ftl_cfg = profile
            .ftl
            .expect("validated conventional profiles have an [ftl] section");
        let lba_size = profile.lba_size();
        let lbas_per_page = profile.lbas_per_chunk();
        let geom = profile.flash_geometry();
        let mut pool = Vec::new();
        for die in 0..geom.total_dies() {
            for plane in 0..geom.planes_per_die {
                for block in 0..geom.blocks_per_plane {
                    pool.push(BlockAddr {
                        die: DieId(die),
                        plane,
                        block,
                    });
                }
            }
        }
        let total_lbas = profile.host_pages() * lbas_per_page;
        let ftl = PageFtl::with_units(
            pool,
            geom.pages_per_block,
            lbas_per_page as u32,
            ftl_cfg.gc_free_blocks,
            ftl_cfg.gc_burst,
            total_lbas,
        )
        .map_err(|e| {
            ProfileError::Invalid(format!(
                "{e}; raise ftl.over_provisioning or blocks_per_plane"
            ))
        })?;
        let c = &profile.controller;
        Ok(ConventionalDevice {
            lba_size,
            lbas_per_page,
            total_lbas,
            flash: FlashArray::new(geom, profile.flash_timing()),
            pcie: PcieLink::new(
                c.pcie_lanes,
                c.pcie_lane_bandwidth.0,
                c.pcie_transfer_cost.0,
            ),
            firmware: Firmware::new(c.firmware_cores),
            buffer: WriteBuffer::new(c.write_buffer.0 / lba_size),
            ftl,
            open_page: Vec::with_capacity(lbas_per_page as usize),
            open_page_ready: Nanos::ZERO,
            data: DataStore::new(payload, lba_size, 1),
            counters: DeviceCounters::default(),
            undo: UndoLog::default(),
            profile,
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }
    /// Restores, from the profile, what device images leave out: the flash array's modes
    /// ([`zonelab_flash::FlashTiming::read_holds_die`], `cache_program`). Image loaders call
    /// it after decoding.
    pub fn restore_from_profile(&mut self) {
        self.flash.set_modes_from(&self.profile.flash_timing());
    }
    pub fn lba_size(&self) -> u64 {
        self.lba_size
    }
    /// Logical blocks the host can address.
    pub fn total_lbas(&self) -> u64 {
        self.total_lbas
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
    /// Die time per 10 ms of simulated time ([`FlashArray::die_busy_log`]).
    pub fn die_busy_log(&self) -> &[u64] {
        self.flash.die_busy_log()
    }
    pub fn ftl(&self) -> &PageFtl {
        &self.ftl
    }
    /// Garbage-collection work of the FTL: units copied, blocks erased, pages programmed.
    pub fn gc_counters(&self) -> FtlCounters {
        self.ftl.counters()
    }
    pub fn payload_mode(&self) -> PayloadMode {
        self.data.mode()
    }
    pub fn data(&self) -> &DataStore {
        &self.data
    }
    pub fn buffer_stall(&self) -> Nanos {
        self.buffer.stalled()
    }

    /// Largest transfer one command may carry (as for the zoned device: a quarter of the buffer).
    pub fn buffer_limit(&self) -> u64 {
        (self.profile.controller.write_buffer.0 / self.lba_size / 4).max(1)
    }

    /// Flash bytes programmed (host pages, padding and garbage-collection copies) per byte the
    /// host wrote.
    pub fn write_amplification(&self) -> f64 {
        let host = self.counters.written_lbas * self.lba_size;
        if host == 0 {
            return 0.0;
        }
        let c = self.flash.counters();
        let programmed = (c.programs + c.copybacks) * self.profile.geometry.page_size.0;
        programmed as f64 / host as f64
    }

    fn arrive(&self, at: Nanos) -> Nanos {
        at + self.profile.controller.sq_fetch.0
    }

    fn error(&mut self, now: Nanos, at: Nanos, cost: Nanos, status: NvmeStatus) -> Completion {
        self.counters.errors += 1;
        let t = self.firmware.run(now, at, cost);
        Completion {
            done: t + self.profile.controller.cq_post.0,
            status: Err(status),
        }
    }

    fn check_range(&self, slba: Lba, nlb: u64) -> Result<(), NvmeStatus> {
        match slba.0.checked_add(nlb) {
            Some(end) if end <= self.total_lbas => Ok(()),
            _ => Err(NvmeStatus::LbaOutOfRange),
        }
    }

    /// Write of `nlb` blocks at `slba`. `append` true (Zone Append) is not an NVM command:
    /// Invalid Command Opcode.
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
        if append {
            return self.error(now, at, c.write_cost.0, NvmeStatus::InvalidOpcode);
        }
        let nlb = data.blocks(self.lba_size);
        if let WriteData::Bytes(b) = data
            && !(b.len() as u64).is_multiple_of(self.lba_size)
        {
            return self.error(now, at, c.write_cost.0, NvmeStatus::InvalidFieldInCommand);
        }
        if nlb == 0 || nlb > self.buffer_limit() {
            return self.error(now, at, c.write_cost.0, NvmeStatus::InvalidFieldInCommand);
        }
        if let Err(s) = self.check_range(slba, nlb) {
            return self.error(now, at, c.write_cost.0, s);
        }
        self.counters.writes += 1;
        self.counters.written_lbas += nlb;
        let t = self.firmware.run(now, at, c.write_cost.0);
        let t = self.pcie.to_device(now, t, nlb * self.lba_size);
        let in_buffer = self.buffer.admit(t, nlb);
        // When the last page this write fills is programmed.
        let mut programmed = in_buffer;
        if !c.power_loss_protection {
            self.undo.prune(now);
            // What each block held before, kept until the block is durable (per block: a
            // block overwritten while it waits in the open page keeps its first record).
            for lba in slba.0..slba.0 + nlb {
                if !self.open_page.contains(&lba) {
                    let prior = self.data.prior(0, lba, 1);
                    self.undo.push(0, lba, prior, Nanos::ZERO, true);
                }
                self.data
                    .write(0, lba, None, data.block(self.lba_size, lba - slba.0));
                programmed = programmed.max(self.buffer_block(now, in_buffer, lba));
            }
        } else {
            self.data.write(0, slba.0, None, data);
            for lba in slba.0..slba.0 + nlb {
                programmed = programmed.max(self.buffer_block(now, in_buffer, lba));
            }
        }
        let done = c.write_completion.completes_at(in_buffer, programmed);
        Completion {
            done: done + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// Takes logical block `lba`, whose data is in the buffer at `ready`, into the open page;
    /// programs the page when it is full and returns when that program completes (else
    /// `ready`).
    fn buffer_block(&mut self, now: Nanos, ready: Nanos, lba: u64) -> Nanos {
        if let Some(i) = self.open_page.iter().position(|&l| l == lba) {
            // The buffered copy is replaced: its space frees at once.
            self.open_page.remove(i);
            self.buffer.discard(1);
        } else {
            // The copy on flash is stale from now on (garbage collection must not move it).
            self.ftl.trim(lba);
        }
        self.open_page.push(lba);
        self.open_page_ready = self.open_page_ready.max(ready);
        if self.open_page.len() as u64 == self.lbas_per_page {
            let done =
                self.ftl
                    .program_units(&mut self.flash, now, self.open_page_ready, &self.open_page);
            self.buffer.release_at(done, self.lbas_per_page);
            self.open_page.clear();
            if !self.profile.controller.power_loss_protection {
                self.undo.page_programmed(done);
            }
            return done;
        }
        ready
    }

    /// Read of `nlb` blocks from `slba`; the data is appended to `out` when given. Blocks in the
    /// write buffer are served from DRAM, unwritten ones need no flash access, the rest are
    /// read from flash once per page.
    pub fn read(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        nlb: u64,
        out: Option<&mut ReadData>,
    ) -> Completion {
        let c = self.profile.controller;
        let at = self.arrive(at);
        if nlb == 0 || nlb > self.buffer_limit() {
            return self.error(now, at, c.read_cost.0, NvmeStatus::InvalidFieldInCommand);
        }
        if let Err(s) = self.check_range(slba, nlb) {
            return self.error(now, at, c.read_cost.0, s);
        }
        self.counters.reads += 1;
        self.counters.read_lbas += nlb;
        let t = self.firmware.run(now, at, c.read_cost.0);
        if let Some(o) = out {
            self.data.read(0, slba.0, nlb, o);
        }
        let mut ready = t;
        // Consecutive blocks on one flash page are read with one array read.
        let mut run: Option<(zonelab_flash::PageAddr, u64)> = None;
        for lba in slba.0..slba.0 + nlb {
            if self.open_page.contains(&lba) {
                self.counters.buffer_hits += 1;
                continue;
            }
            let Some(p) = self.ftl.lookup(lba) else {
                continue;
            };
            match &mut run {
                Some((q, n)) if *q == p => *n += 1,
                _ => {
                    if let Some((q, n)) = run.take() {
                        ready = ready.max(self.flash.read(now, t, q, n * self.lba_size));
                    }
                    run = Some((p, 1));
                }
            }
        }
        if let Some((q, n)) = run {
            ready = ready.max(self.flash.read(now, t, q, n * self.lba_size));
        }
        let done = self.pcie.to_host(
            self.profile.controller.pcie_duplex,
            now,
            ready,
            nlb * self.lba_size,
        );
        Completion {
            done: done + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// Flush: completes when every scheduled program has completed. With power-loss
    /// protection the open partial page stays in the buffer (the capacitors save it); without
    /// it the flush programs that page, padded, so everything written before the flush is
    /// durable when it completes.
    pub fn flush(&mut self, now: Nanos, at: Nanos) -> Completion {
        let c = self.profile.controller;
        let at = self.arrive(at);
        let t = self.firmware.run(now, at, c.read_cost.0);
        if !c.power_loss_protection && !self.open_page.is_empty() {
            let ready = self.open_page_ready.max(t);
            let done = self
                .ftl
                .program_units(&mut self.flash, now, ready, &self.open_page);
            self.buffer.release_at(done, self.open_page.len() as u64);
            self.counters.padded_pages += 1;
            self.open_page.clear();
            self.undo.page_programmed(done);
        }
        Completion {
            done: self.buffer.drained_at(now).max(t) + c.cq_post.0,
            status: Ok(None),
        }
    }

    /// The device loses power at `at` and power returns (see
    /// [`ZonedDevice::power_cut`](crate::ZonedDevice::power_cut) for the model): with
    /// power-loss protection every accepted write survives and the open partial page stays
    /// buffered; without it, writes whose page program (or a flush after them) had not
    /// completed by `at` are undone block by block, back to the newest durable contents, and
    /// the open page is gone. The FTL keeps its mapping (timing and space only; pages whose
    /// program was cut stay used, as firmware skips them). Work in flight is aborted.
    pub fn power_cut(&mut self, at: Nanos) -> PowerCutReport {
        self.firmware.cancel_after(at);
        self.pcie.cancel_after(at);
        self.flash.cancel_after(at);
        let mut report = PowerCutReport::default();
        if self.profile.controller.power_loss_protection {
            self.buffer.power_up(self.open_page.len() as u64);
        } else {
            report.lost_blocks = self.undo.revert(at, &mut self.data);
            self.open_page.clear();
            self.buffer.power_up(0);
        }
        report
    }

    /// A command of the Zoned Namespace command set (zone management send/receive, zone
    /// append): Invalid Command Opcode on a conventional namespace.
    pub fn zoned_command(&mut self, now: Nanos, at: Nanos) -> Completion {
        let at = self.arrive(at);
        let cost = self.profile.controller.read_cost.0;
        self.error(now, at, cost, NvmeStatus::InvalidOpcode)
    }

    /// Checks the FTL's mapping and the buffered page (tests and audits).
    /// Checks a device decoded from an image file against its own profile, so that a damaged
    /// image is refused with a message instead of failing later (the checks of the sizes every
    /// command relies on; the FTL's mapping is trusted to the image's checksum).
    pub fn validate_loaded(&self) -> Result<(), String> {
        let p = &self.profile;
        p.validate().map_err(|e| format!("device profile: {e}"))?;
        if p.namespace != NamespaceKind::Conventional {
            return Err("a conventional device with a zoned profile".into());
        }
        if self.lba_size != p.lba_size() || self.lbas_per_page != p.lbas_per_chunk() {
            return Err(format!(
                "LBA size {} and {} LBAs per page differ from the profile's {} and {}",
                self.lba_size,
                self.lbas_per_page,
                p.lba_size(),
                p.lbas_per_chunk()
            ));
        }
        if self.total_lbas != p.host_pages() * self.lbas_per_page {
            return Err(format!(
                "{} LBAs, the profile gives {}",
                self.total_lbas,
                p.host_pages() * self.lbas_per_page
            ));
        }
        if *self.flash.geometry() != p.flash_geometry() {
            return Err("flash geometry differs from the profile's".into());
        }
        if self.open_page.len() as u64 >= self.lbas_per_page
            || self.open_page.iter().any(|&l| l >= self.total_lbas)
        {
            return Err("write buffer holds impossible blocks".into());
        }
        Ok(())
    }

    pub fn check_invariants(&self) {
        self.ftl.check_invariants();
        assert!(
            (self.open_page.len() as u64) < self.lbas_per_page,
            "open page over-full"
        );
        for &l in &self.open_page {
            assert!(
                self.ftl.lookup(l).is_none(),
                "buffered block {l} also mapped to flash"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    /// 4 dies x 12 blocks x 8 pages of 16 KiB (4 LBAs each), 25% over-provisioning.
    fn small(sets: &[&str]) -> ConventionalDevice {
        let items: Vec<String> = [
            "channels=2",
            "chips_per_channel=2",
            "dies_per_chip=1",
            "blocks_per_plane=12",
            "pages_per_block=8",
            "over_provisioning=0.25",
            "write_buffer=256KiB",
        ]
        .iter()
        .chain(sets)
        .map(|s| s.to_string())
        .collect();
        let p = Profile::load("sn640", &Profile::parse_overrides(&items).unwrap()).unwrap();
        ConventionalDevice::new(p, PayloadMode::Fingerprint).unwrap()
    }

    #[test]
    fn capacity_is_raw_minus_over_provisioning_in_whole_pages() {
        let d = small(&[]);
        // 4 dies x 12 blocks x 8 pages = 384 pages; 75% = 288 pages of 4 LBAs.
        assert_eq!(d.total_lbas(), 288 * 4);
        let p = Profile::load("sn640", &[]).unwrap();
        let raw = 64u64 * 950 * 1077;
        assert_eq!(p.host_pages(), raw * 93 / 100);
        let p = Profile::load("sn640-op28", &[]).unwrap();
        assert_eq!(p.host_pages(), raw * 72 / 100);
    }

    #[test]
    fn a_write_that_fills_a_page_can_complete_once_it_is_programmed() {
        let program = small(&[]).profile.flash.program.0;
        let mut took = Vec::new();
        for mode in ["buffered", "programmed"] {
            let mut d = small(&[&format!("write_completion=\"{mode}\"")]);
            let c = d.write(
                Nanos(0),
                Nanos(0),
                Lba(0),
                WriteData::Fingerprints(&[1, 2, 3, 4]),
                false,
            );
            assert_eq!(d.flash_counters().programs, 1, "{mode}");
            took.push(c.done);
        }
        assert!(took[0] < program, "{took:?}");
        assert!(took[1] > program, "{took:?}");
    }

    #[test]
    fn sub_page_writes_wait_for_a_full_page_and_read_from_the_buffer() {
        let mut d = small(&[]);
        let mut t = Nanos(0);
        for (i, lba) in [7u64, 100, 3].iter().enumerate() {
            let c = d.write(
                t,
                t,
                Lba(*lba),
                WriteData::Fingerprints(&[i as u64 + 1]),
                false,
            );
            assert_eq!(c.status, Ok(None));
            t = c.done;
        }
        assert_eq!(
            d.flash_counters().programs,
            0,
            "three blocks do not fill a page"
        );
        let mut out = ReadData::default();
        let r = d.read(t, t, Lba(100), 1, Some(&mut out));
        assert_eq!(out.fingerprints, vec![2]);
        assert_eq!(d.counters().buffer_hits, 1);
        assert_eq!(d.flash_counters().reads, 0);
        t = r.done;
        // Overwriting a buffered block replaces it; a fourth distinct block fills the page.
        t = d
            .write(t, t, Lba(7), WriteData::Fingerprints(&[9]), false)
            .done;
        assert_eq!(d.flash_counters().programs, 0);
        t = d
            .write(t, t, Lba(50), WriteData::Fingerprints(&[5]), false)
            .done;
        assert_eq!(d.flash_counters().programs, 1);
        assert_eq!(d.gc_counters().rmw_reads, 0, "no read-modify-write");
        let settle = d.flush(t, t).done;
        let mut out = ReadData::default();
        let r = d.read(settle, settle, Lba(7), 1, Some(&mut out));
        assert_eq!(out.fingerprints, vec![9]);
        assert_eq!(d.flash_counters().reads, 1);
        assert!(r.done - settle >= d.profile.flash.read.0);
        d.check_invariants();
    }

    #[test]
    fn zoned_commands_and_bad_ranges_are_refused() {
        let mut d = small(&[]);
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(0),
            WriteData::Fingerprints(&[1]),
            true,
        );
        assert_eq!(c.status, Err(NvmeStatus::InvalidOpcode));
        assert_eq!(
            d.zoned_command(Nanos(0), Nanos(0)).status,
            Err(NvmeStatus::InvalidOpcode)
        );
        let end = d.total_lbas();
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(end - 1),
            WriteData::Fingerprints(&[1, 2]),
            false,
        );
        assert_eq!(c.status, Err(NvmeStatus::LbaOutOfRange));
        let c = d.read(Nanos(0), Nanos(0), Lba(end), 1, None);
        assert_eq!(c.status, Err(NvmeStatus::LbaOutOfRange));
        let c = d.write(
            Nanos(0),
            Nanos(0),
            Lba(0),
            WriteData::Bytes(&[0u8; 100]),
            false,
        );
        assert_eq!(c.status, Err(NvmeStatus::InvalidFieldInCommand));
        assert_eq!(d.counters().errors, 5);
        assert_eq!(d.counters().written_lbas, 0);
    }

    #[test]
    fn sustained_random_overwrites_amplify_and_stall() {
        let mut d = small(&[]);
        let n = d.total_lbas();
        let mut rng = zonelab_sim::SimRng::new(11);
        let mut t = Nanos(0);
        let mut lat = Vec::new();
        for i in 0..(6 * n) {
            let lba = if i < n { i } else { rng.below(n) };
            let c = d.write(t, t, Lba(lba), WriteData::Fingerprints(&[i]), false);
            assert!(c.status.is_ok());
            lat.push(c.done - t);
            t = c.done;
        }
        d.check_invariants();
        let g = d.gc_counters();
        assert!(g.gc_copies > 0 && g.gc_erases > 0, "{g:?}");
        let waf = d.write_amplification();
        assert!(waf > 1.2, "WAF {waf}");
        let f = d.flash_counters();
        assert_eq!(f.programs + f.copybacks, g.host_pages + g.gc_pages);
        assert!(
            d.buffer_stall() > Nanos::ZERO,
            "garbage collection pushes back"
        );
        // Latency swings: early completion from the buffer, long stalls behind cleaning.
        let max = *lat.iter().max().unwrap();
        let min = *lat.iter().min().unwrap();
        assert!(max.0 > 50 * min.0, "{min:?}..{max:?}");
    }

    #[test]
    fn reads_wait_behind_garbage_collection() {
        // The same read, on an idle die and right after a burst that forces cleaning.
        let mut d = small(&[]);
        let n = d.total_lbas();
        let mut t = Nanos(0);
        for i in 0..n {
            t = d
                .write(t, t, Lba(i), WriteData::Fingerprints(&[i]), false)
                .done;
        }
        let idle = d.flush(t, t).done + Nanos::from_ms(100);
        let quiet = d.read(idle, idle, Lba(0), 1, None).done - idle;
        let mut rng = zonelab_sim::SimRng::new(2);
        let mut t = idle + Nanos::from_ms(100);
        for i in 0..n {
            t = d
                .write(
                    t,
                    t,
                    Lba(rng.below(n)),
                    WriteData::Fingerprints(&[i]),
                    false,
                )
                .done;
        }
        let mut worst = Nanos::ZERO;
        for k in 0..64 {
            let lba = (k * 17) % n;
            let c = d.read(t, t, Lba(lba), 1, None);
            worst = worst.max(c.done - t);
        }
        assert!(d.gc_counters().gc_erases > 0);
        assert!(worst.0 > quiet.0 * 5, "quiet {quiet:?}, under GC {worst:?}");
    }

    fn read_fps(d: &mut ConventionalDevice, t: Nanos, lba: u64, n: u64) -> Vec<u64> {
        let mut out = ReadData::default();
        assert!(d.read(t, t, Lba(lba), n, Some(&mut out)).status.is_ok());
        out.fingerprints
    }

    #[test]
    fn with_plp_the_open_page_survives_a_power_cut() {
        let mut d = small(&[]);
        let mut t = Nanos(0);
        for (i, lba) in [7u64, 100, 3, 50, 9].iter().enumerate() {
            t = d
                .write(t, t, Lba(*lba), WriteData::Fingerprints(&[i as u64]), false)
                .done;
        }
        let r = d.power_cut(t);
        assert_eq!(r, PowerCutReport::default());
        assert_eq!(d.buffer.used(), 1, "one block waits in the open page");
        assert_eq!(read_fps(&mut d, t, 9, 1), vec![4]);
        assert_eq!(read_fps(&mut d, t, 7, 1), vec![0]);
        d.check_invariants();
    }

    #[test]
    fn without_plp_writes_not_on_flash_are_undone() {
        let mut d = small(&["power_loss_protection=false"]);
        let zero = crate::payload::fingerprint(&[0u8; 4096]);
        let mut t = Nanos(0);
        for (lba, fp) in [(7u64, 1u64), (100, 2), (3, 3)] {
            t = d
                .write(t, t, Lba(lba), WriteData::Fingerprints(&[fp]), false)
                .done;
        }
        // The flush programs the partial page (padded).
        let programs = d.flash_counters().programs;
        let flushed = d.flush(t, t).done;
        assert_eq!(d.flash_counters().programs, programs + 1);
        assert_eq!(d.counters().padded_pages, 1);
        let mut t = flushed;
        for (lba, fp) in [(7u64, 4u64), (8, 5)] {
            t = d
                .write(t, t, Lba(lba), WriteData::Fingerprints(&[fp]), false)
                .done;
        }
        let r = d.power_cut(t);
        assert_eq!(r.lost_blocks, 2);
        assert_eq!(read_fps(&mut d, t, 7, 2), vec![1, zero]);
        assert_eq!(read_fps(&mut d, t, 100, 1), vec![2]);
        assert_eq!(d.buffer.used(), 0);
        d.check_invariants();
        // A full page whose program completed survives without a flush.
        for lba in 20..24u64 {
            t = d
                .write(t, t, Lba(lba), WriteData::Fingerprints(&[lba]), false)
                .done;
        }
        d.power_cut(t + Nanos::from_ms(5));
        assert_eq!(read_fps(&mut d, t, 20, 4), vec![20, 21, 22, 23]);
        d.check_invariants();
    }

    #[test]
    fn without_plp_rewriting_one_buffered_block_keeps_one_undo_record() {
        // The open page never fills: the block stays buffered, overwritten again and again.
        let mut d = small(&["power_loss_protection=false"]);
        let mut t = Nanos(0);
        for i in 0..10_000u64 {
            t = d
                .write(t, t, Lba(5), WriteData::Fingerprints(&[i]), false)
                .done;
        }
        assert_eq!(d.undo.size(), (1, 1));
        d.power_cut(t);
        let zero = crate::payload::fingerprint(&[0u8; 4096]);
        assert_eq!(read_fps(&mut d, t, 5, 1), vec![zero]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random writes, reads and flushes keep every block's data exact and the FTL's
        /// invariants (mapping, valid counts, block lists) whole.
        #[test]
        fn random_io_keeps_data_and_invariants(
            ops in proptest::collection::vec((0u8..4, 0u64..1152, 1u64..9), 1..600),
            op in prop::sample::select(vec!["0.2", "0.3"]),
        ) {
            let mut d = small(&[&format!("over_provisioning={op}")]);
            let total = d.total_lbas();
            let mut model: HashMap<u64, u64> = HashMap::new();
            let mut t = Nanos(0);
            let mut stamp = 0u64;
            for (kind, lba, n) in ops {
                let lba = lba % total;
                let c = match kind {
                    0 | 1 => {
                        let fps: Vec<u64> = (0..n).map(|k| { stamp += 1; stamp * 16 + k }).collect();
                        let c = d.write(t, t, Lba(lba), WriteData::Fingerprints(&fps), false);
                        if c.status.is_ok() {
                            for (k, fp) in fps.iter().enumerate() { model.insert(lba + k as u64, *fp); }
                        } else {
                            prop_assert!(lba + n > total);
                        }
                        c
                    }
                    2 => d.flush(t, t),
                    _ => {
                        let mut out = ReadData::default();
                        let c = d.read(t, t, Lba(lba), n, Some(&mut out));
                        if c.status.is_ok() {
                            for k in 0..n {
                                let want = model.get(&(lba + k)).copied();
                                let got = out.fingerprints[k as usize];
                                match want {
                                    Some(fp) => prop_assert_eq!(got, fp, "lba {}", lba + k),
                                    None => prop_assert_eq!(got, crate::payload::fingerprint(&[0u8; 4096])),
                                }
                            }
                        }
                        c
                    }
                };
                prop_assert!(c.done >= t);
                t = t.max(c.done.saturating_sub(Nanos(1)));
            }
            d.check_invariants();
            let f = d.flash_counters();
            let g = d.gc_counters();
            prop_assert_eq!(f.programs + f.copybacks, g.host_pages + g.gc_pages);
            prop_assert_eq!(d.ftl().mapped_units() + (d.open_page.len() as u64), model.len() as u64);
        }

        /// A power cut at a random time: every block holds its newest write that was durable
        /// then (never older than what a completed flush covered; the newest write with
        /// power-loss protection), the undo log stays within the write buffer, and the device
        /// works on afterwards.
        #[test]
        fn power_cut_keeps_the_newest_durable_write(
            plp in any::<bool>(),
            ops in proptest::collection::vec((0u8..4, 0u64..1152, 1u64..9), 1..300),
            cut_after in 0u64..2_000_000,
        ) {
            let mut d = small(&[if plp { "power_loss_protection=true" } else { "power_loss_protection=false" }]);
            let total = d.total_lbas();
            let zero = crate::payload::fingerprint(&[0u8; 4096]);
            let mut history: HashMap<u64, Vec<(usize, u64)>> = HashMap::new();
            let mut writes = 0usize;
            let mut flushes: Vec<(Nanos, usize)> = Vec::new();
            let mut t = Nanos(0);
            let mut stamp = 0u64;
            let buffer_lbas = d.profile.controller.write_buffer.0 / 4096;
            for (kind, lba, n) in ops {
                let lba = lba % (total - n);
                let c = match kind {
                    0 | 1 => {
                        let fps: Vec<u64> = (0..n).map(|k| { stamp += 1; stamp * 16 + k }).collect();
                        let c = d.write(t, t, Lba(lba), WriteData::Fingerprints(&fps), false);
                        prop_assert!(c.status.is_ok());
                        for (k, fp) in fps.iter().enumerate() {
                            history.entry(lba + k as u64).or_default().push((writes, *fp));
                        }
                        writes += 1;
                        c
                    }
                    2 => {
                        let c = d.flush(t, t);
                        flushes.push((c.done - d.profile.controller.cq_post.0, writes));
                        c
                    }
                    _ => {
                        t += Nanos(lba * n * 100);
                        continue;
                    }
                };
                t = t.max(c.done.saturating_sub(Nanos(1)));
                prop_assert!(d.undo.size().1 <= 2 * buffer_lbas, "undo log of {:?}", d.undo.size());
            }
            let at = t + Nanos(cut_after);
            let r = d.power_cut(at);
            d.check_invariants();
            if plp {
                prop_assert_eq!(r.lost_blocks, 0);
            }
            let covered = flushes.iter().filter(|f| f.0 <= at).map(|f| f.1).max().unwrap_or(0);
            let mut lbas: Vec<u64> = history.keys().copied().collect();
            lbas.sort_unstable();
            let mut now_holds: Vec<(u64, u64)> = Vec::new();
            for lba in lbas {
                let h = &history[&lba];
                let got = read_fps(&mut d, at, lba, 1)[0];
                if plp {
                    prop_assert_eq!(got, h.last().unwrap().1);
                }
                let allowed: Vec<u64> = match h.iter().rposition(|&(w, _)| w < covered) {
                    Some(i) => h[i..].iter().map(|&(_, f)| f).collect(),
                    None => std::iter::once(zero).chain(h.iter().map(|&(_, f)| f)).collect(),
                };
                prop_assert!(allowed.contains(&got), "lba {} holds an impossible block", lba);
                now_holds.push((lba, got));
            }
            // The device works on: overwrite some blocks, flush, cut again, read all back.
            let mut t = at;
            for &(lba, _) in now_holds.iter().step_by(3) {
                t = d.write(t, t, Lba(lba), WriteData::Fingerprints(&[lba + 7]), false).done;
            }
            let t = d.flush(t, t).done;
            d.power_cut(t);
            for (i, &(lba, held)) in now_holds.iter().enumerate() {
                let want = if i % 3 == 0 { lba + 7 } else { held };
                prop_assert_eq!(read_fps(&mut d, t, lba, 1)[0], want);
            }
            d.check_invariants();
        }
    }
}
