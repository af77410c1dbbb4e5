//! End-to-end tests of the file system on a small simulated ZNS device.

use crate::dev::Devices;
use crate::fs::{Fs, FsOptions};
use crate::gc_log::{CompactionMethod, GcEvent, Reclaim};
use crate::layout::FormatOptions;
use crate::policy::{
    Allocation, CachedPages, ColdBenefit, F2fs, InStorage, Izc, Policy, ThreadedLogging,
    VictimKind, ZnsPlus,
};
use crate::segment::{Temp, ZoneUse};
use crate::vfs::{FileKind, FileSystem, FsError, Ino, ROOT_INO, SetAttr};
use std::rc::Rc;
use zonelab_device::{
    HostStack, IoCmd, IoEngine, IoScheduler, Lba, Namespace, OwnedData, PayloadMode, Profile,
};
use zonelab_sim::{Nanos, Sim};

/// A znsplus-mlc device shrunk to 40 zones of 2 MiB (512 blocks), 2 of them conventional.
pub(crate) fn small_device(payload: PayloadMode) -> (Sim, Rc<HostStack>) {
    small_device_with(payload, &[])
}

/// [`small_device`] with more profile overrides.
fn small_device_with(payload: PayloadMode, extra: &[(&str, &str)]) -> (Sim, Rc<HostStack>) {
    small_device_under(payload, extra, IoScheduler::MqDeadline)
}

