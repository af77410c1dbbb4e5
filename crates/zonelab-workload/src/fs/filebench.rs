//! filebench personalities on a [`FileSystem`]: fileserver, varmail, webserver and videoserver
//! with filebench's flowop sequences, fileset trees and defaults (its `workloads/*.f` and
//! `flowop_library.c`), as the seed papers ran them (000 §4 and Table 3; 002 §6.2).
//!
//! The flowops and how they map onto the inode interface:
//! - `createfile`: picks a non-existing entry in rotation, `create` in its directory, opens it;
//! - `openfile`: picks an existing entry in rotation, `lookup` in its directory (directories
//!   are resolved once at setup, as the dentry cache would keep them);
//! - `closefile`: no file-system call (the interface has no open files); recorded with its
//!   zero latency, as filebench counts closes among its operations;
//! - `writewholefile`: writes the entry's planned size in `iosize` pieces;
//! - `appendfilerand`: appends a uniformly random size in [0, iosize - 1] (so a
//!   `meanappendsize` of 16k appends 8 KiB on average, as in filebench); zero appends nothing
//!   but counts;
//! - `readwholefile`: reads from offset 0 in `iosize` pieces until a read returns nothing;
//! - `deletefile`: picks an existing entry in rotation and `unlink`s it, unless some thread has
//!   it open (then nothing happens and nothing is counted, as in filebench; the
//!   `deletefile_skipped_open` counter says how often);
//! - `statfile`: picks an existing entry in rotation and `lookup`s it;
//! - `fsync`: `fsync` of the open file;
//! - `read` (videoserver): `readiosize` at the thread's position in its open file, back to 0
//!   at the end; `bwlimit` then holds the readers to `eventrate` MiB per simulated second
//!   together, in filebench's token scheme (1 MiB per event); `delay` sleeps.
//!
//! Where this differs from filebench, on purpose:
//! - Writes to one file are serialized by a per-file write lock held for a whole
//!   `writewholefile` or `appendfilerand` (as Linux's inode lock serializes write calls), and
//!   every write goes to the current end of file: `writewholefile` starts at offset 0 of a
//!   just-created file unless another thread appended to it first. So every byte is written
//!   once per file incarnation and every read can be verified exactly. Reads take no lock: a
//!   read racing an append may return the old or the new length, never other bytes.
//! - A flowop that finds every candidate file busy in another thread's call waits for one
//!   (filebench waits only when the whole fileset is busy and otherwise stops the run); it
//!   still stops the run with [`FsWorkloadError::NoFile`] when no file of the kind exists.
//! - Preallocation runs on `nthreads` simulated threads (filebench uses one, or up to 32 with
//!   `paralloc`); its time is not part of the results. A `sync` follows it.
//! - The videoserver event generator starts with the measured phase.
//!
//! In fingerprint payload mode file sizes, I/O sizes and append sizes are rounded up to whole
//! 4 KiB blocks (zero stays zero), since that mode moves whole blocks only.

use super::config::{
    RunConfig, SizeDist, parse_bytes, parse_duration, parse_f64, parse_share, parse_threads,
    parse_u64, round_up_blocks,
};
use super::content::Versions;
use super::engine::{Ctx, FsWorkloadError, FsWorkloadResult, Halt, Step, fs_err};
use super::fileset::{Fileset, Pick, Want};
use super::report::{FilesetReport, FsReport, MB};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use zonelab_device::PayloadMode;
use zonelab_lfs::{FileSystem, ROOT_INO};
use zonelab_sim::sync::Notify;
use zonelab_sim::{Nanos, Sim, SimRng};

/// The filebench personalities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Personality {
    Fileserver,
    Varmail,
    Webserver,
    Videoserver,
}

impl Personality {
    pub fn name(self) -> &'static str {
        match self {
            Personality::Fileserver => "fileserver",
            Personality::Varmail => "varmail",
            Personality::Webserver => "webserver",
            Personality::Videoserver => "videoserver",
        }
    }

    pub fn parse(s: &str) -> Option<Personality> {
        Some(match s {
            "fileserver" => Personality::Fileserver,
            "varmail" => Personality::Varmail,
            "webserver" => Personality::Webserver,
            "videoserver" => Personality::Videoserver,
            _ => return None,
        })
    }
}

/// Parameter sets of the seed papers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// filebench's own defaults (its `.f` files).
    Filebench,
    /// Seed 000 (ZNS+), §4 Table 3: fileserver 112,500 files of 128 KB with 50 threads,
    /// varmail 475,000 files of 28 KB with 16 threads (the 16 GB file system at 90% use).
    Seed000,
    /// Seed 002 (Z-LFS), §6.2: 16 threads; files of 16 MB (fileserver), 1 MB (varmail,
    /// webserver) and 1 GB (videoserver). The paper gives no file counts: filebench's
    /// defaults stay (set `nfiles` or `utilization`).
    Seed002,
}

impl Preset {
    pub fn parse(s: &str) -> Option<Preset> {
        Some(match s {
            "filebench" | "default" => Preset::Filebench,
            "seed000" | "000" | "znsplus" => Preset::Seed000,
            "seed002" | "002" | "zlfs" => Preset::Seed002,
            _ => return None,
        })
    }
}

