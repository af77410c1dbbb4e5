//! The file system's log of space reclamation: one event per zone cleaned by segment
//! compaction, per choice between compaction and threaded logging (seed 000 §3.3.2, hybrid
//! segment recycling), and per periodic checkpoint (§3.3.2, theta_PI). `zonelab run --gc-log`
//! writes it as JSON lines, so a run's cleaning can be followed victim by victim: which zones
//! were reclaimed how, what HSR weighed, and where a compaction's time went (Fig. 6's phases).
//!
//! Events carry simulated times only, so the log of a run is as deterministic as its result.

use crate::segment::Temp;
use serde::Serialize;
use zonelab_sim::Nanos;

/// One step of space reclamation, in the order the file system took them.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum GcEvent {
    Compaction(CompactionEvent),
    ReclaimChoice(ReclaimChoice),
    PeriodicCheckpoint(PeriodicCheckpoint),
}

impl GcEvent {
    /// The compaction this event records, if it records one.
    pub fn compaction(&self) -> Option<&CompactionEvent> {
        match self {
            GcEvent::Compaction(c) => Some(c),
            _ => None,
        }
    }

    /// The choice between compaction and threaded logging this event records, if it records
    /// one.
    pub fn reclaim_choice(&self) -> Option<&ReclaimChoice> {
        match self {
            GcEvent::ReclaimChoice(c) => Some(c),
            _ => None,
        }
    }
}

/// How a compaction moved its victim's valid blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionMethod {
    /// The host read the blocks it did not hold and wrote them to the cold logs (a
    /// directory's blocks to the hot data log).
    HostCopy,
    /// The device copied what the host did not write (IZC's zone_compaction, seed 000 §3.2.1).
    InDevice,
}

/// A victim zone cleaned by segment compaction, recorded when the checkpoint that makes its
/// moves durable completes (the zone is free from then on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct CompactionEvent {
    pub zone: u32,
    /// The log that wrote the victim.
    pub log: Temp,
    pub method: CompactionMethod,
    /// Foreground (a writer waited for free zones) or background cleaning.
    pub foreground: bool,
    /// When cleaning picked the victim, and when the checkpoint after it completed.
    pub start_ns: Nanos,
    pub durable_ns: Nanos,
    /// Valid blocks when cleaning began; data blocks moved (the host's writes to the cold
    /// data log and the device's copies: the counts of the authors' gc_data_segment, which
    /// Table 4's offloaded share divides), and of those the ones the device copied. A node
    /// victim's valid nodes are dirtied for the checkpoint to rewrite, as F2FS's
    /// gc_node_segment does, and not counted as moved.
    pub valid_blocks: u64,
    pub moved_blocks: u64,
    pub device_copied_blocks: u64,
    /// The victim's time by phase (seed 000 Fig. 6).
    pub phases_ns: CompactionTime,
}

/// A compaction's time by phase (seed 000 Fig. 6): init (the victim's summary blocks), read
/// (the host's reads of blocks it copies), write (issuing the moves: the host's writes, or
/// IZC's zone_compaction), and checkpoint. Cleaning goes victim after victim and checkpoints
/// once per round: a victim's checkpoint phase is the checkpoint that opens a foreground round
/// or follows the victim, and the wait for the moves it makes durable
/// ([`crate::fs::Fs::foreground_round`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CompactionTime {
    pub init: Nanos,
    pub read: Nanos,
    pub write: Nanos,
    pub checkpoint: Nanos,
}

/// What a log that needed a zone took under threaded logging (znsplus): a dirty zone of its
/// type reopened by TL_open, or a free zone because compaction was the cheaper way to reclaim
/// (the cleaner then compacts). `zone` is the threaded-logging candidate either way. A log
/// picks its next zone when it takes the last block of its zone, so a zone chosen for threaded
/// logging is reopened (TL_open, counted in `tl_opens`) at the log's next block, later.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ReclaimChoice {
    pub at_ns: Nanos,
    pub log: Temp,
    pub chose: Reclaim,
    pub zone: u32,
    /// The candidate's blocks the log skips: valid, and pre-invalid (the device plugs both).
    pub valid_blocks: u64,
    pub pre_invalid_blocks: u64,
    /// The costs HSR compared; None when it compared none: fewer zones than `forced_below`
    /// were free (threaded logging then), or no zone could be compacted.
    pub weighed: Option<HsrWeighed>,
}

/// The two ways to reclaim a zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reclaim {
    ThreadedLogging,
    Compaction,
}

/// Hybrid segment recycling's weighing (seed 000 §3.3.2, eq. 1 and 2), in nanoseconds of
/// device work: C_TL of the threaded-logging candidate against C_SC of the zone compaction
/// would clean.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HsrWeighed {
    pub c_tl_ns: f64,
    pub c_sc_ns: f64,
    pub victim_zone: u32,
    pub victim_valid_blocks: u64,
    /// N_cold of the victim (B_cold's base).
    pub victim_cold_blocks: u64,
    /// The victim's pre-invalid blocks: threaded logging would have to plug them, while
    /// compaction frees them with its checkpoint, so a zone of many deletes since the last
    /// checkpoint is compaction's victim but not threaded logging's candidate.
    pub victim_pre_invalid_blocks: u64,
}

/// A checkpoint taken because pre-invalid blocks exceeded theta_PI (seed 000 §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PeriodicCheckpoint {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// Pre-invalid blocks when it began.
    pub pre_invalid_blocks: u64,
}