/// [`small_device_with`] under the block-layer scheduler `scheduler`.
fn small_device_under(
    payload: PayloadMode,
    extra: &[(&str, &str)],
    scheduler: IoScheduler,
) -> (Sim, Rc<HostStack>) {
    let sets: Vec<(String, String)> = [
        ("zones", "40"),
        ("conventional_zones", "2"),
        ("pages_per_block", "8"),
        ("zone_size", "2MiB"),
        ("blocks_per_plane", "64"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let p = Profile::load("znsplus-mlc", &sets).expect("small profile");
    let sim = Sim::new();
    let ns = Namespace::new(p, payload).expect("device").shared();
    let stack = HostStack::new(sim.clone(), ns, IoEngine::IoUring, scheduler).expect("stack");
    (sim, stack)
}

/// A shrunk sn640 (conventional namespace, 2 dies of 64 blocks of 8 pages: about 3800
/// blocks of 4 KiB) on `sim`, with profile overrides `extra`.
fn companion_on(sim: &Sim, payload: PayloadMode, extra: &[(&str, &str)]) -> Rc<HostStack> {
    let sets: Vec<(String, String)> = [
        ("channels", "2"),
        ("chips_per_channel", "1"),
        ("dies_per_chip", "1"),
        ("blocks_per_plane", "64"),
        ("pages_per_block", "8"),
    ]
    .iter()
    .chain(extra)
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let p = Profile::load("sn640", &sets).expect("small companion profile");
    let ns = Namespace::new(p, payload).expect("companion").shared();
    HostStack::new(sim.clone(), ns, IoEngine::IoUring, IoScheduler::MqDeadline).expect("stack")
}

/// [`small_device`] without conventional zones (38 sequential zones, as many as the main area
/// of the small device) and a companion conventional device for the metadata.
fn small_device_with_companion(payload: PayloadMode, extra: &[(&str, &str)]) -> (Sim, Devices) {
    let mut sets = vec![("zones", "38"), ("conventional_zones", "0")];
    sets.extend_from_slice(extra);
    let (sim, zoned) = small_device_with(payload, &sets);
    let companion = companion_on(&sim, payload, extra);
    (sim, Devices::with_companion(zoned, companion))
}

/// A fresh file system (f2fs policy, test options) on `devices`.
async fn format<D: Clone + Into<Devices>>(sim: &Sim, devices: &D) -> Fs {
    format_with(sim, devices, Box::new(F2fs)).await
}

/// A fresh file system with `policy` on `devices`.
async fn format_with<D: Clone + Into<Devices>>(
    sim: &Sim,
    devices: &D,
    policy: Box<dyn Policy>,
) -> Fs {
    Fs::mkfs(
        sim.clone(),
        devices.clone(),
        FormatOptions::default(),
        opts(),
        policy,
    )
    .await
    .expect("mkfs")
}

/// Mounts the file system on `devices` again.
async fn remount<D: Clone + Into<Devices>>(sim: &Sim, devices: &D) -> Fs {
    Fs::mount(sim.clone(), devices.clone(), opts(), Box::new(F2fs))
        .await
        .expect("mount")
}

/// Creates files "f0".."f{n-1}" in the root, each written from offset 0 with `content(f)`;
/// returns their inodes.
async fn create_files(fs: &Fs, n: usize, content: impl Fn(usize) -> OwnedData) -> Vec<Ino> {
    let mut inos = Vec::with_capacity(n);
    for f in 0..n {
        let a = fs
            .create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
            .await
            .unwrap();
        fs.write(a.ino, 0, content(f)).await.unwrap();
        inos.push(a.ino);
    }
    inos
}

/// The content of file `f` of [`half_valid_zones`]: 16 blocks.
fn sixteen_blocks(f: usize) -> OwnedData {
    OwnedData::Fingerprints((0..16).map(|b| (f as u64) << 8 | b).collect())
}

/// Fills `tenths` tenths of the file system with 16-block files "f0".. ([`sixteen_blocks`]),
/// deletes every other one (the even ones) and syncs: zones become half valid. Returns the
/// files' inodes.
async fn half_valid_zones(fs: &Fs, tenths: u64) -> Vec<Ino> {
    let files = (fs.statfs().blocks * tenths / 10 / 16) as usize;
    let inos = create_files(fs, files, sixteen_blocks).await;
    for f in (0..files).step_by(2) {
        fs.unlink(ROOT_INO, &format!("f{f}")).await.unwrap();
    }
    fs.sync().await.unwrap();
    inos
}

pub(crate) fn opts() -> FsOptions {
    FsOptions {
        cache_bytes: 1 << 20,
        ..Default::default()
    }
}

/// A 64 MiB page cache that writes nothing back until its dirty pages near its size.
fn no_writeback_opts() -> FsOptions {
    FsOptions {
        cache_bytes: 64 << 20,
        dirty_background_ratio: 0.9,
        dirty_ratio: 0.95,
        ..opts()
    }
}

fn run<T: 'static>(sim: &Sim, f: impl std::future::Future<Output = T> + 'static) -> T {
    sim.block_on(f).expect("simulation finishes")
}

fn bytes(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn files_and_directories_survive_a_remount() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let d = fs.mkdir(ROOT_INO, "dir", 0o755, 1, 2).await.unwrap();
        let f = fs.create(d.ino, "a", 0o644, 1, 2).await.unwrap();
        assert_eq!(
            fs.write(f.ino, 100, OwnedData::Bytes(bytes(1, 10_000)))
                .await
                .unwrap(),
            10_000
        );
        let l = fs.symlink(ROOT_INO, "ln", "dir/a", 0, 0).await.unwrap();
        fs.link(f.ino, ROOT_INO, "hard").await.unwrap();
        assert_eq!(fs.getattr(f.ino).await.unwrap().nlink, 2);
        assert_eq!(
            fs.create(d.ino, "a", 0o644, 0, 0).await.unwrap_err(),
            FsError::Exists
        );
        fs.unmount().await.unwrap();
        assert!(fs.getattr(f.ino).await.is_err(), "unmounted");

        let fs = remount(&s, &stack).await;
        let a = fs.lookup(d.ino, "a").await.unwrap();
        assert_eq!(a.size, 10_100);
        assert_eq!(a.nlink, 2);
        let OwnedData::Bytes(got) = fs.read(a.ino, 0, 20_000).await.unwrap() else {
            panic!()
        };
        assert_eq!(got.len(), 10_100);
        assert!(got[..100].iter().all(|&b| b == 0), "hole reads as zeros");
        assert_eq!(&got[100..], &bytes(1, 10_000)[..]);
        assert_eq!(fs.readlink(l.ino).await.unwrap(), "dir/a");
        let names: Vec<String> = fs
            .readdir(ROOT_INO)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, ["dir", "hard", "ln"]);
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// Zones whose blocks all die are freed by the next checkpoint, without cleaning (F2FS's
/// prefree segments).
#[test]
fn zones_emptied_by_deletes_are_freed_without_cleaning() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let f = fs.create(ROOT_INO, "big", 0o644, 0, 0).await.unwrap();
        // Four zones of data (2 MiB each).
        for i in 0..4u64 {
            fs.write(f.ino, i << 21, OwnedData::Bytes(bytes(i as u8, 2 << 20)))
                .await
                .unwrap();
        }
        fs.sync().await.unwrap();
        let before = fs.free_zones();
        fs.unlink(ROOT_INO, "big").await.unwrap();
        fs.sync().await.unwrap();
        assert!(
            fs.free_zones() >= before + 3,
            "{} free zones after the delete, {before} before",
            fs.free_zones()
        );
        assert_eq!(fs.stats().zones_cleaned, 0);
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

#[test]
fn rename_unlink_truncate_follow_posix() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let a = fs.mkdir(ROOT_INO, "a", 0o755, 0, 0).await.unwrap();
        let b = fs.mkdir(a.ino, "b", 0o755, 0, 0).await.unwrap();
        assert!(matches!(
            fs.rename(ROOT_INO, "a", b.ino, "x").await,
            Err(FsError::Invalid(_))
        ));
        let f = fs.create(ROOT_INO, "f", 0o600, 0, 0).await.unwrap();
        let g = fs.create(ROOT_INO, "g", 0o600, 0, 0).await.unwrap();
        fs.write(g.ino, 0, OwnedData::Bytes(bytes(2, 5000)))
            .await
            .unwrap();
        fs.rename(ROOT_INO, "g", ROOT_INO, "f").await.unwrap();
        assert_eq!(fs.lookup(ROOT_INO, "f").await.unwrap().ino, g.ino);
        assert_eq!(fs.getattr(f.ino).await.unwrap_err(), FsError::NotFound);
        assert_eq!(
            fs.rmdir(ROOT_INO, "a").await.unwrap_err(),
            FsError::NotEmpty
        );
        fs.rename(a.ino, "b", ROOT_INO, "b").await.unwrap();
        assert_eq!(fs.getattr(a.ino).await.unwrap().nlink, 2);
        assert_eq!(fs.getattr(ROOT_INO).await.unwrap().nlink, 4);
        fs.rmdir(ROOT_INO, "a").await.unwrap();
        assert_eq!(fs.getattr(ROOT_INO).await.unwrap().nlink, 3);
        fs.setattr(
            g.ino,
            SetAttr {
                size: Some(10),
                perm: Some(0o640),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let at = fs.getattr(g.ino).await.unwrap();
        assert_eq!((at.size, at.perm, at.kind), (10, 0o640, FileKind::File));
        fs.setattr(
            g.ino,
            SetAttr {
                size: Some(9000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        let OwnedData::Bytes(got) = fs.read(g.ino, 0, 9000).await.unwrap() else {
            panic!()
        };
        assert_eq!(&got[..10], &bytes(2, 10)[..]);
        assert!(
            got[10..].iter().all(|&x| x == 0),
            "truncated then grown: zeros"
        );
        fs.unlink(ROOT_INO, "f").await.unwrap();
        assert_eq!(
            fs.unlink(ROOT_INO, "f").await.unwrap_err(),
            FsError::NotFound
        );
        fs.sync().await.unwrap();
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

#[test]
fn overwrites_at_high_utilization_clean_zones_and_keep_data() {
    for payload in [PayloadMode::Full, PayloadMode::Fingerprint] {
        let (sim, stack) = small_device(payload);
        overwrite_and_clean(sim, Devices::from(stack), payload, Box::new(F2fs));
    }
}

/// Zones whose capacity is less than their size (as the ZN540's 1077 MiB in 2 GiB): segments
/// cover the capacity, cleaning works the same.
#[test]
fn zones_smaller_in_capacity_than_in_size_clean_and_keep_data() {
    let (sim, stack) = small_device_with(PayloadMode::Fingerprint, &[("zone_size", "4MiB")]);
    {
        let d = stack.device().borrow();
        let z = d.zoned().unwrap().zones().zones()[2].clone();
        assert!(z.capacity < z.size, "{z:?}");
    }
    overwrite_and_clean(
        sim,
        Devices::from(stack),
        PayloadMode::Fingerprint,
        Box::new(F2fs),
    );
}

#[test]
fn a_large_page_cache_cleans_while_it_writes_back() {
    // The small device's file system (about 76 MiB) under a 64 MiB page cache: a throttled
    // writer writes back up to a fifth of the cache (over 6 zones of dirty data), more than the
    // free zones hold. Write-back cleans as it goes (F2FS balances after each page it writes),
    // so replacing files at 80% utilization never runs out of room for a checkpoint's nodes.
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let options = FsOptions {
            cache_bytes: 64 << 20,
            ..opts()
        };
        let fs = Fs::mkfs(s, stack, FormatOptions::default(), options, Box::new(F2fs))
            .await
            .expect("mkfs");
        let files = (fs.statfs().blocks * 8 / 10 / 16) as usize;
        let content = |f: usize, g: u64| -> OwnedData {
            OwnedData::Fingerprints((0..16).map(|b| (f as u64) << 32 | g << 8 | b).collect())
        };
        create_files(&fs, files, |f| content(f, 0)).await;
        let mut gens = vec![0u64; files];
        for k in 0..files * 4 {
            let f = k * 7 % files;
            let name = format!("f{f}");
            fs.unlink(ROOT_INO, &name)
                .await
                .unwrap_or_else(|e| panic!("unlink {name} (replacement {k}): {e}"));
            gens[f] += 1;
            let a = fs.create(ROOT_INO, &name, 0o644, 0, 0).await.unwrap();
            fs.write(a.ino, 0, content(f, gens[f]))
                .await
                .unwrap_or_else(|e| panic!("write {name} (replacement {k}): {e}"));
        }
        fs.sync().await.unwrap();
        assert!(fs.stats().zones_cleaned > 0, "{:?}", fs.stats());
        for (f, g) in gens.iter().enumerate() {
            let ino = fs.lookup(ROOT_INO, &format!("f{f}")).await.unwrap().ino;
            assert_eq!(
                fs.read(ino, 0, 65536).await.unwrap(),
                content(f, *g),
                "file {f}"
            );
        }
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

fn znsplus_policy() -> Box<dyn Policy> {
    Box::new(ZnsPlus {
        copy: InStorage {
            cached: CachedPages::Host,
            allocation: Allocation::CopybackAware,
        },
        threaded: ThreadedLogging {
            checkpoint_pre_invalid_bytes: 1 << 20,
            cold_benefit: ColdBenefit::None,
            ..ThreadedLogging::default()
        },
    })
}

/// ZNS+ (seed 000 §3.2.2, §3.3.2): logs reopen dirty zones with TL_open and the device plugs
/// the blocks they skip; data reads back and fsck is clean, also after a remount.
#[test]
fn threaded_logging_reuses_dirty_zones() {
    for payload in [PayloadMode::Full, PayloadMode::Fingerprint] {
        let (sim, stack) = small_device(payload);
        let (st, log) = overwrite_and_clean(
            sim.clone(),
            Devices::from(stack.clone()),
            payload,
            znsplus_policy(),
        );
        assert!(st.threaded.tl_opens > 0, "{st:?}");
        assert!(st.threaded.tl_blocks > 0, "{st:?}");
        // The log has every choice of zone, in time order, and HSR's costs back each one it
        // weighed (per segment: ties go to threaded logging).
        let choices: Vec<_> = log.iter().filter_map(GcEvent::reclaim_choice).collect();
        let chose = |r| choices.iter().filter(|c| c.chose == r).count() as u64;
        // A log picks its next zone when it takes the last block of its zone, and enters it
        // (a TL_open) at its next block: each log that can reopen zones (not the cold data
        // log) may hold one choice not yet entered.
        let (tl, opened) = (chose(Reclaim::ThreadedLogging), st.threaded.tl_opens);
        assert!((opened..=opened + 5).contains(&tl), "{tl} {st:?}");
        assert_eq!(chose(Reclaim::Compaction), st.threaded.compaction_preferred);
        let why = st.threaded.compaction_preferred_for;
        assert_eq!(
            why.cold_benefit + why.other_log + why.pre_invalid + why.unavailable,
            st.threaded.compaction_preferred,
            "{why:?}"
        );
        assert!(choices.windows(2).all(|w| w[0].at_ns <= w[1].at_ns));
        assert!(choices.iter().all(|c| c.weighed.is_none_or(|w| {
            (w.c_tl_ns <= w.c_sc_ns) == (c.chose == Reclaim::ThreadedLogging)
        })));
        let unweighed = choices.iter().filter(|c| c.weighed.is_none()).count() as u64;
        assert!(unweighed >= st.threaded.unweighed, "{unweighed} {st:?}");
        let plus = stack.device().borrow().zoned().unwrap().znsplus_counters();
        assert!(plus.tl_opens > 0, "{plus:?}");
        assert!(
            plus.plugged_blocks_background + plus.plugged_blocks_on_demand > 0,
            "{plus:?}"
        );
        let s = sim.clone();
        let d = Devices::from(stack);
        run(&sim, async move {
            let fs = remount(&s, &d).await;
            let problems = fs.check().await.unwrap();
            assert!(problems.is_empty(), "{problems:?}");
        });
    }
}

/// Threaded logging reopens zones written before a remount: the SIT keeps the log of each
/// segment's valid blocks (F2FS keeps the segment type there), and mount restores each zone's
/// log from it. Without it, no log would find a candidate until compaction had cleaned a zone.
#[test]
fn threaded_logging_reopens_zones_written_before_a_remount() {
    for segs_per_zone in [1, 4] {
        let (sim, stack) = small_device(PayloadMode::Fingerprint);
        let s = sim.clone();
        run(&sim, async move {
            let format = FormatOptions {
                segs_per_zone,
                ..FormatOptions::default()
            };
            let fs = Fs::mkfs(s.clone(), stack.clone(), format, opts(), znsplus_policy())
                .await
                .expect("mkfs");
            half_valid_zones(&fs, 7).await;
            // The log of each written zone holding valid blocks.
            let zone_logs = |fs: &Fs| -> Vec<(u32, Option<Temp>)> {
                let st = fs.inner.st.borrow();
                (0..st.segs.layout.sb.main_zones)
                    .filter(|&z| st.segs.zones[z as usize] == ZoneUse::Used)
                    .filter(|&z| st.segs.zone_valid(z) > 0)
                    .map(|z| (z, st.segs.zone_temp[z as usize]))
                    .collect()
            };
            let before = zone_logs(&fs);
            assert!(before.iter().all(|(_, t)| t.is_some()), "{before:?}");
            fs.unmount().await.unwrap();
            let fs = Fs::mount(s.clone(), stack.clone(), opts(), znsplus_policy())
                .await
                .expect("mount");
            assert_eq!(zone_logs(&fs), before);
            // New files until HSR reopens a zone for threaded logging. Every zone it weighed
            // as a log's candidate is one written before the remount, by that log (the new
            // files fill the zones they go to).
            let choices = async {
                for f in 0..fs.statfs().blocks / 16 {
                    let a = fs
                        .create(ROOT_INO, &format!("g{f}"), 0o644, 0, 0)
                        .await
                        .unwrap();
                    fs.write(a.ino, 0, sixteen_blocks(f as usize))
                        .await
                        .unwrap();
                    let choices: Vec<_> = (fs.gc_log(0).iter())
                        .filter_map(GcEvent::reclaim_choice)
                        .cloned()
                        .collect();
                    if choices.iter().any(|c| c.chose == Reclaim::ThreadedLogging) {
                        return choices;
                    }
                }
                panic!("threaded logging reopened no zone: {:?}", fs.stats());
            }
            .await;
            for c in &choices {
                assert!(before.contains(&(c.zone, Some(c.log))), "{c:?} {before:?}");
            }
            fs.sync().await.unwrap();
            let problems = fs.check().await.unwrap();
            assert!(problems.is_empty(), "{problems:?}");
        });
    }
}

/// IZC (seed 000 §3.2.1) with each cached-page choice and allocation: the device copies the
/// blocks, data reads back, fsck is clean; copyback-aware allocation makes copybacks where
/// copyback-unaware allocation makes fewer.
#[test]
fn internal_zone_compaction_moves_blocks_in_the_device() {
    let mut copybacks = Vec::new();
    for (cached, allocation, payload) in [
        (
            CachedPages::Host,
            Allocation::CopybackAware,
            PayloadMode::Full,
        ),
        (
            CachedPages::Device,
            Allocation::CopybackAware,
            PayloadMode::Fingerprint,
        ),
        (
            CachedPages::Device,
            Allocation::Sequential,
            PayloadMode::Fingerprint,
        ),
    ] {
        let (sim, stack) = small_device(payload);
        let copy = InStorage { cached, allocation };
        let (st, log) = overwrite_and_clean(
            sim,
            Devices::from(stack.clone()),
            payload,
            Box::new(Izc { copy }),
        );
        assert!(
            st.traffic.gc_device_copy > 0,
            "{cached:?} {allocation:?}: {st:?}"
        );
        assert!(st.blocks_copied_in_device > 0, "{st:?}");
        // Data victims are copied by the device, node victims by the host (the published
        // ZNS+ F2FS offloads only gc_data_segment).
        assert!(
            st.zones_cleaned_in_device > 0 && st.zones_cleaned_in_device < st.zones_cleaned,
            "zones cleaned {} of which in the device {}",
            st.zones_cleaned,
            st.zones_cleaned_in_device
        );
        // Each cleaning is logged, and Fig. 6's data victims are those the device copied.
        let compactions: Vec<_> = log.iter().filter_map(GcEvent::compaction).collect();
        assert_eq!(compactions.len() as u64, st.zones_cleaned);
        assert!(compactions.iter().all(|c| {
            (c.method == CompactionMethod::InDevice) == (VictimKind::of(c.log) == VictimKind::Data)
        }));
        assert_eq!(
            compactions.iter().map(|c| c.moved_blocks).sum::<u64>(),
            st.blocks_moved
        );
        assert_eq!(
            compactions
                .iter()
                .map(|c| c.device_copied_blocks)
                .sum::<u64>(),
            st.blocks_copied_in_device
        );
        // A victim's cleaning (before its checkpoint) fits between its start and the time it
        // is durable, and moves no more than it held.
        assert!(compactions.iter().all(|c| {
            let p = c.phases_ns;
            c.start_ns + p.init + p.read + p.write <= c.durable_ns
                && c.moved_blocks <= c.valid_blocks
        }));
        let plus = stack.device().borrow().zoned().unwrap().znsplus_counters();
        assert!(plus.compactions > 0, "{plus:?}");
        assert_eq!(
            plus.compacted_blocks, st.blocks_copied_in_device,
            "{plus:?}"
        );
        // What the allocation placed for copyback is what the device copied back (the small
        // device's copyback limit is never reached), within the fully valid chunks.
        assert!(
            st.device_copy_copyback_blocks <= st.device_copy_full_chunk_blocks
                && st.device_copy_full_chunk_blocks <= st.blocks_copied_in_device,
            "{st:?}"
        );
        assert_eq!(plus.copyback_limit_hits, 0, "{plus:?}");
        assert_eq!(
            plus.copyback_blocks, st.device_copy_copyback_blocks,
            "{allocation:?}: {plus:?}"
        );
        copybacks.push(plus.copybacks as f64 / (plus.copybacks + plus.readprogram_copies) as f64);
    }
    assert!(
        copybacks[1] > copybacks[2],
        "CAB vs CUB copyback shares: {copybacks:?}"
    );
    assert!(copybacks[1] > 0.5, "CAB copyback share: {copybacks:?}");
}

/// IZC sends a victim's blocks where the host copy would: a directory's blocks stay in the hot
/// data log (F2FS's `__get_segment_type_6`; the published ZNS+ F2FS keeps a hot victim hot),
/// the rest go cold. Once the device has compacted a hot data zone, directory blocks lie in
/// hot data zones and file blocks in none; the directories left read back and fsck is clean.
#[test]
fn internal_zone_compaction_keeps_directory_blocks_hot() {
    compact_directories(false);
}

/// Under ZNS+ a hot victim's blocks go to the hot data log while it writes into a zone it
/// reopened with TL_open: zone_compaction's destinations are that zone's invalid blocks,
/// sparse, and the device plugs the blocks between them (seed 000 §3.2.1: "the segment
/// compaction can select a TL opened segment as destination").
#[test]
fn internal_zone_compaction_copies_into_a_zone_reopened_for_threaded_logging() {
    compact_directories(true);
}

/// 1200 directories of one empty file (a directory block each, over two hot data zones), nine
/// in ten removed, then zones cleaned until the device has compacted a hot data zone (with
/// `threading`, while the hot data log writes into a zone it reopened: logs are made to
/// reopen zones whenever they can, and 400 more directories move the hot data log on).
/// Checks where every valid data block lies, that the directories left read back, and fsck.
/// The policy is IZC-D, or ZNS+ (without B_cold) with `threading`.
fn compact_directories(threading: bool) {
    let copy = InStorage {
        cached: CachedPages::Device,
        allocation: Allocation::CopybackAware,
    };
    let policy: Box<dyn Policy> = if threading {
        let threaded = ThreadedLogging {
            cold_benefit: ColdBenefit::None,
            ..ThreadedLogging::default()
        };
        Box::new(ZnsPlus { copy, threaded })
    } else {
        Box::new(Izc { copy })
    };
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format_with(&s, &stack, policy).await;
        let mut kept = Vec::new();
        for i in 0..1200 {
            directory_of_one_file(&fs, i).await;
            if i % 10 == 0 {
                kept.push(i);
            }
        }
        fs.sync().await.unwrap();
        for i in (0..1200).filter(|i| i % 10 != 0) {
            let d = fs.lookup(ROOT_INO, &format!("d{i}")).await.unwrap();
            fs.unlink(d.ino, "f").await.unwrap();
            fs.rmdir(ROOT_INO, &format!("d{i}")).await.unwrap();
        }
        fs.sync().await.unwrap();
        let hot_threads = || {
            let st = fs.inner.st.borrow();
            st.segs
                .threaded
                .as_ref()
                .is_some_and(|th| th.threads(Temp::HotData))
        };
        if threading {
            {
                let mut st = fs.inner.st.borrow_mut();
                let th = st.segs.threaded.as_mut().expect("znsplus");
                (th.below_free, th.forced_below) = (u32::MAX, u32::MAX);
            }
            for i in 1200..1600 {
                directory_of_one_file(&fs, i).await;
                kept.push(i);
            }
            fs.sync().await.unwrap();
            assert!(hot_threads(), "the hot data log reopened a zone");
        }
        // Zones cleaned one at a time until the device compacts a hot data zone, and whether
        // the hot data log was threading then.
        let mut compacted_hot = None;
        for _ in 0..40 {
            let (events, threads) = (fs.gc_log_len(), hot_threads());
            if !fs.clean_one(true).await.unwrap() {
                break;
            }
            let hot = fs
                .gc_log(events)
                .iter()
                .filter_map(GcEvent::compaction)
                .any(|c| {
                    c.log == Temp::HotData
                        && c.method == CompactionMethod::InDevice
                        && c.device_copied_blocks > 0
                });
            if hot {
                compacted_hot = Some(threads);
                break;
            }
        }
        assert_eq!(
            compacted_hot,
            Some(threading),
            "a hot data zone compacted (and the hot log threading then): {:?}",
            fs.gc_log(0)
        );
        // Every valid data block: in a hot data zone exactly when a directory owns it.
        let placed: Vec<(Option<Temp>, Ino)> = {
            let st = fs.inner.st.borrow();
            let layout = &st.segs.layout;
            (0..layout.sb.main_zones)
                .flat_map(|z| (0..layout.blocks_per_zone).map(move |o| (z, layout.addr(z, o))))
                .filter(|&(_, a)| st.segs.is_valid(a))
                .filter_map(|(z, a)| {
                    let e = st.nat.entries[st.segs.owner(a).nid as usize];
                    (e.addr != a).then_some((st.segs.zone_temp[z as usize], e.ino as Ino))
                })
                .collect()
        };
        let mut dir_blocks = 0;
        for (temp, ino) in placed {
            let dir = fs.getattr(ino).await.unwrap().kind == FileKind::Dir;
            dir_blocks += u64::from(dir);
            assert_eq!(
                temp == Some(Temp::HotData),
                dir,
                "a block of inode {ino} (directory: {dir}) in a zone of {temp:?}"
            );
        }
        assert!(
            dir_blocks as usize > kept.len(),
            "{dir_blocks} directory blocks"
        );
        for i in kept {
            let d = fs.lookup(ROOT_INO, &format!("d{i}")).await.unwrap();
            fs.lookup(d.ino, "f").await.unwrap();
        }
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// Directory `d{i}` under the root, holding one empty file `f` (a directory block).
async fn directory_of_one_file(fs: &Fs, i: usize) {
    let d = fs
        .mkdir(ROOT_INO, &format!("d{i}"), 0o755, 0, 0)
        .await
        .unwrap();
    fs.create(d.ino, "f", 0o644, 0, 0).await.unwrap();
}

/// A zone of several segments is cleaned segment by segment, as F2FS cleans a section, but
/// IZC's device copies one reserved region for the whole victim (the paper's segment is the
/// zone, seed 000 §4.4): one zone_compaction per destination zone the region falls in, so at
/// most two a victim, where one a segment would be four. Host copy and IZC both read back and
/// check clean.
#[test]
fn cleaning_goes_segment_by_segment_and_the_device_copies_the_zone_at_once() {
    let format = FormatOptions {
        segs_per_zone: 4,
        ..FormatOptions::default()
    };
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let (st, _) = overwrite_and_clean_formatted(
        sim,
        Devices::from(stack),
        PayloadMode::Fingerprint,
        Box::new(F2fs),
        format,
    );
    assert!(st.zones_cleaned > 0, "{st:?}");
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let copy = InStorage {
        cached: CachedPages::Device,
        allocation: Allocation::CopybackAware,
    };
    let (st, _) = overwrite_and_clean_formatted(
        sim,
        Devices::from(stack.clone()),
        PayloadMode::Fingerprint,
        Box::new(Izc { copy }),
        format,
    );
    let plus = stack.device().borrow().zoned().unwrap().znsplus_counters();
    assert!(st.zones_cleaned_in_device > 0, "{st:?}");
    assert!(
        plus.compactions > 0 && plus.compactions <= 2 * st.zones_cleaned_in_device,
        "{} zone_compactions for {} zones of 4 segments",
        plus.compactions,
        st.zones_cleaned_in_device
    );
}

#[test]
fn cleaning_works_with_the_metadata_on_a_companion_device() {
    let (sim, devices) = small_device_with_companion(PayloadMode::Fingerprint, &[]);
    overwrite_and_clean(
        sim,
        devices.clone(),
        PayloadMode::Fingerprint,
        Box::new(F2fs),
    );
    // The metadata went to the companion, which no zone command reached.
    let c = devices
        .companion
        .as_ref()
        .unwrap()
        .device()
        .borrow()
        .counters();
    assert!(c.written_lbas > 0, "{c:?}");
    assert_eq!(c.zone_resets, 0, "{c:?}");
}

/// 80% of the capacity in 64 KiB files, rewritten until zones are cleaned; every file reads
/// back its last contents and fsck is clean. Returns the file system's counters and its
/// reclamation log.
fn overwrite_and_clean(
    sim: Sim,
    stack: Devices,
    payload: PayloadMode,
    policy: Box<dyn Policy>,
) -> (crate::fs::FsStats, Vec<GcEvent>) {
    overwrite_and_clean_formatted(sim, stack, payload, policy, FormatOptions::default())
}

/// [`overwrite_and_clean`] on a file system formatted with `format`.
fn overwrite_and_clean_formatted(
    sim: Sim,
    stack: Devices,
    payload: PayloadMode,
    policy: Box<dyn Policy>,
    format: FormatOptions,
) -> (crate::fs::FsStats, Vec<GcEvent>) {
    {
        let s = sim.clone();
        run(&sim, async move {
            let fs = Fs::mkfs(s.clone(), stack.clone(), format, opts(), policy)
                .await
                .expect("mkfs");
            let cap = fs.statfs().blocks;
            // 80% of the capacity in 64 KiB files, then rewrite random files many times.
            let files = (cap * 8 / 10 / 16) as usize;
            let content = |f: usize, g: u64| -> OwnedData {
                match payload {
                    PayloadMode::Full => OwnedData::Bytes(bytes((f as u64 * 7 + g) as u8, 65536)),
                    PayloadMode::Fingerprint => OwnedData::Fingerprints(
                        (0..16).map(|b| (f as u64) << 32 | g << 8 | b).collect(),
                    ),
                }
            };
            let mut gens = vec![0u64; files];
            let inos = create_files(&fs, files, |f| content(f, 0)).await;
            let mut x = 12345u64;
            for _ in 0..files * 6 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let f = (x >> 33) as usize % files;
                gens[f] += 1;
                fs.write(inos[f], 0, content(f, gens[f])).await.unwrap();
                if x.is_multiple_of(7) {
                    let g = (x >> 40) as usize % files;
                    let got = fs.read(inos[g], 0, 65536).await.unwrap();
                    assert!(
                        got == content(g, gens[g]),
                        "file {g} generation {}",
                        gens[g]
                    );
                }
            }
            fs.sync().await.unwrap();
            let st = fs.stats();
            assert!(
                (st.zones_cleaned > 0 && st.zone_resets > 0) || st.threaded.tl_opens > 0,
                "{st:?}"
            );
            assert!(
                st.traffic.gc_host_write + st.traffic.gc_device_copy > 0,
                "{st:?}"
            );
            for f in 0..files {
                let got = fs.read(inos[f], 0, 65536).await.unwrap();
                let want = content(f, gens[f]);
                match (got, want) {
                    (OwnedData::Bytes(g), OwnedData::Bytes(w)) => assert!(g == w, "file {f}"),
                    (OwnedData::Fingerprints(g), OwnedData::Fingerprints(w)) => {
                        assert_eq!(g, w, "file {f}")
                    }
                    (g, _) => panic!("file {f}: unexpected payload {g:?}"),
                }
            }
            let problems = fs.check().await.unwrap();
            assert!(problems.is_empty(), "{problems:?}");
            (st, fs.gc_log(0))
        })
    }
}

mod model {
    //! Random operation sequences against a plain in-memory model, with syncs, remounts and
    //! crashes (the file system dropped without unmounting; mount rolls back to the last
    //! checkpoint).
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Clone, Debug)]
    enum Op {
        Create(u8),
        Write(u8, u16, u16, u8),
        Truncate(u8, u16),
        Unlink(u8),
        Rename(u8, u8),
        Mkdir(u8),
        Sync,
        Fsync(u8),
        Remount,
        Crash,
        /// Rewrites ballast file "c{k % 64}" whole (nothing without ballast).
        Rewrite(u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u8>().prop_map(Op::Create),
            6 => (any::<u8>(), 0u16..40_000, 1u16..20_000, any::<u8>()).prop_map(|(f, o, l, s)| Op::Write(f, o, l, s)),
            1 => (any::<u8>(), 0u16..30_000).prop_map(|(f, n)| Op::Truncate(f, n)),
            1 => any::<u8>().prop_map(Op::Unlink),
            1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Rename(a, b)),
            1 => any::<u8>().prop_map(Op::Mkdir),
            1 => Just(Op::Sync),
            3 => any::<u8>().prop_map(Op::Fsync),
            1 => Just(Op::Remount),
            1 => Just(Op::Crash),
            6 => any::<u8>().prop_map(Op::Rewrite),
        ]
    }

    /// name -> Some(content) for files, None for (empty) directories.
    type Model = BTreeMap<String, Option<Vec<u8>>>;

    fn name(k: u8) -> String {
        format!("n{}", k % 12)
    }

    async fn verify(fs: &Fs, m: &Model, only: Option<&BTreeMap<String, bool>>) {
        for (n, c) in m {
            if only.is_some_and(|t| t.contains_key(n)) {
                continue;
            }
            let a = fs
                .lookup(ROOT_INO, n)
                .await
                .unwrap_or_else(|e| panic!("{n}: {e}"));
            match c {
                Some(data) => {
                    let OwnedData::Bytes(got) = fs.read(a.ino, 0, 1 << 20).await.unwrap() else {
                        panic!()
                    };
                    assert!(
                        got == *data,
                        "{n}: {} bytes, want {}",
                        got.len(),
                        data.len()
                    );
                }
                None => assert_eq!(a.kind, FileKind::Dir),
            }
        }
        if only.is_none() {
            let names: Vec<String> = fs
                .readdir(ROOT_INO)
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(names, m.keys().cloned().collect::<Vec<_>>());
        }
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }

    /// A create or mkdir of `n` returned `r`: refused (it exists) when the model has the name,
    /// else the model gains `n` holding `value`, changed since the last checkpoint.
    fn created<T: std::fmt::Debug>(
        r: crate::vfs::FsResult<T>,
        n: String,
        value: Option<Vec<u8>>,
        m: &mut Model,
        touched: &mut BTreeMap<String, bool>,
    ) {
        match m.entry(n.clone()) {
            std::collections::btree_map::Entry::Occupied(_) => {
                assert_eq!(r.unwrap_err(), FsError::Exists);
            }
            std::collections::btree_map::Entry::Vacant(v) => {
                r.unwrap();
                v.insert(value);
                touched.insert(n, true);
            }
        }
    }

    /// Files in a directory "ballast": nearly the whole file system, every other one deleted
    /// and synced, then two fifths more: the zones are half valid and so few are free that
    /// the logs reclaim zones, and the operations that follow make them reclaim more.
    async fn ballast(fs: &Fs) -> Ino {
        let d = fs.mkdir(ROOT_INO, "ballast", 0o755, 0, 0).await.unwrap();
        let blocks = fs.statfs().blocks;
        let fill = |prefix: &'static str, files: u64| async move {
            for f in 0..files {
                let a = fs
                    .create(d.ino, &format!("{prefix}{f}"), 0o644, 0, 0)
                    .await
                    .unwrap();
                fs.write(a.ino, 0, OwnedData::Bytes(bytes(f as u8, 65536)))
                    .await
                    .unwrap();
            }
        };
        let files = blocks * 97 / 100 / 16;
        fill("b", files).await;
        for f in (0..files).step_by(2) {
            fs.unlink(d.ino, &format!("b{f}")).await.unwrap();
        }
        fs.sync().await.unwrap();
        fill("c", blocks * 2 / 5 / 16).await;
        fs.sync().await.unwrap();
        d.ino
    }

    /// Generation `g` of ballast file "c{k}" (generation 0 is what [`ballast`] wrote).
    fn ballast_content(k: u8, g: u8) -> OwnedData {
        OwnedData::Bytes(bytes(k.wrapping_add(g.wrapping_mul(37)), 65536))
    }

    /// Each rewritten ballast file holds its latest generation, or, after a crash, one from
    /// the generation the last known checkpoint holds to the latest (cleaning checkpoints
    /// too); from here on the one it holds is both.
    async fn verify_rewritten(
        fs: &Fs,
        dir: Option<Ino>,
        rewritten: &mut BTreeMap<u8, (u8, u8)>,
        after_crash: bool,
    ) {
        let Some(d) = dir else { return };
        for (&k, g) in rewritten.iter_mut() {
            let a = fs.lookup(d, &format!("c{k}")).await.unwrap();
            let got = fs.read(a.ino, 0, 65536).await.unwrap();
            let oldest = if after_crash { g.0 } else { g.1 };
            let held = (oldest..=g.1)
                .find(|&i| got == ballast_content(k, i))
                .unwrap_or_else(|| {
                    panic!("ballast c{k} holds none of generations {oldest}..={}", g.1)
                });
            *g = (held, held);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn operations_match_the_model_across_remounts_and_crashes(ops in proptest::collection::vec(op(), 1..60)) {
            match_the_model(ops, || Box::new(F2fs), false);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
        /// The same under znsplus on a nearly full file system: the logs reopen zones by
        /// threaded logging, before and after remounts and crashes.
        #[test]
        fn threaded_logging_matches_the_model_across_remounts_and_crashes(ops in proptest::collection::vec(op(), 1..60)) {
            match_the_model(ops, znsplus_policy, true);
        }
    }

    /// Runs `ops` on a fresh file system with `policy` (after [`ballast`] if asked) and on
    /// the model, checking that they agree after each remount and crash and at the end.
    fn match_the_model(ops: Vec<Op>, policy: fn() -> Box<dyn Policy>, with_ballast: bool) {
        // Under ballast, zones of 512 KiB: the operations' writes fill several.
        let small_zones = [
            ("zone_size", "512KiB"),
            ("pages_per_block", "2"),
            ("zones", "64"),
            ("blocks_per_plane", "72"),
        ];
        let extra: &[_] = if with_ballast { &small_zones } else { &[] };
        let (sim, stack) = small_device_with(PayloadMode::Full, extra);
        let s = sim.clone();
        run(&sim, async move {
            let mount_again = |s: &Sim, stack: &Rc<HostStack>| {
                Fs::mount(s.clone(), Devices::from(stack.clone()), opts(), policy())
            };
            let mut fs = format_with(&s, &stack, policy()).await;
            let mut m: Model = BTreeMap::new();
            // Per rewritten ballast file: the generation the last checkpoint holds, and the
            // latest ([`ballast_content`]).
            let mut rewritten: BTreeMap<u8, (u8, u8)> = BTreeMap::new();
            let mut ballast_dir = None;
            if with_ballast {
                ballast_dir = Some(ballast(&fs).await);
                m.insert("ballast".into(), None);
            }
            let mut durable: Model = m.clone();
            // Names changed since the last checkpoint we know of.
            let mut touched: BTreeMap<String, bool> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Create(k) => {
                        let r = fs.create(ROOT_INO, &name(k), 0o644, 0, 0).await;
                        created(r, name(k), Some(Vec::new()), &mut m, &mut touched);
                    }
                    Op::Write(k, off, len, seed) => {
                        if let Some(Some(c)) = m.get_mut(&name(k)) {
                            let a = fs.lookup(ROOT_INO, &name(k)).await.unwrap();
                            let data = bytes(seed, len as usize);
                            fs.write(a.ino, off as u64, OwnedData::Bytes(data.clone()))
                                .await
                                .unwrap();
                            let end = off as usize + len as usize;
                            if c.len() < end {
                                c.resize(end, 0);
                            }
                            c[off as usize..end].copy_from_slice(&data);
                            touched.insert(name(k), true);
                        }
                    }
                    Op::Truncate(k, n) => {
                        if let Some(Some(c)) = m.get_mut(&name(k)) {
                            let a = fs.lookup(ROOT_INO, &name(k)).await.unwrap();
                            fs.setattr(
                                a.ino,
                                SetAttr {
                                    size: Some(n as u64),
                                    ..Default::default()
                                },
                            )
                            .await
                            .unwrap();
                            c.resize(n as usize, 0);
                            touched.insert(name(k), true);
                        }
                    }
                    Op::Unlink(k) => {
                        let r = fs.unlink(ROOT_INO, &name(k)).await;
                        match m.get(&name(k)) {
                            Some(Some(_)) => {
                                r.unwrap();
                                m.remove(&name(k));
                                touched.insert(name(k), true);
                            }
                            Some(None) => {
                                assert_eq!(r.unwrap_err(), FsError::IsDir);
                                fs.rmdir(ROOT_INO, &name(k)).await.unwrap();
                                m.remove(&name(k));
                                touched.insert(name(k), true);
                            }
                            None => assert_eq!(r.unwrap_err(), FsError::NotFound),
                        }
                    }
                    Op::Rename(a, b) => {
                        let (na, nb) = (name(a), name(b));
                        let r = fs.rename(ROOT_INO, &na, ROOT_INO, &nb).await;
                        match (m.get(&na).cloned(), m.get(&nb).cloned()) {
                            (None, _) => assert_eq!(r.unwrap_err(), FsError::NotFound),
                            _ if na == nb => r.unwrap(),
                            (Some(Some(_)), Some(None)) => {
                                assert_eq!(r.unwrap_err(), FsError::IsDir)
                            }
                            (Some(None), Some(Some(_))) => {
                                assert_eq!(r.unwrap_err(), FsError::NotDir)
                            }
                            (Some(v), _) => {
                                r.unwrap();
                                m.remove(&na);
                                m.insert(nb.clone(), v);
                                touched.insert(na, true);
                                touched.insert(nb, true);
                            }
                        }
                    }
                    Op::Mkdir(k) => {
                        let r = fs.mkdir(ROOT_INO, &name(k), 0o755, 0, 0).await;
                        created(r, name(k), None, &mut m, &mut touched);
                    }
                    Op::Fsync(k) => {
                        if let Some(c) = m.get(&name(k)).cloned() {
                            let a = fs.lookup(ROOT_INO, &name(k)).await.unwrap();
                            fs.fsync(a.ino, false).await.unwrap();
                            if c.is_some() {
                                durable.insert(name(k), c);
                                touched.remove(&name(k));
                            }
                        }
                    }
                    Op::Sync => {
                        fs.sync().await.unwrap();
                        durable = m.clone();
                        touched.clear();
                        rewritten.values_mut().for_each(|g| g.0 = g.1);
                    }
                    Op::Rewrite(k) => {
                        if let Some(d) = ballast_dir {
                            let k = k % 64;
                            let g = rewritten.entry(k).or_insert((0, 0));
                            g.1 += 1;
                            let a = fs.lookup(d, &format!("c{k}")).await.unwrap();
                            fs.write(a.ino, 0, ballast_content(k, g.1)).await.unwrap();
                        }
                    }
                    Op::Remount => {
                        fs.unmount().await.unwrap();
                        fs = mount_again(&s, &stack).await.expect("mount");
                        durable = m.clone();
                        touched.clear();
                        verify(&fs, &m, None).await;
                        verify_rewritten(&fs, ballast_dir, &mut rewritten, false).await;
                    }
                    Op::Crash => {
                        drop(fs);
                        fs = mount_again(&s, &stack).await.expect("mount");
                        // Names untouched since the last sync read back as then; the rest may
                        // be as then or newer (cleaning checkpoints), but fsck is clean.
                        let keep: Model = durable
                            .iter()
                            .filter(|(n, _)| !touched.contains_key(*n))
                            .map(|(n, c)| (n.clone(), c.clone()))
                            .collect();
                        verify(&fs, &keep, Some(&touched)).await;
                        // Continue from what the mount shows.
                        m.clear();
                        for e in fs.readdir(ROOT_INO).await.unwrap() {
                            let v = if e.kind == FileKind::Dir {
                                None
                            } else {
                                let OwnedData::Bytes(b) = fs.read(e.ino, 0, 1 << 20).await.unwrap()
                                else {
                                    panic!()
                                };
                                Some(b)
                            };
                            m.insert(e.name, v);
                        }
                        durable = m.clone();
                        touched.clear();
                        verify_rewritten(&fs, ballast_dir, &mut rewritten, true).await;
                    }
                }
            }
            verify(&fs, &m, None).await;
            verify_rewritten(&fs, ballast_dir, &mut rewritten, false).await;
        });
    }
}

#[test]
fn fsync_survives_a_crash_through_roll_forward() {
    let (sim, stack) = small_device(PayloadMode::Full);
    crash_and_roll_forward(sim, Devices::from(stack));
}

#[test]
fn roll_forward_works_with_the_metadata_on_a_companion_device() {
    let (sim, devices) = small_device_with_companion(PayloadMode::Full, &[]);
    crash_and_roll_forward(sim, devices);
}

/// Files fsynced after the last checkpoint survive a crash (roll-forward); others are lost.
fn crash_and_roll_forward(sim: Sim, stack: Devices) {
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let old = fs.create(ROOT_INO, "old", 0o644, 0, 0).await.unwrap();
        fs.write(old.ino, 0, OwnedData::Bytes(bytes(1, 8_000_000)))
            .await
            .unwrap();
        fs.sync().await.unwrap();
        let cps = fs.stats().checkpoints;
        // After the checkpoint: rewrite part of "old", shrink it, create "new"; fsync both.
        fs.write(old.ino, 4096, OwnedData::Bytes(bytes(2, 8192)))
            .await
            .unwrap();
        fs.setattr(
            old.ino,
            SetAttr {
                size: Some(100_000),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        fs.fsync(old.ino, false).await.unwrap();
        let new = fs.create(ROOT_INO, "new", 0o644, 0, 0).await.unwrap();
        fs.write(new.ino, 0, OwnedData::Bytes(bytes(3, 5000)))
            .await
            .unwrap();
        fs.fsync(new.ino, false).await.unwrap();
        assert_eq!(
            fs.stats().checkpoints,
            cps,
            "fsync of a plain file needs no checkpoint"
        );
        // Not fsynced: lost in the crash.
        let lost = fs.create(ROOT_INO, "lost", 0o644, 0, 0).await.unwrap();
        fs.write(lost.ino, 0, OwnedData::Bytes(bytes(4, 5000)))
            .await
            .unwrap();
        drop(fs);

        let fs = remount(&s, &stack).await;
        let mut want = bytes(1, 100_000);
        want[4096..4096 + 8192].copy_from_slice(&bytes(2, 8192));
        let a = fs.lookup(ROOT_INO, "old").await.unwrap();
        assert_eq!(a.size, 100_000);
        let OwnedData::Bytes(got) = fs.read(a.ino, 0, 1 << 30).await.unwrap() else {
            panic!()
        };
        assert!(got == want, "old: recovered contents differ");
        let n = fs.lookup(ROOT_INO, "new").await.unwrap();
        let OwnedData::Bytes(got) = fs.read(n.ino, 0, 1 << 20).await.unwrap() else {
            panic!()
        };
        assert_eq!(got, bytes(3, 5000));
        assert_eq!(
            fs.lookup(ROOT_INO, "lost").await.unwrap_err(),
            FsError::NotFound
        );
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// fsync waits for the writes of the file's pages that another writer (the flusher, a
/// cleaning) has in flight, as F2FS's fsync waits on every page of the file under writeback
/// (file_write_and_wait_range): it finds no dirty page, but its data may still be on the way to
/// the device, queued behind another write to its zone, where a flush does not cover it. (Found
/// by `power_cuts_during_threaded_logging_lose_nothing_acknowledged` once the ZNS+ profiles
/// cached programs: a power cut after such an fsync lost the file.)
#[test]
fn fsync_waits_for_the_writes_of_its_pages_others_have_in_flight() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = Rc::new(format(&s, &stack).await);
        let ino = create_files(&fs, 1, |_| OwnedData::Fingerprints(vec![7; 4])).await[0];
        // Another writer has taken the file's first page; its write is in flight.
        let (_, w) = fs.inner.st.borrow_mut().cache.take_dirty(ino, 0).unwrap();
        let synced = Rc::new(std::cell::Cell::new(false));
        let fsync = {
            let (fs, synced) = (fs.clone(), synced.clone());
            s.spawn(async move {
                fs.fsync(ino, false).await.unwrap();
                synced.set(true);
            })
        };
        s.sleep(zonelab_sim::Nanos::from_ms(50)).await;
        assert!(
            !synced.get(),
            "fsync returned while a write of the file's page was in flight"
        );
        fs.inner.st.borrow_mut().cache.end_writeback(w);
        fs.inner.writeback_ended.notify_all();
        fsync.await;
        assert!(synced.get());
    });
}

/// Found by `zonelab crashtest`: a file linked as "b", its first name "a" unlinked and "a"
/// created anew, all before a checkpoint; an fsync of "b" then must not let roll-forward give
/// the name "a" (still kept in the inode) back to the first file.
#[test]
fn fsync_after_the_first_link_is_gone_keeps_names_apart() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let first = fs.create(ROOT_INO, "a", 0o644, 0, 0).await.unwrap();
        fs.link(first.ino, ROOT_INO, "b").await.unwrap();
        fs.unlink(ROOT_INO, "a").await.unwrap();
        let second = fs.create(ROOT_INO, "a", 0o644, 0, 0).await.unwrap();
        fs.sync().await.unwrap();
        fs.write(first.ino, 0, OwnedData::Bytes(bytes(5, 3000)))
            .await
            .unwrap();
        fs.fsync(first.ino, false).await.unwrap();
        drop(fs);
        let fs = remount(&s, &stack).await;
        assert_eq!(fs.lookup(ROOT_INO, "a").await.unwrap().ino, second.ino);
        let b = fs.lookup(ROOT_INO, "b").await.unwrap();
        assert_eq!((b.ino, b.nlink, b.size), (first.ino, 1, 3000));
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// Found by `zonelab crashtest` (varmail on znsplus): a name fsynced for one file, unlinked,
/// created again for another and fsynced, all after the checkpoint, belongs after roll-forward
/// to the file fsynced last, whichever inode number is lower (here the second file reuses a
/// lower number freed before): roll-forward restores names in the order of the log.
#[test]
fn roll_forward_gives_a_name_to_the_file_fsynced_last() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let filler = fs.create(ROOT_INO, "filler", 0o644, 0, 0).await.unwrap();
        fs.sync().await.unwrap();
        fs.unlink(ROOT_INO, "filler").await.unwrap();
        let first = fs.create(ROOT_INO, "a", 0o644, 0, 0).await.unwrap();
        fs.sync().await.unwrap();
        fs.write(first.ino, 0, OwnedData::Bytes(bytes(7, 3000)))
            .await
            .unwrap();
        fs.fsync(first.ino, false).await.unwrap();
        fs.unlink(ROOT_INO, "a").await.unwrap();
        let second = fs.create(ROOT_INO, "a", 0o644, 0, 0).await.unwrap();
        assert!(
            second.ino < first.ino,
            "the second file reuses the filler's number ({} then {})",
            filler.ino,
            second.ino
        );
        fs.write(second.ino, 0, OwnedData::Bytes(bytes(8, 5000)))
            .await
            .unwrap();
        fs.fsync(second.ino, false).await.unwrap();
        drop(fs);
        let fs = remount(&s, &stack).await;
        let got = fs.lookup(ROOT_INO, "a").await.unwrap();
        assert_eq!((got.ino, got.size), (second.ino, 5000));
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// Found by `zonelab crashtest`: a rename over one of two links of a file, then an fsync of
/// the file through its other name, must not leave the replaced entry pointing to an inode
/// whose link count roll-forward set to one.
#[test]
fn fsync_after_a_rename_over_a_link_keeps_link_counts() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let a = fs.create(ROOT_INO, "a", 0o644, 0, 0).await.unwrap();
        fs.link(a.ino, ROOT_INO, "b").await.unwrap();
        let c = fs.create(ROOT_INO, "c", 0o644, 0, 0).await.unwrap();
        fs.sync().await.unwrap();
        fs.rename(ROOT_INO, "c", ROOT_INO, "b").await.unwrap();
        fs.write(a.ino, 0, OwnedData::Bytes(bytes(6, 2000)))
            .await
            .unwrap();
        fs.fsync(a.ino, false).await.unwrap();
        drop(fs);
        let fs = remount(&s, &stack).await;
        let got = fs.lookup(ROOT_INO, "a").await.unwrap();
        assert_eq!((got.ino, got.nlink, got.size), (a.ino, 1, 2000));
        assert_eq!(fs.lookup(ROOT_INO, "b").await.unwrap().ino, c.ino);
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

#[test]
fn idle_time_cleans_in_the_background() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    background_cleaning(sim, Devices::from(stack));
}

#[test]
fn background_cleaning_works_with_the_metadata_on_a_companion_device() {
    let (sim, devices) = small_device_with_companion(PayloadMode::Fingerprint, &[]);
    background_cleaning(sim, devices);
}

/// Half-valid zones are cleaned while the file system is idle.
fn background_cleaning(sim: Sim, stack: Devices) {
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let inos = half_valid_zones(&fs, 9).await;
        let before = fs.stats();
        s.sleep(zonelab_sim::Nanos::from_secs(120)).await;
        let after = fs.stats();
        assert!(
            after.background_cleanings > before.background_cleanings,
            "{after:?}"
        );
        for f in (1..inos.len()).step_by(2) {
            let got = fs.read(inos[f], 0, 65536).await.unwrap();
            assert_eq!(got, sixteen_blocks(f));
        }
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// fsck of a mounted file system sees one state: the background work (writeback, idle
/// cleaning, periodic checkpoints) starts no round while fsck reads. (A cleaning and its
/// checkpoint in between moved nodes fsck had listed, and it reported their old blocks as
/// free: varmail at the ZNS+ paper's 16 GiB, whose fsck reads for simulated seconds.) Here
/// that work is due every millisecond.
#[test]
fn fsck_holds_the_background_work_off() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let options = FsOptions {
            writeback_interval: Nanos::from_us(1_000),
            checkpoint_interval: Nanos::from_us(1_000),
            ..opts()
        };
        let fs = Fs::mkfs(
            s.clone(),
            Devices::from(stack),
            FormatOptions::default(),
            options,
            Box::new(F2fs),
        )
        .await
        .expect("mkfs");
        // The idle cleaner has work.
        half_valid_zones(&fs, 9).await;
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        let hold = fs.hold_background().await;
        let held = fs.stats();
        s.sleep(Nanos::from_us(100_000)).await;
        let stats = fs.stats();
        assert_eq!(
            (stats.background_cleanings, stats.checkpoints),
            (held.background_cleanings, held.checkpoints),
            "background rounds ran while held"
        );
        drop(hold);
        s.sleep(Nanos::from_us(100_000)).await;
        assert!(fs.stats().background_cleanings > held.background_cleanings);
    });
}

