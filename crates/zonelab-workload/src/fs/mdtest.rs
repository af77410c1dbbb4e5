//! mdtest-style file creation (seed 002 §6.2: "1 million files with various file sizes of
//! 4/32/128KB and fsync after each file creation"): each thread works in a directory of its
//! own (mdtest `-u`) and, per file, creates it, writes `file_size` bytes in one call (`-w`)
//! and fsyncs it (`-y`). Optional later phases, each after all threads finished the previous
//! one as mdtest's barriers order them: stat every file (`file_stat`), read every file back
//! and verify it (`file_read`), remove every file (`file_remove`).
//!
//! Operations are whole per-file steps (`file_create` = create + write + fsync), the unit of
//! mdtest's rates. In fingerprint payload mode `file_size` is rounded up to whole 4 KiB
//! blocks.

use super::config::{
    BLOCK, RunConfig, parse_bool, parse_bytes, parse_share, parse_threads, parse_u64,
    round_up_blocks,
};
use super::content::Versions;
use super::engine::{Ctx, FsWorkloadError, FsWorkloadResult, Halt, Step, fs_err};
use super::report::{FilesetReport, FsReport};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use zonelab_device::PayloadMode;
use zonelab_lfs::{FileSystem, Ino, ROOT_INO};
use zonelab_sim::Sim;

/// An mdtest run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MdtestParams {
    /// Simulated threads (mdtest's MPI tasks).
    pub threads: u32,
    /// Files each thread creates (`-n`).
    pub files_per_thread: u64,
    /// Size the run by capacity instead: all files together take this share of statfs
    /// capacity.
    pub utilization: Option<f64>,
    /// Bytes written to each file (`-w`).
    pub file_size: u64,
    /// fsync after each file's write (`-y`).
    pub fsync: bool,
    /// Phases after creation.
    pub stat: bool,
    pub read: bool,
    pub remove: bool,
}

impl Default for MdtestParams {
    fn default() -> Self {
        MdtestParams {
            threads: 16,
            files_per_thread: 1000,
            utilization: None,
            file_size: 4096,
            fsync: true,
            stat: false,
            read: false,
            remove: false,
        }
    }
}

impl MdtestParams {
    /// Seed 002 §6.2: one million files (16 threads x 62,500) of `file_size` (4, 32 or
    /// 128 KiB in the paper), fsync after each.
    pub fn seed002(file_size: u64) -> MdtestParams {
        MdtestParams {
            threads: 16,
            files_per_thread: 62_500,
            file_size,
            ..MdtestParams::default()
        }
    }

    /// Sets `key`: threads, files_per_thread (or files: the total), utilization, file_size,
    /// fsync, stat, read, remove.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "threads" | "nthreads" => self.threads = parse_threads(key, value)?,
            "files_per_thread" | "n" => {
                self.files_per_thread = parse_u64(value)?;
                self.utilization = None;
            }
            "files" | "nfiles" => {
                let total = parse_u64(value)?;
                self.files_per_thread = total.div_ceil(self.threads.max(1) as u64);
                self.utilization = None;
            }
            "utilization" => self.utilization = Some(parse_share(value)?),
            "file_size" | "filesize" | "w" => self.file_size = parse_bytes(value)?,
            "fsync" | "y" => self.fsync = parse_bool(value)?,
            "stat" => self.stat = parse_bool(value)?,
            "read" => self.read = parse_bool(value)?,
            "remove" => self.remove = parse_bool(value)?,
            _ => {
                return Err(format!(
                    "unknown mdtest parameter '{key}' (threads, files_per_thread, files, \
                     utilization, file_size, fsync, stat, read, remove)"
                ));
            }
        }
        Ok(())
    }
}

struct Rank {
    dir: Ino,
    /// Inode and content id of each file created so far.
    files: RefCell<Vec<(Ino, u64)>>,
    next: Cell<usize>,
}

