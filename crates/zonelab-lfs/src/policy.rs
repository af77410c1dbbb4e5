//! Cleaning policies: strategies the file system consults, so `izc`, `znsplus`, `f2fs-ss`,
//! `zlfs` and `isar` add their own without touching the baseline (DESIGN.md, File system).

use crate::segment::{Segments, Temp};

/// How the valid blocks of a victim move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Migration {
    /// Read into the page cache, then written by the host to the cold logs, a directory's
    /// blocks to the hot data log (seed 000 §3.1, "normal segment compaction", Fig. 3a).
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
    /// IZC-H: the host writes it when every valid block of its chunk is cached (a fully
    /// cached chunk, §4.1: no flash read, but a transfer and a write request); otherwise the
    /// device copies the chunk whole.
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

/// Threaded logging settings of a policy (seed 000 §3.2.2, §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThreadedLogging {
    /// theta_PI: a checkpoint is taken when pre-invalid blocks exceed this many bytes
    /// (periodic checkpointing; the paper found about 128 MB best).
    pub checkpoint_pre_invalid_bytes: u64,
    /// f_plugging(N) as a share of the on-demand copy cost of N blocks (0.9 in the paper,
    /// "based on the experimental results on performance improvement by the internal
    /// plugging").
    pub plugging_share: f64,
    /// Whether C_SC subtracts B_cold, the future plugging compaction saves by moving cold
    /// blocks to the cold log.
    pub cold_benefit: ColdBenefit,
    /// How C_TL and C_SC are weighed against each other.
    pub weighing: HsrWeighing,
}

impl Default for ThreadedLogging {
    /// The paper's settings: theta_PI 128 MB, f_plugging 90% of the on-demand copy, B_cold
    /// profiled, and the two costs compared as they stand.
    fn default() -> ThreadedLogging {
        ThreadedLogging {
            checkpoint_pre_invalid_bytes: 128 << 20,
            plugging_share: 0.9,
            cold_benefit: ColdBenefit::Profiled,
            weighing: HsrWeighing::PerSegment,
        }
    }
}

/// How hybrid segment recycling compares C_TL with C_SC (seed 000 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HsrWeighing {
    /// Each cost as it stands: the cost of one TL_open against that of one compaction, as
    /// the paper compares them and the published ZNS+ F2FS does (`get_new_ssr_segment`,
    /// the default).
    PerSegment,
    /// Each cost per block of room it gives the log: C_TL over the blocks the reopened zone
    /// has free (`blocks - N_pre-inv - N_valid`), C_SC over those the compaction frees
    /// (`blocks - N_valid`). Not in the paper: an option to study its cost model with. The
    /// zone threaded logging may reopen is only the cheapest of the log's own type, so it
    /// can keep far more blocks than the zone compaction would clean (OLTP: about 6700 of
    /// 8192 against 5600); compared per segment, the two then cost about the same although
    /// threaded logging plugs twice as many blocks per block it frees.
    PerFreedBlock,
}

/// B_cold in hybrid segment recycling's C_SC (seed 000 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColdBenefit {
    /// None, as the published ZNS+ F2FS (github.com/eslab-skku/ZNSplus, `get_new_ssr_segment`)
    /// weighs the two. Where a workload's writes are largely short-lived among long-lived data
    /// (OLTP), threaded logging then keeps reopening zones that are mostly long-lived data and
    /// plugs it again and again.
    None,
    /// `f_plugging(beta x N_cold)` with beta profiled at run time ([`Hsr`]), as §3.3.2
    /// describes it (the default).
    Profiled,
}

/// What a compaction victim holds: node blocks (a node log wrote it) or data blocks. Only data
/// victims are offloaded by IZC; node victims are cleaned by the host (seed 000 §3.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VictimKind {
    Data,
    Node,
}

impl VictimKind {
    /// The kind of a zone the log `temp` wrote.
    pub fn of(temp: Temp) -> VictimKind {
        match temp {
            Temp::HotNode | Temp::WarmNode | Temp::ColdNode => VictimKind::Node,
            Temp::HotData | Temp::WarmData | Temp::ColdData => VictimKind::Data,
        }
    }
}

