//! File-system workloads, generic over any [`FileSystem`]: filebench personalities
//! ([`filebench`]: fileserver, varmail, webserver, videoserver), fio-style jobs on files
//! ([`fio_files`]) and mdtest-style file creation ([`mdtest`]), the workloads of the seed
//! papers (000 §4 Table 3, 002 §6.1-6.2).
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
pub(crate) mod fileset;
pub mod filebench;
pub mod report;

pub use config::{RunConfig, RunLength, SizeDist};
pub use engine::{FsWorkloadError, FsWorkloadResult};
pub use filebench::{FilebenchParams, Personality, Preset};
pub use report::{FsReport, LatencyReport, OpReport, Throughput, VerifyReport};