/// Power cuts at random virtual times on a drive without power-loss protection: after the
/// remount, fsck is clean and every file whose fsync completed (and was not changed since)
/// reads back exactly (issue: "every byte acknowledged by an fsync reads back").
#[test]
fn power_cuts_without_plp_keep_every_fsynced_byte() {
    power_cuts(0..32, |extra| {
        let (sim, stack) = small_device_with(PayloadMode::Full, extra);
        (sim, Devices::from(stack))
    });
}

#[test]
fn power_cuts_keep_every_fsynced_byte_with_a_companion_device() {
    power_cuts(0..12, |extra| {
        small_device_with_companion(PayloadMode::Full, extra)
    });
}

fn power_cuts(seeds: std::ops::Range<u64>, devices: impl Fn(&[(&str, &str)]) -> (Sim, Devices)) {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    for seed in seeds {
        let (sim, stack) = devices(&[("power_loss_protection", "false")]);
        let durable: Rc<RefCell<BTreeMap<String, Vec<u8>>>> = Rc::default();
        let (s, st, d) = (sim.clone(), stack.clone(), durable.clone());
        let cut_at = 2_000_000 + (seed * 7_919_113) % 150_000_000;
        sim.block_on(async move {
            let fs = format(&s, &st).await;
            let fs2 = fs.clone();
            let d2 = d.clone();
            s.spawn(async move {
                let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut contents: BTreeMap<String, Vec<u8>> = BTreeMap::new();
                for _ in 0..400 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let name = format!("f{}", x % 10);
                    let ino = match fs2.lookup(ROOT_INO, &name).await {
                        Ok(a) => a.ino,
                        Err(_) => fs2.create(ROOT_INO, &name, 0o644, 0, 0).await.unwrap().ino,
                    };
                    d2.borrow_mut().remove(&name);
                    let len = 1 + (x >> 20) as usize % 40_000;
                    let off = (x >> 40) as usize % 20_000;
                    let data = bytes((x >> 8) as u8, len);
                    fs2.write(ino, off as u64, OwnedData::Bytes(data.clone()))
                        .await
                        .unwrap();
                    let c = contents.entry(name.clone()).or_default();
                    if c.len() < off + len {
                        c.resize(off + len, 0);
                    }
                    c[off..off + len].copy_from_slice(&data);
                    if x % 3 == 0 {
                        fs2.fsync(ino, false).await.unwrap();
                        d2.borrow_mut().insert(name.clone(), c.clone());
                    }
                }
            });
            s.sleep_until(zonelab_sim::Nanos(cut_at)).await;
        })
        .unwrap();
        let at = sim.now();
        stack.power_cut(at);
        let (s, st) = (sim.clone(), stack.clone());
        sim.block_on(async move {
            let fs = Fs::mount(s, st, opts(), Box::new(F2fs))
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: mount after a cut at {at:?}: {e}"));
            let at_rest = fs.check_at_rest().await.unwrap();
            assert!(at_rest.is_empty(), "seed {seed}: {at_rest:?}");
            let expected = durable.borrow().clone();
            for (name, want) in &expected {
                let a = fs
                    .lookup(ROOT_INO, name)
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}: fsynced {name} lost: {e}"));
                let OwnedData::Bytes(got) = fs.read(a.ino, 0, 1 << 30).await.unwrap() else {
                    panic!()
                };
                assert!(got == *want, "seed {seed}: {name} differs after the cut");
            }
            let problems = fs.check().await.unwrap();
            assert!(problems.is_empty(), "seed {seed}: {problems:?}");
        })
        .unwrap();
    }
}