/// Hybrid segment recycling's cost model (seed 000 §3.3.2): the reclaiming costs of threaded
/// logging and of segment compaction, in nanoseconds of device work. alpha (node and metadata
/// blocks a compaction writes per block moved) and beta are profiled at run time; until the
/// first observation, alpha is the paper's observed average (0.2) for data victims and 0 for
/// node victims (§3.3.2: "when the victim segment of segment compaction is a node segment, no
/// additional node update occurs; thus, N_node is 0"), and beta 0 (no benefit predicted).
///
/// alpha is profiled per log that wrote the victim, as the paper's split of node and data
/// victims, one step finer: the blocks of one log share an owner structure that another's do
/// not. A hot data zone holds directory blocks, each its own directory's (alpha near 1); a
/// warm data zone holds runs of file blocks under one node (fileserver: about 0.08). One
/// average over both, weighted by the few compactions HSR lets through, would price every
/// compaction of file data at the directories' rate.
///
/// beta: the paper leaves its profiling open ("its appropriate value can be profiled at run
/// time"). Moving a cold block out saves its plugging at the zone's next TL_open only if it
/// would still be valid then, and the slot it frees takes a newly written block that is
/// plugged in its place if that survives; so beta is how much more often a zone's cold
/// blocks (valid at its last two TL_opens) are still valid at the next one than the blocks
/// the log wrote into its holes since the open before, and 0 when they are no colder. A
/// workload whose blocks die at random whatever their age then predicts no benefit; one whose
/// writes are largely short-lived among long-lived data (OLTP: doublewrite and redo among
/// table pages) does, and so can fileserver, whose files filebench deletes in rotation (beta
/// from 0 to 0.6 by the file system's size: docs/zns-plus-reproduction.md, "Table 5").
#[derive(Clone, Debug, PartialEq)]
pub struct Hsr {
    /// In-device copy of one block (f_copy per block): a copyback of its chunk, per block.
    pub copy_ns: f64,
    /// Host write of one block (f_write per block): its share of a page transfer and program.
    pub write_ns: f64,
    pub plugging_share: f64,
    pub cold_benefit: ColdBenefit,
    pub weighing: HsrWeighing,
    /// Per log that wrote the victim ([`Temp`]): (node and metadata blocks written, blocks
    /// moved).
    alpha_sum: [(u64, u64); 6],
    beta_sum: BetaSums,
}

/// beta's observations: at a zone's TL_open, how many of the blocks cold at its previous one
/// are still valid, and how many of the blocks the log wrote since.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BetaSums {
    pub cold_still: u64,
    pub cold_seen: u64,
    pub other_still: u64,
    pub other_seen: u64,
}

impl BetaSums {
    /// beta: how much likelier the cold blocks were to survive than the others; None before
    /// both kinds were seen.
    pub fn beta(&self) -> Option<f64> {
        (self.cold_seen > 0 && self.other_seen > 0).then(|| {
            (self.cold_still as f64 / self.cold_seen as f64
                - self.other_still as f64 / self.other_seen as f64)
                .max(0.0)
        })
    }
}

/// What hybrid segment recycling has profiled so far, for reports: alpha's sums pooled by
/// the kind of victim, and beta's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HsrProfile {
    /// Node and metadata blocks the compactions of data victims wrote, and the blocks they
    /// moved.
    pub data_meta: u64,
    pub data_moved: u64,
    /// The same for node victims.
    pub node_meta: u64,
    pub node_moved: u64,
    pub beta: BetaSums,
}

impl HsrProfile {
    /// alpha of the data (or node) victims compacted; None before the first.
    pub fn alpha(&self, kind: VictimKind) -> Option<f64> {
        let (meta, moved) = match kind {
            VictimKind::Data => (self.data_meta, self.data_moved),
            VictimKind::Node => (self.node_meta, self.node_moved),
        };
        per_block_moved(meta, moved)
    }
}

/// alpha from its sums: node and metadata blocks written per block moved; None before a move.
fn per_block_moved(meta: u64, moved: u64) -> Option<f64> {
    (moved > 0).then(|| meta as f64 / moved as f64)
}

impl Hsr {
    /// The cost model of threaded logging with options `tl`, on a device whose in-device
    /// copy of a block takes `copy_ns` and host write `write_ns`.
    pub fn new(copy_ns: f64, write_ns: f64, tl: &ThreadedLogging) -> Hsr {
        Hsr {
            copy_ns,
            write_ns,
            plugging_share: tl.plugging_share,
            cold_benefit: tl.cold_benefit,
            weighing: tl.weighing,
            alpha_sum: [(0, 0); 6],
            beta_sum: BetaSums::default(),
        }
    }

    /// alpha of a victim the log `victim` wrote.
    pub fn alpha(&self, victim: Temp) -> f64 {
        let (meta, moved) = self.alpha_sum[victim as usize];
        per_block_moved(meta, moved).unwrap_or(match VictimKind::of(victim) {
            VictimKind::Data => 0.2,
            VictimKind::Node => 0.0,
        })
    }