/// A personality's variables (filebench's `set $name=value`). Variables another personality
/// uses are kept but ignored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FilebenchParams {
    pub personality: Personality,
    /// Entries of the main fileset (`$nfiles`); ignored when `utilization` is set.
    pub nfiles: u64,
    /// Size the fileset by capacity instead: draw file sizes until their sum reaches this
    /// share of the file system's statfs capacity (seed 000 §4: 90%). For videoserver it
    /// sets both video counts in filebench's 32:194 ratio.
    pub utilization: Option<f64>,
    /// Mean entries per directory (`$meandirwidth`).
    pub meandirwidth: u64,
    /// Shape of the gamma distributions of directory widths and depths (filebench's
    /// `dirgamma`, 1.5); 0 makes them fixed at their means.
    pub dirgamma: f64,
    /// File sizes (`$filesize` / `$meanfilesize`).
    pub filesize: SizeDist,
    /// Worker threads (`$nthreads`; videoserver readers, plus its one writer).
    pub nthreads: u32,
    /// Piece size of whole-file reads and writes (`$iosize`); 0: the whole file in one call.
    pub iosize: u64,
    /// Bound of random appends (`$meanappendsize`; appends average half of it).
    pub meanappendsize: u64,
    /// Share of the entries created before the run, in percent (`prealloc=`).
    pub prealloc: u32,
    /// videoserver: videos being served (`$numactivevids`).
    pub numactivevids: u64,
    /// videoserver: videos replaced by the writer (`$numpassivevids`).
    pub numpassivevids: u64,
    /// videoserver: read size of the readers (`$readiosize`).
    pub readiosize: u64,
    /// videoserver: write size of the writer (`$writeiosize`).
    pub writeiosize: u64,
    /// videoserver: the writer's pause between videos (`$repintval`).
    pub repintval: Nanos,
    /// videoserver: events per second (`eventgen rate`), each letting readers move 1 MiB;
    /// 0 lifts the limit.
    pub eventrate: u64,
}

/// A gamma shape (`dirgamma`, `filesizegamma`): positive, or 0 for fixed values at the mean.
fn parse_gamma(key: &str, value: &str) -> Result<f64, String> {
    match parse_f64(value)? {
        g if g >= 0.0 && g.is_finite() => Ok(g),
        _ => Err(format!(
            "{key} = {value}: give a positive gamma shape, or 0 for values fixed at the mean"
        )),
    }
}

impl FilebenchParams {
    /// filebench's defaults for `p` (its workloads/*.f).
    pub fn new(p: Personality) -> FilebenchParams {
        let base = FilebenchParams {
            personality: p,
            nfiles: 10_000,
            utilization: None,
            meandirwidth: 20,
            dirgamma: 1.5,
            filesize: SizeDist::gamma(128 << 10),
            nthreads: 50,
            iosize: 1 << 20,
            meanappendsize: 16 << 10,
            prealloc: 80,
            numactivevids: 32,
            numpassivevids: 194,
            readiosize: 256 << 10,
            writeiosize: 1 << 20,
            repintval: Nanos::from_secs(10),
            eventrate: 96,
        };
        match p {
            Personality::Fileserver => base,
            Personality::Varmail => FilebenchParams {
                nfiles: 1000,
                meandirwidth: 1_000_000,
                filesize: SizeDist::gamma(16 << 10),
                nthreads: 16,
                ..base
            },
            Personality::Webserver => FilebenchParams {
                nfiles: 1000,
                filesize: SizeDist::gamma(16 << 10),
                nthreads: 100,
                prealloc: 100,
                ..base
            },
            Personality::Videoserver => FilebenchParams {
                filesize: SizeDist::Fixed(10 << 30),
                nthreads: 48,
                prealloc: 100,
                ..base
            },
        }
    }

    /// `p` with the parameters of `preset`.
    pub fn preset(p: Personality, preset: Preset) -> Result<FilebenchParams, String> {
        let mut f = FilebenchParams::new(p);
        match (preset, p) {
            (Preset::Filebench, _) => {}
            (Preset::Seed000, Personality::Fileserver) => {
                f.nfiles = 112_500;
                f.filesize = SizeDist::gamma(128 << 10);
                f.nthreads = 50;
            }
            (Preset::Seed000, Personality::Varmail) => {
                f.nfiles = 475_000;
                f.filesize = SizeDist::gamma(28 << 10);
                f.nthreads = 16;
            }
            (Preset::Seed000, _) => {
                return Err(format!(
                    "seed 000 (ZNS+, Table 3) ran fileserver and varmail only, not {}",
                    p.name()
                ));
            }
            (Preset::Seed002, _) => {
                f.nthreads = 16;
                f.filesize = match p {
                    Personality::Fileserver => SizeDist::gamma(16 << 20),
                    Personality::Varmail | Personality::Webserver => SizeDist::gamma(1 << 20),
                    Personality::Videoserver => SizeDist::Fixed(1 << 30),
                };
            }
        }
        Ok(f)
    }

    /// Sets variable `key` from text (sizes take k/m/g suffixes, durations s/ms; `filesize`
    /// keeps the distribution's kind, `filesizegamma=0` makes sizes fixed).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "nfiles" => {
                self.nfiles = parse_u64(value)?;
                self.utilization = None;
            }
            "utilization" => self.utilization = Some(parse_share(value)?),
            "meandirwidth" | "dirwidth" => self.meandirwidth = parse_u64(value)?,
            "dirgamma" => self.dirgamma = parse_gamma(key, value)?,
            "filesize" | "meanfilesize" => {
                let n = parse_bytes(value)?;
                self.filesize = match self.filesize {
                    SizeDist::Fixed(_) => SizeDist::Fixed(n),
                    SizeDist::Gamma { shape, .. } => SizeDist::Gamma { mean: n, shape },
                };
            }
            "filesizegamma" | "sizegamma" => {
                let shape = parse_gamma(key, value)?;
                let mean = self.filesize.mean();
                self.filesize = if shape > 0.0 {
                    SizeDist::Gamma { mean, shape }
                } else {
                    SizeDist::Fixed(mean)
                };
            }
            "nthreads" | "threads" => self.nthreads = parse_threads(key, value)?,
            "iosize" => self.iosize = parse_bytes(value)?,
            "meanappendsize" => self.meanappendsize = parse_bytes(value)?,
            "prealloc" => {
                self.prealloc = u32::try_from(parse_u64(value)?)
                    .map_err(|_| "prealloc is a percentage (0..=100)".to_string())?
            }
            "numactivevids" => self.numactivevids = parse_u64(value)?,
            "numpassivevids" => self.numpassivevids = parse_u64(value)?,
            "readiosize" => self.readiosize = parse_bytes(value)?,
            "writeiosize" => self.writeiosize = parse_bytes(value)?,
            "repintval" => self.repintval = parse_duration(value)?,
            "eventrate" => self.eventrate = parse_u64(value)?,
            _ => {
                return Err(format!(
                    "unknown {} parameter '{key}' (nfiles, utilization, meandirwidth, \
                     dirgamma, filesize, filesizegamma, nthreads, iosize, meanappendsize, \
                     prealloc, numactivevids, numpassivevids, readiosize, writeiosize, \
                     repintval, eventrate)",
                    self.personality.name()
                ));
            }
        }
        Ok(())
    }

    fn validate(&self) -> FsWorkloadResult<()> {
        let bad = |m: &str| Err(FsWorkloadError::Config(m.to_string()));
        if self.nthreads == 0 {
            return bad("nthreads must be at least 1");
        }
        if self.meandirwidth < 2 {
            return bad("meandirwidth must be at least 2");
        }
        if self.prealloc > 100 {
            return bad("prealloc is a percentage (0..=100)");
        }
        if self.meanappendsize == 0 {
            return bad("meanappendsize must be positive (filebench: zero iosize)");
        }
        if let SizeDist::Gamma { shape, .. } = self.filesize
            && (shape.is_nan() || shape <= 0.0)
        {
            return bad("filesizegamma must be positive (0 means fixed sizes)");
        }
        if self.personality == Personality::Videoserver
            && self.utilization.is_none()
            && (self.numactivevids == 0 || self.numpassivevids == 0)
        {
            return bad("videoserver needs at least one active and one passive video");
        }
        Ok(())
    }
}

