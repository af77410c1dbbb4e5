//! The NVMe Zoned Namespace zone state machine: zone states, write pointers,
//! open/active resource limits and the NVMe status of every rule violation.
//! No timing and no flash: the device model wraps those around it.
//!
//! Behavioural reference: QEMU hw/nvme/ctrl.c (`nvme_do_write`,
//! `nvme_check_zone_write`, `nvme_zrm_*`, `nvme_zone_mgmt_send`,
//! `nvme_zone_mgmt_recv`). Authority: NVMe Zoned Namespace Command Set
//! Specification (zone state machine, Zone Management Send/Receive, Zone
//! Append). Where the two differ or the spec is silent the choice is written
//! next to the code.
//!
//! Conventional zones are not part of NVMe ZNS (its only zone type is
//! Sequential Write Required); they follow the zoned block device / ZBC model
//! Linux exposes: randomly writable, no write pointer, condition
//! "not write pointer", no zone management.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use zonelab_sim::Divisor;

use super::status::NvmeStatus;

/// A logical block address (in LBAs of the namespace's format).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Lba(pub u64);

impl Lba {
    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Lba {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::ops::Add<u64> for Lba {
    type Output = Lba;
    fn add(self, rhs: u64) -> Lba {
        Lba(self.0 + rhs)
    }
}

/// Index of a zone in the namespace (zone 0 starts at LBA 0).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct ZoneId(pub u32);

impl ZoneId {
    /// As a slice index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for ZoneId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Zone state (ZNS "Zone State", ZS field of the zone descriptor).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZoneState {
    /// ZSE.
    Empty,
    /// ZSIO.
    ImplicitlyOpened,
    /// ZSEO.
    ExplicitlyOpened,
    /// ZSC.
    Closed,
    /// ZSF.
    Full,
    /// ZSRO.
    ReadOnly,
    /// ZSO.
    Offline,
    /// Conventional zones only: no write pointer (ZBC condition NOT WRITE
    /// POINTER, Linux `BLK_ZONE_COND_NOT_WP`). Never counted as open/active.
    NotWritePointer,
}

impl ZoneState {
    /// All states, in report-filter (ZRASF) order, then `NotWritePointer`.
    pub const ALL: [ZoneState; 8] = [
        ZoneState::Empty,
        ZoneState::ImplicitlyOpened,
        ZoneState::ExplicitlyOpened,
        ZoneState::Closed,
        ZoneState::Full,
        ZoneState::ReadOnly,
        ZoneState::Offline,
        ZoneState::NotWritePointer,
    ];

    /// Kebab-case name, used by the CLI and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            ZoneState::Empty => "empty",
            ZoneState::ImplicitlyOpened => "implicitly-opened",
            ZoneState::ExplicitlyOpened => "explicitly-opened",
            ZoneState::Closed => "closed",
            ZoneState::Full => "full",
            ZoneState::ReadOnly => "read-only",
            ZoneState::Offline => "offline",
            ZoneState::NotWritePointer => "not-write-pointer",
        }
    }

    /// The name nvme-cli's `zns report-zones` prints.
    pub fn nvme_cli_name(self) -> &'static str {
        match self {
            ZoneState::Empty => "EMPTY",
            ZoneState::ImplicitlyOpened => "IMP_OPENED",
            ZoneState::ExplicitlyOpened => "EXP_OPENED",
            ZoneState::Closed => "CLOSED",
            ZoneState::Full => "FULL",
            ZoneState::ReadOnly => "READONLY",
            ZoneState::Offline => "OFFLINE",
            ZoneState::NotWritePointer => "NOT_WP",
        }
    }

    /// The ZS value of the zone descriptor (upper nibble of byte 1): 1h, 2h,
    /// 3h, 4h, Eh, Dh, Fh. `NotWritePointer` has no ZNS value; 0h as in ZBC.
    pub fn code(self) -> u8 {
        match self {
            ZoneState::Empty => 0x1,
            ZoneState::ImplicitlyOpened => 0x2,
            ZoneState::ExplicitlyOpened => 0x3,
            ZoneState::Closed => 0x4,
            ZoneState::ReadOnly => 0xD,
            ZoneState::Full => 0xE,
            ZoneState::Offline => 0xF,
            ZoneState::NotWritePointer => 0x0,
        }
    }

    /// The Zone Receive Action Specific Field value that selects this state
    /// in Report Zones (what `nvme zns report-zones --state` takes).
    pub fn zrasf(self) -> Option<u8> {
        match self {
            ZoneState::Empty => Some(1),
            ZoneState::ImplicitlyOpened => Some(2),
            ZoneState::ExplicitlyOpened => Some(3),
            ZoneState::Closed => Some(4),
            ZoneState::Full => Some(5),
            ZoneState::ReadOnly => Some(6),
            ZoneState::Offline => Some(7),
            ZoneState::NotWritePointer => None,
        }
    }

    /// Implicitly or explicitly opened (holds an open and an active resource).
    pub fn is_open(self) -> bool {
        matches!(
            self,
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened
        )
    }

    /// Opened or closed (holds an active resource).
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }
}

impl fmt::Display for ZoneState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A zone state name that is not recognised.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown zone state {0:?}; use empty, implicitly-opened (imp-open), explicitly-opened \
     (exp-open), closed, full, read-only, offline, not-wp, or the report-zones state number 1-7"
)]
pub struct ParseZoneStateError(pub String);

fn normalize(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace(['_', ' '], "-")
}

impl FromStr for ZoneState {
    type Err = ParseZoneStateError;

    /// Accepts our names, nvme-cli's printed names (`IMP_OPENED`, `READONLY`,
    /// ...), short forms and the report-zones ZRASF numbers 1..7.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = normalize(s);
        let st = match n.as_str() {
            "empty" | "1" => ZoneState::Empty,
            "implicitly-opened" | "implicitly-open" | "imp-opened" | "imp-open" | "impl-open"
            | "iopen" | "2" => ZoneState::ImplicitlyOpened,
            "explicitly-opened" | "explicitly-open" | "exp-opened" | "exp-open" | "expl-open"
            | "eopen" | "3" => ZoneState::ExplicitlyOpened,
            "closed" | "4" => ZoneState::Closed,
            "full" | "5" => ZoneState::Full,
            "read-only" | "readonly" | "ro" | "6" => ZoneState::ReadOnly,
            "offline" | "7" => ZoneState::Offline,
            "not-write-pointer" | "not-wp" | "conventional" => ZoneState::NotWritePointer,
            _ => return Err(ParseZoneStateError(s.to_string())),
        };
        Ok(st)
    }
}

/// Zone type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ZoneType {
    /// ZNS zone type 2h: writes only at the write pointer.
    SequentialWriteRequired,
    /// Randomly writable, no write pointer (ZBC zone type 1h).
    Conventional,
}

impl ZoneType {
    /// Kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            ZoneType::SequentialWriteRequired => "seq-write-required",
            ZoneType::Conventional => "conventional",
        }
    }

    /// The zone type code (ZNS ZT 2h; ZBC 1h for conventional).
    pub fn code(self) -> u8 {
        match self {
            ZoneType::SequentialWriteRequired => 0x2,
            ZoneType::Conventional => 0x1,
        }
    }
}

impl fmt::Display for ZoneType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Zone layout and resource limits of a zoned namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ZoneGeometry {
    /// Zone size in LBAs (ZSZE).
    pub zone_size: u64,
    /// Writable LBAs per sequential zone (ZCAP), `<= zone_size`.
    pub zone_capacity: u64,
    /// Number of zones; the namespace has `zones * zone_size` LBAs.
    pub zones: u32,
    /// The first `conventional_zones` zones are conventional.
    pub conventional_zones: u32,
    /// Maximum open zones (MOR + 1); 0 = no limit.
    pub max_open: u32,
    /// Maximum active zones (MAR + 1); 0 = no limit.
    pub max_active: u32,
}

/// A geometry that cannot describe a namespace.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// `zones` is 0.
    #[error("zones must be at least 1")]
    NoZones,
    /// `zone_size` is 0.
    #[error("zone_size must be at least 1 LBA")]
    ZeroZoneSize,
    /// `zone_capacity` is 0.
    #[error("zone_capacity must be at least 1 LBA")]
    ZeroCapacity,
    /// `zone_capacity > zone_size`.
    #[error("zone_capacity ({capacity}) must not exceed zone_size ({size})")]
    CapacityExceedsSize {
        /// zone_capacity
        capacity: u64,
        /// zone_size
        size: u64,
    },
    /// No sequential zone left.
    #[error(
        "conventional_zones ({conventional}) must be less than zones ({zones}): at least one \
         sequential zone is needed"
    )]
    TooManyConventional {
        /// conventional_zones
        conventional: u32,
        /// zones
        zones: u32,
    },
    /// `max_open > max_active` with both limited.
    #[error("max_open ({max_open}) must not exceed max_active ({max_active})")]
    OpenExceedsActive {
        /// max_open
        max_open: u32,
        /// max_active
        max_active: u32,
    },
    /// `zones * zone_size` overflows.
    #[error("zones * zone_size overflows a 64-bit LBA")]
    TooLarge,
}

impl ZoneGeometry {
    /// Checks the geometry.
    pub fn validate(&self) -> Result<(), GeometryError> {
        if self.zones == 0 {
            return Err(GeometryError::NoZones);
        }
        if self.zone_size == 0 {
            return Err(GeometryError::ZeroZoneSize);
        }
        if self.zone_capacity == 0 {
            return Err(GeometryError::ZeroCapacity);
        }
        if self.zone_capacity > self.zone_size {
            return Err(GeometryError::CapacityExceedsSize {
                capacity: self.zone_capacity,
                size: self.zone_size,
            });
        }
        if self.conventional_zones >= self.zones {
            return Err(GeometryError::TooManyConventional {
                conventional: self.conventional_zones,
                zones: self.zones,
            });
        }
        if self.max_open != 0 && self.max_active != 0 && self.max_open > self.max_active {
            return Err(GeometryError::OpenExceedsActive {
                max_open: self.max_open,
                max_active: self.max_active,
            });
        }
        if u64::from(self.zones).checked_mul(self.zone_size).is_none() {
            return Err(GeometryError::TooLarge);
        }
        Ok(())
    }

    /// Namespace size in LBAs (NSZE).
    pub fn total_lbas(&self) -> u64 {
        u64::from(self.zones) * self.zone_size
    }

    /// Number of sequential-write-required zones.
    pub fn sequential_zones(&self) -> u32 {
        self.zones - self.conventional_zones
    }

    /// Identify Namespace MOR (0's based; `u32::MAX` = no limit).
    pub fn mor(&self) -> u32 {
        self.max_open.wrapping_sub(1)
    }

    /// Identify Namespace MAR (0's based; `u32::MAX` = no limit).
    pub fn mar(&self) -> u32 {
        self.max_active.wrapping_sub(1)
    }
}

