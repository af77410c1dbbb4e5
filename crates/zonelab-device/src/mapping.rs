//! Zone-to-flash mapping (seed 000 §2.2, Fig. 1; seed 002 §3.2).
//!
//! The dies are split into flash chip groups (FCGs) of `zone_dies` dies each; zone `i` belongs to
//! FCG `i mod N_FCG` (static, so the host can compute it). When a zone opens, the device gives it
//! a flash block group (FBG): the same block offsets on every plane of every die of the FCG. Chunk
//! `j` of a zone (one flash page of data) goes to unit `j mod W` of the FBG, where the units are
//! the FBG's (die, plane) pairs ordered die-first, so consecutive chunks land on different dies.
//! With `zone_dies = 1` every zone lives on one die and consecutive zones go round-robin over
//! channels then dies: the small-zone layout of Z-LFS.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use zonelab_flash::{BlockAddr, DieId, PageAddr};
use zonelab_sim::Divisor;

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "MapperFields")]
pub struct ZoneMapper {
    zone_dies: u32,
    planes: u32,
    blocks_per_zone: u32,
    pages_per_block: u32,
    fcgs: u32,
    /// Free FBG indices per FCG, handed out FIFO (oldest-freed first spreads wear).
    free: Vec<VecDeque<u32>>,
    /// The FBG of each zone that holds one.
    zone_fbg: Vec<Option<u32>>,
    /// The divisors of [`ZoneMapper::page_of`], derived from the fields above.
    #[serde(skip_serializing)]
    div: MapperDivisors,
}

/// `zone_dies`, width, `pages_per_block` and `fcgs` as divisors.
#[derive(Clone, Copy, Debug)]
struct MapperDivisors {
    zone_dies: Divisor,
    width: Divisor,
    pages_per_block: Divisor,
    fcgs: Divisor,
}

/// The serialized fields of a [`ZoneMapper`], in order.
#[derive(Deserialize)]
struct MapperFields {
    zone_dies: u32,
    planes: u32,
    blocks_per_zone: u32,
    pages_per_block: u32,
    fcgs: u32,
    free: Vec<VecDeque<u32>>,
    zone_fbg: Vec<Option<u32>>,
}

impl TryFrom<MapperFields> for ZoneMapper {
    type Error = String;
    fn try_from(f: MapperFields) -> Result<ZoneMapper, String> {
        if f.zone_dies == 0 || f.planes == 0 || f.pages_per_block == 0 || f.fcgs == 0 {
            return Err("zone mapping with a zero dimension".into());
        }
        Ok(ZoneMapper::assemble(f))
    }
}

impl ZoneMapper {
    pub fn new(p: &crate::Profile) -> ZoneMapper {
        let fcgs = p.fcg_count();
        let per = p.fbgs_per_fcg();
        ZoneMapper::assemble(MapperFields {
            zone_dies: p.zns.zone_dies,
            planes: p.geometry.planes_per_die,
            blocks_per_zone: p.zns.blocks_per_zone,
            pages_per_block: p.geometry.pages_per_block,
            fcgs,
            free: (0..fcgs).map(|_| (0..per).collect()).collect(),
            zone_fbg: vec![None; p.zns.zones as usize],
        })
    }

    fn assemble(f: MapperFields) -> ZoneMapper {
        let div = MapperDivisors {
            zone_dies: Divisor::new(f.zone_dies as u64),
            width: Divisor::new(f.zone_dies as u64 * f.planes as u64),
            pages_per_block: Divisor::new(f.pages_per_block as u64),
            fcgs: Divisor::new(f.fcgs as u64),
        };
        ZoneMapper {
            zone_dies: f.zone_dies,
            planes: f.planes,
            blocks_per_zone: f.blocks_per_zone,
            pages_per_block: f.pages_per_block,
            fcgs: f.fcgs,
            free: f.free,
            zone_fbg: f.zone_fbg,
            div,
        }
    }

    /// FCG of a zone (its low-order bits, seed 000 §2.2).
    pub fn fcg_of(&self, zone: u32) -> u32 {
        self.div.fcgs.remainder(zone as u64) as u32
    }

    /// Parallel units (die, plane pairs) a zone stripes over.
    pub fn width(&self) -> u32 {
        self.zone_dies * self.planes
    }

