//! A filebench fileset: the directory tree, its file entries, and the ways flowops pick
//! entries (filebench's fileset.c, re-implemented).
//!
//! The tree is built as filebench's `fileset_populate` builds it: the mean depth is
//! ln(entries) / ln(meandirwidth); every directory draws its own depth limit and width from
//! gamma distributions (shape `dirgamma`, 1.5 by default) with those means; the fileset's
//! root directory keeps adding subdirectories until every file has a place; a directory at
//! or below its depth limit is a leaf and holds up to its width of files; names are the
//! 1-based position in the parent, as `%08d`.
//!
//! Entries exist or not; flowops pick an existing file (openfile, deletefile, statfile) or a
//! non-existing one (createfile) *in rotation*: from a rotor index, the first entry of the
//! kind at or after it (wrapping), then past entries busy in another thread's call; the rotor
//! moves past the first found entry. Entries are busy only while a thread's create, open,
//! delete or stat call on them is in flight. There is one rotor for existing entries and one
//! for absent ones, shared by all threads: filebench keeps an existing-entry rotor per thread
//! id but its flowops pass id 0 unless they set `rotatefd`, which the personalities here do
//! not. Which files a run deletes when therefore follows its pace, so a faster file system
//! can see different file lifetimes (docs/zns-plus-reproduction.md, "Runs at the paper's
//! 16 GiB": fileserver's emptier IZC victims).

use super::config::gamma_knuth;
use std::collections::BTreeSet;
use zonelab_lfs::Ino;
use zonelab_sim::SimRng;

/// A directory of the fileset; index 0 is the fileset's root directory.
#[derive(Clone, Debug)]
pub(crate) struct DirNode {
    pub parent: Option<u32>,
    /// Position in the parent (1-based); unused for the root.
    pub serial: u32,
    pub ino: Ino,
}

/// A file of the fileset.
#[derive(Clone, Debug)]
pub(crate) struct FileEntry {
    pub dir: u32,
    pub serial: u32,
    /// filebench's `fse_size`: what createfile + writewholefile and preallocation write.
    pub size: u64,
    pub exists: bool,
    /// In a create/open/delete/stat call of some thread.
    pub busy: bool,
    /// A thread holds the file's write lock.
    pub writing: bool,
    /// Open file descriptors on it.
    pub open: u32,
    pub ino: Ino,
    /// Content id of the current incarnation.
    pub uid: u64,
    /// Bytes written and acknowledged.
    pub committed: u64,
    /// End of the write in flight (= committed when none).
    pub reserved: u64,
}

/// Which entries a flowop wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Want {
    Existing,
    Absent,
}

/// Outcome of a pick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pick {
    Got(u32),
    /// Entries of the kind exist but all are busy: wait and retry.
    AllBusy,
    /// No entry of the kind.
    Empty,
}

#[derive(Clone, Debug)]
pub(crate) struct Fileset {
    pub name: String,
    pub dirs: Vec<DirNode>,
    pub files: Vec<FileEntry>,
    exist: BTreeSet<u32>,
    absent: BTreeSet<u32>,
    ex_rotor: u32,
    ne_rotor: u32,
}

impl Fileset {
    /// Builds the tree for files of the given sizes (entry `i` gets `sizes[i]`).
    pub fn populate(
        name: &str,
        sizes: &[u64],
        meandirwidth: f64,
        dirgamma: f64,
        rng: &mut SimRng,
    ) -> Fileset {
        assert!(meandirwidth >= 2.0, "meandirwidth must be at least 2");
        let entries = sizes.len();
        let mut fs = Fileset {
            name: name.to_string(),
            dirs: Vec::new(),
            files: Vec::with_capacity(entries),
            exist: BTreeSet::new(),
            absent: (0..entries as u32).collect(),
            ex_rotor: 0,
            ne_rotor: 0,
        };
        if entries > 0 {
            let meandepth = (entries as f64).ln() / meandirwidth.ln();
            let mut b = Builder {
                fs: &mut fs,
                sizes,
                meandepth,
                meanwidth: meandirwidth,
                gamma: dirgamma,
                rng,
            };
            b.subdir(None, 1, 0.0);
        } else {
            fs.dirs.push(DirNode {
                parent: None,
                serial: 1,
                ino: 0,
            });
        }
        fs
    }