/// Runs mdtest on `fs`.
pub async fn run<F: FileSystem + 'static>(
    sim: Sim,
    fs: Rc<F>,
    params: MdtestParams,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    if params.threads == 0 {
        return Err(FsWorkloadError::Config("threads must be at least 1".into()));
    }
    let mut p = params;
    if cfg.payload == PayloadMode::Fingerprint {
        p.file_size = round_up_blocks(p.file_size);
    }
    let st = fs.statfs();
    let capacity = st.blocks * st.block_size;
    if let Some(u) = p.utilization {
        let per_file = round_up_blocks(p.file_size).max(BLOCK);
        p.files_per_thread = (u * capacity as f64) as u64 / per_file / p.threads as u64;
    }
    let seed = cfg.seed;
    let ctx = Ctx::new(sim, fs, cfg);
    let top = ctx
        .fs
        .mkdir(ROOT_INO, "mdtest", 0o755, 0, 0)
        .await
        .map_err(|err| FsWorkloadError::Fs {
            op: "mkdir",
            file: "/mdtest".into(),
            err,
        })?
        .ino;
    let mut ranks = Vec::new();
    for t in 0..p.threads {
        let name = format!("rank.{t}");
        let dir = ctx
            .fs
            .mkdir(top, &name, 0o755, 0, 0)
            .await
            .map_err(|err| FsWorkloadError::Fs {
                op: "mkdir",
                file: format!("/mdtest/{name}"),
                err,
            })?
            .ino;
        ranks.push(Rank {
            dir,
            files: RefCell::new(Vec::new()),
            next: Cell::new(0),
        });
    }
    ctx.setup.borrow_mut().dirs_created = 1 + p.threads as u64;
    let st = ctx.fs.statfs();
    let fileset = FilesetReport {
        files: p.files_per_thread * p.threads as u64,
        dirs: 1 + p.threads as u64,
        fileset_bytes: p.files_per_thread * p.threads as u64 * p.file_size,
        capacity_bytes: capacity,
        target_utilization: p.utilization,
        utilization: if capacity > 0 {
            (p.files_per_thread * p.threads as u64 * p.file_size) as f64 / capacity as f64
        } else {
            0.0
        },
        used_after_setup: 1.0 - st.blocks_free as f64 / st.blocks.max(1) as f64,
        ..FilesetReport::default()
    };
    ctx.start_measuring();
    let ranks = Rc::new(ranks);
    let phases: Vec<Phase> = [
        Some(Phase::Create),
        p.stat.then_some(Phase::Stat),
        p.read.then_some(Phase::Read),
        p.remove.then_some(Phase::Remove),
    ]
    .into_iter()
    .flatten()
    .collect();
    for phase in phases {
        for r in ranks.iter() {
            r.next.set(0);
        }
        let (c2, r2, p2) = (ctx.clone(), ranks.clone(), p.clone());
        ctx.run_threads(p.threads, move |t| {
            let (ctx, ranks, p) = (c2.clone(), r2.clone(), p2.clone());
            async move { rank(&ctx, &ranks[t as usize], &p, t, phase).await }
        })
        .await?;
        if ctx.stopped() {
            break;
        }
    }
    let secs = ctx.measured_ns() as f64 / 1e9;
    let rec = ctx.recorder();
    let (bytes_read, bytes_written) = rec.bytes();
    Ok(FsReport {
        workload: "mdtest".into(),
        params: serde_json::to_value(&p).expect("parameters serialize"),
        seed,
        payload: ctx.cfg.payload,
        threads: p.threads,
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Create,
    Stat,
    Read,
    Remove,
}

fn file_name(t: u32, i: usize) -> String {
    format!("file.mdtest.{t}.{i}")
}

async fn rank<F: FileSystem + 'static>(
    ctx: &Ctx<F>,
    r: &Rank,
    p: &MdtestParams,
    t: u32,
    phase: Phase,
) -> Step {
    let total = match phase {
        Phase::Create => p.files_per_thread as usize,
        _ => r.files.borrow().len(),
    };
    loop {
        let i = r.next.get();
        if i >= total {
            return Ok(());
        }
        let start = ctx.begin().await?;
        r.next.set(i + 1);
        let name = file_name(t, i);
        let path = || format!("/mdtest/rank.{t}/{}", file_name(t, i));
        match phase {
            Phase::Create => {
                let ino = ctx
                    .fs
                    .create(r.dir, &name, 0o644, 0, 0)
                    .await
                    .map_err(|err| fs_err("create", path(), err))?
                    .ino;
                let uid = ctx.new_uid();
                r.files.borrow_mut().push((ino, uid));
                if p.file_size > 0 {
                    let data = ctx.content.data(uid, 0, p.file_size, Versions::Once);
                    let w = ctx
                        .fs
                        .write(ino, 0, data)
                        .await
                        .map_err(|err| fs_err("write", path(), err))?;
                    if w != p.file_size {
                        return Err(Halt::Error(FsWorkloadError::Metadata {
                            file: path(),
                            detail: format!("write of {} bytes wrote {w}", p.file_size),
                        }));
                    }
                }
                if p.fsync {
                    ctx.fs
                        .fsync(ino, false)
                        .await
                        .map_err(|err| fs_err("fsync", path(), err))?;
                }
                ctx.end("file_create", start, 0, p.file_size);
            }
            Phase::Stat => {
                let (ino, _) = r.files.borrow()[i];
                let a = ctx
                    .fs
                    .lookup(r.dir, &name)
                    .await
                    .map_err(|err| fs_err("stat", path(), err))?;
                if a.ino != ino || a.size != p.file_size {
                    return Err(Halt::Error(FsWorkloadError::Metadata {
                        file: path(),
                        detail: format!(
                            "stat shows inode {} of {} bytes; created inode {ino} of {}",
                            a.ino, a.size, p.file_size
                        ),
                    }));
                }
                ctx.end("file_stat", start, 0, 0);
            }
            Phase::Read => {
                let (ino, uid) = r.files.borrow()[i];
                let len = p
                    .file_size
                    .max(if ctx.cfg.payload == PayloadMode::Fingerprint {
                        BLOCK
                    } else {
                        1
                    });
                let got = ctx
                    .fs
                    .read(ino, 0, len)
                    .await
                    .map_err(|err| fs_err("read", path(), err))?;
                let n = ctx.content.len_of(&got);
                if n != p.file_size {
                    return Err(Halt::Error(FsWorkloadError::Metadata {
                        file: path(),
                        detail: format!("read returned {n} bytes of {}", p.file_size),
                    }));
                }
                ctx.check_read(&path, uid, 0, &got, Versions::Once)?;
                ctx.end("file_read", start, n, 0);
            }
            Phase::Remove => {
                ctx.fs
                    .unlink(r.dir, &name)
                    .await
                    .map_err(|err| fs_err("unlink", path(), err))?;
                ctx.end("file_remove", start, 0, 0);
            }
        }
    }
}
