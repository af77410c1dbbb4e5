//! Runs of every workload on the reference file system (MemFs): counts, verification,
//! determinism, utilization targets, and a corrupting file system that must be caught.

use super::*;
use std::cell::Cell;
use zonelab_device::{OwnedData, PayloadMode};
use zonelab_lfs::vfs::{Attr, DirEntry, FsResult, Ino, SetAttr, StatFs};
use zonelab_lfs::{MemFs, MemFsConfig};
use zonelab_sim::Nanos;

const MODES: [PayloadMode; 2] = [PayloadMode::Full, PayloadMode::Fingerprint];

fn memfs(sim: &Sim, mode: PayloadMode, cap: u64, latency: Nanos) -> Rc<MemFs> {
    let mut cfg = MemFsConfig::new(mode, cap);
    cfg.op_latency = latency;
    Rc::new(MemFs::with_sim(cfg, sim.clone()))
}

fn cfg(mode: PayloadMode, seed: u64, run: Option<RunLength>) -> RunConfig {
    RunConfig {
        seed,
        payload: mode,
        run,
        ..RunConfig::default()
    }
}

/// A small version of `kind`: 200 files of 16 KiB, 4 threads, pieces of 8 KiB.
fn small(kind: &str) -> FsWorkload {
    let mut w = FsWorkload::new(kind).unwrap();
    for (k, v) in [
        ("nfiles", "200"),
        ("filesize", "16k"),
        ("nthreads", "4"),
        ("iosize", "8k"),
        ("numactivevids", "4"),
        ("numpassivevids", "6"),
        ("readiosize", "16k"),
        ("writeiosize", "64k"),
        ("repintval", "20ms"),
        ("eventrate", "50"),
    ] {
        w.set(k, v).unwrap();
    }
    if kind == "videoserver" {
        w.set("filesize", "256k").unwrap();
    }
    w
}

fn run_on(fs: Rc<MemFs>, sim: &Sim, w: FsWorkload, c: RunConfig) -> FsWorkloadResult<FsReport> {
    let r = run_blocking(sim, fs.clone(), w, c);
    fs.check().expect("MemFs invariants hold after the run");
    r
}

fn ops_of(r: &FsReport, op: &str) -> u64 {
    r.throughput.by_op.get(op).map_or(0, |o| o.ops)
}

#[test]
fn filebench_personalities_run_and_verify_in_both_modes() {
    let expect: [(&str, &[&str]); 4] = [
        (
            "fileserver",
            &[
                "createfile",
                "writewholefile",
                "closefile",
                "openfile",
                "appendfilerand",
                "readwholefile",
                "deletefile",
                "statfile",
            ],
        ),
        (
            "varmail",
            &[
                "deletefile",
                "createfile",
                "appendfilerand",
                "fsync",
                "closefile",
                "openfile",
                "readwholefile",
            ],
        ),
        (
            "webserver",
            &["openfile", "readwholefile", "closefile", "appendfilerand"],
        ),
        (
            "videoserver",
            &[
                "openfile",
                "read",
                "deletefile",
                "createfile",
                "writewholefile",
                "closefile",
            ],
        ),
    ];
    for mode in MODES {
        for (kind, ops) in expect {
            let sim = Sim::new();
            let fs = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
            let n = 3_000;
            let r = run_on(fs, &sim, small(kind), cfg(mode, 7, Some(RunLength::Ops(n))))
                .unwrap_or_else(|e| panic!("{kind} {mode:?}: {e}"));
            assert_eq!(r.workload, kind);
            assert_eq!(r.throughput.ops, n, "{kind} {mode:?}");
            for op in ops {
                assert!(
                    ops_of(&r, op) > 0,
                    "{kind} {mode:?}: no {op} in {:?}",
                    r.throughput.by_op.keys()
                );
            }
            assert!(r.verify.reads_checked > 0, "{kind}");
            assert_eq!(r.verify.mismatches, 0);
            assert!(r.bytes_read > 0, "{kind}");
            let by: u64 = r.throughput.by_op.values().map(|o| o.bytes_read).sum();
            assert_eq!(by, r.bytes_read);
            assert!(r.setup.files_created > 0);
        }
    }
}

#[test]
fn fileserver_flowops_come_in_filebench_proportions() {
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::ZERO);
    let r = run_on(
        fs,
        &sim,
        small("fileserver"),
        cfg(PayloadMode::Fingerprint, 3, Some(RunLength::Ops(11_000))),
    )
    .unwrap();
    // One loop: 11 flowops, three of them closes and two opens.
    let create = ops_of(&r, "createfile");
    assert!((990..=1010).contains(&create), "{create} creates");
    assert!(ops_of(&r, "closefile").abs_diff(3 * create) <= 12);
    assert!(ops_of(&r, "openfile").abs_diff(2 * create) <= 8);
    let skipped = r
        .counters
        .get("deletefile_skipped_open")
        .copied()
        .unwrap_or(0);
    assert!(ops_of(&r, "deletefile") + skipped >= create - 4);
    // Appends are uniform in [0, 16 KiB) rounded up to blocks: mean about 10 KiB.
    let a = &r.throughput.by_op["appendfilerand"];
    let mean = a.bytes_written as f64 / a.ops as f64;
    assert!((6_000.0..14_000.0).contains(&mean), "mean append {mean}");
}