/// Power cuts while cleaning runs (80% full, files rewritten) on a drive without power-loss
/// protection: zones being cleaned, reset or half-written at the cut. After the remount fsck
/// is clean, every file as of its last completed fsync or the last completed sync reads back,
/// and files untouched since the fill keep their first contents.
#[test]
fn power_cuts_during_cleaning_lose_nothing_acknowledged() {
    power_cuts_during_reclaiming(|| Box::new(F2fs));
}

#[test]
fn power_cuts_during_internal_zone_compaction_lose_nothing_acknowledged() {
    power_cuts_during_reclaiming(|| {
        Box::new(Izc {
            copy: InStorage {
                cached: CachedPages::Device,
                allocation: Allocation::CopybackAware,
            },
        })
    });
}

#[test]
fn power_cuts_during_threaded_logging_lose_nothing_acknowledged() {
    let cuts = power_cuts_during_reclaiming(znsplus_policy);
    assert!(
        cuts >= 3,
        "only {cuts} of 12 cuts came after threaded logging began"
    );
}

/// 80% full, files rewritten with fsyncs and syncs, power cut (no PLP) at 12 points after
/// reclaiming (cleaning or threaded logging) has begun: every durable generation reads back
/// after mount (with `policy`) and fsck is clean; a file cut while being rewritten holds, block
/// by block, its own data of a generation from its last durable one on (roll-forward may fall
/// back to an earlier fsync's node, whose blocks must not have been reused). Returns how many
/// cuts came after threaded logging had reopened a zone.
fn power_cuts_during_reclaiming(policy: fn() -> Box<dyn Policy>) -> usize {
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    let content = |f: usize, g: u64| -> OwnedData {
        OwnedData::Fingerprints((0..16).map(|b| (f as u64) << 32 | g << 8 | b).collect())
    };
    let mut cut_while_cleaning = 0;
    let mut cut_after_threaded_logging = 0;
    for seed in 0..12u64 {
        let (sim, stack) = small_device_with(
            PayloadMode::Fingerprint,
            &[("power_loss_protection", "false")],
        );
        // File -> its last durable generation (fsynced, synced, or never rewritten); and the
        // generation each file's last write began (past the durable one while rewritten).
        let durable: Rc<RefCell<BTreeMap<usize, u64>>> = Rc::default();
        let latest: Rc<RefCell<Vec<u64>>> = Rc::default();
        let cleaned_before_cut = Rc::new(std::cell::Cell::new(0u64));
        let tl_before_cut = Rc::new(std::cell::Cell::new(0u64));
        let (s, st, d, cb, tb) = (
            sim.clone(),
            stack.clone(),
            durable.clone(),
            cleaned_before_cut.clone(),
            tl_before_cut.clone(),
        );
        let lat = latest.clone();
        sim.block_on(async move {
            let fs = Rc::new(format_with(&s, &st, policy()).await);
            let files = (fs.statfs().blocks * 8 / 10 / 16) as usize;
            let inos = create_files(&fs, files, |f| content(f, 0)).await;
            d.borrow_mut().extend((0..files).map(|f| (f, 0)));
            *lat.borrow_mut() = vec![0; files];
            fs.sync().await.unwrap();
            let (fs2, d2) = (fs.clone(), d.clone());
            s.spawn(async move {
                let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
                let mut gens = vec![0u64; inos.len()];
                loop {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let f = (x >> 20) as usize % inos.len();
                    gens[f] += 1;
                    lat.borrow_mut()[f] = gens[f];
                    fs2.write(inos[f], 0, content(f, gens[f])).await.unwrap();
                    match x % 16 {
                        0..=4 => {
                            fs2.fsync(inos[f], false).await.unwrap();
                            d2.borrow_mut().insert(f, gens[f]);
                        }
                        5 => {
                            // A completed sync makes every file's current contents durable.
                            let now: Vec<(usize, u64)> = gens.iter().copied().enumerate().collect();
                            fs2.sync().await.unwrap();
                            d2.borrow_mut().extend(now);
                        }
                        _ => {}
                    }
                }
            });
            // Cut some time after reclaiming has begun.
            let reclaimed = |fs: &Fs| fs.stats().zones_cleaned + fs.stats().threaded.tl_opens;
            while reclaimed(&fs) == 0 && s.now() < zonelab_sim::Nanos::from_secs(30) {
                s.sleep(zonelab_sim::Nanos::from_ms(1)).await;
            }
            s.sleep(zonelab_sim::Nanos(1 + (seed * 7_919_113) % 40_000_000))
                .await;
            cb.set(reclaimed(&fs));
            tb.set(fs.stats().threaded.tl_opens);
        })
        .unwrap();
        if cleaned_before_cut.get() > 0 {
            cut_while_cleaning += 1;
        }
        if tl_before_cut.get() > 0 {
            cut_after_threaded_logging += 1;
        }
        let at = sim.now();
        stack.device().borrow_mut().power_cut(at);
        stack.restart();
        let (s, st) = (sim.clone(), stack.clone());
        sim.block_on(async move {
            let fs = Fs::mount(s, st, opts(), policy())
                .await
                .unwrap_or_else(|e| panic!("seed {seed}: mount after a cut at {at:?}: {e}"));
            let at_rest = fs.check_at_rest().await.unwrap();
            assert!(at_rest.is_empty(), "seed {seed}: {at_rest:?}");
            let (durable, latest) = (durable.borrow().clone(), latest.borrow().clone());
            for (&f, &from) in durable.iter() {
                let a = fs
                    .lookup(ROOT_INO, &format!("f{f}"))
                    .await
                    .unwrap_or_else(|e| panic!("seed {seed}: file {f} lost: {e}"));
                let got = fs.read(a.ino, 0, 65536).await.unwrap();
                if latest[f] == from {
                    assert_eq!(
                        got,
                        content(f, from),
                        "seed {seed}: file {f} (generation {from})"
                    );
                    continue;
                }
                let OwnedData::Fingerprints(got) = got else {
                    panic!("seed {seed}: file {f} reads back as other than 16 fingerprints");
                };
                for (b, &fp) in got.iter().enumerate() {
                    let g = fp >> 8 & 0xff_ffff;
                    assert!(
                        fp >> 32 == f as u64
                            && fp & 0xff == b as u64
                            && (from..=latest[f]).contains(&g),
                        "seed {seed}: block {b} of file {f}, cut while generation {} was written \
                         (generation {from} durable), holds {fp:#x}",
                        latest[f]
                    );
                }
            }
            let problems = fs.check().await.unwrap();
            assert!(problems.is_empty(), "seed {seed}: {problems:?}");
        })
        .unwrap();
    }
    assert!(
        cut_while_cleaning >= 10,
        "only {cut_while_cleaning} cuts came after cleaning began"
    );
    cut_after_threaded_logging
}