/// One zone: its descriptor fields plus the amount of host data in it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    /// Zone index.
    pub id: ZoneId,
    /// Zone start LBA (ZSLBA).
    pub start: Lba,
    /// Writable LBAs (ZCAP). Conventional zones: the zone size.
    pub capacity: u64,
    /// Zone size in LBAs.
    pub size: u64,
    /// Write pointer. `start` when Empty, `start + capacity` when Full (also
    /// after an early Finish), unchanged by a transition to ReadOnly/Offline.
    /// Conventional zones: always `start` (meaningless; see [`Zone::reported_wp`]).
    pub wp: Lba,
    /// LBAs written by the host since the last reset: `wp - start` except for
    /// a zone finished early, where it is less (the rest was never written;
    /// the device pads it). Always 0 for conventional zones.
    pub written: u64,
    /// Zone state.
    pub state: ZoneState,
    /// Zone type.
    pub ztype: ZoneType,
}

impl Zone {
    /// First LBA after the zone (`start + size`).
    pub fn end(&self) -> Lba {
        self.start + self.size
    }

    /// First LBA after the writable part (`start + capacity`).
    pub fn capacity_end(&self) -> Lba {
        self.start + self.capacity
    }

    /// The write pointer a controller reports in the zone descriptor: `None`
    /// ("not valid", QEMU reports all ones) for Full, ReadOnly and Offline
    /// zones (QEMU `nvme_wp_is_valid`) and for conventional zones.
    pub fn reported_wp(&self) -> Option<Lba> {
        match self.state {
            ZoneState::Full
            | ZoneState::ReadOnly
            | ZoneState::Offline
            | ZoneState::NotWritePointer => None,
            _ => Some(self.wp),
        }
    }

    /// LBAs that can still be written at the write pointer (0 unless the zone
    /// is Empty, opened or Closed).
    pub fn remaining(&self) -> u64 {
        match self.state {
            ZoneState::Empty
            | ZoneState::ImplicitlyOpened
            | ZoneState::ExplicitlyOpened
            | ZoneState::Closed => self.capacity_end().0 - self.wp.0,
            _ => 0,
        }
    }

    /// Full without having been written to capacity (finished by Finish Zone).
    pub fn finished_early(&self) -> bool {
        self.state == ZoneState::Full && self.written < self.capacity
    }

    /// Conventional zone.
    pub fn is_conventional(&self) -> bool {
        self.ztype == ZoneType::Conventional
    }
}

/// Report Zones filter (Zone Receive Action Specific Field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportFilter {
    /// List all zones (ZRASF 0).
    All,
    /// Only zones in this state.
    State(ZoneState),
}

impl ReportFilter {
    /// Does the zone match.
    pub fn matches(self, zone: &Zone) -> bool {
        match self {
            ReportFilter::All => true,
            ReportFilter::State(s) => zone.state == s,
        }
    }
}

impl FromStr for ReportFilter {
    type Err = ParseZoneStateError;
    /// `all` / `0`, or anything [`ZoneState::from_str`] takes.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match normalize(s).as_str() {
            "all" | "0" => Ok(ReportFilter::All),
            _ => s.parse().map(ReportFilter::State),
        }
    }
}

impl fmt::Display for ReportFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportFilter::All => f.write_str("all"),
            ReportFilter::State(s) => f.write_str(s.name()),
        }
    }
}

/// What a successful write or zone append did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteOutcome {
    /// The zone written.
    pub zone: ZoneId,
    /// First LBA written (for zone append: the LBA assigned, to be returned
    /// in the completion).
    pub lba: Lba,
    /// The zone went Empty/Closed -> ImplicitlyOpened.
    pub implicitly_opened: bool,
    /// Another, implicitly opened zone was closed to free an open resource.
    pub implicitly_closed: Option<ZoneId>,
    /// The write reached the zone capacity and the zone became Full.
    pub became_full: bool,
}

/// What a successful zone management action did to one zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MgmtOutcome {
    /// State before.
    pub from: ZoneState,
    /// State after (equal to `from` for a no-op).
    pub to: ZoneState,
    /// Write pointer before.
    pub wp_before: Lba,
    /// LBAs of host data in the zone before the command (what a reset erases;
    /// `capacity - written` is what a finish pads).
    pub written: u64,
    /// Explicit open only: an implicitly opened zone closed to free an open
    /// resource.
    pub implicitly_closed: Option<ZoneId>,
}

/// A saved zone set: the serde form of [`ZoneSet`] (validated on load).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneSetImage {
    /// Geometry.
    pub geometry: ZoneGeometry,
    /// Every zone, in order.
    pub zones: Vec<Zone>,
    /// Implicitly opened zones, oldest first (empty when `max_open` is 0).
    pub implicit_open_order: Vec<ZoneId>,
}

/// A zone set image that violates the geometry or the state invariants.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZoneSetImageError {
    /// Bad geometry.
    #[error("bad zone geometry: {0}")]
    Geometry(#[from] GeometryError),
    /// Zones inconsistent.
    #[error("inconsistent zone state: {0}")]
    Invariant(String),
}

/// The zones of one zoned namespace and their shared open/active resources.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ZoneSetImage", try_from = "ZoneSetImage")]
pub struct ZoneSet {
    geom: ZoneGeometry,
    zones: Vec<Zone>,
    /// Implicitly opened zones in the order they were implicitly opened
    /// (QEMU keeps `imp_open_zones` as a tail queue and auto-closes its
    /// head). Tracked only when `max_open != 0`, so it holds at most
    /// `max_open` ids.
    imp_order: VecDeque<ZoneId>,
    n_imp: u32,
    n_exp: u32,
    n_closed: u32,
    /// `geom.zone_size` as a divisor (LBA to zone index on every command).
    zone_div: Divisor,
}

impl From<ZoneSet> for ZoneSetImage {
    fn from(s: ZoneSet) -> Self {
        ZoneSetImage {
            geometry: s.geom,
            zones: s.zones,
            implicit_open_order: s.imp_order.into_iter().collect(),
        }
    }
}

impl TryFrom<ZoneSetImage> for ZoneSet {
    type Error = ZoneSetImageError;
    fn try_from(img: ZoneSetImage) -> Result<Self, Self::Error> {
        img.geometry.validate()?;
        let count = |st: ZoneState| img.zones.iter().filter(|z| z.state == st).count() as u32;
        let set = ZoneSet {
            geom: img.geometry,
            n_imp: count(ZoneState::ImplicitlyOpened),
            n_exp: count(ZoneState::ExplicitlyOpened),
            n_closed: count(ZoneState::Closed),
            zones: img.zones,
            imp_order: img.implicit_open_order.into_iter().collect(),
            zone_div: Divisor::new(img.geometry.zone_size),
        };
        set.check_invariants()
            .map_err(ZoneSetImageError::Invariant)?;
        Ok(set)
    }
}

impl ZoneSet {
    /// All zones Empty (conventional zones NotWritePointer).
    pub fn new(geom: ZoneGeometry) -> Result<ZoneSet, GeometryError> {
        geom.validate()?;
        let zones = (0..geom.zones)
            .map(|i| {
                let start = Lba(u64::from(i) * geom.zone_size);
                let conv = i < geom.conventional_zones;
                Zone {
                    id: ZoneId(i),
                    start,
                    capacity: if conv {
                        geom.zone_size
                    } else {
                        geom.zone_capacity
                    },
                    size: geom.zone_size,
                    wp: start,
                    written: 0,
                    state: if conv {
                        ZoneState::NotWritePointer
                    } else {
                        ZoneState::Empty
                    },
                    ztype: if conv {
                        ZoneType::Conventional
                    } else {
                        ZoneType::SequentialWriteRequired
                    },
                }
            })
            .collect();
        Ok(ZoneSet {
            geom,
            zones,
            imp_order: VecDeque::new(),
            n_imp: 0,
            n_exp: 0,
            n_closed: 0,
            zone_div: Divisor::new(geom.zone_size),
        })
    }

    /// The geometry.
    pub fn geometry(&self) -> &ZoneGeometry {
        &self.geom
    }

    /// The zone size as a divisor: `zone_div().quotient(lba)` is the index of the zone holding `lba`.
    pub fn zone_div(&self) -> Divisor {
        self.zone_div
    }

    /// One zone.
    ///
    /// # Panics
    /// If `id` is not a zone of this set; use [`ZoneSet::get`] for untrusted ids.
    pub fn zone(&self, id: ZoneId) -> &Zone {
        &self.zones[id.index()]
    }

    /// One zone, or `None` past the last zone.
    pub fn get(&self, id: ZoneId) -> Option<&Zone> {
        self.zones.get(id.index())
    }

    /// All zones in order.
    pub fn zones(&self) -> &[Zone] {
        &self.zones
    }

    /// The zone holding `lba`; LBA Out of Range past the namespace end.
    pub fn zone_of(&self, lba: Lba) -> Result<ZoneId, NvmeStatus> {
        if lba.0 >= self.total_lbas() {
            return Err(NvmeStatus::LbaOutOfRange);
        }
        Ok(ZoneId(self.zone_div.quotient(lba.0) as u32))
    }

    /// Maps the SLBA of a Zone Management Send/Receive to its zone as QEMU's
    /// `nvme_zone_mgmt_send` does: LBA Out of Range past the namespace end,
    /// Invalid Field in Command when `slba` is not a zone start.
    pub fn zone_at_start(&self, slba: Lba) -> Result<ZoneId, NvmeStatus> {
        let id = self.zone_of(slba)?;
        if self.zones[id.index()].start != slba {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        Ok(id)
    }

    /// Namespace size in LBAs.
    pub fn total_lbas(&self) -> u64 {
        self.geom.total_lbas()
    }

    /// Implicitly + explicitly opened zones.
    pub fn open_count(&self) -> u32 {
        self.n_imp + self.n_exp
    }

    /// Opened + closed zones.
    pub fn active_count(&self) -> u32 {
        self.n_imp + self.n_exp + self.n_closed
    }

    /// Implicitly opened zones.
    pub fn implicitly_opened_count(&self) -> u32 {
        self.n_imp
    }

    /// Explicitly opened zones.
    pub fn explicitly_opened_count(&self) -> u32 {
        self.n_exp
    }

    /// Closed zones.
    pub fn closed_count(&self) -> u32 {
        self.n_closed
    }

    /// Number of zones in `state` (O(zones)).
    pub fn count_state(&self, state: ZoneState) -> u32 {
        self.zones.iter().filter(|z| z.state == state).count() as u32
    }

    /// Implicitly opened zones, oldest first: the order in which they are
    /// closed to free open resources. Empty when `max_open` is 0 (unlimited:
    /// nothing is ever closed implicitly).
    pub fn implicit_open_order(&self) -> impl Iterator<Item = ZoneId> + '_ {
        self.imp_order.iter().copied()
    }

    // ----- internal state bookkeeping -------------------------------------

    fn tracks_order(&self) -> bool {
        self.geom.max_open != 0
    }