#[test]
fn same_seed_gives_identical_json() {
    for kind in ["fileserver", "varmail", "webserver", "videoserver"] {
        let once = |seed| {
            let sim = Sim::new();
            let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos(2_000));
            run_on(
                fs,
                &sim,
                small(kind),
                cfg(PayloadMode::Fingerprint, seed, Some(RunLength::Ops(1_500))),
            )
            .unwrap()
            .to_json()
        };
        let a = once(11);
        assert_eq!(a, once(11), "{kind}");
        assert_ne!(a, once(12), "{kind}");
    }
}

/// As in filebench, only the preallocated share of a fileset has to fit before the run: a
/// fileset larger than the file system runs when its 80% fits, and is refused when all of it
/// would be preallocated.
#[test]
fn a_fileset_may_outgrow_the_file_system_by_what_it_leaves_absent() {
    let cap = 3u64 << 20;
    let try_run = |prealloc: &str| {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, cap, Nanos::ZERO);
        let mut w = small("fileserver");
        w.set("filesizegamma", "0").unwrap();
        w.set("prealloc", prealloc).unwrap();
        run_on(
            fs,
            &sim,
            w,
            cfg(PayloadMode::Fingerprint, 3, Some(RunLength::Ops(100))),
        )
    };
    // 200 files of 16 KiB: 3.125 MiB against 3 MiB.
    let r = try_run("80").unwrap();
    assert!(r.fileset.fileset_bytes > cap, "{:?}", r.fileset);
    assert!(r.fileset.preallocated_bytes < cap, "{:?}", r.fileset);
    match try_run("100") {
        Err(FsWorkloadError::Config(m)) => {
            assert!(m.contains("preallocated files need"), "{m}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn utilization_targets_are_met() {
    let cap = 32u64 << 20;
    for (kind, pre) in [("fileserver", 0.8), ("varmail", 0.8), ("webserver", 1.0)] {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, cap, Nanos::ZERO);
        let mut w = small(kind);
        w.set("filesize", "64k").unwrap();
        w.set("utilization", "0.5").unwrap();
        let r = run_on(
            fs,
            &sim,
            w,
            cfg(PayloadMode::Fingerprint, 5, Some(RunLength::Ops(200))),
        )
        .unwrap();
        let f = &r.fileset;
        assert_eq!(f.capacity_bytes, cap);
        assert_eq!(f.target_utilization, Some(0.5));
        assert!(
            f.fileset_bytes as f64 <= 0.5 * cap as f64 + 64.0 * 1024.0 * 2.0,
            "{kind}"
        );
        // Within a few files (gamma sizes) of the target.
        assert!(
            f.utilization > 0.47 && f.utilization <= 0.51,
            "{kind}: {}",
            f.utilization
        );
        // Preallocation fills its share of the fileset.
        let want = pre * f.utilization;
        assert!(
            (f.used_after_setup - want).abs() < 0.06,
            "{kind}: used {} want {want}",
            f.used_after_setup
        );
        assert!(f.files > 200, "{kind}: the count follows the capacity");
    }
    // videoserver: both video sets scale, in filebench's ratio.
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Fingerprint, cap, Nanos::ZERO);
    let mut w = small("videoserver");
    w.set("filesize", "512k").unwrap();
    w.set("utilization", "0.9").unwrap();
    let r = run_on(
        fs,
        &sim,
        w,
        cfg(PayloadMode::Fingerprint, 5, Some(RunLength::Ops(100))),
    )
    .unwrap();
    assert_eq!(r.fileset.files, 57);
    assert!((r.fileset.utilization - 57.0 * 0.5 / 32.0).abs() < 1e-9);
}

/// Wraps a file system and corrupts what one read returns.
struct Corrupting<F> {
    inner: Rc<F>,
    reads: Cell<u64>,
    corrupt_read: u64,
}

impl<F: FileSystem> FileSystem for Corrupting<F> {
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr> {
        self.inner.lookup(parent, name).await
    }
    async fn getattr(&self, ino: Ino) -> FsResult<Attr> {
        self.inner.getattr(ino).await
    }
    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr> {
        self.inner.setattr(ino, set).await
    }
    async fn create(&self, p: Ino, name: &str, perm: u16, uid: u32, gid: u32) -> FsResult<Attr> {
        self.inner.create(p, name, perm, uid, gid).await
    }
    async fn mkdir(&self, p: Ino, name: &str, perm: u16, uid: u32, gid: u32) -> FsResult<Attr> {
        self.inner.mkdir(p, name, perm, uid, gid).await
    }
    async fn symlink(&self, p: Ino, name: &str, t: &str, uid: u32, gid: u32) -> FsResult<Attr> {
        self.inner.symlink(p, name, t, uid, gid).await
    }
    async fn readlink(&self, ino: Ino) -> FsResult<String> {
        self.inner.readlink(ino).await
    }
    async fn link(&self, ino: Ino, np: Ino, nn: &str) -> FsResult<Attr> {
        self.inner.link(ino, np, nn).await
    }
    async fn unlink(&self, p: Ino, name: &str) -> FsResult<()> {
        self.inner.unlink(p, name).await
    }
    async fn rmdir(&self, p: Ino, name: &str) -> FsResult<()> {
        self.inner.rmdir(p, name).await
    }
    async fn rename(&self, p: Ino, n: &str, np: Ino, nn: &str) -> FsResult<()> {
        self.inner.rename(p, n, np, nn).await
    }
    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>> {
        self.inner.readdir(ino).await
    }
    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData> {
        let mut d = self.inner.read(ino, off, len).await?;
        let n = self.reads.get() + 1;
        self.reads.set(n);
        if n >= self.corrupt_read {
            let flipped = match &mut d {
                OwnedData::Bytes(b) if b.len() > 100 => {
                    b[100] ^= 0x20;
                    true
                }
                OwnedData::Fingerprints(f) if !f.is_empty() => {
                    let last = f.len() - 1;
                    f[last] ^= 1;
                    true
                }
                OwnedData::Fingerprint(f) => {
                    *f ^= 1;
                    true
                }
                _ => false,
            };
            if flipped {
                self.reads.set(0);
            }
        }
        Ok(d)
    }
    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64> {
        self.inner.write(ino, off, data).await
    }
    async fn fsync(&self, ino: Ino, datasync: bool) -> FsResult<()> {
        self.inner.fsync(ino, datasync).await
    }
    async fn sync(&self) -> FsResult<()> {
        self.inner.sync().await
    }
    fn statfs(&self) -> StatFs {
        self.inner.statfs()
    }
}

