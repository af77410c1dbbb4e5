//! `MemFs`: an in-memory reference implementation of [`FileSystem`] with the POSIX semantics
//! the trait documents, used as the model in tests of the real file system and as a
//! zero-cost file system under workload tests.
//!
//! Every call is atomic: it checks all of its preconditions first and then changes the
//! state, so a failed call changes nothing. Calls take no virtual time unless an operation
//! latency is configured ([`MemFsConfig::op_latency`]), in which case each call sleeps that long
//! on the simulation before it acts.
//!
//! Semantics, following Linux where POSIX leaves a choice:
//! - inode numbers are never reused; [`ROOT_INO`] is the root, whose parent is itself;
//! - `nlink` is the number of directory entries naming a file; a directory has 2 plus one per
//!   subdirectory; an inode goes away with its last link (there are no open handles);
//! - names: empty is `NotFound` (as an empty path), longer than [`NAME_MAX`] bytes is
//!   `NameTooLong`, a `/` or NUL byte is `Invalid`; `.` and `..` resolve in `lookup`, are
//!   `Exists` for the creating calls, `IsDir` for `unlink`, `Invalid`/`NotEmpty` for `rmdir`
//!   (as Linux's EINVAL/ENOTEMPTY) and `Invalid` for `rename`;
//! - a hard link to a directory is refused with `IsDir` (Linux says EPERM, which [`FsError`]
//!   does not have);
//! - `rename` over a link to the same inode does nothing; a directory may replace only an
//!   empty directory (`NotDir` for a file target, `NotEmpty` for a non-empty one), a
//!   non-directory only a non-directory (`IsDir`); moving a directory into its own subtree
//!   is `Invalid`;
//! - data: writes allocate 4 KiB blocks, holes read as zeros, truncation frees the blocks
//!   past the new size and zeroes the rest of the last partial block, growing truncation
//!   allocates nothing; `Attr::blocks` counts allocated blocks;
//! - times come from `Sim::now()` when a simulation handle is given, else zero: creation sets
//!   all three; a write of at least one byte and every truncation (a `setattr` with a size,
//!   even the current one, as Linux's truncate(2)) set mtime and ctime; any
//!   `setattr`, any link-count change and a rename (of the moved inode) set ctime; entry
//!   changes set the directory's mtime
//!   and ctime; reads do not touch atime (as with `noatime`);
//! - directories report size 0 and no blocks (their size is not modelled; comparisons with a
//!   real file system should skip it); a symlink's size is its target's length;
//! - space: `statfs` reports a configured capacity in 4 KiB data blocks and a configured
//!   number of inodes; a write that needs more blocks than are free, or a creation when no
//!   inode is free, fails with `NoSpace` and changes nothing.
//!
//! Payload modes (DESIGN.md principle 5): in `full` mode blocks hold bytes; in `fingerprint`
//! mode one 64-bit fingerprint per block, and offsets, lengths and sizes must be multiples of
//! 4 KiB (`Invalid` otherwise); holes then read as the fingerprint of a zero block. Data of
//! the other kind is converted on write (bytes are fingerprinted with
//! [`zonelab_device::payload::fingerprint`]; fingerprints become the bytes
//! [`zonelab_device::payload::block_from_fingerprint`] defines, as the device does).

use crate::vfs::{
    Attr, DirEntry, FileKind, FileSystem, FsError, FsResult, Ino, LINK_MAX, NAME_MAX, ROOT_INO,
    SetAttr, StatFs,
};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use zonelab_device::payload::{block_from_fingerprint, fingerprint};
use zonelab_device::{OwnedData, PayloadMode, WriteData};
use zonelab_sim::{Nanos, Sim};

/// Bytes per data block.
pub const BLOCK_SIZE: u64 = 4096;

/// Longest symlink target, in bytes (PATH_MAX - 1).
pub const SYMLINK_MAX: usize = 4095;

/// Size and behaviour of a [`MemFs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemFsConfig {
    pub payload: PayloadMode,
    /// Data capacity in bytes (rounded down to whole blocks).
    pub capacity_bytes: u64,
    /// Most inodes, the root included.
    pub max_inodes: u64,
    /// Largest file size; a write or truncation past it is `TooLarge`.
    pub max_file_size: u64,
    /// Virtual time each call takes (needs a simulation handle; zero by default).
    pub op_latency: Nanos,
}

impl MemFsConfig {
    /// A file system of `capacity_bytes` with one inode per 4 KiB of capacity (at least 64).
    pub fn new(payload: PayloadMode, capacity_bytes: u64) -> MemFsConfig {
        MemFsConfig {
            payload,
            capacity_bytes,
            max_inodes: (capacity_bytes / BLOCK_SIZE).max(64),
            max_file_size: 1 << 44,
            op_latency: Nanos::ZERO,
        }
    }
}

/// The in-memory reference file system. See the module documentation for its semantics.
pub struct MemFs {
    cfg: MemFsConfig,
    sim: Option<Sim>,
    zero_fp: u64,
    state: RefCell<State>,
}

struct State {
    inodes: BTreeMap<Ino, Inode>,
    next_ino: Ino,
    used_blocks: u64,
}

struct Inode {
    perm: u16,
    uid: u32,
    gid: u32,
    nlink: u32,
    atime: Nanos,
    mtime: Nanos,
    ctime: Nanos,
    body: Body,
}

enum Body {
    File(FileData),
    Dir(Dir),
    Symlink(String),
}

struct Dir {
    parent: Ino,
    entries: BTreeMap<String, Ino>,
}

struct FileData {
    size: u64,
    blocks: Blocks,
}

/// Allocated blocks by index in the file.
enum Blocks {
    Full(BTreeMap<u64, Box<[u8]>>),
    Fingerprint(BTreeMap<u64, u64>),
}

impl Blocks {
    fn len(&self) -> u64 {
        match self {
            Blocks::Full(m) => m.len() as u64,
            Blocks::Fingerprint(m) => m.len() as u64,
        }
    }
    fn present_in(&self, first: u64, last: u64) -> u64 {
        match self {
            Blocks::Full(m) => m.range(first..=last).count() as u64,
            Blocks::Fingerprint(m) => m.range(first..=last).count() as u64,
        }
    }
    /// Drops blocks from index `from` on; returns how many.
    fn drop_from(&mut self, from: u64) -> u64 {
        match self {
            Blocks::Full(m) => m.split_off(&from).len() as u64,
            Blocks::Fingerprint(m) => m.split_off(&from).len() as u64,
        }
    }
}

impl Inode {
    fn kind(&self) -> FileKind {
        match self.body {
            Body::File(_) => FileKind::File,
            Body::Dir(_) => FileKind::Dir,
            Body::Symlink(_) => FileKind::Symlink,
        }
    }
    fn attr(&self, ino: Ino) -> Attr {
        let (size, blocks) = match &self.body {
            Body::File(f) => (f.size, f.blocks.len()),
            Body::Dir(_) => (0, 0),
            Body::Symlink(t) => (t.len() as u64, 0),
        };
        Attr {
            ino,
            kind: self.kind(),
            perm: self.perm,
            nlink: self.nlink,
            uid: self.uid,
            gid: self.gid,
            size,
            blocks,
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
        }
    }
    fn dir(&self) -> Option<&Dir> {
        match &self.body {
            Body::Dir(d) => Some(d),
            _ => None,
        }
    }
    fn dir_mut(&mut self) -> Option<&mut Dir> {
        match &mut self.body {
            Body::Dir(d) => Some(d),
            _ => None,
        }
    }
    fn touch_dir(&mut self, now: Nanos) {
        self.mtime = now;
        self.ctime = now;
    }
}

