//! Ballast: files written over most of the file system before the workload is recorded, every
//! other one deleted again, so the zones are half valid and few are free: the workload's
//! writes soon make the file system reclaim zones (cleaning by host copy or zone_compaction,
//! threaded logging into the holes), and crash points fall while it does, which a near-empty
//! file system never gives. The ballast is synced before the recording starts and never
//! changed: after any cut every remaining ballast file must read back exactly, wherever
//! reclaiming has moved its blocks.

use anyhow::{Context, Result};
use zonelab_device::payload::block_from_fingerprint;
use zonelab_device::{OwnedData, PayloadMode};
use zonelab_lfs::fs::Fs;
use zonelab_lfs::{FileSystem, Ino, ROOT_INO};

/// The ballast's directory (the mix and the benchmarks never touch it).
pub const DIR: &str = "ballast";
/// Blocks per ballast file (256 KiB).
const FILE_BLOCKS: u64 = 64;
const BLOCK: u64 = 4096;

/// The ballast files made, by index; the odd ones remain.
#[derive(Clone, Debug, Default)]
pub struct Ballast {
    files: u64,
}

/// Fingerprint of block `b` of ballast file `f`.
fn fp(f: u64, b: u64) -> u64 {
    0xba11_a570_0000_0000 | f << 16 | b
}

/// The contents of ballast file `f` in the device's payload mode.
fn contents(f: u64, payload: PayloadMode) -> OwnedData {
    let fps = (0..FILE_BLOCKS).map(|b| fp(f, b));
    match payload {
        PayloadMode::Fingerprint => OwnedData::Fingerprints(fps.collect()),
        PayloadMode::Full => {
            let mut v = Vec::with_capacity((FILE_BLOCKS * BLOCK) as usize);
            for x in fps {
                block_from_fingerprint(x, BLOCK, &mut v);
            }
            OwnedData::Bytes(v)
        }
    }
}

fn name(f: u64) -> String {
    format!("b{f:05}")
}

/// Writes ballast files over `percent` of the file system's blocks, deletes every other one,
/// and syncs.
pub async fn make(fs: &Fs, percent: u32, payload: PayloadMode) -> Result<Ballast> {
    if percent == 0 {
        return Ok(Ballast::default());
    }
    let dir = fs
        .mkdir(ROOT_INO, DIR, 0o755, 0, 0)
        .await
        .context("ballast mkdir")?;
    let total = fs.statfs().blocks;
    let files = total * percent as u64 / 100 / FILE_BLOCKS;
    for f in 0..files {
        let a = fs
            .create(dir.ino, &name(f), 0o644, 0, 0)
            .await
            .with_context(|| format!("ballast file {f} of {files} (--fill {percent} too high?)"))?;
        fs.write(a.ino, 0, contents(f, payload))
            .await
            .with_context(|| format!("ballast file {f} of {files} (--fill {percent} too high?)"))?;
    }
    for f in (0..files).step_by(2) {
        fs.unlink(dir.ino, &name(f))
            .await
            .context("ballast unlink")?;
    }
    fs.sync().await.context("ballast sync")?;
    Ok(Ballast { files })
}

impl Ballast {
    /// Ballast files that remain.
    pub fn remaining(&self) -> u64 {
        self.files / 2
    }

    /// Checks every remaining ballast file's name and size, and the contents of every
    /// `stride`-th one
    /// from `phase` (reading all of them at every point would dominate the run; successive
    /// points read different ones). Returns the problems and the files and bytes verified.
    pub async fn check(
        &self,
        fs: &Fs,
        payload: PayloadMode,
        stride: u64,
        phase: u64,
    ) -> (Vec<String>, u64, u64) {
        let mut problems = Vec::new();
        if self.files == 0 {
            return (problems, 0, 0);
        }
        let dir: Ino = match fs.lookup(ROOT_INO, DIR).await {
            Ok(a) => a.ino,
            Err(e) => return (vec![format!("/{DIR}: {e}")], 0, 0),
        };
        let (mut files, mut bytes) = (0, 0);
        for (k, f) in (1..self.files).step_by(2).enumerate() {
            let a = match fs.lookup(dir, &name(f)).await {
                Ok(a) => a,
                Err(e) => {
                    problems.push(format!("/{DIR}/{}: {e}", name(f)));
                    continue;
                }
            };
            if a.size != FILE_BLOCKS * BLOCK {
                problems.push(format!(
                    "/{DIR}/{}: {} bytes, expected {}",
                    name(f),
                    a.size,
                    FILE_BLOCKS * BLOCK
                ));
                continue;
            }
            if k as u64 % stride.max(1) != phase % stride.max(1) {
                continue;
            }
            match fs.read(a.ino, 0, a.size).await {
                Ok(got) if got == contents(f, payload) => {
                    files += 1;
                    bytes += a.size;
                }
                Ok(_) => problems.push(format!("/{DIR}/{}: contents differ", name(f))),
                Err(e) => problems.push(format!("/{DIR}/{}: read: {e}", name(f))),
            }
        }
        (problems, files, bytes)
    }
}
