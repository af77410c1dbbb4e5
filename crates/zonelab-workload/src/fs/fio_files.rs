//! fio-style jobs on files (seed 002 §6.2's micro-benchmark: "each thread performs 10GB I/O
//! to its dedicated file with a 4KB request size"): `numjobs` threads, each with its own file
//! of `size` bytes, issuing `bs`-sized reads or writes one at a time (fio's psync engine at
//! iodepth 1), sequentially or at random offsets, with an `fsync` after every `fsync` writes.
//!
//! As fio does, files are laid out before the job: read jobs find them filled with data,
//! write jobs find them created and sized but sparse (`prefill` overrides). Sequential jobs
//! wrap around at the end of the file; random jobs touch every block once per pass over the
//! file (fio's default random map, here a keyed permutation of the block numbers, in the
//! manner of fio's `random_generator=lfsr`). Without a run length a job makes one pass (fio's
//! default `io_size = size`); with a time or an operation count it keeps going.
//!
//! `direct` (O_DIRECT) reaches the file system as [`IoOptions`] through
//! [`FileSystem::set_io_options`]; file systems may ignore it.
//!
//! Every block's version is tracked, so reads check exact contents, overwrites included. `bs`
//! and `size` are whole multiples of 4 KiB in both payload modes.

use super::config::{
    BLOCK, RunConfig, parse_bool, parse_bytes, parse_share, parse_threads, parse_u64,
};
use super::content::Versions;
use super::engine::{Ctx, FsWorkloadError, FsWorkloadResult, Halt, Step, fs_err};
use super::report::{FilesetReport, FsReport};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use zonelab_lfs::{FileSystem, Ino, IoOptions, ROOT_INO, SetAttr};
use zonelab_sim::{Sim, SimRng};

/// fio's `rw=` for file jobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileRw {
    Read,
    Write,
    RandRead,
    RandWrite,
}

impl FileRw {
    pub fn parse(s: &str) -> Option<FileRw> {
        Some(match s {
            "read" => FileRw::Read,
            "write" => FileRw::Write,
            "randread" => FileRw::RandRead,
            "randwrite" => FileRw::RandWrite,
            _ => return None,
        })
    }
    fn is_read(self) -> bool {
        matches!(self, FileRw::Read | FileRw::RandRead)
    }
    fn is_random(self) -> bool {
        matches!(self, FileRw::RandRead | FileRw::RandWrite)
    }
}

/// A fio job on files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FioFileParams {
    pub rw: FileRw,
    /// Request size (`bs`), a multiple of 4 KiB.
    pub bs: u64,
    /// Size of each job's file (`size`); rounded down to whole `bs`.
    pub size: u64,
    /// Size the files by capacity instead: all files together take this share of statfs
    /// capacity.
    pub utilization: Option<f64>,
    /// Jobs, one file and one simulated thread each (`numjobs`).
    pub numjobs: u32,
    /// fsync after this many writes (`fsync`; 0: never).
    pub fsync: u64,
    /// O_DIRECT (`direct`), passed to the file system as a hint.
    pub direct: bool,
    /// Fill the files with data before the job; `None`: fio's layout (read jobs only).
    pub prefill: Option<bool>,
}

impl FioFileParams {
    pub fn new(rw: FileRw) -> FioFileParams {
        FioFileParams {
            rw,
            bs: 4096,
            size: 64 << 20,
            utilization: None,
            numjobs: 1,
            fsync: 0,
            direct: false,
            prefill: None,
        }
    }

    /// Seed 002 §6.2: 16 jobs, 4 KiB requests, 10 GB per job on its dedicated file.
    pub fn seed002(rw: FileRw) -> FioFileParams {
        FioFileParams {
            numjobs: 16,
            size: 10 << 30,
            ..FioFileParams::new(rw)
        }
    }

    /// Sets option `key` (fio's names: rw, bs, size, numjobs, fsync, direct; and
    /// utilization, prefill).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "rw" | "readwrite" => {
                self.rw = FileRw::parse(value).ok_or_else(|| {
                    format!("rw '{value}': use read, write, randread or randwrite")
                })?
            }
            "bs" | "blocksize" => self.bs = parse_bytes(value)?,
            "size" | "filesize" => {
                self.size = parse_bytes(value)?;
                self.utilization = None;
            }
            "utilization" => self.utilization = Some(parse_share(value)?),
            "numjobs" | "threads" | "nthreads" => self.numjobs = parse_threads(key, value)?,
            "fsync" => self.fsync = parse_u64(value)?,
            "direct" => self.direct = parse_bool(value)?,
            "prefill" => self.prefill = Some(parse_bool(value)?),
            _ => {
                return Err(format!(
                    "unknown fio parameter '{key}' (rw, bs, size, utilization, numjobs, fsync, \
                     direct, prefill)"
                ));
            }
        }
        Ok(())
    }
}