#[test]
fn a_corrupted_read_is_caught_and_named() {
    for mode in MODES {
        for kind in ["fileserver", "varmail", "webserver", "videoserver"] {
            let sim = Sim::new();
            let inner = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
            let fs = Rc::new(Corrupting {
                inner,
                reads: Cell::new(0),
                corrupt_read: 25,
            });
            let err = run_blocking(
                &sim,
                fs,
                small(kind),
                cfg(mode, 1, Some(RunLength::Ops(3_000))),
            )
            .unwrap_err();
            let FsWorkloadError::Mismatch {
                file,
                offset,
                expected,
                got,
            } = &err
            else {
                panic!("{kind} {mode:?}: expected a mismatch, got {err}");
            };
            assert!(
                ["/bigfileset/", "/activevids/", "/logfiles/"]
                    .iter()
                    .any(|p| file.starts_with(p)),
                "{file}"
            );
            assert_ne!(expected, got);
            let msg = err.to_string();
            assert!(
                msg.contains(file) && msg.contains(&format!("offset {offset}")),
                "{msg}"
            );
        }
    }
    // Without stopping, mismatches are counted.
    let sim = Sim::new();
    let inner = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::ZERO);
    let fs = Rc::new(Corrupting {
        inner,
        reads: Cell::new(0),
        corrupt_read: 10,
    });
    let mut c = cfg(PayloadMode::Fingerprint, 1, Some(RunLength::Ops(2_000)));
    c.stop_on_mismatch = false;
    let r = run_blocking(&sim, fs, small("fileserver"), c).unwrap();
    assert!(r.verify.mismatches > 10, "{:?}", r.verify);
    assert!(r.verify.reads_checked > r.verify.mismatches);
}

#[test]
fn fio_jobs_make_one_pass_and_verify() {
    for mode in MODES {
        for rw in ["read", "write", "randread", "randwrite"] {
            let sim = Sim::new();
            let fs = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
            let mut w = FsWorkload::new("fio").unwrap();
            for (k, v) in [
                ("rw", rw),
                ("bs", "8k"),
                ("size", "1m"),
                ("numjobs", "3"),
                ("fsync", "16"),
            ] {
                w.set(k, v).unwrap();
            }
            let r = run_on(fs.clone(), &sim, w, cfg(mode, 2, None)).unwrap();
            let dir = if rw.contains("read") { "read" } else { "write" };
            assert_eq!(ops_of(&r, dir), 3 * 128, "{rw} {mode:?}");
            if dir == "read" {
                assert_eq!(r.verify.reads_checked, 3 * 128);
                assert_eq!(r.bytes_read, 3 << 20);
                assert_eq!(ops_of(&r, "fsync"), 0);
            } else {
                assert_eq!(r.bytes_written, 3 << 20);
                assert_eq!(ops_of(&r, "fsync"), 3 * 8);
            }
            // Every file is whole, every block written once by the job or the layout.
            let st = fs.statfs();
            assert_eq!(st.blocks - st.blocks_free, 3 * 256, "{rw}");
            assert_eq!(r.fileset.files, 3);
        }
    }
}

#[test]
fn timed_runs_follow_virtual_time() {
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::from_us(10));
    let mut w = FsWorkload::new("fio").unwrap();
    w.set("rw", "randread").unwrap();
    w.set("size", "4m").unwrap();
    w.set("numjobs", "2").unwrap();
    let mut c = cfg(
        PayloadMode::Fingerprint,
        9,
        Some(RunLength::Time(Nanos::from_ms(10))),
    );
    c.warmup = Nanos::from_ms(5);
    let r = run_on(fs, &sim, w, c).unwrap();
    // Two jobs, one 10 us read at a time each: about 1000 reads each in 10 ms.
    let reads = ops_of(&r, "read");
    assert!((1990..=2002).contains(&reads), "{reads}");
    assert!(
        (r.simulated_secs - 0.01).abs() < 1e-4,
        "{}",
        r.simulated_secs
    );
    let lat = &r.throughput.by_op["read"].lat_ns;
    assert_eq!((lat.p50, lat.p999), (10_000, 10_000));
    assert!((r.throughput.ops_per_sec - 200_000.0).abs() < 2_000.0);
    // Reads during the warm-up were checked but are not in the figures.
    assert!(r.verify.reads_checked > reads + 900);
}

