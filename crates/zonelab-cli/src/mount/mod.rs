//! `zonelab mount`, `zonelab umount` and `zonelab stats`: the file system of a device image
//! (`zonelab mkfs`) mounted through FUSE, so ordinary programs run on the simulated device.
//!
//! One process serves a mount. Its main thread owns the simulation — device, host stack and
//! file system on one [`zonelab_sim::Sim`] — and runs every FUSE request as a task in virtual
//! time ([`serve`]); the FUSE session thread only forwards requests ([`kernel`]); a third
//! thread waits for SIGINT, SIGTERM and SIGHUP. The mount ends when the file system is unmounted
//! (`zonelab umount`, umount(8)) or on one of those signals: requests in flight finish, the
//! file system is unmounted with a checkpoint, and the device state, with its virtual clock,
//! is written back into the image file atomically (a temporary file renamed over it), as
//! `zonelab mkfs` does. The image is locked (flock) while mounted.
//!
//! Time stamps: inode times are the virtual clock plus an offset fixed at each mount so that
//! the mount's start is the wall-clock time ([`zonelab_lfs::fs::FsOptions::timestamp_offset`]):
//! with `--pace realtime` they follow the wall clock; times set with utimes are stored as
//! given and stay across mounts.
//!
//! Counters: the hidden read-only file `MOUNTPOINT/.zonelab-stats` ([`serve::STATS_NAME`]) is
//! a JSON snapshot taken when it is opened, with the counter names of `zonelab run`'s result
//! (`traffic_bytes`, `gc`, `device`, `fs`), the virtual clock (`sim`), and per request type
//! the count and virtual time served (`requests`). `zonelab stats MOUNTPOINT` prints it.

mod kernel;
mod serve;

use crate::fs_cmd;
use crate::image;
use crate::run_cmd::{counter_sections, counters};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use serde_json::json;
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use zonelab_device::PayloadMode;
use zonelab_lfs::fs::{Fs, FsOptions};
use zonelab_lfs::policy;

pub use serve::Pace;

#[derive(Args, Debug)]
pub struct MountArgs {
    /// Device image holding a file system (`zonelab mkfs IMAGE`).
    image: PathBuf,
    /// An existing empty directory to mount it on.
    mountpoint: PathBuf,
    /// File-system policy, as `fs.policy` of `zonelab run`: f2fs, izc or znsplus (default
    /// options).
    #[arg(long, default_value = "f2fs")]
    policy: String,
    /// realtime: every request completes no earlier on the wall clock than the model says
    /// (virtual time follows the wall clock); none: as fast as the host allows.
    #[arg(long, value_enum, default_value = "realtime")]
    pace: Pace,
    /// The companion conventional device image the file system was formatted with.
    #[arg(long, value_name = "IMAGE")]
    companion: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct UmountArgs {
    /// Where a `zonelab mount` is mounted.
    mountpoint: PathBuf,
    /// Seconds to wait for the mount's process to write the image back.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Where a `zonelab mount` is mounted.
    mountpoint: PathBuf,
}

/// A message on stderr, also when nobody reads it any more: a mount outlives the terminal or
/// pipe it was started from, and must still save its image.
pub(crate) fn note(msg: std::fmt::Arguments) {
    let _ = writeln!(std::io::stderr(), "{msg}");
}

/// A line on stdout that may find no reader (as [`note`]).
fn say(msg: std::fmt::Arguments) {
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{msg}");
    let _ = out.flush();
}

/// FUSE mounts without fusermount need root (CAP_SYS_ADMIN) and the FUSE device.
fn check_fuse_available() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "zonelab mount needs root: it mounts through FUSE with mount(2) directly (no \
             fusermount); run it as root, e.g. with sudo"
        );
    }
    if !Path::new("/dev/fuse").exists() {
        bail!(
            "/dev/fuse is missing: load the FUSE module (`modprobe fuse`) or, in a container, \
             pass the device in (--device /dev/fuse --cap-add SYS_ADMIN)"
        );
    }
    Ok(())
}

/// `(fstype, source)` of the mount at `mp` (a canonical path), from /proc/self/mountinfo.
fn mount_at(mp: &Path) -> Option<(String, String)> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let want = mp.as_os_str().as_bytes();
    // Mount points escape space, tab, newline and backslash as octal.
    let unescape = |s: &str| -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'\\'
                && i + 3 < b.len()
                && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        out
    };
    info.lines().rev().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let point = left.split(' ').nth(4)?;
        if unescape(point) != want {
            return None;
        }
        let mut r = right.split(' ');
        Some((r.next()?.to_string(), r.next()?.to_string()))
    })
}

