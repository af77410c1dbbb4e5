//! The crash oracle of the benchmark workloads (filebench personalities, mdtest), which run
//! many simulated threads at once: [`Watched`] passes every call through to the file system
//! and keeps, per regular file, its contents as written and when each fsync or sync that
//! covered it completed. After a cut at `t`, a file whose last such fsync or sync completed by
//! `t`, and which no call changed (write, truncate, rename, unlink, link) from that call's
//! start up to `t`, must be found under its name with exactly those contents and size.
//! Files changed concurrently with the fsync or sync, and files with more than one link, are
//! not checked; fsck and the mount check the rest.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use zonelab_device::payload::fingerprint;
use zonelab_device::{OwnedData, WriteData};
use zonelab_lfs::fs::Fs;
use zonelab_lfs::{Attr, DirEntry, FileSystem, FsResult, Ino, IoOptions, SetAttr, StatFs};
use zonelab_sim::Nanos;

const BLOCK: u64 = 4096;

/// A file's contents: bytes (full payload mode) or one fingerprint per block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Data {
    Bytes(Vec<u8>),
    Fingerprints { size: u64, fps: Vec<u64> },
}

impl Data {
    fn empty(fingerprints: bool) -> Data {
        if fingerprints {
            Data::Fingerprints {
                size: 0,
                fps: Vec::new(),
            }
        } else {
            Data::Bytes(Vec::new())
        }
    }

    pub fn size(&self) -> u64 {
        match self {
            Data::Bytes(b) => b.len() as u64,
            Data::Fingerprints { size, .. } => *size,
        }
    }

    fn write(&mut self, off: u64, data: &OwnedData) {
        match (self, data.as_ref()) {
            (Data::Bytes(b), WriteData::Bytes(d)) => {
                let end = off as usize + d.len();
                if b.len() < end {
                    b.resize(end, 0);
                }
                b[off as usize..end].copy_from_slice(d);
            }
            (Data::Fingerprints { size, fps }, WriteData::Fingerprints(f)) => {
                let first = (off / BLOCK) as usize;
                let zero = fingerprint(&[0u8; BLOCK as usize]);
                if fps.len() < first + f.len() {
                    fps.resize(first + f.len(), zero);
                }
                fps[first..first + f.len()].copy_from_slice(f);
                *size = (*size).max(off + f.len() as u64 * BLOCK);
            }
            // The file system refuses the other pairs; the caller forgets the file then.
            _ => {}
        }
    }

    fn truncate(&mut self, to: u64) {
        match self {
            Data::Bytes(b) => b.resize(to as usize, 0),
            Data::Fingerprints { size, fps } => {
                let zero = fingerprint(&[0u8; BLOCK as usize]);
                fps.resize(to.div_ceil(BLOCK) as usize, zero);
                *size = to;
            }
        }
    }

    /// Whether `got`, a read of the whole file, is these contents.
    pub fn matches(&self, got: &OwnedData) -> bool {
        match (self, got.as_ref()) {
            (Data::Bytes(b), WriteData::Bytes(g)) => b == g,
            (Data::Fingerprints { fps, .. }, WriteData::Fingerprints(g)) => fps == g,
            (Data::Fingerprints { fps, .. }, WriteData::Bytes(g)) => g.is_empty() && fps.is_empty(),
            _ => false,
        }
    }
}

/// A regular file as the workload made it.
struct Tracked {
    /// Its one name, or `None` once it has more than one link (or lost track).
    name: Option<(Ino, String)>,
    data: Rc<Data>,
    /// Calls changing it in progress.
    busy: u32,
    /// Start times of every call that changed it.
    changes: Vec<Nanos>,
}

/// Contents made durable by an fsync or sync running from `start` to `end`.
#[derive(Clone, Debug)]
pub struct Durable {
    pub start: Nanos,
    pub end: Nanos,
    pub parent: Ino,
    pub name: String,
    pub data: Rc<Data>,
}

/// A file to check after a cut.
#[derive(Clone, Debug)]
pub struct Expect {
    pub ino: Ino,
    pub durable: Durable,
}

/// The file system with its calls watched (see the module documentation).
pub struct Watched {
    fs: Rc<Fs>,
    fingerprints: bool,
    files: RefCell<BTreeMap<Ino, Tracked>>,
    names: RefCell<BTreeMap<(Ino, String), Ino>>,
    durable: RefCell<BTreeMap<Ino, Vec<Durable>>>,
}

/// What a watched file system recorded.
#[derive(Default)]
pub struct Watch {
    changes: BTreeMap<Ino, Vec<Nanos>>,
    durable: BTreeMap<Ino, Vec<Durable>>,
}