/// A warm-up gate holds the measured window until it says the system is warm, and a gate that
/// never opens fails the run with its reason once its limit passes.
#[test]
fn warm_gate_delays_the_window_and_fails_past_its_limit() {
    let run = |ready_at: Nanos, limit: Nanos| {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::from_us(10));
        let mut w = FsWorkload::new("fio").unwrap();
        w.set("rw", "randread").unwrap();
        w.set("size", "4m").unwrap();
        let mut c = cfg(
            PayloadMode::Fingerprint,
            9,
            Some(RunLength::Time(Nanos::from_ms(10))),
        );
        c.warmup = Nanos::from_ms(5);
        let s = sim.clone();
        let start = Rc::new(Cell::new(None::<Nanos>));
        let st = start.clone();
        c.on_measure = Some(MeasureHook(Rc::new(move || st.set(Some(s.now())))));
        let s = sim.clone();
        c.warm_until = Some(WarmGate {
            ready: Rc::new(move || s.now() >= ready_at),
            limit,
            what: "the test's instant".into(),
        });
        let r = run_on(fs, &sim, w, c);
        (r, start.get())
    };
    let (r, opened) = run(Nanos::from_ms(43), Nanos::from_secs(1));
    let r = r.unwrap();
    // The fileset is built at some instant t0; the window opens at the first 10 ms check at
    // or after 43 ms, measured from t0 + 5 ms, and lasts 10 ms.
    let opened = opened.expect("window opened");
    assert!(opened >= Nanos::from_ms(43), "{opened}");
    assert!(opened < Nanos::from_ms(43) + WarmGate::POLL, "{opened}");
    assert!(
        (r.simulated_secs - 0.01).abs() < 1e-4,
        "{}",
        r.simulated_secs
    );
    let (r, opened) = run(Nanos::MAX, Nanos::from_ms(50));
    assert_eq!(opened, None);
    let e = r.expect_err("the gate never opens").to_string();
    assert!(e.contains("the test's instant"), "{e}");
}

#[test]
fn mdtest_creates_stats_reads_and_removes() {
    for mode in MODES {
        let sim = Sim::new();
        let fs = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
        let mut w = FsWorkload::new("mdtest").unwrap();
        for (k, v) in [
            ("threads", "4"),
            ("files_per_thread", "50"),
            ("file_size", "32k"),
            ("stat", "1"),
            ("read", "1"),
        ] {
            w.set(k, v).unwrap();
        }
        let r = run_on(fs.clone(), &sim, w.clone(), cfg(mode, 4, None)).unwrap();
        for op in ["file_create", "file_stat", "file_read"] {
            assert_eq!(ops_of(&r, op), 200, "{op}");
        }
        assert_eq!(r.bytes_written, 200 * 32 * 1024);
        assert_eq!(r.verify.reads_checked, 200);
        assert_eq!(fs.inode_count(), 1 + 1 + 4 + 200);
        // With removal everything goes again.
        let sim = Sim::new();
        let fs = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
        w.set("remove", "1").unwrap();
        let r = run_on(fs.clone(), &sim, w, cfg(mode, 4, None)).unwrap();
        assert_eq!(ops_of(&r, "file_remove"), 200);
        assert_eq!(fs.inode_count(), 1 + 1 + 4);
    }
}

#[test]
fn presets_carry_the_papers_parameters() {
    let FsWorkload::Filebench(f) = FsWorkload::preset("fileserver", Preset::Seed000).unwrap()
    else {
        panic!()
    };
    assert_eq!(
        (f.nfiles, f.nthreads, f.filesize.mean()),
        (112_500, 50, 128 << 10)
    );
    let FsWorkload::Filebench(v) = FsWorkload::preset("varmail", Preset::Seed000).unwrap() else {
        panic!()
    };
    assert_eq!(
        (v.nfiles, v.nthreads, v.filesize.mean()),
        (475_000, 16, 28 << 10)
    );
    assert!(FsWorkload::preset("webserver", Preset::Seed000).is_err());
    for (kind, size) in [
        ("fileserver", 16u64 << 20),
        ("varmail", 1 << 20),
        ("webserver", 1 << 20),
        ("videoserver", 1 << 30),
    ] {
        let FsWorkload::Filebench(p) = FsWorkload::preset(kind, Preset::Seed002).unwrap() else {
            panic!()
        };
        assert_eq!((p.nthreads, p.filesize.mean()), (16, size), "{kind}");
    }
    let FsWorkload::Mdtest(m) = FsWorkload::preset("mdtest", Preset::Seed002).unwrap() else {
        panic!()
    };
    assert_eq!(m.threads as u64 * m.files_per_thread, 1_000_000);
    let mut w = FsWorkload::new("varmail").unwrap();
    assert!(w.set("bogus", "1").is_err());
    assert!(FsWorkload::new("tpc-h").is_err());
}

