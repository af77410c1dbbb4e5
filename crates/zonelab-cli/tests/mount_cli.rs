//! End-to-end tests of `zonelab mount`: real programs (sqlite3, fio, tar, git and plain POSIX
//! calls) on a device image's file system mounted through FUSE; each then unmounts, mounts
//! again and checks once more, and fsck checks the image in between.
//!
//! They need root and /dev/fuse (as CI has); without them each test prints why it is skipped.
//! The programs must be installed (`.ci/run` installs them).

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

const BIN: &str = env!("CARGO_BIN_EXE_zonelab");

/// Why FUSE cannot be used here, if it cannot.
fn fuse_unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root");
    }
    if !Path::new("/dev/fuse").exists() {
        return Some("/dev/fuse is missing");
    }
    None
}

macro_rules! require_fuse {
    ($name:expr) => {
        if let Some(why) = fuse_unavailable() {
            eprintln!(
                "skipping {}: FUSE is unavailable ({why}); run the tests as root with /dev/fuse",
                $name
            );
            return;
        }
    };
}

/// Panics with how to install `program` when it is missing.
fn need(program: &str, package: &str) {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "{program} is not installed; install it (apt-get install -y {package}) or run .ci/run"
    );
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn zonelab(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().expect("run zonelab")
}

/// Runs `script` with sh in `dir`; panics with its output if it fails.
fn sh(dir: &Path, script: &str) -> String {
    let o = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .output()
        .expect("run sh");
    assert!(o.status.success(), "`{script}` failed:\n{}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A unique directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "zonelab-mount-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A formatted image (znsplus-mlc, 32 zones of 32 MiB, 2 conventional) and an empty mount
/// point in a fresh directory.
fn formatted(tag: &str) -> (TempDir, PathBuf, PathBuf) {
    let dir = TempDir::new(tag);
    let img = dir.path("fs.img");
    let mp = dir.path("mnt");
    fs::create_dir(&mp).unwrap();
    let i = img.to_str().unwrap();
    let o = zonelab(&[
        "zns",
        "create",
        i,
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=32",
        "--set",
        "conventional_zones=2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = zonelab(&["mkfs", i]);
    assert!(o.status.success(), "{}", text(&o));
    (dir, img, mp)
}

fn fsck_clean(img: &Path) {
    let o = zonelab(&["fsck", img.to_str().unwrap()]);
    assert!(o.status.success(), "fsck: {}", text(&o));
}

/// A running `zonelab mount`; unmounted (lazily) and killed if dropped while mounted.
struct Mounted {
    child: Option<Child>,
    stdout: BufReader<ChildStdout>,
    mp: PathBuf,
    log: PathBuf,
}

/// Mounts `img` on `mp` in the background and returns once it serves (its "mounted" line).
fn mount(img: &Path, mp: &Path, pace: &str) -> Mounted {
    let log = img.with_extension(format!("mount-{pace}.log"));
    let mut child = Command::new(BIN)
        .args([
            "mount",
            img.to_str().unwrap(),
            mp.to_str().unwrap(),
            "--pace",
            pace,
        ])
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&log).unwrap())
        .spawn()
        .expect("start zonelab mount");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    if !line.contains("mounted on") {
        let status = child.wait().unwrap();
        panic!(
            "zonelab mount did not mount ({status}): {line}{}",
            fs::read_to_string(&log).unwrap_or_default()
        );
    }
    Mounted {
        child: Some(child),
        stdout,
        mp: mp.to_path_buf(),
        log,
    }
}

impl Mounted {
    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Waits for the mount's process to end well, having saved the image.
    fn wait_saved(mut self) {
        let status = self.child.take().unwrap().wait().unwrap();
        let mut rest = String::new();
        self.stdout.read_to_string(&mut rest).unwrap();
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "zonelab mount ended with {status}: {log}");
        assert!(rest.contains("saved"), "{rest}{log}");
        assert!(
            !fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .contains(self.mp.to_str().unwrap()),
            "still mounted"
        );
    }

    /// `zonelab umount`, which returns once the image is saved.
    fn umount(self) {
        let o = zonelab(&["umount", self.mp.to_str().unwrap()]);
        assert!(o.status.success(), "zonelab umount: {}", text(&o));
        self.wait_saved();
    }

    fn stats(&self) -> serde_json::Value {
        let o = zonelab(&["stats", self.mp.to_str().unwrap()]);
        assert!(o.status.success(), "zonelab stats: {}", text(&o));
        serde_json::from_slice(&o.stdout).expect("stats are JSON")
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("umount").arg("-l").arg(&self.mp).status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn sqlite3_transactions_survive_a_remount() {
    require_fuse!("sqlite3_transactions_survive_a_remount");
    need("sqlite3", "sqlite3");
    let (_dir, img, mp) = formatted("sqlite");
    let m = mount(&img, &mp, "none");
    // 3000 inserts in 30 transactions, then updates and deletes in transactions.
    let mut sql = String::from("CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, v TEXT);\n");
    for tx in 0..30 {
        sql += "BEGIN;\n";
        for i in 0..100 {
            let id = tx * 100 + i;
            sql += &format!(
                "INSERT INTO t(k, v) VALUES({}, 'row {id} {}');\n",
                id % 17,
                "x".repeat(id % 50)
            );
        }
        sql += "COMMIT;\n";
    }
    sql +=
        "BEGIN; UPDATE t SET v = v || '+' WHERE k = 3; DELETE FROM t WHERE id % 10 = 0; COMMIT;\n";
    sql += "CREATE INDEX tk ON t(k);\n";
    fs::write(mp.parent().unwrap().join("load.sql"), sql).unwrap();
    sh(&mp, "sqlite3 db.sqlite < ../load.sql");
    let query = "sqlite3 db.sqlite 'PRAGMA integrity_check; SELECT count(*), sum(length(v)), sum(k) FROM t;'";
    let before = sh(&mp, query);
    assert!(before.starts_with("ok\n2700|"), "{before}");
    m.umount();
    fsck_clean(&img);
    let m = mount(&img, &mp, "none");
    assert_eq!(sh(&mp, query), before);
    // More transactions after the remount, and the journal is gone after each.
    sh(
        &mp,
        "sqlite3 db.sqlite 'BEGIN; DELETE FROM t WHERE k = 5; COMMIT; VACUUM;'",
    );
    let after = sh(&mp, query);
    assert!(after.starts_with("ok\n"), "{after}");
    assert!(!mp.join("db.sqlite-journal").exists());
    m.umount();
    let m = mount(&img, &mp, "none");
    assert_eq!(sh(&mp, query), after);
    m.umount();
    fsck_clean(&img);
}

#[test]
fn fio_verifies_crc32c_before_and_after_a_remount() {
    require_fuse!("fio_verifies_crc32c_before_and_after_a_remount");
    need("fio", "fio");
    let (_dir, img, mp) = formatted("fio");
    let m = mount(&img, &mp, "none");
    fs::create_dir(mp.join("fio")).unwrap();
    // One job through the page cache, one with O_DIRECT.
    // (Options before the first --name are global.)
    let job = |mode: &str| {
        format!(
            "fio --output-format=json {mode} --directory=fio --ioengine=psync --rw=randwrite \
             --bs=4k --size=4m --verify=crc32c --fsync=32 --fallocate=none \
             --name=cached --name=direct --direct=1"
        )
    };
    let out = sh(&mp, &job("--do_verify=1"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("fio JSON");
    for j in v["jobs"].as_array().unwrap() {
        assert_eq!(j["error"], 0, "{j}");
        // Every block written was read back and checked.
        assert_eq!(j["write"]["io_bytes"], 4 << 20);
        assert_eq!(j["read"]["io_bytes"], 4 << 20);
    }
    let sums = sh(&mp, "sha256sum fio/*");
    m.umount();
    fsck_clean(&img);
    let m = mount(&img, &mp, "none");
    assert_eq!(sh(&mp, "sha256sum fio/*"), sums);
    // The same job in verify-only mode checks every block's crc32c header again.
    let out = sh(&mp, &job("--verify_only=1"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("fio JSON");
    for j in v["jobs"].as_array().unwrap() {
        assert_eq!(j["error"], 0, "{j}");
        assert_eq!(j["read"]["io_bytes"], 4 << 20, "{j}");
    }
    m.umount();
}

#[test]
fn tar_round_trips_a_source_tree() {
    require_fuse!("tar_round_trips_a_source_tree");
    need("tar", "tar");
    let (dir, img, mp) = formatted("tar");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let src = repo.canonicalize().unwrap();
    let m = mount(&img, &mp, "none");
    sh(
        &mp,
        &format!("tar -C {} -cf - crates | tar -xf -", src.display()),
    );
    // tar keeps mtimes to the second; directory sizes are the file system's own.
    let listing = |root: &Path| {
        sh(
            root,
            "{ find crates -type f -exec stat -c '%n %F %a %s %Y' {} + ; \
               find crates -type d -exec stat -c '%n %F %a %Y' {} + ; } | LC_ALL=C sort",
        )
    };
    let want = listing(&src);
    sh(&mp, &format!("diff -r {}/crates crates", src.display()));
    assert_eq!(listing(&mp), want, "names, types, modes, sizes, mtimes");
    m.umount();
    fsck_clean(&img);
    let m = mount(&img, &mp, "none");
    sh(&mp, &format!("diff -r {}/crates crates", src.display()));
    assert_eq!(listing(&mp), want, "after the remount");
    // And back out of the mount.
    let out = dir.path("out");
    fs::create_dir(&out).unwrap();
    sh(
        &mp,
        &format!("tar -cf - crates | tar -C {} -xf -", out.display()),
    );
    sh(&out, &format!("diff -r {}/crates crates", src.display()));
    m.umount();
    // A copy whose fullest zone (file data) is reset behind the file system: it still mounts
    // and its files still read (as zeros), but fsck reports the data lost.
    let lost = dir.path("lost.img");
    fs::copy(&img, &lost).unwrap();
    let l = lost.to_str().unwrap();
    let o = zonelab(&["zns", "report-zones", l, "-o", "json"]);
    let zones: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let written = |z: &serde_json::Value| z["wp"].as_u64().unwrap() - z["slba"].as_u64().unwrap();
    let fullest = zones["zone_list"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|z| z["type"] == "SEQWRITE_REQ")
        .max_by_key(|z| written(z))
        .map(|z| z["slba"].as_u64().unwrap())
        .unwrap();
    let o = zonelab(&["zns", "reset-zone", l, "-s", &fullest.to_string()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = zonelab(&["fsck", l]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("read back as zeros"), "{}", text(&o));
    // Mounting it works, with a warning before it serves.
    let m = mount(&lost, &mp, "none");
    let log = fs::read_to_string(lost.with_extension("mount-none.log")).unwrap();
    assert!(
        log.contains("warning") && log.contains("read back as zeros"),
        "{log}"
    );
    m.umount();
}

#[test]
fn git_commits_and_fsck_across_a_remount_and_a_sigterm() {
    require_fuse!("git_commits_and_fsck_across_a_remount_and_a_sigterm");
    need("git", "git");
    let (_dir, img, mp) = formatted("git");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zonelab-sim");
    let git =
        "git -c user.name=ZoneLab -c user.email=zonelab@example.com -c init.defaultBranch=main";
    let m = mount(&img, &mp, "none");
    sh(
        &mp,
        &format!(
            "{git} init -q repo && cp -r {}/. repo/ && cd repo && {git} add -A && \
             {git} commit -qm first && echo change >> Cargo.toml && {git} commit -qam second && \
             {git} gc -q && {git} fsck --full --strict",
            src.display()
        ),
    );
    let head = sh(&mp.join("repo"), "git rev-parse HEAD");
    // SIGTERM unmounts and saves like umount.
    let pid = m.pid();
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    m.wait_saved();
    fsck_clean(&img);
    let m = mount(&img, &mp, "none");
    let repo = mp.join("repo");
    sh(&repo, &format!("{git} fsck --full --strict"));
    assert_eq!(sh(&repo, "git rev-parse HEAD"), head);
    assert_eq!(sh(&repo, "git status --porcelain"), "");
    assert_eq!(sh(&repo, "git log --format=%s"), "second\nfirst\n");
    m.umount();
}

/// Metadata of `p` (not following symlinks).
fn meta(p: &Path) -> fs::Metadata {
    fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn posix_semantics_hold_through_the_mount() {
    require_fuse!("posix_semantics_hold_through_the_mount");
    let (_dir, img, mp) = formatted("posix");
    let m = mount(&img, &mp, "none");
    let p = |n: &str| mp.join(n);
    // O_APPEND, truncate and holes.
    fs::write(p("f"), b"hello").unwrap();
    let mut f = fs::OpenOptions::new().append(true).open(p("f")).unwrap();
    f.write_all(b" world").unwrap();
    drop(f);
    assert_eq!(fs::read(p("f")).unwrap(), b"hello world");
    let f = fs::OpenOptions::new().write(true).open(p("f")).unwrap();
    f.set_len(5).unwrap();
    f.set_len(10_000).unwrap();
    drop(f);
    let mut want = b"hello".to_vec();
    want.resize(10_000, 0);
    assert_eq!(fs::read(p("f")).unwrap(), want);
    // O_TRUNC.
    fs::write(p("g"), b"0123456789").unwrap();
    fs::write(p("g"), b"ab").unwrap();
    assert_eq!(fs::read(p("g")).unwrap(), b"ab");
    // Hard links share an inode; symlinks resolve.
    fs::hard_link(p("f"), p("f2")).unwrap();
    assert_eq!(meta(&p("f")).ino(), meta(&p("f2")).ino());
    assert_eq!(meta(&p("f")).nlink(), 2);
    std::os::unix::fs::symlink("f", p("s")).unwrap();
    assert_eq!(fs::read_link(p("s")).unwrap(), Path::new("f"));
    assert_eq!(fs::read(p("s")).unwrap(), want);
    // Rename over an existing file replaces it atomically.
    fs::write(p("new"), b"new contents").unwrap();
    fs::rename(p("new"), p("g")).unwrap();
    assert_eq!(fs::read(p("g")).unwrap(), b"new contents");
    assert!(!p("new").exists());
    // Directories: not empty, rename into itself.
    fs::create_dir_all(p("d/e")).unwrap();
    assert_eq!(
        fs::remove_dir(p("d")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        fs::rename(p("d"), p("d/e/x")).unwrap_err().raw_os_error(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        fs::read(p("nope")).unwrap_err().raw_os_error(),
        Some(libc::ENOENT)
    );
    // Ownership and permissions: a file of uid 1000 mode 0600 in a 0755 directory.
    fs::write(p("d/private"), b"secret").unwrap();
    std::os::unix::fs::chown(p("d/private"), Some(1000), Some(1000)).unwrap();
    fs::set_permissions(p("d/private"), fs::Permissions::from_mode(0o600)).unwrap();
    let md = meta(&p("d/private"));
    assert_eq!(
        (md.uid(), md.gid(), md.mode() & 0o7777),
        (1000, 1000, 0o600)
    );
    let as_user = |uid: u32, script: &str| {
        Command::new("setpriv")
            .args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                "sh",
                "-c",
                script,
            ])
            .current_dir(&mp)
            .output()
            .expect("setpriv")
    };
    assert!(as_user(1000, "cat d/private").status.success());
    let o = as_user(1001, "cat d/private");
    assert!(
        !o.status.success() && text(&o).contains("Permission denied"),
        "{}",
        text(&o)
    );
    let o = as_user(1000, "touch d/mine");
    assert!(
        !o.status.success() && text(&o).contains("Permission denied"),
        "{}",
        text(&o)
    );
    // A file created by a user is theirs.
    fs::create_dir(p("shared")).unwrap();
    fs::set_permissions(p("shared"), fs::Permissions::from_mode(0o777)).unwrap();
    assert!(as_user(1000, "echo x > shared/by-1000").status.success());
    let md = meta(&p("shared/by-1000"));
    assert_eq!((md.uid(), md.gid()), (1000, 1000));
    // Time stamps: fresh ones follow the wall clock; utimes are stored as given, also before 1970.
    let now = SystemTime::now();
    let age = now
        .duration_since(meta(&p("g")).modified().unwrap())
        .unwrap_or_default();
    assert!(age < Duration::from_secs(600), "mtime {age:?} ago");
    let old = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_234_567_890_123_456_789);
    let pre = SystemTime::UNIX_EPOCH - Duration::from_secs(86_400);
    let f = fs::File::options().write(true).open(p("f")).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(old).set_accessed(pre))
        .unwrap();
    drop(f);
    assert_eq!(meta(&p("f")).modified().unwrap(), old);
    assert_eq!(meta(&p("f")).accessed().unwrap(), pre);
    // A file unlinked while open stays readable and writable until closed.
    fs::write(p("tmp"), b"still here").unwrap();
    let mut open = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(p("tmp"))
        .unwrap();
    fs::remove_file(p("tmp")).unwrap();
    assert!(!p("tmp").exists());
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "still here");
    open.write_all(b"!").unwrap();
    assert_eq!(open.metadata().unwrap().nlink(), 0);
    drop(open);
    // So does one replaced by a rename while open.
    fs::write(p("victim"), b"old").unwrap();
    let mut open = fs::File::open(p("victim")).unwrap();
    fs::write(p("replacement"), b"new").unwrap();
    fs::rename(p("replacement"), p("victim")).unwrap();
    let mut s = String::new();
    open.read_to_string(&mut s).unwrap();
    assert_eq!(s, "old");
    drop(open);
    assert_eq!(fs::read(p("victim")).unwrap(), b"new");
    fs::remove_file(p("victim")).unwrap();
    // statfs, O_DIRECT, fsync.
    let df = sh(&mp, "stat -f -c '%S %b %a' .");
    let v: Vec<u64> = df.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert!(v[0] == 4096 && v[1] > 0 && v[2] > 0 && v[2] <= v[1], "{df}");
    let mut d = fs::OpenOptions::new()
        .create(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(p("direct"))
        .unwrap();
    d.write_all(&[7u8; 4096]).unwrap();
    d.sync_all().unwrap();
    drop(d);
    // The counters file is hidden and read-only.
    let names: Vec<String> = fs::read_dir(&mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with(".zonelab")),
        "{names:?}"
    );
    assert!(fs::write(p(".zonelab-stats"), b"x").is_err());
    let stats = m.stats();
    assert!(
        stats["traffic_bytes"]["user_write"].as_u64().unwrap() > 0,
        "{stats}"
    );
    assert!(
        stats["requests"]["by_type"]["write"]["count"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(stats["mount"]["pid"], m.pid());
    m.umount();
    fsck_clean(&img);

    let m = mount(&img, &mp, "none");
    // Times first: reading a file sets its atime.
    assert_eq!(meta(&p("f")).modified().unwrap(), old);
    assert_eq!(meta(&p("f")).accessed().unwrap(), pre);
    assert_eq!(fs::read(p("f2")).unwrap(), want);
    assert_eq!(meta(&p("f")).nlink(), 2);
    assert_eq!(fs::read(p("s")).unwrap(), want);
    assert_eq!(fs::read(p("g")).unwrap(), b"new contents");
    let md = meta(&p("d/private"));
    assert_eq!(
        (md.uid(), md.gid(), md.mode() & 0o7777),
        (1000, 1000, 0o600)
    );
    assert_eq!(fs::read(p("direct")).unwrap(), vec![7u8; 4096]);
    let mut names: Vec<String> = fs::read_dir(&mp)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["d", "direct", "f", "f2", "g", "s", "shared"]);
    m.umount();
}

/// Sum of the virtual time of requests of these types in a stats snapshot.
fn virtual_ns(stats: &serde_json::Value, types: &[&str]) -> u64 {
    types
        .iter()
        .map(|t| {
            stats["requests"]["by_type"][t]["virtual_ns_total"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn realtime_pacing_answers_no_sooner_than_the_model() {
    require_fuse!("realtime_pacing_answers_no_sooner_than_the_model");
    let (_dir, img, mp) = formatted("realtime");
    let started = Instant::now();
    let m = mount(&img, &mp, "realtime");
    let before = m.stats();
    // Sequential synchronous writes: each write and fsync is answered only when the model
    // has completed it, so the wall time of the loop is at least their virtual time.
    let mut f = fs::File::create(mp.join("sync")).unwrap();
    let t = Instant::now();
    for i in 0..20u8 {
        f.write_all(&[i; 4096]).unwrap();
        f.sync_all().unwrap();
    }
    let wall = t.elapsed();
    drop(f);
    let after = m.stats();
    let types = ["write", "fsync"];
    let modelled = virtual_ns(&after, &types) - virtual_ns(&before, &types);
    let fsyncs = after["requests"]["by_type"]["fsync"]["count"]
        .as_u64()
        .unwrap()
        - before["requests"]["by_type"]["fsync"]["count"]
            .as_u64()
            .unwrap_or(0);
    assert_eq!(fsyncs, 20);
    assert!(modelled > 0);
    assert!(
        wall.as_nanos() as u64 >= modelled,
        "the loop took {wall:?} on the wall clock but the model says {modelled} ns"
    );
    // Virtual time follows the wall clock and never runs ahead of it.
    let since_mount = after["sim"]["simulated_ns"].as_u64().unwrap()
        - after["sim"]["mounted_at_ns"].as_u64().unwrap();
    assert!(since_mount <= started.elapsed().as_nanos() as u64);
    m.umount();
    let m = mount(&img, &mp, "none");
    let data = fs::read(mp.join("sync")).unwrap();
    assert_eq!(data.len(), 20 * 4096);
    assert!(
        data.chunks(4096)
            .enumerate()
            .all(|(i, c)| c.iter().all(|&b| b == i as u8))
    );
    m.umount();
}

#[test]
fn mount_refuses_bad_input_with_a_reason() {
    require_fuse!("mount_refuses_bad_input_with_a_reason");
    let (dir, img, mp) = formatted("bad");
    let i = img.to_str().unwrap();
    let m = mp.to_str().unwrap();
    let refused = |args: &[&str], says: &str| {
        let o = zonelab(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    };
    refused(&["mount", "missing.img", m], "missing.img");
    refused(
        &["mount", i, dir.path("nodir").to_str().unwrap()],
        "no such directory",
    );
    refused(&["mount", i, i], "not a directory");
    fs::write(mp.join("x"), b"").unwrap();
    refused(&["mount", i, m], "not empty");
    fs::remove_file(mp.join("x")).unwrap();
    refused(&["mount", i, m, "--policy", "nope"], "unknown policy");
    // An image without a file system.
    let raw = dir.path("raw.img");
    let o = zonelab(&[
        "zns",
        "create",
        raw.to_str().unwrap(),
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=8",
        "--set",
        "conventional_zones=2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    refused(&["mount", raw.to_str().unwrap(), m], "mkfs");
    // Not a mount.
    refused(&["umount", m], "nothing is mounted");
    refused(&["stats", m], "nothing is mounted");
    // A second mount of a mounted image, and a non-root user.
    let mounted = mount(&img, &mp, "none");
    let other = dir.path("other");
    fs::create_dir(&other).unwrap();
    refused(&["mount", i, other.to_str().unwrap()], "in use");
    let o = Command::new("setpriv")
        .args([
            "--reuid=1000",
            "--regid=1000",
            "--clear-groups",
            BIN,
            "mount",
            i,
        ])
        .arg(&other)
        .output()
        .unwrap();
    assert!(
        !o.status.success() && text(&o).contains("root"),
        "{}",
        text(&o)
    );
    mounted.umount();
    fsck_clean(&img);
}
