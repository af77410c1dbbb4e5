//! `zonelab crashtest`: crash-consistency testing of the file system in the manner of
//! CrashMonkey (Mohan et al., OSDI'18): run a workload on a drive without power-loss
//! protection while recording every command the device receives ([`zonelab_device::record`]),
//! then, for crash points at every flush, at every instant an fsync or sync returned, and at
//! sampled instants between flushes, rebuild the device as it was there by replaying the
//! commands onto a copy of the device taken before the workload, cut the power
//! ([`zonelab_device::ZonedDevice::power_cut`]), mount (roll-back to the checkpoint and
//! roll-forward of fsynced files), run fsck, and check what the workload made durable by
//! then: the scripted mix against its full oracle ([`oracle`]), the benchmark workloads
//! against the files they fsynced or synced and did not change since ([`watch`]).
//!
//! Ballast written before the workload ([`ballast`]) leaves few free zones, so the
//! recording covers zone reclaiming as well.
//!
//! The crash points are visited in time order with one replay that only moves forward, so the
//! cost of a point is a device copy, a mount and the checks.

mod ballast;
mod mix;
mod oracle;
mod watch;

use anyhow::{Result, anyhow, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use oracle::{Found, FoundFile, History, Recovered};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::rc::Rc;
use watch::{Watch, Watched};
use zonelab_device::record::{CommandLog, DeviceCmd, Recorded, Replayer};
use zonelab_device::{
    HostStack, IoEngine, IoScheduler, Namespace, OwnedData, PayloadMode, Profile,
};
use zonelab_lfs::fs::{Fs, FsOptions};
use zonelab_lfs::layout::FormatOptions;
use zonelab_lfs::policy;
use zonelab_lfs::{FileKind, FileSystem, Ino, ROOT_INO};
use zonelab_sim::{Nanos, Sim, SimRng};
use zonelab_workload::fs::{FsWorkload, MeasureHook, RunConfig, RunLength};

/// Workloads `--workload` takes.
const WORKLOADS: [&str; 6] = [
    "mix",
    "fileserver",
    "varmail",
    "webserver",
    "videoserver",
    "mdtest",
];

/// The default device: a znsplus-mlc shrunk to 40 zones of 2 MiB (2 of them conventional, for
/// the metadata) without power-loss protection, so a crash loses what is only in its buffer.
const SMALL_DEVICE: [(&str, &str); 6] = [
    ("zones", "40"),
    ("conventional_zones", "2"),
    ("pages_per_block", "8"),
    ("zone_size", "2MiB"),
    ("blocks_per_plane", "64"),
    ("power_loss_protection", "false"),
];

#[derive(Args, Debug, Clone)]
pub struct CrashtestArgs {
    /// Workload: mix (scripted create/write/truncate/rename/link/unlink/mkdir/rmdir/fsync/sync,
    /// checked against a full oracle), fileserver, varmail, webserver, videoserver or mdtest.
    #[arg(long, default_value = "mix")]
    workload: String,
    /// File-system policy (f2fs, izc, znsplus, ...).
    #[arg(long, default_value = "f2fs")]
    policy: String,
    /// Device profile (default: a small znsplus-mlc without power-loss protection).
    #[arg(long)]
    profile: Option<String>,
    /// Override a profile field, e.g. --set zones=64 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed of the workload.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Percent of the file system written with ballast files before the workload, every other
    /// one then deleted (synced, never changed, checked at every point): the zones are half
    /// valid and few are free, so the workload makes the file system reclaim zones while it is
    /// recorded. 0: none. Default: 90 on the default device, 0 with --profile (filling a
    /// full-size drive would take long).
    #[arg(long)]
    fill: Option<u32>,
    /// Operations of the workload (default: 2000 for mix, 4000 for the filebench
    /// personalities; mdtest creates this many files, default 1500).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    ops: Option<u32>,
    /// Crash points to test: every flush and durable point, `--between` per gap between
    /// flushes, and seeded instants across the run up to this many (evenly thinned when the
    /// first kinds alone are more).
    #[arg(long, default_value_t = 3000, value_parser = at_least_one)]
    points: usize,
    /// Sampled crash points between two consecutive flushes (a drive with power-loss
    /// protection needs none: only command completion matters there).
    #[arg(long, default_value_t = 2)]
    between: u32,
    /// Test only this crash point (as numbered in a report) and print what was found there.
    #[arg(long)]
    point: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

/// Why a crash point was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
enum PointKind {
    /// A flush completed.
    Flush,
    /// An fsync or sync returned to the workload.
    Durable,
    /// Sampled between two flushes.
    Between,
}

#[derive(Clone, Copy, Debug, Serialize)]
struct Point {
    index: usize,
    t: Nanos,
    kind: PointKind,
}

#[derive(Debug, Serialize)]
struct Failure {
    point: usize,
    t_ns: u64,
    kind: PointKind,
    problems: Vec<String>,
    reproduce: String,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
struct Checks {
    mounts: u64,
    fsck_runs: u64,
    /// Paths compared against the oracle (mix) or fsynced files read back (benchmarks).
    names_checked: u64,
    files_verified: u64,
    bytes_verified: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    workload: String,
    policy: String,
    profile: String,
    power_loss_protection: bool,
    seed: u64,
    operations: usize,
    simulated_ns: u64,
    commands_recorded: usize,
    flushes: usize,
    durable_events: usize,
    /// Zones the workload reclaimed by cleaning (host copy or zone_compaction) and by
    /// threaded logging (TL_open), so a run shows that crash points fell during reclaiming.
    zones_cleaned: u64,
    tl_opens: u64,
    points_tested: usize,
    points_by_kind: BTreeMap<String, usize>,
    checks: Checks,
    failures: Vec<Failure>,
}

/// What the workload run left to check.
enum Oracle {
    Mix(History),
    Watch(Watch),
}

/// The recorded run.
struct Recording {
    initial: Namespace,
    cmds: Vec<Recorded>,
    oracle: Rc<Oracle>,
    end: Nanos,
    operations: usize,
    /// Zones cleaned and TL_opens during the workload.
    reclaimed: (u64, u64),
    ballast: ballast::Ballast,
    payload: PayloadMode,
    profile: Profile,
}

fn profile(a: &CrashtestArgs) -> Result<Profile> {
    let mut sets: Vec<(String, String)> = Vec::new();
    if a.profile.is_none() {
        sets.extend(
            SMALL_DEVICE
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
    }
    for kv in &a.set {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--set {kv}: expected KEY=VALUE, e.g. zones=64"))?;
        sets.push((k.trim().to_string(), v.trim().to_string()));
    }
    let name = a.profile.as_deref().unwrap_or("znsplus-mlc");
    Profile::load(name, &sets).map_err(|e| anyhow!("{e}"))
}

fn fs_options() -> FsOptions {
    // A small page cache, so writeback runs during the workload as well as at fsync.
    FsOptions {
        cache_bytes: 1 << 20,
        ..FsOptions::default()
    }
}

fn build_policy(name: &str) -> Result<Box<dyn policy::Policy>> {
    policy::build(name, &BTreeMap::new()).map_err(|e| anyhow!("--policy {name}: {e}"))
}

/// A count of at least one (`--points 0` would test nothing and pass).
fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("give at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}: give a whole number such as 1000")),
    }
}

/// The benchmark workload `name`, sized for a small device and many crash points.
fn benchmark(name: &str, ops: u32) -> Result<(FsWorkload, Option<RunLength>)> {
    let mut w = FsWorkload::new(name).map_err(|e| anyhow!(e))?;
    let params: &[(&str, &str)] = match name {
        "fileserver" | "webserver" | "varmail" => {
            &[("nfiles", "200"), ("filesize", "16KiB"), ("nthreads", "4")]
        }
        // 16 passive videos: filebench preallocates each with a chance of one half, and with
        // 4 one seed in 16 started with none, so the writer's first delete stopped the run.
        "videoserver" => &[
            ("numactivevids", "4"),
            ("numpassivevids", "16"),
            ("filesize", "1MiB"),
            ("nthreads", "4"),
            ("writeiosize", "64KiB"),
            ("readiosize", "64KiB"),
        ],
        "mdtest" => &[("threads", "4"), ("file_size", "4096"), ("fsync", "true")],
        _ => &[],
    };
    for (k, v) in params {
        w.set(k, v).map_err(|e| anyhow!("{name} {k}: {e}"))?;
    }
    if name == "mdtest" {
        w.set("files", &ops.to_string()).map_err(|e| anyhow!(e))?;
        return Ok((w, None));
    }
    Ok((w, Some(RunLength::Ops(ops as u64))))
}

/// Runs the workload on a fresh file system, recording the device's commands.
fn record(a: &CrashtestArgs) -> Result<Recording> {
    if !WORKLOADS.contains(&a.workload.as_str()) {
        bail!(
            "--workload {}: use one of {}",
            a.workload,
            WORKLOADS.join(", ")
        );
    }
    let profile = profile(a)?;
    if profile.namespace != zonelab_device::NamespaceKind::Zoned {
        bail!(
            "profile {}: the file system needs a zoned namespace",
            profile.name
        );
    }
    let policy = build_policy(&a.policy)?;
    let fill = a.fill.unwrap_or(if a.profile.is_none() { 90 } else { 0 });
    if fill > 90 {
        bail!("--fill {fill}: at most 90 (the workload needs room to write)");
    }
    let mix = a.workload == "mix";
    let payload = if mix {
        PayloadMode::Full
    } else {
        PayloadMode::Fingerprint
    };
    let ops = a.ops.unwrap_or(match a.workload.as_str() {
        "mix" => 2000,
        "mdtest" => 1500,
        // Enough for the filebench personalities that write to make f2fs clean zones too.
        _ => 4000,
    });
    let bench = if mix {
        None
    } else {
        Some(benchmark(&a.workload, ops)?)
    };
    let sim = Sim::new();
    let ns = Namespace::new(profile.clone(), payload).map_err(|e| anyhow!("profile: {e}"))?;
    let stack = HostStack::new(
        sim.clone(),
        ns.shared(),
        IoEngine::IoUring,
        IoScheduler::MqDeadline,
    )
    .map_err(|e| anyhow!(e))?;
    let log = Rc::new(CommandLog::new());
    let (s, st, l, seed) = (sim.clone(), stack.clone(), log.clone(), a.seed);
    let out = sim
        .block_on(async move {
            let fs = Fs::mkfs(
                s.clone(),
                st.clone(),
                FormatOptions::default(),
                fs_options(),
                policy,
            )
            .await
            .map_err(|e| anyhow!("mkfs: {e}"))?;
            let fs = Rc::new(fs);
            let ballast = ballast::make(&fs, fill, payload).await?;
            let prepared = match bench {
                None => Some(mix::Mix::prepare(fs.clone(), seed).await?),
                Some(_) => None,
            };
            let initial = st.device().borrow().clone();
            let before = {
                let s = fs.stats();
                (s.zones_cleaned, s.threaded.tl_opens)
            };
            st.record_into(Some(l.clone()));
            let (oracle, operations) = match bench {
                None => {
                    let m = prepared.expect("prepared above");
                    let h = m.run(ops).await?;
                    let n = h.ops.len();
                    (Oracle::Mix(h), n)
                }
                Some((w, run)) => {
                    let watched = Rc::new(Watched::new(fs.clone(), true));
                    // Sync once the fileset is built: the untouched files are durable from then.
                    let (s2, w2) = (s.clone(), watched.clone());
                    let hook = MeasureHook(Rc::new(move || {
                        let w3 = w2.clone();
                        s2.spawn(async move {
                            let _ = w3.sync().await;
                        });
                    }));
                    let cfg = RunConfig {
                        seed,
                        payload: PayloadMode::Fingerprint,
                        run,
                        on_measure: Some(hook),
                        ..RunConfig::default()
                    };
                    let report = zonelab_workload::fs::run(s.clone(), watched.clone(), w, cfg)
                        .await
                        .map_err(|e| match e {
                            zonelab_workload::fs::FsWorkloadError::Fs {
                                err: zonelab_lfs::FsError::NoSpace,
                                ..
                            } => anyhow!(
                                "workload: {e}: the ballast fills {fill}% of the file system; \
                                 give fewer --ops or a lower --fill"
                            ),
                            e => anyhow!("workload: {e}"),
                        })?;
                    let n = report.throughput.ops as usize;
                    (Oracle::Watch(watched.finish()), n)
                }
            };
            st.record_into(None);
            let stats = fs.stats();
            let reclaimed = (
                stats.zones_cleaned - before.0,
                stats.threaded.tl_opens - before.1,
            );
            Ok::<_, anyhow::Error>((initial, oracle, operations, s.now(), reclaimed, ballast))
        })
        .map_err(|e| anyhow!("the workload did not finish: {e}"))??;
    let (initial, oracle, operations, end, reclaimed, ballast) = out;
    Ok(Recording {
        initial,
        cmds: log.take(),
        oracle: Rc::new(oracle),
        end,
        operations,
        reclaimed,
        ballast,
        payload,
        profile,
    })
}

/// Crash points in time order: every flush completion and every instant an fsync or sync
/// returned, plus `between` seeded instants between consecutive flushes; then seeded instants
/// spread over the whole run until there are `max` (workloads that rarely flush, such as
/// fileserver, would otherwise test a handful of points); thinned evenly to at most `max`
/// when the flushes and durable points alone are more.
fn points(r: &Recording, between: u32, max: usize, seed: u64) -> Vec<Point> {
    let start = r.cmds.first().map_or(r.end, |c| c.now);
    let mut flushes: Vec<Nanos> = r
        .cmds
        .iter()
        .filter(|c| matches!(c.cmd, DeviceCmd::Flush) && c.done <= r.end)
        .map(|c| c.done)
        .collect();
    flushes.sort_unstable();
    flushes.dedup();
    let mut v: Vec<(Nanos, PointKind)> = flushes.iter().map(|&t| (t, PointKind::Flush)).collect();
    match &*r.oracle {
        Oracle::Mix(h) => v.extend(h.guarantees.iter().map(|g| (g.at, PointKind::Durable))),
        Oracle::Watch(w) => v.extend(w.ends().map(|t| (t, PointKind::Durable))),
    }
    let mut rng = SimRng::stream(seed, 0x706f696e74);
    let mut edges = vec![start];
    edges.extend(&flushes);
    edges.push(r.end);
    for w in edges.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b.0 > a.0 + 1 {
            for _ in 0..between {
                v.push((
                    Nanos(a.0 + 1 + rng.below(b.0 - a.0 - 1)),
                    PointKind::Between,
                ));
            }
        }
    }
    v.sort_unstable();
    v.dedup_by_key(|p| p.0);
    if v.len() < max && r.end.0 > start.0 + 1 {
        let span = r.end.0 - start.0 - 1;
        let mut fill = SimRng::stream(seed, 0x66696c6c);
        let want = (max - v.len()) as u64;
        // Stratified: one instant in each of `want` equal slices of the run.
        for k in 0..want {
            let lo = span * k / want;
            let hi = (span * (k + 1) / want).max(lo + 1);
            v.push((
                Nanos(start.0 + 1 + lo + fill.below(hi - lo)),
                PointKind::Between,
            ));
        }
        v.sort_unstable();
        v.dedup_by_key(|p| p.0);
    }
    if v.len() > max && max > 0 {
        let n = v.len();
        v = (0..max).map(|i| v[i * n / max]).collect();
    }
    v.into_iter()
        .enumerate()
        .map(|(index, (t, kind))| Point { index, t, kind })
        .collect()
}