/// Checks a directory entry name for a call that names one.
fn check_name(name: &str) -> FsResult<()> {
    if name.is_empty() {
        return Err(FsError::NotFound);
    }
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.bytes().any(|b| b == b'/' || b == 0) {
        return Err(FsError::Invalid(format!(
            "name {name:?} contains '/' or NUL"
        )));
    }
    Ok(())
}

fn is_dot(name: &str) -> bool {
    name == "." || name == ".."
}

impl State {
    fn get(&self, ino: Ino) -> FsResult<&Inode> {
        self.inodes.get(&ino).ok_or(FsError::NotFound)
    }
    fn get_mut(&mut self, ino: Ino) -> FsResult<&mut Inode> {
        self.inodes.get_mut(&ino).ok_or(FsError::NotFound)
    }
    fn dir(&self, ino: Ino) -> FsResult<&Dir> {
        self.get(ino)?.dir().ok_or(FsError::NotDir)
    }
    fn entry(&self, parent: Ino, name: &str) -> FsResult<Option<Ino>> {
        Ok(self.dir(parent)?.entries.get(name).copied())
    }
    /// Whether `anc` is `ino` or one of its ancestors (`ino` a directory).
    fn is_ancestor_or_self(&self, anc: Ino, mut ino: Ino) -> bool {
        loop {
            if ino == anc {
                return true;
            }
            match self.inodes.get(&ino).and_then(Inode::dir) {
                Some(d) if d.parent != ino => ino = d.parent,
                _ => return false,
            }
        }
    }
    /// Drops one link of `ino`; removes the inode (and frees its blocks) at zero links.
    fn drop_link(&mut self, ino: Ino, now: Nanos) {
        let node = self.inodes.get_mut(&ino).expect("linked inode exists");
        assert!(node.nlink > 0, "inode {ino} with a link has nlink 0");
        node.nlink -= 1;
        node.ctime = now;
        if node.nlink == 0 {
            let node = self.inodes.remove(&ino).expect("present");
            if let Body::File(f) = node.body {
                self.used_blocks -= f.blocks.len();
            }
        }
    }
}

impl MemFs {
    /// An empty file system: just the root directory (mode 0755, owned by root).
    pub fn new(cfg: MemFsConfig) -> MemFs {
        let mut inodes = BTreeMap::new();
        inodes.insert(
            ROOT_INO,
            Inode {
                perm: 0o755,
                uid: 0,
                gid: 0,
                nlink: 2,
                atime: Nanos::ZERO,
                mtime: Nanos::ZERO,
                ctime: Nanos::ZERO,
                body: Body::Dir(Dir {
                    parent: ROOT_INO,
                    entries: BTreeMap::new(),
                }),
            },
        );
        MemFs {
            cfg,
            sim: None,
            zero_fp: fingerprint(&[0u8; BLOCK_SIZE as usize]),
            state: RefCell::new(State {
                inodes,
                next_ino: ROOT_INO + 1,
                used_blocks: 0,
            }),
        }
    }

    /// A file system whose times (and configured latency) come from `sim`.
    pub fn with_sim(cfg: MemFsConfig, sim: Sim) -> MemFs {
        let mut fs = MemFs::new(cfg);
        fs.sim = Some(sim);
        fs
    }

    pub fn config(&self) -> &MemFsConfig {
        &self.cfg
    }

    fn capacity_blocks(&self) -> u64 {
        self.cfg.capacity_bytes / BLOCK_SIZE
    }

    fn now(&self) -> Nanos {
        self.sim.as_ref().map_or(Nanos::ZERO, Sim::now)
    }

    /// Waits the configured operation latency; returns the time the call acts at.
    async fn enter(&self) -> Nanos {
        if let Some(sim) = &self.sim
            && self.cfg.op_latency > Nanos::ZERO
        {
            sim.sleep(self.cfg.op_latency).await;
        }
        self.now()
    }

    fn fingerprint_mode(&self) -> bool {
        self.cfg.payload == PayloadMode::Fingerprint
    }

    fn check_aligned(&self, what: &str, v: u64) -> FsResult<()> {
        if self.fingerprint_mode() && !v.is_multiple_of(BLOCK_SIZE) {
            return Err(FsError::Invalid(format!(
                "{what} {v} is not a multiple of {BLOCK_SIZE} in fingerprint payload mode"
            )));
        }
        Ok(())
    }

    fn new_blocks(&self) -> Blocks {
        match self.cfg.payload {
            PayloadMode::Full => Blocks::Full(BTreeMap::new()),
            PayloadMode::Fingerprint => Blocks::Fingerprint(BTreeMap::new()),
        }
    }

    /// Adds a new inode named `name` in `parent` after the common checks of the creating
    /// calls.
    fn add_entry(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
        body: Body,
    ) -> FsResult<Attr> {
        let now = self.now();
        let mut st = self.state.borrow_mut();
        st.dir(parent)?;
        if is_dot(name) {
            return Err(FsError::Exists);
        }
        check_name(name)?;
        if st.entry(parent, name)?.is_some() {
            return Err(FsError::Exists);
        }
        let is_dir = matches!(body, Body::Dir(_));
        if is_dir && st.get(parent)?.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        if st.inodes.len() as u64 >= self.cfg.max_inodes {
            return Err(FsError::NoSpace);
        }
        let ino = st.next_ino;
        st.next_ino += 1;
        let node = Inode {
            perm: perm & 0o7777,
            uid,
            gid,
            nlink: if is_dir { 2 } else { 1 },
            atime: now,
            mtime: now,
            ctime: now,
            body,
        };
        let attr = node.attr(ino);
        st.inodes.insert(ino, node);
        let p = st.get_mut(parent)?;
        if is_dir {
            p.nlink += 1;
        }
        p.touch_dir(now);
        p.dir_mut()
            .expect("checked directory")
            .entries
            .insert(name.to_string(), ino);
        Ok(attr)
    }