/// The error of a mkfs or mount that must fail.
/// What a file system at rest is checked for beyond its own structures: fsck after a data
/// zone is reset or taken offline behind the file system, or a superblock copy is damaged.
/// The file system's structures stay consistent in each case (plain `check` is clean), and
/// reads of the lost blocks succeed, so only the at-rest check sees it.
#[test]
fn fsck_at_rest_finds_data_the_device_lost_and_damaged_superblock_copies() {
    use zonelab_device::{ZoneAction, ZoneState};
    #[derive(Clone, Copy)]
    enum Damage {
        ResetDataZone,
        OfflineDataZone,
        WipeSuperblockCopy,
    }
    for damage in [
        Damage::ResetDataZone,
        Damage::OfflineDataZone,
        Damage::WipeSuperblockCopy,
    ] {
        let (sim, stack) = small_device(PayloadMode::Full);
        let (s, st) = (sim.clone(), stack.clone());
        let problems = run(&sim, async move {
            let fs = format(&s, &st).await;
            create_files(&fs, 1, |_| OwnedData::Bytes(bytes(3, 400_000))).await;
            fs.sync().await.unwrap();
            // The main-area zone holding most valid blocks: the file's data.
            let (zslba, zone) = {
                let state = fs.inner.st.borrow();
                let segs = &state.segs;
                let z = (0..segs.layout.sb.main_zones)
                    .max_by_key(|&z| segs.zone_valid(z))
                    .unwrap();
                assert!(segs.zone_valid(z) >= 97, "the file's 98 blocks");
                (segs.layout.zone_start(z), segs.layout.zone_id(z))
            };
            fs.unmount().await.unwrap();
            let cmd = match damage {
                Damage::ResetDataZone => IoCmd::ZoneMgmt {
                    action: ZoneAction::Reset,
                    zslba: Lba(zslba),
                    select_all: false,
                },
                Damage::OfflineDataZone => {
                    let mut ns = st.device().borrow_mut();
                    let dev = ns.zoned_mut().unwrap();
                    dev.inject_state(zone, ZoneState::Offline).unwrap();
                    IoCmd::Flush
                }
                Damage::WipeSuperblockCopy => IoCmd::Write {
                    slba: Lba(1),
                    data: OwnedData::Bytes(vec![0; 4096]),
                },
            };
            assert!(st.submit(cmd).await.status.is_ok());
            let fs = remount(&s, &st).await;
            let structural = fs.check().await.unwrap();
            assert!(structural.is_empty(), "{structural:?}");
            fs.check_at_rest().await.unwrap()
        });
        let want = match damage {
            Damage::ResetDataZone => "so they read back as zeros",
            Damage::OfflineDataZone => "is offline",
            Damage::WipeSuperblockCopy => "superblock copy 1 is damaged",
        };
        assert!(
            problems.len() == 1 && problems[0].contains(want),
            "{problems:?}"
        );
    }
    // Undamaged, the at-rest check is clean.
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    let problems = run(&sim, async move {
        let fs = format(&s, &stack).await;
        create_files(&fs, 3, |f| OwnedData::Bytes(bytes(f as u8, 50_000))).await;
        fs.unmount().await.unwrap();
        remount(&s, &stack).await.check_at_rest().await.unwrap()
    });
    assert!(problems.is_empty(), "{problems:?}");
}

/// Roll-forward's choice among a node's fsync-marked copies: the newest whose data blocks the
/// device holds (an address valid at the checkpoint, or below its zone's write pointer as the
/// device came up), else the newest with the lost blocks as holes, to be written again.
#[test]
fn roll_forward_recovers_no_data_block_past_the_write_pointer() {
    use crate::ondisk::{Footer, NULL_ADDR, Node, NodeBody};
    use std::collections::BTreeMap;
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let (layout, zones) = {
            let st = fs.inner.st.borrow();
            (
                st.segs.layout.clone(),
                st.segs.layout.sb.main_zones as usize,
            )
        };
        // Zone 5 came up written to offset 10; nothing in it is valid at the checkpoint.
        let mut offsets = vec![0; zones];
        offsets[5] = 10;
        let (below, past) = (layout.addr(5, 9), layout.addr(5, 10));
        let copy = |addrs: Vec<u32>| Node {
            body: NodeBody::Direct,
            addrs,
            footer: Footer {
                nid: 40,
                ino: 40,
                ..Default::default()
            },
        };
        let pick = |copies: Vec<(u32, Node)>| {
            let found = BTreeMap::from([(40, copies)]);
            fs.durable_copies(found, &offsets).remove(&40).unwrap()
        };
        // The newest copy lost a block: the older, whole one is recovered as it is.
        let (at, node, holed) = pick(vec![
            (1000, copy(vec![below, NULL_ADDR])),
            (1001, copy(vec![below, past])),
        ]);
        assert_eq!(
            (at, node.addrs, holed),
            (1000, vec![below, NULL_ADDR], false)
        );
        // No whole copy: the newest, with the lost block as a hole and marked for rewriting.
        let (at, node, holed) = pick(vec![(1001, copy(vec![past, below]))]);
        assert_eq!(
            (at, node.addrs, holed),
            (1001, vec![NULL_ADDR, below], true)
        );
        // Whole copies: the newest.
        let (at, _, holed) = pick(vec![(1000, copy(vec![])), (1001, copy(vec![below]))]);
        assert_eq!((at, holed), (1001, false));
    });
}