    pub fn beta(&self) -> f64 {
        self.beta_sum.beta().unwrap_or(0.0)
    }

    /// The observations so far ([`HsrProfile`]).
    pub fn profile(&self) -> HsrProfile {
        let mut p = HsrProfile {
            beta: self.beta_sum,
            ..HsrProfile::default()
        };
        for t in Temp::ALL {
            let (meta, moved) = self.alpha_sum[t as usize];
            let (m, v) = match VictimKind::of(t) {
                VictimKind::Data => (&mut p.data_meta, &mut p.data_moved),
                VictimKind::Node => (&mut p.node_meta, &mut p.node_moved),
            };
            *m += meta;
            *v += moved;
        }
        p
    }

    /// A compaction of a victim the log `victim` wrote moved `moved` blocks and wrote `meta`
    /// node and metadata blocks.
    pub fn observe_alpha(&mut self, victim: Temp, meta: u64, moved: u64) {
        let a = &mut self.alpha_sum[victim as usize];
        a.0 += meta;
        a.1 += moved;
    }

    /// At a zone's TL_open: of the `cold` = (still, was) blocks that were cold at its
    /// previous TL_open, `still` are valid now; of the `other` = (still, was) blocks the log
    /// wrote since, too.
    pub fn observe_beta(&mut self, cold: (u64, u64), other: (u64, u64)) {
        let b = &mut self.beta_sum;
        b.cold_still += cold.0;
        b.cold_seen += cold.1;
        b.other_still += other.0;
        b.other_seen += other.1;
    }

    /// f_plugging(N): in-storage plugging of `blocks` blocks, a share of their on-demand copy.
    fn plugging_cost(&self, blocks: f64) -> f64 {
        self.plugging_share * self.copy_ns * blocks
    }

    /// C_TL = f_plugging(N_pre-inv + N_valid), with `keep` = N_pre-inv + N_valid.
    pub fn threaded_logging_cost(&self, keep: u64) -> f64 {
        self.plugging_cost(keep as f64)
    }

    /// C_SC = f_copy(N_valid) + f_write(alpha N_valid) - B_cold, for a victim the log
    /// `victim` wrote with `cold` = N_cold; B_cold = f_plugging(beta N_cold) or none
    /// ([`ColdBenefit`]).
    pub fn compaction_cost(&self, victim: Temp, valid: u64, cold: u64) -> f64 {
        let b_cold = match self.cold_benefit {
            ColdBenefit::None => 0.0,
            ColdBenefit::Profiled => self.plugging_cost(self.beta() * cold as f64),
        };
        self.copy_ns * valid as f64 + self.write_ns * self.alpha(victim) * valid as f64 - b_cold
    }

    /// Weighs reopening a zone that keeps `keep` (N_pre-inv + N_valid) of its `zone_blocks`
    /// blocks for threaded logging against compacting the victim the log `victim` wrote,
    /// which holds `valid` blocks of which `cold` are cold; ties go to threaded logging.
    /// Both zones have a block to free (`keep`, `valid` < `zone_blocks`).
    pub fn weigh(
        &self,
        keep: u64,
        victim: Temp,
        valid: u64,
        cold: u64,
        zone_blocks: u64,
    ) -> HsrVerdict {
        assert!(
            keep < zone_blocks && valid < zone_blocks,
            "both free a block"
        );
        let c_tl = self.threaded_logging_cost(keep);
        let c_sc = self.compaction_cost(victim, valid, cold);
        let threaded_logging = match self.weighing {
            HsrWeighing::PerSegment => c_tl <= c_sc,
            // c_tl / (zone_blocks - keep) <= c_sc / (zone_blocks - valid), both divisors > 0.
            HsrWeighing::PerFreedBlock => {
                c_tl * (zone_blocks - valid) as f64 <= c_sc * (zone_blocks - keep) as f64
            }
        };
        HsrVerdict {
            c_tl,
            c_sc,
            threaded_logging,
        }
    }
}

/// What [`Hsr::weigh`] found: C_TL and C_SC (ns of device work) and the choice.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HsrVerdict {
    pub c_tl: f64,
    pub c_sc: f64,
    /// Threaded logging is the cheaper way (by the weighing's measure).
    pub threaded_logging: bool,
}