/// Block numbers `0..n` in a random order, every one once per pass: cycle-walking over a
/// keyed bijection of the enclosing power of two.
struct Permutation {
    n: u64,
    bits: u32,
    i: u64,
    keys: [u64; 3],
}

impl Permutation {
    fn new(n: u64, rng: &mut SimRng) -> Permutation {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(2);
        Permutation {
            n,
            bits,
            i: 0,
            keys: [rng.next_u64(), rng.next_u64() | 1, rng.next_u64() | 1],
        }
    }

    fn mask(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1 << self.bits) - 1
        }
    }

    /// A bijection of `0..2^bits`.
    fn scramble(&self, mut x: u64) -> u64 {
        let m = self.mask();
        let h = self.bits / 2;
        x = (x ^ self.keys[0]) & m;
        x = x.wrapping_mul(self.keys[1]) & m;
        x ^= x >> h;
        x = x.wrapping_mul(self.keys[2]) & m;
        x ^= x >> h;
        x = x.wrapping_mul(self.keys[1]) & m;
        x ^= x >> (h / 2).max(1);
        x
    }

    /// The next block, or `None` at the end of the pass.
    fn next(&mut self) -> Option<u64> {
        while self.i <= self.mask() {
            let y = self.scramble(self.i);
            self.i += 1;
            if y < self.n {
                return Some(y);
            }
        }
        None
    }
}

struct Job {
    path: String,
    ino: Ino,
    uid: u64,
    versions: Vec<u32>,
}