    /// Checks the state's invariants: every inode reachable from the root and linked as often
    /// as `nlink` says, directory trees without cycles or hard links, block counts and space
    /// accounting consistent, no data past the end of a file. Returns the first problem.
    pub fn check(&self) -> Result<(), String> {
        let st = self.state.borrow();
        let root = st.inodes.get(&ROOT_INO).ok_or("no root inode")?;
        match root.dir() {
            Some(d) if d.parent == ROOT_INO => {}
            _ => return Err("root is not a directory whose parent is itself".into()),
        }
        let mut refs: BTreeMap<Ino, u32> = BTreeMap::new();
        for (&ino, node) in &st.inodes {
            let Some(d) = node.dir() else { continue };
            let mut subdirs = 0u32;
            for (name, &child) in &d.entries {
                if check_name(name).is_err() || is_dot(name) {
                    return Err(format!("directory {ino} has an invalid name {name:?}"));
                }
                let c = st.inodes.get(&child).ok_or(format!(
                    "entry {name:?} of {ino} names missing inode {child}"
                ))?;
                *refs.entry(child).or_default() += 1;
                if let Some(cd) = c.dir() {
                    subdirs += 1;
                    if cd.parent != ino {
                        return Err(format!(
                            "directory {child} is in {ino} but its parent is {}",
                            cd.parent
                        ));
                    }
                }
            }
            if node.nlink != 2 + subdirs {
                return Err(format!(
                    "directory {ino} has nlink {} but {subdirs} subdirectories",
                    node.nlink
                ));
            }
        }
        let mut used = 0u64;
        for (&ino, node) in &st.inodes {
            let r = refs.get(&ino).copied().unwrap_or(0);
            match &node.body {
                Body::Dir(_) => {
                    if ino != ROOT_INO && r != 1 {
                        return Err(format!("directory {ino} is linked {r} times"));
                    }
                    if ino == ROOT_INO && r != 0 {
                        return Err("the root is linked from a directory".into());
                    }
                }
                Body::File(_) | Body::Symlink(_) => {
                    if node.nlink != r || r == 0 {
                        return Err(format!(
                            "inode {ino} has nlink {} but {r} links",
                            node.nlink
                        ));
                    }
                }
            }
            if let Body::File(f) = &node.body {
                used += f.blocks.len();
                let end = f.size.div_ceil(BLOCK_SIZE);
                if f.blocks.present_in(end, u64::MAX) != 0 {
                    return Err(format!("file {ino} has blocks past its size {}", f.size));
                }
                match &f.blocks {
                    Blocks::Fingerprint(_) => {
                        if !f.size.is_multiple_of(BLOCK_SIZE) {
                            return Err(format!("file {ino} has unaligned size {}", f.size));
                        }
                    }
                    Blocks::Full(m) => {
                        if let Some(b) = m.get(&(f.size / BLOCK_SIZE)) {
                            let tail = (f.size % BLOCK_SIZE) as usize;
                            if b[tail..].iter().any(|&x| x != 0) {
                                return Err(format!("file {ino} has data past its size"));
                            }
                        }
                        if m.values().any(|b| b.len() != BLOCK_SIZE as usize) {
                            return Err(format!("file {ino} has a short block"));
                        }
                    }
                }
            }
        }
        if used != st.used_blocks {
            return Err(format!(
                "{} blocks counted as used, {used} allocated",
                st.used_blocks
            ));
        }
        if used > self.capacity_blocks() {
            return Err(format!("{used} blocks used of {}", self.capacity_blocks()));
        }
        if st.inodes.len() as u64 > self.cfg.max_inodes {
            return Err(format!(
                "{} inodes of {}",
                st.inodes.len(),
                self.cfg.max_inodes
            ));
        }
        // Reachability: every inode from the root (no detached directory cycles).
        let mut seen = BTreeSet::from([ROOT_INO]);
        let mut todo = vec![ROOT_INO];
        while let Some(d) = todo.pop() {
            if let Some(dir) = st.inodes[&d].dir() {
                for &c in dir.entries.values() {
                    if seen.insert(c) {
                        todo.push(c);
                    }
                }
            }
        }
        if seen.len() != st.inodes.len() {
            return Err(format!(
                "{} of {} inodes reachable from the root",
                seen.len(),
                st.inodes.len()
            ));
        }
        Ok(())
    }

    /// Number of inodes, the root included.
    pub fn inode_count(&self) -> u64 {
        self.state.borrow().inodes.len() as u64
    }

    fn read_locked(&self, f: &FileData, off: u64, len: u64) -> OwnedData {
        let n = if off >= f.size {
            0
        } else {
            len.min(f.size - off)
        };
        match &f.blocks {
            Blocks::Fingerprint(m) => {
                let first = off / BLOCK_SIZE;
                let fps = (first..first + n / BLOCK_SIZE)
                    .map(|b| m.get(&b).copied().unwrap_or(self.zero_fp))
                    .collect();
                OwnedData::Fingerprints(fps)
            }
            Blocks::Full(m) => {
                let mut out = vec![0u8; n as usize];
                let mut pos = off;
                while pos < off + n {
                    let b = pos / BLOCK_SIZE;
                    let in_blk = (pos % BLOCK_SIZE) as usize;
                    let take = ((BLOCK_SIZE - in_blk as u64).min(off + n - pos)) as usize;
                    if let Some(blk) = m.get(&b) {
                        let o = (pos - off) as usize;
                        out[o..o + take].copy_from_slice(&blk[in_blk..in_blk + take]);
                    }
                    pos += take as u64;
                }
                OwnedData::Bytes(out)
            }
        }
    }
}

