//! The simulation side of a mount: FUSE requests become tasks on the file system's [`Sim`], and
//! the model's virtual time is paced against the wall clock.
//!
//! Pacing ([`Pace`]), the idea of FEMU and NVMeVirt (an emulated device answers no sooner than
//! its model says), here with the simulator's own model. With `realtime`, virtual time
//! follows the wall clock from the mount on: the model is run only up to
//! `v0 + (now - origin)`, so a request arriving at wall time `w` starts at virtual time
//! `v0 + (w - origin)` (later if the model is behind), and its reply, sent when the model
//! reaches its completion, leaves no earlier on the wall clock than `origin + (done - v0)`:
//! programs see the emulated device's latency. Between requests the model's background work
//! (writeback, checkpoints, cleaning) runs on the same clock. With `none`, virtual time moves
//! only as the model works: requests run as fast as the host allows, and an idle mount's
//! clock stands still. The wall clock is read here, by the client, never inside the model.
//!
//! Requests run concurrently, each as its own task, as the kernel sends them; the file system
//! orders what must be ordered (its simulated locks).

use super::kernel::{AttrChange, Caller, Msg, Op};
use anyhow::{Result, bail};
use fuser::{Errno, FileAttr, FileType, FopenFlags, Generation, INodeNo, TimeOrNow};
use serde_json::{Value, json};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use zonelab_device::OwnedData;
use zonelab_lfs::fs::Fs;
use zonelab_lfs::vfs::NAME_MAX;
use zonelab_lfs::{Attr, DirEntry, FileKind, FileSystem, FsError, IoOptions, ROOT_INO, SetAttr};
use zonelab_sim::{Nanos, Sim};

/// How virtual time relates to the wall clock (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pace {
    /// Virtual time follows the wall clock; replies wait for the model's completion time.
    Realtime,
    /// As fast as the host allows; virtual time advances only by the model's work.
    None,
}

/// The hidden, read-only file at the mount's root that serves the live counters as JSON
/// (`zonelab stats MOUNTPOINT` reads it). Not listed by readdir.
pub const STATS_NAME: &str = ".zonelab-stats";
/// Its inode number, outside the file system's (node ids are 32-bit).
const STATS_INO: u64 = 1 << 62;
/// A hidden directory at the root that holds files unlinked while open, until their last
/// close (as libfuse's `.fuse_hidden` files): the kernel keeps using the inode of an open
/// file after unlink(2), so the file system must keep it. Emptied at every mount.
pub const ORPHANS_NAME: &str = ".zonelab-orphans";

/// How long the kernel may cache attributes and entries: every change goes through this
/// mount, so the kernel's copies stay right; the TTL bounds staleness for nothing else.
const TTL: Duration = Duration::from_secs(1);

/// Per request type: how many were served and the virtual time they took.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct Served {
    count: u64,
    virtual_ns_total: u64,
    virtual_ns_max: u64,
}

/// What an open file handle refers to.
enum Handle {
    File(u64),
    /// A directory listing, taken at the first readdir (offset 0), so that a directory changed
    /// while it is read is listed consistently.
    Dir(Option<Rc<Vec<DirEntry>>>),
    /// A snapshot of the counters, taken at open.
    Stats(Rc<Vec<u8>>),
}

/// The mounted file system and the bookkeeping FUSE needs beside it.
pub struct Server {
    pub sim: Sim,
    pub fs: Fs,
    /// [`zonelab_lfs::fs::FsOptions::timestamp_offset`] of the mount: virtual time plus this
    /// is the time stamped on inodes (ns since the Unix epoch).
    timestamp_offset: u64,
    /// The device and file-system counters, as `zonelab stats` shows them.
    report: Box<dyn Fn() -> Value>,
    /// Open handles per inode.
    open: RefCell<HashMap<u64, u32>>,
    /// Inodes unlinked while open, now in the orphan directory under their number.
    orphaned: RefCell<HashSet<u64>>,
    orphanage: Cell<Option<u64>>,
    handles: RefCell<HashMap<u64, Handle>>,
    next_fh: Cell<u64>,
    in_flight: Cell<usize>,
    served: RefCell<BTreeMap<&'static str, Served>>,
    stopping: Cell<bool>,
}

fn errno(e: FsError) -> Errno {
    Errno::from_i32(e.errno())
}

