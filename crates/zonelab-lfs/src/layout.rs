//! Where things are on the device, computed from the superblock: the metadata areas on
//! conventional zones and the main area of sequential zones, with segments inside zones
//! (seed 000 §2.3: F2FS for ZNS maps a section, the cleaning unit, to a zone).
//!
//! The metadata areas can instead live on a companion conventional (block-interface) device,
//! as F2FS places them on ZNS drives without conventional zones (`mkfs.f2fs -c`): one address
//! space, the companion's blocks `0 .. companion_lbas` first, then the zoned device's, whose
//! sequential zones all hold the main area. [`crate::dev::Dev`] routes each request to its
//! device.

use crate::ondisk::{
    BODY, BlkAddr, Checkpoint, FORMAT_VERSION, NAT_PER_BLOCK, SSA_PER_BLOCK, Superblock,
    sit_per_block,
};
use crate::vfs::{FsError, FsResult};

/// Options of `mkfs` that shape the layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatOptions {
    /// Segments per zone (1: a segment is a whole zone; F2FS's segments are 2 MiB, a zone a
    /// section of them).
    pub segs_per_zone: u32,
    /// Node ids per main-area block (NAT size = main blocks / this); 4 gives room for one
    /// inode per 16 KiB of capacity.
    pub blocks_per_nid: u32,
}

impl Default for FormatOptions {
    fn default() -> Self {
        FormatOptions {
            segs_per_zone: 1,
            blocks_per_nid: 4,
        }
    }
}

/// Largest orphan list a checkpoint pack has room for.
pub const MAX_ORPHANS: usize = 1024;

/// The device as mkfs sees it.
#[derive(Clone, Copy, Debug)]
pub struct DeviceShape {
    pub lba_size: u64,
    pub total_lbas: u64,
    pub zone_size: u64,
    pub zone_capacity: u64,
    pub zones: u32,
    pub conventional_zones: u32,
    /// Blocks of a companion conventional device for the metadata (None: conventional zones).
    pub companion_lbas: Option<u64>,
}

impl DeviceShape {
    /// The shape of a zoned device built from `p`.
    pub fn of(p: &zonelab_device::Profile) -> DeviceShape {
        DeviceShape {
            lba_size: p.lba_size(),
            total_lbas: p.zns.zones as u64 * p.zone_size_lbas(),
            zone_size: p.zone_size_lbas(),
            zone_capacity: p.zone_capacity_lbas(),
            zones: p.zns.zones,
            conventional_zones: p.zns.conventional_zones,
            companion_lbas: None,
        }
    }

    /// This shape with the metadata on a companion device of `lbas` 4 KiB blocks.
    pub fn with_companion(self, lbas: u64) -> DeviceShape {
        DeviceShape {
            companion_lbas: Some(lbas),
            ..self
        }
    }
}

