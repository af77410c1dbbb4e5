//! NVMe namespaces for ZoneLab.
//!
//! [`ZonedDevice`] is a zoned namespace exact to the NVMe ZNS command set ([`zone`] holds the
//! state machine, [`status`] the NVMe status codes) with the zone-to-flash mapping of seed 000
//! §2.2 ([`mapping`]), a write buffer with early completion ([`write_buffer`]), stored data
//! ([`payload`]), and conventional zones served by a page-mapped FTL ([`ftl`]). [`host_stack`]
//! models the host I/O path (SPDK, io_uring, mq-deadline). Parameters come from a [`Profile`].

pub mod ftl;
pub mod host_stack;
pub mod image_check;
pub mod mapping;
pub mod payload;
pub mod profile;
pub mod status;
pub mod write_buffer;
pub mod zns;
pub mod zone;

pub use host_stack::{HostStack, IoCmd, IoDone, IoEngine, IoScheduler};
pub use payload::{OwnedData, PayloadMode, ReadData, WriteData};
pub use profile::{Profile, ProfileError};
pub use status::NvmeStatus;
pub use zns::{Completion, DeviceCounters, ZoneAction, ZonedDevice};
pub use zone::{Lba, ReportFilter, Zone, ZoneId, ZoneState, ZoneType};