/// Draws file sizes: `count` of them, or as many as fit in `target` bytes.
fn plan_sizes(
    dist: SizeDist,
    count: u64,
    target: Option<u64>,
    fingerprint: bool,
    rng: &mut SimRng,
) -> Vec<u64> {
    let mut draw = || {
        let s = dist.sample(rng);
        if fingerprint { round_up_blocks(s) } else { s }
    };
    match target {
        None => (0..count).map(|_| draw()).collect(),
        Some(t) => {
            let mut v = Vec::new();
            let mut sum = 0u64;
            loop {
                let s = draw();
                if sum + s > t {
                    break;
                }
                sum += s;
                v.push(s);
            }
            v
        }
    }
}

// Fileset indices per personality.
const MAIN: usize = 0;
/// webserver's log file set; videoserver's passive videos.
const SECOND: usize = 1;

/// Clears an entry's busy flag when dropped.
struct BusyGuard<'a> {
    sets: &'a RefCell<Vec<Fileset>>,
    notify: &'a Notify,
    set: usize,
    e: u32,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.sets.borrow_mut()[self.set].files[self.e as usize].busy = false;
        self.notify.notify_all();
    }
}

/// Releases a file's write lock when dropped.
struct WriteGuard<'a> {
    sets: &'a RefCell<Vec<Fileset>>,
    notify: &'a Notify,
    set: usize,
    e: u32,
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        let mut sets = self.sets.borrow_mut();
        let f = &mut sets[self.set].files[self.e as usize];
        f.writing = false;
        f.reserved = f.committed;
        drop(sets);
        self.notify.notify_all();
    }
}

/// A worker thread's private state.
struct Thread {
    rng: SimRng,
    /// Open files by descriptor number: (fileset, entry).
    fds: [Option<(usize, u32)>; 3],
    /// videoserver reader: position in the open video; bytes read; bwlimit state.
    pos: u64,
    read_total: u64,
    tput_last: Option<u64>,
    bucket: i64,
}

/// Sizes after rounding for the payload mode.
#[derive(Clone, Copy)]
struct Io {
    iosize: u64,
    append_bound: u64,
    readiosize: u64,
    writeiosize: u64,
}

struct Fb<F> {
    ctx: Rc<Ctx<F>>,
    p: FilebenchParams,
    io: Io,
    sets: RefCell<Vec<Fileset>>,
    /// videoserver events handed out, and when the generator started.
    events: Cell<u64>,
    events_from: Cell<Nanos>,
    /// Preallocation jobs and the next one to take.
    prealloc: RefCell<Vec<(usize, u32)>>,
    prealloc_next: Cell<usize>,
}

