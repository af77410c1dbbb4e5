//! NVMe completion status codes used by the zoned namespace model.
//!
//! Values are the Status Code Type (SCT) and Status Code (SC) of the NVMe Base
//! Specification (generic and media errors) and of the NVMe Zoned Namespace
//! Command Set Specification (command specific, SCT 1h, SC B6h..BFh). The
//! names are the specifications' names.

use std::fmt;

/// NVMe completion status (SCT/SC), with the spec's name.
///
/// Only error statuses are represented; success is `Ok(..)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum NvmeStatus {
    /// Generic 01h.
    InvalidOpcode,
    /// Generic 02h.
    InvalidFieldInCommand,
    /// Generic 06h.
    InternalError,
    /// Generic 80h.
    LbaOutOfRange,
    /// Generic 81h.
    CapacityExceeded,
    /// Generic 82h.
    NamespaceNotReady,
    /// Command specific 82h (NVM command set).
    AttemptedWriteToReadOnlyRange,
    /// Command specific B6h (ZNS).
    InvalidZoneOperationRequest,
    /// Command specific B7h (ZNS).
    ZrwaResourcesUnavailable,
    /// Command specific B8h (ZNS).
    ZoneBoundaryError,
    /// Command specific B9h (ZNS).
    ZoneIsFull,
    /// Command specific BAh (ZNS).
    ZoneIsReadOnly,
    /// Command specific BBh (ZNS).
    ZoneIsOffline,
    /// Command specific BCh (ZNS).
    ZoneInvalidWrite,
    /// Command specific BDh (ZNS).
    TooManyActiveZones,
    /// Command specific BEh (ZNS).
    TooManyOpenZones,
    /// Command specific BFh (ZNS).
    InvalidZoneStateTransition,
    /// Media and data integrity 80h.
    WriteFault,
    /// Media and data integrity 81h.
    UnrecoveredReadError,
}

/// Status Code Type values.
pub const SCT_GENERIC: u8 = 0x0;
/// Command Specific Status.
pub const SCT_COMMAND_SPECIFIC: u8 = 0x1;
/// Media and Data Integrity Errors.
pub const SCT_MEDIA: u8 = 0x2;

impl NvmeStatus {
    /// Every status, in SCT/SC order.
    pub const ALL: [NvmeStatus; 19] = [
        NvmeStatus::InvalidOpcode,
        NvmeStatus::InvalidFieldInCommand,
        NvmeStatus::InternalError,
        NvmeStatus::LbaOutOfRange,
        NvmeStatus::CapacityExceeded,
        NvmeStatus::NamespaceNotReady,
        NvmeStatus::AttemptedWriteToReadOnlyRange,
        NvmeStatus::InvalidZoneOperationRequest,
        NvmeStatus::ZrwaResourcesUnavailable,
        NvmeStatus::ZoneBoundaryError,
        NvmeStatus::ZoneIsFull,
        NvmeStatus::ZoneIsReadOnly,
        NvmeStatus::ZoneIsOffline,
        NvmeStatus::ZoneInvalidWrite,
        NvmeStatus::TooManyActiveZones,
        NvmeStatus::TooManyOpenZones,
        NvmeStatus::InvalidZoneStateTransition,
        NvmeStatus::WriteFault,
        NvmeStatus::UnrecoveredReadError,
    ];

    /// `(SCT, SC)` as they appear in the completion queue entry status field.
    pub fn code(self) -> (u8, u8) {
        use NvmeStatus::*;
        match self {
            InvalidOpcode => (SCT_GENERIC, 0x01),
            InvalidFieldInCommand => (SCT_GENERIC, 0x02),
            InternalError => (SCT_GENERIC, 0x06),
            LbaOutOfRange => (SCT_GENERIC, 0x80),
            CapacityExceeded => (SCT_GENERIC, 0x81),
            NamespaceNotReady => (SCT_GENERIC, 0x82),
            AttemptedWriteToReadOnlyRange => (SCT_COMMAND_SPECIFIC, 0x82),
            InvalidZoneOperationRequest => (SCT_COMMAND_SPECIFIC, 0xB6),
            ZrwaResourcesUnavailable => (SCT_COMMAND_SPECIFIC, 0xB7),
            ZoneBoundaryError => (SCT_COMMAND_SPECIFIC, 0xB8),
            ZoneIsFull => (SCT_COMMAND_SPECIFIC, 0xB9),
            ZoneIsReadOnly => (SCT_COMMAND_SPECIFIC, 0xBA),
            ZoneIsOffline => (SCT_COMMAND_SPECIFIC, 0xBB),
            ZoneInvalidWrite => (SCT_COMMAND_SPECIFIC, 0xBC),
            TooManyActiveZones => (SCT_COMMAND_SPECIFIC, 0xBD),
            TooManyOpenZones => (SCT_COMMAND_SPECIFIC, 0xBE),
            InvalidZoneStateTransition => (SCT_COMMAND_SPECIFIC, 0xBF),
            WriteFault => (SCT_MEDIA, 0x80),
            UnrecoveredReadError => (SCT_MEDIA, 0x81),
        }
    }

    /// The status as the 11-bit `SCT << 8 | SC` value (no DNR/More bits), the
    /// form QEMU's hw/nvme uses (e.g. `0x01bc` for Zone Invalid Write).
    pub fn raw(self) -> u16 {
        let (sct, sc) = self.code();
        (u16::from(sct) << 8) | u16::from(sc)
    }

    /// Inverse of [`NvmeStatus::code`].
    pub fn from_code(sct: u8, sc: u8) -> Option<NvmeStatus> {
        Self::ALL.into_iter().find(|s| s.code() == (sct, sc))
    }