/// A file-system policy.
pub trait Policy {
    fn name(&self) -> &'static str;
    fn migration(&self) -> Migration;
    /// Threaded logging with hybrid segment recycling, if the policy uses it.
    fn threaded_logging(&self) -> Option<ThreadedLogging> {
        None
    }
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

/// ZNS+-aware F2FS (seed 000 §3): IZC for segment compaction, plus threaded logging through
/// TL_open with hybrid segment recycling and periodic checkpointing.
pub struct ZnsPlus {
    pub copy: InStorage,
    pub threaded: ThreadedLogging,
}

impl Policy for ZnsPlus {
    fn name(&self) -> &'static str {
        "znsplus"
    }
    fn migration(&self) -> Migration {
        Migration::InStorage(self.copy)
    }
    fn threaded_logging(&self) -> Option<ThreadedLogging> {
        Some(self.threaded)
    }
}

/// The policies [`build`] knows, and their options.
pub const POLICIES: &str = "f2fs; izc (options cached_pages = \"host\" | \"device\", allocation = \
     \"cab\" | \"cub\"); znsplus (the options of izc, and checkpoint_pre_invalid = \"128MiB\", \
     cold_benefit = \"none\" | \"profiled\", hsr_weighing = \"per-segment\" | \"per-freed-block\")";

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
    let mut threaded = ThreadedLogging::default();
    let takes_copy_options = matches!(name, "izc" | "znsplus");
    for (k, v) in options {
        if name == "znsplus" && k == "checkpoint_pre_invalid" {
            threaded.checkpoint_pre_invalid_bytes = parse_bytes(v).ok_or_else(|| {
                format!("checkpoint_pre_invalid = '{v}': give a size such as 128MiB or 134217728")
            })?;
            continue;
        }
        if name == "znsplus" && k == "cold_benefit" {
            threaded.cold_benefit = match v.as_str() {
                "none" => ColdBenefit::None,
                "profiled" => ColdBenefit::Profiled,
                _ => {
                    return Err(format!(
                        "cold_benefit = '{v}': use none (the published ZNS+ F2FS) or profiled \
                         (B_cold = f_plugging(beta x N_cold), seed 000 §3.3.2)"
                    ));
                }
            };
            continue;
        }
        if name == "znsplus" && k == "hsr_weighing" {
            threaded.weighing = match v.as_str() {
                "per-segment" => HsrWeighing::PerSegment,
                "per-freed-block" => HsrWeighing::PerFreedBlock,
                _ => {
                    return Err(format!(
                        "hsr_weighing = '{v}': use per-segment (C_TL against C_SC as they \
                         stand, seed 000 §3.3.2) or per-freed-block (each over the blocks it \
                         frees)"
                    ));
                }
            };
            continue;
        }
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
        "znsplus" => Ok(Box::new(ZnsPlus { copy, threaded })),
        "f2fs-ss" | "zlfs" | "isar" => Err(format!(
            "policy '{name}' is not implemented yet; available: {POLICIES}"
        )),
        _ => Err(format!(
            "unknown policy '{name}'; available: {POLICIES} (planned: f2fs-ss, zlfs, isar)"
        )),
    }
}

