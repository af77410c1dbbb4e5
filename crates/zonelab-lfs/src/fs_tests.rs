//! End-to-end tests of the file system on a small simulated ZNS device.

use crate::fs::{Fs, FsOptions};
use crate::layout::FormatOptions;
use crate::policy::F2fs;
use crate::vfs::{FileKind, FileSystem, FsError, ROOT_INO, SetAttr};
use std::rc::Rc;
use zonelab_device::{
    HostStack, IoEngine, IoScheduler, Namespace, OwnedData, PayloadMode, Profile,
};
use zonelab_sim::Sim;

/// A znsplus-mlc device shrunk to 40 zones of 2 MiB (512 blocks), 2 of them conventional.
pub(crate) fn small_device(payload: PayloadMode) -> (Sim, Rc<HostStack>) {
    let sets: Vec<(String, String)> = [
        ("zones", "40"),
        ("conventional_zones", "2"),
        ("pages_per_block", "8"),
        ("zone_size", "2MiB"),
        ("blocks_per_plane", "64"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let p = Profile::load("znsplus-mlc", &sets).expect("small profile");
    let sim = Sim::new();
    let ns = Namespace::new(p, payload).expect("device").shared();
    let stack =
        HostStack::new(sim.clone(), ns, IoEngine::IoUring, IoScheduler::MqDeadline).expect("stack");
    (sim, stack)
}

pub(crate) fn opts() -> FsOptions {
    FsOptions {
        cache_bytes: 1 << 20,
        ..Default::default()
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
        let fs = Fs::mkfs(
            s.clone(),
            stack.clone(),
            FormatOptions::default(),
            opts(),
            Box::new(F2fs),
        )
        .await
        .unwrap();
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

        let fs = Fs::mount(s.clone(), stack, opts(), Box::new(F2fs))
            .await
            .unwrap();
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

#[test]
fn rename_unlink_truncate_follow_posix() {
    let (sim, stack) = small_device(PayloadMode::Full);
    let s = sim.clone();
    run(&sim, async move {
        let fs = Fs::mkfs(s, stack, FormatOptions::default(), opts(), Box::new(F2fs))
            .await
            .unwrap();
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
        let s = sim.clone();
        run(&sim, async move {
            let fs = Fs::mkfs(s, stack, FormatOptions::default(), opts(), Box::new(F2fs))
                .await
                .unwrap();
            let cap = fs.statfs().blocks;
            // 80% of the capacity in 64 KiB files, then rewrite random files many times.
            let files = (cap * 8 / 10 / 16) as usize;
            let mut inos = Vec::new();
            let content = |f: usize, g: u64| -> OwnedData {
                match payload {
                    PayloadMode::Full => OwnedData::Bytes(bytes((f as u64 * 7 + g) as u8, 65536)),
                    PayloadMode::Fingerprint => OwnedData::Fingerprints(
                        (0..16).map(|b| (f as u64) << 32 | g << 8 | b).collect(),
                    ),
                }
            };
            let mut gens = vec![0u64; files];
            for f in 0..files {
                let a = fs
                    .create(ROOT_INO, &format!("f{f}"), 0o644, 0, 0)
                    .await
                    .unwrap();
                fs.write(a.ino, 0, content(f, 0)).await.unwrap();
                inos.push(a.ino);
            }
            let mut x = 12345u64;
            for _ in 0..files * 6 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let f = (x >> 33) as usize % files;
                gens[f] += 1;
                fs.write(inos[f], 0, content(f, gens[f])).await.unwrap();
            }
            fs.sync().await.unwrap();
            let st = fs.stats();
            assert!(st.zones_cleaned > 0 && st.zone_resets > 0, "{st:?}");
            assert!(st.traffic.gc_host_write > 0, "{st:?}");
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
        });
    }
}
