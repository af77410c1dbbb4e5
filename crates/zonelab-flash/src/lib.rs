//! NAND flash for ZoneLab: geometry, operation timing, resource timelines, wear.
//!
//! The model follows DESIGN.md "Resources are timelines": every channel bus, die, PCIe link
//! direction and firmware core keeps the intervals it is reserved for; an operation reserves the
//! resources it needs in order and gets its completion time back. Work per flash operation is
//! O(1) in the device size. No crate models NAND timing at this level, hence our own.

pub mod array;
pub mod firmware;
pub mod geometry;
pub mod pcie;
pub mod timeline;
pub mod timing;
pub mod units;

pub use array::{BUSY_BUCKET, BlockAddr, FlashArray, FlashCounters, PageAddr};
pub use firmware::Firmware;
pub use geometry::{DieId, Geometry};
pub use pcie::{Duplex, PcieLink};
pub use timeline::Timeline;
pub use timing::FlashTiming;
pub use units::{Duration, Rate, Size};