/// A name from the kernel as the file system takes it (UTF-8).
fn utf8(name: &[u8]) -> Result<&str, Errno> {
    if name.len() > NAME_MAX {
        return Err(Errno::from_i32(libc::ENAMETOOLONG));
    }
    std::str::from_utf8(name).map_err(|_| Errno::from_i32(libc::EINVAL))
}

/// A time stamp of the file system (ns since the Unix epoch, as an i64 two's complement in a
/// u64 so times before 1970 round-trip) as a wall-clock time.
pub fn to_system(t: Nanos) -> SystemTime {
    let ns = t.0 as i64;
    if ns >= 0 {
        UNIX_EPOCH + Duration::from_nanos(ns as u64)
    } else {
        UNIX_EPOCH - Duration::from_nanos(ns.unsigned_abs())
    }
}

/// The inverse of [`to_system`] (saturating beyond ±292 years).
pub fn from_system(t: SystemTime) -> Nanos {
    let ns = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_nanos()).unwrap_or(i64::MAX),
        Err(e) => -i64::try_from(e.duration().as_nanos()).unwrap_or(i64::MAX),
    };
    Nanos(ns as u64)
}

fn file_type(k: FileKind) -> FileType {
    match k {
        FileKind::File => FileType::RegularFile,
        FileKind::Dir => FileType::Directory,
        FileKind::Symlink => FileType::Symlink,
    }
}

/// Runs `fut` on `sim` to its end as fast as the host allows, stepping virtual time from
/// event to event and keeping every other task (where `block_on` would drop them).
pub fn drive<T: 'static>(sim: &Sim, fut: impl Future<Output = T> + 'static) -> Result<T> {
    let out = Rc::new(RefCell::new(None));
    let o = out.clone();
    sim.spawn(async move {
        let v = fut.await;
        *o.borrow_mut() = Some(v);
    });
    loop {
        sim.run_until(sim.now());
        if let Some(v) = out.borrow_mut().take() {
            return Ok(v);
        }
        match sim.next_deadline() {
            Some(d) => sim.run_until(d),
            None => bail!(
                "the simulation stalled at {}: the file system waits for something nothing will deliver",
                sim.now()
            ),
        }
    }
}

impl Server {
    pub fn new(sim: Sim, fs: Fs, timestamp_offset: u64, report: Box<dyn Fn() -> Value>) -> Self {
        Server {
            sim,
            fs,
            timestamp_offset,
            report,
            open: RefCell::default(),
            orphaned: RefCell::default(),
            orphanage: Cell::new(None),
            handles: RefCell::default(),
            next_fh: Cell::new(1),
            in_flight: Cell::new(0),
            served: RefCell::default(),
            stopping: Cell::new(false),
        }
    }

    /// The counters of `zonelab stats`: the mount's report plus the requests served.
    pub fn stats_json(&self) -> Value {
        let mut v = (self.report)();
        v["requests"] = json!({
            "in_flight": self.in_flight.get(),
            "by_type": &*self.served.borrow(),
        });
        v
    }

    /// Serves requests from `rx` until the session ends or a signal stops it, then returns
    /// with no request in flight (the caller unmounts the file system and saves the image).
    pub fn serve(self: &Rc<Self>, rx: &Receiver<Msg>, pace: Pace) {
        let origin = Instant::now();
        let v0 = self.sim.now();
        let model_time = |at: Instant| v0 + Nanos(at.duration_since(origin).as_nanos() as u64);
        // Brings the model up to now: with realtime pacing, before a request enters, so that
        // it starts no earlier in virtual time than it arrived on the wall clock.
        let catch_up = || match pace {
            Pace::Realtime => self.sim.run_until(model_time(Instant::now())),
            Pace::None => self.sim.run_until(self.sim.now()),
        };
        let mut stall_reported = false;
        loop {
            catch_up();
            let mut got = false;
            loop {
                match rx.try_recv() {
                    Ok(m) => {
                        catch_up();
                        self.accept(m);
                        got = true;
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        self.stopping.set(true);
                        break;
                    }
                }
            }
            if self.stopping.get() && self.in_flight.get() == 0 {
                return;
            }
            if got {
                continue;
            }
            let next = self.sim.next_deadline();
            let msg = match (pace, next) {
                (Pace::Realtime, Some(d)) => {
                    let due = origin + Duration::from_nanos(d.saturating_sub(v0).0);
                    let now = Instant::now();
                    if due <= now {
                        continue;
                    }
                    match rx.recv_timeout(due - now) {
                        Ok(m) => Some(m),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => {
                            self.stopping.set(true);
                            None
                        }
                    }
                }
                (Pace::None, Some(d)) if self.in_flight.get() > 0 => {
                    self.sim.run_until(d);
                    None
                }
                _ => {
                    if self.in_flight.get() > 0 && !stall_reported {
                        stall_reported = true;
                        super::note(format_args!(
                            "zonelab: the simulation stalled at {} with {} request(s) in flight; \
                             they will not be answered",
                            self.sim.now(),
                            self.in_flight.get()
                        ));
                    }
                    if self.stopping.get() {
                        return;
                    }
                    rx.recv().ok()
                }
            };
            if let Some(m) = msg {
                catch_up();
                self.accept(m);
            }
        }
    }