impl Watch {
    /// Files that must read back after a cut at `t`.
    pub fn expected_at(&self, t: Nanos) -> Vec<Expect> {
        let mut v = Vec::new();
        for (&ino, recs) in &self.durable {
            let Some(d) = recs.iter().rev().find(|d| d.end <= t) else {
                continue;
            };
            let changes = self.changes.get(&ino).map_or(&[][..], Vec::as_slice);
            let first_after = changes.partition_point(|&c| c < d.start);
            if changes.get(first_after).is_some_and(|&c| c <= t) {
                continue;
            }
            v.push(Expect {
                ino,
                durable: d.clone(),
            });
        }
        v
    }

    /// When each fsync or sync that made a file durable returned (crash points).
    pub fn ends(&self) -> impl Iterator<Item = Nanos> + '_ {
        self.durable.values().flatten().map(|d| d.end)
    }

    /// Durable records kept (for the report).
    pub fn records(&self) -> usize {
        self.durable.values().map(Vec::len).sum()
    }
}

impl Watched {
    pub fn new(fs: Rc<Fs>, fingerprints: bool) -> Watched {
        Watched {
            fs,
            fingerprints,
            files: RefCell::default(),
            names: RefCell::default(),
            durable: RefCell::default(),
        }
    }

    /// What was recorded (the watch ends).
    pub fn finish(&self) -> Watch {
        Watch {
            changes: std::mem::take(&mut *self.files.borrow_mut())
                .into_iter()
                .map(|(i, t)| (i, t.changes))
                .collect(),
            durable: std::mem::take(&mut *self.durable.borrow_mut()),
        }
    }

    fn now(&self) -> Nanos {
        self.fs.sim().now()
    }

    /// A call starts changing `ino`.
    fn begin(&self, ino: Ino) {
        let now = self.now();
        if let Some(t) = self.files.borrow_mut().get_mut(&ino) {
            t.busy += 1;
            t.changes.push(now);
        }
    }

    /// The change of `ino` ended; `ok`: it succeeded and `f` applies it to the model, else
    /// the file's contents are no longer known and it stays unchecked.
    fn end(&self, ino: Ino, ok: bool, f: impl FnOnce(&mut Tracked)) {
        if let Some(t) = self.files.borrow_mut().get_mut(&ino) {
            t.busy -= 1;
            if ok {
                f(t);
            } else {
                t.name = None;
            }
        }
    }

    fn name_of(&self, parent: Ino, name: &str) -> Option<Ino> {
        self.names
            .borrow()
            .get(&(parent, name.to_string()))
            .copied()
    }

    /// What an fsync or sync starting now covers: files with one name and no change running.
    fn snapshot(&self, only: Option<Ino>) -> Vec<(Ino, Ino, String, Rc<Data>)> {
        self.files
            .borrow()
            .iter()
            .filter(|(i, _)| only.is_none_or(|o| o == **i))
            .filter(|(_, t)| t.busy == 0)
            .filter_map(|(i, t)| {
                let (p, n) = t.name.clone()?;
                Some((*i, p, n, t.data.clone()))
            })
            .collect()
    }

    fn made_durable(&self, start: Nanos, snap: Vec<(Ino, Ino, String, Rc<Data>)>) {
        let end = self.now();
        let mut d = self.durable.borrow_mut();
        for (ino, parent, name, data) in snap {
            d.entry(ino).or_default().push(Durable {
                start,
                end,
                parent,
                name,
                data,
            });
        }
    }
}