/// Write data normalized to this file system's payload mode.
enum Normalized<'a> {
    Bytes(std::borrow::Cow<'a, [u8]>),
    Fingerprints(&'a [u64]),
    FingerprintsOwned(Vec<u64>),
}

impl FileSystem for MemFs {
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr> {
        self.enter().await;
        let st = self.state.borrow();
        let dir = st.dir(parent)?;
        let ino = match name {
            "." => parent,
            ".." => dir.parent,
            _ => {
                check_name(name)?;
                *dir.entries.get(name).ok_or(FsError::NotFound)?
            }
        };
        Ok(st.get(ino)?.attr(ino))
    }

    async fn getattr(&self, ino: Ino) -> FsResult<Attr> {
        self.enter().await;
        let st = self.state.borrow();
        Ok(st.get(ino)?.attr(ino))
    }

    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        let node = st.get(ino)?;
        if let Some(size) = set.size {
            match node.body {
                Body::Dir(_) => return Err(FsError::IsDir),
                Body::Symlink(_) => {
                    return Err(FsError::Invalid("truncate of a symlink".into()));
                }
                Body::File(_) => {}
            }
            if size > self.cfg.max_file_size {
                return Err(FsError::TooLarge);
            }
            self.check_aligned("size", size)?;
        }
        let mut freed = 0;
        let node = st.get_mut(ino)?;
        if let Some(p) = set.perm {
            node.perm = p & 0o7777;
        }
        if let Some(u) = set.uid {
            node.uid = u;
        }
        if let Some(g) = set.gid {
            node.gid = g;
        }
        if let Some(size) = set.size {
            let Body::File(f) = &mut node.body else {
                unreachable!("checked above")
            };
            if size < f.size {
                freed = f.blocks.drop_from(size.div_ceil(BLOCK_SIZE));
                if let Blocks::Full(m) = &mut f.blocks
                    && let Some(b) = m.get_mut(&(size / BLOCK_SIZE))
                {
                    b[(size % BLOCK_SIZE) as usize..].fill(0);
                }
            }
            f.size = size;
            node.mtime = now;
        }
        if let Some(a) = set.atime {
            node.atime = a;
        }
        if let Some(m) = set.mtime {
            node.mtime = m;
        }
        node.ctime = now;
        let attr = node.attr(ino);
        st.used_blocks -= freed;
        Ok(attr)
    }

    async fn create(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.enter().await;
        let body = Body::File(FileData {
            size: 0,
            blocks: self.new_blocks(),
        });
        self.add_entry(parent, name, perm, uid, gid, body)
    }

    async fn mkdir(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.enter().await;
        let body = Body::Dir(Dir {
            parent,
            entries: BTreeMap::new(),
        });
        self.add_entry(parent, name, perm, uid, gid, body)
    }

    async fn symlink(
        &self,
        parent: Ino,
        name: &str,
        target: &str,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.enter().await;
        {
            let st = self.state.borrow();
            st.dir(parent)?;
        }
        if target.is_empty() {
            return Err(FsError::NotFound);
        }
        if target.len() > SYMLINK_MAX {
            return Err(FsError::NameTooLong);
        }
        self.add_entry(
            parent,
            name,
            0o777,
            uid,
            gid,
            Body::Symlink(target.to_string()),
        )
    }

    async fn readlink(&self, ino: Ino) -> FsResult<String> {
        self.enter().await;
        let st = self.state.borrow();
        match &st.get(ino)?.body {
            Body::Symlink(t) => Ok(t.clone()),
            _ => Err(FsError::Invalid(format!("inode {ino} is not a symlink"))),
        }
    }

    async fn link(&self, ino: Ino, newparent: Ino, newname: &str) -> FsResult<Attr> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        st.get(ino)?;
        st.dir(newparent)?;
        if is_dot(newname) {
            return Err(FsError::Exists);
        }
        check_name(newname)?;
        if st.entry(newparent, newname)?.is_some() {
            return Err(FsError::Exists);
        }
        let node = st.get(ino)?;
        if node.dir().is_some() {
            return Err(FsError::IsDir);
        }
        if node.nlink >= LINK_MAX {
            return Err(FsError::TooManyLinks);
        }
        let node = st.get_mut(ino)?;
        node.nlink += 1;
        node.ctime = now;
        let attr = node.attr(ino);
        let p = st.get_mut(newparent)?;
        p.touch_dir(now);
        p.dir_mut()
            .expect("checked directory")
            .entries
            .insert(newname.to_string(), ino);
        Ok(attr)
    }

    async fn unlink(&self, parent: Ino, name: &str) -> FsResult<()> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        st.dir(parent)?;
        if is_dot(name) {
            return Err(FsError::IsDir);
        }
        check_name(name)?;
        let ino = st.entry(parent, name)?.ok_or(FsError::NotFound)?;
        if st.get(ino)?.dir().is_some() {
            return Err(FsError::IsDir);
        }
        let p = st.get_mut(parent)?;
        p.touch_dir(now);
        p.dir_mut().expect("checked directory").entries.remove(name);
        st.drop_link(ino, now);
        Ok(())
    }

    async fn rmdir(&self, parent: Ino, name: &str) -> FsResult<()> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        st.dir(parent)?;
        match name {
            "." => return Err(FsError::Invalid("rmdir of '.'".into())),
            ".." => return Err(FsError::NotEmpty),
            _ => check_name(name)?,
        }
        let ino = st.entry(parent, name)?.ok_or(FsError::NotFound)?;
        let dir = st.get(ino)?.dir().ok_or(FsError::NotDir)?;
        if !dir.entries.is_empty() {
            return Err(FsError::NotEmpty);
        }
        st.inodes.remove(&ino);
        let p = st.get_mut(parent)?;
        p.nlink -= 1;
        p.touch_dir(now);
        p.dir_mut().expect("checked directory").entries.remove(name);
        Ok(())
    }

    async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str) -> FsResult<()> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        st.dir(parent)?;
        st.dir(newparent)?;
        if is_dot(name) || is_dot(newname) {
            return Err(FsError::Invalid("rename of '.' or '..'".into()));
        }
        check_name(name)?;
        check_name(newname)?;
        let src = st.entry(parent, name)?.ok_or(FsError::NotFound)?;
        let target = st.entry(newparent, newname)?;
        if target == Some(src) {
            return Ok(());
        }
        let src_is_dir = st.get(src)?.dir().is_some();
        let target_dir = match target {
            Some(t) => Some(st.get(t)?.dir().map(|d| d.entries.is_empty())),
            None => None,
        };
        if src_is_dir {
            if st.is_ancestor_or_self(src, newparent) {
                return Err(FsError::Invalid(
                    "cannot move a directory into its own subtree".into(),
                ));
            }
            match target_dir {
                Some(None) => return Err(FsError::NotDir),
                Some(Some(false)) => return Err(FsError::NotEmpty),
                Some(Some(true)) => {}
                None => {
                    if parent != newparent && st.get(newparent)?.nlink >= LINK_MAX {
                        return Err(FsError::TooManyLinks);
                    }
                }
            }
        } else if let Some(Some(_)) = target_dir {
            return Err(FsError::IsDir);
        }
        // Checks done: apply.
        if let Some(t) = target {
            let np = st.get_mut(newparent)?;
            np.dir_mut()
                .expect("checked directory")
                .entries
                .remove(newname);
            if target_dir.is_some_and(|d| d.is_some()) {
                np.nlink -= 1;
                st.inodes.remove(&t);
            } else {
                st.drop_link(t, now);
            }
        }
        let p = st.get_mut(parent)?;
        p.dir_mut().expect("checked directory").entries.remove(name);
        p.touch_dir(now);
        if src_is_dir && parent != newparent {
            p.nlink -= 1;
        }
        let np = st.get_mut(newparent)?;
        np.dir_mut()
            .expect("checked directory")
            .entries
            .insert(newname.to_string(), src);
        np.touch_dir(now);
        if src_is_dir && parent != newparent {
            np.nlink += 1;
        }
        let s = st.get_mut(src)?;
        s.ctime = now;
        if let Some(d) = s.dir_mut() {
            d.parent = newparent;
        }
        Ok(())
    }

    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>> {
        self.enter().await;
        let st = self.state.borrow();
        let dir = st.dir(ino)?;
        Ok(dir
            .entries
            .iter()
            .map(|(name, &i)| DirEntry {
                name: name.clone(),
                ino: i,
                kind: st.inodes[&i].kind(),
            })
            .collect())
    }

    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData> {
        self.enter().await;
        let st = self.state.borrow();
        match &st.get(ino)?.body {
            Body::Dir(_) => Err(FsError::IsDir),
            Body::Symlink(_) => Err(FsError::Invalid(format!("read of symlink {ino}"))),
            Body::File(f) => {
                self.check_aligned("offset", off)?;
                self.check_aligned("length", len)?;
                Ok(self.read_locked(f, off, len))
            }
        }
    }

    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64> {
        let now = self.enter().await;
        let mut st = self.state.borrow_mut();
        match &st.get(ino)?.body {
            Body::Dir(_) => return Err(FsError::IsDir),
            Body::Symlink(_) => {
                return Err(FsError::Invalid(format!("write to symlink {ino}")));
            }
            Body::File(_) => {}
        }
        self.check_aligned("offset", off)?;
        let norm = match (self.cfg.payload, data.as_ref()) {
            (PayloadMode::Full, WriteData::Bytes(b)) => {
                Normalized::Bytes(std::borrow::Cow::Borrowed(b))
            }
            (PayloadMode::Full, WriteData::Fingerprints(f)) => {
                let mut v = Vec::with_capacity(f.len() * BLOCK_SIZE as usize);
                for &fp in f {
                    block_from_fingerprint(fp, BLOCK_SIZE, &mut v);
                }
                Normalized::Bytes(std::borrow::Cow::Owned(v))
            }
            (PayloadMode::Fingerprint, WriteData::Fingerprints(f)) => Normalized::Fingerprints(f),
            (PayloadMode::Fingerprint, WriteData::Bytes(b)) => {
                self.check_aligned("length", b.len() as u64)?;
                Normalized::FingerprintsOwned(
                    b.chunks(BLOCK_SIZE as usize).map(fingerprint).collect(),
                )
            }
        };
        let len = match &norm {
            Normalized::Bytes(b) => b.len() as u64,
            Normalized::Fingerprints(f) => f.len() as u64 * BLOCK_SIZE,
            Normalized::FingerprintsOwned(f) => f.len() as u64 * BLOCK_SIZE,
        };
        if len == 0 {
            return Ok(0);
        }
        let end = off.checked_add(len).ok_or(FsError::TooLarge)?;
        if end > self.cfg.max_file_size {
            return Err(FsError::TooLarge);
        }
        let first = off / BLOCK_SIZE;
        let last = (end - 1) / BLOCK_SIZE;
        let used = st.used_blocks;
        let Body::File(f) = &mut st.get_mut(ino)?.body else {
            unreachable!("checked above")
        };
        let new = (last - first + 1) - f.blocks.present_in(first, last);
        if used + new > self.capacity_blocks() {
            return Err(FsError::NoSpace);
        }
        match (&mut f.blocks, &norm) {
            (Blocks::Full(m), Normalized::Bytes(b)) => {
                let mut pos = off;
                while pos < end {
                    let blk = pos / BLOCK_SIZE;
                    let in_blk = (pos % BLOCK_SIZE) as usize;
                    let take = ((BLOCK_SIZE - in_blk as u64).min(end - pos)) as usize;
                    let dst = m
                        .entry(blk)
                        .or_insert_with(|| vec![0u8; BLOCK_SIZE as usize].into_boxed_slice());
                    let src = (pos - off) as usize;
                    dst[in_blk..in_blk + take].copy_from_slice(&b[src..src + take]);
                    pos += take as u64;
                }
            }
            (Blocks::Fingerprint(m), Normalized::Fingerprints(fps)) => {
                for (i, &fp) in fps.iter().enumerate() {
                    m.insert(first + i as u64, fp);
                }
            }
            (Blocks::Fingerprint(m), Normalized::FingerprintsOwned(fps)) => {
                for (i, &fp) in fps.iter().enumerate() {
                    m.insert(first + i as u64, fp);
                }
            }
            _ => unreachable!("data normalized to the payload mode"),
        }
        f.size = f.size.max(end);
        let node = st.get_mut(ino)?;
        node.mtime = now;
        node.ctime = now;
        st.used_blocks += new;
        Ok(len)
    }

    async fn fsync(&self, ino: Ino, _datasync: bool) -> FsResult<()> {
        self.enter().await;
        self.state.borrow().get(ino)?;
        Ok(())
    }

    async fn sync(&self) -> FsResult<()> {
        self.enter().await;
        Ok(())
    }

    fn statfs(&self) -> StatFs {
        let st = self.state.borrow();
        let blocks = self.capacity_blocks();
        StatFs {
            block_size: BLOCK_SIZE,
            blocks,
            blocks_free: blocks.saturating_sub(st.used_blocks),
            files: self.cfg.max_inodes,
            files_free: self.cfg.max_inodes.saturating_sub(st.inodes.len() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::rc::Rc;
    use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

    fn noop_waker() -> Waker {
        fn clone(_: *const ()) -> RawWaker {
            RawWaker::new(std::ptr::null(), &VTABLE)
        }
        fn noop(_: *const ()) {}
        static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
        // SAFETY: the vtable's functions never dereference the data pointer.
        unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
    }

    /// Runs a call of a MemFs without latency, which completes at its first poll.
    fn now<T>(f: impl Future<Output = T>) -> T {
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        match pin!(f).poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("MemFs call without latency did not complete at once"),
        }
    }

    fn full(cap: u64) -> MemFs {
        MemFs::new(MemFsConfig::new(PayloadMode::Full, cap))
    }

    fn bytes(d: OwnedData) -> Vec<u8> {
        match d {
            OwnedData::Bytes(b) => b,
            other => panic!("expected bytes, got {other:?}"),
        }
    }

    fn mkfile(fs: &MemFs, parent: Ino, name: &str) -> Ino {
        now(fs.create(parent, name, 0o644, 1, 2)).unwrap().ino
    }
    fn mkdir(fs: &MemFs, parent: Ino, name: &str) -> Ino {
        now(fs.mkdir(parent, name, 0o755, 1, 2)).unwrap().ino
    }

    #[test]
    fn create_lookup_and_link_counts() {
        let fs = full(1 << 20);
        let a = mkfile(&fs, ROOT_INO, "a");
        let d = mkdir(&fs, ROOT_INO, "d");
        assert_eq!(now(fs.getattr(ROOT_INO)).unwrap().nlink, 3);
        let attr = now(fs.lookup(ROOT_INO, "a")).unwrap();
        assert_eq!(
            (attr.ino, attr.kind, attr.nlink, attr.perm),
            (a, FileKind::File, 1, 0o644)
        );
        assert_eq!((attr.uid, attr.gid), (1, 2));
        assert_eq!(now(fs.lookup(d, "..")).unwrap().ino, ROOT_INO);
        assert_eq!(now(fs.lookup(d, ".")).unwrap().ino, d);
        assert_eq!(now(fs.lookup(ROOT_INO, "..")).unwrap().ino, ROOT_INO);
        assert_eq!(
            now(fs.create(ROOT_INO, "a", 0o644, 0, 0)),
            Err(FsError::Exists)
        );
        assert_eq!(
            now(fs.mkdir(ROOT_INO, "a", 0o755, 0, 0)),
            Err(FsError::Exists)
        );
        assert_eq!(now(fs.mkdir(d, "..", 0o755, 0, 0)), Err(FsError::Exists));
        assert_eq!(now(fs.lookup(ROOT_INO, "zz")), Err(FsError::NotFound));
        assert_eq!(now(fs.lookup(a, "x")), Err(FsError::NotDir));
        assert_eq!(now(fs.create(a, "x", 0o644, 0, 0)), Err(FsError::NotDir));
        assert_eq!(now(fs.lookup(99, "x")), Err(FsError::NotFound));
        // Hard links.
        let l = now(fs.link(a, d, "a2")).unwrap();
        assert_eq!((l.ino, l.nlink), (a, 2));
        assert_eq!(now(fs.link(d, ROOT_INO, "d2")), Err(FsError::IsDir));
        assert_eq!(now(fs.link(a, d, "a2")), Err(FsError::Exists));
        now(fs.unlink(ROOT_INO, "a")).unwrap();
        assert_eq!(now(fs.getattr(a)).unwrap().nlink, 1);
        now(fs.unlink(d, "a2")).unwrap();
        assert_eq!(now(fs.getattr(a)), Err(FsError::NotFound));
        fs.check().unwrap();
    }

    #[test]
    fn names_are_checked() {
        let fs = full(1 << 20);
        let long = "x".repeat(NAME_MAX + 1);
        let max = "y".repeat(NAME_MAX);
        assert_eq!(
            now(fs.create(ROOT_INO, &long, 0o644, 0, 0)),
            Err(FsError::NameTooLong)
        );
        assert_eq!(now(fs.lookup(ROOT_INO, &long)), Err(FsError::NameTooLong));
        mkfile(&fs, ROOT_INO, &max);
        assert!(matches!(
            now(fs.create(ROOT_INO, "a/b", 0o644, 0, 0)),
            Err(FsError::Invalid(_))
        ));
        assert_eq!(
            now(fs.create(ROOT_INO, "", 0o644, 0, 0)),
            Err(FsError::NotFound)
        );
        let f = mkfile(&fs, ROOT_INO, "f");
        assert_eq!(now(fs.link(f, ROOT_INO, &long)), Err(FsError::NameTooLong));
        assert_eq!(
            now(fs.rename(ROOT_INO, "f", ROOT_INO, &long)),
            Err(FsError::NameTooLong)
        );
        fs.check().unwrap();
    }

    #[test]
    fn unlink_rmdir_and_type_errors() {
        let fs = full(1 << 20);
        let d = mkdir(&fs, ROOT_INO, "d");
        mkfile(&fs, d, "f");
        assert_eq!(now(fs.unlink(ROOT_INO, "d")), Err(FsError::IsDir));
        assert_eq!(now(fs.rmdir(d, "f")), Err(FsError::NotDir));
        assert_eq!(now(fs.rmdir(ROOT_INO, "d")), Err(FsError::NotEmpty));
        assert_eq!(now(fs.rmdir(ROOT_INO, "nope")), Err(FsError::NotFound));
        assert_eq!(now(fs.unlink(ROOT_INO, "nope")), Err(FsError::NotFound));
        assert!(matches!(now(fs.rmdir(d, ".")), Err(FsError::Invalid(_))));
        assert_eq!(now(fs.rmdir(d, "..")), Err(FsError::NotEmpty));
        assert_eq!(now(fs.unlink(d, ".")), Err(FsError::IsDir));
        assert_eq!(now(fs.read(d, 0, 10)), Err(FsError::IsDir));
        assert_eq!(
            now(fs.write(d, 0, OwnedData::Bytes(vec![1]))),
            Err(FsError::IsDir)
        );
        assert_eq!(
            now(fs.setattr(
                d,
                SetAttr {
                    size: Some(0),
                    ..SetAttr::default()
                }
            )),
            Err(FsError::IsDir)
        );
        assert_eq!(
            now(fs.readdir(now(fs.lookup(d, "f")).unwrap().ino)),
            Err(FsError::NotDir)
        );
        now(fs.unlink(d, "f")).unwrap();
        now(fs.rmdir(ROOT_INO, "d")).unwrap();
        assert_eq!(now(fs.getattr(ROOT_INO)).unwrap().nlink, 2);
        assert_eq!(now(fs.getattr(d)), Err(FsError::NotFound));
        fs.check().unwrap();
    }

    #[test]
    fn symlinks() {
        let fs = full(1 << 20);
        let s = now(fs.symlink(ROOT_INO, "s", "some/where", 3, 4)).unwrap();
        assert_eq!(
            (s.kind, s.size, s.nlink, s.perm),
            (FileKind::Symlink, 10, 1, 0o777)
        );
        assert_eq!(now(fs.readlink(s.ino)).unwrap(), "some/where");
        assert!(matches!(
            now(fs.readlink(ROOT_INO)),
            Err(FsError::Invalid(_))
        ));
        assert!(matches!(
            now(fs.read(s.ino, 0, 1)),
            Err(FsError::Invalid(_))
        ));
        assert_eq!(
            now(fs.symlink(ROOT_INO, "s", "x", 0, 0)),
            Err(FsError::Exists)
        );
        assert_eq!(
            now(fs.symlink(ROOT_INO, "e", "", 0, 0)),
            Err(FsError::NotFound)
        );
        let long = "t".repeat(SYMLINK_MAX + 1);
        assert_eq!(
            now(fs.symlink(ROOT_INO, "l", &long, 0, 0)),
            Err(FsError::NameTooLong)
        );
        // Hard links to symlinks are allowed.
        now(fs.link(s.ino, ROOT_INO, "s2")).unwrap();
        assert_eq!(now(fs.getattr(s.ino)).unwrap().nlink, 2);
        now(fs.unlink(ROOT_INO, "s")).unwrap();
        now(fs.unlink(ROOT_INO, "s2")).unwrap();
        fs.check().unwrap();
    }

    #[test]
    fn rename_semantics() {
        let fs = full(1 << 20);
        let a = mkdir(&fs, ROOT_INO, "a");
        let b = mkdir(&fs, a, "b");
        let f = mkfile(&fs, ROOT_INO, "f");
        let g = mkfile(&fs, ROOT_INO, "g");
        // Into its own subtree, or onto itself via its subtree.
        assert!(matches!(
            now(fs.rename(ROOT_INO, "a", b, "x")),
            Err(FsError::Invalid(_))
        ));
        assert!(matches!(
            now(fs.rename(ROOT_INO, "a", a, "x")),
            Err(FsError::Invalid(_))
        ));
        // Type mismatches.
        assert_eq!(
            now(fs.rename(ROOT_INO, "a", ROOT_INO, "f")),
            Err(FsError::NotDir)
        );
        assert_eq!(now(fs.rename(ROOT_INO, "f", a, "b")), Err(FsError::IsDir));
        // Non-empty directory target.
        let c = mkdir(&fs, ROOT_INO, "c");
        mkfile(&fs, c, "inside");
        assert_eq!(
            now(fs.rename(a, "b", ROOT_INO, "c")),
            Err(FsError::NotEmpty)
        );
        assert_eq!(
            now(fs.rename(ROOT_INO, "zz", ROOT_INO, "y")),
            Err(FsError::NotFound)
        );
        // A file replaces a file: the old target loses its link.
        now(fs.rename(ROOT_INO, "f", ROOT_INO, "g")).unwrap();
        assert_eq!(now(fs.lookup(ROOT_INO, "g")).unwrap().ino, f);
        assert_eq!(now(fs.getattr(g)), Err(FsError::NotFound));
        assert_eq!(now(fs.lookup(ROOT_INO, "f")), Err(FsError::NotFound));
        // Renaming a link onto another link of the same inode does nothing.
        now(fs.link(f, ROOT_INO, "g2")).unwrap();
        now(fs.rename(ROOT_INO, "g", ROOT_INO, "g2")).unwrap();
        assert_eq!(now(fs.getattr(f)).unwrap().nlink, 2);
        assert!(now(fs.lookup(ROOT_INO, "g")).is_ok());
        // A directory moves to another parent: link counts follow.
        now(fs.rename(a, "b", c, "b")).unwrap();
        assert_eq!(now(fs.getattr(a)).unwrap().nlink, 2);
        assert_eq!(now(fs.getattr(c)).unwrap().nlink, 3);
        assert_eq!(now(fs.lookup(b, "..")).unwrap().ino, c);
        // A directory replaces an empty directory.
        let e = mkdir(&fs, ROOT_INO, "e");
        now(fs.rename(c, "b", ROOT_INO, "e")).unwrap();
        assert_eq!(now(fs.getattr(e)), Err(FsError::NotFound));
        assert_eq!(now(fs.lookup(ROOT_INO, "e")).unwrap().ino, b);
        assert_eq!(now(fs.getattr(c)).unwrap().nlink, 2);
        // Same name: no-op.
        now(fs.rename(ROOT_INO, "e", ROOT_INO, "e")).unwrap();
        assert!(matches!(
            now(fs.rename(ROOT_INO, ".", ROOT_INO, "x")),
            Err(FsError::Invalid(_))
        ));
        fs.check().unwrap();
    }

    #[test]
    fn sparse_files_and_truncate() {
        let fs = full(1 << 20);
        let f = mkfile(&fs, ROOT_INO, "f");
        assert_eq!(
            now(fs.write(f, 10_000, OwnedData::Bytes(vec![7; 100]))),
            Ok(100)
        );
        let a = now(fs.getattr(f)).unwrap();
        assert_eq!((a.size, a.blocks), (10_100, 1));
        let d = bytes(now(fs.read(f, 0, 20_000)).unwrap());
        assert_eq!(d.len(), 10_100);
        assert!(d[..10_000].iter().all(|&b| b == 0));
        assert!(d[10_000..].iter().all(|&b| b == 7));
        assert!(bytes(now(fs.read(f, 20_000, 10)).unwrap()).is_empty());
        // Shrink into the middle of the data, then grow: the cut part reads as zeros.
        let set = |s| SetAttr {
            size: Some(s),
            ..SetAttr::default()
        };
        now(fs.setattr(f, set(10_050))).unwrap();
        now(fs.setattr(f, set(20_000))).unwrap();
        let a = now(fs.getattr(f)).unwrap();
        assert_eq!((a.size, a.blocks), (20_000, 1));
        let d = bytes(now(fs.read(f, 10_000, 100)).unwrap());
        assert_eq!(&d[..50], &[7; 50][..]);
        assert_eq!(&d[50..], &[0; 50][..]);
        now(fs.setattr(f, set(0))).unwrap();
        assert_eq!(now(fs.getattr(f)).unwrap().blocks, 0);
        assert_eq!(fs.statfs().blocks_free, fs.statfs().blocks);
        assert_eq!(now(fs.write(f, 0, OwnedData::Bytes(Vec::new()))), Ok(0));
        assert_eq!(now(fs.getattr(f)).unwrap().size, 0);
        let big = fs.config().max_file_size;
        assert_eq!(now(fs.setattr(f, set(big + 1))), Err(FsError::TooLarge));
        assert_eq!(
            now(fs.write(f, big, OwnedData::Bytes(vec![1]))),
            Err(FsError::TooLarge)
        );
        fs.check().unwrap();
    }

    #[test]
    fn statfs_and_no_space() {
        let mut cfg = MemFsConfig::new(PayloadMode::Full, 4 * BLOCK_SIZE);
        cfg.max_inodes = 3;
        let fs = MemFs::new(cfg);
        let st = fs.statfs();
        assert_eq!((st.block_size, st.blocks, st.blocks_free), (4096, 4, 4));
        assert_eq!((st.files, st.files_free), (3, 2));
        let f = mkfile(&fs, ROOT_INO, "f");
        now(fs.write(f, 0, OwnedData::Bytes(vec![1; 3 * 4096]))).unwrap();
        assert_eq!(fs.statfs().blocks_free, 1);
        // Two more blocks do not fit: nothing changes.
        assert_eq!(
            now(fs.write(f, 3 * 4096, OwnedData::Bytes(vec![2; 2 * 4096]))),
            Err(FsError::NoSpace)
        );
        assert_eq!(now(fs.getattr(f)).unwrap().size, 3 * 4096);
        // Overwrites need no new blocks.
        now(fs.write(f, 0, OwnedData::Bytes(vec![3; 3 * 4096]))).unwrap();
        mkfile(&fs, ROOT_INO, "g");
        assert_eq!(
            now(fs.create(ROOT_INO, "h", 0o644, 0, 0)),
            Err(FsError::NoSpace)
        );
        assert_eq!(fs.statfs().files_free, 0);
        now(fs.unlink(ROOT_INO, "f")).unwrap();
        assert_eq!(fs.statfs().blocks_free, 4);
        fs.check().unwrap();
    }

    #[test]
    fn fingerprint_mode_alignment_and_zero_blocks() {
        let fs = MemFs::new(MemFsConfig::new(PayloadMode::Fingerprint, 1 << 20));
        let f = mkfile(&fs, ROOT_INO, "f");
        fn inv<T>(r: FsResult<T>) -> bool {
            matches!(r, Err(FsError::Invalid(_)))
        }
        assert!(inv(now(fs.write(f, 100, OwnedData::Fingerprint(1)))));
        assert!(inv(now(fs.write(f, 0, OwnedData::Bytes(vec![0; 100])))));
        assert!(inv(now(fs.read(f, 0, 100))));
        assert!(inv(now(fs.read(f, 1, 4096))));
        assert!(inv(now(fs.setattr(
            f,
            SetAttr {
                size: Some(5),
                ..SetAttr::default()
            }
        ))));
        assert_eq!(
            now(fs.write(f, 8192, OwnedData::Fingerprints(vec![5, 6]))),
            Ok(8192)
        );
        let zero = fingerprint(&[0u8; 4096]);
        assert_eq!(
            now(fs.read(f, 0, 1 << 20)).unwrap(),
            OwnedData::Fingerprints(vec![zero, zero, 5, 6])
        );
        // Bytes are fingerprinted on the way in.
        let blk = vec![9u8; 4096];
        now(fs.write(f, 0, OwnedData::Bytes(blk.clone()))).unwrap();
        assert_eq!(
            now(fs.read(f, 0, 4096)).unwrap(),
            OwnedData::Fingerprint(fingerprint(&blk))
        );
        let a = now(fs.getattr(f)).unwrap();
        assert_eq!((a.size, a.blocks), (16_384, 3));
        fs.check().unwrap();
    }

    #[test]
    fn fingerprints_written_in_full_mode_read_back_as_their_bytes() {
        let fs = full(1 << 20);
        let f = mkfile(&fs, ROOT_INO, "f");
        now(fs.write(f, 0, OwnedData::Fingerprint(42))).unwrap();
        let mut expect = Vec::new();
        block_from_fingerprint(42, 4096, &mut expect);
        assert_eq!(bytes(now(fs.read(f, 0, 4096)).unwrap()), expect);
    }

    #[test]
    fn times_follow_the_simulation() {
        let sim = Sim::new();
        let mut cfg = MemFsConfig::new(PayloadMode::Full, 1 << 20);
        cfg.op_latency = Nanos(1_000);
        let fs = Rc::new(MemFs::with_sim(cfg, sim.clone()));
        let (s, f2) = (sim.clone(), fs.clone());
        sim.block_on(async move {
            let fs = f2;
            let f = fs.create(ROOT_INO, "f", 0o600, 0, 0).await.unwrap();
            assert_eq!(
                (f.atime, f.mtime, f.ctime),
                (Nanos(1_000), Nanos(1_000), Nanos(1_000))
            );
            let root = fs.getattr(ROOT_INO).await.unwrap();
            assert_eq!((root.mtime, root.ctime), (Nanos(1_000), Nanos(1_000)));
            s.sleep(Nanos(5_000)).await;
            fs.write(f.ino, 0, OwnedData::Bytes(vec![1])).await.unwrap();
            let a = fs.getattr(f.ino).await.unwrap();
            assert_eq!(
                (a.atime, a.mtime, a.ctime),
                (Nanos(1_000), Nanos(8_000), Nanos(8_000))
            );
            let a = fs
                .setattr(
                    f.ino,
                    SetAttr {
                        perm: Some(0o4755),
                        mtime: Some(Nanos(5)),
                        ..SetAttr::default()
                    },
                )
                .await
                .unwrap();
            assert_eq!(
                (a.perm, a.mtime, a.ctime),
                (0o4755, Nanos(5), Nanos(10_000))
            );
            fs.link(f.ino, ROOT_INO, "g").await.unwrap();
            assert_eq!(fs.getattr(f.ino).await.unwrap().ctime, Nanos(11_000));
            // Reads leave times alone.
            fs.read(f.ino, 0, 1).await.unwrap();
            let b = fs.getattr(f.ino).await.unwrap();
            assert_eq!((b.atime, b.mtime), (Nanos(1_000), Nanos(5)));
            assert_eq!(s.now(), Nanos(14_000));
        })
        .unwrap();
        // Without a simulation handle every time is zero.
        let plain = full(1 << 20);
        let f = now(plain.create(ROOT_INO, "f", 0o644, 0, 0)).unwrap();
        assert_eq!(f.mtime, Nanos::ZERO);
    }

    #[test]
    fn readdir_is_sorted_and_skips_dots() {
        let fs = full(1 << 20);
        for n in ["b", "a", "c"] {
            mkfile(&fs, ROOT_INO, n);
        }
        mkdir(&fs, ROOT_INO, "d");
        let names: Vec<_> = now(fs.readdir(ROOT_INO))
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            vec![
                ("a".to_string(), FileKind::File),
                ("b".to_string(), FileKind::File),
                ("c".to_string(), FileKind::File),
                ("d".to_string(), FileKind::Dir)
            ]
        );
    }

    #[test]
    fn link_max_is_enforced() {
        let fs = full(1 << 20);
        let f = mkfile(&fs, ROOT_INO, "f");
        fs.state.borrow_mut().inodes.get_mut(&f).unwrap().nlink = LINK_MAX;
        assert_eq!(now(fs.link(f, ROOT_INO, "g")), Err(FsError::TooManyLinks));
        fs.state.borrow_mut().inodes.get_mut(&f).unwrap().nlink = 1;
        fs.state
            .borrow_mut()
            .inodes
            .get_mut(&ROOT_INO)
            .unwrap()
            .nlink = LINK_MAX;
        assert_eq!(
            now(fs.mkdir(ROOT_INO, "d", 0o755, 0, 0)),
            Err(FsError::TooManyLinks)
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Create(usize, u8),
            Mkdir(usize, u8),
            Symlink(usize, u8),
            Link(usize, usize, u8),
            Unlink(usize, u8),
            Rmdir(usize, u8),
            Rename(usize, u8, usize, u8),
            Write(usize, u16, u16),
            Truncate(usize, u16),
        }

        fn op() -> impl Strategy<Value = Op> {
            let i = 0usize..12;
            let n = 0u8..4;
            prop_oneof![
                (i.clone(), n.clone()).prop_map(|(a, b)| Op::Create(a, b)),
                (i.clone(), n.clone()).prop_map(|(a, b)| Op::Mkdir(a, b)),
                (i.clone(), n.clone()).prop_map(|(a, b)| Op::Symlink(a, b)),
                (i.clone(), i.clone(), n.clone()).prop_map(|(a, b, c)| Op::Link(a, b, c)),
                (i.clone(), n.clone()).prop_map(|(a, b)| Op::Unlink(a, b)),
                (i.clone(), n.clone()).prop_map(|(a, b)| Op::Rmdir(a, b)),
                (i.clone(), n.clone(), i.clone(), n.clone())
                    .prop_map(|(a, b, c, d)| Op::Rename(a, b, c, d)),
                (i.clone(), any::<u16>(), any::<u16>()).prop_map(|(a, b, c)| Op::Write(a, b, c)),
                (i, any::<u16>()).prop_map(|(a, b)| Op::Truncate(a, b)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Any sequence of namespace and data calls keeps every invariant, and a failed
            /// call changes nothing visible.
            #[test]
            fn invariants_hold_under_random_calls(ops in proptest::collection::vec(op(), 1..120)) {
                let fs = MemFs::new(MemFsConfig {
                    max_inodes: 16,
                    ..MemFsConfig::new(PayloadMode::Full, 24 * BLOCK_SIZE)
                });
                // Inode numbers seen so far (some may be gone); index 0 is the root.
                let mut inos = vec![ROOT_INO];
                let name = |n: u8| format!("n{n}");
                let pick = |inos: &Vec<Ino>, i: usize| inos[i % inos.len()];
                for op in ops {
                    let before = fs.statfs();
                    let count = fs.inode_count();
                    let r: FsResult<Option<Ino>> = match op {
                        Op::Create(p, n) => now(fs.create(pick(&inos, p), &name(n), 0o644, 0, 0)).map(|a| Some(a.ino)),
                        Op::Mkdir(p, n) => now(fs.mkdir(pick(&inos, p), &name(n), 0o755, 0, 0)).map(|a| Some(a.ino)),
                        Op::Symlink(p, n) => now(fs.symlink(pick(&inos, p), &name(n), "t", 0, 0)).map(|a| Some(a.ino)),
                        Op::Link(i, p, n) => now(fs.link(pick(&inos, i), pick(&inos, p), &name(n))).map(|_| None),
                        Op::Unlink(p, n) => now(fs.unlink(pick(&inos, p), &name(n))).map(|_| None),
                        Op::Rmdir(p, n) => now(fs.rmdir(pick(&inos, p), &name(n))).map(|_| None),
                        Op::Rename(p, n, q, m) => now(fs.rename(pick(&inos, p), &name(n), pick(&inos, q), &name(m))).map(|_| None),
                        Op::Write(i, off, len) => now(fs.write(pick(&inos, i), off as u64, OwnedData::Bytes(vec![1; (len % 9000) as usize]))).map(|_| None),
                        Op::Truncate(i, s) => now(fs.setattr(pick(&inos, i), SetAttr { size: Some(s as u64 * 3), ..SetAttr::default() })).map(|_| None),
                    };
                    match r {
                        Ok(Some(ino)) => inos.push(ino),
                        Ok(None) => {}
                        Err(e) => {
                            prop_assert_eq!(fs.statfs(), before, "failed call {:?} changed statfs", e);
                            prop_assert_eq!(fs.inode_count(), count);
                        }
                    }
                    if let Err(msg) = fs.check() {
                        prop_assert!(false, "invariant broken: {}", msg);
                    }
                }
            }

            /// File data behaves as a byte vector in full mode.
            #[test]
            fn full_mode_data_matches_a_byte_vector(
                ops in proptest::collection::vec((0u8..3, 0u32..40_000, 0u32..12_000, any::<u8>()), 1..60)
            ) {
                let fs = full(1 << 24);
                let f = mkfile(&fs, ROOT_INO, "f");
                let mut model: Vec<u8> = Vec::new();
                for (kind, off, len, fill) in ops {
                    let (off, len) = (off as usize, len as usize);
                    match kind {
                        0 => {
                            now(fs.write(f, off as u64, OwnedData::Bytes(vec![fill; len]))).unwrap();
                            if len > 0 {
                                if model.len() < off + len {
                                    model.resize(off + len, 0);
                                }
                                model[off..off + len].fill(fill);
                            }
                        }
                        1 => {
                            now(fs.setattr(f, SetAttr { size: Some(off as u64), ..SetAttr::default() })).unwrap();
                            model.resize(off, 0);
                        }
                        _ => {
                            let got = bytes(now(fs.read(f, off as u64, len as u64)).unwrap());
                            let end = (off + len).min(model.len());
                            let want = if off < model.len() { &model[off..end] } else { &[][..] };
                            prop_assert_eq!(&got[..], want);
                        }
                    }
                    let a = now(fs.getattr(f)).unwrap();
                    prop_assert_eq!(a.size, model.len() as u64);
                    prop_assert!(a.blocks <= a.size.div_ceil(BLOCK_SIZE));
                    if let Err(msg) = fs.check() {
                        prop_assert!(false, "invariant broken: {}", msg);
                    }
                }
            }

            /// File data behaves as a vector of block fingerprints in fingerprint mode.
            #[test]
            fn fingerprint_mode_data_matches_a_block_vector(
                ops in proptest::collection::vec((0u8..3, 0u64..20, 0u64..6, any::<u64>()), 1..60)
            ) {
                let fs = MemFs::new(MemFsConfig::new(PayloadMode::Fingerprint, 1 << 24));
                let zero = fingerprint(&[0u8; 4096]);
                let f = mkfile(&fs, ROOT_INO, "f");
                let mut model: Vec<u64> = Vec::new();
                for (kind, blk, n, fp) in ops {
                    let (b, n) = (blk as usize, n as usize);
                    match kind {
                        0 => {
                            let data: Vec<u64> = (0..n as u64).map(|i| fp ^ i).collect();
                            now(fs.write(f, blk * 4096, OwnedData::Fingerprints(data.clone()))).unwrap();
                            if n > 0 {
                                if model.len() < b + n {
                                    model.resize(b + n, zero);
                                }
                                model[b..b + n].copy_from_slice(&data);
                            }
                        }
                        1 => {
                            now(fs.setattr(f, SetAttr { size: Some(blk * 4096), ..SetAttr::default() })).unwrap();
                            model.resize(b, zero);
                        }
                        _ => {
                            let got = now(fs.read(f, blk * 4096, n as u64 * 4096)).unwrap();
                            let end = (b + n).min(model.len());
                            let want = if b < model.len() { model[b..end].to_vec() } else { Vec::new() };
                            prop_assert_eq!(got, OwnedData::Fingerprints(want));
                        }
                    }
                    if let Err(msg) = fs.check() {
                        prop_assert!(false, "invariant broken: {}", msg);
                    }
                }
            }
        }
    }
}