/// Runs a filebench personality on `fs`: builds the filesets, runs the measured phase, and
/// reports.
pub async fn run<F: FileSystem + 'static>(
    sim: Sim,
    fs: Rc<F>,
    params: FilebenchParams,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    params.validate()?;
    if cfg.run.is_none() {
        return Err(FsWorkloadError::Config(
            "filebench personalities run for a time or a number of operations: set one in the \
             experiment's [run] table, duration = \"8s\" or ops = 100000"
                .into(),
        ));
    }
    let fp = cfg.payload == PayloadMode::Fingerprint;
    let round = |n: u64| {
        if fp { round_up_blocks(n.max(1)) } else { n }
    };
    let io = Io {
        iosize: round(params.iosize),
        append_bound: params.meanappendsize,
        readiosize: round(params.readiosize).max(1),
        writeiosize: round(params.writeiosize),
    };
    let st = fs.statfs();
    let capacity = st.blocks * st.block_size;
    let target = params.utilization.map(|u| (u * capacity as f64) as u64);
    let seed = cfg.seed;
    let mut size_rng = SimRng::stream(seed, 1);
    let mut tree_rng = SimRng::stream(seed, 2);
    let width = params.meandirwidth as f64;
    let g = params.dirgamma;
    if let Some(u) = params.utilization
        && params.filesize.mean() == 0
    {
        // Files of no bytes would never fill the share asked for.
        return Err(FsWorkloadError::Config(format!(
            "filesize = 0 with utilization = {u}: a fileset sized by capacity needs files of at \
             least one byte; give a filesize (e.g. 16k) or size the fileset with nfiles"
        )));
    }
    let sets = match params.personality {
        Personality::Fileserver | Personality::Varmail => {
            let sizes = plan_sizes(params.filesize, params.nfiles, target, fp, &mut size_rng);
            vec![Fileset::populate(
                "bigfileset",
                &sizes,
                width,
                g,
                &mut tree_rng,
            )]
        }
        Personality::Webserver => {
            let sizes = plan_sizes(params.filesize, params.nfiles, target, fp, &mut size_rng);
            let log = plan_sizes(params.filesize, 1, None, fp, &mut size_rng);
            vec![
                Fileset::populate("bigfileset", &sizes, width, g, &mut tree_rng),
                Fileset::populate("logfiles", &log, width, g, &mut tree_rng),
            ]
        }
        Personality::Videoserver => {
            let (active, passive) = match target {
                None => (params.numactivevids, params.numpassivevids),
                Some(t) => {
                    let size = params.filesize.mean().max(1);
                    let total = t / size;
                    let active = ((total as f64 * 32.0 / 226.0).round() as u64).max(1);
                    (active, total.saturating_sub(active))
                }
            };
            let a = plan_sizes(params.filesize, active, None, fp, &mut size_rng);
            let p = plan_sizes(params.filesize, passive, None, fp, &mut size_rng);
            vec![
                Fileset::populate("activevids", &a, 4.0, g, &mut tree_rng),
                Fileset::populate("passivevids", &p, 20.0, g, &mut tree_rng),
            ]
        }
    };
    if sets[MAIN].files.is_empty()
        || (params.personality == Personality::Videoserver && sets[SECOND].files.is_empty())
    {
        return Err(FsWorkloadError::Config(format!(
            "the fileset is empty: capacity {capacity} bytes{} holds no file of mean size {}: \
             give a smaller filesize or a higher utilization",
            params
                .utilization
                .map(|u| format!(" at utilization {u}"))
                .unwrap_or_default(),
            params.filesize.mean()
        )));
    }
    // What preallocation writes has to fit; the rest of the entries only exist while the run
    // has created them, as in filebench, which lets a fileset outgrow the file system (seed 000
    // Table 3's 112,500 files of 128 KiB are 99% of its 16 GB file system's user capacity)
    // and fails the run with ENOSPC if the files the run keeps do not fit.
    let preallocated: u64 = sets
        .iter()
        .enumerate()
        .map(|(s, set)| set.bytes() * u64::from(prealloc_percent(&params, s)) / 100)
        .sum();
    if preallocated > capacity {
        return Err(FsWorkloadError::Config(format!(
            "the fileset's preallocated files need about {preallocated} bytes ({} files in all), \
             more than the file system's {capacity}: lower nfiles, filesize or prealloc, or size \
             it with utilization (e.g. 0.9)",
            sets.iter().map(|s| s.files.len()).sum::<usize>()
        )));
    }
    let ctx = Ctx::new(sim, fs, cfg);
    let fb = Rc::new(Fb {
        ctx: ctx.clone(),
        p: params,
        io,
        sets: RefCell::new(sets),
        events: Cell::new(0),
        events_from: Cell::new(Nanos::ZERO),
        prealloc: RefCell::new(Vec::new()),
        prealloc_next: Cell::new(0),
    });
    let fileset = fb.setup(capacity).await?;
    ctx.start_measuring();
    fb.events_from.set(ctx.sim.now());
    let n = fb.p.nthreads;
    let fb2 = fb.clone();
    let workers = if fb.p.personality == Personality::Videoserver {
        n + 1
    } else {
        n
    };
    ctx.run_threads(workers, move |t| {
        let fb = fb2.clone();
        async move { fb.worker(t).await }
    })
    .await?;
    let secs = ctx.measured_ns() as f64 / 1e9;
    let rec = ctx.recorder();
    let (bytes_read, bytes_written) = rec.bytes();
    Ok(FsReport {
        workload: fb.p.personality.name().to_string(),
        params: serde_json::to_value(&fb.p).expect("parameters serialize"),
        seed,
        payload: ctx.cfg.payload,
        threads: workers,
        simulated_ns: ctx.measured_ns(),
        simulated_secs: secs,
        setup: ctx.setup.borrow().clone(),
        fileset,
        throughput: rec.throughput(secs),
        bytes_read,
        bytes_written,
        verify: ctx.verify_report(),
        counters: ctx.counters(),
    })
}

/// Share of fileset `set`'s entries, in percent, that exist before the run: `prealloc` of
/// fileserver's and varmail's; webserver's and videoserver's `.f` files fix theirs (all of
/// webserver's and of the active videos, half of the passive ones).
/// What to change when a flowop finds no file of the kind it needs in fileset `set`: the
/// parameter that sizes that fileset, and the threads that compete for it.
fn no_file_hint(personality: Personality, set: usize) -> &'static str {
    match (personality, set) {
        (Personality::Videoserver, MAIN) => "increase numactivevids or reduce threads",
        (Personality::Videoserver, _) => {
            "increase numpassivevids (about half of them exist at the start, at random, and the writer deletes one before it writes the next)"
        }
        _ => "increase nfiles or reduce threads",
    }
}

fn prealloc_percent(p: &FilebenchParams, set: usize) -> u32 {
    match (p.personality, set) {
        (Personality::Webserver, _) => 100,
        (Personality::Videoserver, MAIN) => 100,
        (Personality::Videoserver, _) => 50,
        _ => p.prealloc,
    }
}