    /// The specification's name of the status.
    pub fn name(self) -> &'static str {
        use NvmeStatus::*;
        match self {
            InvalidOpcode => "Invalid Command Opcode",
            InvalidFieldInCommand => "Invalid Field in Command",
            InternalError => "Internal Error",
            LbaOutOfRange => "LBA Out of Range",
            CapacityExceeded => "Capacity Exceeded",
            NamespaceNotReady => "Namespace Not Ready",
            AttemptedWriteToReadOnlyRange => "Attempted Write to Read Only Range",
            InvalidZoneOperationRequest => "Invalid Zone Operation Request",
            ZrwaResourcesUnavailable => "ZRWA Resources Unavailable",
            ZoneBoundaryError => "Zone Boundary Error",
            ZoneIsFull => "Zone Is Full",
            ZoneIsReadOnly => "Zone Is Read Only",
            ZoneIsOffline => "Zone Is Offline",
            ZoneInvalidWrite => "Zone Invalid Write",
            TooManyActiveZones => "Too Many Active Zones",
            TooManyOpenZones => "Too Many Open Zones",
            InvalidZoneStateTransition => "Invalid Zone State Transition",
            WriteFault => "Write Fault",
            UnrecoveredReadError => "Unrecovered Read Error",
        }
    }

    /// A one-line "what to do about it" for users.
    pub fn hint(self) -> &'static str {
        use NvmeStatus::*;
        match self {
            InvalidOpcode => "the command is not supported by this namespace type",
            InvalidFieldInCommand => {
                "check the command fields: the block count must be nonzero, zone append and zone \
                 management need a zone start LBA, and conventional zones take no zone commands"
            }
            InternalError => "the simulated controller hit an internal error; report it as a bug",
            LbaOutOfRange => {
                "the LBA range goes past the end of the namespace; check the namespace size"
            }
            CapacityExceeded => "the namespace has no free capacity left; free or reset space",
            NamespaceNotReady => "the namespace is not ready; retry later",
            AttemptedWriteToReadOnlyRange => "the LBA range is write protected",
            InvalidZoneOperationRequest => "that operation is not allowed on this zone right now",
            ZrwaResourcesUnavailable => "no zone random write area resources are free",
            ZoneBoundaryError => {
                "the I/O crosses the end of the zone's writable capacity; split it at the zone \
                 capacity boundary or finish the zone and continue in the next one"
            }
            ZoneIsFull => "the zone is full; reset it or write to another zone",
            ZoneIsReadOnly => {
                "the zone went read-only after a media failure; read its data out and stop \
                 writing to it"
            }
            ZoneIsOffline => {
                "the zone is offline and its data is gone; stop using it (report-zones shows \
                 which zones are offline)"
            }
            ZoneInvalidWrite => {
                "writes to a sequential zone must start at its write pointer; use zone append or \
                 read the write pointer with report-zones"
            }
            TooManyActiveZones => {
                "the active zone limit is reached; finish or reset an open or closed zone first"
            }
            TooManyOpenZones => {
                "the open zone limit is reached; close or finish an open zone first"
            }
            InvalidZoneStateTransition => {
                "the zone's state does not allow that action (see report-zones); e.g. a full zone \
                 can only be reset, an empty one cannot be closed"
            }
            WriteFault => "the media failed to store the data; the zone may turn read-only",
            UnrecoveredReadError => "the data could not be read back from the media",
        }
    }
}

impl fmt::Display for NvmeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (sct, sc) = self.code();
        write!(f, "{} (SCT {:X}h, SC {:02X}h)", self.name(), sct, sc)
    }
}

impl std::error::Error for NvmeStatus {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn zns_codes_match_spec() {
        assert_eq!(NvmeStatus::ZoneBoundaryError.code(), (1, 0xB8));
        assert_eq!(NvmeStatus::ZoneIsFull.code(), (1, 0xB9));
        assert_eq!(NvmeStatus::ZoneIsReadOnly.code(), (1, 0xBA));
        assert_eq!(NvmeStatus::ZoneIsOffline.code(), (1, 0xBB));
        assert_eq!(NvmeStatus::ZoneInvalidWrite.code(), (1, 0xBC));
        assert_eq!(NvmeStatus::TooManyActiveZones.code(), (1, 0xBD));
        assert_eq!(NvmeStatus::TooManyOpenZones.code(), (1, 0xBE));
        assert_eq!(NvmeStatus::InvalidZoneStateTransition.code(), (1, 0xBF));
        assert_eq!(NvmeStatus::InvalidFieldInCommand.code(), (0, 0x02));
        assert_eq!(NvmeStatus::LbaOutOfRange.code(), (0, 0x80));
        assert_eq!(NvmeStatus::ZoneInvalidWrite.raw(), 0x01bc);
    }

    #[test]
    fn codes_unique_and_roundtrip() {
        let mut seen = HashSet::new();
        for s in NvmeStatus::ALL {
            assert!(seen.insert(s.code()), "duplicate code for {s:?}");
            let (sct, sc) = s.code();
            assert_eq!(NvmeStatus::from_code(sct, sc), Some(s));
            assert!(!s.hint().is_empty());
            assert!(!s.name().is_empty());
        }
        assert_eq!(NvmeStatus::from_code(1, 0xAA), None);
    }

    #[test]
    fn display_format() {
        assert_eq!(
            NvmeStatus::ZoneInvalidWrite.to_string(),
            "Zone Invalid Write (SCT 1h, SC BCh)"
        );
        assert_eq!(
            NvmeStatus::InvalidFieldInCommand.to_string(),
            "Invalid Field in Command (SCT 0h, SC 02h)"
        );
        let e: Box<dyn std::error::Error> = Box::new(NvmeStatus::ZoneIsFull);
        assert_eq!(e.to_string(), "Zone Is Full (SCT 1h, SC B9h)");
    }
}