fn refused(r: Result<Fs, FsError>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_companion_device_holds_the_metadata_across_remounts() {
    let (sim, devices) = small_device_with_companion(PayloadMode::Full, &[]);
    let s = sim.clone();
    let d = devices.clone();
    run(&sim, async move {
        let fs = format(&s, &d).await;
        // Every sequential zone of the zoned device is main area: as large as on the device
        // with 2 conventional zones of 40.
        let (sim2, plain) = small_device(PayloadMode::Full);
        let s2 = sim2.clone();
        let plain = run(&sim2, async move { format(&s2, &plain).await.statfs() });
        assert_eq!(fs.statfs().blocks, plain.blocks);
        let dir = fs.mkdir(ROOT_INO, "dir", 0o755, 0, 0).await.unwrap();
        let f = fs.create(dir.ino, "a", 0o644, 0, 0).await.unwrap();
        fs.write(f.ino, 0, OwnedData::Bytes(bytes(5, 300_000)))
            .await
            .unwrap();
        fs.unmount().await.unwrap();
        let fs = remount(&s, &d).await;
        let a = fs.lookup(dir.ino, "a").await.unwrap();
        let OwnedData::Bytes(got) = fs.read(a.ino, 0, 1 << 20).await.unwrap() else {
            panic!()
        };
        assert!(
            got == bytes(5, 300_000),
            "contents differ after the remount"
        );
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        fs.unmount().await.unwrap();
    });
    // The metadata is on the companion: it has taken writes, and the zoned device, with no
    // conventional zones, holds no superblock (mounting it alone is refused).
    assert!(
        devices
            .companion
            .as_ref()
            .unwrap()
            .device()
            .borrow()
            .counters()
            .written_lbas
            > 0
    );
    let s = sim.clone();
    let zoned = devices.zoned.clone();
    let e = run(&sim, async move {
        refused(Fs::mount(s, zoned, opts(), Box::new(F2fs)).await)
    });
    assert!(e.contains("attach that companion"), "{e}");
}

#[test]
fn a_wrong_or_missing_companion_is_refused_with_a_clear_error() {
    // Formatted with a companion, mounted with one of another size.
    let (sim, devices) = small_device_with_companion(PayloadMode::Full, &[]);
    let other = companion_on(&sim, PayloadMode::Full, &[("blocks_per_plane", "80")]);
    let s = sim.clone();
    let d = devices.clone();
    let blank = companion_on(&sim, PayloadMode::Full, &[]);
    let (e, e_blank) = run(&sim, async move {
        format(&s, &d).await.unmount().await.unwrap();
        // The other companion carries a copy of the superblocks.
        let c = d.companion.clone().unwrap();
        let r = c
            .submit(IoCmd::Read {
                slba: Lba(0),
                nlb: 2,
                want_data: true,
            })
            .await;
        let sbs = r.data.expect("superblocks").bytes;
        let w = other
            .submit(IoCmd::Write {
                slba: Lba(0),
                data: OwnedData::Bytes(sbs),
            })
            .await;
        assert!(w.status.is_ok());
        let wrong = Devices::with_companion(d.zoned.clone(), other);
        let e = refused(Fs::mount(s.clone(), wrong, opts(), Box::new(F2fs)).await);
        // A companion that never held this file system.
        let blank = Devices::with_companion(d.zoned.clone(), blank);
        let e_blank = refused(Fs::mount(s, blank, opts(), Box::new(F2fs)).await);
        (e, e_blank)
    });
    assert!(
        e.contains("attached companion has") && e.contains("formatted with"),
        "{e}"
    );
    assert!(e_blank.contains("attach the companion"), "{e_blank}");

    // Formatted on conventional zones, mounted with a companion.
    let (sim, stack) = small_device(PayloadMode::Full);
    let c = companion_on(&sim, PayloadMode::Full, &[]);
    let s = sim.clone();
    let e = run(&sim, async move {
        format(&s, &stack).await.unmount().await.unwrap();
        refused(Fs::mount(s, Devices::with_companion(stack, c), opts(), Box::new(F2fs)).await)
    });
    assert!(e.contains("no valid superblock on the companion"), "{e}");

    // mkfs: a zoned companion, too small a companion, no companion and no conventional zones.
    let (sim, zoned) = small_device_with(PayloadMode::Full, &[("conventional_zones", "0")]);
    let (_, zoned_companion) = small_device(PayloadMode::Full);
    let tiny = companion_on(
        &sim,
        PayloadMode::Full,
        &[("blocks_per_plane", "8"), ("over_provisioning", "0.28")],
    );
    let s = sim.clone();
    let (e1, e2, e3) = run(&sim, async move {
        // Small segments and one node id per block: about 480 blocks of metadata, more than
        // the tiny companion's 368.
        let format = FormatOptions {
            segs_per_zone: 8,
            blocks_per_nid: 1,
        };
        let mk = |d: Devices| {
            let s = s.clone();
            async move { refused(Fs::mkfs(s, d, format, opts(), Box::new(F2fs)).await) }
        };
        (
            mk(Devices::with_companion(zoned.clone(), zoned_companion)).await,
            mk(Devices::with_companion(zoned.clone(), tiny)).await,
            mk(Devices::from(zoned)).await,
        )
    });
    assert!(e1.contains("must be a conventional one"), "{e1}");
    assert!(e2.contains("companion device has"), "{e2}");
    assert!(e3.contains("--companion"), "{e3}");
}

/// A sync of a page cache far larger than a zone runs writeback ahead of the device; the
/// file system keeps within the drive's active-zone limit (NVMe ZNS Maximum Active Resources)
/// by holding back writes to new zones, and refuses a limit below its six logs.
#[test]
fn writeback_stays_within_the_active_zone_limit() {
    let (sim, stack) = small_device_with(
        PayloadMode::Fingerprint,
        &[("max_active", "6"), ("max_open", "6")],
    );
    let s = sim.clone();
    run(&sim, async move {
        // Nothing written back before the sync.
        let opts = no_writeback_opts();
        let fs = Fs::mkfs(
            s.clone(),
            stack.clone(),
            FormatOptions::default(),
            opts,
            Box::new(F2fs),
        )
        .await
        .expect("mkfs");
        // 96 threads each write a 256 KiB file and fsync it at once: 12 zones of 2 MiB in
        // flight.
        let fs = Rc::new(fs);
        let mut tasks = Vec::new();
        for f in 0..96u64 {
            let fs = fs.clone();
            tasks.push(s.spawn(async move {
                let a = fs
                    .create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
                    .await
                    .unwrap();
                let fps = (0..64).map(|b| f << 16 | b).collect();
                fs.write(a.ino, 0, OwnedData::Fingerprints(fps))
                    .await
                    .unwrap();
                fs.fsync(a.ino, false).await
            }));
        }
        for t in tasks {
            t.await.expect("fsync within the active-zone limit");
        }
        fs.sync().await.expect("sync within the active-zone limit");
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
    let (sim, stack) = small_device_with(
        PayloadMode::Fingerprint,
        &[("max_active", "5"), ("max_open", "5")],
    );
    let s = sim.clone();
    let err = run(&sim, async move {
        Fs::mkfs(s, stack, FormatOptions::default(), opts(), Box::new(F2fs))
            .await
            .err()
            .expect("refused")
            .to_string()
    });
    assert!(err.contains("needs at least 6"), "{err}");
}

#[test]
fn inode_times_carry_the_timestamp_offset_and_utimes_are_stored_as_given() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        // As the FUSE mount does: the mount's start stands for a wall-clock time.
        let offset = 1_700_000_000_000_000_000u64;
        let o = FsOptions {
            timestamp_offset: offset,
            ..opts()
        };
        let fs = Fs::mkfs(
            s.clone(),
            stack.clone(),
            FormatOptions::default(),
            o.clone(),
            Box::new(F2fs),
        )
        .await
        .unwrap();
        let f = fs.create(ROOT_INO, "f", 0o644, 0, 0).await.unwrap();
        assert!(f.mtime.0 >= offset && f.mtime.0 - offset <= s.now().0);
        let before = s.now().0 + offset;
        fs.write(f.ino, 0, OwnedData::Bytes(bytes(3, 100)))
            .await
            .unwrap();
        let a = fs.getattr(f.ino).await.unwrap();
        assert!(a.mtime.0 >= before && a.mtime.0 <= s.now().0 + offset);
        // A time before 1970 (-5 s) and one from long ago, as utimes gives them.
        let pre_epoch = (-5_000_000_000i64) as u64;
        fs.setattr(
            f.ino,
            SetAttr {
                atime: Some(Nanos(pre_epoch)),
                mtime: Some(Nanos(1_000_000_000)),
                ..Default::default()
            },
        )
        .await
        .unwrap();
        fs.unmount().await.unwrap();
        let fs = Fs::mount(s.clone(), stack.clone(), o, Box::new(F2fs))
            .await
            .unwrap();
        let a = fs.lookup(ROOT_INO, "f").await.unwrap();
        assert_eq!(
            (a.atime.0 as i64, a.mtime.0),
            (-5_000_000_000, 1_000_000_000)
        );
        assert!(a.ctime.0 >= offset);
    });
}

/// The LBAs of [`small_device`]'s two conventional zones of 2 MiB, which hold the metadata.
const SMALL_DEVICE_META_LBAS: u64 = 2 * 512;

/// The commands the device saw while `recorded` ran, after `prepare`, on a freshly formatted
/// small device without a block-layer scheduler (no zone write lock, no merging in the block
/// layer: a zone's writes may be in flight together, as on the paper's kernel).
fn commands_recorded(
    prepare: impl AsyncFnOnce(&Fs) + 'static,
    recorded: impl AsyncFnOnce(&Fs) + 'static,
) -> Vec<zonelab_device::record::Recorded> {
    commands_recorded_under(Box::new(F2fs), prepare, recorded)
}

/// [`commands_recorded`] with the file system under `policy`.
fn commands_recorded_under(
    policy: Box<dyn Policy>,
    prepare: impl AsyncFnOnce(&Fs) + 'static,
    recorded: impl AsyncFnOnce(&Fs) + 'static,
) -> Vec<zonelab_device::record::Recorded> {
    let (sim, stack) = small_device_under(PayloadMode::Fingerprint, &[], IoScheduler::None);
    let log = Rc::new(zonelab_device::record::CommandLog::new());
    let s = sim.clone();
    let lg = log.clone();
    run(&sim, async move {
        let fs = format_with(&s, &stack, policy).await;
        prepare(&fs).await;
        stack.record_into(Some(lg));
        recorded(&fs).await;
        stack.record_into(None);
    });
    log.take()
}

#[test]
fn writeback_issues_the_files_writes_without_waiting_for_each() {
    // The device completes a write when its pages are programmed.
    let log = commands_recorded(
        async |_| {},
        async |fs| {
            for f in 0..8u64 {
                let a = fs
                    .create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
                    .await
                    .unwrap();
                let fps = (0..4).map(|b| f << 8 | b).collect();
                fs.write(a.ino, 0, OwnedData::Fingerprints(fps))
                    .await
                    .unwrap();
            }
            fs.sync().await.unwrap();
        },
    );
    // The files' data writes (4 blocks each; nodes are single blocks) all reach the device
    // before the first of them completes.
    let data: Vec<_> = log
        .into_iter()
        .filter(|r| {
            matches!(&r.cmd, zonelab_device::record::DeviceCmd::Write { slba, data, .. }
                if slba.0 >= SMALL_DEVICE_META_LBAS && data.blocks(4096) == 4)
        })
        .collect();
    assert_eq!(data.len(), 8, "one write per file");
    let first_done = data.iter().map(|r| r.done).min().unwrap();
    assert!(
        data.iter().all(|r| r.now < first_done),
        "writes waited for each other: {:?}",
        data.iter().map(|r| (r.now, r.done)).collect::<Vec<_>>()
    );
}

/// A cleaning's checkpoint writes its nodes and metadata while the victim's moves (here IZC's
/// device copies) are still under way, and writes its checkpoint pack only once they are done:
/// F2FS's write_checkpoint flushes the dirty nodes and metadata, then waits for all writeback
/// (the cleaned data with it) before it commits the pack.
#[test]
fn a_cleaning_checkpoint_writes_its_metadata_while_the_moves_run_and_commits_after_them() {
    use zonelab_device::record::DeviceCmd;
    let izc = Box::new(Izc {
        copy: InStorage {
            cached: CachedPages::Device,
            allocation: Allocation::CopybackAware,
        },
    });
    let log = commands_recorded_under(
        izc,
        // 384 blocks of a, then 384 of b: once a is gone, the first zone holds b's first 128
        // blocks and is the emptiest full zone.
        async |fs| {
            for name in ["a", "b"] {
                let f = fs.create(ROOT_INO, name, 0o644, 0, 0).await.unwrap();
                fs.write(f.ino, 0, OwnedData::Fingerprints(vec![7; 384]))
                    .await
                    .unwrap();
                fs.sync().await.unwrap();
            }
            fs.unlink(ROOT_INO, "a").await.unwrap();
            fs.sync().await.unwrap();
        },
        async |fs| {
            assert!(fs.clean_one(true).await.unwrap(), "a zone to clean");
            assert_eq!(fs.stats().zones_cleaned_in_device, 1);
        },
    );
    let submitted = log
        .iter()
        .find(|r| matches!(r.cmd, DeviceCmd::ZoneCompaction { .. }))
        .expect("a zone_compaction")
        .now;
    // When the host learnt that the copies were all under way (its last look at them).
    let copied = log
        .iter()
        .filter(|r| matches!(r.cmd, DeviceCmd::Settle))
        .map(|r| r.done)
        .max()
        .expect("the copies were queued");
    let writes: Vec<(u64, Nanos)> = log
        .iter()
        .filter_map(|r| match &r.cmd {
            DeviceCmd::Write { slba, .. } => Some((slba.0, r.now)),
            _ => None,
        })
        .collect();
    assert!(
        writes.iter().any(|&(_, t)| t > submitted && t < copied),
        "no checkpoint write before the copies were done at {copied}: {writes:?}"
    );
    // The pack: the writes between the checkpoint's last two flushes.
    let flushes: Vec<Nanos> = log
        .iter()
        .filter(|r| matches!(r.cmd, DeviceCmd::Flush))
        .map(|r| r.now)
        .collect();
    let [.., before_pack, after_pack] = flushes[..] else {
        panic!("a checkpoint flushes twice: {flushes:?}");
    };
    let pack: Vec<&(u64, Nanos)> = writes
        .iter()
        .filter(|&&(_, t)| t >= before_pack && t <= after_pack)
        .collect();
    assert!(!pack.is_empty(), "no checkpoint pack between {flushes:?}");
    assert!(
        pack.iter().all(|&&(_, t)| t >= copied),
        "the pack went before the copies were done at {copied}: {pack:?}"
    );
}