    /// Path of directory `d` below the file system's root.
    pub fn dir_path(&self, d: u32) -> String {
        let mut parts = Vec::new();
        let mut cur = d;
        while let Some(p) = self.dirs[cur as usize].parent {
            parts.push(format!("{:08}", self.dirs[cur as usize].serial));
            cur = p;
        }
        parts.push(self.name.clone());
        parts.reverse();
        format!("/{}", parts.join("/"))
    }

    /// Name of entry `e` in its directory.
    pub fn file_name(&self, e: u32) -> String {
        format!("{:08}", self.files[e as usize].serial)
    }

    pub fn file_path(&self, e: u32) -> String {
        format!(
            "{}/{}",
            self.dir_path(self.files[e as usize].dir),
            self.file_name(e)
        )
    }

    /// Picks an entry of the wanted kind in rotation, skipping busy ones; marks it busy.
    pub fn pick(&mut self, want: Want) -> Pick {
        let (set, rotor) = match want {
            Want::Existing => (&self.exist, &mut self.ex_rotor),
            Want::Absent => (&self.absent, &mut self.ne_rotor),
        };
        let Some(found) = set.range(*rotor..).next().or(set.first()).copied() else {
            return Pick::Empty;
        };
        *rotor = found + 1;
        let mut e = found;
        loop {
            if !self.files[e as usize].busy {
                self.files[e as usize].busy = true;
                return Pick::Got(e);
            }
            e = set
                .range(e + 1..)
                .next()
                .or(set.first())
                .copied()
                .expect("non-empty");
            if e == found {
                return Pick::AllBusy;
            }
        }
    }

    pub fn set_exists(&mut self, e: u32, exists: bool) {
        self.files[e as usize].exists = exists;
        if exists {
            self.absent.remove(&e);
            self.exist.insert(e);
        } else {
            self.exist.remove(&e);
            self.absent.insert(e);
        }
    }

    /// Sum of the planned sizes.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    /// The order in which preallocation visits entries: filebench picks a uniformly random
    /// index and takes the first free entry at or after it (wrapping), to spread the initial
    /// files over the storage.
    pub fn prealloc_order(&self, rng: &mut SimRng) -> Vec<u32> {
        let n = self.files.len() as u32;
        let mut free: BTreeSet<u32> = (0..n).collect();
        let mut order = Vec::with_capacity(n as usize);
        while !free.is_empty() {
            let idx = rng.below(n as u64) as u32;
            let e = free
                .range(idx..)
                .next()
                .or(free.first())
                .copied()
                .expect("non-empty");
            free.remove(&e);
            order.push(e);
        }
        order
    }
}

struct Builder<'a> {
    fs: &'a mut Fileset,
    sizes: &'a [u64],
    meandepth: f64,
    meanwidth: f64,
    gamma: f64,
    rng: &'a mut SimRng,
}