/// Runs a fio job on files of `fs`.
pub async fn run<F: FileSystem + 'static>(
    sim: Sim,
    fs: Rc<F>,
    params: FioFileParams,
    cfg: RunConfig,
) -> FsWorkloadResult<FsReport> {
    let bad = |m: String| Err(FsWorkloadError::Config(m));
    if params.numjobs == 0 {
        return bad("numjobs must be at least 1".into());
    }
    if params.bs == 0 || !params.bs.is_multiple_of(BLOCK) {
        return bad(format!(
            "bs {} must be a positive multiple of {BLOCK} bytes",
            params.bs
        ));
    }
    let st = fs.statfs();
    let capacity = st.blocks * st.block_size;
    let mut p = params;
    if let Some(u) = p.utilization {
        p.size = (u * capacity as f64) as u64 / p.numjobs as u64;
    }
    p.size -= p.size % p.bs;
    if p.size == 0 {
        return bad(format!(
            "each job's file must hold at least one request of {} bytes",
            p.bs
        ));
    }
    let prefill = p.prefill.unwrap_or(p.rw.is_read());
    let seed = cfg.seed;
    let ctx = Ctx::new(sim, fs, cfg);
    let fsx = &ctx.fs;
    let dir = fsx
        .mkdir(ROOT_INO, "fio", 0o755, 0, 0)
        .await
        .map_err(|err| FsWorkloadError::Fs {
            op: "mkdir",
            file: "/fio".into(),
            err,
        })?
        .ino;
    ctx.setup.borrow_mut().dirs_created += 1;
    let blocks = (p.size / BLOCK) as usize;
    let mut jobs = Vec::new();
    for j in 0..p.numjobs {
        let name = format!("job.{j}.0");
        let path = format!("/fio/{name}");
        let fserr = |op, err| FsWorkloadError::Fs {
            op,
            file: path.clone(),
            err,
        };
        let ino = fsx
            .create(dir, &name, 0o644, 0, 0)
            .await
            .map_err(|e| fserr("create", e))?
            .ino;
        fsx.set_io_options(ino, IoOptions { direct: p.direct });
        ctx.setup.borrow_mut().files_created += 1;
        let uid = ctx.new_uid();
        let mut versions = vec![0u32; blocks];
        if prefill {
            versions.fill(1);
            let mut off = 0;
            while off < p.size {
                let n = (p.size - off).min(1 << 20);
                let data = ctx.content.data(uid, off, n, Versions::PerBlock(&versions));
                fsx.write(ino, off, data)
                    .await
                    .map_err(|e| fserr("write", e))?;
                off += n;
                ctx.setup.borrow_mut().bytes_written += n;
            }
        } else {
            let set = SetAttr {
                size: Some(p.size),
                ..SetAttr::default()
            };
            fsx.setattr(ino, set)
                .await
                .map_err(|e| fserr("truncate", e))?;
        }
        jobs.push(RefCell::new(Job {
            path,
            ino,
            uid,
            versions,
        }));
    }
    fsx.sync().await.map_err(|err| FsWorkloadError::Fs {
        op: "sync",
        file: "/".into(),
        err,
    })?;
    let used = {
        let st = fsx.statfs();
        1.0 - st.blocks_free as f64 / st.blocks.max(1) as f64
    };
    let fileset = FilesetReport {
        files: p.numjobs as u64,
        dirs: 1,
        fileset_bytes: p.size * p.numjobs as u64,
        preallocated_files: p.numjobs as u64,
        preallocated_bytes: if prefill {
            p.size * p.numjobs as u64
        } else {
            0
        },
        capacity_bytes: capacity,
        target_utilization: p.utilization,
        utilization: if capacity > 0 {
            (p.size * p.numjobs as u64) as f64 / capacity as f64
        } else {
            0.0
        },
        used_after_setup: used,
    };
    ctx.start_measuring();
    let jobs = Rc::new(jobs);
    let (c2, j2, p2) = (ctx.clone(), jobs.clone(), p.clone());
    ctx.run_threads(p.numjobs, move |t| {
        let (ctx, jobs, p) = (c2.clone(), j2.clone(), p2.clone());
        async move { job(&ctx, &jobs[t as usize], &p, t).await }
    })
    .await?;
    let secs = ctx.measured_ns() as f64 / 1e9;
    let rec = ctx.recorder();
    let (bytes_read, bytes_written) = rec.bytes();
    Ok(FsReport {
        workload: "fio".into(),
        params: serde_json::to_value(&p).expect("parameters serialize"),
        seed,
        payload: ctx.cfg.payload,
        threads: p.numjobs,
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

async fn job<F: FileSystem + 'static>(
    ctx: &Ctx<F>,
    job: &RefCell<Job>,
    p: &FioFileParams,
    t: u32,
) -> Step {
    let mut rng = SimRng::stream(ctx.cfg.seed, 2000 + t as u64);
    let n = p.size / p.bs;
    let one_pass = ctx.cfg.run.is_none();
    let mut perm = Permutation::new(n, &mut rng);
    let mut seq = 0u64;
    let mut done = 0u64;
    let mut writes = 0u64;
    let (ino, uid, path) = {
        let j = job.borrow();
        (j.ino, j.uid, j.path.clone())
    };
    let bpr = p.bs / BLOCK;
    loop {
        if one_pass && done == n {
            return Ok(());
        }
        let start = ctx.begin().await?;
        let idx = if p.rw.is_random() {
            match perm.next() {
                Some(i) => i,
                None => {
                    perm = Permutation::new(n, &mut rng);
                    perm.next().expect("a pass has at least one block")
                }
            }
        } else {
            let i = seq % n;
            seq += 1;
            i
        };
        let off = idx * p.bs;
        if p.rw.is_read() {
            let got = ctx
                .fs
                .read(ino, off, p.bs)
                .await
                .map_err(|err| fs_err("read", path.clone(), err))?;
            let len = ctx.content.len_of(&got);
            if len != p.bs {
                return Err(Halt::Error(FsWorkloadError::Metadata {
                    file: path.clone(),
                    detail: format!(
                        "read of {} bytes at offset {off} returned {len} (file size {})",
                        p.bs, p.size
                    ),
                }));
            }
            {
                let j = job.borrow();
                ctx.check_read(
                    &|| path.clone(),
                    uid,
                    off,
                    &got,
                    Versions::PerBlock(&j.versions),
                )?;
            }
            ctx.end("read", start, len, 0);
        } else {
            let data = {
                let mut j = job.borrow_mut();
                let first = (off / BLOCK) as usize;
                for v in &mut j.versions[first..first + bpr as usize] {
                    *v += 1;
                }
                ctx.content
                    .data(uid, off, p.bs, Versions::PerBlock(&j.versions))
            };
            let w = ctx
                .fs
                .write(ino, off, data)
                .await
                .map_err(|err| fs_err("write", path.clone(), err))?;
            if w != p.bs {
                return Err(Halt::Error(FsWorkloadError::Metadata {
                    file: path.clone(),
                    detail: format!("write of {} bytes at offset {off} wrote {w}", p.bs),
                }));
            }
            ctx.end("write", start, 0, p.bs);
            writes += 1;
            if p.fsync > 0 && writes.is_multiple_of(p.fsync) {
                let s = ctx.sim.now();
                ctx.fs
                    .fsync(ino, false)
                    .await
                    .map_err(|err| fs_err("fsync", path.clone(), err))?;
                ctx.end("fsync", s, 0, 0);
            }
        }
        done += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permutation_visits_every_block_once() {
        for n in [1u64, 2, 3, 7, 64, 1000, 4097] {
            let mut p = Permutation::new(n, &mut SimRng::new(n));
            let mut seen: Vec<u64> = std::iter::from_fn(|| p.next()).collect();
            assert_eq!(seen.len() as u64, n);
            if n > 8 {
                assert_ne!(seen[..4], [0, 1, 2, 3]);
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
    }
}
