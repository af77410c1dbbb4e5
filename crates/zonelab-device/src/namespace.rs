//! A namespace of either command set, built from a profile: [`Namespace::Zoned`] (NVMe ZNS,
//! [`ZonedDevice`]) or [`Namespace::Conventional`] (NVM command set over a page-mapped FTL,
//! [`ConventionalDevice`]). The host stack and workloads use this type, so the same job runs on
//! a ZNS SSD and on its block-interface twin (seed 003).

use crate::conventional::ConventionalDevice;
use crate::durability::PowerCutReport;
use crate::ftl::FtlCounters;
use crate::payload::{PayloadMode, ReadData, WriteData};
use crate::profile::NamespaceKind;
use crate::zns::{Completion, DeviceCounters, ZoneAction, ZonedDevice};
use crate::znsplus::TlOpenZone;
use crate::zone::{Lba, ReportFilter, Zone, ZoneId};
use crate::{Profile, ProfileError};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use zonelab_flash::{FlashArray, FlashCounters};
use zonelab_sim::Nanos;

/// One device namespace. Only one exists per simulated device, so the size difference of the
/// variants does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Namespace {
    Zoned(ZonedDevice),
    Conventional(ConventionalDevice),
}

impl From<ZonedDevice> for Namespace {
    fn from(d: ZonedDevice) -> Namespace {
        Namespace::Zoned(d)
    }
}

impl From<ConventionalDevice> for Namespace {
    fn from(d: ConventionalDevice) -> Namespace {
        Namespace::Conventional(d)
    }
}

macro_rules! each {
    ($self:expr, $d:ident => $e:expr) => {
        match $self {
            Namespace::Zoned($d) => $e,
            Namespace::Conventional($d) => $e,
        }
    };
}

impl Namespace {
    /// The namespace the profile describes (`namespace = "zoned" | "conventional"`).
    pub fn new(profile: Profile, payload: PayloadMode) -> Result<Namespace, ProfileError> {
        Ok(match profile.namespace {
            NamespaceKind::Zoned => Namespace::Zoned(ZonedDevice::new(profile, payload)?),
            NamespaceKind::Conventional => {
                Namespace::Conventional(ConventionalDevice::new(profile, payload)?)
            }
        })
    }

    /// The namespace wrapped for sharing with a host stack.
    pub fn shared(self) -> Rc<RefCell<Namespace>> {
        Rc::new(RefCell::new(self))
    }

    pub fn kind(&self) -> NamespaceKind {
        match self {
            Namespace::Zoned(_) => NamespaceKind::Zoned,
            Namespace::Conventional(_) => NamespaceKind::Conventional,
        }
    }
    pub fn zoned(&self) -> Option<&ZonedDevice> {
        match self {
            Namespace::Zoned(d) => Some(d),
            Namespace::Conventional(_) => None,
        }
    }
    pub fn zoned_mut(&mut self) -> Option<&mut ZonedDevice> {
        match self {
            Namespace::Zoned(d) => Some(d),
            Namespace::Conventional(_) => None,
        }
    }
    pub fn conventional(&self) -> Option<&ConventionalDevice> {
        match self {
            Namespace::Zoned(_) => None,
            Namespace::Conventional(d) => Some(d),
        }
    }

