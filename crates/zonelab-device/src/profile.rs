//! Device profiles: the physical parameters of a drive, read from `profiles/*.toml`.
//!
//! A profile holds geometry, flash latencies, controller costs and host I/O stack costs — never a
//! result. Any field can be overridden with `key=value` (`zones=64`, `dies_per_chip=2`, or the
//! qualified `zns.zones=64`), so tests run on small devices. Impossible geometries are refused
//! with a message naming the field.

use serde::{Deserialize, Serialize};
use std::path::Path;
use zonelab_flash::{Duplex, Duration, Rate, Size};
use zonelab_sim::Nanos;

/// Profiles shipped with ZoneLab, embedded so the binary works from any directory.
pub const BUILTIN: &[(&str, &str)] = &[
    ("zn540", include_str!("../../../profiles/zn540.toml")),
    (
        "znsplus-mlc",
        include_str!("../../../profiles/znsplus-mlc.toml"),
    ),
    (
        "znsplus-tlc",
        include_str!("../../../profiles/znsplus-tlc.toml"),
    ),
    (
        "znsplus-znand",
        include_str!("../../../profiles/znsplus-znand.toml"),
    ),
    (
        "isar-femu",
        include_str!("../../../profiles/isar-femu.toml"),
    ),
    (
        "zlfs-smallzone",
        include_str!("../../../profiles/zlfs-smallzone.toml"),
    ),
    ("sn640", include_str!("../../../profiles/sn640.toml")),
    (
        "sn640-op7",
        include_str!("../../../profiles/sn640-op7.toml"),
    ),
    (
        "sn640-op28",
        include_str!("../../../profiles/sn640-op28.toml"),
    ),
];

/// The command set a namespace speaks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NamespaceKind {
    /// NVMe Zoned Namespace command set (the `[zns]` section describes the zones).
    #[default]
    Zoned,
    /// NVMe NVM command set: a block interface over a page-mapped FTL (the `[ftl]` section).
    Conventional,
}

impl NamespaceKind {
    fn is_zoned(&self) -> bool {
        *self == NamespaceKind::Zoned
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// `zoned` (default) or `conventional`.
    #[serde(default)]
    pub namespace: NamespaceKind,
    pub geometry: GeometrySection,
    /// Zones of a zoned namespace; absent (all zero) for a conventional one.
    #[serde(default)]
    pub zns: ZnsSection,
    /// The FTL of a conventional namespace; required there, refused on a zoned one.
    #[serde(default)]
    pub ftl: Option<FtlSection>,
    pub flash: FlashSection,
    pub controller: ControllerSection,
    pub host: HostSection,
    /// ZNS+ firmware parameters (seed 000 §2.1, §3.2); defaults when absent.
    #[serde(default)]
    pub znsplus: ZnsPlusSection,
}

/// ZNS+ firmware parameters of a zoned device (seed 000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZnsPlusSection {
    /// Most consecutive copybacks one page of data may go through before the controller copies
    /// it by read and program instead, checking its ECC (seed 000 §2.1: copyback skips the ECC
    /// check, so chips limit consecutive copybacks by their error characteristics). 0: no limit.
    #[serde(default)]
    pub copyback_limit: u32,
    /// How a TL_opened zone's skipped blocks are plugged (seed 000 §3.2.2).
    #[serde(default)]
    pub plugging: Plugging,
    /// Whether the controller copies by copyback at all (seed 000 §4 Fig. 7, "w/o cpbk"):
    /// `false` copies every chunk by flash read + program, in zone compaction and in plugging
    /// (background plugging included). Left
    /// out of the profile's text when true, so profiles and images from before the field read
    /// and write the same bytes.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub copyback: bool,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

impl Default for ZnsPlusSection {
    fn default() -> Self {
        ZnsPlusSection {
            copyback_limit: 0,
            plugging: Plugging::default(),
            copyback: true,
        }
    }
}

/// When the controller completes a write (seed 000 §4: the ZNS+ authors' FEMU completes a write
/// when the flash pages it fills are programmed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteCompletion {
    /// Once the data is in the write buffer (early completion; the buffer's programs run
    /// behind it). What SSDs with a DRAM write buffer do.
    #[default]
    Buffered,
    /// Once every flash page the write fills is programmed; data left in a partly filled page
    /// completes when it is in the buffer. What an emulator without a write-back buffer does
    /// (eslab-skku/ZNSplus `femu/hw/block/ssd/ssd_io_manager.c`: a write's completion time is
    /// the chip's program completion).
    Programmed,
}

impl WriteCompletion {
    /// When a write completes whose data is in the buffer at `in_buffer` and whose filled
    /// pages are programmed by `programmed`.
    pub fn completes_at(self, in_buffer: Nanos, programmed: Nanos) -> Nanos {
        match self {
            WriteCompletion::Buffered => in_buffer,
            WriteCompletion::Programmed => in_buffer.max(programmed),
        }
    }
}

/// Internal plugging scheme of threaded logging (seed 000 §3.2.2, Fig. 4, §4 Fig. 9).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plugging {
    /// LBA-ordered plugging (LP): after each write the valid blocks that follow the write
    /// pointer are copied at once, so the write pointer waits at the next invalid block.
    Lba,
    /// PPA-ordered plugging (PP, the paper's default): fully valid chunks are copied ahead of
    /// the write pointer while their chips are idle, in the page order of their flash blocks;
    /// the rest is copied on demand when the write pointer must pass it.
    #[default]
    Ppa,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeometrySection {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size: Size,
    pub lba_size: Size,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZnsSection {
    pub zones: u32,
    /// Zone size (the LBA span of a zone); the capacity follows from the flash mapping.
    pub zone_size: Size,
    /// Zone interleaving degree D_zone in dies (seed 000 §2.2); 1 maps a zone to one die.
    pub zone_dies: u32,
    /// Blocks per plane of each die that one zone occupies.
    pub blocks_per_zone: u32,
    pub max_open: u32,
    pub max_active: u32,
    #[serde(default)]
    pub conventional_zones: u32,
}

impl ZnsSection {
    /// True when the profile has no `[zns]` section (conventional namespaces).
    pub fn is_unset(&self) -> bool {
        *self == ZnsSection::default()
    }
}

/// The flash translation layer of a conventional namespace (seed 003: the block interface's
/// over-provisioning and device-side garbage collection).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FtlSection {
    /// Share of the raw flash hidden from the host (0.07 = 7%): host capacity is the raw
    /// capacity times (1 - over_provisioning), rounded down to whole flash pages.
    pub over_provisioning: f64,
    /// Free blocks each die keeps in reserve; garbage collection of a die starts when it has
    /// fewer and every die is short (greedy victim: fewest valid blocks). At least 2.
    #[serde(default = "default_gc_free_blocks")]
    pub gc_free_blocks: u32,
    /// Once garbage collection starts, it runs as a burst on every die until this fraction of
    /// the die's spare blocks (those beyond its share of the host capacity) is free, then host
    /// writes resume (0: clean only back to `gc_free_blocks`). Firmware collects in bursts to
    /// batch its work; the host sees write bandwidth swing (seed 001 obs. 11).
    #[serde(default)]
    pub gc_burst: f64,
}

