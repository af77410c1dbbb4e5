//! Cleaning policies: strategies the file system consults, so `izc`, `znsplus`, `f2fs-ss`,
//! `zlfs` and `isar` add their own without touching the baseline (DESIGN.md, File system).

use crate::segment::Segments;

/// How the valid blocks of a victim move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Read into the page cache, then written to the cold logs by the host (seed 000 §3.1,
    /// "normal segment compaction", Fig. 3a).
    HostCopy,
    /// Internal zone compaction (IZC, seed 000 §3.1 Fig. 3b, §3.2.1): the device copies the
    /// blocks with `zone_compaction`; the host only updates the metadata.
    InStorage(InStorage),
}

/// How an IZC-based cleaning splits its blocks between host and device, and where it puts
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InStorage {
    pub cached: CachedPages,
    pub allocation: Allocation,
}

/// Who moves a valid block whose page is cached clean in the host (seed 000 §3.2.1, "Cached
/// Page Handling"). Dirty cached pages are always written by the host: their data is newer
/// than the block's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CachedPages {
    /// IZC-H: the host writes it (no flash read, but a transfer and a write request).
    Host,
    /// IZC-D: the device copies it like any other block (a flash read, no transfer).
    Device,
}

/// How destinations are assigned to the blocks a device copies (seed 000 §3.3.1, Fig. 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Allocation {
    /// CAB: a fully valid source chunk goes to a destination chunk on the same flash chip
    /// (found with identify_mapping's chunk mapping), so the device can copy it back; the
    /// remaining blocks fill the rest of the reserved region.
    CopybackAware,
    /// CUB: destinations in the order of the source addresses, as LFS compaction allocates.
    Sequential,
}

/// Victim selection (seed 000 §2.3; F2FS's gc policies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Victim {
    /// Fewest valid blocks: least copying now (F2FS foreground cleaning).
    Greedy,
    /// Highest (1 - u) / (1 + u) x age: prefers old, mostly invalid zones (F2FS background
    /// cleaning, after Rosenblum and Ousterhout's LFS).
    CostBenefit,
}

impl Victim {
    /// The zone to clean among `segs.candidates()`, or None when none would free space.
    pub fn pick(self, segs: &Segments, now: u64) -> Option<u32> {
        let cap = segs.layout.blocks_per_zone as u64;
        let mut best: Option<(u128, u32)> = None;
        for z in segs.candidates() {
            let valid = segs.zone_valid(z) as u64;
            if valid >= cap {
                continue;
            }
            // Higher score is better; ties go to the lower zone number (stable).
            let score: u128 = match self {
                Victim::Greedy => (cap - valid) as u128,
                Victim::CostBenefit => {
                    let age = now.saturating_sub(segs.zone_mtime(z)) as u128 + 1;
                    // (1-u)/(1+u) * age with u = valid/cap, scaled to integers.
                    ((cap - valid) as u128 * age * 1024) / (cap + valid) as u128
                }
            };
            if best.is_none_or(|(s, _)| score > s) {
                best = Some((score, z));
            }
        }
        best.map(|(_, z)| z)
    }
}

/// A file-system policy.
pub trait Policy {
    fn name(&self) -> &'static str;
    fn migration(&self) -> Migration;
    /// Victim selection for cleaning that writers wait for.
    fn foreground_victim(&self) -> Victim {
        Victim::Greedy
    }
    /// Victim selection for cleaning while the file system is idle.
    fn background_victim(&self) -> Victim {
        Victim::CostBenefit
    }
}

/// The ZNS patch of F2FS the papers compare against (seed 000 §2.3 and §4: "ZNS uses the
/// host-level copy to perform segment compaction and does not utilize threaded logging").
pub struct F2fs;

impl Policy for F2fs {
    fn name(&self) -> &'static str {
        "f2fs"
    }
    fn migration(&self) -> Migration {
        Migration::HostCopy
    }
}

/// F2FS with internal zone compaction (seed 000 §3.2.1): cleaning is offloaded to the device
/// with `zone_compaction`; victims, logs and checkpoints as [`F2fs`].
pub struct Izc {
    pub copy: InStorage,
}

impl Policy for Izc {
    fn name(&self) -> &'static str {
        "izc"
    }
    fn migration(&self) -> Migration {
        Migration::InStorage(self.copy)
    }
}

/// The policies [`build`] knows, and their options.
pub const POLICIES: &str =
    "f2fs; izc (options cached_pages = \"host\" | \"device\", allocation = \"cab\" | \"cub\")";

/// A policy by name with default options.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, String> {
    build(name, &std::collections::BTreeMap::new())
}

/// A policy by name with options (`[fs] options` of an experiment), each a `key -> text`.
/// Unknown policies and options, and options the policy does not take, are errors.
pub fn build(
    name: &str,
    options: &std::collections::BTreeMap<String, String>,
) -> Result<Box<dyn Policy>, String> {
    let mut copy = InStorage {
        cached: CachedPages::Host,
        allocation: Allocation::CopybackAware,
    };
    let takes_copy_options = matches!(name, "izc");
    for (k, v) in options {
        if !takes_copy_options {
            return Err(format!(
                "policy '{name}' takes no option '{k}'; policies: {POLICIES}"
            ));
        }
        match (k.as_str(), v.as_str()) {
            ("cached_pages", "host") => copy.cached = CachedPages::Host,
            ("cached_pages", "device") => copy.cached = CachedPages::Device,
            ("allocation", "cab") => copy.allocation = Allocation::CopybackAware,
            ("allocation", "cub") => copy.allocation = Allocation::Sequential,
            ("cached_pages", _) => {
                return Err(format!(
                    "cached_pages = '{v}': use host (IZC-H) or device (IZC-D)"
                ));
            }
            ("allocation", _) => {
                return Err(format!(
                    "allocation = '{v}': use cab (copyback-aware) or cub (copyback-unaware)"
                ));
            }
            _ => {
                return Err(format!(
                    "policy '{name}' has no option '{k}'; policies: {POLICIES}"
                ));
            }
        }
    }
    match name {
        "f2fs" => Ok(Box::new(F2fs)),
        "izc" => Ok(Box::new(Izc { copy })),
        "znsplus" | "f2fs-ss" | "zlfs" | "isar" => Err(format!(
            "policy '{name}' is not implemented yet; available: {POLICIES}"
        )),
        _ => Err(format!(
            "unknown policy '{name}'; available: {POLICIES} (planned: znsplus, f2fs-ss, zlfs, isar)"
        )),
    }
}