/// The canonical mount point: an existing, empty directory that nothing is mounted on.
fn check_mountpoint(mp: &Path) -> Result<PathBuf> {
    let canon = mp.canonicalize().with_context(|| {
        format!(
            "mount point {}: no such directory; create it first (mkdir -p {})",
            mp.display(),
            mp.display()
        )
    })?;
    if let Some((fstype, _)) = mount_at(&canon) {
        bail!(
            "{} is already a mount point ({fstype}); unmount it first (`umount -l {}` if its \
             process is gone) or pick another directory",
            mp.display(),
            mp.display()
        );
    }
    if !canon.is_dir() {
        bail!("mount point {} is not a directory", mp.display());
    }
    let mut entries = std::fs::read_dir(&canon)
        .with_context(|| format!("cannot read mount point {}", mp.display()))?;
    if entries.next().is_some() {
        bail!(
            "mount point {} is not empty; mount on an empty directory (its files would be \
             hidden while mounted)",
            mp.display()
        );
    }
    Ok(canon)
}

/// Locks `path` for this process's lifetime, so that two mounts never serve one image.
fn lock_image(path: &Path) -> Result<File> {
    let f =
        File::open(path).with_context(|| format!("cannot read device image {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        bail!(
            "{} is in use by another zonelab mount; unmount that one first (`zonelab umount \
             MOUNTPOINT`)",
            path.display()
        );
    }
    Ok(f)
}

/// SIGINT, SIGTERM and SIGHUP (the terminal of a background mount closing), blocked in every
/// thread of the mount (threads inherit the mask) and
/// taken by [`watch_signals`] alone.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialize the set they are given.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