/// Computes the superblock of a fresh file system on `dev`, or explains why it cannot be made.
pub fn plan(dev: DeviceShape, opts: FormatOptions, fingerprint: bool) -> FsResult<Superblock> {
    let inv = |s: String| Err(FsError::Invalid(s));
    if dev.lba_size != 4096 {
        return inv(format!(
            "the file system needs 4096-byte LBAs; this device has {} (set lba_size = 4096 in the profile)",
            dev.lba_size
        ));
    }
    if dev.conventional_zones == 0 && dev.companion_lbas.is_none() {
        return inv("the f2fs layout keeps its metadata (checkpoint, NAT, SIT, SSA) on conventional zones or a companion conventional device: create the device with conventional zones, e.g. --set conventional_zones=2, or give a companion device (--companion)".into());
    }
    if opts.segs_per_zone == 0 || !dev.zone_capacity.is_multiple_of(opts.segs_per_zone as u64) {
        return inv(format!(
            "segs_per_zone ({}) must divide the zone capacity ({} blocks)",
            opts.segs_per_zone, dev.zone_capacity
        ));
    }
    let main_zones = dev.zones - dev.conventional_zones;
    if main_zones < 16 {
        return inv(format!(
            "the main area needs at least 16 sequential zones (6 logs, cleaning reserve); the device has {main_zones}"
        ));
    }
    let blocks_per_seg = (dev.zone_capacity / opts.segs_per_zone as u64) as u32;
    // One segment's SIT entry (counts and a valid bitmap) must fit a metadata block.
    let sit_fits = |bps: u64| 12 + bps.div_ceil(64) * 8 <= (BODY - 8) as u64;
    if !sit_fits(blocks_per_seg as u64) {
        let fit = (1..=dev.zone_capacity)
            .find(|&k| dev.zone_capacity.is_multiple_of(k) && sit_fits(dev.zone_capacity / k))
            .unwrap_or(dev.zone_capacity);
        return inv(format!(
            "segments of {blocks_per_seg} blocks are too large for the SIT (a segment's valid bitmap must fit a 4 KiB block): use more segments per zone, e.g. `zonelab mkfs --segs-per-zone {fit}` (fs.segs_per_zone = {fit} in an experiment), or zones of smaller capacity"
        ));
    }
    let segments = main_zones as u64 * opts.segs_per_zone as u64;
    let main_blocks = segments * blocks_per_seg as u64;
    let max_nids =
        (main_blocks / opts.blocks_per_nid.max(1) as u64).clamp(1024, u32::MAX as u64 / 2);
    let nat_blocks = max_nids.div_ceil(NAT_PER_BLOCK as u64) as u32;
    let max_nids = nat_blocks * NAT_PER_BLOCK as u32;
    let sit_blocks = segments.div_ceil(sit_per_block(blocks_per_seg) as u64) as u32;
    let ssa_per_seg = (blocks_per_seg as usize).div_ceil(SSA_PER_BLOCK) as u32;
    let cp_blocks = Checkpoint::blocks_needed(nat_blocks, sit_blocks, MAX_ORPHANS);
    let cp_start = 2u64;
    let sit_start = cp_start + 2 * cp_blocks as u64;
    let nat_start = sit_start + 2 * sit_blocks as u64;
    let ssa_start = nat_start + 2 * nat_blocks as u64;
    let meta_end = ssa_start + segments * ssa_per_seg as u64;
    if let Some(room) = dev.companion_lbas {
        if meta_end > room {
            return inv(format!(
                "metadata needs {meta_end} blocks but the companion device has {room}: create a larger companion (e.g. raise its blocks_per_plane)"
            ));
        }
        if room + dev.total_lbas > u32::MAX as u64 {
            return inv(format!(
                "the companion ({room} blocks) and the zoned device ({} blocks) exceed the 16 TiB the block addresses reach: use a smaller companion",
                dev.total_lbas
            ));
        }
    } else {
        let meta_room = dev.conventional_zones as u64 * dev.zone_size;
        if meta_end > meta_room {
            let need = meta_end.div_ceil(dev.zone_size);
            return inv(format!(
                "metadata needs {meta_end} blocks but {} conventional zones hold {meta_room}: create the device with --set conventional_zones={need}",
                dev.conventional_zones
            ));
        }
    }
    Ok(Superblock {
        version: FORMAT_VERSION,
        device_lbas: dev.total_lbas,
        zone_size: dev.zone_size,
        cp_start,
        cp_blocks,
        sit_start,
        sit_blocks,
        nat_start,
        nat_blocks,
        ssa_start,
        ssa_per_seg,
        main_first_zone: dev.conventional_zones,
        main_zones,
        segs_per_zone: opts.segs_per_zone,
        blocks_per_seg,
        max_nids,
        payload: fingerprint as u8,
        companion_lbas: dev.companion_lbas.unwrap_or(0),
    })
}

/// Address arithmetic over a superblock.
#[derive(Clone, Debug)]
pub struct Layout {
    pub sb: Superblock,
    pub blocks_per_zone: u32,
    pub sit_per_block: usize,
}