    pub fn read(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        nlb: u64,
        out: Option<&mut ReadData>,
    ) -> Completion {
        each!(self, d => d.read(now, at, slba, nlb, out))
    }
    /// Write, or Zone Append when `append` (Invalid Command Opcode on a conventional namespace).
    pub fn write(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        data: WriteData<'_>,
        append: bool,
    ) -> Completion {
        each!(self, d => d.write(now, at, slba, data, append))
    }
    /// Zone Management Send (Invalid Command Opcode on a conventional namespace).
    pub fn zone_mgmt(
        &mut self,
        now: Nanos,
        at: Nanos,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> Completion {
        match self {
            Namespace::Zoned(d) => d.zone_mgmt(now, at, action, zslba, select_all),
            Namespace::Conventional(d) => d.zoned_command(now, at),
        }
    }
    /// Zone Management Receive (Invalid Command Opcode, no zones, on a conventional namespace).
    pub fn report_zones(
        &mut self,
        now: Nanos,
        at: Nanos,
        filter: ReportFilter,
        start: ZoneId,
        max: usize,
    ) -> (Completion, Vec<Zone>) {
        match self {
            Namespace::Zoned(d) => d.report_zones(now, at, filter, start, max),
            Namespace::Conventional(d) => (d.zoned_command(now, at), Vec::new()),
        }
    }
    pub fn flush(&mut self, now: Nanos, at: Nanos) -> Completion {
        each!(self, d => d.flush(now, at))
    }
    /// ZNS+ zone_compaction (Invalid Command Opcode on a conventional namespace).
    pub fn zone_compaction(
        &mut self,
        now: Nanos,
        at: Nanos,
        src: &[Lba],
        dst: &[Lba],
    ) -> Completion {
        match self {
            Namespace::Zoned(d) => d.zone_compaction(now, at, src, dst),
            Namespace::Conventional(d) => d.zoned_command(now, at),
        }
    }
    /// The device acts at `now` with no command (queued ZNS+ copies start when chips allow).
    pub fn settle(&mut self, now: Nanos) {
        if let Namespace::Zoned(d) = self {
            d.settle(now);
        }
    }
    /// Whether ZNS+ copies wait for their chips (a write may then complete as they go).
    pub fn has_queued_copies(&self) -> bool {
        match self {
            Namespace::Zoned(d) => d.has_queued_copies(),
            Namespace::Conventional(_) => false,
        }
    }
    /// The ticket of the command just submitted if flash operations it completes after were
    /// queued ([`ZonedDevice::take_ticket`]).
    pub fn take_ticket(&mut self) -> Option<u64> {
        match self {
            Namespace::Zoned(d) => d.take_ticket(),
            Namespace::Conventional(_) => None,
        }
    }
    /// The completion of a command with queued operations, or when to ask again
    /// ([`ZonedDevice::ticket_status`]).
    pub fn ticket_status(&mut self, ticket: u64) -> Result<Nanos, Nanos> {
        match self {
            Namespace::Zoned(d) => d.ticket_status(ticket),
            Namespace::Conventional(_) => Ok(Nanos::ZERO),
        }
    }
    /// ZNS+ TL_open (Invalid Command Opcode on a conventional namespace).
    pub fn tl_open(&mut self, now: Nanos, at: Nanos, zones: &[TlOpenZone]) -> Completion {
        match self {
            Namespace::Zoned(d) => d.tl_open(now, at, zones),
            Namespace::Conventional(d) => d.zoned_command(now, at),
        }
    }

    /// The device loses power at `at` and power returns (see [`ZonedDevice::power_cut`]).
    pub fn power_cut(&mut self, at: Nanos) -> PowerCutReport {
        each!(self, d => d.power_cut(at))
    }

    /// Current completion time of a zone management command that promised `promised` (see
    /// [`ZonedDevice::management_completion`]); conventional namespaces have none.
    pub fn management_completion(&self, promised: Nanos) -> Nanos {
        match self {
            Namespace::Zoned(d) => d.management_completion(promised),
            Namespace::Conventional(_) => promised,
        }
    }

    pub fn profile(&self) -> &Profile {
        each!(self, d => d.profile())
    }
    pub fn lba_size(&self) -> u64 {
        each!(self, d => d.lba_size())
    }
    /// Logical blocks the host can address.
    pub fn total_lbas(&self) -> u64 {
        match self {
            Namespace::Zoned(d) => d.zones().total_lbas(),
            Namespace::Conventional(d) => d.total_lbas(),
        }
    }
    pub fn buffer_limit(&self) -> u64 {
        each!(self, d => d.buffer_limit())
    }
    pub fn counters(&self) -> DeviceCounters {
        each!(self, d => d.counters())
    }
    pub fn flash(&self) -> &FlashArray {
        each!(self, d => d.flash())
    }
    pub fn flash_counters(&self) -> FlashCounters {
        each!(self, d => d.flash_counters())
    }
    /// Die time per [`zonelab_flash::BUSY_BUCKET`] of simulated time, summed over dies.
    pub fn die_busy_log(&self) -> &[u64] {
        each!(self, d => d.die_busy_log())
    }
    pub fn write_amplification(&self) -> f64 {
        each!(self, d => d.write_amplification())
    }
    pub fn buffer_stall(&self) -> Nanos {
        each!(self, d => d.buffer_stall())
    }
    pub fn payload_mode(&self) -> PayloadMode {
        each!(self, d => d.payload_mode())
    }
    /// Device garbage collection of a conventional namespace (a zoned one has none; its
    /// conventional zones' FTL is reached through [`ZonedDevice::ftl`]).
    pub fn gc_counters(&self) -> Option<FtlCounters> {
        self.conventional().map(|d| d.gc_counters())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NvmeStatus;

    #[test]
    fn built_from_the_profile_kind() {
        let z = Namespace::new(
            Profile::load("zn540", &[]).unwrap(),
            PayloadMode::Fingerprint,
        )
        .unwrap();
        assert_eq!(z.kind(), NamespaceKind::Zoned);
        assert!(z.zoned().is_some() && z.gc_counters().is_none());
        assert_eq!(z.total_lbas(), 904 * 524_288);
        let mut c = Namespace::new(
            Profile::load("sn640-op28", &[]).unwrap(),
            PayloadMode::Fingerprint,
        )
        .unwrap();
        assert_eq!(c.kind(), NamespaceKind::Conventional);
        assert!(c.zoned().is_none());
        assert_eq!(c.total_lbas(), 64 * 950 * 1077 * 72 / 100 * 4);
        let t = Nanos(0);
        let r = c.zone_mgmt(t, t, ZoneAction::Reset, Lba(0), false);
        assert_eq!(r.status, Err(NvmeStatus::InvalidOpcode));
        let (r, zones) = c.report_zones(t, t, ReportFilter::All, ZoneId(0), 10);
        assert_eq!(r.status, Err(NvmeStatus::InvalidOpcode));
        assert!(zones.is_empty());
        let w = c.write(t, t, Lba(0), WriteData::Fingerprints(&[1]), true);
        assert_eq!(w.status, Err(NvmeStatus::InvalidOpcode));
        let w = c.write(t, t, Lba(0), WriteData::Fingerprints(&[1]), false);
        assert!(w.status.is_ok());
        assert_eq!(c.counters().writes, 1);
    }
}