    /// Chunks per zone.
    pub fn chunks_per_zone(&self) -> u64 {
        self.width() as u64 * self.blocks_per_zone as u64 * self.pages_per_block as u64
    }

    pub fn fbg_of(&self, zone: u32) -> Option<u32> {
        self.zone_fbg[zone as usize]
    }

    /// Gives `zone` an FBG; returns it. The zone must not hold one.
    pub fn allocate(&mut self, zone: u32) -> u32 {
        assert!(
            self.zone_fbg[zone as usize].is_none(),
            "zone {zone} already mapped"
        );
        let fcg = self.fcg_of(zone) as usize;
        let fbg = self.free[fcg]
            .pop_front()
            .expect("no free flash block group: profile validation guarantees one per zone");
        self.zone_fbg[zone as usize] = Some(fbg);
        fbg
    }

    /// Returns a zone's FBG to its FCG's free list (zone reset).
    pub fn release(&mut self, zone: u32) {
        if let Some(fbg) = self.zone_fbg[zone as usize].take() {
            let fcg = self.fcg_of(zone) as usize;
            self.free[fcg].push_back(fbg);
        }
    }

    fn die_of_unit(&self, zone: u32, unit: u32) -> DieId {
        DieId(self.fcg_of(zone) * self.zone_dies + self.div.zone_dies.remainder(unit as u64) as u32)
    }

    /// The die holding chunk `chunk` of `zone`: the die of [`ZoneMapper::page_of`], without
    /// working out the block and page (a read needs only the die's and channel's time).
    #[inline]
    pub fn die_of(&self, zone: u32, chunk: u64) -> DieId {
        assert!(
            self.zone_fbg[zone as usize].is_some(),
            "chunk of an unmapped zone"
        );
        let unit = self.div.width.remainder(chunk) as u32;
        self.die_of_unit(zone, unit)
    }

    /// The flash page holding chunk `chunk` of `zone` (which must hold an FBG).
    pub fn page_of(&self, zone: u32, chunk: u64) -> PageAddr {
        let fbg = self.zone_fbg[zone as usize].expect("chunk of an unmapped zone");
        self.page_in_fbg(zone, fbg, chunk)
    }

    /// The flash page chunk `chunk` of `zone` has in FBG `fbg` of the zone's FCG: the same die
    /// and plane whichever FBG the zone holds (static chunk mapping, seed 000 §2.2), which is
    /// what lets plugging copy a chunk to a LogFBG by copyback (§3.2.2).
    pub fn page_in_fbg(&self, zone: u32, fbg: u32, chunk: u64) -> PageAddr {
        let (stripe, unit) = self.div.width.div_rem(chunk);
        let unit = unit as u32;
        let (k, page) = self.div.pages_per_block.div_rem(stripe);
        let (k, page) = (k as u32, page as u32);
        debug_assert!(k < self.blocks_per_zone, "chunk {chunk} beyond the zone");
        PageAddr {
            block: BlockAddr {
                die: self.die_of_unit(zone, unit),
                plane: self.div.zone_dies.quotient(unit as u64) as u32,
                block: fbg * self.blocks_per_zone + k,
            },
            page,
        }
    }

    /// Takes a free FBG of `zone`'s FCG for the zone's LogFBG (seed 000 §3.2.2) without mapping
    /// it; `None` when the FCG has none free.
    pub fn take_log_fbg(&mut self, zone: u32) -> Option<u32> {
        let fcg = self.fcg_of(zone) as usize;
        self.free[fcg].pop_front()
    }

    /// Maps `zone` to `fbg` (its LogFBG, which replaces the original FBG) and returns the FBG
    /// it held.
    pub fn swap_fbg(&mut self, zone: u32, fbg: u32) -> u32 {
        self.zone_fbg[zone as usize]
            .replace(fbg)
            .expect("swap of the FBG of an unmapped zone")
    }

    /// Returns FBG `fbg` of `zone`'s FCG to the free list (an FBG the zone no longer maps).
    pub fn release_fbg(&mut self, zone: u32, fbg: u32) {
        assert_ne!(
            self.zone_fbg[zone as usize],
            Some(fbg),
            "release of the FBG zone {zone} maps"
        );
        let fcg = self.fcg_of(zone) as usize;
        self.free[fcg].push_back(fbg);
    }