    /// Changes a zone's state, keeping the counts and the implicit-open
    /// queue in step. O(max_open) at worst.
    fn set_state(&mut self, i: usize, to: ZoneState) {
        let from = self.zones[i].state;
        if from == to {
            return;
        }
        match from {
            ZoneState::ImplicitlyOpened => {
                self.n_imp -= 1;
                if self.tracks_order() {
                    let id = ZoneId(i as u32);
                    if let Some(pos) = self.imp_order.iter().position(|&z| z == id) {
                        self.imp_order.remove(pos);
                    }
                }
            }
            ZoneState::ExplicitlyOpened => self.n_exp -= 1,
            ZoneState::Closed => self.n_closed -= 1,
            _ => {}
        }
        match to {
            ZoneState::ImplicitlyOpened => {
                self.n_imp += 1;
                if self.tracks_order() {
                    self.imp_order.push_back(ZoneId(i as u32));
                }
            }
            ZoneState::ExplicitlyOpened => self.n_exp += 1,
            ZoneState::Closed => self.n_closed += 1,
            _ => {}
        }
        self.zones[i].state = to;
    }

    /// Takes the open (and, from Empty, the active) resource for zone `i`,
    /// which is Empty or Closed, and opens it implicitly or explicitly.
    ///
    /// Order as QEMU `nvme_zrm_open_flags` + `nvme_zns_check_resources`:
    /// active limit first (Too Many Active Zones), then the open limit, where
    /// at the limit the oldest implicitly opened zone is closed
    /// (`nvme_zrm_auto_transition_zone`, auto_transition=on, the default); if
    /// there is none, Too Many Open Zones. Unlike QEMU, which auto-closes
    /// before it checks the active limit, nothing changes when the command
    /// fails.
    fn take_open_resource(
        &mut self,
        i: usize,
        explicit: bool,
    ) -> Result<Option<ZoneId>, NvmeStatus> {
        let from = self.zones[i].state;
        debug_assert!(matches!(from, ZoneState::Empty | ZoneState::Closed));
        if from == ZoneState::Empty
            && self.geom.max_active != 0
            && self.active_count() >= self.geom.max_active
        {
            return Err(NvmeStatus::TooManyActiveZones);
        }
        let mut closed = None;
        if self.geom.max_open != 0 && self.open_count() >= self.geom.max_open {
            let Some(&victim) = self.imp_order.front() else {
                return Err(NvmeStatus::TooManyOpenZones);
            };
            self.set_state(victim.index(), ZoneState::Closed);
            closed = Some(victim);
        }
        let to = if explicit {
            ZoneState::ExplicitlyOpened
        } else {
            ZoneState::ImplicitlyOpened
        };
        self.set_state(i, to);
        Ok(closed)
    }

    fn check_range(&self, slba: Lba, nlb: u64) -> Result<(), NvmeStatus> {
        // QEMU nvme_check_bounds (nlb == 0 cannot be encoded in NVMe; we
        // reject it as Invalid Field before this).
        match slba.0.checked_add(nlb) {
            Some(end) if end <= self.total_lbas() => Ok(()),
            _ => Err(NvmeStatus::LbaOutOfRange),
        }
    }

    // ----- I/O -------------------------------------------------------------

    /// Checks and applies a Write (`append == false`) or Zone Append
    /// (`append == true`; `slba` must be the zone start) of `nlb` blocks.
    ///
    /// Check order (QEMU `nvme_do_write` + `nvme_check_zone_write`):
    /// 1. `nlb == 0` -> Invalid Field in Command;
    /// 2. range past the namespace end -> LBA Out of Range;
    /// 3. append with `slba` not a zone start -> Invalid Field in Command;
    ///    the append's LBA becomes the write pointer;
    /// 4. zone state Full / ReadOnly / Offline -> Zone Is Full / Zone Is Read
    ///    Only / Zone Is Offline;
    /// 5. LBA != write pointer -> Zone Invalid Write;
    /// 6. end past `start + capacity` -> Zone Boundary Error;
    /// 7. implicit open from Empty/Closed -> Too Many Active Zones / Too Many
    ///    Open Zones (see `take_open_resource`).
    ///
    /// Conventional zones: any LBA inside the zone; a write that runs into
    /// the next zone -> Zone Boundary Error; append -> Invalid Field in
    /// Command; ReadOnly/Offline as above.
    ///
    /// On error nothing changes.
    pub fn write(&mut self, slba: Lba, nlb: u64, append: bool) -> Result<WriteOutcome, NvmeStatus> {
        if nlb == 0 {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        self.check_range(slba, nlb)?;
        let id = self.zone_of(slba)?;
        let i = id.index();
        let z = &self.zones[i];

        if z.ztype == ZoneType::Conventional {
            if append {
                return Err(NvmeStatus::InvalidFieldInCommand);
            }
            match z.state {
                ZoneState::ReadOnly => return Err(NvmeStatus::ZoneIsReadOnly),
                ZoneState::Offline => return Err(NvmeStatus::ZoneIsOffline),
                _ => {}
            }
            if slba.0 + nlb > z.end().0 {
                return Err(NvmeStatus::ZoneBoundaryError);
            }
            return Ok(WriteOutcome {
                zone: id,
                lba: slba,
                implicitly_opened: false,
                implicitly_closed: None,
                became_full: false,
            });
        }

        if append && slba != z.start {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        match z.state {
            ZoneState::Full => return Err(NvmeStatus::ZoneIsFull),
            ZoneState::ReadOnly => return Err(NvmeStatus::ZoneIsReadOnly),
            ZoneState::Offline => return Err(NvmeStatus::ZoneIsOffline),
            _ => {}
        }
        let lba = if append { z.wp } else { slba };
        if lba != z.wp {
            return Err(NvmeStatus::ZoneInvalidWrite);
        }
        if lba.0 + nlb > z.capacity_end().0 {
            return Err(NvmeStatus::ZoneBoundaryError);
        }

        let (implicitly_opened, implicitly_closed) = match z.state {
            ZoneState::Empty | ZoneState::Closed => (true, self.take_open_resource(i, false)?),
            _ => (false, None),
        };

        let z = &mut self.zones[i];
        z.wp = z.wp + nlb;
        z.written += nlb;
        let became_full = z.wp == z.capacity_end();
        if became_full {
            // QEMU nvme_advance_zone_wp -> nvme_zrm_finish.
            self.set_state(i, ZoneState::Full);
        }
        Ok(WriteOutcome {
            zone: id,
            lba,
            implicitly_opened,
            implicitly_closed,
            became_full,
        })
    }

    /// Checks a read of `nlb` blocks at `slba`.
    ///
    /// `nlb == 0` -> Invalid Field in Command; past the namespace end -> LBA
    /// Out of Range; any zone touched Offline -> Zone Is Offline. Reads may
    /// cross zone boundaries (Read Across Zone Boundaries supported, QEMU
    /// `zoned.cross_read=on` in `nvme_check_zone_read`) and may cover LBAs
    /// past the write pointer or past the zone capacity (they read as
    /// deallocated). O(zones touched).
    pub fn check_read(&self, slba: Lba, nlb: u64) -> Result<(), NvmeStatus> {
        if nlb == 0 {
            return Err(NvmeStatus::InvalidFieldInCommand);
        }
        self.check_range(slba, nlb)?;
        let first = self.zone_div.quotient(slba.0) as usize;
        let last = self.zone_div.quotient(slba.0 + nlb - 1) as usize;
        if self.zones[first..=last]
            .iter()
            .any(|z| z.state == ZoneState::Offline)
        {
            return Err(NvmeStatus::ZoneIsOffline);
        }
        Ok(())
    }

    // ----- zone management send ------------------------------------------

    /// Index of a zone that zone management may act on: LBA Out of Range for
    /// an id past the end (its SLBA would be past NSZE), Invalid Field in
    /// Command for a conventional zone (ZBC: ILLEGAL REQUEST / INVALID FIELD
    /// IN CDB for zone operations on conventional zones).
    fn mgmt_index(&self, id: ZoneId) -> Result<usize, NvmeStatus> {
        match self.zones.get(id.index()) {
            None => Err(NvmeStatus::LbaOutOfRange),
            Some(z) if z.ztype == ZoneType::Conventional => Err(NvmeStatus::InvalidFieldInCommand),
            Some(_) => Ok(id.index()),
        }
    }

    fn outcome(&self, i: usize, before: &Zone, implicitly_closed: Option<ZoneId>) -> MgmtOutcome {
        MgmtOutcome {
            from: before.state,
            to: self.zones[i].state,
            wp_before: before.wp,
            written: before.written,
            implicitly_closed,
        }
    }

    fn open_at(&mut self, i: usize) -> Result<MgmtOutcome, NvmeStatus> {
        let before = self.zones[i].clone();
        let closed = match before.state {
            ZoneState::Empty | ZoneState::Closed => self.take_open_resource(i, true)?,
            ZoneState::ImplicitlyOpened => {
                self.set_state(i, ZoneState::ExplicitlyOpened);
                None
            }
            ZoneState::ExplicitlyOpened => None,
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        };
        Ok(self.outcome(i, &before, closed))
    }

    fn close_at(&mut self, i: usize) -> Result<MgmtOutcome, NvmeStatus> {
        let before = self.zones[i].clone();
        match before.state {
            // QEMU nvme_zrm_close: an opened zone always becomes Closed, even
            // with wp == zslba (ZBC/null_blk would make it Empty instead).
            ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened => {
                self.set_state(i, ZoneState::Closed)
            }
            ZoneState::Closed => {}
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        Ok(self.outcome(i, &before, None))
    }

    fn finish_at(&mut self, i: usize) -> Result<MgmtOutcome, NvmeStatus> {
        let before = self.zones[i].clone();
        match before.state {
            ZoneState::Full => {}
            // ZSE -> ZSF is a direct transition in ZNS; it takes no resource
            // (QEMU nvme_zrm_finish; Klaus Jensen on linux-block, 2020-08-28:
            // "the spec is pretty clear that ZSE to ZSF is a legal direct
            // transition", so it must not fail for lack of resources).
            ZoneState::Empty
            | ZoneState::ImplicitlyOpened
            | ZoneState::ExplicitlyOpened
            | ZoneState::Closed => {
                self.set_state(i, ZoneState::Full);
                let z = &mut self.zones[i];
                z.wp = z.capacity_end();
            }
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        Ok(self.outcome(i, &before, None))
    }

    fn reset_at(&mut self, i: usize) -> Result<MgmtOutcome, NvmeStatus> {
        let before = self.zones[i].clone();
        match before.state {
            ZoneState::ImplicitlyOpened
            | ZoneState::ExplicitlyOpened
            | ZoneState::Closed
            | ZoneState::Full => {
                self.set_state(i, ZoneState::Empty);
                let z = &mut self.zones[i];
                z.wp = z.start;
                z.written = 0;
            }
            ZoneState::Empty => {}
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        Ok(self.outcome(i, &before, None))
    }

    fn offline_at(&mut self, i: usize) -> Result<MgmtOutcome, NvmeStatus> {
        let before = self.zones[i].clone();
        match before.state {
            // QEMU nvme_offline_zone: ReadOnly -> Offline, Offline is a no-op.
            ZoneState::ReadOnly => self.set_state(i, ZoneState::Offline),
            ZoneState::Offline => {}
            _ => return Err(NvmeStatus::InvalidZoneStateTransition),
        }
        Ok(self.outcome(i, &before, None))
    }

    /// ZNS+ TL_open of one zone (seed 000 §3.2.2): a Full zone is opened for sparse
    /// sequential overwrite with its write pointer back at the zone start, as an explicit open
    /// (Too Many Active Zones / Too Many Open Zones as for Open Zone). Its data stays (the
    /// device keeps it until it is overwritten or plugged); `written` restarts at 0. Any other
    /// state: Invalid Zone State Transition. On error nothing changes.
    pub fn reopen_for_overwrite(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        let before = self.zones[i].clone();
        if before.state != ZoneState::Full {
            return Err(NvmeStatus::InvalidZoneStateTransition);
        }
        self.set_state(i, ZoneState::Empty);
        {
            let z = &mut self.zones[i];
            z.wp = z.start;
            z.written = 0;
        }
        match self.take_open_resource(i, true) {
            Ok(closed) => Ok(self.outcome(i, &before, closed)),
            Err(e) => {
                self.set_state(i, ZoneState::Full);
                self.zones[i] = before;
                Err(e)
            }
        }
    }

    /// Open Zone. Empty/Closed -> ExplicitlyOpened (resources as for a write:
    /// Too Many Active Zones / Too Many Open Zones, closing the oldest
    /// implicitly opened zone at the open limit); ImplicitlyOpened ->
    /// ExplicitlyOpened; ExplicitlyOpened: no-op; otherwise Invalid Zone
    /// State Transition.
    pub fn open(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        self.open_at(i)
    }

    /// Close Zone. Opened -> Closed; Closed: no-op; otherwise Invalid Zone
    /// State Transition (Empty and Full included, as QEMU `nvme_zrm_close`).
    pub fn close(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        self.close_at(i)
    }

    /// Finish Zone. Empty/opened/Closed -> Full with wp = start + capacity,
    /// releasing its resources; Full: no-op; ReadOnly/Offline: Invalid Zone
    /// State Transition.
    pub fn finish(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        self.finish_at(i)
    }

    /// Reset Zone. Opened/Closed/Full -> Empty with wp = start; Empty: no-op;
    /// ReadOnly/Offline: Invalid Zone State Transition.
    pub fn reset(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        self.reset_at(i)
    }

    /// Offline Zone. ReadOnly -> Offline; Offline: no-op; otherwise Invalid
    /// Zone State Transition.
    pub fn offline(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = self.mgmt_index(id)?;
        self.offline_at(i)
    }

    fn seq_zones_in(&self, states: &[ZoneState]) -> Vec<usize> {
        self.zones
            .iter()
            .filter(|z| z.ztype == ZoneType::SequentialWriteRequired && states.contains(&z.state))
            .map(|z| z.id.index())
            .collect()
    }

    fn apply_all(
        &mut self,
        states: &[ZoneState],
        op: fn(&mut ZoneSet, usize) -> Result<MgmtOutcome, NvmeStatus>,
    ) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        let targets = self.seq_zones_in(states);
        let mut out = Vec::with_capacity(targets.len());
        for i in targets {
            out.push((ZoneId(i as u32), op(self, i)?));
        }
        Ok(out)
    }

    /// Open Zone with Select All: every Closed zone -> ExplicitlyOpened, in
    /// zone order. All or nothing: if the explicitly opened zones plus the
    /// Closed ones exceed `max_open`, Too Many Open Zones and no change
    /// (QEMU applies zones one by one and stops at the first failure; the
    /// spec does not allow partial success to be reported, so we check
    /// first). Implicitly opened zones are closed, oldest first, as needed;
    /// the active count does not change.
    pub fn open_all(&mut self) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        if self.geom.max_open != 0 && self.n_exp + self.n_closed > self.geom.max_open {
            return Err(NvmeStatus::TooManyOpenZones);
        }
        self.apply_all(&[ZoneState::Closed], ZoneSet::open_at)
    }

    /// Close Zone with Select All: every opened zone -> Closed.
    pub fn close_all(&mut self) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        self.apply_all(
            &[ZoneState::ImplicitlyOpened, ZoneState::ExplicitlyOpened],
            ZoneSet::close_at,
        )
    }

    /// Finish Zone with Select All: every opened or Closed zone -> Full.
    pub fn finish_all(&mut self) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        self.apply_all(
            &[
                ZoneState::ImplicitlyOpened,
                ZoneState::ExplicitlyOpened,
                ZoneState::Closed,
            ],
            ZoneSet::finish_at,
        )
    }

    /// Reset Zone with Select All: every opened, Closed or Full zone -> Empty.
    pub fn reset_all(&mut self) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        self.apply_all(
            &[
                ZoneState::ImplicitlyOpened,
                ZoneState::ExplicitlyOpened,
                ZoneState::Closed,
                ZoneState::Full,
            ],
            ZoneSet::reset_at,
        )
    }