/// Every path under the root with what it is, and every file's link count and contents.
async fn read_tree(fs: &Fs) -> Result<Recovered, String> {
    let mut rec = Recovered::default();
    let mut dirs: Vec<(String, Ino)> = vec![(String::new(), ROOT_INO)];
    while let Some((path, ino)) = dirs.pop() {
        let entries = fs
            .readdir(ino)
            .await
            .map_err(|e| format!("readdir {}: {e}", if path.is_empty() { "/" } else { &path }))?;
        for e in entries {
            if ino == ROOT_INO && e.name == ballast::DIR {
                // Checked on its own (ballast::Ballast::check).
                continue;
            }
            let p = format!("{path}/{}", e.name);
            match e.kind {
                FileKind::Dir => {
                    rec.entries.insert(p.clone(), Found::Dir);
                    dirs.push((p, e.ino));
                }
                FileKind::File | FileKind::Symlink => {
                    rec.entries.insert(p.clone(), Found::File(e.ino));
                    if rec.files.contains_key(&e.ino) {
                        continue;
                    }
                    let a = fs
                        .getattr(e.ino)
                        .await
                        .map_err(|x| format!("stat {p}: {x}"))?;
                    let data = match fs.read(e.ino, 0, a.size.max(1)).await {
                        Ok(OwnedData::Bytes(b)) => b,
                        Ok(_) => {
                            return Err(format!("read {p}: fingerprints in full payload mode"));
                        }
                        Err(x) => return Err(format!("read {p}: {x}")),
                    };
                    if data.len() as u64 != a.size {
                        return Err(format!(
                            "{p}: size {} but {} bytes read",
                            a.size,
                            data.len()
                        ));
                    }
                    rec.files.insert(
                        e.ino,
                        FoundFile {
                            nlink: a.nlink,
                            data,
                        },
                    );
                }
            }
        }
    }
    Ok(rec)
}

