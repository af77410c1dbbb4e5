//! Results of a file-system workload, serializable to JSON in the shape of DESIGN.md's result
//! schema (`throughput`, `verify`), plus what the fileset and its setup were.
//!
//! Everything is kept in ordered maps and computed from virtual time only, so the same seed
//! gives byte-identical JSON.

use crate::fio::stats::LatStat;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zonelab_device::PayloadMode;

/// Bytes per MB in `mb_per_sec` figures: 2^20, as filebench's `mb/s`.
pub const MB: f64 = 1_048_576.0;

/// Latency percentiles of one operation type, in simulated nanoseconds (HdrHistogram with 3
/// significant digits, clamped to the exact minimum and maximum; the mean is exact).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    pub mean: f64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl LatencyReport {
    pub fn of(l: &LatStat) -> LatencyReport {
        LatencyReport {
            mean: l.mean(),
            p50: l.percentile(50.0),
            p95: l.percentile(95.0),
            p99: l.percentile(99.0),
            p999: l.percentile(99.9),
            max: l.max(),
        }
    }
}

/// One operation type (a filebench flowop type, `read`/`write`/`fsync` of a fio job, a mdtest
/// phase).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub ops_per_sec: f64,
    /// (read + written) / 2^20 per simulated second.
    pub mb_per_sec: f64,
    pub lat_ns: LatencyReport,
}

/// Totals and the per-operation breakdown of the measured phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Throughput {
    pub ops: u64,
    pub ops_per_sec: f64,
    pub mb_per_sec: f64,
    pub by_op: BTreeMap<String, OpReport>,
}

/// Reads checked against the data written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// Read calls whose data was compared (setup and measured phase).
    pub reads_checked: u64,
    /// Bytes compared.
    pub bytes_checked: u64,
    pub mismatches: u64,
}

/// The fileset as built before the measured phase.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesetReport {
    /// Files the workload may use (filebench's fileset entries, existing or not).
    pub files: u64,
    pub dirs: u64,
    /// Sum of the planned file sizes (filebench's fileset size).
    pub fileset_bytes: u64,
    /// Files created and filled before the measured phase.
    pub preallocated_files: u64,
    pub preallocated_bytes: u64,
    /// statfs capacity (blocks x block size).
    pub capacity_bytes: u64,
    /// Asked share of capacity, if the fileset was sized by utilization.
    pub target_utilization: Option<f64>,
    /// fileset_bytes / capacity_bytes.
    pub utilization: f64,
    /// Share of capacity statfs reports used after setup.
    pub used_after_setup: f64,
}

/// The setup phase (directory tree and preallocation), not part of the figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupReport {
    pub dirs_created: u64,
    pub files_created: u64,
    pub bytes_written: u64,
    pub simulated_ns: u64,
}

/// Result of one file-system workload run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FsReport {
    /// `fileserver`, `varmail`, `webserver`, `videoserver`, `fio` or `mdtest`.
    pub workload: String,
    /// The resolved workload parameters.
    pub params: serde_json::Value,
    pub seed: u64,
    pub payload: PayloadMode,
    /// Simulated threads of the measured phase.
    pub threads: u32,
    /// Length of the measured phase in simulated time (from the end of warm-up to the last
    /// operation's completion).
    pub simulated_ns: u64,
    pub simulated_secs: f64,
    pub setup: SetupReport,
    pub fileset: FilesetReport,
    pub throughput: Throughput,
    /// Bytes the workload read and wrote in the measured phase.
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub verify: VerifyReport,
    /// Workload-specific event counts (e.g. deletes skipped because the file was open).
    pub counters: BTreeMap<String, u64>,
}

impl FsReport {
    /// Pretty JSON (deterministic: ordered maps, no wall clock).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("reports serialize")
    }
}

/// Statistics of one operation type while a run goes on.
#[derive(Clone, Debug, Default)]
pub(crate) struct OpStat {
    pub ops: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub lat: LatStat,
}

/// Collects per-operation statistics.
#[derive(Clone, Debug, Default)]
pub(crate) struct Recorder {
    pub by_op: BTreeMap<&'static str, OpStat>,
}

impl Recorder {
    pub fn record(&mut self, op: &'static str, lat_ns: u64, read: u64, written: u64) {
        let s = self.by_op.entry(op).or_default();
        s.ops += 1;
        s.bytes_read += read;
        s.bytes_written += written;
        s.lat.record(lat_ns);
    }

    pub fn throughput(&self, secs: f64) -> Throughput {
        let rate = |x: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let mut t = Throughput::default();
        let mut bytes = 0u64;
        for (name, s) in &self.by_op {
            let b = s.bytes_read + s.bytes_written;
            t.ops += s.ops;
            bytes += b;
            t.by_op.insert(
                (*name).to_string(),
                OpReport {
                    ops: s.ops,
                    bytes_read: s.bytes_read,
                    bytes_written: s.bytes_written,
                    ops_per_sec: rate(s.ops as f64),
                    mb_per_sec: rate(b as f64 / MB),
                    lat_ns: LatencyReport::of(&s.lat),
                },
            );
        }
        t.ops_per_sec = rate(t.ops as f64);
        t.mb_per_sec = rate(bytes as f64 / MB);
        t
    }

    pub fn bytes(&self) -> (u64, u64) {
        self.by_op
            .values()
            .fold((0, 0), |(r, w), s| (r + s.bytes_read, w + s.bytes_written))
    }
}