/// A byte count: a number, or a number with a KiB/MiB/GiB (or K/M/G) suffix.
fn parse_bytes(v: &str) -> Option<u64> {
    let v = v.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" | "k" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_are_built_by_name_with_checked_options() {
        let opts = |kv: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            kv.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let err = |name: &str, kv: &[(&str, &str)]| build(name, &opts(kv)).err().expect("refused");
        let p = build(
            "znsplus",
            &opts(&[("checkpoint_pre_invalid", "64MiB"), ("allocation", "cub")]),
        )
        .unwrap();
        assert_eq!(
            p.threaded_logging().unwrap().checkpoint_pre_invalid_bytes,
            64 << 20
        );
        assert_eq!(
            p.migration(),
            Migration::InStorage(InStorage {
                cached: CachedPages::Host,
                allocation: Allocation::Sequential
            })
        );
        assert!(build("izc", &opts(&[("checkpoint_pre_invalid", "1M")])).is_err());
        assert!(err("znsplus", &[("checkpoint_pre_invalid", "lots")]).contains("128MiB"));
        assert!(err("f2fs", &[("allocation", "cab")]).contains("takes no option"));
        let p = build("znsplus", &opts(&[("hsr_weighing", "per-freed-block")])).unwrap();
        assert_eq!(
            p.threaded_logging().unwrap().weighing,
            HsrWeighing::PerFreedBlock
        );
        assert!(err("znsplus", &[("hsr_weighing", "per-block")]).contains("per-freed-block"));
        assert!(err("izc", &[("hsr_weighing", "per-segment")]).contains("no option"));
        assert!(err("nope", &[]).contains("unknown policy"));
    }

    #[test]
    fn hybrid_recycling_prefers_the_cheaper_reclaim() {
        use Temp::{HotData, WarmData, WarmNode};
        let mut h = Hsr::new(100.0, 100.0, &ThreadedLogging::default());
        // No cold data: threaded logging of a zone keeping 100 blocks costs 9000, compaction
        // of a data zone with 80 valid blocks 80 x (100 + 0.2 x 100) = 9600.
        assert!(h.threaded_logging_cost(100) < h.compaction_cost(WarmData, 80, 0));
        // A node victim has no node updates: 8000, cheaper.
        assert!(h.threaded_logging_cost(100) > h.compaction_cost(WarmNode, 80, 0));
        // Profiled alpha 0 for warm data victims: compaction of 80 costs 8000, cheaper; node
        // victims keep their own profile.
        h.observe_alpha(WarmData, 0, 1000);
        h.observe_alpha(WarmNode, 500, 1000);
        assert!(h.threaded_logging_cost(100) > h.compaction_cost(WarmData, 80, 0));
        assert!(h.threaded_logging_cost(100) < h.compaction_cost(WarmNode, 80, 0));
        // Directory blocks (one owner each) price hot data victims, not warm ones.
        h.observe_alpha(HotData, 1000, 1000);
        assert_eq!(h.alpha(HotData), 1.0);
        assert_eq!(h.alpha(WarmData), 0.0);
        assert!(h.compaction_cost(HotData, 80, 0) > h.compaction_cost(WarmData, 80, 0));
        // Cold blocks that stay valid make compaction's migration worth more, unless B_cold
        // is left out.
        h.observe_beta((9, 10), (5, 10));
        assert!((h.beta() - 0.4).abs() < 1e-9);
        assert!(h.compaction_cost(WarmData, 80, 50) < h.compaction_cost(WarmData, 80, 0));
        h.cold_benefit = ColdBenefit::None;
        assert_eq!(
            h.compaction_cost(WarmData, 80, 50),
            h.compaction_cost(WarmData, 80, 0)
        );
    }

    /// Per segment, a reopened zone that keeps 85 of 100 blocks costs less than compacting one
    /// with 80 valid (0.9 x 85 < 80); per block of room for the log it costs 7650 / 15 against
    /// 8000 / 20, more. A zone that keeps 50 is cheaper either way.
    #[test]
    fn weighing_per_freed_block_counts_the_room_each_reclaim_gives() {
        use Temp::WarmData;
        let prefers_tl = |h: &Hsr, keep| h.weigh(keep, WarmData, 80, 0, 100).threaded_logging;
        let mut h = Hsr::new(100.0, 100.0, &ThreadedLogging::default());
        h.observe_alpha(WarmData, 0, 1000);
        assert!(prefers_tl(&h, 85) && prefers_tl(&h, 50));
        assert!(!prefers_tl(&h, 90), "0.9 x 90 > 80");
        h.weighing = HsrWeighing::PerFreedBlock;
        assert!(!prefers_tl(&h, 85));
        assert!(prefers_tl(&h, 50));
        // Equal room: the two weighings agree.
        assert!(h.weigh(80, WarmData, 80, 0, 100).threaded_logging);
    }

    /// The report pools alpha by victim kind and carries beta's sums, so a window's
    /// difference of two profiles gives that window's alpha and beta.
    #[test]
    fn the_profile_reports_alpha_by_victim_kind_and_beta() {
        use Temp::{ColdData, HotNode, WarmData, WarmNode};
        let mut h = Hsr::new(100.0, 100.0, &ThreadedLogging::default());
        let p = h.profile();
        assert_eq!(p.alpha(VictimKind::Data), None, "nothing compacted yet");
        assert_eq!(p.beta.beta(), None, "no zone reopened twice yet");
        h.observe_alpha(WarmData, 10, 100);
        h.observe_alpha(ColdData, 30, 100);
        h.observe_alpha(HotNode, 0, 50);
        h.observe_alpha(WarmNode, 5, 50);
        h.observe_beta((9, 10), (5, 10));
        let p = h.profile();
        assert_eq!(p.alpha(VictimKind::Data), Some(0.2));
        assert_eq!(p.alpha(VictimKind::Node), Some(0.05));
        assert_eq!(p.beta.beta(), Some(h.beta()));
        // Blocks no likelier to survive for being cold: no benefit, not a negative one.
        h.observe_beta((0, 80), (10, 10));
        assert_eq!(h.profile().beta.beta(), Some(0.0));
    }
}