#[test]
fn filebench_needs_a_run_length_and_a_fileset() {
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Full, 1 << 20, Nanos::ZERO);
    let e = run_blocking(
        &sim,
        fs,
        small("fileserver"),
        cfg(PayloadMode::Full, 1, None),
    );
    let msg = match e {
        Err(FsWorkloadError::Config(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(
        msg.contains("[run] table, duration = \"8s\" or ops = "),
        "{msg}"
    );
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Full, 1 << 20, Nanos::ZERO);
    let mut w = small("fileserver");
    w.set("filesize", "4m").unwrap();
    w.set("utilization", "0.5").unwrap();
    let e = run_blocking(
        &sim,
        fs,
        w,
        cfg(PayloadMode::Full, 1, Some(RunLength::Ops(10))),
    );
    assert!(matches!(e, Err(FsWorkloadError::Config(_))), "{e:?}");
    // Files of no bytes never fill a share of the capacity: refused, not drawn forever.
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Full, 1 << 20, Nanos::ZERO);
    let mut w = small("fileserver");
    w.set("filesize", "0").unwrap();
    w.set("utilization", "0.5").unwrap();
    let e = run_blocking(
        &sim,
        fs,
        w,
        cfg(PayloadMode::Full, 1, Some(RunLength::Ops(10))),
    );
    assert!(
        matches!(&e, Err(FsWorkloadError::Config(m)) if m.contains("at least one byte")),
        "{e:?}"
    );
}

/// Wraps a file system and delays every call by a pseudo-random time before and after it,
/// so that threads overlap in every order.
struct Jittery<F> {
    inner: Rc<F>,
    sim: Sim,
    state: Cell<u64>,
}

impl<F> Jittery<F> {
    async fn jitter(&self) {
        let x = self
            .state
            .get()
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.state.set(x);
        self.sim.sleep(Nanos((x >> 33) % 20_000)).await;
    }
}

macro_rules! jittered {
    ($self:ident, $call:expr) => {{
        $self.jitter().await;
        let r = $call.await;
        $self.jitter().await;
        r
    }};
}

impl<F: FileSystem> FileSystem for Jittery<F> {
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr> {
        jittered!(self, self.inner.lookup(parent, name))
    }
    async fn getattr(&self, ino: Ino) -> FsResult<Attr> {
        jittered!(self, self.inner.getattr(ino))
    }
    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr> {
        jittered!(self, self.inner.setattr(ino, set))
    }
    async fn create(&self, p: Ino, name: &str, perm: u16, uid: u32, gid: u32) -> FsResult<Attr> {
        jittered!(self, self.inner.create(p, name, perm, uid, gid))
    }
    async fn mkdir(&self, p: Ino, name: &str, perm: u16, uid: u32, gid: u32) -> FsResult<Attr> {
        jittered!(self, self.inner.mkdir(p, name, perm, uid, gid))
    }
    async fn symlink(&self, p: Ino, name: &str, t: &str, uid: u32, gid: u32) -> FsResult<Attr> {
        jittered!(self, self.inner.symlink(p, name, t, uid, gid))
    }
    async fn readlink(&self, ino: Ino) -> FsResult<String> {
        jittered!(self, self.inner.readlink(ino))
    }
    async fn link(&self, ino: Ino, np: Ino, nn: &str) -> FsResult<Attr> {
        jittered!(self, self.inner.link(ino, np, nn))
    }
    async fn unlink(&self, p: Ino, name: &str) -> FsResult<()> {
        jittered!(self, self.inner.unlink(p, name))
    }
    async fn rmdir(&self, p: Ino, name: &str) -> FsResult<()> {
        jittered!(self, self.inner.rmdir(p, name))
    }
    async fn rename(&self, p: Ino, n: &str, np: Ino, nn: &str) -> FsResult<()> {
        jittered!(self, self.inner.rename(p, n, np, nn))
    }
    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>> {
        jittered!(self, self.inner.readdir(ino))
    }
    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData> {
        jittered!(self, self.inner.read(ino, off, len))
    }
    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64> {
        jittered!(self, self.inner.write(ino, off, data))
    }
    async fn fsync(&self, ino: Ino, datasync: bool) -> FsResult<()> {
        jittered!(self, self.inner.fsync(ino, datasync))
    }
    async fn sync(&self) -> FsResult<()> {
        jittered!(self, self.inner.sync())
    }
    fn statfs(&self) -> StatFs {
        self.inner.statfs()
    }
}

#[test]
fn many_threads_on_few_files_verify_without_false_alarms() {
    for kind in ["fileserver", "varmail", "webserver"] {
        for mode in MODES {
            let sim = Sim::new();
            let inner = memfs(&sim, mode, 64 << 20, Nanos::ZERO);
            let fs = Rc::new(Jittery {
                inner: inner.clone(),
                sim: sim.clone(),
                state: Cell::new(5),
            });
            let mut w = small(kind);
            w.set("nfiles", "100").unwrap();
            w.set("nthreads", "16").unwrap();
            let r = run_blocking(
                &sim,
                fs,
                w,
                cfg(mode, 8, Some(RunLength::Time(Nanos::from_ms(20)))),
            )
            .unwrap_or_else(|e| panic!("{kind} {mode:?}: {e}"));
            inner.check().unwrap();
            assert_eq!(r.verify.mismatches, 0);
            assert!(r.throughput.ops > 1_000, "{kind}: {} ops", r.throughput.ops);
            // Operations in flight at the deadline finish after it.
            assert!(
                (0.02..0.0215).contains(&r.simulated_secs),
                "{}",
                r.simulated_secs
            );
        }
    }
}

// ---- OLTP (tpcc, YCSB) ----

/// A small OLTP run: a 24 MiB database, a pool of 2 MiB (128 pages), 4 connections, two
/// redo files of 1 MiB, so that eviction, flushing and checkpoints all happen.
fn small_oltp(kind: &str) -> FsWorkload {
    let mut w = FsWorkload::new(kind).unwrap();
    for (k, v) in [
        ("db_size", "24m"),
        ("buffer_pool", "2m"),
        ("connections", "4"),
        ("log_file_size", "1m"),
        ("cleaner_interval", "20ms"),
    ] {
        w.set(k, v).unwrap();
    }
    w
}

