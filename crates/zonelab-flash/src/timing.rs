//! Flash operation latencies (seed 000 Table 2 gives them for TLC, MLC and Z-NAND).

use serde::{Deserialize, Serialize};
use zonelab_sim::Nanos;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlashTiming {
    /// Array read of one page into the die's page register (tR).
    pub read: Nanos,
    /// Program of one page from the page register (tPROG).
    pub program: Nanos,
    /// Erase of one block (tBERS).
    pub erase: Nanos,
    /// On-die copy of one page (read into the register, program back) without the channel.
    pub copyback: Nanos,
    /// Moving one page between controller and die over the channel (the "DMA" of Table 2).
    pub page_transfer: Nanos,
    /// Whether a read keeps its die busy until the data has crossed the channel: a die
    /// without cache read holds the page in its register until it is out, and takes no other
    /// operation until then. Otherwise the die is free once the page is sensed (cache read:
    /// the next page is sensed while this one goes out). The ZNS+ authors' FEMU keeps a chip
    /// busy for tR and the page DMA (github.com/eslab-skku/ZNSplus, ssd_io_manager.c,
    /// `SSD_PAGE_READ`), as seed 000 Table 2 counts a read-and-program copy as tR, two DMAs
    /// and tPROG of the chip, against which copyback saves 6-10%. Set from the device profile
    /// (`flash.read_holds_die`), not stored with the array in device images.
    #[serde(skip)]
    pub read_holds_die: bool,
    /// Whether a die takes a program's data into its cache register while it still programs
    /// the page before (NAND cache program): the transfer then waits only for that program to
    /// have begun, and the die programs page after page at tPROG each. Otherwise the transfer
    /// waits for the die to be free, and each program holds the die for the transfer and
    /// tPROG. The ZNS+ authors' FEMU programs this way (github.com/eslab-skku/ZNSplus,
    /// ssd_io_manager.c, `SSD_PAGE_WRITE`: the page crosses the channel when the channel is
    /// free and a busy chip adds tPROG after its current work). Set from the device profile
    /// (`flash.cache_program`), not stored with the array in device images.
    #[serde(skip)]
    pub cache_program: bool,
}

impl FlashTiming {
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("read", self.read),
            ("program", self.program),
            ("page_transfer", self.page_transfer),
        ] {
            if v == Nanos::ZERO {
                return Err(format!("flash timing '{name}' must be greater than zero"));
            }
        }
        Ok(())
    }

    /// Channel time to move `bytes` of a page (partial pages move proportionally, rounded up).
    pub fn transfer(&self, bytes: u64, page_size: u64) -> Nanos {
        if bytes >= page_size {
            return self.page_transfer.times(bytes / page_size)
                + self.transfer(bytes % page_size, page_size);
        }
        // bytes < page_size, so the product fits in 64 bits for any realistic transfer time.
        Nanos((self.page_transfer.0.saturating_mul(bytes)).div_ceil(page_size))
    }
}