impl Layout {
    pub fn new(sb: Superblock) -> FsResult<Layout> {
        // Fields of a corrupt superblock can be anything: no product may overflow.
        let blocks_per_zone = match sb.blocks_per_seg.checked_mul(sb.segs_per_zone) {
            Some(b) if b as u64 <= sb.zone_size => b,
            _ => {
                return Err(FsError::Corrupt(
                    "superblock: segments exceed the zone size".into(),
                ));
            }
        };
        let end = (sb.main_first_zone as u64 + sb.main_zones as u64).checked_mul(sb.zone_size);
        let beyond = |end: u64| {
            end > sb.device_lbas || sb.companion_lbas.saturating_add(end) > u32::MAX as u64
        };
        if end.is_none_or(beyond) {
            return Err(FsError::Corrupt(
                "superblock: main area beyond the device (or beyond 16 TiB)".into(),
            ));
        }
        let sit_per_block = sit_per_block(sb.blocks_per_seg);
        Ok(Layout {
            sb,
            blocks_per_zone,
            sit_per_block,
        })
    }
    pub fn segments(&self) -> u32 {
        self.sb.main_zones * self.sb.segs_per_zone
    }
    /// The zones `pages` dirty pages of one kind are counted to fill, as F2FS reckons
    /// sections for its free-section thresholds (`get_blocktype_secs`, F2FS 4.10 f2fs.h):
    /// whole zones, so one dirty page counts one.
    pub fn zones_for_dirty(&self, pages: u64) -> u32 {
        pages
            .div_ceil(self.blocks_per_zone as u64)
            .min(u32::MAX as u64) as u32
    }
    /// Where the zoned device starts in the file system's address space (after the companion).
    pub fn zoned_base(&self) -> u64 {
        self.sb.companion_lbas
    }
    /// The zoned device's zone holding main-area zone `z`.
    pub fn zone_id(&self, z: u32) -> zonelab_device::ZoneId {
        zonelab_device::ZoneId(self.sb.main_first_zone + z)
    }
    /// First address of main-area zone `z`.
    pub fn zone_start(&self, z: u32) -> u64 {
        self.zoned_base() + (self.sb.main_first_zone as u64 + z as u64) * self.sb.zone_size
    }
    pub fn addr(&self, z: u32, off: u32) -> BlkAddr {
        debug_assert!(off < self.blocks_per_zone);
        (self.zone_start(z) + off as u64) as BlkAddr
    }
    /// (zone, offset in zone) of a main-area address, or None outside the written part.
    pub fn locate(&self, a: BlkAddr) -> Option<(u32, u32)> {
        let a = a as u64;
        let first = self.zone_start(0);
        if a < first {
            return None;
        }
        let z = (a - first) / self.sb.zone_size;
        let off = (a - first) % self.sb.zone_size;
        (z < self.sb.main_zones as u64 && off < self.blocks_per_zone as u64)
            .then_some((z as u32, off as u32))
    }
    /// Segment number and offset in segment of (zone, offset).
    pub fn seg_of(&self, z: u32, off: u32) -> (u32, u32) {
        (
            z * self.sb.segs_per_zone + off / self.sb.blocks_per_seg,
            off % self.sb.blocks_per_seg,
        )
    }
    /// Main-area block index (for the SSA table).
    pub fn main_index(&self, z: u32, off: u32) -> usize {
        z as usize * self.blocks_per_zone as usize + off as usize
    }
    pub fn main_blocks(&self) -> u64 {
        self.sb.main_zones as u64 * self.blocks_per_zone as u64
    }
    /// LBA of checkpoint pack `p` (0 or 1).
    pub fn cp_pack(&self, p: u32) -> u64 {
        self.sb.cp_start + p as u64 * self.sb.cp_blocks as u64
    }
    pub fn nat_block(&self, i: u32, copy: bool) -> u64 {
        self.sb.nat_start + copy as u64 * self.sb.nat_blocks as u64 + i as u64
    }
    pub fn sit_block(&self, i: u32, copy: bool) -> u64 {
        self.sb.sit_start + copy as u64 * self.sb.sit_blocks as u64 + i as u64
    }
    pub fn ssa_block(&self, seg: u32, part: u32) -> u64 {
        self.sb.ssa_start + seg as u64 * self.sb.ssa_per_seg as u64 + part as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> DeviceShape {
        DeviceShape {
            lba_size: 4096,
            total_lbas: 512 * 8192,
            zone_size: 8192,
            zone_capacity: 8192,
            zones: 512,
            conventional_zones: 2,
            companion_lbas: None,
        }
    }

    /// Regression (found writing the `lfs_ondisk` fuzz target): sizes whose products overflow are
    /// refused as corrupt instead of panicking.
    #[test]
    fn overflowing_superblock_sizes_are_corrupt() {
        let sb = plan(shape(), FormatOptions::default(), true).unwrap();
        for bad in [
            Superblock {
                blocks_per_seg: 1 << 20,
                segs_per_zone: 1 << 20,
                ..sb.clone()
            },
            Superblock {
                main_zones: u32::MAX,
                zone_size: u64::MAX / 2,
                blocks_per_seg: 1,
                ..sb.clone()
            },
            Superblock {
                companion_lbas: u64::MAX,
                ..sb.clone()
            },
        ] {
            assert!(matches!(Layout::new(bad), Err(FsError::Corrupt(_))));
        }
    }

    #[test]
    fn znsplus_sized_layout_fits_two_conventional_zones() {
        let sb = plan(shape(), FormatOptions::default(), true).unwrap();
        let l = Layout::new(sb.clone()).unwrap();
        assert_eq!(l.segments(), 510);
        assert!(l.ssa_block(509, sb.ssa_per_seg - 1) < 2 * 8192);
        let a = l.addr(3, 17);
        assert_eq!(l.locate(a), Some((3, 17)));
        assert_eq!(l.locate(5), None);
    }

    /// F2FS's `get_blocktype_secs` arithmetic, ((pages + blocks a section - 1) >> log
    /// blocks a segment) / segments a section, in whole zones of 16 segments.
    #[test]
    fn dirty_pages_count_whole_zones_from_the_first() {
        let opts = FormatOptions {
            segs_per_zone: 16,
            ..FormatOptions::default()
        };
        let l = Layout::new(plan(shape(), opts, true).unwrap()).unwrap();
        assert_eq!(l.blocks_per_zone, 8192);
        let f2fs = |pages: u64| ((pages + 8191) >> 9) / 16;
        for pages in [0, 1, 511, 512, 8191, 8192, 8193, 16384, 16385, 100_000] {
            assert_eq!(u64::from(l.zones_for_dirty(pages)), f2fs(pages), "{pages}");
        }
    }

    #[test]
    fn companion_layout_puts_metadata_first_and_every_zone_in_the_main_area() {
        let mut s = shape();
        s.conventional_zones = 0;
        let sb = plan(s.with_companion(20_000), FormatOptions::default(), true).unwrap();
        assert_eq!(sb.companion_lbas, 20_000);
        assert_eq!(sb.main_first_zone, 0);
        assert_eq!(sb.main_zones, 512);
        let l = Layout::new(sb.clone()).unwrap();
        assert!(l.ssa_block(511, sb.ssa_per_seg - 1) < 20_000);
        assert_eq!(l.zone_start(0), 20_000);
        assert_eq!(l.zone_id(3), zonelab_device::ZoneId(3));
        let a = l.addr(3, 17);
        assert_eq!(a as u64, 20_000 + 3 * 8192 + 17);
        assert_eq!(l.locate(a), Some((3, 17)));
        assert_eq!(l.locate(19_999), None);
        // Too small a companion says so.
        let e = plan(s.with_companion(100), FormatOptions::default(), true).unwrap_err();
        assert!(e.to_string().contains("companion device has 100"), "{e}");
        // The superblock keeps the companion's size.
        let back = Superblock::decode(&sb.encode()).unwrap();
        assert_eq!(back.companion_lbas, 20_000);
    }

    #[test]
    fn impossible_layouts_say_what_to_change() {
        let mut s = shape();
        s.conventional_zones = 0;
        let e = plan(s, FormatOptions::default(), false).unwrap_err();
        assert!(e.to_string().contains("conventional_zones"), "{e}");
        let mut s = shape();
        s.conventional_zones = 1;
        s.zone_size = 1024;
        s.zone_capacity = 1024;
        s.total_lbas = 512 * 1024;
        let e = plan(s, FormatOptions::default(), false).unwrap_err();
        assert!(e.to_string().contains("--set conventional_zones="), "{e}");
        let e = plan(
            shape(),
            FormatOptions {
                segs_per_zone: 3,
                ..Default::default()
            },
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("segs_per_zone"), "{e}");
        // ZN540-sized zones (1077 MiB) need several segments per zone.
        let mut s = shape();
        s.zone_size = 1 << 19;
        s.zone_capacity = 275_712;
        s.total_lbas = 512 << 19;
        let e = plan(s, FormatOptions::default(), false).unwrap_err();
        assert!(e.to_string().contains("--segs-per-zone"), "{e}");
    }
}