fn counter(r: &FsReport, c: &str) -> u64 {
    r.counters.get(c).copied().unwrap_or(0)
}

const OLTP: [&str; 3] = ["tpcc", "ycsb-a", "ycsb-f"];

#[test]
fn oltp_runs_verify_and_flush_through_the_doublewrite_buffer() {
    for mode in MODES {
        for kind in OLTP {
            let sim = Sim::new();
            let fs = memfs(&sim, mode, 64 << 20, Nanos::from_us(20));
            let n = 1_500;
            let r = run_on(
                fs,
                &sim,
                small_oltp(kind),
                cfg(mode, 3, Some(RunLength::Ops(n))),
            )
            .unwrap_or_else(|e| panic!("{kind} {mode:?}: {e}"));
            assert_eq!(r.workload, kind);
            assert_eq!(
                r.throughput.ops, n,
                "{kind}: transactions are the operations"
            );
            assert_eq!(r.threads, 4);
            assert_eq!(r.verify.mismatches, 0);
            assert!(r.verify.reads_checked > 100, "{kind}: {:?}", r.verify);
            assert_eq!(counter(&r, "page_reads"), r.verify.reads_checked, "{kind}");
            assert!(counter(&r, "buffer_pool_misses") > 0 && counter(&r, "buffer_pool_hits") > 0);
            // Dirty pages went out through the doublewrite buffer, each batch synced.
            let pw = counter(&r, "page_writes");
            assert!(pw > 0, "{kind}: {:?}", r.counters);
            assert_eq!(counter(&r, "doublewrite_pages"), pw, "{kind}");
            assert!(counter(&r, "data_fsyncs") >= 2 * counter(&r, "doublewrite_writes"));
            assert!(counter(&r, "checkpoints") > 0, "{kind}: {:?}", r.counters);
            assert!(counter(&r, "max_checkpoint_age_bytes") <= counter(&r, "log_capacity_bytes"));
            // Every byte the engine moved is in the totals.
            assert_eq!(
                r.bytes_written,
                counter(&r, "redo_bytes_written")
                    + (counter(&r, "doublewrite_pages") + pw) * 16_384
                    + counter(&r, "checkpoints") * 4096
            );
            assert_eq!(r.bytes_read, counter(&r, "page_reads") * 16_384);
            let files = ["ibdata1", "ib_logfile0", "ib_logfile1"].len() as u64;
            let tables = if kind == "tpcc" { 9 } else { 1 };
            assert_eq!(r.fileset.files, files + tables);
        }
    }
}

#[test]
fn oltp_same_seed_gives_identical_json() {
    for kind in OLTP {
        let once = |seed| {
            let sim = Sim::new();
            let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos(3_000));
            run_on(
                fs,
                &sim,
                small_oltp(kind),
                cfg(PayloadMode::Fingerprint, seed, Some(RunLength::Ops(600))),
            )
            .unwrap()
            .to_json()
        };
        let a = once(21);
        assert_eq!(a, once(21), "{kind}");
        assert_ne!(a, once(22), "{kind}");
    }
}

#[test]
fn oltp_transaction_mixes_come_out() {
    let n = 6_000u64;
    let share = |r: &FsReport, op: &str| ops_of(r, op) as f64 / n as f64;
    let go = |kind: &str| {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos(2_000));
        let mut w = small_oltp(kind);
        w.set("buffer_pool", "8m").unwrap();
        run_on(
            fs,
            &sim,
            w,
            cfg(PayloadMode::Fingerprint, 5, Some(RunLength::Ops(n))),
        )
        .unwrap()
    };
    let r = go("tpcc");
    for (op, want) in [
        ("new_order", 0.45),
        ("payment", 0.43),
        ("order_status", 0.04),
        ("delivery", 0.04),
        ("stock_level", 0.04),
    ] {
        let s = share(&r, op);
        assert!((s - want).abs() < 0.02, "tpcc {op}: {s} vs {want}");
    }
    // Read-only transactions commit nothing.
    assert_eq!(
        counter(&r, "commits"),
        ops_of(&r, "new_order") + ops_of(&r, "payment") + ops_of(&r, "delivery")
    );
    // New orders insert: pages are created at the end of the growing tables.
    assert!(counter(&r, "pages_created") > 0);
    for (kind, write) in [("ycsb-a", "update"), ("ycsb-f", "read_modify_write")] {
        let r = go(kind);
        assert_eq!(ops_of(&r, "read") + ops_of(&r, write), n, "{kind}");
        let s = share(&r, "read");
        assert!((s - 0.5).abs() < 0.02, "{kind}: reads {s}");
        assert_eq!(counter(&r, "commits"), ops_of(&r, write));
        // Zipfian keys: the pool holds the hot records.
        let hits = counter(&r, "buffer_pool_hits") as f64;
        let misses = counter(&r, "buffer_pool_misses") as f64;
        assert!(
            hits / (hits + misses) > 0.5,
            "{kind}: hit ratio {}",
            hits / (hits + misses)
        );
    }
}

