//! The host link: PCIe lanes x per-lane bandwidth, one timeline per direction.

use crate::Timeline;
use serde::{Deserialize, Serialize};
use zonelab_sim::Nanos;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PcieLink {
    bytes_per_sec: u64,
    /// Fixed cost per transfer (TLP headers, doorbells), added to the serialization time.
    per_transfer: Nanos,
    to_device: Timeline,
    to_host: Timeline,
    /// The last transfer size and its cost: commands mostly repeat one size, and the cost
    /// takes a 64-bit division. A cache, so not serialized.
    #[serde(skip)]
    last_cost: Option<(u64, Nanos)>,
}

impl PcieLink {
    pub fn new(lanes: u32, lane_bytes_per_sec: u64, per_transfer: Nanos) -> PcieLink {
        assert!(
            lanes > 0 && lane_bytes_per_sec > 0,
            "PCIe link without bandwidth"
        );
        PcieLink {
            bytes_per_sec: lanes as u64 * lane_bytes_per_sec,
            per_transfer,
            to_device: Timeline::new(),
            to_host: Timeline::new(),
            last_cost: None,
        }
    }
    pub fn bandwidth(&self) -> u64 {
        self.bytes_per_sec
    }
    #[inline(always)]
    fn cost(&mut self, bytes: u64) -> Nanos {
        match self.last_cost {
            Some((b, cost)) if b == bytes => cost,
            _ => {
                let cost = self.per_transfer + Nanos::for_transfer(bytes, self.bytes_per_sec);
                self.last_cost = Some((bytes, cost));
                cost
            }
        }
    }
    /// Drops the transfers reserved from `at` on (a power loss at `at` aborts them).
    pub fn cancel_after(&mut self, at: Nanos) {
        self.to_device.cancel_after(at);
        self.to_host.cancel_after(at);
    }
    #[inline(always)]
    /// Host-to-device DMA of `bytes` starting no earlier than `at`; returns when it ends.
    pub fn to_device(&mut self, now: Nanos, at: Nanos, bytes: u64) -> Nanos {
        let d = self.cost(bytes);
        self.to_device.reserve(now, at, d) + d
    }
    #[inline(always)]
    /// Device-to-host DMA of `bytes` starting no earlier than `at`; returns when it ends.
    pub fn to_host(&mut self, now: Nanos, at: Nanos, bytes: u64) -> Nanos {
        let d = self.cost(bytes);
        self.to_host.reserve(now, at, d) + d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directions_are_independent_and_serialize() {
        // PCIe Gen2 x2 as in seed 000 §4: 600 MB/s per lane.
        let mut l = PcieLink::new(2, 600_000_000, Nanos::ZERO);
        let a = l.to_device(Nanos(0), Nanos(0), 12_000);
        assert_eq!(a, Nanos(10_000));
        assert_eq!(l.to_device(Nanos(0), Nanos(0), 12_000), Nanos(20_000));
        assert_eq!(l.to_host(Nanos(0), Nanos(0), 12_000), Nanos(10_000));
    }
}
