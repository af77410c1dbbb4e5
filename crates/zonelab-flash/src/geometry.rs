//! Flash geometry: channels x chips (ways) x dies x planes x blocks x pages.
//!
//! Dies are numbered channel-first: die `d` sits on channel `d % channels`, so consecutive die
//! numbers spread over channels before they share one. Zone mappings that take dies in number
//! order therefore interleave over channels first, as both ZNS+ (seed 000 §2.2) and the
//! round-robin small-zone mapping of Z-LFS (seed 002 §3.2) require.

use serde::{Deserialize, Serialize};

/// A die's index in channel-first order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DieId(pub u32);

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Geometry {
    pub channels: u32,
    pub chips_per_channel: u32,
    pub dies_per_chip: u32,
    pub planes_per_die: u32,
    pub blocks_per_plane: u32,
    pub pages_per_block: u32,
    pub page_size: u64,
}

impl Geometry {
    /// Checks every field; the error names the field and says what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("channels", self.channels as u64),
            ("chips_per_channel", self.chips_per_channel as u64),
            ("dies_per_chip", self.dies_per_chip as u64),
            ("planes_per_die", self.planes_per_die as u64),
            ("blocks_per_plane", self.blocks_per_plane as u64),
            ("pages_per_block", self.pages_per_block as u64),
            ("page_size", self.page_size),
        ];
        for (name, v) in positive {
            if v == 0 {
                return Err(format!("{name} must be at least 1"));
            }
        }
        if !self.page_size.is_multiple_of(512) {
            return Err(format!(
                "page_size must be a multiple of 512 bytes (got {})",
                self.page_size
            ));
        }
        if self.total_dies() > 1 << 20 {
            return Err(
                "channels x chips_per_channel x dies_per_chip exceeds 1,048,576 dies".into(),
            );
        }
        if self.pages_per_block > 1 << 20 {
            return Err("pages_per_block must be at most 1,048,576".into());
        }
        self.raw_bytes()
            .checked_mul(1)
            .filter(|b| *b <= 1 << 56)
            .ok_or_else(|| {
                "the flash array is larger than 64 PiB; reduce blocks_per_plane".to_string()
            })?;
        Ok(())
    }

    pub fn total_dies(&self) -> u32 {
        self.channels * self.chips_per_channel * self.dies_per_chip
    }
    pub fn channel_of(&self, die: DieId) -> u32 {
        die.0 % self.channels
    }
    /// The chip (package) a die belongs to, numbered channel-first like dies.
    pub fn chip_of(&self, die: DieId) -> u32 {
        die.0 % (self.channels * self.chips_per_channel)
    }
    pub fn block_bytes(&self) -> u64 {
        self.page_size * self.pages_per_block as u64
    }
    pub fn raw_bytes(&self) -> u64 {
        (self.total_dies() as u128
            * self.planes_per_die as u128
            * self.blocks_per_plane as u128
            * self.block_bytes() as u128)
            .min(u64::MAX as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn small() -> Geometry {
        Geometry {
            channels: 4,
            chips_per_channel: 2,
            dies_per_chip: 1,
            planes_per_die: 1,
            blocks_per_plane: 8,
            pages_per_block: 4,
            page_size: 16384,
        }
    }

    #[test]
    fn channel_first_numbering() {
        let g = small();
        assert_eq!(g.total_dies(), 8);
        assert_eq!(g.channel_of(DieId(0)), 0);
        assert_eq!(g.channel_of(DieId(3)), 3);
        assert_eq!(g.channel_of(DieId(4)), 0);
        assert_eq!(g.chip_of(DieId(5)), 5);
    }

    #[test]
    fn zero_fields_are_named() {
        let mut g = small();
        g.pages_per_block = 0;
        assert!(g.validate().unwrap_err().contains("pages_per_block"));
        let mut g = small();
        g.page_size = 1000;
        assert!(g.validate().unwrap_err().contains("page_size"));
    }
}