    /// Offline Zone with Select All: every ReadOnly zone -> Offline.
    pub fn offline_all(&mut self) -> Result<Vec<(ZoneId, MgmtOutcome)>, NvmeStatus> {
        self.apply_all(&[ZoneState::ReadOnly], ZoneSet::offline_at)
    }

    // ----- zone management receive ---------------------------------------

    /// Report Zones: up to `max` zones matching `filter`, from zone `start`
    /// on, in zone order (QEMU `nvme_zone_mgmt_recv`).
    pub fn report(&self, filter: ReportFilter, start: ZoneId, max: usize) -> Vec<Zone> {
        self.zones
            .iter()
            .skip(start.index())
            .filter(|z| filter.matches(z))
            .take(max)
            .cloned()
            .collect()
    }

    /// Number of zones matching `filter` from `start` on (the Report Zones
    /// header's Number of Zones with Partial Report cleared).
    pub fn report_count(&self, filter: ReportFilter, start: ZoneId) -> usize {
        self.zones
            .iter()
            .skip(start.index())
            .filter(|z| filter.matches(z))
            .count()
    }

    // ----- media failure injection ---------------------------------------

    /// Media failure: the zone turns ReadOnly, giving up any open/active
    /// resource; the write pointer is kept (data stays readable). Any zone
    /// type. ReadOnly: no-op; Offline: Invalid Zone State Transition (ZSO is
    /// final until the media is replaced). Bad id: LBA Out of Range.
    pub fn set_read_only(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = id.index();
        let Some(before) = self.zones.get(i).cloned() else {
            return Err(NvmeStatus::LbaOutOfRange);
        };
        match before.state {
            ZoneState::Offline => return Err(NvmeStatus::InvalidZoneStateTransition),
            ZoneState::ReadOnly => {}
            _ => self.set_state(i, ZoneState::ReadOnly),
        }
        Ok(self.outcome(i, &before, None))
    }

    /// Media failure: the zone goes Offline from any state, giving up any
    /// open/active resource. Bad id: LBA Out of Range.
    pub fn set_offline(&mut self, id: ZoneId) -> Result<MgmtOutcome, NvmeStatus> {
        let i = id.index();
        let Some(before) = self.zones.get(i).cloned() else {
            return Err(NvmeStatus::LbaOutOfRange);
        };
        self.set_state(i, ZoneState::Offline);
        Ok(self.outcome(i, &before, None))
    }

    // ----- power loss --------------------------------------------------------

    /// Zone states as power returns after a power loss.
    ///
    /// `lost` lists sequential zones whose host data did not all survive, each with the blocks
    /// that did (fewer than [`Zone::written`]): their write pointer falls back to
    /// `start + kept`. ReadOnly and Offline zones are left alone.
    ///
    /// Opened states live only while the controller runs: every opened zone becomes Closed,
    /// and a Closed zone whose write pointer is at its start becomes Empty (QEMU
    /// `nvme_zoned_ns_shutdown` / `nvme_clear_zone`, the model this state machine follows; the
    /// implicit-open queue is emptied). A Full zone whose data did not all survive is no longer
    /// full: it becomes Closed, or Empty when nothing is left. Closing it takes an active
    /// resource; when none is free (`max_active`), the controller finishes the zone instead
    /// (Full, write pointer at the capacity, the rest unwritten: a Zone Active Excursion, NVMe
    /// ZNS command set §5.6, Zone Finished by Controller). Returns the zones finished so, in
    /// zone order, for the device to pad.
    ///
    /// `reopened` lists zones reopened for sparse overwrite (ZNS+ TL_open, seed 000 §3.2.2):
    /// their data past the write pointer is still in the original flash blocks, so they stay
    /// Closed (active) even with the write pointer at their start.
    pub fn power_up(&mut self, lost: &[(ZoneId, u64)], reopened: &[ZoneId]) -> Vec<ZoneId> {
        for i in 0..self.zones.len() {
            if self.zones[i].state.is_open() {
                self.set_state(i, ZoneState::Closed);
            }
        }
        let mut were_full = Vec::new();
        for &(id, kept) in lost {
            let i = id.index();
            let z = &mut self.zones[i];
            assert!(
                z.ztype == ZoneType::SequentialWriteRequired && kept < z.written,
                "zone {id}: {kept} blocks kept of {} written",
                z.written
            );
            match z.state {
                ZoneState::Closed | ZoneState::Full => {}
                _ => continue,
            }
            z.wp = z.start + kept;
            z.written = kept;
            if z.state == ZoneState::Full {
                if kept == 0 {
                    self.set_state(i, ZoneState::Empty);
                } else {
                    were_full.push(i);
                }
            }
        }
        for i in 0..self.zones.len() {
            let z = &self.zones[i];
            if z.state == ZoneState::Closed && z.wp == z.start && !reopened.contains(&z.id) {
                self.set_state(i, ZoneState::Empty);
            }
        }
        were_full.sort_unstable();
        let mut finished = Vec::new();
        for i in were_full {
            if self.geom.max_active == 0 || self.active_count() < self.geom.max_active {
                self.set_state(i, ZoneState::Closed);
            } else {
                let z = &mut self.zones[i];
                z.wp = z.capacity_end();
                finished.push(ZoneId(i as u32));
            }
        }
        finished
    }

    // ----- invariants ------------------------------------------------------