#[test]
fn every_commit_syncs_the_redo_log_and_concurrent_commits_share_it() {
    let go = |connections: &str| {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::from_us(50));
        let mut w = small_oltp("ycsb-a");
        // A pool larger than the database and no cleaner rounds: the only log writes are
        // the commits'.
        for (k, v) in [
            ("buffer_pool", "32m"),
            ("log_file_size", "8m"),
            ("cleaner_interval", "1000s"),
            ("connections", connections),
        ] {
            w.set(k, v).unwrap();
        }
        run_on(
            fs,
            &sim,
            w,
            cfg(PayloadMode::Fingerprint, 9, Some(RunLength::Ops(400))),
        )
        .unwrap()
    };
    let one = go("1");
    let commits = counter(&one, "commits");
    assert_eq!(commits, ops_of(&one, "update"));
    assert!(commits > 150);
    assert_eq!(counter(&one, "redo_fsyncs"), commits, "{:?}", one.counters);
    assert_eq!(counter(&one, "redo_writes"), commits);
    assert_eq!(counter(&one, "page_writes"), 0);
    // An update's latency includes its log write and fsync (two 50 us calls at least).
    assert!(one.throughput.by_op["update"].lat_ns.p50 >= 100_000);
    assert!(one.throughput.by_op["read"].lat_ns.p50 < 100_000);
    // Sixteen connections: commits group behind one leader's write and fsync.
    let many = go("16");
    let commits = counter(&many, "commits");
    let fsyncs = counter(&many, "redo_fsyncs");
    assert!(
        fsyncs * 2 < commits,
        "{fsyncs} fsyncs for {commits} commits"
    );
    assert!(fsyncs > 0);
}

#[test]
fn a_small_redo_log_forces_checkpoints_and_flushing() {
    let sim = Sim::new();
    let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::from_us(10));
    let mut w = small_oltp("tpcc");
    w.set("buffer_pool", "16m").unwrap();
    w.set("log_file_size", "256k").unwrap();
    w.set("cleaner_interval", "10s").unwrap();
    let r = run_on(
        fs,
        &sim,
        w,
        cfg(PayloadMode::Fingerprint, 2, Some(RunLength::Ops(1_500))),
    )
    .unwrap();
    // The log wraps many times; user threads stop at the sync limit and the cleaner flushes
    // the oldest pages to move the checkpoint.
    let cap = counter(&r, "log_capacity_bytes");
    assert!(
        counter(&r, "redo_bytes_written") > 3 * cap,
        "{:?}",
        r.counters
    );
    assert!(counter(&r, "sync_flush_waits") > 0, "{:?}", r.counters);
    assert!(counter(&r, "checkpoints") > 3);
    assert!(counter(&r, "flush_list_pages") > 0);
    assert!(counter(&r, "max_checkpoint_age_bytes") <= cap);
    assert_eq!(r.verify.mismatches, 0);
}

#[test]
fn oltp_corrupted_page_reads_are_caught() {
    for kind in ["tpcc", "ycsb-a"] {
        let sim = Sim::new();
        let inner = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::from_us(5));
        let fs = Rc::new(Corrupting {
            inner,
            reads: Cell::new(0),
            corrupt_read: 30,
        });
        let err = run_blocking(
            &sim,
            fs,
            small_oltp(kind),
            cfg(PayloadMode::Fingerprint, 1, Some(RunLength::Ops(2_000))),
        )
        .unwrap_err();
        let FsWorkloadError::Mismatch { file, offset, .. } = &err else {
            panic!("{kind}: expected a mismatch, got {err}");
        };
        assert!(
            file.starts_with("/mysql/") && file.ends_with(".ibd"),
            "{file}"
        );
        assert_eq!(offset % 4096, 0);
    }
}

#[test]
fn oltp_parameters_are_checked() {
    let mut w = FsWorkload::new("tpcc").unwrap();
    assert!(w.set("connections", "0").is_err());
    assert!(w.set("zipf_theta", "1").is_err());
    assert!(w.set("flush_method", "nosync").is_err());
    assert!(w.set("bogus", "1").is_err());
    assert!(FsWorkload::preset("ycsb-a", Preset::Seed002).is_err());
    let try_run = |sets: &[(&str, &str)], run: Option<RunLength>| {
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos(1_000));
        let mut w = small_oltp("ycsb-a");
        for (k, v) in sets {
            w.set(k, v).unwrap();
        }
        run_blocking(&sim, fs, w, cfg(PayloadMode::Fingerprint, 1, run))
    };
    let ops = Some(RunLength::Ops(10));
    for (sets, what) in [
        (&[("page_size", "12k")][..], "page_size"),
        (&[("db_size", "1g")][..], "more than the file system"),
        (&[("buffer_pool", "64k")][..], "connections need"),
        (&[("record_size", "40000")][..], "does not fit"),
        (&[("log_file_size", "8k")][..], "log_file_size"),
        (&[("io_capacity", "5000")][..], "io_capacity_max"),
        (&[("utilization", "0.01")][..], "leaves no room"),
    ] {
        match try_run(sets, ops) {
            Err(FsWorkloadError::Config(m)) => assert!(m.contains(what), "{sets:?}: {m}"),
            other => panic!("{sets:?}: {other:?}"),
        }
    }
    assert!(matches!(
        try_run(&[], None),
        Err(FsWorkloadError::Config(_))
    ));
}