impl<F: FileSystem + 'static> Fb<F> {
    /// Makes the directory trees, preallocates files, syncs.
    async fn setup(self: &Rc<Self>, capacity: u64) -> FsWorkloadResult<FilesetReport> {
        let ctx = &self.ctx;
        let nsets = self.sets.borrow().len();
        for s in 0..nsets {
            let ndirs = self.sets.borrow()[s].dirs.len();
            for d in 0..ndirs {
                let (parent_ino, name, path) = {
                    let sets = self.sets.borrow();
                    let set = &sets[s];
                    let node = &set.dirs[d];
                    match node.parent {
                        None => (ROOT_INO, set.name.clone(), set.dir_path(d as u32)),
                        Some(p) => (
                            set.dirs[p as usize].ino,
                            format!("{:08}", node.serial),
                            set.dir_path(d as u32),
                        ),
                    }
                };
                let attr = ctx
                    .fs
                    .mkdir(parent_ino, &name, 0o755, 0, 0)
                    .await
                    .map_err(|err| FsWorkloadError::Fs {
                        op: "mkdir",
                        file: path,
                        err,
                    })?;
                self.sets.borrow_mut()[s].dirs[d].ino = attr.ino;
                ctx.setup.borrow_mut().dirs_created += 1;
            }
        }
        // Which entries exist before the run, in filebench's random order.
        let mut jobs = Vec::new();
        for s in 0..nsets {
            let pct = prealloc_percent(&self.p, s);
            let mut rng = SimRng::stream(ctx.cfg.seed, 10 + s as u64);
            let order = self.sets.borrow()[s].prealloc_order(&mut rng);
            let skip = (100 - pct) as f64 / 100.0;
            for e in order {
                if pct == 100 || (pct > 0 && rng.unit() >= skip) {
                    jobs.push((s, e));
                }
            }
        }
        *self.prealloc.borrow_mut() = jobs;
        let me = self.clone();
        ctx.run_threads(self.p.nthreads, move |_| {
            let fb = me.clone();
            async move { fb.preallocate().await }
        })
        .await?;
        ctx.fs.sync().await.map_err(|err| FsWorkloadError::Fs {
            op: "sync",
            file: "/".into(),
            err,
        })?;
        let sets = self.sets.borrow();
        let mut r = FilesetReport {
            capacity_bytes: capacity,
            target_utilization: self.p.utilization,
            ..FilesetReport::default()
        };
        for set in sets.iter() {
            r.files += set.files.len() as u64;
            r.dirs += set.dirs.len() as u64;
            r.fileset_bytes += set.bytes();
            for f in set.files.iter().filter(|f| f.exists) {
                r.preallocated_files += 1;
                r.preallocated_bytes += f.committed;
            }
        }
        if capacity > 0 {
            r.utilization = r.fileset_bytes as f64 / capacity as f64;
            let st = ctx.fs.statfs();
            r.used_after_setup = 1.0 - st.blocks_free as f64 / st.blocks.max(1) as f64;
        }
        Ok(r)
    }

    /// A preallocation thread: creates and fills entries until none is left.
    async fn preallocate(self: Rc<Self>) -> Step {
        loop {
            let i = self.prealloc_next.get();
            let Some(&(s, e)) = self.prealloc.borrow().get(i) else {
                return Ok(());
            };
            self.prealloc_next.set(i + 1);
            if self.ctx.stopped() {
                return Err(Halt::Done);
            }
            let (dir_ino, name, path, size) = {
                let sets = self.sets.borrow();
                let set = &sets[s];
                let f = &set.files[e as usize];
                (
                    set.dirs[f.dir as usize].ino,
                    set.file_name(e),
                    set.file_path(e),
                    f.size,
                )
            };
            let attr = self
                .ctx
                .fs
                .create(dir_ino, &name, 0o644, 0, 0)
                .await
                .map_err(|err| fs_err("create", path.clone(), err))?;
            let uid = self.ctx.new_uid();
            {
                let mut sets = self.sets.borrow_mut();
                let f = &mut sets[s].files[e as usize];
                f.ino = attr.ino;
                f.uid = uid;
                f.committed = 0;
                f.reserved = 0;
                sets[s].set_exists(e, true);
            }
            self.ctx.setup.borrow_mut().files_created += 1;
            // filebench fills files in 1 MiB writes (FILE_ALLOC_BLOCK).
            let mut off = 0;
            while off < size {
                let n = (size - off).min(1 << 20);
                let data = self.ctx.content.data(uid, off, n, Versions::Once);
                let w = self
                    .ctx
                    .fs
                    .write(attr.ino, off, data)
                    .await
                    .map_err(|err| fs_err("write", path.clone(), err))?;
                if w != n {
                    return Err(short_write(&path, off, n, w));
                }
                off += n;
                let mut sets = self.sets.borrow_mut();
                let f = &mut sets[s].files[e as usize];
                f.committed = off;
                f.reserved = off;
                drop(sets);
                self.ctx.setup.borrow_mut().bytes_written += n;
            }
        }
    }

    fn path(&self, set: usize, e: u32) -> String {
        self.sets.borrow()[set].file_path(e)
    }

    /// Picks an entry (marking it busy), waiting while all candidates are busy.
    async fn pick(
        &self,
        set: usize,
        want: Want,
        flowop: &'static str,
    ) -> Step<(u32, BusyGuard<'_>)> {
        loop {
            let r = self.sets.borrow_mut()[set].pick(want);
            match r {
                Pick::Got(e) => {
                    return Ok((
                        e,
                        BusyGuard {
                            sets: &self.sets,
                            notify: &self.ctx.notify,
                            set,
                            e,
                        },
                    ));
                }
                Pick::Empty => {
                    return Err(Halt::Error(FsWorkloadError::NoFile {
                        flowop,
                        fileset: self.sets.borrow()[set].name.clone(),
                        kind: match want {
                            Want::Existing => "existing",
                            Want::Absent => "non-existing",
                        },
                        hint: no_file_hint(self.p.personality, set),
                    }));
                }
                Pick::AllBusy => {
                    if self.ctx.stopped() {
                        return Err(Halt::Done);
                    }
                    self.ctx.notify.notified().await;
                }
            }
        }
    }

    /// Takes the write lock of an entry.
    async fn lock_write(&self, set: usize, e: u32) -> Step<WriteGuard<'_>> {
        loop {
            {
                let mut sets = self.sets.borrow_mut();
                let f = &mut sets[set].files[e as usize];
                if !f.writing {
                    f.writing = true;
                    return Ok(WriteGuard {
                        sets: &self.sets,
                        notify: &self.ctx.notify,
                        set,
                        e,
                    });
                }
            }
            if self.ctx.stopped() {
                return Err(Halt::Done);
            }
            self.ctx.notify.notified().await;
        }
    }

    fn fd(&self, th: &Thread, fd: usize) -> (usize, u32) {
        th.fds[fd].expect("flowop on an open descriptor")
    }

    /// `lookup` of an entry, checking it names the inode the workload created, with a size
    /// between what was acknowledged and what is being written.
    async fn lookup_checked(&self, set: usize, e: u32, op: &'static str) -> Step {
        let (dir_ino, name, ino, lo) = {
            let sets = self.sets.borrow();
            let s = &sets[set];
            let f = &s.files[e as usize];
            (
                s.dirs[f.dir as usize].ino,
                s.file_name(e),
                f.ino,
                f.committed,
            )
        };
        let attr = self
            .ctx
            .fs
            .lookup(dir_ino, &name)
            .await
            .map_err(|err| fs_err(op, self.path(set, e), err))?;
        let hi = self.sets.borrow()[set].files[e as usize].reserved;
        if attr.ino != ino {
            return Err(Halt::Error(FsWorkloadError::Metadata {
                file: self.path(set, e),
                detail: format!("lookup gave inode {}, created as {ino}", attr.ino),
            }));
        }
        if attr.size < lo || attr.size > hi.max(lo) {
            return Err(Halt::Error(FsWorkloadError::Metadata {
                file: self.path(set, e),
                detail: format!(
                    "size {} but {lo} bytes were written{}",
                    attr.size,
                    if hi > lo {
                        format!(" ({hi} with the write in flight)")
                    } else {
                        String::new()
                    }
                ),
            }));
        }
        Ok(())
    }

    async fn createfile(&self, th: &mut Thread, set: usize, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (e, _busy) = self.pick(set, Want::Absent, "createfile").await?;
        let (dir_ino, name) = {
            let sets = self.sets.borrow();
            let s = &sets[set];
            (s.dirs[s.files[e as usize].dir as usize].ino, s.file_name(e))
        };
        let attr = self
            .ctx
            .fs
            .create(dir_ino, &name, 0o644, 0, 0)
            .await
            .map_err(|err| fs_err("createfile", self.path(set, e), err))?;
        let uid = self.ctx.new_uid();
        {
            let mut sets = self.sets.borrow_mut();
            let f = &mut sets[set].files[e as usize];
            f.ino = attr.ino;
            f.uid = uid;
            f.committed = 0;
            f.reserved = 0;
            f.open += 1;
            sets[set].set_exists(e, true);
        }
        th.fds[fd] = Some((set, e));
        self.ctx.end("createfile", start, 0, 0);
        Ok(())
    }

    async fn openfile(&self, th: &mut Thread, set: usize, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (e, _busy) = self.pick(set, Want::Existing, "openfile").await?;
        self.lookup_checked(set, e, "openfile").await?;
        self.sets.borrow_mut()[set].files[e as usize].open += 1;
        th.fds[fd] = Some((set, e));
        self.ctx.end("openfile", start, 0, 0);
        Ok(())
    }

    async fn ensure_open(&self, th: &mut Thread, set: usize, fd: usize) -> Step {
        if th.fds[fd].is_none() {
            self.openfile(th, set, fd).await?;
        }
        Ok(())
    }

    async fn closefile(&self, th: &mut Thread, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        self.sets.borrow_mut()[set].files[e as usize].open -= 1;
        th.fds[fd] = None;
        self.ctx.end("closefile", start, 0, 0);
        Ok(())
    }

    async fn deletefile(&self, set: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (e, _busy) = self.pick(set, Want::Existing, "deletefile").await?;
        let (dir_ino, name, open) = {
            let sets = self.sets.borrow();
            let s = &sets[set];
            let f = &s.files[e as usize];
            (s.dirs[f.dir as usize].ino, s.file_name(e), f.open)
        };
        if open > 0 {
            self.ctx.unbegin(start);
            self.ctx.bump("deletefile_skipped_open");
            return Ok(());
        }
        self.ctx
            .fs
            .unlink(dir_ino, &name)
            .await
            .map_err(|err| fs_err("deletefile", self.path(set, e), err))?;
        {
            let mut sets = self.sets.borrow_mut();
            let f = &mut sets[set].files[e as usize];
            f.ino = 0;
            f.committed = 0;
            f.reserved = 0;
            sets[set].set_exists(e, false);
        }
        self.ctx.end("deletefile", start, 0, 0);
        Ok(())
    }

    async fn statfile(&self, set: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (e, _busy) = self.pick(set, Want::Existing, "statfile").await?;
        self.lookup_checked(set, e, "statfile").await?;
        self.ctx.end("statfile", start, 0, 0);
        Ok(())
    }

    async fn fsync(&self, th: &mut Thread, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        let ino = self.sets.borrow()[set].files[e as usize].ino;
        self.ctx
            .fs
            .fsync(ino, false)
            .await
            .map_err(|err| fs_err("fsync", self.path(set, e), err))?;
        self.ctx.end("fsync", start, 0, 0);
        Ok(())
    }

    /// Appends `len` bytes (at most `piece` per call) at the end of an open file under its
    /// write lock.
    async fn append(&self, set: usize, e: u32, len: u64, piece: u64, op: &'static str) -> Step {
        let _lock = self.lock_write(set, e).await?;
        let (ino, uid, start_off) = {
            let f = &self.sets.borrow()[set].files[e as usize];
            (f.ino, f.uid, f.committed)
        };
        let piece = if piece == 0 { len.max(1) } else { piece };
        let mut off = start_off;
        let end = start_off + len;
        while off < end {
            let n = (end - off).min(piece);
            self.sets.borrow_mut()[set].files[e as usize].reserved = off + n;
            let data = self.ctx.content.data(uid, off, n, Versions::Once);
            let w = self
                .ctx
                .fs
                .write(ino, off, data)
                .await
                .map_err(|err| fs_err(op, self.path(set, e), err))?;
            if w != n {
                return Err(short_write(&self.path(set, e), off, n, w));
            }
            off += n;
            self.sets.borrow_mut()[set].files[e as usize].committed = off;
        }
        Ok(())
    }

    async fn writewholefile(&self, th: &mut Thread, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        let size = self.sets.borrow()[set].files[e as usize].size;
        let piece = if set == SECOND && self.p.personality == Personality::Videoserver {
            self.io.writeiosize
        } else {
            self.io.iosize
        };
        self.append(set, e, size, piece, "writewholefile").await?;
        self.ctx.end("writewholefile", start, 0, size);
        Ok(())
    }

    async fn appendfilerand(&self, th: &mut Thread, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        // filebench: uniform in [0, iosize - 1].
        let bound = self.io.append_bound - 1;
        let r = th.rng.next_u64() as f64 / u64::MAX as f64;
        let mut len = (r * bound as f64) as u64;
        if self.ctx.content.mode() == PayloadMode::Fingerprint {
            len = round_up_blocks(len);
        }
        if len > 0 {
            self.append(set, e, len, 0, "appendfilerand").await?;
        }
        self.ctx.end("appendfilerand", start, 0, len);
        Ok(())
    }

    /// One read of `len` at `off` of an open write-once file, checked; returns the bytes read.
    async fn read_checked(
        &self,
        set: usize,
        e: u32,
        off: u64,
        len: u64,
        op: &'static str,
    ) -> Step<u64> {
        let (ino, uid, lo) = {
            let f = &self.sets.borrow()[set].files[e as usize];
            (f.ino, f.uid, f.committed)
        };
        let got = self
            .ctx
            .fs
            .read(ino, off, len)
            .await
            .map_err(|err| fs_err(op, self.path(set, e), err))?;
        let hi = {
            let f = &self.sets.borrow()[set].files[e as usize];
            f.reserved.max(f.committed).max(lo)
        };
        if hi > lo {
            self.ctx.bump("reads_racing_a_write");
        }
        let n = self.ctx.content.len_of(&got);
        let min = (off + len).min(lo).saturating_sub(off);
        let max = (off + len).min(hi).saturating_sub(off);
        if n < min || n > max {
            return Err(Halt::Error(FsWorkloadError::Metadata {
                file: self.path(set, e),
                detail: format!(
                    "read of {len} bytes at offset {off} returned {n} bytes; the file holds {lo} \
                     bytes{}",
                    if hi > lo {
                        format!(" ({hi} with the write in flight)")
                    } else {
                        String::new()
                    }
                ),
            }));
        }
        self.ctx
            .check_read(&|| self.path(set, e), uid, off, &got, Versions::Once)?;
        Ok(n)
    }

    async fn readwholefile(&self, th: &mut Thread, fd: usize) -> Step {
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        let piece = if self.io.iosize == 0 {
            let s = self.sets.borrow()[set].files[e as usize].size;
            if self.ctx.content.mode() == PayloadMode::Fingerprint {
                round_up_blocks(s.max(1))
            } else {
                s.max(1)
            }
        } else {
            self.io.iosize
        };
        let mut off = 0;
        loop {
            let n = self
                .read_checked(set, e, off, piece, "readwholefile")
                .await?;
            if n == 0 {
                break;
            }
            off += n;
        }
        self.ctx.end("readwholefile", start, off, 0);
        Ok(())
    }

    /// videoserver's `read` flowop: the next piece of the thread's video, then `bwlimit`.
    async fn vidread(&self, th: &mut Thread, fd: usize) -> Step {
        self.ensure_open(th, MAIN, fd).await?;
        let start = self.ctx.begin().await?;
        let (set, e) = self.fd(th, fd);
        let n = self
            .read_checked(set, e, th.pos, self.io.readiosize, "read")
            .await?;
        th.pos = if n == 0 { 0 } else { th.pos + n };
        th.read_total += n;
        self.ctx.end("read", start, n, 0);
        self.bwlimit(th).await;
        Ok(())
    }

    /// filebench's `bwlimit`: a byte bucket refilled with 1 MiB per event; events come at
    /// `eventrate` per second and are handed out first come, first served.
    async fn bwlimit(&self, th: &mut Thread) {
        if self.p.eventrate == 0 {
            return;
        }
        let bytes = th.read_total;
        let Some(last) = th.tput_last else {
            th.tput_last = Some(bytes);
            return;
        };
        th.bucket -= (bytes - last) as i64;
        th.tput_last = Some(bytes);
        if th.bucket >= 0 {
            return;
        }
        let mb = MB as i64;
        let events = (-th.bucket) / mb + 1;
        let target = self.events.get() + events as u64;
        self.events.set(target);
        let at = self.events_from.get()
            + Nanos(((target as u128 * 1_000_000_000).div_ceil(self.p.eventrate as u128)) as u64);
        self.ctx.sleep_until(at).await;
        th.bucket += events * mb;
    }

    async fn worker(self: Rc<Self>, t: u32) -> Step {
        let mut th = Thread {
            rng: SimRng::stream(self.ctx.cfg.seed, 1000 + t as u64),
            fds: [None; 3],
            pos: 0,
            read_total: 0,
            tput_last: None,
            bucket: 0,
        };
        let r = match self.p.personality {
            Personality::Fileserver => self.fileserver(&mut th).await,
            Personality::Varmail => self.varmail(&mut th).await,
            Personality::Webserver => self.webserver(&mut th).await,
            Personality::Videoserver if t < self.p.nthreads => self.vidreader(&mut th).await,
            Personality::Videoserver => self.vidwriter(&mut th).await,
        };
        // Descriptors left open when the run ends.
        for (set, e) in th.fds.iter().flatten() {
            self.sets.borrow_mut()[*set].files[*e as usize].open -= 1;
        }
        r
    }

    /// fileserver.f: create, write whole file, close; open, append, close; open, read whole
    /// file, close; delete; stat.
    async fn fileserver(&self, th: &mut Thread) -> Step {
        loop {
            self.createfile(th, MAIN, 1).await?;
            self.writewholefile(th, 1).await?;
            self.closefile(th, 1).await?;
            self.openfile(th, MAIN, 1).await?;
            self.appendfilerand(th, 1).await?;
            self.closefile(th, 1).await?;
            self.openfile(th, MAIN, 1).await?;
            self.readwholefile(th, 1).await?;
            self.closefile(th, 1).await?;
            self.deletefile(MAIN).await?;
            self.statfile(MAIN).await?;
        }
    }

    /// varmail.f: delete; create, append, fsync, close; open, read whole file, append, fsync,
    /// close; open, read whole file, close.
    async fn varmail(&self, th: &mut Thread) -> Step {
        loop {
            self.deletefile(MAIN).await?;
            self.createfile(th, MAIN, 1).await?;
            self.appendfilerand(th, 1).await?;
            self.fsync(th, 1).await?;
            self.closefile(th, 1).await?;
            self.openfile(th, MAIN, 1).await?;
            self.readwholefile(th, 1).await?;
            self.appendfilerand(th, 1).await?;
            self.fsync(th, 1).await?;
            self.closefile(th, 1).await?;
            self.openfile(th, MAIN, 1).await?;
            self.readwholefile(th, 1).await?;
            self.closefile(th, 1).await?;
        }
    }

    /// webserver.f: ten times open, read whole file, close; then an append to the shared log
    /// file (kept open on descriptor 2).
    async fn webserver(&self, th: &mut Thread) -> Step {
        loop {
            for _ in 0..10 {
                self.openfile(th, MAIN, 1).await?;
                self.readwholefile(th, 1).await?;
                self.closefile(th, 1).await?;
            }
            self.ensure_open(th, SECOND, 2).await?;
            self.appendfilerand(th, 2).await?;
        }
    }

    /// videoserver.f readers: sequential reads of an active video, rate limited.
    async fn vidreader(&self, th: &mut Thread) -> Step {
        loop {
            self.vidread(th, 1).await?;
        }
    }

    /// videoserver.f writer: delete a passive video, write a new one, wait `repintval`.
    async fn vidwriter(&self, th: &mut Thread) -> Step {
        loop {
            self.deletefile(SECOND).await?;
            self.createfile(th, SECOND, 1).await?;
            self.writewholefile(th, 1).await?;
            self.closefile(th, 1).await?;
            if self.ctx.stopped() {
                return Err(Halt::Done);
            }
            let at = self.ctx.sim.now() + self.p.repintval;
            self.ctx.sleep_until(at).await;
        }
    }
}