    /// Checks every invariant in O(zones): layout matches the geometry,
    /// write pointers in range and consistent with states, counters equal a
    /// recount, limits respected, implicit-open queue exact.
    pub fn check_invariants(&self) -> Result<(), String> {
        let g = &self.geom;
        g.validate().map_err(|e| e.to_string())?;
        if self.zones.len() != g.zones as usize {
            return Err(format!(
                "{} zones stored, geometry has {}",
                self.zones.len(),
                g.zones
            ));
        }
        let (mut imp, mut exp, mut closed) = (0u32, 0u32, 0u32);
        for (i, z) in self.zones.iter().enumerate() {
            let conv = (i as u32) < g.conventional_zones;
            let start = Lba(i as u64 * g.zone_size);
            let cap = if conv { g.zone_size } else { g.zone_capacity };
            let ztype = if conv {
                ZoneType::Conventional
            } else {
                ZoneType::SequentialWriteRequired
            };
            let e = |m: &str| Err(format!("zone {i}: {m}: {z:?}"));
            if z.id != ZoneId(i as u32)
                || z.start != start
                || z.size != g.zone_size
                || z.capacity != cap
                || z.ztype != ztype
            {
                return e("layout differs from geometry");
            }
            if conv {
                if !matches!(
                    z.state,
                    ZoneState::NotWritePointer | ZoneState::ReadOnly | ZoneState::Offline
                ) {
                    return e("conventional zone in a write pointer state");
                }
                if z.wp != z.start || z.written != 0 {
                    return e("conventional zone with a write pointer");
                }
                continue;
            }
            if z.state == ZoneState::NotWritePointer {
                return e("sequential zone without write pointer");
            }
            if z.wp < z.start || z.wp > z.capacity_end() {
                return e("write pointer outside [start, start + capacity]");
            }
            let used = z.wp.0 - z.start.0;
            if z.written > used {
                return e("more written than the write pointer allows");
            }
            match z.state {
                ZoneState::Empty if z.wp != z.start || z.written != 0 => {
                    return e("empty zone with data");
                }
                ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed
                    if z.wp == z.capacity_end() || z.written != used =>
                {
                    return e("active zone at capacity or with a gap");
                }
                ZoneState::Full if z.wp != z.capacity_end() => {
                    return e("full zone with write pointer below capacity");
                }
                _ => {}
            }
            match z.state {
                ZoneState::ImplicitlyOpened => imp += 1,
                ZoneState::ExplicitlyOpened => exp += 1,
                ZoneState::Closed => closed += 1,
                _ => {}
            }
        }
        if (imp, exp, closed) != (self.n_imp, self.n_exp, self.n_closed) {
            return Err(format!(
                "counts imp/exp/closed {}/{}/{} but recount {imp}/{exp}/{closed}",
                self.n_imp, self.n_exp, self.n_closed
            ));
        }
        if g.max_open != 0 && self.open_count() > g.max_open {
            return Err(format!(
                "{} open > max_open {}",
                self.open_count(),
                g.max_open
            ));
        }
        if g.max_active != 0 && self.active_count() > g.max_active {
            return Err(format!(
                "{} active > max_active {}",
                self.active_count(),
                g.max_active
            ));
        }
        if self.tracks_order() {
            if self.imp_order.len() != imp as usize {
                return Err(format!(
                    "implicit-open queue has {} entries for {imp} zones",
                    self.imp_order.len()
                ));
            }
            for (k, id) in self.imp_order.iter().enumerate() {
                match self.zones.get(id.index()) {
                    Some(z) if z.state == ZoneState::ImplicitlyOpened => {}
                    _ => return Err(format!("queue entry {id} is not implicitly opened")),
                }
                if self.imp_order.iter().skip(k + 1).any(|o| o == id) {
                    return Err(format!("zone {id} twice in the implicit-open queue"));
                }
            }
        } else if !self.imp_order.is_empty() {
            return Err("implicit-open queue kept without an open limit".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use NvmeStatus as S;
    use ZoneState as St;

    fn geom(zones: u32, conv: u32, max_open: u32, max_active: u32) -> ZoneGeometry {
        ZoneGeometry {
            zone_size: 16,
            zone_capacity: 12,
            zones,
            conventional_zones: conv,
            max_open,
            max_active,
        }
    }

    fn set(zones: u32, conv: u32, max_open: u32, max_active: u32) -> ZoneSet {
        ZoneSet::new(geom(zones, conv, max_open, max_active)).unwrap()
    }

    fn lba(z: u32, off: u64) -> Lba {
        Lba(u64::from(z) * 16 + off)
    }

    fn st(s: &ZoneSet, z: u32) -> ZoneState {
        s.zone(ZoneId(z)).state
    }

    #[track_caller]
    fn ok(s: &ZoneSet) {
        s.check_invariants().unwrap();
    }

    // ----- geometry ---------------------------------------------------------

    #[test]
    fn geometry_validation_names_field() {
        let g = geom(4, 0, 0, 0);
        assert!(ZoneSet::new(g).is_ok());
        let e = ZoneSet::new(ZoneGeometry {
            zone_capacity: 17,
            ..g
        })
        .unwrap_err();
        assert!(matches!(e, GeometryError::CapacityExceedsSize { .. }));
        assert!(e.to_string().contains("zone_capacity"));
        assert_eq!(
            ZoneSet::new(ZoneGeometry {
                zone_capacity: 0,
                ..g
            })
            .unwrap_err(),
            GeometryError::ZeroCapacity
        );
        assert_eq!(
            ZoneSet::new(ZoneGeometry { zone_size: 0, ..g }).unwrap_err(),
            GeometryError::ZeroZoneSize
        );
        assert_eq!(
            ZoneSet::new(ZoneGeometry { zones: 0, ..g }).unwrap_err(),
            GeometryError::NoZones
        );
        assert!(matches!(
            ZoneSet::new(ZoneGeometry {
                conventional_zones: 4,
                ..g
            })
            .unwrap_err(),
            GeometryError::TooManyConventional { .. }
        ));
        assert!(matches!(
            ZoneSet::new(ZoneGeometry {
                max_open: 3,
                max_active: 2,
                ..g
            })
            .unwrap_err(),
            GeometryError::OpenExceedsActive { .. }
        ));
        assert!(
            ZoneSet::new(ZoneGeometry {
                max_open: 3,
                max_active: 0,
                ..g
            })
            .is_ok()
        );
        assert_eq!(
            ZoneSet::new(ZoneGeometry {
                zone_size: u64::MAX,
                zone_capacity: 1,
                ..g
            })
            .unwrap_err(),
            GeometryError::TooLarge
        );
        assert_eq!(ZoneGeometry { max_open: 14, ..g }.mor(), 13);
        assert_eq!(g.mar(), u32::MAX);
    }

    #[test]
    fn layout_and_zone_of() {
        let s = set(4, 1, 0, 0);
        ok(&s);
        assert_eq!(s.total_lbas(), 64);
        assert_eq!(s.zone(ZoneId(0)).ztype, ZoneType::Conventional);
        assert_eq!(s.zone(ZoneId(0)).capacity, 16);
        assert_eq!(st(&s, 0), St::NotWritePointer);
        assert_eq!(s.zone(ZoneId(2)).start, Lba(32));
        assert_eq!(s.zone(ZoneId(2)).capacity, 12);
        assert_eq!(st(&s, 2), St::Empty);
        assert_eq!(s.zone_of(Lba(47)), Ok(ZoneId(2)));
        assert_eq!(s.zone_of(Lba(64)), Err(S::LbaOutOfRange));
        assert_eq!(s.zone_at_start(Lba(32)), Ok(ZoneId(2)));
        assert_eq!(s.zone_at_start(Lba(33)), Err(S::InvalidFieldInCommand));
        assert_eq!(s.zone_at_start(Lba(64)), Err(S::LbaOutOfRange));
        assert!(s.get(ZoneId(4)).is_none());
    }

    // ----- write rules ------------------------------------------------------

    #[test]
    fn write_sequential_and_full_at_capacity() {
        let mut s = set(4, 0, 0, 0);
        let o = s.write(lba(1, 0), 4, false).unwrap();
        assert_eq!(o.zone, ZoneId(1));
        assert_eq!(o.lba, lba(1, 0));
        assert!(o.implicitly_opened && !o.became_full && o.implicitly_closed.is_none());
        assert_eq!(st(&s, 1), St::ImplicitlyOpened);
        let o = s.write(lba(1, 4), 8, false).unwrap();
        assert!(o.became_full && !o.implicitly_opened);
        let z = s.zone(ZoneId(1));
        assert_eq!((z.state, z.wp, z.written), (St::Full, lba(1, 12), 12));
        assert_eq!(z.reported_wp(), None);
        assert_eq!(s.open_count(), 0);
        assert_eq!(s.active_count(), 0);
        ok(&s);
    }

    #[test]
    fn write_zero_blocks_is_invalid_field() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.write(lba(0, 0), 0, false), Err(S::InvalidFieldInCommand));
        assert_eq!(s.check_read(lba(0, 0), 0), Err(S::InvalidFieldInCommand));
    }

    #[test]
    fn write_past_namespace_end_is_lba_out_of_range() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.write(Lba(64), 1, false), Err(S::LbaOutOfRange));
        assert_eq!(s.write(Lba(60), 5, false), Err(S::LbaOutOfRange));
        assert_eq!(s.write(Lba(u64::MAX), 2, false), Err(S::LbaOutOfRange));
        // Range is checked before the zone rules (QEMU nvme_check_bounds first).
        assert_eq!(s.write(lba(3, 5), 100, true), Err(S::LbaOutOfRange));
        assert_eq!(s.check_read(Lba(63), 2), Err(S::LbaOutOfRange));
    }

    #[test]
    fn write_not_at_wp_is_invalid_write() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.write(lba(0, 1), 1, false), Err(S::ZoneInvalidWrite));
        s.write(lba(0, 0), 2, false).unwrap();
        assert_eq!(s.write(lba(0, 1), 1, false), Err(S::ZoneInvalidWrite));
        assert_eq!(s.write(lba(0, 3), 1, false), Err(S::ZoneInvalidWrite));
        // LBAs between capacity and zone size are never writable.
        assert_eq!(s.write(lba(1, 13), 1, false), Err(S::ZoneInvalidWrite));
        ok(&s);
    }

    #[test]
    fn write_crossing_capacity_is_boundary_error() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.write(lba(0, 0), 13, false), Err(S::ZoneBoundaryError));
        // Also when the write would spill into the next zone.
        assert_eq!(s.write(lba(0, 0), 20, false), Err(S::ZoneBoundaryError));
        s.write(lba(0, 0), 10, false).unwrap();
        assert_eq!(s.write(lba(0, 10), 3, false), Err(S::ZoneBoundaryError));
        // Not-at-wp is checked before the boundary (nvme_check_zone_write).
        assert_eq!(s.write(lba(0, 11), 5, false), Err(S::ZoneInvalidWrite));
        assert_eq!(s.zone(ZoneId(0)).wp, lba(0, 10));
        ok(&s);
    }

    #[test]
    fn write_to_full_read_only_offline() {
        let mut s = set(4, 0, 0, 0);
        s.finish(ZoneId(0)).unwrap();
        assert_eq!(s.write(lba(0, 0), 1, false), Err(S::ZoneIsFull));
        assert_eq!(s.write(lba(0, 0), 1, true), Err(S::ZoneIsFull));
        // State is checked before the write pointer (QEMU order).
        assert_eq!(s.write(lba(0, 5), 1, false), Err(S::ZoneIsFull));
        s.set_read_only(ZoneId(1)).unwrap();
        assert_eq!(s.write(lba(1, 0), 1, false), Err(S::ZoneIsReadOnly));
        assert_eq!(s.write(lba(1, 0), 1, true), Err(S::ZoneIsReadOnly));
        s.set_offline(ZoneId(2)).unwrap();
        assert_eq!(s.write(lba(2, 0), 1, false), Err(S::ZoneIsOffline));
        assert_eq!(s.write(lba(2, 0), 1, true), Err(S::ZoneIsOffline));
        ok(&s);
    }

    #[test]
    fn append_assigns_wp() {
        let mut s = set(4, 0, 0, 0);
        let a = s.write(lba(2, 0), 3, true).unwrap();
        assert_eq!(a.lba, lba(2, 0));
        assert!(a.implicitly_opened);
        let b = s.write(lba(2, 0), 4, true).unwrap();
        assert_eq!(b.lba, lba(2, 3));
        assert_eq!(s.zone(ZoneId(2)).wp, lba(2, 7));
        // Append that does not fit the remaining capacity.
        assert_eq!(s.write(lba(2, 0), 6, true), Err(S::ZoneBoundaryError));
        let c = s.write(lba(2, 0), 5, true).unwrap();
        assert_eq!(c.lba, lba(2, 7));
        assert!(c.became_full);
        ok(&s);
    }

    #[test]
    fn append_not_at_zone_start_is_invalid_field() {
        let mut s = set(4, 0, 0, 0);
        s.write(lba(1, 0), 2, false).unwrap();
        // Even at the write pointer: append takes the zone start.
        assert_eq!(s.write(lba(1, 2), 1, true), Err(S::InvalidFieldInCommand));
        assert_eq!(s.write(lba(1, 5), 1, true), Err(S::InvalidFieldInCommand));
    }

    #[test]
    fn conventional_zones() {
        let mut s = set(4, 2, 1, 1);
        // Random writes anywhere inside, repeated, in any order.
        for (off, n) in [(5, 3), (0, 16), (5, 3), (15, 1)] {
            let o = s.write(lba(1, off), n, false).unwrap();
            assert_eq!(o.lba, lba(1, off));
            assert!(!o.implicitly_opened && !o.became_full);
        }
        assert_eq!(st(&s, 1), St::NotWritePointer);
        assert_eq!(s.open_count(), 0);
        // Crossing into the next zone (even a conventional one) is an error.
        assert_eq!(s.write(lba(0, 10), 7, false), Err(S::ZoneBoundaryError));
        assert_eq!(s.write(lba(1, 10), 7, false), Err(S::ZoneBoundaryError));
        // No append.
        assert_eq!(s.write(lba(1, 0), 1, true), Err(S::InvalidFieldInCommand));
        // No zone management.
        for r in [
            s.open(ZoneId(0)),
            s.close(ZoneId(0)),
            s.finish(ZoneId(0)),
            s.reset(ZoneId(0)),
            s.offline(ZoneId(0)),
        ] {
            assert_eq!(r, Err(S::InvalidFieldInCommand));
        }
        // Select-all skips them; limits unaffected.
        s.write(lba(2, 0), 1, false).unwrap();
        assert_eq!(s.reset_all().unwrap().len(), 1);
        assert_eq!(s.zone(ZoneId(0)).reported_wp(), None);
        // Media failures apply.
        s.set_read_only(ZoneId(1)).unwrap();
        assert_eq!(s.write(lba(1, 0), 1, false), Err(S::ZoneIsReadOnly));
        assert_eq!(s.offline_all().unwrap().len(), 0);
        s.set_offline(ZoneId(1)).unwrap();
        assert_eq!(s.write(lba(1, 0), 1, false), Err(S::ZoneIsOffline));
        assert_eq!(s.check_read(lba(1, 0), 1), Err(S::ZoneIsOffline));
        ok(&s);
    }

    // ----- resources ----------------------------------------------------------

    #[test]
    fn implicit_open_closes_oldest_implicitly_opened() {
        let mut s = set(6, 0, 2, 0);
        s.write(lba(0, 0), 1, false).unwrap();
        s.write(lba(1, 0), 1, false).unwrap();
        // A later write to zone 0 does not make it younger (QEMU queue order).
        s.write(lba(0, 1), 1, false).unwrap();
        let o = s.write(lba(2, 0), 1, false).unwrap();
        assert_eq!(o.implicitly_closed, Some(ZoneId(0)));
        assert_eq!(st(&s, 0), St::Closed);
        assert_eq!(s.open_count(), 2);
        assert_eq!(s.active_count(), 3);
        // Writing a closed zone re-opens it implicitly, closing zone 1.
        let o = s.write(lba(0, 2), 1, false).unwrap();
        assert!(o.implicitly_opened);
        assert_eq!(o.implicitly_closed, Some(ZoneId(1)));
        assert_eq!(
            s.implicit_open_order().collect::<Vec<_>>(),
            [ZoneId(2), ZoneId(0)]
        );
        ok(&s);
    }

    #[test]
    fn too_many_open_when_all_explicit() {
        let mut s = set(6, 0, 2, 0);
        s.open(ZoneId(0)).unwrap();
        s.open(ZoneId(1)).unwrap();
        let before = s.clone();
        assert_eq!(s.write(lba(2, 0), 1, false), Err(S::TooManyOpenZones));
        assert_eq!(s.open(ZoneId(2)), Err(S::TooManyOpenZones));
        assert_eq!(s, before);
        // Writes to already opened zones need nothing.
        s.write(lba(0, 0), 1, false).unwrap();
        ok(&s);
    }

    #[test]
    fn too_many_active_from_empty_but_closed_zone_can_open() {
        let mut s = set(6, 0, 2, 2);
        s.write(lba(0, 0), 1, false).unwrap();
        s.write(lba(1, 0), 1, false).unwrap();
        s.close(ZoneId(0)).unwrap();
        let before = s.clone();
        assert_eq!(s.write(lba(2, 0), 1, false), Err(S::TooManyActiveZones));
        assert_eq!(s.open(ZoneId(2)), Err(S::TooManyActiveZones));
        // No side effect: zone 1 was not auto-closed by the failed attempt.
        assert_eq!(s, before);
        // A closed zone needs only an open resource.
        s.write(lba(0, 1), 1, false).unwrap();
        assert_eq!(st(&s, 0), St::ImplicitlyOpened);
        // Open limit reached: writing closed zone 0 again is fine, but with
        // both open and active exhausted an Empty zone reports active first.
        s.close(ZoneId(1)).unwrap();
        s.open(ZoneId(1)).unwrap();
        assert_eq!(s.write(lba(3, 0), 1, false), Err(S::TooManyActiveZones));
        ok(&s);
    }

    #[test]
    fn active_check_precedes_open_check() {
        // Open and active both exhausted, with an implicit zone to close:
        // from Empty the active limit decides (QEMU nvme_zns_check_resources).
        let mut s = set(6, 0, 1, 1);
        s.write(lba(0, 0), 1, false).unwrap();
        assert_eq!(s.write(lba(1, 0), 1, false), Err(S::TooManyActiveZones));
        assert_eq!(st(&s, 0), St::ImplicitlyOpened);
    }

    #[test]
    fn limits_released_by_finish_reset_and_failures() {
        let mut s = set(6, 0, 1, 2);
        s.write(lba(0, 0), 1, false).unwrap();
        s.finish(ZoneId(0)).unwrap();
        assert_eq!((s.open_count(), s.active_count()), (0, 0));
        s.write(lba(1, 0), 1, false).unwrap();
        s.set_read_only(ZoneId(1)).unwrap();
        assert_eq!((s.open_count(), s.active_count()), (0, 0));
        s.open(ZoneId(2)).unwrap();
        s.set_offline(ZoneId(2)).unwrap();
        assert_eq!((s.open_count(), s.active_count()), (0, 0));
        ok(&s);
    }

    // ----- open ---------------------------------------------------------------

    #[test]
    fn explicit_open_transitions() {
        let mut s = set(6, 0, 2, 3);
        let o = s.open(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::Empty, St::ExplicitlyOpened));
        let o = s.open(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::ExplicitlyOpened, St::ExplicitlyOpened));
        s.write(lba(1, 0), 2, false).unwrap();
        let o = s.open(ZoneId(1)).unwrap();
        assert_eq!((o.from, o.to), (St::ImplicitlyOpened, St::ExplicitlyOpened));
        assert_eq!(o.written, 2);
        assert_eq!(s.implicit_open_order().count(), 0);
        s.close(ZoneId(1)).unwrap();
        let o = s.open(ZoneId(1)).unwrap();
        assert_eq!((o.from, o.to), (St::Closed, St::ExplicitlyOpened));
        s.finish(ZoneId(2)).unwrap();
        assert_eq!(s.open(ZoneId(2)), Err(S::InvalidZoneStateTransition));
        s.set_read_only(ZoneId(3)).unwrap();
        assert_eq!(s.open(ZoneId(3)), Err(S::InvalidZoneStateTransition));
        s.set_offline(ZoneId(4)).unwrap();
        assert_eq!(s.open(ZoneId(4)), Err(S::InvalidZoneStateTransition));
        assert_eq!(s.open(ZoneId(6)), Err(S::LbaOutOfRange));
        ok(&s);
    }

    #[test]
    fn explicit_open_closes_implicit_zone_at_open_limit() {
        // QEMU nvme_zrm_open_flags runs the auto transition for explicit
        // opens too.
        let mut s = set(6, 0, 2, 0);
        s.write(lba(0, 0), 1, false).unwrap();
        s.write(lba(1, 0), 1, false).unwrap();
        let o = s.open(ZoneId(2)).unwrap();
        assert_eq!(o.implicitly_closed, Some(ZoneId(0)));
        assert_eq!(st(&s, 0), St::Closed);
        ok(&s);
    }

    // ----- close ----------------------------------------------------------------

    #[test]
    fn close_transitions() {
        let mut s = set(6, 0, 0, 0);
        s.write(lba(0, 0), 3, false).unwrap();
        let o = s.close(ZoneId(0)).unwrap();
        assert_eq!(
            (o.from, o.to, o.wp_before),
            (St::ImplicitlyOpened, St::Closed, lba(0, 3))
        );
        let o = s.close(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::Closed, St::Closed));
        // An explicitly opened zone with nothing written goes to Closed, not
        // Empty (QEMU nvme_zrm_close; null_blk/ZBC differ).
        s.open(ZoneId(1)).unwrap();
        let o = s.close(ZoneId(1)).unwrap();
        assert_eq!(o.to, St::Closed);
        assert_eq!(s.active_count(), 2);
        assert_eq!(s.close(ZoneId(2)), Err(S::InvalidZoneStateTransition));
        s.finish(ZoneId(2)).unwrap();
        assert_eq!(s.close(ZoneId(2)), Err(S::InvalidZoneStateTransition));
        s.set_read_only(ZoneId(3)).unwrap();
        assert_eq!(s.close(ZoneId(3)), Err(S::InvalidZoneStateTransition));
        s.set_offline(ZoneId(4)).unwrap();
        assert_eq!(s.close(ZoneId(4)), Err(S::InvalidZoneStateTransition));
        ok(&s);
    }

    // ----- finish ---------------------------------------------------------------

    #[test]
    fn finish_transitions() {
        let mut s = set(6, 0, 0, 0);
        s.write(lba(0, 0), 5, false).unwrap();
        let o = s.finish(ZoneId(0)).unwrap();
        assert_eq!(
            (o.from, o.to, o.wp_before, o.written),
            (St::ImplicitlyOpened, St::Full, lba(0, 5), 5)
        );
        let z = s.zone(ZoneId(0));
        assert_eq!((z.wp, z.written), (lba(0, 12), 5));
        assert!(z.finished_early());
        assert_eq!(z.remaining(), 0);
        let o = s.finish(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::Full, St::Full));
        let o = s.finish(ZoneId(1)).unwrap();
        assert_eq!((o.from, o.to, o.written), (St::Empty, St::Full, 0));
        s.open(ZoneId(2)).unwrap();
        s.close(ZoneId(2)).unwrap();
        assert_eq!(s.finish(ZoneId(2)).unwrap().from, St::Closed);
        s.open(ZoneId(3)).unwrap();
        assert_eq!(s.finish(ZoneId(3)).unwrap().from, St::ExplicitlyOpened);
        s.set_read_only(ZoneId(4)).unwrap();
        assert_eq!(s.finish(ZoneId(4)), Err(S::InvalidZoneStateTransition));
        s.set_offline(ZoneId(5)).unwrap();
        assert_eq!(s.finish(ZoneId(5)), Err(S::InvalidZoneStateTransition));
        assert_eq!(s.active_count(), 0);
        ok(&s);
    }

    #[test]
    fn finish_empty_needs_no_resource() {
        let mut s = set(6, 0, 1, 1);
        s.open(ZoneId(0)).unwrap();
        let o = s.finish(ZoneId(1)).unwrap();
        assert_eq!(o.to, St::Full);
        assert_eq!(s.active_count(), 1);
        ok(&s);
    }

    // ----- reset ----------------------------------------------------------------

    #[test]
    fn reset_transitions() {
        let mut s = set(6, 0, 0, 0);
        for z in 0..6 {
            s.write(lba(z, 0), 4, false).unwrap();
        }
        s.open(ZoneId(1)).unwrap();
        s.close(ZoneId(2)).unwrap();
        s.finish(ZoneId(3)).unwrap();
        s.set_read_only(ZoneId(4)).unwrap();
        s.set_offline(ZoneId(5)).unwrap();
        for (z, from) in [
            (0, St::ImplicitlyOpened),
            (1, St::ExplicitlyOpened),
            (2, St::Closed),
            (3, St::Full),
        ] {
            let o = s.reset(ZoneId(z)).unwrap();
            assert_eq!((o.from, o.to, o.written), (from, St::Empty, 4));
            let zz = s.zone(ZoneId(z));
            assert_eq!((zz.wp, zz.written), (zz.start, 0));
        }
        let o = s.reset(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::Empty, St::Empty));
        assert_eq!(s.reset(ZoneId(4)), Err(S::InvalidZoneStateTransition));
        assert_eq!(s.reset(ZoneId(5)), Err(S::InvalidZoneStateTransition));
        assert_eq!(s.active_count(), 0);
        ok(&s);
    }

    // ----- offline / media failure ----------------------------------------------

    #[test]
    fn offline_action_only_from_read_only() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.offline(ZoneId(0)), Err(S::InvalidZoneStateTransition));
        s.write(lba(0, 0), 1, false).unwrap();
        assert_eq!(s.offline(ZoneId(0)), Err(S::InvalidZoneStateTransition));
        s.set_read_only(ZoneId(0)).unwrap();
        assert_eq!(s.check_read(lba(0, 0), 16), Ok(()));
        let o = s.offline(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::ReadOnly, St::Offline));
        let o = s.offline(ZoneId(0)).unwrap();
        assert_eq!((o.from, o.to), (St::Offline, St::Offline));
        assert_eq!(
            s.set_read_only(ZoneId(0)),
            Err(S::InvalidZoneStateTransition)
        );
        assert_eq!(s.set_offline(ZoneId(9)), Err(S::LbaOutOfRange));
        ok(&s);
    }

    // ----- power loss ------------------------------------------------------------------

    #[test]
    fn power_up_closes_opened_zones_and_rolls_back_lost_data() {
        let mut s = set(6, 1, 3, 3);
        s.write(lba(1, 0), 5, false).unwrap(); // implicitly opened, 5 blocks
        s.open(ZoneId(2)).unwrap(); // explicitly opened, nothing written
        s.write(lba(3, 0), 12, false).unwrap(); // full by writes
        s.write(lba(4, 0), 3, false).unwrap();
        s.close(ZoneId(4)).unwrap();
        let finished = s.power_up(&[(ZoneId(1), 2), (ZoneId(3), 7), (ZoneId(4), 0)], &[]);
        assert!(finished.is_empty());
        assert_eq!((st(&s, 1), s.zone(ZoneId(1)).wp), (St::Closed, lba(1, 2)));
        assert_eq!(st(&s, 2), St::Empty, "opened without data: empty");
        assert_eq!((st(&s, 3), s.zone(ZoneId(3)).wp), (St::Closed, lba(3, 7)));
        assert_eq!((st(&s, 4), s.zone(ZoneId(4)).wp), (St::Empty, lba(4, 0)));
        assert_eq!(st(&s, 0), St::NotWritePointer);
        assert_eq!(s.open_count(), 0);
        assert_eq!(s.implicit_open_order().count(), 0);
        ok(&s);
        // Writing again opens implicitly from Closed.
        assert!(s.write(lba(1, 2), 1, false).unwrap().implicitly_opened);
        ok(&s);
    }

    #[test]
    fn power_up_finishes_full_zones_that_would_exceed_max_active() {
        let mut s = set(6, 0, 2, 2);
        s.write(lba(2, 0), 12, false).unwrap(); // Full: no active resource
        s.write(lba(3, 0), 12, false).unwrap();
        s.write(lba(4, 0), 12, false).unwrap();
        s.write(lba(0, 0), 4, false).unwrap();
        s.write(lba(1, 0), 4, false).unwrap();
        s.close(ZoneId(1)).unwrap();
        assert_eq!(s.active_count(), 2);
        // Zone 1 loses everything, freeing one active resource for zone 2; zone 3 is kept
        // full by the controller; zone 4 loses all its data.
        let finished = s.power_up(
            &[
                (ZoneId(1), 0),
                (ZoneId(2), 6),
                (ZoneId(3), 1),
                (ZoneId(4), 0),
            ],
            &[],
        );
        assert_eq!(finished, vec![ZoneId(3)]);
        assert_eq!(st(&s, 2), St::Closed);
        let z3 = s.zone(ZoneId(3));
        assert_eq!((z3.state, z3.wp, z3.written), (St::Full, lba(3, 12), 1));
        assert!(z3.finished_early());
        assert_eq!(st(&s, 4), St::Empty);
        assert_eq!(s.active_count(), 2);
        ok(&s);
    }

    // ----- reads -------------------------------------------------------------------

    #[test]
    fn reads_cross_zones_but_not_offline_or_past_end() {
        let mut s = set(4, 0, 0, 0);
        assert_eq!(s.check_read(Lba(0), 64), Ok(()));
        // Past the write pointer and in the capacity gap: allowed.
        assert_eq!(s.check_read(lba(1, 13), 3), Ok(()));
        s.set_offline(ZoneId(2)).unwrap();
        assert_eq!(s.check_read(lba(1, 10), 6), Ok(()));
        assert_eq!(s.check_read(lba(1, 10), 7), Err(S::ZoneIsOffline));
        assert_eq!(s.check_read(lba(0, 0), 64), Err(S::ZoneIsOffline));
        assert_eq!(s.check_read(lba(3, 0), 16), Ok(()));
        assert_eq!(s.check_read(lba(3, 0), 17), Err(S::LbaOutOfRange));
    }

    // ----- select all ----------------------------------------------------------------

    #[test]
    fn select_all_semantics() {
        let mut s = set(8, 1, 0, 0);
        s.write(lba(1, 0), 1, false).unwrap(); // imp
        s.open(ZoneId(2)).unwrap(); // exp
        s.write(lba(3, 0), 1, false).unwrap();
        s.close(ZoneId(3)).unwrap(); // closed
        s.finish(ZoneId(4)).unwrap(); // full
        s.write(lba(5, 0), 1, false).unwrap();
        s.set_read_only(ZoneId(5)).unwrap(); // ro
        // 6, 7 empty

        let mut t = s.clone();
        let r = t.open_all().unwrap();
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [ZoneId(3)]);
        assert_eq!(st(&t, 3), St::ExplicitlyOpened);
        assert_eq!(st(&t, 1), St::ImplicitlyOpened);
        ok(&t);

        let mut t = s.clone();
        let r = t.close_all().unwrap();
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            [ZoneId(1), ZoneId(2)]
        );
        assert_eq!(t.open_count(), 0);
        assert_eq!(t.active_count(), 3);
        ok(&t);

        let mut t = s.clone();
        let r = t.finish_all().unwrap();
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            [ZoneId(1), ZoneId(2), ZoneId(3)]
        );
        assert_eq!(t.active_count(), 0);
        assert_eq!(st(&t, 6), St::Empty);
        ok(&t);

        let mut t = s.clone();
        let r = t.reset_all().unwrap();
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            [ZoneId(1), ZoneId(2), ZoneId(3), ZoneId(4)]
        );
        assert_eq!(st(&t, 5), St::ReadOnly);
        ok(&t);

        let mut t = s.clone();
        let r = t.offline_all().unwrap();
        assert_eq!(r.iter().map(|x| x.0).collect::<Vec<_>>(), [ZoneId(5)]);
        assert_eq!(st(&t, 5), St::Offline);
        ok(&t);
    }

    #[test]
    fn open_all_is_all_or_nothing() {
        let mut s = set(8, 0, 3, 0);
        for z in 0..3 {
            s.write(lba(z, 0), 1, false).unwrap();
            s.close(ZoneId(z)).unwrap();
        }
        s.open(ZoneId(3)).unwrap();
        let before = s.clone();
        assert_eq!(s.open_all(), Err(S::TooManyOpenZones));
        assert_eq!(s, before);
        s.finish(ZoneId(3)).unwrap();
        s.write(lba(4, 0), 1, false).unwrap(); // implicitly opened, will be closed
        let r = s.open_all().unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].1.implicitly_closed, None);
        assert_eq!(r[2].1.implicitly_closed, Some(ZoneId(4)));
        assert_eq!(st(&s, 4), St::Closed);
        assert_eq!(s.explicitly_opened_count(), 3);
        ok(&s);
    }

    // ----- report ----------------------------------------------------------------------

    #[test]
    fn report_filters_and_paging() {
        let mut s = set(6, 1, 0, 0);
        s.write(lba(2, 0), 1, false).unwrap();
        s.write(lba(4, 0), 1, false).unwrap();
        let all = s.report(ReportFilter::All, ZoneId(0), usize::MAX);
        assert_eq!(all.len(), 6);
        let imp = s.report(ReportFilter::State(St::ImplicitlyOpened), ZoneId(0), 10);
        assert_eq!(
            imp.iter().map(|z| z.id).collect::<Vec<_>>(),
            [ZoneId(2), ZoneId(4)]
        );
        let d = &imp[0];
        assert_eq!(
            (d.ztype, d.state, d.start, d.capacity, d.reported_wp()),
            (
                ZoneType::SequentialWriteRequired,
                St::ImplicitlyOpened,
                Lba(32),
                12,
                Some(Lba(33))
            )
        );
        assert_eq!(
            s.report(ReportFilter::State(St::Empty), ZoneId(3), 1)[0].id,
            ZoneId(3)
        );
        assert_eq!(s.report_count(ReportFilter::State(St::Empty), ZoneId(0)), 3);
        assert_eq!(s.report(ReportFilter::All, ZoneId(9), 4).len(), 0);
        assert_eq!(s.report(ReportFilter::All, ZoneId(0), 0).len(), 0);
    }

    #[test]
    fn state_and_filter_parsing() {
        for st in ZoneState::ALL {
            assert_eq!(st.name().parse::<ZoneState>(), Ok(st));
            assert_eq!(st.nvme_cli_name().parse::<ZoneState>(), Ok(st));
            if let Some(n) = st.zrasf() {
                assert_eq!(n.to_string().parse::<ZoneState>(), Ok(st));
            }
        }
        assert_eq!("imp-open".parse(), Ok(St::ImplicitlyOpened));
        assert_eq!("EXP_OPENED".parse(), Ok(St::ExplicitlyOpened));
        assert_eq!("Read Only".parse(), Ok(St::ReadOnly));
        assert!("bogus".parse::<ZoneState>().is_err());
        assert_eq!("all".parse(), Ok(ReportFilter::All));
        assert_eq!("full".parse(), Ok(ReportFilter::State(St::Full)));
        assert_eq!(St::Full.code(), 0xE);
        assert_eq!(St::ReadOnly.code(), 0xD);
    }

    #[test]
    fn image_roundtrip_and_validation() {
        let mut s = set(6, 1, 2, 3);
        s.write(lba(1, 0), 1, false).unwrap();
        s.write(lba(2, 0), 1, false).unwrap();
        s.finish(ZoneId(3)).unwrap();
        let img = ZoneSetImage::from(s.clone());
        assert_eq!(ZoneSet::try_from(img.clone()).unwrap(), s);
        let mut bad = img.clone();
        bad.zones[1].wp = Lba(1000);
        assert!(ZoneSet::try_from(bad).is_err());
        let mut bad = img.clone();
        bad.implicit_open_order.reverse();
        bad.implicit_open_order.push(ZoneId(1));
        assert!(ZoneSet::try_from(bad).is_err());
        let mut bad = img;
        bad.geometry.zone_capacity = 0;
        assert!(matches!(
            ZoneSet::try_from(bad),
            Err(ZoneSetImageError::Geometry(_))
        ));
    }

    #[test]
    fn zone_record_is_small() {
        // 40,704 zones must stay around 2 MB.
        assert!(std::mem::size_of::<Zone>() <= 48);
    }

    #[test]
    fn unlimited_resources_keep_no_queue() {
        let mut s = set(64, 0, 0, 0);
        for z in 0..64 {
            s.write(lba(z, 0), 1, false).unwrap();
        }
        assert_eq!(s.open_count(), 64);
        assert_eq!(s.implicit_open_order().count(), 0);
        s.close_all().unwrap();
        assert_eq!(s.active_count(), 64);
        ok(&s);
    }

    // ----- property test -------------------------------------------------------------

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Cmd {
            Write(u64, u64, bool),
            WriteAtWp(u32, u64),
            Append(u32, u64),
            Read(u64, u64),
            Open(u32),
            Close(u32),
            Finish(u32),
            Reset(u32),
            Offline(u32),
            OpenAll,
            CloseAll,
            FinishAll,
            ResetAll,
            OfflineAll,
            SetReadOnly(u32),
            SetOffline(u32),
        }

        fn geometry() -> impl Strategy<Value = ZoneGeometry> {
            (1u32..10, 1u64..12)
                .prop_flat_map(|(zones, size)| (Just(zones), Just(size), 1..=size, 0..zones))
                .prop_flat_map(|(zones, size, cap, conv)| {
                    (Just((zones, size, cap, conv)), 0..=zones + 1)
                })
                .prop_flat_map(|(g, max_active)| {
                    let max_open = if max_active == 0 {
                        0..=g.0 + 1
                    } else {
                        0..=max_active
                    };
                    (Just(g), Just(max_active), max_open)
                })
                .prop_map(
                    |((zones, size, cap, conv), max_active, max_open)| ZoneGeometry {
                        zone_size: size,
                        zone_capacity: cap,
                        zones,
                        conventional_zones: conv,
                        max_open,
                        max_active,
                    },
                )
        }

        fn cmd(zones: u32, size: u64) -> impl Strategy<Value = Cmd> {
            let total = u64::from(zones) * size;
            let z = 0..zones + 1;
            let n = 0..size * 2 + 2;
            prop_oneof![
                4 => (0..total + 2, n.clone(), any::<bool>()).prop_map(|(a, b, c)| Cmd::Write(a, b, c)),
                8 => (z.clone(), 1..size + 1).prop_map(|(a, b)| Cmd::WriteAtWp(a, b)),
                4 => (z.clone(), n.clone()).prop_map(|(a, b)| Cmd::Append(a, b)),
                1 => (0..total + 2, n).prop_map(|(a, b)| Cmd::Read(a, b)),
                2 => z.clone().prop_map(Cmd::Open),
                2 => z.clone().prop_map(Cmd::Close),
                2 => z.clone().prop_map(Cmd::Finish),
                2 => z.clone().prop_map(Cmd::Reset),
                1 => z.clone().prop_map(Cmd::Offline),
                1 => Just(Cmd::OpenAll),
                1 => Just(Cmd::CloseAll),
                1 => Just(Cmd::FinishAll),
                1 => Just(Cmd::ResetAll),
                1 => Just(Cmd::OfflineAll),
                1 => z.clone().prop_map(Cmd::SetReadOnly),
                1 => z.prop_map(Cmd::SetOffline),
            ]
        }

        fn scenario() -> impl Strategy<Value = (ZoneGeometry, Vec<Cmd>)> {
            geometry().prop_flat_map(|g| {
                (
                    Just(g),
                    proptest::collection::vec(cmd(g.zones, g.zone_size), 0..120),
                )
            })
        }

        fn run(s: &mut ZoneSet, c: &Cmd) -> Result<(), NvmeStatus> {
            let zs = s.geometry().zone_size;
            match *c {
                Cmd::Write(a, n, ap) => s.write(Lba(a), n, ap).map(|_| ()),
                Cmd::WriteAtWp(z, n) => {
                    let wp = s.get(ZoneId(z)).map_or(Lba(u64::from(z) * zs), |z| z.wp);
                    let before = s.get(ZoneId(z)).cloned();
                    let r = s.write(wp, n, false);
                    if let (Ok(o), Some(b)) = (&r, before) {
                        assert_eq!(o.lba, wp);
                        if b.ztype == ZoneType::SequentialWriteRequired && o.zone == ZoneId(z) {
                            assert_eq!(s.zone(ZoneId(z)).wp, wp + n);
                            assert_eq!(
                                o.implicitly_opened,
                                matches!(b.state, St::Empty | St::Closed)
                            );
                        }
                    }
                    r.map(|_| ())
                }
                Cmd::Append(z, n) => {
                    let before = s.get(ZoneId(z)).cloned();
                    let r = s.write(Lba(u64::from(z) * zs), n, true);
                    if let (Ok(o), Some(b)) = (&r, before) {
                        assert_eq!(o.lba, b.wp);
                    }
                    r.map(|_| ())
                }
                Cmd::Read(a, n) => s.check_read(Lba(a), n),
                Cmd::Open(z) => s.open(ZoneId(z)).map(|_| ()),
                Cmd::Close(z) => s.close(ZoneId(z)).map(|_| ()),
                Cmd::Finish(z) => s.finish(ZoneId(z)).map(|_| ()),
                Cmd::Reset(z) => s.reset(ZoneId(z)).map(|_| ()),
                Cmd::Offline(z) => s.offline(ZoneId(z)).map(|_| ()),
                Cmd::OpenAll => s.open_all().map(|_| ()),
                Cmd::CloseAll => s.close_all().map(|_| ()),
                Cmd::FinishAll => s.finish_all().map(|_| ()),
                Cmd::ResetAll => s.reset_all().map(|_| ()),
                Cmd::OfflineAll => s.offline_all().map(|_| ()),
                Cmd::SetReadOnly(z) => s.set_read_only(ZoneId(z)).map(|_| ()),
                Cmd::SetOffline(z) => s.set_offline(ZoneId(z)).map(|_| ()),
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Random command sequences never panic, never break an
            /// invariant, and a failed command changes nothing.
            #[test]
            fn invariants_hold((g, cmds) in scenario()) {
                let mut s = ZoneSet::new(g).unwrap();
                for c in &cmds {
                    let before = s.clone();
                    let r = run(&mut s, c);
                    if let Err(e) = s.check_invariants() {
                        panic!("after {c:?} -> {r:?}: {e}");
                    }
                    if r.is_err() {
                        prop_assert_eq!(&s, &before, "failed {:?} changed state", c);
                    }
                    if g.max_open != 0 {
                        prop_assert!(s.open_count() <= g.max_open);
                    }
                    if g.max_active != 0 {
                        prop_assert!(s.active_count() <= g.max_active);
                    }
                }
                let img = ZoneSetImage::from(s.clone());
                prop_assert_eq!(ZoneSet::try_from(img).unwrap(), s.clone());

                // Power loss: each zone with data keeps some of it.
                let before = s.clone();
                let lost: Vec<(ZoneId, u64)> = s
                    .zones()
                    .iter()
                    .filter(|z| z.written > 0 && (z.state.is_active() || z.state == St::Full))
                    .filter(|z| z.id.0 % 2 == cmds.len() as u32 % 2)
                    .map(|z| (z.id, z.written * u64::from(z.id.0 % 3) / 3))
                    .collect();
                let finished = s.power_up(&lost, &[]);
                if let Err(e) = s.check_invariants() {
                    panic!("after power-up losing {lost:?}: {e}");
                }
                prop_assert_eq!(s.open_count(), 0);
                for (b, a) in before.zones().iter().zip(s.zones()) {
                    prop_assert!(a.written <= b.written);
                    let kept = lost.iter().find(|l| l.0 == b.id).map(|l| l.1);
                    match kept {
                        Some(k) => prop_assert_eq!(a.written, k),
                        None => prop_assert_eq!(a.written, b.written),
                    }
                    if finished.contains(&a.id) {
                        prop_assert!(a.state == St::Full && a.wp == a.capacity_end());
                    } else if a.state != St::Full {
                        prop_assert!(a.wp <= b.wp);
                    }
                    if b.state == St::Full && kept.is_none() {
                        prop_assert_eq!(a.state, St::Full);
                    }
                }
            }
        }
    }
}
