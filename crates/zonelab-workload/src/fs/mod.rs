//! File-system workloads, generic over any [`FileSystem`]: filebench personalities
//! ([`filebench`]: fileserver, varmail, webserver, videoserver), fio-style jobs on files
//! ([`fio_files`]), mdtest-style file creation ([`mdtest`]) and OLTP benchmarks with the I/O
//! pattern of MySQL/InnoDB ([`oltp`]: tpcc, YCSB a and f), the workloads of the seed papers
//! (000 §4 Table 3, 002 §6.1-6.2).
//!
//! A run builds its fileset (directory tree and preallocated files, sized by a file count or
//! by a share of the file system's capacity), then runs simulated threads (tasks on the
//! `zonelab-sim` executor) for a simulated time or a number of operations, and reports
//! operations, bandwidth and latency percentiles per operation type ([`FsReport`]). Every read
//! is checked against what was written ([`content`]); a difference stops the run with
//! [`FsWorkloadError::Mismatch`], naming the file, the offset and both data. The same seed
//! gives the same schedule and byte-identical JSON.
//!
//! ```ignore
//! let sim = Sim::new();
//! let fs = Rc::new(MemFs::with_sim(MemFsConfig::new(PayloadMode::Full, 64 << 20), sim.clone()));
//! let mut w = FsWorkload::new("fileserver")?;
//! w.set("nfiles", "200")?;
//! let cfg = RunConfig { run: Some(RunLength::Ops(5_000)), ..RunConfig::default() };
//! let report = run_blocking(&sim, fs, w, cfg)?;
//! ```

pub mod config;
pub mod content;
pub mod engine;
pub mod filebench;
pub(crate) mod fileset;
pub mod fio_files;
pub mod mdtest;
pub mod oltp;
pub mod report;

#[cfg(test)]
mod tests;

pub use config::{MeasureHook, RunConfig, RunLength, SizeDist, WarmGate};
pub use engine::{FsWorkloadError, FsWorkloadResult};
pub use filebench::{FilebenchParams, Personality, Preset};
pub use fio_files::{FileRw, FioFileParams};
pub use mdtest::MdtestParams;
pub use oltp::{OltpBench, OltpParams};
pub use report::{FsReport, LatencyReport, OpReport, Throughput, VerifyReport};

use serde::{Deserialize, Serialize};
use std::rc::Rc;
use zonelab_lfs::FileSystem;
use zonelab_sim::Sim;

/// A file-system workload and its parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FsWorkload {
    Filebench(FilebenchParams),
    Fio(FioFileParams),
    Mdtest(MdtestParams),
    Oltp(OltpParams),
}

impl FsWorkload {
    /// The `[workload] kind` names this module runs.
    pub const KINDS: [&'static str; 9] = [
        "fileserver",
        "varmail",
        "webserver",
        "videoserver",
        "fio",
        "mdtest",
        "tpcc",
        "ycsb-a",
        "ycsb-f",
    ];

    /// `kind` with its defaults (filebench's for the personalities, sequential 4 KiB reads of
    /// one 64 MiB file for fio, 16 threads x 1000 files of 4 KiB for mdtest, seed 000's
    /// configuration with a 12 GiB database for the OLTP kinds).
    pub fn new(kind: &str) -> Result<FsWorkload, String> {
        FsWorkload::preset(kind, Preset::Filebench)
    }

    /// `kind` with the parameters of a seed paper (see [`Preset`]).
    pub fn preset(kind: &str, preset: Preset) -> Result<FsWorkload, String> {
        if let Some(p) = Personality::parse(kind) {
            return FilebenchParams::preset(p, preset).map(FsWorkload::Filebench);
        }
        if let Some(b) = OltpBench::parse(kind) {
            return OltpParams::preset(b, preset).map(FsWorkload::Oltp);
        }
        match (kind, preset) {
            ("fio", Preset::Filebench) => Ok(FsWorkload::Fio(FioFileParams::new(FileRw::Read))),
            ("fio", Preset::Seed002) => Ok(FsWorkload::Fio(FioFileParams::seed002(FileRw::Read))),
            ("mdtest", Preset::Filebench) => Ok(FsWorkload::Mdtest(MdtestParams::default())),
            ("mdtest", Preset::Seed002) => Ok(FsWorkload::Mdtest(MdtestParams::seed002(4096))),
            ("fio" | "mdtest", Preset::Seed000) => Err(format!(
                "seed 000 (ZNS+) ran no {kind} on its file system; use preset seed002"
            )),
            _ => Err(format!(
                "unknown workload kind '{kind}': use one of {}",
                FsWorkload::KINDS.join(", ")
            )),
        }
    }

    /// Sets one parameter from text (as `[workload] params` or `--set workload.params.K=V`).
    /// `threads` works for every kind.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match self {
            FsWorkload::Filebench(p) => p.set(key, value),
            FsWorkload::Fio(p) => p.set(key, value),
            FsWorkload::Mdtest(p) => p.set(key, value),
            FsWorkload::Oltp(p) => p.set(key, value),
        }
    }

    /// The kind's name.
    pub fn name(&self) -> &'static str {
        match self {
            FsWorkload::Filebench(p) => p.personality.name(),
            FsWorkload::Fio(_) => "fio",
            FsWorkload::Mdtest(_) => "mdtest",
            FsWorkload::Oltp(p) => p.bench.name(),
        }
    }
}

/// Runs `workload` on `fs` inside the simulation `sim` (call from a task of `sim`, e.g. the
/// future given to [`Sim::block_on`]).
pub async fn run<F: FileSystem + 'static>(
    sim: Sim,
    fs: Rc<F>,
    workload: FsWorkload,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    match workload {
        FsWorkload::Filebench(p) => filebench::run(sim, fs, p, cfg).await,
        FsWorkload::Fio(p) => fio_files::run(sim, fs, p, cfg).await,
        FsWorkload::Mdtest(p) => mdtest::run(sim, fs, p, cfg).await,
        FsWorkload::Oltp(p) => oltp::run(sim, fs, p, cfg).await,
    }
}

/// Runs `workload` to completion on `sim` ([`Sim::block_on`] around [`run`]).
pub fn run_blocking<F: FileSystem + 'static>(
    sim: &Sim,
    fs: Rc<F>,
    workload: FsWorkload,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    let s = sim.clone();
    sim.block_on(run(s, fs, workload, cfg))
        .map_err(|d| FsWorkloadError::Stuck(d.to_string()))?
}