fn short_write(path: &str, off: u64, n: u64, w: u64) -> Halt {
    Halt::Error(FsWorkloadError::Metadata {
        file: path.to_string(),
        detail: format!("write of {n} bytes at offset {off} wrote {w}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonelab_lfs::{MemFs, MemFsConfig};

    /// A reader racing appends to the same file sees the old or the new length, and the
    /// right bytes either way.
    #[test]
    fn reads_racing_appends_are_verified() {
        for mode in [PayloadMode::Full, PayloadMode::Fingerprint] {
            let sim = Sim::new();
            let mut mcfg = MemFsConfig::new(mode, 16 << 20);
            mcfg.op_latency = Nanos(1_000);
            let fs = Rc::new(MemFs::with_sim(mcfg, sim.clone()));
            let cfg = RunConfig {
                payload: mode,
                ..RunConfig::default()
            };
            let ctx = Ctx::new(sim.clone(), fs, cfg);
            let set = Fileset::populate("s", &[0], 20.0, 0.0, &mut SimRng::new(1));
            let fb = Rc::new(Fb {
                ctx: ctx.clone(),
                p: FilebenchParams::new(Personality::Fileserver),
                io: Io {
                    iosize: 8192,
                    append_bound: 1,
                    readiosize: 8192,
                    writeiosize: 8192,
                },
                sets: RefCell::new(vec![set]),
                events: Cell::new(0),
                events_from: Cell::new(Nanos::ZERO),
                prealloc: RefCell::new(Vec::new()),
                prealloc_next: Cell::new(0),
            });
            let (f2, s2) = (fb.clone(), sim.clone());
            let out = sim.block_on(async move {
                let fb = f2;
                let d = fb.ctx.fs.mkdir(ROOT_INO, "s", 0o755, 0, 0).await.unwrap();
                let dd = fb
                    .ctx
                    .fs
                    .mkdir(d.ino, "00000001", 0o755, 0, 0)
                    .await
                    .unwrap();
                let a = fb
                    .ctx
                    .fs
                    .create(dd.ino, "00000001", 0o644, 0, 0)
                    .await
                    .unwrap();
                {
                    let mut sets = fb.sets.borrow_mut();
                    let f = &mut sets[0].files[0];
                    f.ino = a.ino;
                    f.uid = fb.ctx.new_uid();
                    sets[0].set_exists(0, true);
                }
                let piece = if mode == PayloadMode::Full {
                    3_000
                } else {
                    4096
                };
                let fa = fb.clone();
                let writer = s2.spawn(async move {
                    for _ in 0..40 {
                        fa.append(0, 0, 5 * piece, piece, "append").await.unwrap();
                    }
                });
                let mut reads = 0;
                while fb.sets.borrow()[0].files[0].committed < 200 * piece {
                    let mut off = 0;
                    loop {
                        let n = fb.read_checked(0, 0, off, 8192, "read").await.unwrap();
                        reads += 1;
                        if n == 0 {
                            break;
                        }
                        off += n;
                    }
                }
                writer.await;
                reads
            });
            let reads = out.unwrap();
            let raced = ctx
                .counters()
                .get("reads_racing_a_write")
                .copied()
                .unwrap_or(0);
            assert!(
                reads > 100 && raced > 10,
                "{mode:?}: {reads} reads, {raced} raced"
            );
            assert_eq!(ctx.verify_report().mismatches, 0);
        }
    }
}