impl std::ops::AddAssign for Checks {
    fn add_assign(&mut self, o: Checks) {
        self.mounts += o.mounts;
        self.fsck_runs += o.fsck_runs;
        self.names_checked += o.names_checked;
        self.files_verified += o.files_verified;
        self.bytes_verified += o.bytes_verified;
    }
}

/// Checks of one point: the problems found, and what was checked.
async fn check_point(fs: &Fs, t: Nanos, oracle: &Oracle, verbose: bool) -> (Vec<String>, Checks) {
    let mut checks = Checks::default();
    let checks = &mut checks;
    let mut problems = Vec::new();
    checks.fsck_runs += 1;
    match fs.check_at_rest().await {
        Ok(p) => problems.extend(p.into_iter().map(|p| format!("fsck: {p}"))),
        Err(e) => problems.push(format!("fsck could not run: {e}")),
    }
    match oracle {
        Oracle::Mix(h) => match read_tree(fs).await {
            Ok(rec) => {
                if verbose {
                    let k = h.begun(t);
                    eprintln!("operations begun by the cut: {k}; the last ones:");
                    for (i, o) in h.ops.iter().enumerate().take(k).skip(k.saturating_sub(12)) {
                        eprintln!("  op {}: {} ({} .. {})", i + 1, o.desc, o.start, o.end);
                    }
                    eprintln!("found after the cut:");
                    for (p, f) in &rec.entries {
                        match f {
                            Found::Dir => eprintln!("  {p}/"),
                            Found::File(ino) => {
                                let x = &rec.files[ino];
                                eprintln!(
                                    "  {p}  inode {ino}, {} bytes, {} links",
                                    x.data.len(),
                                    x.nlink
                                )
                            }
                        }
                    }
                }
                checks.names_checked += rec.entries.len() as u64;
                checks.files_verified += rec.files.len() as u64;
                checks.bytes_verified +=
                    rec.files.values().map(|f| f.data.len() as u64).sum::<u64>();
                problems.extend(h.check(t, &rec));
            }
            Err(e) => problems.push(e),
        },
        Oracle::Watch(w) => {
            for x in w.expected_at(t) {
                let d = &x.durable;
                checks.names_checked += 1;
                let a = match fs.lookup(d.parent, &d.name).await {
                    Ok(a) => a,
                    Err(e) => {
                        problems.push(format!(
                            "{} (inode {}, durable since {}): {e}",
                            d.name, x.ino, d.end
                        ));
                        continue;
                    }
                };
                if a.ino != x.ino || a.size != d.data.size() {
                    problems.push(format!(
                        "{} (durable since {}): inode {} of {} bytes, expected inode {} of {} bytes",
                        d.name,
                        d.end,
                        a.ino,
                        a.size,
                        x.ino,
                        d.data.size()
                    ));
                    continue;
                }
                match fs.read(a.ino, 0, a.size.max(1)).await {
                    Ok(got) if d.data.matches(&got) => {
                        checks.files_verified += 1;
                        checks.bytes_verified += a.size;
                    }
                    Ok(_) => problems.push(format!(
                        "{} (inode {}, durable since {}): contents differ",
                        d.name, x.ino, d.end
                    )),
                    Err(e) => problems.push(format!("{} (inode {}): read: {e}", d.name, x.ino)),
                }
            }
        }
    }
    (problems, *checks)
}