impl Builder<'_> {
    fn draw(&mut self, mean: f64) -> f64 {
        if self.gamma > 0.0 {
            gamma_knuth(self.rng, self.gamma, mean / self.gamma)
        } else {
            mean
        }
    }

    /// filebench's `fileset_populate_subdir`.
    fn subdir(&mut self, parent: Option<u32>, serial: u32, depth: f64) {
        let depth = depth + 1.0;
        let me = self.fs.dirs.len() as u32;
        self.fs.dirs.push(DirNode {
            parent,
            serial,
            ino: 0,
        });
        let mut randepth = self.draw(self.meandepth).trunc();
        let mut ranwidth = self.draw(self.meanwidth);
        if randepth == 0.0 {
            randepth = 1.0;
        }
        if ranwidth == 0.0 {
            ranwidth = 1.0;
        }
        let isleaf = depth >= randepth;
        let mut i: u32 = 1;
        while (parent.is_none() || (i as f64) < ranwidth + 1.0)
            && self.fs.files.len() < self.sizes.len()
        {
            if parent.is_some() && isleaf {
                let idx = self.fs.files.len();
                self.fs.files.push(FileEntry {
                    dir: me,
                    serial: i,
                    size: self.sizes[idx],
                    exists: false,
                    busy: false,
                    writing: false,
                    open: 0,
                    ino: 0,
                    uid: 0,
                    committed: 0,
                    reserved: 0,
                });
            } else {
                self.subdir(Some(me), i, depth);
            }
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_holds_every_file_in_leaf_directories() {
        let sizes = vec![1u64; 10_000];
        let fs = Fileset::populate("bigfileset", &sizes, 20.0, 1.5, &mut SimRng::new(1));
        assert_eq!(fs.files.len(), 10_000);
        // Files never sit in the fileset's root directory; names are unique per directory.
        let mut seen = BTreeSet::new();
        for (i, f) in fs.files.iter().enumerate() {
            assert_ne!(f.dir, 0);
            assert!(seen.insert(fs.file_path(i as u32)));
        }
        // Parents come before their children.
        for (i, d) in fs.dirs.iter().enumerate() {
            if let Some(p) = d.parent {
                assert!((p as usize) < i);
            }
        }
        // About entries / meandirwidth leaf directories.
        let leaves: BTreeSet<u32> = fs.files.iter().map(|f| f.dir).collect();
        let per_leaf = 10_000.0 / leaves.len() as f64;
        assert!((8.0..40.0).contains(&per_leaf), "{per_leaf} files per leaf");
        assert!(fs.file_path(0).starts_with("/bigfileset/00000001/"));
    }

    #[test]
    fn very_wide_directories_make_one_flat_directory() {
        // varmail: meandirwidth 1,000,000.
        let sizes = vec![1u64; 1000];
        let fs = Fileset::populate("bigfileset", &sizes, 1e6, 1.5, &mut SimRng::new(3));
        let leaves: BTreeSet<u32> = fs.files.iter().map(|f| f.dir).collect();
        assert!(leaves.len() <= 2, "{} leaf dirs", leaves.len());
    }

    #[test]
    fn picks_rotate_and_skip_busy_entries() {
        let sizes = vec![1u64; 6];
        let mut fs = Fileset::populate("s", &sizes, 20.0, 0.0, &mut SimRng::new(1));
        assert_eq!(fs.pick(Want::Existing), Pick::Empty);
        for e in [1, 2, 4] {
            fs.set_exists(e, true);
        }
        assert_eq!(fs.pick(Want::Existing), Pick::Got(1));
        assert_eq!(fs.pick(Want::Existing), Pick::Got(2));
        assert_eq!(fs.pick(Want::Existing), Pick::Got(4));
        // All three busy now.
        assert_eq!(fs.pick(Want::Existing), Pick::AllBusy);
        fs.files[2].busy = false;
        assert_eq!(fs.pick(Want::Existing), Pick::Got(2));
        assert_eq!(fs.pick(Want::Absent), Pick::Got(0));
        assert_eq!(fs.pick(Want::Absent), Pick::Got(3));
        fs.files[0].busy = false;
        assert_eq!(fs.pick(Want::Absent), Pick::Got(5));
        assert_eq!(fs.pick(Want::Absent), Pick::Got(0));
    }

    #[test]
    fn prealloc_order_is_a_permutation() {
        let sizes = vec![1u64; 500];
        let fs = Fileset::populate("s", &sizes, 20.0, 1.5, &mut SimRng::new(1));
        let mut o = fs.prealloc_order(&mut SimRng::new(2));
        assert_ne!(o[..10], (0..10).collect::<Vec<_>>()[..]);
        o.sort_unstable();
        assert_eq!(o, (0..500).collect::<Vec<_>>());
    }
}
