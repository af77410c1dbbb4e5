//! NVMe namespaces for ZoneLab.
//!
//! [`ZonedDevice`] is a zoned namespace exact to the NVMe ZNS command set ([`zone`] holds the
//! state machine, [`status`] the NVMe status codes) with the zone-to-flash mapping of seed 000
//! §2.2 ([`mapping`]), a write buffer with early completion ([`write_buffer`]), stored data
//! ([`payload`]), and conventional zones served by a page-mapped FTL ([`ftl`]). [`host_stack`]
//! models the host I/O path (SPDK, io_uring, mq-deadline). Parameters come from a [`Profile`].
//! [`ConventionalDevice`] is the block-interface twin (NVM command set over a page-mapped FTL
//! with over-provisioning and greedy garbage collection, [`conventional`]); [`Namespace`] is
//! either, as the profile's `namespace` field says.

pub mod conventional;
mod copy_queue;
pub mod durability;
pub mod ftl;
pub mod host_stack;
pub mod image_check;
pub mod mapping;
pub mod namespace;
pub mod payload;
pub mod profile;
pub mod record;
pub mod status;
pub mod write_buffer;
pub mod zns;
pub mod znsplus;
pub mod zone;

pub use conventional::ConventionalDevice;
pub use durability::PowerCutReport;
pub use ftl::FtlCounters;
pub use host_stack::{HostStack, IoCmd, IoDone, IoEngine, IoScheduler};
pub use namespace::Namespace;
pub use payload::{OwnedData, PayloadMode, ReadData, WriteData};
pub use profile::{NamespaceKind, Profile, ProfileError};
pub use status::NvmeStatus;
pub use zns::{Completion, DeviceCounters, ZoneAction, ZonedDevice};
pub use znsplus::{BitField, ChunkMapping, TlOpenZone, ZnsPlusCounters};
pub use zone::{Lba, ReportFilter, Zone, ZoneId, ZoneState, ZoneType};