/// Rebuilds the device at each point, mounts, checks. `only`: test that point alone,
/// verbosely.
fn test_points(
    a: &CrashtestArgs,
    r: &Recording,
    pts: &[Point],
    only: Option<usize>,
    bar: Option<&ProgressBar>,
) -> Result<(Checks, Vec<Failure>)> {
    let mut replay = Replayer::new(r.initial.clone(), &r.cmds);
    let mut checks = Checks::default();
    let mut failures = Vec::new();
    for p in pts {
        if only.is_some_and(|o| o != p.index) {
            continue;
        }
        replay.advance(p.t).map_err(|e| anyhow!("{e}"))?;
        let mut dev = replay.device().clone();
        let cut = dev.power_cut(p.t);
        let verbose = only.is_some();
        if verbose {
            eprintln!(
                "point {} at {} ({:?}): {} commands replayed; the cut lost {} blocks, rolled back {} zones",
                p.index,
                p.t,
                p.kind,
                replay.replayed(),
                cut.lost_blocks,
                cut.rolled_back.len()
            );
        }
        let sim = Sim::starting_at(p.t);
        let stack = HostStack::new(
            sim.clone(),
            dev.shared(),
            IoEngine::IoUring,
            IoScheduler::MqDeadline,
        )
        .map_err(|e| anyhow!(e))?;
        let policy = build_policy(&a.policy)?;
        checks.mounts += 1;
        let (oracle, s, t) = (r.oracle.clone(), sim.clone(), p.t);
        let (ballast, payload, index) = (r.ballast.clone(), r.payload, p.index as u64);
        let (problems, c) = sim
            .block_on(async move {
                match Fs::mount(s, stack, fs_options(), policy).await {
                    Ok(fs) => {
                        let (mut problems, mut c) = check_point(&fs, t, &oracle, verbose).await;
                        // A sixteenth of the ballast's contents per point, in turn.
                        let (p, files, bytes) = ballast.check(&fs, payload, 16, index).await;
                        problems.extend(p);
                        c.names_checked += ballast.remaining();
                        c.files_verified += files;
                        c.bytes_verified += bytes;
                        (problems, c)
                    }
                    Err(e) => (vec![format!("mount failed: {e}")], Checks::default()),
                }
            })
            .map_err(|e| anyhow!("point {}: the checks did not finish: {e}", p.index))?;
        checks += c;
        if !problems.is_empty() {
            failures.push(Failure {
                point: p.index,
                t_ns: p.t.0,
                kind: p.kind,
                problems,
                reproduce: reproducer(a, p.index),
            });
        }
        if let Some(b) = bar {
            b.inc(1);
        }
    }
    Ok((checks, failures))
}