fn default_true() -> bool {
    true
}

fn default_gc_free_blocks() -> u32 {
    2
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlashSection {
    pub read: Duration,
    pub program: Duration,
    pub erase: Duration,
    pub copyback: Duration,
    pub page_transfer: Duration,
    /// A read keeps its die busy until its data has crossed the channel (no cache read,
    /// [`zonelab_flash::FlashTiming::read_holds_die`]). Off by default: the die senses the
    /// next page while the last goes out.
    #[serde(default)]
    pub read_holds_die: bool,
    /// A die takes the next program's data while it programs the page before (NAND cache
    /// program, [`zonelab_flash::FlashTiming::cache_program`]). Off by default: each program
    /// holds its die for the transfer and tPROG.
    #[serde(default)]
    pub cache_program: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControllerSection {
    pub firmware_cores: u32,
    /// Fixed latency from doorbell to the command being in the controller (not a shared resource).
    pub sq_fetch: Duration,
    /// Fixed latency from command completion to the completion entry reaching the host.
    pub cq_post: Duration,
    pub read_cost: Duration,
    pub write_cost: Duration,
    /// Firmware-core work to hand a zone append to an append engine.
    pub append_dispatch_cost: Duration,
    /// Work of a zone append on an append engine (LBA assignment and write handling); the
    /// data transfer overlaps with it. Appends to all zones share the engines.
    pub append_cost: Duration,
    pub append_engines: u32,
    pub open_cost: Duration,
    pub close_cost: Duration,
    /// Extra firmware work when a write opens a zone implicitly.
    pub implicit_open_cost: Duration,
    /// Extra work on the append engine when a zone append opens a zone implicitly.
    pub implicit_open_append_cost: Duration,
    /// Zone reset: fixed firmware work, plus unmapping work per flash page of data the zone
    /// holds, plus closing each open flash block an unfinished zone still has (one per die it
    /// wrote); a zone filled or finished has none open (seed 001 obs. 10).
    pub reset_cost: Duration,
    pub reset_cost_per_page: Duration,
    pub reset_open_block_cost: Duration,
    /// Spread of a reset's unmapping work: the extra work is exponentially distributed with
    /// this mean, as a fraction of the nominal per-page work (0 = every reset of the same zone
    /// state takes the same time). Unmapping walks the zone's part of the mapping table, and how
    /// much of it must be brought into controller DRAM first varies from reset to reset: the
    /// ZN540's full-zone resets take 15.1-18.8 ms, most near the minimum with a long tail (seed
    /// 001 obs. 13: p95 17.94 ms without I/O; partial_reset data: p50 15.5, p95 17.5 ms).
    #[serde(default)]
    pub reset_unmap_variation: f64,
    /// Period of the firmware's housekeeping tick (0 = none). A zone reset that arrives while a
    /// host write or append is updating the mapping table cannot take the table; it is handed
    /// to the housekeeping task, whose timer starts then, and committed in a management window
    /// (see `management_window_ticks`). The ZN540 completes such resets on an exact 4 ms grid
    /// measured from their submission (seed 001 obs. 13, Fig. 7: 32.00 ms p95 under writes).
    #[serde(default)]
    pub housekeeping_tick: Duration,
    /// Length of a management window in housekeeping ticks. While deferred resets are pending
    /// the housekeeping task alternates a window for host I/O and a window for management, each
    /// this many ticks, starting with host I/O; a deferred reset whose unmapping is done is
    /// committed and completed at the end of the next management window. The ZN540 alternates
    /// 16 ms (4 ticks) of each while resets are pending (I/O there stalls 16.0 ms once per 32 ms).
    #[serde(default)]
    pub management_window_ticks: u32,
    /// Whether host commands wait out a management window: a read, write or append arriving
    /// while the housekeeping task commits deferred resets is taken up when the window ends.
    /// The ZN540 does (seed 001 §III-G; the artifact's interference data): its concurrent
    /// writes, appends and reads stall for 16.0 ms once per 32 ms while resets are committed,
    /// which doubles their mean latency (writes 23.2 us, appends 28.9 us) while the median, p95
    /// and p99 stay those without resets (11.5, 12.5, 14.4 us for writes) — obs. 12 holds for
    /// the median.
    #[serde(default)]
    pub management_window_holds_io: bool,
    /// Whether host reads push back zone-management work in progress by their firmware time
    /// (true, the default: management work uses the firmware core only when no command needs
    /// it). The ZN540's reset unmapping does not queue behind reads: its resets with
    /// concurrent reads complete as fast as without I/O or faster (seed 001 §III-G artifact
    /// data: p50 15.08 ms with reads vs 15.49 ms without I/O).
    #[serde(default = "default_true")]
    pub reads_delay_management: bool,
    /// Chance that a full-zone reset must flush the controller's mapping journal before it can
    /// finish (scaled by the share of the zone capacity it unmaps; 0 = never). The flush takes
    /// between `reset_journal_flush_min` and `_max` (uniform). On the ZN540 about one reset in
    /// ten takes 1.5-4 ms longer than the rest (seed 001 §III-G: p95 17.94 ms without I/O
    /// against a median near 15.3 ms; with concurrent reads 9.4% of resets pass 16 ms while
    /// the others are done within 14.8-15.6 ms).
    #[serde(default)]
    pub reset_journal_flush_chance: f64,
    #[serde(default)]
    pub reset_journal_flush_min: Duration,
    #[serde(default)]
    pub reset_journal_flush_max: Duration,
    /// Unmapping work the housekeeping task does per housekeeping tick for a reset it took
    /// over (0 = it takes over none). With host I/O going on while a reset unmaps, the
    /// reset's arrival starts a housekeeping run (host window, then management window, each
    /// `management_window_ticks` ticks; with `management_window_holds_io` host I/O stalls in
    /// the management window). A reset still unmapping when its management window opens is
    /// taken over by the housekeeping task, which does this much of the rest per tick and
    /// completes it on the tick grid measured from its arrival. The ZN540's read-concurrent
    /// resets do so: ~9% complete at exactly 20, 24, 28 or 32 ms (rarely 36, 40), the rest
    /// by 15.6 ms, none in between (seed 001 obs. 13: p95 28.00 ms; the artifact's data).
    #[serde(default)]
    pub housekeeping_unmap_per_tick: Duration,
    /// Zone finish: firmware work before the remaining capacity is padded.
    pub finish_cost: Duration,
    pub write_buffer: Size,
    pub pcie_lanes: u32,
    pub pcie_lane_bandwidth: Rate,
    pub pcie_transfer_cost: Duration,
    /// `full` (PCIe: reads' and writes' data move at the same time, each direction at the full
    /// bandwidth) or `half` (one transfer at a time over both directions, as the ZNS+ authors'
    /// FEMU moves all host data through one DMA timeline; seed 000 §4).
    #[serde(default)]
    pub pcie_duplex: Duplex,
    /// When a write completes: `buffered` (default) or `programmed`.
    #[serde(default)]
    pub write_completion: WriteCompletion,
    pub power_loss_protection: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSection {
    pub spdk_submit: Duration,
    pub spdk_complete: Duration,
    pub io_uring_submit: Duration,
    pub io_uring_complete: Duration,
    pub mq_deadline_dispatch: Duration,
    pub mq_deadline_max_merge: Size,
}

/// Why a profile could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error(
        "unknown device profile '{0}': use one of {list} or a path to a .toml file",
        list = builtin_names().join(", ")
    )]
    Unknown(String),
    #[error("cannot read profile {path}: {err}")]
    Io { path: String, err: std::io::Error },
    #[error("profile {source_name}: {msg}")]
    Parse { source_name: String, msg: String },
    #[error("override '{0}': expected key=value, e.g. zones=64")]
    BadOverride(String),
    #[error("override '{key}': no such profile field; fields are: {fields}")]
    UnknownField { key: String, fields: String },
    #[error("override '{key}': field name is ambiguous, qualify it as one of: {choices}")]
    AmbiguousField { key: String, choices: String },
    #[error("impossible device: {0}")]
    Invalid(String),
}

pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

impl Profile {
    /// Loads a built-in profile by name, or a TOML file by path, then applies `overrides`.
    pub fn load(
        name_or_path: &str,
        overrides: &[(String, String)],
    ) -> Result<Profile, ProfileError> {
        let (text, source_name) = match BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
            Some((n, t)) => (t.to_string(), n.to_string()),
            None => {
                let p = Path::new(name_or_path);
                if !name_or_path.ends_with(".toml") && !p.exists() {
                    return Err(ProfileError::Unknown(name_or_path.to_string()));
                }
                let t = read_text(p).map_err(|err| ProfileError::Io {
                    path: name_or_path.to_string(),
                    err,
                })?;
                (t, name_or_path.to_string())
            }
        };
        Profile::from_toml(&text, &source_name, overrides)
    }

    /// Parses profile text and applies overrides; validates the result.
    pub fn from_toml(
        text: &str,
        source_name: &str,
        overrides: &[(String, String)],
    ) -> Result<Profile, ProfileError> {
        // toml's full message: the line and column, and the line itself with the key.
        let in_text = |e: toml::de::Error| ProfileError::Parse {
            source_name: source_name.to_string(),
            msg: e.to_string().trim_end().to_string(),
        };
        let mut table: toml::Table = text.parse().map_err(in_text)?;
        for (k, v) in overrides {
            apply_override(&mut table, k, v)?;
        }
        let profile: Profile = Profile::deserialize(toml::Value::Table(table)).map_err(|e| {
            // The text alone fails too: its error points at the line.
            if let Err(e) = toml::from_str::<Profile>(text) {
                return in_text(e);
            }
            // Then it is a value from an override: name them.
            let sets: Vec<String> = overrides.iter().map(|(k, v)| format!("{k}={v}")).collect();
            ProfileError::Parse {
                source_name: match sets.is_empty() {
                    true => source_name.to_string(),
                    false => format!("{source_name} with {}", sets.join(", ")),
                },
                msg: e.message().to_string(),
            }
        })?;
        profile.validate()?;
        Ok(profile)
    }

    /// Parses `key=value` strings as given on a command line.
    pub fn parse_overrides(items: &[String]) -> Result<Vec<(String, String)>, ProfileError> {
        items
            .iter()
            .map(|s| match s.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    Ok((k.trim().to_string(), v.trim().to_string()))
                }
                _ => Err(ProfileError::BadOverride(s.clone())),
            })
            .collect()
    }

    pub fn lba_size(&self) -> u64 {
        self.geometry.lba_size.0
    }
    pub fn flash_geometry(&self) -> zonelab_flash::Geometry {
        let g = &self.geometry;
        zonelab_flash::Geometry {
            channels: g.channels,
            chips_per_channel: g.chips_per_channel,
            dies_per_chip: g.dies_per_chip,
            planes_per_die: g.planes_per_die,
            blocks_per_plane: g.blocks_per_plane,
            pages_per_block: g.pages_per_block,
            page_size: g.page_size.0,
        }
    }
    pub fn flash_timing(&self) -> zonelab_flash::FlashTiming {
        let f = &self.flash;
        zonelab_flash::FlashTiming {
            read: f.read.0,
            program: f.program.0,
            erase: f.erase.0,
            copyback: f.copyback.0,
            page_transfer: f.page_transfer.0,
            read_holds_die: f.read_holds_die,
            cache_program: f.cache_program,
        }
    }
    /// LBAs per flash page (a chunk, seed 000 §2.1).
    pub fn lbas_per_chunk(&self) -> u64 {
        self.geometry.page_size.0 / self.lba_size()
    }
    /// Zone capacity in LBAs: dies x planes x blocks x pages x LBAs per page.
    pub fn zone_capacity_lbas(&self) -> u64 {
        let g = &self.geometry;
        self.zns.zone_dies as u64
            * g.planes_per_die as u64
            * self.zns.blocks_per_zone as u64
            * g.pages_per_block as u64
            * self.lbas_per_chunk()
    }
    pub fn zone_size_lbas(&self) -> u64 {
        self.zns.zone_size.0 / self.lba_size()
    }
    /// Flash block groups each flash chip group can hold.
    pub fn fbgs_per_fcg(&self) -> u32 {
        self.geometry.blocks_per_plane / self.zns.blocks_per_zone.max(1)
    }
    pub fn fcg_count(&self) -> u32 {
        self.flash_geometry().total_dies() / self.zns.zone_dies.max(1)
    }

    /// Flash pages the write buffer must always have room for: a partly filled page per
    /// active zone (one for a conventional namespace) plus two in flight.
    pub fn write_buffer_reserve_pages(&self) -> u64 {
        let partial_pages = match self.namespace {
            NamespaceKind::Zoned => self.zns.max_active as u64,
            NamespaceKind::Conventional => 1,
        };
        partial_pages + 2
    }

    pub fn validate(&self) -> Result<(), ProfileError> {
        let inv = |s: String| Err(ProfileError::Invalid(s));
        let fg = self.flash_geometry();
        fg.validate().map_err(ProfileError::Invalid)?;
        self.flash_timing()
            .validate()
            .map_err(ProfileError::Invalid)?;
        let lba = self.lba_size();
        if !(512..=65536).contains(&lba) || !lba.is_power_of_two() {
            return inv(format!(
                "lba_size must be a power of two from 512 to 65536 (got {lba})"
            ));
        }
        if !self.geometry.page_size.0.is_multiple_of(lba) {
            return inv(format!(
                "page_size ({}) must be a multiple of lba_size ({lba})",
                self.geometry.page_size.0
            ));
        }
        match self.namespace {
            NamespaceKind::Zoned => self.validate_zoned()?,
            NamespaceKind::Conventional => self.validate_conventional()?,
        }
        let c = &self.controller;
        if c.firmware_cores == 0 || c.append_engines == 0 || c.pcie_lanes == 0 {
            return inv("firmware_cores, append_engines and pcie_lanes must be at least 1".into());
        }
        if !(c.reset_unmap_variation.is_finite() && c.reset_unmap_variation >= 0.0) {
            return inv(format!(
                "reset_unmap_variation must be a finite number >= 0 (got {})",
                c.reset_unmap_variation
            ));
        }
        if (c.housekeeping_tick.0 == zonelab_sim::Nanos::ZERO) != (c.management_window_ticks == 0) {
            return inv(
                "housekeeping_tick and management_window_ticks are set together (both 0 = no housekeeping windows)"
                    .into(),
            );
        }
        if !(c.reset_journal_flush_chance.is_finite()
            && (0.0..=1.0).contains(&c.reset_journal_flush_chance))
        {
            return inv(format!(
                "reset_journal_flush_chance must be between 0 and 1 (got {})",
                c.reset_journal_flush_chance
            ));
        }
        if c.reset_journal_flush_min.0 > c.reset_journal_flush_max.0 {
            return inv("reset_journal_flush_min must not exceed reset_journal_flush_max".into());
        }
        if c.housekeeping_unmap_per_tick.0 > zonelab_sim::Nanos::ZERO
            && c.housekeeping_tick.0 == zonelab_sim::Nanos::ZERO
        {
            return inv("housekeeping_unmap_per_tick needs a housekeeping_tick".into());
        }
        if c.pcie_lane_bandwidth.0 == 0 {
            return inv("pcie_lane_bandwidth must be greater than zero".into());
        }
        let need = self.write_buffer_reserve_pages() * self.geometry.page_size.0;
        if c.write_buffer.0 < need {
            return inv(format!(
                "write_buffer ({}) must hold at least ({} + 2) flash pages = {need} bytes",
                c.write_buffer.0,
                if self.namespace.is_zoned() {
                    "max_active"
                } else {
                    "1"
                }
            ));
        }
        if self.host.mq_deadline_max_merge.0 < lba {
            return inv("mq_deadline_max_merge must be at least one LBA".into());
        }
        Ok(())
    }

    fn validate_zoned(&self) -> Result<(), ProfileError> {
        let inv = |s: String| Err(ProfileError::Invalid(s));
        let fg = self.flash_geometry();
        let lba = self.lba_size();
        if self.ftl.is_some() {
            return inv("the [ftl] section applies to namespace = \"conventional\" only; remove it or set namespace = \"conventional\"".into());
        }
        if self.zns.is_unset() {
            return inv("a zoned namespace needs a [zns] section (zones, zone_size, zone_dies, blocks_per_zone, max_open, max_active)".into());
        }
        let z = &self.zns;
        let dies = fg.total_dies();
        if z.zone_dies == 0 || !dies.is_multiple_of(z.zone_dies) {
            return inv(format!(
                "zone_dies ({}) must divide the number of dies ({dies} = channels x chips_per_channel x dies_per_chip)",
                z.zone_dies
            ));
        }
        if z.blocks_per_zone == 0 || z.blocks_per_zone > self.geometry.blocks_per_plane {
            return inv(format!(
                "blocks_per_zone ({}) must be between 1 and blocks_per_plane ({})",
                z.blocks_per_zone, self.geometry.blocks_per_plane
            ));
        }
        if z.zones == 0 {
            return inv("zones must be at least 1".into());
        }
        if !z.zone_size.0.is_multiple_of(lba) {
            return inv(format!("zone_size must be a multiple of lba_size ({lba})"));
        }
        let cap = self.zone_capacity_lbas();
        if self.zone_size_lbas() < cap {
            return inv(format!(
                "zone_size ({} LBAs) is smaller than the zone capacity the flash mapping gives ({cap} LBAs = zone_dies x planes_per_die x blocks_per_zone x pages_per_block x page_size); raise zone_size or lower one of those",
                self.zone_size_lbas()
            ));
        }
        let per_fcg = (z.zones as u64).div_ceil(self.fcg_count() as u64);
        if per_fcg > self.fbgs_per_fcg() as u64 {
            return inv(format!(
                "zones ({}) need {per_fcg} flash block groups per chip group but blocks_per_plane ({}) / blocks_per_zone ({}) gives only {}; lower zones or raise blocks_per_plane",
                z.zones,
                self.geometry.blocks_per_plane,
                z.blocks_per_zone,
                self.fbgs_per_fcg()
            ));
        }
        if z.conventional_zones > 0 && per_fcg + 2 > self.fbgs_per_fcg() as u64 {
            return inv(format!(
                "conventional_zones need two spare flash block groups per chip group: blocks_per_plane ({}) / blocks_per_zone ({}) must be at least {}",
                self.geometry.blocks_per_plane,
                z.blocks_per_zone,
                per_fcg + 2
            ));
        }
        if z.max_open == 0 || z.max_active == 0 {
            return inv("max_open and max_active must be at least 1".into());
        }
        if z.max_open > z.max_active {
            return inv(format!(
                "max_open ({}) cannot exceed max_active ({})",
                z.max_open, z.max_active
            ));
        }
        if z.conventional_zones >= z.zones {
            return inv(format!(
                "conventional_zones ({}) must be fewer than zones ({})",
                z.conventional_zones, z.zones
            ));
        }
        let total = z.zones as u128 * self.zone_size_lbas() as u128;
        if total > (1u128 << 48) {
            return inv("zones x zone_size exceeds 2^48 LBAs".into());
        }
        Ok(())
    }

    fn validate_conventional(&self) -> Result<(), ProfileError> {
        let inv = |s: String| Err(ProfileError::Invalid(s));
        if !self.zns.is_unset() {
            return inv("the [zns] section applies to zoned namespaces only; remove it or set namespace = \"zoned\"".into());
        }
        let Some(f) = &self.ftl else {
            return inv("namespace = \"conventional\" needs an [ftl] section with over_provisioning (e.g. 0.07)".into());
        };
        if !(f.over_provisioning.is_finite() && (0.0..0.9).contains(&f.over_provisioning)) {
            return inv(format!(
                "ftl.over_provisioning must be a fraction from 0 to 0.9 (got {})",
                f.over_provisioning
            ));
        }
        if !(f.gc_burst.is_finite() && (0.0..=1.0).contains(&f.gc_burst)) {
            return inv(format!(
                "ftl.gc_burst must be a fraction from 0 to 1 (got {})",
                f.gc_burst
            ));
        }
        if f.gc_free_blocks < 2 {
            return inv(format!(
                "ftl.gc_free_blocks must be at least 2 (got {}): one block to write into, one to clean into",
                f.gc_free_blocks
            ));
        }
        let g = &self.geometry;
        let dies = self.flash_geometry().total_dies() as u64;
        let blocks_per_die = g.planes_per_die as u64 * g.blocks_per_plane as u64;
        let spare_pages = dies * blocks_per_die * g.pages_per_block as u64 - self.host_pages();
        let need = dies * f.gc_free_blocks as u64 * g.pages_per_block as u64;
        if spare_pages < need {
            return inv(format!(
                "ftl.over_provisioning ({}) leaves {spare_pages} spare flash pages, but garbage collection needs ftl.gc_free_blocks ({}) blocks per die = {need} pages; raise over_provisioning or blocks_per_plane",
                f.over_provisioning, f.gc_free_blocks
            ));
        }
        if self.host_pages() == 0 {
            return inv("the conventional namespace has no capacity: lower over_provisioning or raise blocks_per_plane".into());
        }
        Ok(())
    }

    /// Flash pages of host capacity of a conventional namespace: raw pages x (1 -
    /// over_provisioning), rounded down.
    pub fn host_pages(&self) -> u64 {
        let g = &self.geometry;
        let raw = self.flash_geometry().total_dies() as u64
            * g.planes_per_die as u64
            * g.blocks_per_plane as u64
            * g.pages_per_block as u64;
        let op = self.ftl.map_or(0.0, |f| f.over_provisioning);
        // Exact for the shipped fractions: round the share to parts per million first.
        let keep_ppm = ((1.0 - op) * 1e6).round() as u128;
        (raw as u128 * keep_ppm / 1_000_000) as u64
    }

    /// The profile as TOML, for reports (`config` in results).
    pub fn to_toml(&self) -> String {
        self.try_to_toml().unwrap_or_default()
    }

    /// The profile as TOML, as reports and device images hold it.
    fn try_to_toml(&self) -> Result<String, String> {
        // Sections that do not apply to the namespace are left out (fields are never skipped
        // by serde itself: device images of formats 1 and 2 hold the profile in a format
        // without field names, see `image_v2_layout`).
        let mut t = match toml::Value::try_from(self) {
            Ok(toml::Value::Table(t)) => t,
            Ok(_) => return Err("a profile is not a TOML table".into()),
            Err(e) => return Err(e.to_string()),
        };
        if self.namespace.is_zoned() {
            t.remove("namespace");
        }
        if self.zns.is_unset() {
            t.remove("zns");
        }
        toml::to_string(&t).map_err(|e| e.to_string())
    }
}