    fn accept(self: &Rc<Self>, m: Msg) {
        match m {
            // Once stopping, a request is dropped unanswered, which fuser answers with EIO.
            Msg::Op(..) if self.stopping.get() => {}
            Msg::Op(op, caller) => {
                let me = self.clone();
                let start = self.sim.now();
                let name = op.name();
                self.in_flight.set(self.in_flight.get() + 1);
                self.sim.spawn(async move {
                    me.dispatch(op, caller).await;
                    me.in_flight.set(me.in_flight.get() - 1);
                    let took = (me.sim.now() - start).0;
                    let mut served = me.served.borrow_mut();
                    let s = served.entry(name).or_default();
                    s.count += 1;
                    s.virtual_ns_total += took;
                    s.virtual_ns_max = s.virtual_ns_max.max(took);
                });
            }
            Msg::SessionEnded(r) => {
                if let Err(e) = r {
                    super::note(format_args!(
                        "zonelab: the FUSE session ended with an error: {e}"
                    ));
                }
                self.stopping.set(true);
            }
            Msg::Stop => self.stopping.set(true),
        }
    }

    fn new_fh(&self, h: Handle) -> u64 {
        let fh = self.next_fh.get();
        self.next_fh.set(fh + 1);
        self.handles.borrow_mut().insert(fh, h);
        fh
    }

    fn now_stamp(&self) -> Nanos {
        Nanos(self.sim.now().0.wrapping_add(self.timestamp_offset))
    }