fn reproducer(a: &CrashtestArgs, point: usize) -> String {
    let mut s = format!(
        "zonelab crashtest --workload {} --policy {} --seed {}",
        a.workload, a.policy, a.seed
    );
    if let Some(p) = &a.profile {
        s += &format!(" --profile {p}");
    }
    if let Some(f) = a.fill {
        s += &format!(" --fill {f}");
    }
    for kv in &a.set {
        s += &format!(" --set {kv}");
    }
    if let Some(o) = a.ops {
        s += &format!(" --ops {o}");
    }
    s += &format!(
        " --points {} --between {} --point {point}",
        a.points, a.between
    );
    s
}

pub fn run(a: CrashtestArgs) -> Result<ExitCode> {
    let r = record(&a)?;
    let plp = r.profile.controller.power_loss_protection;
    // With power-loss protection every accepted write survives: points between flushes add
    // nothing.
    let between = if plp { 0 } else { a.between };
    let pts = points(&r, between, a.points, a.seed);
    if let Some(o) = a.point
        && o >= pts.len()
    {
        bail!(
            "--point {o}: this run has {} crash points (0 to {})",
            pts.len(),
            pts.len().saturating_sub(1)
        );
    }
    let tested = if a.point.is_some() { 1 } else { pts.len() };
    let bar = (a.point.is_none() && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new(tested as u64);
        b.set_style(
            ProgressStyle::with_template(
                "crash points {bar:40} {pos}/{len} {elapsed_precise} (eta {eta})",
            )
            .expect("valid template"),
        );
        b
    });
    let (checks, failures) = test_points(&a, &r, &pts, a.point, bar.as_ref())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
    for p in pts.iter().filter(|p| a.point.is_none_or(|o| o == p.index)) {
        let k = serde_json::to_value(p.kind)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        *by_kind.entry(k).or_default() += 1;
    }
    let report = Report {
        workload: a.workload.clone(),
        policy: a.policy.clone(),
        profile: r.profile.name.clone(),
        power_loss_protection: plp,
        seed: a.seed,
        operations: r.operations,
        simulated_ns: r.end.0,
        commands_recorded: r.cmds.len(),
        flushes: r
            .cmds
            .iter()
            .filter(|c| matches!(c.cmd, DeviceCmd::Flush))
            .count(),
        durable_events: match &*r.oracle {
            Oracle::Mix(h) => h.guarantees.len(),
            Oracle::Watch(w) => w.records(),
        },
        zones_cleaned: r.reclaimed.0,
        tl_opens: r.reclaimed.1,
        points_tested: tested,
        points_by_kind: by_kind,
        checks,
        failures,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report);
    }
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_report(r: &Report) {
    println!(
        "crashtest: {} on {} ({}, power-loss protection {}), seed {}",
        r.workload,
        r.policy,
        r.profile,
        if r.power_loss_protection { "on" } else { "off" },
        r.seed
    );
    println!(
        "  workload: {} operations in {} simulated, {} device commands, {} flushes, {} durability events",
        r.operations,
        Nanos(r.simulated_ns),
        r.commands_recorded,
        r.flushes,
        r.durable_events
    );
    println!(
        "  reclaiming: {} zones cleaned, {} zones reopened by threaded logging",
        r.zones_cleaned, r.tl_opens
    );
    let kinds: Vec<String> = r
        .points_by_kind
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    println!(
        "  crash points tested: {} ({})",
        r.points_tested,
        kinds.join(", ")
    );
    println!(
        "  checks: {} mounts, {} fsck runs, {} names, {} files ({} bytes) verified",
        r.checks.mounts,
        r.checks.fsck_runs,
        r.checks.names_checked,
        r.checks.files_verified,
        r.checks.bytes_verified
    );
    if r.failures.is_empty() {
        println!("  failures: none");
        return;
    }
    println!("  failures: {} crash points", r.failures.len());
    for f in r.failures.iter().take(20) {
        println!("  point {} at {} ({:?}):", f.point, Nanos(f.t_ns), f.kind);
        for p in f.problems.iter().take(10) {
            println!("    {p}");
        }
        println!("    reproduce: {}", f.reproduce);
    }
}