/// A checkpoint writes its NAT, SIT and SSA blocks in address runs, one write per run (F2FS's
/// merged meta bios), not a write per block: on the page-mapped conventional zones a lone
/// block costs a read-modify-write of a flash page.
#[test]
fn a_checkpoint_merges_adjacent_metadata_blocks_into_one_write() {
    let log = commands_recorded(
        // Enough files that their NAT entries fill consecutive NAT blocks.
        async |fs| {
            for f in 0..1200u64 {
                fs.create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
                    .await
                    .unwrap();
            }
        },
        async |fs| fs.sync().await.unwrap(),
    );
    let meta: Vec<u64> = log
        .into_iter()
        .filter_map(|r| match &r.cmd {
            zonelab_device::record::DeviceCmd::Write { slba, data, .. }
                if slba.0 < SMALL_DEVICE_META_LBAS =>
            {
                Some(data.blocks(4096))
            }
            _ => None,
        })
        .collect();
    let blocks: u64 = meta.iter().sum();
    assert!(
        blocks > meta.len() as u64 && meta.iter().any(|&n| n >= 3),
        "{} metadata blocks in {} writes: {meta:?}",
        blocks,
        meta.len()
    );
}

/// `reserved_zones` sets the cleaning reserve and `overprovision_zones` the zones beyond it
/// (as many as the reserve unless set): both are left out of the capacity users see, and
/// spare space that would leave users too little is refused at mkfs with what to give.
#[test]
fn reserved_and_overprovision_zones_set_the_capacity_and_are_checked() {
    let capacity = |reserved: Option<u32>, overprovision: Option<u32>| {
        let (sim, stack) = small_device(PayloadMode::Full);
        let s = sim.clone();
        run(&sim, async move {
            let o = FsOptions {
                reserved_zones: reserved,
                overprovision_zones: overprovision,
                ..opts()
            };
            Fs::mkfs(s, stack, FormatOptions::default(), o, Box::new(F2fs))
                .await
                .map(|fs| {
                    (
                        fs.statfs().blocks,
                        fs.inner.st.borrow().segs.layout.blocks_per_zone as u64,
                    )
                })
        })
    };
    let (five, bpz) = capacity(Some(5), None).expect("a reserve of 5 fits");
    let (eight, _) = capacity(Some(8), None).expect("a reserve of 8 fits");
    assert_eq!(five - eight, 2 * 3 * bpz);
    let (five_two, _) = capacity(Some(5), Some(2)).expect("5 + 2 fit");
    assert_eq!(five_two - five, 3 * bpz);
    match capacity(Some(1000), None) {
        Err(FsError::Invalid(m)) => assert!(m.contains("reserved_zones = 1000"), "{m}"),
        other => panic!(
            "a reserve of 1000 zones was not refused: {:?}",
            other.map(|c| c.0)
        ),
    }
    assert!(matches!(capacity(Some(2), None), Err(FsError::Invalid(_))));
    match capacity(Some(5), Some(1000)) {
        Err(FsError::Invalid(m)) => assert!(m.contains("overprovision_zones = 1000"), "{m}"),
        other => panic!(
            "an overprovision of 1000 zones was not refused: {:?}",
            other.map(|c| c.0)
        ),
    }
}

/// An inactive ratio of 0 (no page could stay active) is refused at mkfs with what to give;
/// any other is taken.
#[test]
fn an_inactive_ratio_of_zero_is_refused() {
    let mkfs = |ratio: Option<u32>| {
        let (sim, stack) = small_device(PayloadMode::Fingerprint);
        let s = sim.clone();
        run(&sim, async move {
            let o = FsOptions {
                inactive_ratio: ratio,
                ..opts()
            };
            Fs::mkfs(s, stack, FormatOptions::default(), o, Box::new(F2fs))
                .await
                .map(|_| ())
        })
    };
    match mkfs(Some(0)) {
        Err(FsError::Invalid(m)) => assert!(m.contains("inactive_ratio = 0"), "{m}"),
        other => panic!("an inactive ratio of 0 was not refused: {other:?}"),
    }
    assert!(mkfs(Some(1)).is_ok() && mkfs(Some(4)).is_ok() && mkfs(None).is_ok());
}

/// mkfs.f2fs's spare space: on seed 000's 16 GiB with 32 MiB sections it reserves 39 sections
/// and leaves about 30 more out (overprovision 6.31%); a small main area takes the coarse
/// ratios (10% here); one too small for any ratio is all spare.
#[test]
fn f2fs_tools_spare_follows_mkfs_f2fs() {
    let (reserved, op) = crate::fs::f2fs_tools_spare(8176, 16);
    assert_eq!((reserved, op), (635, 475));
    assert_eq!(reserved / 16, 39);
    assert_eq!(crate::fs::f2fs_tools_spare(200, 1), (28, 17));
    assert_eq!(crate::fs::f2fs_tools_spare(64, 16), (64, 0));
}

/// A call that only reads holds no share of the checkpoint lock (F2FS's read paths take no
/// cp_rwsem): a checkpoint started while a long read waits for the device finishes first.
#[test]
fn a_checkpoint_does_not_wait_for_a_read_in_flight() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        // Four times the page cache, so the read below goes to the device page by page.
        let len = 4usize << 20;
        let a = fs.create(ROOT_INO, "big", 0o644, 0, 0).await.unwrap();
        fs.write(a.ino, 0, OwnedData::Bytes(bytes(3, len)))
            .await
            .unwrap();
        fs.sync().await.unwrap();
        let read_done = Rc::new(std::cell::Cell::new(Nanos::ZERO));
        let reader = {
            let (fs, s, done) = (fs.clone(), s.clone(), read_done.clone());
            s.clone().spawn(async move {
                let got = fs.read(a.ino, 0, len as u64).await.unwrap();
                done.set(s.now());
                got
            })
        };
        s.sleep(Nanos(1_000_000)).await;
        assert_eq!(read_done.get(), Nanos::ZERO, "the read is still in flight");
        fs.checkpoint().await.unwrap();
        let cp_done = s.now();
        let got = reader.await;
        assert!(got == OwnedData::Bytes(bytes(3, len)));
        assert!(
            cp_done < read_done.get(),
            "checkpoint done at {cp_done:?}, read at {:?}",
            read_done.get()
        );
    });
}

/// A device read pins its zone: the reset of a cleaned zone waits until reads that looked up
/// a block there before it moved are done.
#[test]
fn a_zone_reset_waits_for_the_reads_pinned_to_it() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &stack).await;
        let z = 3;
        let at = fs.inner.st.borrow().segs.layout.addr(z, 0);
        let pin = fs.pin_read(at).expect("a main-area block");
        let waited = {
            let (fs, s) = (fs.clone(), s.clone());
            s.clone().spawn(async move {
                fs.reads_done(z).await;
                s.now()
            })
        };
        // Another zone's reads do not hold it up.
        fs.reads_done(z + 1).await;
        s.sleep(Nanos(5_000_000)).await;
        let unpinned = s.now();
        drop(pin);
        assert_eq!(waited.await, unpinned);
        assert!(fs.inner.read_pins.borrow().is_empty());
    });
}

/// The summary blocks a checkpoint wrote stay in the page cache (F2FS writes them from its
/// meta mapping), so cleaning a zone right after reads none of them again: with its data and
/// nodes cached too, the cleaning reads nothing from the device.
#[test]
fn cleaning_finds_the_summary_blocks_a_checkpoint_wrote_in_the_cache() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = Fs::mkfs(
            s.clone(),
            Devices::from(stack.clone()),
            FormatOptions::default(),
            FsOptions {
                cache_bytes: 16 << 20,
                ..Default::default()
            },
            Box::new(F2fs),
        )
        .await
        .expect("mkfs");
        // 1.5 MiB of a, then 1.5 MiB of b: once a is gone, the zone a and b share holds b's
        // first 128 blocks and is the emptiest full zone.
        for name in ["a", "b"] {
            let f = fs.create(ROOT_INO, name, 0o644, 0, 0).await.unwrap();
            fs.write(f.ino, 0, OwnedData::Bytes(bytes(1, 3 << 19)))
                .await
                .unwrap();
            fs.sync().await.unwrap();
        }
        fs.unlink(ROOT_INO, "a").await.unwrap();
        fs.sync().await.unwrap();
        let reads = || stack.device().borrow().counters().reads;
        let before = reads();
        assert!(fs.clean_one(true).await.unwrap(), "a zone to clean");
        assert_eq!(fs.stats().zones_cleaned, 1);
        assert!(fs.stats().blocks_moved > 0, "{:?}", fs.stats());
        assert_eq!(reads(), before, "device reads while cleaning a cached zone");
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// Creates empty files `names` in the root; returns their inodes by name.
async fn create_named(
    fs: &Fs,
    names: &[&'static str],
) -> std::collections::BTreeMap<&'static str, Ino> {
    let mut ino = std::collections::BTreeMap::new();
    for &name in names {
        let a = fs.create(ROOT_INO, name, 0o644, 0, 0).await.unwrap();
        ino.insert(name, a.ino);
    }
    ino
}

/// Writes each (file, blocks) in turn from offset 0, syncing after each, so the files lie in
/// the data log in that order.
async fn write_in_turn(
    fs: &Fs,
    ino: &std::collections::BTreeMap<&'static str, Ino>,
    files: &[(&'static str, usize)],
) {
    for &(name, blocks) in files {
        fs.write(ino[name], 0, OwnedData::Fingerprints(vec![7; blocks]))
            .await
            .unwrap();
        fs.sync().await.unwrap();
    }
}

/// Host cleaning writes a victim's survivors in the order of their victim addresses, as
/// F2FS's gc_data_segment moves them block after block, not file by file in inode order.
#[test]
fn host_cleaning_moves_blocks_in_victim_address_order() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = format(&s, &Devices::from(stack)).await;
        // a has the lower inode number, but b's blocks come first in the zone.
        let ino = create_named(&fs, &["a", "b", "x", "y"]).await;
        assert!(ino["a"] < ino["b"]);
        write_in_turn(&fs, &ino, &[("x", 256), ("b", 64), ("a", 64), ("y", 256)]).await;
        let before = (
            fs.block_addr(ino["a"], 0).await.unwrap(),
            fs.block_addr(ino["b"], 0).await.unwrap(),
        );
        assert!(before.1 < before.0, "b written first: {before:?}");
        fs.unlink(ROOT_INO, "x").await.unwrap();
        fs.unlink(ROOT_INO, "y").await.unwrap();
        fs.sync().await.unwrap();
        assert!(fs.clean_one(true).await.unwrap(), "a zone to clean");
        let after = (
            fs.block_addr(ino["a"], 0).await.unwrap(),
            fs.block_addr(ino["b"], 0).await.unwrap(),
        );
        assert!(
            after.0 != before.0 && after.1 != before.1,
            "both moved: {after:?}"
        );
        assert_eq!(after.0, after.1 + 64, "b's 64 blocks, then a's: {after:?}");
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// IZC-H (seed 000 §3.2.1, §4.1): the device's copy of a victim is issued before the host
/// writes the fully cached chunks it keeps, as the published ZNS+ F2FS's gc_data_segment sends
/// a segment's zone_compaction (its phase 3) before it moves the host's blocks (phase 4); so
/// in the cold data log the host's blocks follow the device's region.
#[test]
fn izc_h_issues_the_device_copy_before_the_hosts_writes() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let copy = InStorage {
            cached: CachedPages::Host,
            allocation: Allocation::CopybackAware,
        };
        let fs = format_with(&s, &Devices::from(stack), Box::new(Izc { copy })).await;
        let ino = create_named(&fs, &["u", "x", "c", "y"]).await;
        // A 512-block zone: u, then x pushing u's pages out of the 1 MiB cache, then c and
        // y, which runs into the next zone (so the log leaves this one).
        write_in_turn(&fs, &ino, &[("u", 64), ("x", 256), ("c", 64), ("y", 160)]).await;
        fs.unlink(ROOT_INO, "x").await.unwrap();
        fs.unlink(ROOT_INO, "y").await.unwrap();
        fs.read(ino["c"], 0, 64 * 4096).await.unwrap();
        fs.sync().await.unwrap();
        let addrs = |name: &'static str| {
            let fs = fs.clone();
            let ino = ino[name];
            async move {
                let mut v = Vec::new();
                for idx in 0..64 {
                    v.push(fs.block_addr(ino, idx).await.unwrap());
                }
                v
            }
        };
        {
            let st = fs.inner.st.borrow();
            assert!((0..64).all(|i| st.cache.has_page(ino["c"], i)), "c cached");
            assert!(
                (0..64).all(|i| !st.cache.has_page(ino["u"], i)),
                "u not cached"
            );
        }
        let (u0, c0) = (addrs("u").await, addrs("c").await);
        assert!(fs.clean_one(true).await.unwrap(), "a zone to clean");
        let (u1, c1) = (addrs("u").await, addrs("c").await);
        let event = fs.gc_log(0);
        let event = event.iter().find_map(GcEvent::compaction).expect("logged");
        assert_eq!(
            (event.moved_blocks, event.device_copied_blocks),
            (128, 64),
            "u by the device, c by the host"
        );
        assert!(
            u0.iter()
                .chain(&c0)
                .all(|a| !u1.contains(a) && !c1.contains(a))
        );
        let zone = |a: &u32| fs.inner.st.borrow().segs.layout.locate(*a).map(|l| l.0);
        assert!(
            u1.iter().chain(&c1).all(|a| zone(a) == zone(&u1[0])),
            "one destination zone: {u1:?} {c1:?}"
        );
        assert!(
            u1.iter().max() < c1.iter().min(),
            "the device's region first, then the host's writes: {u1:?} {c1:?}"
        );
        let problems = fs.check().await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    });
}