    fn file_attr(&self, a: &Attr) -> FileAttr {
        let nlink = if self.orphaned.borrow().contains(&a.ino) {
            0
        } else {
            a.nlink
        };
        FileAttr {
            ino: INodeNo(a.ino),
            size: a.size,
            // 512-byte units, as st_blocks.
            blocks: a.blocks * 8,
            atime: to_system(a.atime),
            mtime: to_system(a.mtime),
            ctime: to_system(a.ctime),
            crtime: to_system(a.ctime),
            kind: file_type(a.kind),
            perm: a.perm,
            nlink,
            uid: a.uid,
            gid: a.gid,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    fn stats_attr(&self) -> FileAttr {
        let t = to_system(self.now_stamp());
        FileAttr {
            ino: INodeNo(STATS_INO),
            // Read with direct I/O, so the size does not limit reads.
            size: 0,
            blocks: 0,
            atime: t,
            mtime: t,
            ctime: t,
            crtime: t,
            kind: FileType::RegularFile,
            perm: 0o444,
            nlink: 1,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        }
    }

    /// Names at the root that belong to the mount, not to users.
    fn reserved(parent: u64, name: &str) -> bool {
        parent == ROOT_INO && (name == STATS_NAME || name == ORPHANS_NAME)
    }

    /// A name to create, link or rename to: reserved names are refused.
    fn new_name(parent: u64, name: &[u8]) -> Result<&str, Errno> {
        let n = utf8(name)?;
        if Self::reserved(parent, n) {
            return Err(Errno::EPERM);
        }
        Ok(n)
    }

    async fn dispatch(&self, op: Op, c: Caller) {
        let fs = &self.fs;
        match op {
            Op::Lookup {
                parent,
                name,
                reply,
            } => match self.lookup(parent, &name).await {
                Ok(a) => reply.entry(&TTL, &a, Generation(0)),
                Err(e) => reply.error(e),
            },
            Op::Getattr { ino, reply } => {
                if ino == STATS_INO {
                    return reply.attr(&TTL, &self.stats_attr());
                }
                match fs.getattr(ino).await {
                    Ok(a) => reply.attr(&TTL, &self.file_attr(&a)),
                    Err(e) => reply.error(errno(e)),
                }
            }
            Op::Setattr { ino, change, reply } => match self.setattr(ino, change).await {
                Ok(a) => reply.attr(&TTL, &a),
                Err(e) => reply.error(e),
            },
            Op::Readlink { ino, reply } => match fs.readlink(ino).await {
                Ok(t) => reply.data(t.as_bytes()),
                Err(e) => reply.error(errno(e)),
            },
            Op::Mknod {
                parent,
                name,
                mode,
                umask,
                reply,
            } => {
                // Regular files only: the file system has no device files, FIFOs or sockets.
                if mode & libc::S_IFMT != libc::S_IFREG {
                    return reply.error(Errno::EPERM);
                }
                match self
                    .make(parent, &name, FileKind::File, mode & !umask, c, None)
                    .await
                {
                    Ok(a) => reply.entry(&TTL, &a, Generation(0)),
                    Err(e) => reply.error(e),
                }
            }
            Op::Mkdir {
                parent,
                name,
                mode,
                umask,
                reply,
            } => match self
                .make(parent, &name, FileKind::Dir, mode & !umask, c, None)
                .await
            {
                Ok(a) => reply.entry(&TTL, &a, Generation(0)),
                Err(e) => reply.error(e),
            },
            Op::Symlink {
                parent,
                name,
                target,
                reply,
            } => {
                let t = match std::str::from_utf8(&target) {
                    Ok(t) => t.to_string(),
                    Err(_) => return reply.error(Errno::from_i32(libc::EINVAL)),
                };
                match self
                    .make(parent, &name, FileKind::Symlink, 0o777, c, Some(&t))
                    .await
                {
                    Ok(a) => reply.entry(&TTL, &a, Generation(0)),
                    Err(e) => reply.error(e),
                }
            }
            Op::Unlink {
                parent,
                name,
                reply,
            } => match self.unlink(parent, &name).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
            Op::Rmdir {
                parent,
                name,
                reply,
            } => {
                let r = match Self::new_name(parent, &name) {
                    Ok(n) => fs.rmdir(parent, n).await.map_err(errno),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(e),
                }
            }
            Op::Rename {
                parent,
                name,
                newparent,
                newname,
                flags,
                reply,
            } => match self.rename(parent, &name, newparent, &newname, flags).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
            Op::Link {
                ino,
                newparent,
                newname,
                reply,
            } => {
                let r = match Self::new_name(newparent, &newname) {
                    Ok(n) if ino != STATS_INO => fs.link(ino, newparent, n).await.map_err(errno),
                    Ok(_) => Err(Errno::EPERM),
                    Err(e) => Err(e),
                };
                match r {
                    Ok(a) => reply.entry(&TTL, &self.file_attr(&a), Generation(0)),
                    Err(e) => reply.error(e),
                }
            }
            Op::Open { ino, flags, reply } => {
                if ino == STATS_INO {
                    if flags & libc::O_ACCMODE != libc::O_RDONLY {
                        return reply.error(Errno::EACCES);
                    }
                    let mut text =
                        serde_json::to_vec_pretty(&self.stats_json()).expect("counters serialize");
                    text.push(b'\n');
                    let fh = self.new_fh(Handle::Stats(Rc::new(text)));
                    return reply.opened(fuser::FileHandle(fh), FopenFlags::FOPEN_DIRECT_IO);
                }
                let fh = self.opened(ino, flags);
                reply.opened(fuser::FileHandle(fh), FopenFlags::empty());
            }
            Op::Create {
                parent,
                name,
                mode,
                umask,
                flags,
                reply,
            } => match self
                .make(parent, &name, FileKind::File, mode & !umask, c, None)
                .await
            {
                Ok(a) => {
                    let fh = self.opened(a.ino.0, flags);
                    reply.created(
                        &TTL,
                        &a,
                        Generation(0),
                        fuser::FileHandle(fh),
                        FopenFlags::empty(),
                    );
                }
                Err(e) => reply.error(e),
            },
            Op::Read {
                ino,
                fh,
                offset,
                size,
                reply,
            } => {
                if ino == STATS_INO {
                    let text = match self.handles.borrow().get(&fh) {
                        Some(Handle::Stats(t)) => t.clone(),
                        _ => return reply.error(Errno::EBADF),
                    };
                    let from = (offset as usize).min(text.len());
                    let to = (from + size as usize).min(text.len());
                    return reply.data(&text[from..to]);
                }
                match fs.read(ino, offset, size as u64).await {
                    Ok(OwnedData::Bytes(b)) => reply.data(&b),
                    Ok(_) => reply.error(Errno::EIO),
                    Err(e) => reply.error(errno(e)),
                }
            }
            Op::Write {
                ino,
                offset,
                data,
                reply,
            } => {
                if ino == STATS_INO {
                    return reply.error(Errno::EBADF);
                }
                match fs.write(ino, offset, OwnedData::Bytes(data)).await {
                    Ok(n) => reply.written(n as u32),
                    Err(e) => reply.error(errno(e)),
                }
            }
            Op::Release { fh, reply } => match self.release(fh).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
            Op::Fsync {
                ino,
                datasync,
                reply,
            } => {
                if ino == STATS_INO {
                    return reply.ok();
                }
                match fs.fsync(ino, datasync).await {
                    Ok(()) => reply.ok(),
                    Err(e) => reply.error(errno(e)),
                }
            }
            Op::Opendir { reply } => {
                let fh = self.new_fh(Handle::Dir(None));
                reply.opened(fuser::FileHandle(fh), FopenFlags::empty());
            }
            Op::Readdir {
                ino,
                fh,
                offset,
                mut reply,
            } => {
                let listing = match self.listing(ino, fh, offset).await {
                    Ok(l) => l,
                    Err(e) => return reply.error(e),
                };
                for (i, e) in listing.iter().enumerate().skip(offset as usize) {
                    if reply.add(INodeNo(e.ino), i as u64 + 1, file_type(e.kind), &e.name) {
                        break;
                    }
                }
                reply.ok();
            }
            Op::Releasedir { fh, reply } => {
                self.handles.borrow_mut().remove(&fh);
                reply.ok();
            }
            Op::Statfs { reply } => {
                let s = fs.statfs();
                reply.statfs(
                    s.blocks,
                    s.blocks_free,
                    s.blocks_free,
                    s.files,
                    s.files_free,
                    s.block_size as u32,
                    NAME_MAX as u32,
                    s.block_size as u32,
                );
            }
            Op::Fallocate {
                ino,
                offset,
                length,
                mode,
                reply,
            } => match self.fallocate(ino, offset, length, mode).await {
                Ok(()) => reply.ok(),
                Err(e) => reply.error(e),
            },
        }
    }

    async fn lookup(&self, parent: u64, name: &[u8]) -> Result<FileAttr, Errno> {
        let n = utf8(name)?;
        if parent == ROOT_INO && n == STATS_NAME {
            return Ok(self.stats_attr());
        }
        if parent == ROOT_INO && n == ORPHANS_NAME {
            return Err(Errno::ENOENT);
        }
        let a = self.fs.lookup(parent, n).await.map_err(errno)?;
        Ok(self.file_attr(&a))
    }

    async fn setattr(&self, ino: u64, c: AttrChange) -> Result<FileAttr, Errno> {
        if ino == STATS_INO {
            return Err(Errno::EPERM);
        }
        let time = |t: Option<TimeOrNow>| {
            t.map(|t| match t {
                TimeOrNow::Now => self.now_stamp(),
                TimeOrNow::SpecificTime(s) => from_system(s),
            })
        };
        let set = SetAttr {
            perm: c.mode.map(|m| (m & 0o7777) as u16),
            uid: c.uid,
            gid: c.gid,
            size: c.size,
            atime: time(c.atime),
            mtime: time(c.mtime),
        };
        let a = self.fs.setattr(ino, set).await.map_err(errno)?;
        Ok(self.file_attr(&a))
    }

    /// Creates a file, directory or symlink owned by the caller. In a set-group-ID directory
    /// the new inode takes the directory's group, and a new directory the set-group-ID bit
    /// (as ext4 and F2FS do; POSIX leaves the choice to the file system).
    async fn make(
        &self,
        parent: u64,
        name: &[u8],
        kind: FileKind,
        mode: u32,
        c: Caller,
        target: Option<&str>,
    ) -> Result<FileAttr, Errno> {
        let n = Self::new_name(parent, name)?;
        let fs = &self.fs;
        let dir = fs.getattr(parent).await.map_err(errno)?;
        let mut perm = (mode & 0o7777) as u16;
        let mut gid = c.gid;
        if dir.perm & 0o2000 != 0 {
            gid = dir.gid;
            if kind == FileKind::Dir {
                perm |= 0o2000;
            }
        }
        let a = match (kind, target) {
            (FileKind::Symlink, Some(t)) => fs.symlink(parent, n, t, c.uid, gid).await,
            (FileKind::Dir, _) => fs.mkdir(parent, n, perm, c.uid, gid).await,
            _ => fs.create(parent, n, perm, c.uid, gid).await,
        }
        .map_err(errno)?;
        Ok(self.file_attr(&a))
    }

    /// Records an open of `ino` and returns its handle.
    fn opened(&self, ino: u64, flags: i32) -> u64 {
        if flags & libc::O_DIRECT != 0 {
            self.fs.set_io_options(ino, IoOptions { direct: true });
        }
        *self.open.borrow_mut().entry(ino).or_insert(0) += 1;
        self.new_fh(Handle::File(ino))
    }

    async fn release(&self, fh: u64) -> Result<(), Errno> {
        let h = self.handles.borrow_mut().remove(&fh);
        let Some(Handle::File(ino)) = h else {
            return Ok(());
        };
        let last = {
            let mut open = self.open.borrow_mut();
            let n = open.get_mut(&ino).expect("an open file has a count");
            *n -= 1;
            if *n == 0 {
                open.remove(&ino);
                true
            } else {
                false
            }
        };
        if last && self.orphaned.borrow_mut().remove(&ino) {
            let dir = self.orphanage().await?;
            self.fs.unlink(dir, &ino.to_string()).await.map_err(errno)?;
        }
        Ok(())
    }

    fn any_open(&self) -> bool {
        !self.open.borrow().is_empty()
    }

    fn is_open(&self, ino: u64) -> bool {
        self.open.borrow().contains_key(&ino)
    }

    /// The orphan directory's inode, created on first use.
    async fn orphanage(&self) -> Result<u64, Errno> {
        if let Some(d) = self.orphanage.get() {
            return Ok(d);
        }
        let fs = &self.fs;
        let d = match fs.lookup(ROOT_INO, ORPHANS_NAME).await {
            Ok(a) => a.ino,
            Err(FsError::NotFound) => match fs.mkdir(ROOT_INO, ORPHANS_NAME, 0o700, 0, 0).await {
                Ok(a) => a.ino,
                Err(FsError::Exists) => fs.lookup(ROOT_INO, ORPHANS_NAME).await.map_err(errno)?.ino,
                Err(e) => return Err(errno(e)),
            },
            Err(e) => return Err(errno(e)),
        };
        self.orphanage.set(Some(d));
        Ok(d)
    }

    /// If `parent/name` is the last link of a file open somewhere, moves it to the orphan
    /// directory (the caller then removes nothing); true when it did.
    async fn orphan_if_open(&self, parent: u64, name: &str) -> Result<bool, Errno> {
        if !self.any_open() {
            return Ok(false);
        }
        let a = match self.fs.lookup(parent, name).await {
            Ok(a) => a,
            Err(FsError::NotFound) => return Ok(false),
            Err(e) => return Err(errno(e)),
        };
        if a.kind == FileKind::Dir || a.nlink != 1 || !self.is_open(a.ino) {
            return Ok(false);
        }
        let dir = self.orphanage().await?;
        self.fs
            .rename(parent, name, dir, &a.ino.to_string())
            .await
            .map_err(errno)?;
        self.orphaned.borrow_mut().insert(a.ino);
        Ok(true)
    }

    async fn unlink(&self, parent: u64, name: &[u8]) -> Result<(), Errno> {
        let n = Self::new_name(parent, name)?;
        if self.orphan_if_open(parent, n).await? {
            return Ok(());
        }
        self.fs.unlink(parent, n).await.map_err(errno)
    }

    async fn rename(
        &self,
        parent: u64,
        name: &[u8],
        newparent: u64,
        newname: &[u8],
        flags: fuser::RenameFlags,
    ) -> Result<(), Errno> {
        let (n, nn) = (
            Self::new_name(parent, name)?,
            Self::new_name(newparent, newname)?,
        );
        if flags.contains(fuser::RenameFlags::RENAME_EXCHANGE)
            || flags.contains(fuser::RenameFlags::RENAME_WHITEOUT)
        {
            return Err(Errno::from_i32(libc::EINVAL));
        }
        if flags.contains(fuser::RenameFlags::RENAME_NOREPLACE) {
            match self.fs.lookup(newparent, nn).await {
                Ok(_) => return Err(Errno::EEXIST),
                Err(FsError::NotFound) => {}
                Err(e) => return Err(errno(e)),
            }
        }
        // Renaming a file over the last link of an open one: the open one lives on.
        let same_name = parent == newparent && n == nn;
        if self.any_open() && !same_name {
            let src = self.fs.lookup(parent, n).await.map_err(errno)?;
            match self.fs.lookup(newparent, nn).await {
                Ok(dst) if dst.ino != src.ino && src.kind != FileKind::Dir => {
                    self.orphan_if_open(newparent, nn).await?;
                }
                _ => {}
            }
        }
        self.fs
            .rename(parent, n, newparent, nn)
            .await
            .map_err(errno)
    }

    async fn listing(&self, ino: u64, fh: u64, offset: u64) -> Result<Rc<Vec<DirEntry>>, Errno> {
        if offset > 0
            && let Some(Handle::Dir(Some(l))) = self.handles.borrow().get(&fh)
        {
            return Ok(l.clone());
        }
        let mut entries = vec![
            DirEntry {
                name: ".".into(),
                ino,
                kind: FileKind::Dir,
            },
            DirEntry {
                // The kernel does not use the inode number of "..".
                name: "..".into(),
                ino,
                kind: FileKind::Dir,
            },
        ];
        let listed = self.fs.readdir(ino).await.map_err(errno)?;
        entries.extend(
            listed
                .into_iter()
                .filter(|e| !(ino == ROOT_INO && e.name == ORPHANS_NAME)),
        );
        let l = Rc::new(entries);
        if let Some(h) = self.handles.borrow_mut().get_mut(&fh) {
            *h = Handle::Dir(Some(l.clone()));
        }
        Ok(l)
    }

    /// posix_fallocate's mode 0: the file grows to cover the range. Blocks are not reserved
    /// ahead (a log-structured file system allocates at write-back), so a later write can
    /// still find the file system full. Other modes are not supported.
    async fn fallocate(&self, ino: u64, offset: u64, length: u64, mode: i32) -> Result<(), Errno> {
        if mode != 0 || ino == STATS_INO {
            return Err(Errno::from_i32(libc::EOPNOTSUPP));
        }
        let a = self.fs.getattr(ino).await.map_err(errno)?;
        let end = offset
            .checked_add(length)
            .ok_or(Errno::from_i32(libc::EFBIG))?;
        if end > a.size {
            self.fs
                .setattr(
                    ino,
                    SetAttr {
                        size: Some(end),
                        ..Default::default()
                    },
                )
                .await
                .map_err(errno)?;
        }
        Ok(())
    }

    /// Removes what the orphan directory holds: files unlinked while open when the file
    /// system was last unmounted uncleanly (at a clean unmount they are closed and gone).
    pub async fn clean_orphans(&self) -> Result<usize, FsError> {
        let dir = match self.fs.lookup(ROOT_INO, ORPHANS_NAME).await {
            Ok(a) => a.ino,
            Err(FsError::NotFound) => return Ok(0),
            Err(e) => return Err(e),
        };
        let entries = self.fs.readdir(dir).await?;
        for e in &entries {
            self.fs.unlink(dir, &e.name).await?;
        }
        Ok(entries.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stamps_round_trip_before_and_after_the_epoch() {
        for ns in [0i64, 1, -1, 1_700_000_000_123_456_789, -5_000_000_000] {
            let t = Nanos(ns as u64);
            assert_eq!(from_system(to_system(t)), t, "{ns}");
        }
        let now = SystemTime::now();
        assert_eq!(to_system(from_system(now)), now);
    }
}