#[test]
fn oltp_presets_and_sizing_follow_seed_000() {
    for (kind, conns) in [("tpcc", 16), ("ycsb-a", 32), ("ycsb-f", 32)] {
        let FsWorkload::Oltp(p) = FsWorkload::preset(kind, Preset::Seed000).unwrap() else {
            panic!()
        };
        assert_eq!(p.connections, conns);
        assert_eq!(p.utilization, Some(0.9));
        assert_eq!(p.page_size, 16 << 10);
        // At the paper's scale: 1 GiB pool, InnoDB's 2 x 48 MiB log, about 12.9 GiB of
        // tables in 90% of 16 GiB.
        let lay = super::oltp::resolve_for_tests(&p, 16 << 30).unwrap();
        assert_eq!(lay.0, 1 << 30, "{kind} pool");
        assert_eq!(lay.1, 48 << 20, "{kind} log");
        let total = lay.2 as f64 / (16u64 << 30) as f64;
        assert!((total - 0.9).abs() < 0.001, "{kind}: {total}");
        // A small file system: the pool is a twelfth of the database, the log scales with it.
        let small = super::oltp::resolve_for_tests(&p, 600 << 20).unwrap();
        assert!((40 << 20..46 << 20).contains(&small.0), "{}", small.0);
        assert_eq!(small.1, 4 << 20);
    }
    let FsWorkload::Oltp(p) = FsWorkload::new("tpcc").unwrap() else {
        panic!()
    };
    assert_eq!(p.db_size, 12 << 30);
    assert_eq!(p.utilization, None);
}

mod oltp_props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]
        /// Whatever the sizes and the interleaving, pages read back are what was last
        /// written, the checkpoint age stays within the log, and the budget is exact.
        #[test]
        fn oltp_invariants_hold(
            seed in 0u64..1_000,
            kind in 0usize..3,
            conns in 1u32..6,
            pool_pages in 110u64..400,
            log_kib in 128u64..1024,
        ) {
            let sim = Sim::new();
            let inner = memfs(&sim, PayloadMode::Fingerprint, 64 << 20, Nanos::ZERO);
            let fs = Rc::new(Jittery { inner: inner.clone(), sim: sim.clone(), state: Cell::new(seed) });
            let mut w = small_oltp(OLTP[kind]);
            w.set("connections", &conns.to_string()).unwrap();
            w.set("buffer_pool", &format!("{}k", pool_pages * 16)).unwrap();
            w.set("log_file_size", &format!("{log_kib}k")).unwrap();
            let r = run_blocking(&sim, fs, w, cfg(PayloadMode::Fingerprint, seed, Some(RunLength::Ops(300))))
                .unwrap();
            inner.check().unwrap();
            prop_assert_eq!(r.throughput.ops, 300);
            prop_assert_eq!(r.verify.mismatches, 0);
            prop_assert!(counter(&r, "max_checkpoint_age_bytes") <= counter(&r, "log_capacity_bytes"));
            prop_assert!(counter(&r, "resident_pages_at_end") <= pool_pages);
        }
    }
}

/// Thread counts are bounded where they are set, before anything is allocated for them (a
/// million threads used to run for minutes, exhausting memory, before an error); a count
/// past u32 is refused rather than wrapped.
#[test]
fn every_workload_bounds_its_thread_count() {
    for kind in ["fileserver", "varmail", "mdtest", "fio", "tpcc", "ycsb-a"] {
        let mut w = FsWorkload::new(kind).unwrap();
        w.set("threads", "4096").unwrap();
        for bad in ["0", "4097", "1000000", "4294967297"] {
            let e = w.set("threads", bad).unwrap_err();
            assert!(e.contains("use 1 to 4096"), "{kind} threads={bad}: {e}");
        }
    }
    let mut w = FsWorkload::new("fileserver").unwrap();
    let e = w.set("prealloc", "4294967396").unwrap_err();
    assert!(e.contains("percentage"), "{e}");
}

#[test]
fn gamma_shapes_must_not_be_negative() {
    let mut w = FsWorkload::new("fileserver").unwrap();
    for key in ["dirgamma", "filesizegamma"] {
        w.set(key, "0").unwrap();
        w.set(key, "2.5").unwrap();
        for bad in ["-1", "NaN", "inf"] {
            let e = w.set(key, bad).unwrap_err();
            assert!(e.contains("positive gamma shape"), "{key}={bad}: {e}");
        }
    }
}

/// With one passive video, preallocated with a chance of one half, some seeds start with none:
/// the writer's first delete finds no file and the run stops, as filebench's "could not obtain
/// a file", with the parameter to raise.
#[test]
fn a_videoserver_without_passive_videos_names_the_parameter_to_raise() {
    let mut seen = (false, false);
    for seed in 1..40 {
        let mut w = small("videoserver");
        w.set("numpassivevids", "1").unwrap();
        let sim = Sim::new();
        let fs = memfs(&sim, PayloadMode::Fingerprint, 1 << 30, Nanos(1000));
        match run_on(
            fs,
            &sim,
            w,
            cfg(PayloadMode::Fingerprint, seed, Some(RunLength::Ops(50))),
        ) {
            Ok(_) => seen.0 = true,
            Err(e) => {
                let e = e.to_string();
                assert!(
                    e.contains("deletefile found no existing file in fileset passivevids")
                        && e.contains("increase numpassivevids"),
                    "{e}"
                );
                seen.1 = true;
            }
        }
    }
    assert_eq!(
        seen,
        (true, true),
        "some seeds preallocate the video, some do not"
    );
}