/// With threaded logging, foreground cleaning waits until half the reserve is left, as the
/// published ZNS+ F2FS's `has_not_enough_free_secs` (logs weigh threaded logging above that);
/// without it, cleaning keeps the whole reserve free. Small reserves keep three zones.
#[test]
fn threaded_logging_lets_free_zones_fall_to_half_the_reserve_before_cleaning() {
    use crate::fs::cleaning_threshold;
    // "fewer than n free": 14 in reserve cleans at 7 free with threaded logging.
    assert_eq!(cleaning_threshold(14, true), 8);
    assert_eq!(cleaning_threshold(14, false), 14);
    assert_eq!(cleaning_threshold(6, true), 4);
    assert_eq!(cleaning_threshold(3, true), 3);
    assert_eq!(cleaning_threshold(3, false), 3);
    for r in 3..200 {
        let t = cleaning_threshold(r, true);
        assert!(
            (3..=r).contains(&t) && t <= (r / 2 + 1).max(3),
            "reserve {r}: {t}"
        );
    }
}

/// A fresh f2fs file system on `stack` with 8 zones in reserve: large enough that a cleaning
/// round never runs short of free zones for its moves (which would checkpoint early).
async fn with_round_reserve(sim: Sim, stack: Rc<HostStack>) -> Fs {
    let o = FsOptions {
        reserved_zones: Some(8),
        ..opts()
    };
    Fs::mkfs(sim, stack, FormatOptions::default(), o, Box::new(F2fs))
        .await
        .unwrap()
}

/// A foreground cleaning round opens with a checkpoint, cleans victim after victim and closes
/// with one more (the published ZNS+ F2FS's f2fs_gc, from F2FS 4.10); between victims it
/// checkpoints only once it has freed more than half the reserve, then after every victim
/// while zones are still short. The write that first has to clean here cleans several zones,
/// fewer than half the reserve, with two checkpoints (one after every victim would make one
/// more than the zones cleaned).
#[test]
fn a_foreground_cleaning_round_checkpoints_before_and_after_its_victims() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = with_round_reserve(s, stack).await;
        let files = (fs.statfs().blocks * 8 / 10 / 16) as usize;
        let data = |f: usize, g: u64| {
            OwnedData::Fingerprints((0..16).map(|b| (f as u64) << 32 | g << 8 | b).collect())
        };
        let inos = create_files(&fs, files, |f| data(f, 0)).await;
        for g in 1..=(6 * files as u64) {
            let f = (g as usize * 7919) % files;
            let before = fs.stats();
            fs.write(inos[f], 0, data(f, g)).await.unwrap();
            let after = fs.stats();
            let cleaned = after.foreground_cleanings - before.foreground_cleanings;
            if cleaned > 0 {
                let half = u64::from(fs.inner.st.borrow().reserved_zones / 2);
                assert!(
                    (2..=half).contains(&cleaned),
                    "{cleaned} zones cleaned: several, none after half the reserve"
                );
                assert_eq!(
                    after.checkpoints - before.checkpoints,
                    2,
                    "{cleaned} zones cleaned"
                );
                return;
            }
        }
        panic!("no write had to clean: {:?}", fs.stats());
    });
}

/// Runs one foreground round with the cleaning threshold at `clean_below` free zones and
/// checks the file system after it: (zones cleaned, checkpoints taken).
async fn foreground_round_below(fs: &Fs, clean_below: u32) -> (u64, u64) {
    fs.inner.st.borrow_mut().clean_below = clean_below;
    let before = fs.stats();
    fs.foreground_round(Nanos::ZERO).await.unwrap();
    let after = fs.stats();
    let problems = fs.check().await.unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    (
        after.foreground_cleanings - before.foreground_cleanings,
        after.checkpoints - before.checkpoints,
    )
}

/// Past half the reserve, a foreground round checkpoints after every victim while zones are
/// still short (the published ZNS+ F2FS's f2fs_gc: `sec_freed > reserved_sections / 2`). A
/// round asked for 7 more free zones with a reserve of 8 cleans more victims than that (their
/// moves take zones too): none of its first 4 is followed by a checkpoint, every later one is.
#[test]
fn past_half_the_reserve_a_round_checkpoints_after_every_victim() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = with_round_reserve(s, stack).await;
        half_valid_zones(&fs, 6).await;
        let free = fs.free_zones();
        assert!(free >= 3, "{free} free zones");
        let (cleaned, checkpoints) = foreground_round_below(&fs, free + 7).await;
        // Victims 1..=4 leave no checkpoint; each later one but the last is followed by one
        // (zones still short), and the last by the closing one.
        let half = u64::from(fs.inner.st.borrow().reserved_zones / 2);
        assert_eq!(half, 4);
        assert!(cleaned > half + 1, "{cleaned} zones cleaned");
        assert_eq!(checkpoints, cleaned - half);
    });
}

/// A foreground round cleans a victim even when its opening checkpoint left zones enough:
/// the published ZNS+ F2FS's f2fs_gc looks for its victim after that checkpoint and cleans it
/// either way, so a round always frees space.
#[test]
fn a_foreground_round_cleans_one_victim_at_least() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let fs = with_round_reserve(s, stack).await;
        half_valid_zones(&fs, 6).await;
        let (cleaned, checkpoints) = foreground_round_below(&fs, 0).await;
        assert_eq!(cleaned, 1);
        assert_eq!(checkpoints, 1, "the closing one");
    });
}

/// With `dirty_zones_raise_thresholds`, dirty nodes and dentry blocks raise the cleaning
/// threshold by the zones a checkpoint would fill with them, dentry blocks twice (F2FS 4.10's
/// `has_not_enough_free_secs`): new files in a new directory dirty both, and a checkpoint
/// writes them and takes the rise away.
#[test]
fn dirty_nodes_and_dentry_blocks_raise_the_cleaning_threshold() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        // A cache large enough that no writeback starts before the checkpoint.
        let o = FsOptions {
            reserved_zones: Some(8),
            cache_bytes: 64 << 20,
            dirty_zones_raise_thresholds: true,
            ..opts()
        };
        let fs = Fs::mkfs(s, stack, FormatOptions::default(), o, Box::new(F2fs))
            .await
            .unwrap();
        fs.checkpoint().await.unwrap();
        assert_eq!(fs.inner.st.borrow().dirty_zones(), 0, "all written");
        let d = fs.mkdir(ROOT_INO, "d", 0o755, 0, 0).await.unwrap();
        for f in 0..40 {
            fs.create(d.ino, &format!("f{f}"), 0o644, 0, 0)
                .await
                .unwrap();
        }
        {
            let st = fs.inner.st.borrow();
            let (nodes, dents) = (
                st.cache.dirty_node_pages() as u64,
                st.cache.dirty_dentry_pages() as u64,
            );
            // The new directory's block and the root's block naming it.
            assert_eq!(dents, 2, "{nodes} dirty nodes");
            assert!(nodes > 40, "{nodes} dirty nodes");
            let l = &st.segs.layout;
            assert!(nodes <= l.blocks_per_zone as u64, "fits one zone");
            assert_eq!(
                st.dirty_zones(),
                3,
                "one zone for the nodes, two for the dentries"
            );
        }
        let free = fs.free_zones();
        fs.inner.st.borrow_mut().clean_below = free - 2;
        assert!(
            fs.free_zones_short(),
            "{free} free, 3 more wanted than the threshold"
        );
        fs.checkpoint().await.unwrap();
        assert_eq!(fs.inner.st.borrow().dirty_zones(), 0);
        assert!(!fs.free_zones_short());
        // Off (the default), the dirty pages raise nothing.
        fs.create(d.ino, "g", 0o644, 0, 0).await.unwrap();
        assert!(fs.inner.st.borrow().dirty_zones() > 0);
        fs.inner.st.borrow_mut().dirty_zones_raise_thresholds = false;
        assert_eq!(fs.inner.st.borrow().dirty_zones(), 0);
    });
}

/// Handing a page to the device costs the host `write_page` of CPU (F2FS's per-page writeback
/// work): with one core, syncing a file's dirty pages and nodes takes that much longer per page.
#[test]
fn writing_pages_back_costs_the_host_cpu_per_page() {
    const PAGES: u64 = 128;
    let sync_time = |write_page: Nanos| {
        let (sim, stack) = small_device(PayloadMode::Fingerprint);
        let s = sim.clone();
        run(&sim, async move {
            let mut o = opts();
            o.host.cores = 1;
            o.host.write_page = write_page;
            let fs = Fs::mkfs(
                s.clone(),
                stack,
                FormatOptions::default(),
                o,
                Box::new(F2fs),
            )
            .await
            .expect("mkfs");
            let f = fs.create(ROOT_INO, "f", 0o644, 0, 0).await.unwrap();
            fs.write(f.ino, 0, OwnedData::Fingerprints((0..PAGES).collect()))
                .await
                .unwrap();
            let t0 = s.now();
            fs.sync().await.unwrap();
            s.now() - t0
        })
    };
    let cost = Nanos::from_us(20);
    let (free, paid) = (sync_time(Nanos::ZERO), sync_time(cost));
    let extra = paid - free;
    // The data pages, and the few nodes the sync writes with them.
    assert!(
        extra >= cost.times(PAGES),
        "{extra:?} more for {PAGES} pages"
    );
    assert!(
        extra < cost.times(PAGES + 16),
        "{extra:?} more for {PAGES} pages"
    );
}

mod copyback_aware_allocation {
    //! CAB (seed 000 §3.3.1, Fig. 5) over random victim segments.
    use super::*;
    use crate::dev::Dev;
    use crate::fs::assign_destinations;
    use crate::ondisk::BlkAddr;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A segment's chunks: whole (every block valid) or a random pattern of valid blocks.
    fn segment() -> impl Strategy<Value = Vec<[bool; 4]>> {
        proptest::collection::vec(
            prop_oneof![
                3 => Just([true; 4]),
                2 => any::<[bool; 4]>(),
            ],
            128,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// The valid blocks of a victim segment go to a reserved region of as many blocks
        /// starting anywhere in another zone. Every reserved block is used once; CAB places
        /// for copyback, on each chip, as many whole source chunks as the chip has both whole
        /// source chunks and whole reserved chunks (no placement inside the region can do
        /// better), and never fewer than copyback-unaware allocation.
        #[test]
        fn copyback_aware_allocation_copies_back_all_a_chip_can(
            chunks in segment(),
            start in 0u64..512,
            dst_zone in 6u64..12,
        ) {
            let (sim, stack) = small_device(PayloadMode::Fingerprint);
            let dev = Dev::new(sim, Devices::from(stack)).unwrap();
            let lpc = dev.blocks_per_chunk();
            prop_assert_eq!(lpc, 4, "the segments are drawn with 4 blocks a chunk");
            let zone_blocks = 128 * lpc;
            // Zone 5 is the victim.
            let src: Vec<BlkAddr> = chunks
                .iter()
                .enumerate()
                .flat_map(|(c, bits)| {
                    bits.iter()
                        .enumerate()
                        .filter(|&(_, &v)| v)
                        .map(move |(k, _)| (5 * zone_blocks + c as u64 * lpc + k as u64) as BlkAddr)
                })
                .collect();
            prop_assume!(!src.is_empty());
            let start = start.min(zone_blocks - src.len() as u64);
            let dst: Vec<BlkAddr> = (0..src.len() as u64)
                .map(|i| (dst_zone * zone_blocks + start + i) as BlkAddr)
                .collect();
            // Whole chunks per chip on each side.
            let whole = |addrs: &[BlkAddr]| {
                let mut per_chunk: BTreeMap<u64, (u64, (u32, u32))> = BTreeMap::new();
                for &a in addrs {
                    let (chip, chunk) = dev.chip_of(a as u64);
                    per_chunk.entry(chunk).or_insert((0, chip)).0 += 1;
                }
                let mut per_chip: BTreeMap<(u32, u32), u64> = BTreeMap::new();
                for (n, chip) in per_chunk.into_values() {
                    if n == lpc {
                        *per_chip.entry(chip).or_default() += 1;
                    }
                }
                per_chip
            };
            let (src_whole, dst_whole) = (whole(&src), whole(&dst));
            let best: u64 = src_whole
                .iter()
                .map(|(chip, &n)| n.min(dst_whole.get(chip).copied().unwrap_or(0)))
                .sum();
            let full = chunks.iter().filter(|b| b.iter().all(|&v| v)).count() as u64;
            let cab = assign_destinations(&src, &dst, Allocation::CopybackAware, &dev);
            let cub = assign_destinations(&src, &dst, Allocation::Sequential, &dev);
            for p in [&cab, &cub] {
                let mut used = p.to.clone();
                used.sort_unstable();
                prop_assert_eq!(&used, &dst, "every reserved block once");
                prop_assert_eq!(p.full_chunk_blocks, full * lpc);
            }
            prop_assert_eq!(cab.copyback_blocks, best * lpc);
            prop_assert!(cub.copyback_blocks <= cab.copyback_blocks);
        }
    }
}

/// Node IDs freed by deletes come back only with a checkpoint: with a page cache that never
/// writes back (nothing else checkpoints), creating and deleting many more files than the NAT
/// holds still succeeds, while as many files kept alive run out of node IDs (ENOSPC).
#[test]
fn freed_node_ids_come_back_by_a_checkpoint_before_the_nat_runs_out() {
    let (sim, stack) = small_device(PayloadMode::Fingerprint);
    let s = sim.clone();
    run(&sim, async move {
        let opts = no_writeback_opts();
        // The smallest NAT: 1,024 node IDs and a little more.
        let format = FormatOptions {
            blocks_per_nid: u32::MAX,
            ..FormatOptions::default()
        };
        let fs = Fs::mkfs(s.clone(), stack.clone(), format, opts, Box::new(F2fs))
            .await
            .expect("mkfs");
        let nids = fs.inner.st.borrow().nat.entries.len();
        assert!(nids < 2048, "{nids} node IDs");
        let before = fs.stats().checkpoints;
        for f in 0..3 * nids {
            let a = fs
                .create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
                .await
                .unwrap_or_else(|e| panic!("create {f} of {nids}: {e}"));
            fs.write(a.ino, 0, OwnedData::Fingerprints(vec![f as u64]))
                .await
                .unwrap();
            fs.unlink(ROOT_INO, &format!("f{f}")).await.unwrap();
        }
        let taken = fs.stats().checkpoints - before;
        assert!(
            (3..=40).contains(&taken),
            "{taken} checkpoints for {} node IDs freed",
            3 * nids
        );
        // Kept alive, the files do use the node IDs up.
        let mut kept = 0;
        let err = loop {
            match fs.create(ROOT_INO, &format!("k{kept}"), 0o644, 0, 0).await {
                Ok(_) => kept += 1,
                Err(e) => break e,
            }
        };
        assert_eq!(err, FsError::NoSpace);
        assert!(kept + 16 > nids && kept < nids, "{kept} of {nids}");
    });
}
