//! Cleaning policies: strategies the file system consults, so `izc`, `znsplus`, `f2fs-ss`,
//! `zlfs` and `isar` add their own without touching the baseline (DESIGN.md, File system).

use crate::segment::Segments;

/// How the valid blocks of a victim move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Read into the page cache, then written to the cold logs by the host (seed 000 §3.1,
    /// "normal segment compaction", Fig. 3a).
    HostCopy,
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

/// A policy by name.
pub fn by_name(name: &str) -> Result<Box<dyn Policy>, String> {
    match name {
        "f2fs" => Ok(Box::new(F2fs)),
        "izc" | "znsplus" | "f2fs-ss" | "zlfs" | "isar" => Err(format!(
            "policy '{name}' is not implemented yet; available: f2fs"
        )),
        _ => Err(format!(
            "unknown policy '{name}'; available: f2fs (planned: izc, znsplus, f2fs-ss, zlfs, isar)"
        )),
    }
}