impl FileSystem for Watched {
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr> {
        self.fs.lookup(parent, name).await
    }
    async fn getattr(&self, ino: Ino) -> FsResult<Attr> {
        self.fs.getattr(ino).await
    }
    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr> {
        let Some(size) = set.size else {
            return self.fs.setattr(ino, set).await;
        };
        self.begin(ino);
        let r = self.fs.setattr(ino, set).await;
        self.end(ino, r.is_ok(), |t| Rc::make_mut(&mut t.data).truncate(size));
        r
    }
    async fn create(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        let start = self.now();
        let r = self.fs.create(parent, name, perm, uid, gid).await;
        if let Ok(a) = &r {
            self.names
                .borrow_mut()
                .insert((parent, name.to_string()), a.ino);
            let mut files = self.files.borrow_mut();
            // An inode number freed by an unlink may come back: its history goes on (the
            // durable records of the earlier file stay keyed by it, and the unlink that ended
            // them must stay on record).
            let mut changes = files.remove(&a.ino).map(|t| t.changes).unwrap_or_default();
            changes.push(start);
            files.insert(
                a.ino,
                Tracked {
                    name: Some((parent, name.to_string())),
                    data: Rc::new(Data::empty(self.fingerprints)),
                    busy: 0,
                    changes,
                },
            );
        }
        r
    }
    async fn mkdir(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.fs.mkdir(parent, name, perm, uid, gid).await
    }
    async fn symlink(
        &self,
        parent: Ino,
        name: &str,
        target: &str,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr> {
        self.fs.symlink(parent, name, target, uid, gid).await
    }
    async fn readlink(&self, ino: Ino) -> FsResult<String> {
        self.fs.readlink(ino).await
    }
    async fn link(&self, ino: Ino, newparent: Ino, newname: &str) -> FsResult<Attr> {
        self.begin(ino);
        let r = self.fs.link(ino, newparent, newname).await;
        // Two names: the file is no longer checked.
        self.end(ino, false, |_| {});
        r
    }
    async fn unlink(&self, parent: Ino, name: &str) -> FsResult<()> {
        let ino = self.name_of(parent, name);
        if let Some(i) = ino {
            self.begin(i);
        }
        let r = self.fs.unlink(parent, name).await;
        if r.is_ok() {
            self.names.borrow_mut().remove(&(parent, name.to_string()));
        }
        if let Some(i) = ino {
            self.end(i, false, |_| {});
        }
        r
    }
    async fn rmdir(&self, parent: Ino, name: &str) -> FsResult<()> {
        self.fs.rmdir(parent, name).await
    }
    async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str) -> FsResult<()> {
        let src = self.name_of(parent, name);
        let dst = self.name_of(newparent, newname);
        for i in src.iter().chain(dst.iter()) {
            self.begin(*i);
        }
        let r = self.fs.rename(parent, name, newparent, newname).await;
        if r.is_ok() {
            let mut names = self.names.borrow_mut();
            names.remove(&(parent, name.to_string()));
            names.remove(&(newparent, newname.to_string()));
            if let Some(s) = src {
                names.insert((newparent, newname.to_string()), s);
            }
        }
        if let Some(d) = dst
            && Some(d) != src
        {
            self.end(d, false, |_| {});
        }
        if let Some(s) = src {
            let ok = r.is_ok();
            self.end(s, ok, |t| t.name = Some((newparent, newname.to_string())));
        }
        r
    }
    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>> {
        self.fs.readdir(ino).await
    }
    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData> {
        self.fs.read(ino, off, len).await
    }
    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64> {
        self.begin(ino);
        let kept = self.files.borrow().contains_key(&ino).then(|| data.clone());
        let r = self.fs.write(ino, off, data).await;
        self.end(ino, r.is_ok(), |t| {
            if let Some(d) = &kept {
                Rc::make_mut(&mut t.data).write(off, d);
            }
        });
        r
    }
    async fn fsync(&self, ino: Ino, datasync: bool) -> FsResult<()> {
        let start = self.now();
        let snap = self.snapshot(Some(ino));
        let r = self.fs.fsync(ino, datasync).await;
        if r.is_ok() && !datasync {
            self.made_durable(start, snap);
        }
        r
    }
    async fn sync(&self) -> FsResult<()> {
        let start = self.now();
        let snap = self.snapshot(None);
        let r = self.fs.sync().await;
        if r.is_ok() {
            self.made_durable(start, snap);
        }
        r
    }
    fn statfs(&self) -> StatFs {
        self.fs.statfs()
    }
    fn set_io_options(&self, ino: Ino, opts: IoOptions) {
        self.fs.set_io_options(ino, opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(start: u64, end: u64) -> Durable {
        Durable {
            start: Nanos(start),
            end: Nanos(end),
            parent: 1,
            name: "f".into(),
            data: Rc::new(Data::Bytes(vec![1, 2, 3])),
        }
    }

    #[test]
    fn a_file_is_expected_from_its_fsync_until_changed() {
        let w = Watch {
            changes: BTreeMap::from([(5, vec![Nanos(0), Nanos(50)])]),
            durable: BTreeMap::from([(5, vec![rec(10, 20)])]),
        };
        assert!(w.expected_at(Nanos(15)).is_empty(), "fsync not done yet");
        assert_eq!(w.expected_at(Nanos(20)).len(), 1);
        assert_eq!(w.expected_at(Nanos(49)).len(), 1);
        assert!(w.expected_at(Nanos(50)).is_empty(), "changed at 50");
        // A change that began while the fsync ran makes its contents unknown.
        let w = Watch {
            changes: BTreeMap::from([(5, vec![Nanos(12)])]),
            durable: BTreeMap::from([(5, vec![rec(10, 20)])]),
        };
        assert!(w.expected_at(Nanos(30)).is_empty());
    }

    #[test]
    fn contents_follow_writes_and_truncates() {
        let mut d = Data::empty(true);
        d.write(8192, &OwnedData::Fingerprints(vec![7, 8]));
        let zero = fingerprint(&[0u8; 4096]);
        assert!(d.matches(&OwnedData::Fingerprints(vec![zero, zero, 7, 8])));
        assert_eq!(d.size(), 16384);
        d.truncate(9000);
        assert!(d.matches(&OwnedData::Fingerprints(vec![zero, zero, 7])));
        assert_eq!(d.size(), 9000);
        let mut b = Data::empty(false);
        b.write(2, &OwnedData::Bytes(vec![9, 9]));
        b.truncate(3);
        assert!(b.matches(&OwnedData::Bytes(vec![0, 0, 9])));
        assert!(!b.matches(&OwnedData::Bytes(vec![0, 0, 9, 9])));
    }
}
