//! Consistency checks of a device loaded from an image file.
//!
//! An image that passed its checksum can still describe an impossible device: written by a
//! buggy build, edited by hand, or crafted. The model asserts its invariants while it runs (an
//! impossible state stops the run), so a loaded device is checked here first and refused with a
//! message instead. Every check reads only; none of them can panic on any field values.
//!
//! The zone state machine checks itself when it is deserialized ([`crate::zone::ZoneSet`]'s
//! `TryFrom<ZoneSetImage>`); this module checks that everything around it — profile, geometry,
//! per-zone progress, stored data, flash array — agrees with it and with the profile.

use crate::mapping::ZoneMapper;
use crate::payload::PayloadMode;
use crate::zns::ZonedDevice;
use crate::zone::{ZoneGeometry, ZoneState, ZoneType};

impl ZonedDevice {
    /// Checks that a deserialized device is one the model could have produced: the profile is
    /// valid, every derived size and table matches it, the zone state machine's invariants hold,
    /// and the per-zone programming progress and stored data agree with the write pointers.
    /// Returns what is wrong, for an error message; never panics.
    pub fn validate_loaded(&self) -> Result<(), String> {
        let p = &self.profile;
        p.validate().map_err(|e| format!("device profile: {e}"))?;

        if self.lba_size != p.lba_size() {
            return Err(format!(
                "LBA size {} differs from the profile's {}",
                self.lba_size,
                p.lba_size()
            ));
        }
        if self.lbas_per_chunk.get() != p.lbas_per_chunk() {
            return Err(format!(
                "{} LBAs per flash page, the profile gives {}",
                self.lbas_per_chunk.get(),
                p.lbas_per_chunk()
            ));
        }

        let z = &p.zns;
        let geom = ZoneGeometry {
            zone_size: p.zone_size_lbas(),
            zone_capacity: p.zone_capacity_lbas(),
            zones: z.zones,
            conventional_zones: z.conventional_zones,
            max_open: z.max_open,
            max_active: z.max_active,
        };
        if *self.zones.geometry() != geom {
            return Err(format!(
                "zone geometry {:?} differs from the profile's {geom:?}",
                self.zones.geometry()
            ));
        }
        self.zones
            .check_invariants()
            .map_err(|e| format!("zone states: {e}"))?;

        if *self.flash.geometry() != p.flash_geometry() {
            return Err("flash geometry differs from the profile's".into());
        }
        if *self.flash.timing() != p.flash_timing() {
            return Err("flash timing differs from the profile's".into());
        }

        let zones = z.zones as usize;
        if self.progress.len() != zones {
            return Err(format!(
                "programming progress kept for {} zones, the device has {zones}",
                self.progress.len()
            ));
        }
        let engines = p.controller.append_engines as usize;
        if self.append_engines.len() != engines {
            return Err(format!(
                "{} append engines, the profile gives {engines}",
                self.append_engines.len()
            ));
        }

        let chunks_per_zone = ZoneMapper::new(p).chunks_per_zone();
        if self.map.chunks_per_zone() != chunks_per_zone {
            return Err(format!(
                "zone mapping has {} flash pages per zone, the profile gives {chunks_per_zone}",
                self.map.chunks_per_zone()
            ));
        }
        match (&self.conventional, z.conventional_zones) {
            (None, 0) => {}
            (Some(ftl), n) if n > 0 => {
                let pages = u64::from(n) * chunks_per_zone;
                if ftl.logical_pages() != pages {
                    return Err(format!(
                        "conventional-zone FTL holds {} pages, {n} conventional zones need {pages}",
                        ftl.logical_pages()
                    ));
                }
            }
            (Some(_), _) => return Err("an FTL without conventional zones".into()),
            (None, n) => return Err(format!("{n} conventional zones without an FTL")),
        }

        let lpc = self.lbas_per_chunk.get();
        let mut sequential_blocks = 0u64;
        for (zone, prog) in self.zones.zones().iter().zip(&self.progress) {
            if zone.ztype == ZoneType::Conventional {
                continue;
            }
            let id = zone.id;
            if prog.programmed_chunks > chunks_per_zone {
                return Err(format!(
                    "zone {id}: {} flash pages programmed of {chunks_per_zone}",
                    prog.programmed_chunks
                ));
            }
            let full_chunks = zone.written / lpc;
            let progress_ok = match zone.state {
                ZoneState::Empty => prog.programmed_chunks == 0 && prog.written == 0,
                ZoneState::ImplicitlyOpened | ZoneState::ExplicitlyOpened | ZoneState::Closed => {
                    prog.programmed_chunks == full_chunks && prog.written == zone.written
                }
                ZoneState::Full => {
                    prog.programmed_chunks >= full_chunks && prog.written == zone.written
                }
                // Media failures freeze a zone wherever it was.
                ZoneState::ReadOnly | ZoneState::Offline | ZoneState::NotWritePointer => true,
            };
            if !progress_ok {
                return Err(format!(
                    "zone {id} ({}): {} blocks written and {} flash pages programmed, but the \
                     write pointer says {} blocks",
                    zone.state, prog.written, prog.programmed_chunks, zone.written
                ));
            }
            sequential_blocks = sequential_blocks
                .saturating_add(prog.written)
                .saturating_add(self.tl_blocks_ahead(id.0, prog.written));
        }

        let zones_ref = self.zones.zones();
        self.durability
            .seq
            .check(zones, |z| {
                zones_ref
                    .get(z as usize)
                    .filter(|zone| zone.ztype == ZoneType::SequentialWriteRequired)
                    .map(|_| self.progress[z as usize].written)
            })
            .map_err(|e| format!("power-loss bookkeeping: {e}"))?;
        self.durability
            .undo
            .check(self.data.mode(), &self.data, |z| {
                zones_ref
                    .get(z as usize)
                    .filter(|zone| zone.ztype == ZoneType::Conventional)
                    .map(|zone| zone.size)
            })
            .map_err(|e| format!("power-loss bookkeeping: {e}"))?;
        if self.profile.controller.power_loss_protection
            && (!self.durability.seq.is_empty() || !self.durability.undo.is_empty())
        {
            return Err("power-loss bookkeeping on a device with power-loss protection".into());
        }

        let per_block = match self.data.mode() {
            PayloadMode::Full => self.lba_size,
            PayloadMode::Fingerprint => 8,
        };
        let expected = sequential_blocks.saturating_mul(per_block);
        let stored = self.data.stored_bytes();
        let consistent = if z.conventional_zones == 0 {
            stored == expected
        } else {
            stored >= expected && (stored - expected).is_multiple_of(per_block)
        };
        if !consistent {
            return Err(format!(
                "stored data ({stored} bytes) does not match the blocks the zones hold \
                 ({expected} bytes)"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::Profile;
    use crate::payload::{PayloadMode, WriteData};
    use crate::zns::{ZoneAction, ZonedDevice};
    use crate::zone::Lba;
    use zonelab_sim::Nanos;

    fn device() -> ZonedDevice {
        let ov = Profile::parse_overrides(&["zones=8".to_string()]).unwrap();
        let p = Profile::load("znsplus-mlc", &ov).unwrap();
        ZonedDevice::new(p, PayloadMode::Full).unwrap()
    }

    fn used(mut d: ZonedDevice) -> ZonedDevice {
        let lba = d.lba_size() as usize;
        let zs = d.zones().geometry().zone_size;
        let buf = vec![7u8; lba * 5];
        let t = Nanos::ZERO;
        assert!(
            d.write(t, t, Lba(0), WriteData::Bytes(&buf), false)
                .status
                .is_ok()
        );
        assert!(
            d.write(t, t, Lba(zs), WriteData::Bytes(&buf), true)
                .status
                .is_ok()
        );
        assert!(
            d.zone_mgmt(t, t, ZoneAction::Finish, Lba(zs), false)
                .status
                .is_ok()
        );
        assert!(
            d.zone_mgmt(t, t, ZoneAction::Open, Lba(2 * zs), false)
                .status
                .is_ok()
        );
        d
    }

    #[test]
    fn new_and_used_devices_are_consistent() {
        device().validate_loaded().unwrap();
        used(device()).validate_loaded().unwrap();
    }

    #[test]
    fn inconsistencies_are_named() {
        let mut d = used(device());
        d.progress.pop();
        assert!(d.validate_loaded().unwrap_err().contains("progress"));

        let mut d = used(device());
        d.lba_size = 512;
        assert!(d.validate_loaded().unwrap_err().contains("LBA size"));

        let mut d = used(device());
        d.profile.zns.zones = 16;
        assert!(d.validate_loaded().unwrap_err().contains("geometry"));

        let mut d = used(device());
        d.progress[0].written += 1;
        assert!(d.validate_loaded().unwrap_err().contains("zone 0"));

        let mut d = used(device());
        d.data.clear(0);
        assert!(d.validate_loaded().unwrap_err().contains("stored data"));

        let mut d = used(device());
        d.append_engines.clear();
        assert!(d.validate_loaded().unwrap_err().contains("append engines"));

        let mut d = used(device());
        d.profile.geometry.lba_size.0 = 3;
        assert!(d.validate_loaded().unwrap_err().contains("profile"));
    }

    #[test]
    fn power_loss_bookkeeping_is_checked() {
        let ov = Profile::parse_overrides(&[
            "zones=8".to_string(),
            "conventional_zones=1".to_string(),
            "power_loss_protection=false".to_string(),
        ])
        .unwrap();
        let p = Profile::load("znsplus-mlc", &ov).unwrap();
        let fresh = || {
            let mut d = ZonedDevice::new(p.clone(), PayloadMode::Full).unwrap();
            let zs = d.zones().geometry().zone_size;
            let t = Nanos::ZERO;
            let buf = vec![7u8; d.lba_size() as usize * 5];
            assert!(
                d.write(t, t, Lba(zs), WriteData::Bytes(&buf), false)
                    .status
                    .is_ok()
            );
            assert!(
                d.write(t, t, Lba(3), WriteData::Bytes(&buf), false)
                    .status
                    .is_ok()
            );
            assert!(!d.durability.seq.is_empty() && !d.durability.undo.is_empty());
            d
        };
        fresh().validate_loaded().unwrap();

        let mut d = fresh();
        d.progress[1].written = 2;
        d.zones = {
            // Keep the zone set consistent with the shrunken progress: only the bookkeeping
            // now claims more than the zone holds.
            let mut z = d.zones.clone();
            z.power_up(&[(crate::zone::ZoneId(1), 2)], &[]);
            z
        };
        d.progress[1].programmed_chunks = 0;
        d.data.truncate(1, 2);
        assert!(
            d.validate_loaded()
                .unwrap_err()
                .contains("power-loss bookkeeping")
        );

        let mut d = fresh();
        d.profile.controller.power_loss_protection = true;
        assert!(
            d.validate_loaded()
                .unwrap_err()
                .contains("power-loss bookkeeping")
        );
    }
}