    /// Free FBGs of a chip group.
    pub fn free_fbgs(&self, fcg: u32) -> usize {
        self.free[fcg as usize].len()
    }

    /// Number of flash chip groups.
    pub fn fcgs(&self) -> u32 {
        self.fcgs
    }

    /// The parallel unit (die and plane of the zone's FCG) of chunk `chunk`.
    pub fn unit_of(&self, chunk: u64) -> u32 {
        self.div.width.remainder(chunk) as u32
    }

    /// Whether chunk `a` of zone `za` and chunk `b` of zone `zb` live on the same die and
    /// plane, whatever FBGs the zones hold: the condition for a copyback (seed 000 §2.1, §2.2).
    pub fn same_chip(&self, za: u32, a: u64, zb: u32, b: u64) -> bool {
        self.fcg_of(za) == self.fcg_of(zb) && self.unit_of(a) == self.unit_of(b)
    }

    /// Takes a free FBG of `fcg` out of circulation (spare space for conventional zones).
    pub fn take_free(&mut self, fcg: u32) -> Option<u32> {
        self.free[fcg as usize].pop_front()
    }

    /// Every block of a zone's FBG.
    pub fn blocks_of(&self, zone: u32) -> Vec<BlockAddr> {
        match self.zone_fbg[zone as usize] {
            Some(fbg) => self.blocks_of_fbg(self.fcg_of(zone), fbg),
            None => Vec::new(),
        }
    }

    /// Every block of FBG `fbg` of chip group `fcg`.
    pub fn blocks_of_fbg(&self, fcg: u32, fbg: u32) -> Vec<BlockAddr> {
        let mut out = Vec::with_capacity((self.width() * self.blocks_per_zone) as usize);
        for unit in 0..self.width() {
            for k in 0..self.blocks_per_zone {
                out.push(BlockAddr {
                    die: DieId(fcg * self.zone_dies + unit % self.zone_dies),
                    plane: unit / self.zone_dies,
                    block: fbg * self.blocks_per_zone + k,
                });
            }
        }
        out
    }

    /// The values of the two fields of a logical chunk address that identify its flash chip:
    /// the FCG ID (the zone's chip group) and the chip ID (its parallel unit within the group,
    /// die and plane: the copyback domain; seed 000 §2.2, Fig. 1).
    pub fn chip_fields(&self, zone: u32, chunk: u64) -> (u32, u32) {
        (self.fcg_of(zone), self.unit_of(chunk))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    fn profile(sets: &[&str]) -> Profile {
        let items: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
        Profile::load("znsplus-mlc", &Profile::parse_overrides(&items).unwrap()).unwrap()
    }

    #[test]
    fn chunks_interleave_over_the_chips_of_the_fcg() {
        // Fig. 1 of seed 000: D_zone = 4 of 8 chips -> two FCGs.
        let p = profile(&[
            "channels=8",
            "chips_per_channel=1",
            "zone_dies=4",
            "zones=8",
            "zone_size=8MiB",
        ]);
        let mut m = ZoneMapper::new(&p);
        assert_eq!(m.fcg_of(1), 1);
        m.allocate(1);
        let dies: Vec<u32> = (0..6).map(|c| m.page_of(1, c).block.die.0).collect();
        assert_eq!(dies, vec![4, 5, 6, 7, 4, 5]);
        assert_eq!(m.page_of(1, 5).page, 1);
        assert_eq!(m.chip_fields(1, 6), (1, 2));
    }

    #[test]
    fn small_zones_go_round_robin_over_channels_then_dies() {
        let p = profile(&["zone_dies=1", "zone_size=2MiB", "zones=64"]);
        let mut m = ZoneMapper::new(&p);
        let g = p.flash_geometry();
        for z in 0..20 {
            m.allocate(z);
            let die = m.page_of(z, 0).block.die;
            assert_eq!(die.0, z % 16);
            assert_eq!(g.channel_of(die), z % 8);
        }
    }

    #[test]
    fn released_groups_are_reused_last() {
        let p = profile(&["zones=4"]);
        let mut m = ZoneMapper::new(&p);
        let a = m.allocate(0);
        m.release(0);
        let b = m.allocate(0);
        assert_ne!(a, b);
        assert_eq!(m.blocks_of(0).len(), 16);
    }
}