/// Serde adapter for a profile kept inside a serialized device (`ZonedDevice`'s `profile`
/// field): the profile's TOML text ([`Profile::to_toml`]) as one string. Device images encode
/// the device with postcard, which writes fields one after another without names; a profile
/// stored that way stops decoding as soon as a field is added. As text its fields are read by
/// name, so a field added later with `#[serde(default)]` takes its default when read from an
/// image written before it existed. Reading checks the profile like any profile file
/// ([`Profile::from_toml`]); a field this build does not know is refused ("unknown field").
pub mod as_toml_text {
    use super::Profile;
    use serde::de::Error as _;
    use serde::ser::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    /// How errors name a profile read from a device image.
    pub const SOURCE: &str = "in the device image";

    pub fn serialize<S: Serializer>(profile: &Profile, s: S) -> Result<S::Ok, S::Error> {
        let text = profile.try_to_toml().map_err(S::Error::custom)?;
        // Text that reads back as another profile would change the device when it is loaded.
        match Profile::from_toml(&text, SOURCE, &[]) {
            Ok(back) if back == *profile => s.serialize_str(&text),
            Ok(_) => Err(S::Error::custom(
                "the profile reads back differently from its TOML text",
            )),
            Err(e) => Err(S::Error::custom(e)),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Profile, D::Error> {
        let text = String::deserialize(d)?;
        Profile::from_toml(&text, SOURCE, &[]).map_err(D::Error::custom)
    }
}

/// The profile as device images of formats 1 and 2 hold it: field after field without names
/// (postcard), with the controller section of that time, which lacked `reset_unmap_variation`,
/// `housekeeping_tick` and `management_window_ticks`, and the flash section without
/// `read_holds_die` and `cache_program`. Read this way those are off (their serde defaults, as
/// in a profile file without them). From format 3 on images hold the profile as text
/// ([`as_toml_text`]), so this is the only old layout there is to read.
pub mod image_v2_layout {
    use super::*;
    use serde::Deserializer;

    #[derive(Deserialize)]
    struct ProfileV2 {
        name: String,
        description: String,
        namespace: NamespaceKind,
        geometry: GeometrySection,
        zns: ZnsSection,
        ftl: Option<FtlSection>,
        flash: FlashSectionV2,
        controller: ControllerSectionV2,
        host: HostSection,
    }

    #[derive(Deserialize)]
    struct FlashSectionV2 {
        read: Duration,
        program: Duration,
        erase: Duration,
        copyback: Duration,
        page_transfer: Duration,
    }

    #[derive(Deserialize)]
    struct ControllerSectionV2 {
        firmware_cores: u32,
        sq_fetch: Duration,
        cq_post: Duration,
        read_cost: Duration,
        write_cost: Duration,
        append_dispatch_cost: Duration,
        append_cost: Duration,
        append_engines: u32,
        open_cost: Duration,
        close_cost: Duration,
        implicit_open_cost: Duration,
        implicit_open_append_cost: Duration,
        reset_cost: Duration,
        reset_cost_per_page: Duration,
        reset_open_block_cost: Duration,
        finish_cost: Duration,
        write_buffer: Size,
        pcie_lanes: u32,
        pcie_lane_bandwidth: Rate,
        pcie_transfer_cost: Duration,
        power_loss_protection: bool,
    }

    /// Reads a profile in the format 1 and 2 layout (only meaningful for a deserializer without
    /// field names, such as postcard's).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Profile, D::Error> {
        let p = ProfileV2::deserialize(d)?;
        let c = p.controller;
        Ok(Profile {
            name: p.name,
            description: p.description,
            namespace: p.namespace,
            geometry: p.geometry,
            zns: p.zns,
            ftl: p.ftl,
            // Reads release their die after sensing, as they did then.
            flash: FlashSection {
                read: p.flash.read,
                program: p.flash.program,
                erase: p.flash.erase,
                copyback: p.flash.copyback,
                page_transfer: p.flash.page_transfer,
                read_holds_die: false,
                cache_program: false,
            },
            // Every field named, so that a field added later must be decided on here too.
            controller: ControllerSection {
                firmware_cores: c.firmware_cores,
                sq_fetch: c.sq_fetch,
                cq_post: c.cq_post,
                read_cost: c.read_cost,
                write_cost: c.write_cost,
                append_dispatch_cost: c.append_dispatch_cost,
                append_cost: c.append_cost,
                append_engines: c.append_engines,
                open_cost: c.open_cost,
                close_cost: c.close_cost,
                implicit_open_cost: c.implicit_open_cost,
                implicit_open_append_cost: c.implicit_open_append_cost,
                reset_cost: c.reset_cost,
                reset_cost_per_page: c.reset_cost_per_page,
                reset_open_block_cost: c.reset_open_block_cost,
                reset_unmap_variation: 0.0,
                housekeeping_tick: Duration::default(),
                management_window_ticks: 0,
                management_window_holds_io: false,
                reads_delay_management: true,
                reset_journal_flush_chance: 0.0,
                reset_journal_flush_min: Duration::default(),
                reset_journal_flush_max: Duration::default(),
                housekeeping_unmap_per_tick: Duration::default(),
                finish_cost: c.finish_cost,
                write_buffer: c.write_buffer,
                pcie_lanes: c.pcie_lanes,
                pcie_lane_bandwidth: c.pcie_lane_bandwidth,
                pcie_transfer_cost: c.pcie_transfer_cost,
                pcie_duplex: Duplex::Full,
                write_completion: WriteCompletion::Buffered,
                power_loss_protection: c.power_loss_protection,
            },
            host: p.host,
            znsplus: ZnsPlusSection::default(),
        })
    }
}

/// Fields a profile file may leave out (defaults), as (section, field); "" is the top level.
const OPTIONAL_FIELDS: &[(&str, &str)] = &[
    ("zns", "conventional_zones"),
    ("ftl", "gc_free_blocks"),
    ("ftl", "gc_burst"),
    ("flash", "read_holds_die"),
    ("flash", "cache_program"),
    ("controller", "reset_unmap_variation"),
    ("controller", "housekeeping_tick"),
    ("controller", "management_window_ticks"),
    ("controller", "management_window_holds_io"),
    ("controller", "reads_delay_management"),
    ("controller", "reset_journal_flush_chance"),
    ("controller", "reset_journal_flush_min"),
    ("controller", "reset_journal_flush_max"),
    ("controller", "housekeeping_unmap_per_tick"),
    ("controller", "pcie_duplex"),
    ("controller", "write_completion"),
    ("znsplus", "copyback_limit"),
    ("znsplus", "plugging"),
    ("znsplus", "copyback"),
    ("", "description"),
    ("", "namespace"),
];

/// Sets `key` (bare field name, or `section.field`) to `value` in the profile table. The value is
/// parsed as TOML when it can be (numbers, booleans), else taken as a string ("16KiB").
fn apply_override(table: &mut toml::Table, key: &str, value: &str) -> Result<(), ProfileError> {
    let parsed: toml::Value = match format!("v = {value}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").expect("just parsed"),
        Err(_) => toml::Value::String(value.to_string()),
    };
    let (section, field) = match key.split_once('.') {
        Some((s, f)) => (Some(s), f),
        None => (None, key),
    };
    if section.is_none() && table.get(field).is_some_and(|v| !v.is_table()) {
        table.insert(field.to_string(), parsed);
        return Ok(());
    }
    let mut hits: Vec<String> = Vec::new();
    for (sname, sval) in table.iter() {
        if let toml::Value::Table(t) = sval
            && section.is_none_or(|s| s == sname)
            && t.contains_key(field)
        {
            hits.push(sname.clone());
        }
    }
    // An unqualified name that an optional field absent from the file also has is ambiguous
    // (`copyback`: flash.copyback, the latency, or znsplus.copyback, the switch).
    if section.is_none() && !hits.is_empty() {
        let absent: Vec<String> = OPTIONAL_FIELDS
            .iter()
            .filter(|(s, f)| *f == field && !s.is_empty() && !hits.iter().any(|h| h == s))
            .map(|(s, _)| s.to_string())
            .collect();
        hits.extend(absent);
    }
    match hits.len() {
        1 => {
            let t = table
                .get_mut(&hits[0])
                .and_then(|v| v.as_table_mut())
                .expect("section found above");
            t.insert(field.to_string(), parsed);
            Ok(())
        }
        0 => {
            // Optional fields absent from the file can still be set when qualified or unique.
            if let Some((s, f)) = OPTIONAL_FIELDS
                .iter()
                .find(|(s, f)| *f == field && section.is_none_or(|q| q == *s))
            {
                if s.is_empty() {
                    table.insert(f.to_string(), parsed);
                } else if let Some(t) = if *s == "znsplus" {
                    // A section of defaults only, often absent from profile files.
                    table
                        .entry(s.to_string())
                        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
                        .as_table_mut()
                } else {
                    table.get_mut(*s).and_then(|v| v.as_table_mut())
                } {
                    t.insert(f.to_string(), parsed);
                }
                return Ok(());
            }
            let mut fields: Vec<String> = Vec::new();
            for (sname, sval) in table.iter() {
                if let toml::Value::Table(t) = sval {
                    fields.extend(t.keys().map(|k| format!("{sname}.{k}")));
                }
            }
            fields.extend(
                OPTIONAL_FIELDS
                    .iter()
                    .filter(|(s, _)| !s.is_empty())
                    .map(|(s, f)| format!("{s}.{f}")),
            );
            fields.sort_unstable();
            fields.dedup();
            Err(ProfileError::UnknownField {
                key: key.to_string(),
                fields: fields.join(", "),
            })
        }
        _ => Err(ProfileError::AmbiguousField {
            key: key.to_string(),
            choices: hits
                .iter()
                .map(|s| format!("{s}.{field}"))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Reads a text file (a profile, an experiment, a fio job file): what `read_to_string` does,
/// but a file that is not UTF-8 says so, and where, instead of "stream did not contain valid
/// UTF-8".
pub fn read_text(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    let bytes = std::fs::read(path)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (invalid byte at offset {}); it must be a text file",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ov(items: &[&str]) -> Vec<(String, String)> {
        Profile::parse_overrides(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn every_builtin_profile_is_valid() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name, &[]).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&p.name, name);
        }
    }

    #[test]
    fn the_link_duplex_is_a_profile_setting() {
        assert_eq!(
            Profile::load("zn540", &[]).unwrap().controller.pcie_duplex,
            Duplex::Full
        );
        assert_eq!(
            Profile::load("znsplus-mlc", &[])
                .unwrap()
                .controller
                .pcie_duplex,
            Duplex::Half
        );
        let p = Profile::load("zn540", &ov(&["pcie_duplex=\"half\""])).unwrap();
        assert_eq!(p.controller.pcie_duplex, Duplex::Half);
        let e = Profile::load("zn540", &ov(&["pcie_duplex=\"quarter\""])).unwrap_err();
        assert!(e.to_string().contains("full"), "{e}");
    }

    #[test]
    fn write_completion_is_a_profile_setting() {
        let of = |name: &str, sets: &[&str]| {
            Profile::load(name, &ov(sets))
                .map(|p| p.controller.write_completion)
                .map_err(|e| e.to_string())
        };
        assert_eq!(of("zn540", &[]), Ok(WriteCompletion::Buffered));
        for name in ["znsplus-mlc", "znsplus-tlc", "znsplus-znand"] {
            assert_eq!(of(name, &[]), Ok(WriteCompletion::Programmed), "{name}");
        }
        assert_eq!(
            of("zn540", &["write_completion=\"programmed\""]),
            Ok(WriteCompletion::Programmed)
        );
        let e = of("zn540", &["write_completion=\"flushed\""]).unwrap_err();
        assert!(e.contains("buffered"), "{e}");
    }

    #[test]
    fn power_loss_protection_can_be_switched_off() {
        for (name, _) in BUILTIN {
            let p = Profile::load(name, &[]).unwrap();
            assert!(p.controller.power_loss_protection, "{name}");
            for key in ["power_loss_protection", "controller.power_loss_protection"] {
                let p = Profile::load(name, &ov(&[&format!("{key}=false")])).unwrap();
                assert!(!p.controller.power_loss_protection, "{name} {key}");
            }
        }
        assert!(Profile::load("zn540", &ov(&["power_loss_protection=maybe"])).is_err());
    }

    #[test]
    fn zn540_matches_the_drive() {
        let p = Profile::load("zn540", &[]).unwrap();
        assert_eq!(p.zns.zones, 904);
        assert_eq!(p.zone_size_lbas(), 524_288);
        assert_eq!(p.zone_capacity_lbas(), 275_712);
        assert_eq!((p.zns.max_open, p.zns.max_active), (14, 14));
    }

    #[test]
    fn overrides_by_bare_and_qualified_name() {
        let p = Profile::load(
            "zn540",
            &ov(&[
                "zones=64",
                "geometry.dies_per_chip=1",
                "zone_dies=32",
                "read=50us",
            ]),
        )
        .unwrap();
        assert_eq!(p.zns.zones, 64);
        assert_eq!(p.geometry.dies_per_chip, 1);
        assert_eq!(p.flash.read.0, zonelab_sim::Nanos::from_us(50));
    }

    #[test]
    fn impossible_geometry_names_the_field() {
        let e = Profile::load("zn540", &ov(&["zone_dies=48"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("zone_dies"), "{e}");
        let e = Profile::load("zn540", &ov(&["pages_per_block=0"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("pages_per_block"), "{e}");
        let e = Profile::load("zn540", &ov(&["zones=100000"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("zones"), "{e}");
        let e = Profile::load("zn540", &ov(&["max_open=20"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_open"), "{e}");
        let e = Profile::load("zn540", &ov(&["zone_size=1MiB"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("zone_size"), "{e}");
    }

    #[test]
    fn sn640_profiles_share_the_zn540_hardware() {
        let zn = Profile::load("zn540", &[]).unwrap();
        for (name, op) in [("sn640", 0.07), ("sn640-op7", 0.07), ("sn640-op28", 0.28)] {
            let p = Profile::load(name, &[]).unwrap();
            assert_eq!(p.namespace, NamespaceKind::Conventional);
            assert_eq!(p.ftl.unwrap().over_provisioning, op);
            assert!(p.zns.is_unset(), "{name}");
            // profiles/sn640*.toml copy these sections from zn540.toml: keep them in sync.
            assert_eq!(
                p.geometry, zn.geometry,
                "{name} [geometry] differs from zn540"
            );
            assert_eq!(p.flash, zn.flash, "{name} [flash] differs from zn540");
            assert_eq!(
                p.controller, zn.controller,
                "{name} [controller] differs from zn540"
            );
            assert_eq!(p.host, zn.host, "{name} [host] differs from zn540");
        }
    }

    #[test]
    fn namespace_sections_are_checked_by_name() {
        let e = Profile::load("sn640", &ov(&["over_provisioning=0.0001"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("over_provisioning"), "{e}");
        let e = Profile::load("sn640", &ov(&["over_provisioning=1.5"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("ftl.over_provisioning"), "{e}");
        let e = Profile::load("sn640", &ov(&["gc_free_blocks=1"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("gc_free_blocks"), "{e}");
        let e = Profile::load("sn640", &ov(&["namespace=zoned"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[ftl]"), "{e}");
        let e = Profile::load("zn540", &ov(&["namespace=conventional"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[zns]"), "{e}");
        let e = Profile::load("sn640", &ov(&["zones=4"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no such profile field"), "{e}");
        let text = include_str!("../../../profiles/sn640.toml").replace("[ftl]", "[ftl_gone]");
        let e = Profile::from_toml(&text, "x", &[]).unwrap_err().to_string();
        assert!(e.contains("ftl_gone"), "{e}");
        let text =
            include_str!("../../../profiles/sn640.toml").replace("over_provisioning = 0.07", "");
        let e = Profile::from_toml(&text, "x", &[]).unwrap_err().to_string();
        assert!(e.contains("over_provisioning"), "{e}");
        let text = "namespace = \"conventional\"\n".to_string()
            + &include_str!("../../../profiles/zn540.toml").replace("namespace", "#");
        let e = Profile::from_toml(&text, "x", &[]).unwrap_err().to_string();
        assert!(e.contains("[zns]") || e.contains("namespace"), "{e}");
        // The TOML of a conventional profile round-trips without a [zns] section.
        let p = Profile::load("sn640-op28", &[]).unwrap();
        let t = p.to_toml();
        assert!(!t.contains("[zns]") && t.contains("[ftl]"), "{t}");
        assert_eq!(Profile::from_toml(&t, "again", &[]).unwrap(), p);
    }

    #[test]
    fn every_builtin_profile_survives_as_image_text() {
        #[derive(Serialize, Deserialize)]
        struct Stored {
            #[serde(with = "as_toml_text")]
            profile: Profile,
        }
        for name in builtin_names() {
            let profile = Profile::load(name, &[]).unwrap();
            let v = toml::Value::try_from(Stored {
                profile: profile.clone(),
            })
            .unwrap();
            assert!(v["profile"].is_str(), "{name}: {v}");
            let back: Stored = v.try_into().unwrap();
            assert_eq!(back.profile, profile, "{name}");
        }
    }

    #[test]
    fn errors_in_a_profile_file_point_at_their_line() {
        let text = Profile::load("zn540", &[]).unwrap().to_toml();
        // A value of the wrong type, and a syntax error, each at a known line.
        let at = text
            .lines()
            .position(|l| l.starts_with("channels"))
            .unwrap()
            + 1;
        let wrong = text.replacen("channels = ", "channels = \"x\" #", 1);
        let e = Profile::from_toml(&wrong, "t.toml", &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(&format!("line {at},")) && e.contains("channels = \"x\""),
            "{e}"
        );
        let broken = format!("{text}[geometry\n");
        let e = Profile::from_toml(&broken, "t.toml", &[])
            .unwrap_err()
            .to_string();
        let last = broken.lines().count();
        assert!(e.contains(&format!("line {last},")), "{e}");
    }

    #[test]
    fn a_file_that_is_not_utf8_says_so() {
        let p = std::env::temp_dir().join(format!("zonelab-nonutf8-{}.toml", std::process::id()));
        std::fs::write(&p, b"zones = 4\n\xff\xfe").unwrap();
        let e = read_text(&p).unwrap_err().to_string();
        assert!(
            e.contains("not UTF-8 text (invalid byte at offset 10)"),
            "{e}"
        );
        let e = Profile::load(p.to_str().unwrap(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        std::fs::write(&p, "zones = 4\n").unwrap();
        assert_eq!(read_text(&p).unwrap(), "zones = 4\n");
        std::fs::remove_file(&p).ok();
    }

    #[test]
    fn bad_overrides_are_explained() {
        let err =
            |name: &str, sets: &[&str]| Profile::load(name, &ov(sets)).unwrap_err().to_string();
        let e = err("zn540", &["zonez=3"]);
        assert!(e.contains("no such profile field"), "{e}");
        let e = err("zn540", &["read=fast"]);
        assert!(e.contains("not a duration"), "{e}");
        // A value of the wrong type names the overrides and what the field takes.
        let e = err("zn540", &["read=true"]);
        assert!(
            e.contains("with read=true") && e.contains("expected a duration like"),
            "{e}"
        );
        // A bare name that a field left out of the file also has is ambiguous, and fields
        // left out are listed with the others.
        let e = err("znsplus-mlc", &["copyback=false"]);
        assert!(
            e.contains("ambiguous") && e.contains("flash.copyback, znsplus.copyback"),
            "{e}"
        );
        let e = err("znsplus-mlc", &["copyback_limt=2"]);
        assert!(e.contains("znsplus.copyback_limit"), "{e}");
        assert!(Profile::parse_overrides(&["zones".to_string()]).is_err());
        let e = Profile::load("nope", &[]).unwrap_err().to_string();
        assert!(e.contains("zn540"), "{e}");
    }
}