fn block_stop_signals() {
    let set = stop_signals();
    // SAFETY: a valid, initialized signal set; the old mask is not wanted.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn umount2(mp: &Path, flags: i32) -> std::io::Result<()> {
    let c = CString::new(mp.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: a NUL-terminated path.
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Waits for a stop signal ([`stop_signals`]); then unmounts `mp` (detaching it lazily if files are open
/// on it) and tells the simulation thread to finish.
fn watch_signals(mp: PathBuf, tx: mpsc::Sender<kernel::Msg>) {
    std::thread::spawn(move || {
        let set = stop_signals();
        let mut sig = 0;
        // SAFETY: a valid signal set, blocked in this thread; `sig` is written by the call.
        while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
        let name = match sig {
            libc::SIGINT => "SIGINT",
            libc::SIGHUP => "SIGHUP",
            _ => "SIGTERM",
        };
        note(format_args!(
            "zonelab: {name}: unmounting {} and saving the image",
            mp.display()
        ));
        if let Err(e) = umount2(&mp, 0) {
            note(format_args!(
                "zonelab: {} is busy ({e}); detaching it: programs with files open on it get \
                 errors from now on",
                mp.display()
            ));
            let _ = umount2(&mp, libc::MNT_DETACH);
        }
        let _ = tx.send(kernel::Msg::Stop);
    });
}

pub fn mount(a: MountArgs) -> Result<ExitCode> {
    check_fuse_available()?;
    // Output to a reader that went away must not end the mount before it saves the image
    // (`main` restores SIGPIPE's default for the short commands).
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no other thread exists yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let mp = check_mountpoint(&a.mountpoint)?;
    let policy = policy::by_name(&a.policy).map_err(|e| anyhow!("--policy {}: {e}", a.policy))?;
    let _lock = lock_image(&a.image)?;
    let img = image::load(&a.image)?;
    let image_path = a.image.canonicalize().unwrap_or(a.image.clone());
    if img.device.payload_mode() != PayloadMode::Full {
        bail!(
            "{}: the device stores fingerprints, not bytes; a mount needs an image made with \
             payload full (`zonelab zns create`)",
            a.image.display()
        );
    }
    let companion = a
        .companion
        .as_deref()
        .map(fs_cmd::load_companion)
        .transpose()?;
    let stacks = fs_cmd::stacks_for(img, companion)?;
    let sim = stacks.sim.clone();
    // Inode times: the mount's start is now on the wall clock.
    let offset = serve::from_system(SystemTime::now())
        .0
        .wrapping_sub(sim.now().0);
    let opts = FsOptions {
        timestamp_offset: offset,
        ..Default::default()
    };
    let fs = serve::drive(&sim, Fs::mount(sim.clone(), stacks.devices(), opts, policy))?
        .map_err(|e| anyhow!("cannot mount {}: {e}", a.image.display()))?;
    // Data the device no longer holds reads as zeros, silently: say so before serving.
    for p in zonelab_lfs::fsck::check_zones_hold_valid_blocks(&fs) {
        eprintln!(
            "zonelab: warning: {}: {p}; check it with `zonelab fsck {}` after unmounting",
            a.image.display(),
            a.image.display()
        );
    }

    let mounted_at = sim.now();
    let report = {
        let (fs, sim, zoned, companion) = (
            fs.clone(),
            sim.clone(),
            stacks.zoned.clone(),
            stacks.companion.clone(),
        );
        let head = json!({
            "image": image_path, "mountpoint": mp, "pid": std::process::id(),
            "policy": a.policy, "pace": a.pace, "companion": a.companion,
        });
        Box::new(move || {
            let ns = zoned.device().borrow();
            let c = companion.as_ref().map(|c| c.device().borrow());
            let w = counters(&fs.stats(), &ns, c.as_deref());
            let mut v = counter_sections(&w, fs.segs_per_zone() as u64);
            v["mount"] = head.clone();
            v["sim"] = json!({
                "simulated_ns": sim.now().0,
                "mounted_at_ns": mounted_at.0,
                "events": sim.stats().polls,
            });
            v["fs"]["statfs"] = json!(zonelab_lfs::FileSystem::statfs(&fs));
            v["fs"]["free_zones"] = json!(fs.free_zones());
            if c.is_some() {
                v["device"]["companion"] = json!({
                    "device": w["companion"]["device"],
                    "flash": w["companion"]["flash"],
                    "ftl": w["companion"]["ftl"],
                });
            }
            v
        })
    };
    let server = Rc::new(serve::Server::new(sim.clone(), fs.clone(), offset, report));
    let s = server.clone();
    let orphans = serve::drive(&sim, async move { s.clean_orphans().await })?
        .map_err(|e| anyhow!("cannot clean up {}: {e}", serve::ORPHANS_NAME))?;
    if orphans > 0 {
        note(format_args!(
            "zonelab: removed {orphans} file(s) that were unlinked while open when the file \
             system was last stopped"
        ));
    }

    block_stop_signals();
    let (tx, rx) = mpsc::channel();
    let mut config = fuser::Config::default();
    config.mount_options = vec![
        fuser::MountOption::FSName(format!("{SOURCE_PREFIX}{}", image_path.display())),
        // The kernel checks permissions against mode, owner and group (as for a local file
        // system); every user may use the mount.
        fuser::MountOption::DefaultPermissions,
    ];
    config.acl = fuser::SessionACL::All;
    let session = fuser::Session::new(kernel::Kernel { tx: tx.clone() }, &mp, &config)
        .with_context(|| format!("cannot mount on {}", mp.display()))?;
    {
        let tx = tx.clone();
        std::thread::Builder::new()
            .name("fuse-session".into())
            .spawn(move || {
                let r = session.run();
                let _ = tx.send(kernel::Msg::SessionEnded(r));
            })
            .context("cannot start the FUSE session thread")?;
    }
    watch_signals(mp.clone(), tx);
    say(format_args!(
        "zonelab: {} mounted on {} (policy {}, pace {}); stop with `zonelab umount {}`",
        a.image.display(),
        mp.display(),
        a.policy,
        match a.pace {
            Pace::Realtime => "realtime",
            Pace::None => "none",
        },
        mp.display()
    ));
    let _ = std::io::stdout().flush();

    server.serve(&rx, a.pace);

    let f = fs.clone();
    let unmounted = serve::drive(&sim, async move { f.unmount().await })?;
    // Saved even when the final checkpoint failed: the next mount rolls back to the last
    // good one.
    if let (Some(path), Some(c)) = (&a.companion, &stacks.companion) {
        image::save_conventional(path, &fs_cmd::back_to_companion(&sim, c), true)?;
    }
    image::save(&a.image, &fs_cmd::back_to_image(&sim, &stacks.zoned), true)?;
    if mount_at(&mp).is_some_and(|(_, source)| is_ours(&source)) {
        let _ = umount2(&mp, libc::MNT_DETACH);
    }
    unmounted.map_err(|e| {
        anyhow!(
            "{}: the final checkpoint failed ({e}); the image was saved and the next mount \
             rolls back to the last checkpoint",
            a.image.display()
        )
    })?;
    say(format_args!(
        "zonelab: {} unmounted; {} saved (virtual clock {:.3} s)",
        mp.display(),
        a.image.display(),
        sim.now().as_secs_f64()
    ));
    Ok(ExitCode::SUCCESS)
}

/// The source name of a zonelab mount in /proc/self/mountinfo (its type is "fuse").
const SOURCE_PREFIX: &str = "zonelab:";

fn is_ours(source: &str) -> bool {
    source.starts_with(SOURCE_PREFIX)
}

/// The canonical path of a zonelab mount, or an error saying what `mp` is instead.
fn zonelab_mount(mp: &Path) -> Result<PathBuf> {
    let canon = mp
        .canonicalize()
        .with_context(|| format!("{}: no such directory", mp.display()))?;
    match mount_at(&canon) {
        Some((_, source)) if is_ours(&source) => Ok(canon),
        Some((t, _)) => bail!("{} is a {t} mount, not a zonelab mount", mp.display()),
        None => bail!(
            "nothing is mounted on {} (mount an image with `zonelab mount IMAGE {}`)",
            mp.display(),
            mp.display()
        ),
    }
}

fn read_stats(mp: &Path) -> Result<serde_json::Value> {
    let text = match std::fs::read(mp.join(serve::STATS_NAME)) {
        Ok(t) => t,
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => bail!(
            "the process serving {} is gone (killed or crashed); release the mount point with \
             `umount -l {}`: the image holds the state of its last save",
            mp.display(),
            mp.display()
        ),
        Err(e) => {
            return Err(e).with_context(|| {
                format!("cannot read the counters of the mount on {}", mp.display())
            });
        }
    };
    serde_json::from_slice(&text).context("the mount's counters are not JSON")
}

/// Whether process `pid` is still running (a zombie has finished).
fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses.
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// `zonelab umount MOUNTPOINT`: unmounts, then waits until the mount's process has written
/// the image back and exited.
pub fn umount(a: UmountArgs) -> Result<ExitCode> {
    let mp = zonelab_mount(&a.mountpoint)?;
    let stats = read_stats(&mp)?;
    let pid = stats["mount"]["pid"]
        .as_u64()
        .ok_or_else(|| anyhow!("the mount's counters name no process"))? as u32;
    let image = stats["mount"]["image"]
        .as_str()
        .ok_or_else(|| anyhow!("the mount's counters name no image"))?
        .to_string();
    // Saving renames a new file over the image: its inode changes.
    let inode = |p: &str| {
        std::fs::metadata(p)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .ok()
    };
    let before = inode(&image);
    // The kernel tells a FUSE file system that a file was closed after close() returns, so a
    // file closed just before this call may still count as open: give it a moment.
    let busy_until = Instant::now() + Duration::from_secs(2);
    let mut unmounted = umount2(&mp, 0);
    while matches!(&unmounted, Err(e) if e.raw_os_error() == Some(libc::EBUSY))
        && Instant::now() < busy_until
    {
        std::thread::sleep(Duration::from_millis(50));
        unmounted = umount2(&mp, 0);
    }
    if let Err(e) = unmounted {
        return Err(match e.raw_os_error() {
            Some(libc::EBUSY) => anyhow!(
                "{} is busy: a program has a file open or its working directory on it; close \
                 them (see `fuser -vm {}`) and try again",
                mp.display(),
                mp.display()
            ),
            Some(libc::EPERM) => anyhow!("unmounting {} needs root", mp.display()),
            _ => anyhow!("cannot unmount {}: {e}", mp.display()),
        });
    }
    let start = Instant::now();
    let mut told = false;
    while running(pid) {
        if start.elapsed() > Duration::from_secs(a.timeout) {
            bail!(
                "{} is unmounted, but process {pid} has not finished writing {image} after {} s",
                mp.display(),
                a.timeout
            );
        }
        if !told && start.elapsed() > Duration::from_secs(2) {
            eprintln!("zonelab: waiting for process {pid} to write {image} back");
            told = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if inode(&image) == before {
        bail!(
            "{} is unmounted, but process {pid} ended without saving {image}; its error output \
             says why (the image holds the state of the previous save)",
            mp.display()
        );
    }
    println!("{} unmounted; {image} saved", mp.display());
    Ok(ExitCode::SUCCESS)
}

/// `zonelab stats MOUNTPOINT`: the mount's live counters as JSON.
pub fn stats(a: StatsArgs) -> Result<ExitCode> {
    let mp = zonelab_mount(&a.mountpoint)?;
    let v = read_stats(&mp)?;
    println!("{}", serde_json::to_string_pretty(&v)?);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_finds_the_root_and_not_a_plain_directory() {
        assert!(mount_at(Path::new("/")).is_some());
        let d = std::env::temp_dir().join(format!("zonelab-mountinfo-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(mount_at(&d.canonicalize().unwrap()), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
