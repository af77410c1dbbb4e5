//! The host link: PCIe lanes x per-lane bandwidth, one timeline per direction, or one shared
//! by both directions on a half-duplex link.

use crate::Timeline;
use serde::{Deserialize, Serialize};
use zonelab_sim::Nanos;

/// Whether host-to-device and device-to-host transfers overlap. PCIe itself is full duplex; an
/// emulator may move all data through one DMA engine, as the ZNS+ authors' FEMU does (one "next
/// DMA available" time for reads and writes at 1.2 GB/s, seed 000 §4), so a host-level copy's
/// reads and writes and the user's I/O queue for the same link.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Duplex {
    /// One timeline per direction.
    #[default]
    Full,
    /// One timeline for both directions.
    Half,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PcieLink {
    bytes_per_sec: u64,
    /// Fixed cost per transfer (TLP headers, doorbells), added to the serialization time.
    per_transfer: Nanos,
    /// Host-to-device transfers; on a half-duplex link, all transfers.
    to_device: Timeline,
    /// Device-to-host transfers on a full-duplex link.
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
    /// Device-to-host DMA of `bytes` starting no earlier than `at`; returns when it ends. The
    /// device passes its link's duplex with every transfer (the link's serialized form in device
    /// images predates the setting, which lives in the profile).
    pub fn to_host(&mut self, duplex: Duplex, now: Nanos, at: Nanos, bytes: u64) -> Nanos {
        let d = self.cost(bytes);
        let line = match duplex {
            Duplex::Full => &mut self.to_host,
            Duplex::Half => &mut self.to_device,
        };
        line.reserve(now, at, d) + d
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
        assert_eq!(
            l.to_host(Duplex::Full, Nanos(0), Nanos(0), 12_000),
            Nanos(10_000)
        );
    }

    #[test]
    fn a_half_duplex_link_carries_one_transfer_at_a_time() {
        let mut l = PcieLink::new(2, 600_000_000, Nanos::ZERO);
        assert_eq!(l.to_device(Nanos(0), Nanos(0), 12_000), Nanos(10_000));
        // A read's data waits for the write's to pass.
        assert_eq!(
            l.to_host(Duplex::Half, Nanos(0), Nanos(0), 12_000),
            Nanos(20_000)
        );
        assert_eq!(l.to_device(Nanos(0), Nanos(0), 12_000), Nanos(30_000));
    }
}
