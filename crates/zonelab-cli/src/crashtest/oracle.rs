//! The crash oracle of the scripted mix: what a file system must show after a power cut at
//! virtual time `t`, given the namespace after every operation and what fsync, sync and
//! checkpoints made durable when.
//!
//! The mix runs one operation at a time, so the namespace has a well-defined state after each
//! operation ([`History::states`]). Guarantees say which part of which state became durable
//! at which instant ([`Guarantee`]): a completed `sync` the whole state;
//! a checkpoint every path's entry but no file contents (F2FS writes no data pages of
//! regular files at a checkpoint); a completed `fsync` of a file its contents and size, every name linking to it and the
//! directories above them (F2FS's fsync makes the inode's directory entry durable, by
//! roll-forward or by a checkpoint); a completed `fsync` of a directory its entries (POSIX:
//! the directory's own contents, i.e. which names it holds).
//!
//! At a cut at `t`, each fact (a path's entry, a file's contents) has a baseline: the newest
//! state a guarantee effective by `t` made it durable in. Operations after the baseline that
//! started by `t` may or may not have reached the media, so the fact must read back as one
//! of its versions from the baseline to the last state begun by `t`: exactly, when all those
//! versions agree (the fact was made durable and not changed since — the CrashMonkey check);
//! otherwise as one of them (a name present in none of them, or absent in all, is a failure;
//! a file's size must be one it had). On top, every recovered file's link count must equal
//! the names that link to it.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use zonelab_sim::Nanos;

/// A file of the mix, by creation (hard links share it).
pub type FileId = u32;

/// What a path names in a state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File(FileId),
}

/// The namespace after an operation. Paths are absolute ("/d0/f1"); the root is implicit.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub entries: BTreeMap<String, Entry>,
    /// Contents of every file some path links to (shared between states until changed).
    pub files: BTreeMap<FileId, Rc<Vec<u8>>>,
}

impl State {
    /// Paths linking to `id`.
    pub fn names_of(&self, id: FileId) -> impl Iterator<Item = &String> {
        self.entries
            .iter()
            .filter(move |(_, e)| **e == Entry::File(id))
            .map(|(p, _)| p)
    }
}

/// The parent directory of a path ("/" for a top-level name).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Whether `dir` is `path`'s parent, grandparent, ... (the root excluded, it always exists).
fn is_ancestor(dir: &str, path: &str) -> bool {
    dir != "/"
        && path.len() > dir.len()
        && path.starts_with(dir)
        && path[dir.len()..].starts_with('/')
}

/// What a guarantee covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything (sync: writeback, then a checkpoint).
    All,
    /// Every path's entry, not file contents (a checkpoint: as in F2FS it writes directory
    /// blocks and nodes, not the data pages of regular files).
    Names,
    /// A file's contents, the names linking to it and the directories above them (fsync).
    File(FileId),
    /// A directory's entries, present and absent, and the directories above it (fsync of a
    /// directory).
    DirEntries(String),
}

/// From `at` on, what `scope` covers is durable as in `states[state]`.
#[derive(Clone, Debug)]
pub struct Guarantee {
    pub at: Nanos,
    pub state: usize,
    pub scope: Scope,
}

/// One operation of the mix: `states[i + 1]` is the namespace after `ops[i]`.
#[derive(Clone, Debug)]
pub struct OpRecord {
    pub desc: String,
    pub start: Nanos,
    pub end: Nanos,
}

/// Everything the mix did.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// `states[0]` is durable before the first operation.
    pub states: Vec<State>,
    pub ops: Vec<OpRecord>,
    pub guarantees: Vec<Guarantee>,
}

/// What a path shows after the cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    Dir,
    File(u64),
}

/// A recovered file: link count as its inode says, and contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundFile {
    pub nlink: u32,
    pub data: Vec<u8>,
}

/// The namespace read back after the cut (every path under the root, with inode numbers).
#[derive(Clone, Debug, Default)]
pub struct Recovered {
    pub entries: BTreeMap<String, Found>,
    pub files: BTreeMap<u64, FoundFile>,
}

impl Guarantee {
    fn covers_entry(&self, states: &[State], path: &str) -> bool {
        match &self.scope {
            Scope::All | Scope::Names => true,
            Scope::File(id) => states[self.state]
                .names_of(*id)
                .any(|n| n == path || is_ancestor(path, n)),
            Scope::DirEntries(d) => parent(path) == d || d == path || is_ancestor(path, d),
        }
    }

    fn covers_contents(&self, id: FileId) -> bool {
        match &self.scope {
            Scope::All => true,
            Scope::File(f) => *f == id,
            Scope::Names | Scope::DirEntries(_) => false,
        }
    }
}

fn show(e: Option<&Entry>) -> String {
    match e {
        None => "absent".into(),
        Some(Entry::Dir) => "a directory".into(),
        Some(Entry::File(id)) => format!("file #{id}"),
    }
}

fn show_found(f: Option<&Found>) -> String {
    match f {
        None => "absent".into(),
        Some(Found::Dir) => "a directory".into(),
        Some(Found::File(ino)) => format!("a file (inode {ino})"),
    }
}

impl History {
    /// Operations begun by `t`: states `0 ..= begun(t)` may have reached the media.
    pub fn begun(&self, t: Nanos) -> usize {
        self.ops.iter().take_while(|o| o.start <= t).count()
    }

    /// Problems of `rec`, the namespace read back after a cut at `t` (empty: as required).
    pub fn check(&self, t: Nanos, rec: &Recovered) -> Vec<String> {
        let k = self.begun(t);
        let effective: Vec<&Guarantee> = self.guarantees.iter().filter(|g| g.at <= t).collect();
        let mut problems = Vec::new();
        let mut paths: BTreeSet<&str> = rec.entries.keys().map(String::as_str).collect();
        for s in &self.states[..=k] {
            paths.extend(s.entries.keys().map(String::as_str));
        }
        // File id -> recovered inode, for files whose name is settled.
        let mut inode_of: BTreeMap<FileId, (u64, &str)> = BTreeMap::new();
        let mut file_of: BTreeMap<u64, (FileId, &str)> = BTreeMap::new();
        // Files under paths not settled, whose contents are checked all the same.
        let mut loose: Vec<(FileId, u64, &str)> = Vec::new();
        for path in paths {
            let base = effective
                .iter()
                .filter(|g| g.covers_entry(&self.states, path))
                .map(|g| g.state)
                .max()
                .unwrap_or(0);
            let versions: Vec<Option<&Entry>> = self.states[base..=k]
                .iter()
                .map(|s| s.entries.get(path))
                .collect();
            let found = rec.entries.get(path);
            let settled = versions.iter().all(|v| *v == versions[0]);
            if settled {
                let ok = match (versions[0], found) {
                    (None, None) | (Some(Entry::Dir), Some(Found::Dir)) => true,
                    (Some(Entry::File(id)), Some(Found::File(ino))) => {
                        if let Some((other, p)) = inode_of.insert(*id, (*ino, path))
                            && other != *ino
                        {
                            problems.push(format!(
                                "{path} and {p} link to one file (#{id}), but to inodes {ino} and {other} after the cut"
                            ));
                        }
                        if let Some((other, p)) = file_of.insert(*ino, (*id, path))
                            && other != *id
                        {
                            problems.push(format!(
                                "{path} (file #{id}) and {p} (file #{other}) are one inode ({ino}) after the cut"
                            ));
                        }
                        true
                    }
                    _ => false,
                };
                if !ok {
                    problems.push(format!(
                        "{path}: {} after the cut, but durably {} since state {base} ({})",
                        show_found(found),
                        show(versions[0]),
                        self.state_name(base),
                    ));
                }
            } else {
                // A path that named one file whenever it named any: that file's contents apply.
                let ids: BTreeSet<FileId> = versions
                    .iter()
                    .filter_map(|v| match v {
                        Some(Entry::File(id)) => Some(*id),
                        _ => None,
                    })
                    .collect();
                if let (1, Some(Found::File(ino))) = (ids.len(), found) {
                    let id = *ids.first().expect("one id");
                    loose.push((id, *ino, path));
                }
                let kind_ok = versions.iter().any(|v| {
                    matches!(
                        (v, found),
                        (None, None)
                            | (Some(Entry::Dir), Some(Found::Dir))
                            | (Some(Entry::File(_)), Some(Found::File(_)))
                    )
                });
                if !kind_ok {
                    let was: BTreeSet<String> = versions.iter().map(|v| show(*v)).collect();
                    problems.push(format!(
                        "{path}: {} after the cut, but it was only ever {} since state {base} ({})",
                        show_found(found),
                        was.into_iter().collect::<Vec<_>>().join(" or "),
                        self.state_name(base),
                    ));
                }
            }
        }
        let contents: Vec<(FileId, u64, &str)> = inode_of
            .iter()
            .map(|(id, (ino, path))| (*id, *ino, *path))
            .chain(loose)
            .collect();
        for (id, ino, path) in contents {
            let (id, ino) = (&id, &ino);
            let Some(f) = rec.files.get(ino) else {
                problems.push(format!("{path}: inode {ino} was listed but not read"));
                continue;
            };
            let base = effective
                .iter()
                .filter(|g| g.covers_contents(*id))
                .map(|g| g.state)
                .max()
                .unwrap_or(0);
            let versions: Vec<&Rc<Vec<u8>>> = self.states[base..=k]
                .iter()
                .filter_map(|s| s.files.get(id))
                .collect();
            let Some(first) = versions.first() else {
                continue;
            };
            if versions.iter().all(|v| v == first) {
                if f.data != ***first {
                    let at = first
                        .iter()
                        .zip(&f.data)
                        .position(|(a, b)| a != b)
                        .unwrap_or(first.len().min(f.data.len()));
                    problems.push(format!(
                        "{path}: {} bytes after the cut, durably {} bytes since state {base} ({}); first difference at byte {at}",
                        f.data.len(),
                        first.len(),
                        self.state_name(base),
                    ));
                }
            } else if !versions.iter().any(|v| v.len() == f.data.len()) {
                let sizes: BTreeSet<usize> = versions.iter().map(|v| v.len()).collect();
                problems.push(format!(
                    "{path}: size {} after the cut, but it only had sizes {sizes:?} since state {base} ({})",
                    f.data.len(),
                    self.state_name(base),
                ));
            }
        }
        // Link counts against the names found.
        let mut names: BTreeMap<u64, u32> = BTreeMap::new();
        for e in rec.entries.values() {
            if let Found::File(ino) = e {
                *names.entry(*ino).or_default() += 1;
            }
        }
        for (ino, f) in &rec.files {
            let n = names.get(ino).copied().unwrap_or(0);
            if f.nlink != n {
                problems.push(format!(
                    "inode {ino}: link count {} but {n} names link to it",
                    f.nlink
                ));
            }
        }
        problems
    }

    /// "initial" or the operation that produced state `i`.
    pub fn state_name(&self, i: usize) -> String {
        if i == 0 {
            "the initial sync".into()
        } else {
            format!("after op {}: {}", i, self.ops[i - 1].desc)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(entries: &[(&str, Entry)], files: &[(FileId, &[u8])]) -> State {
        State {
            entries: entries.iter().map(|(p, e)| (p.to_string(), *e)).collect(),
            files: files
                .iter()
                .map(|(id, d)| (*id, Rc::new(d.to_vec())))
                .collect(),
        }
    }

    fn op(desc: &str, start: u64, end: u64) -> OpRecord {
        OpRecord {
            desc: desc.into(),
            start: Nanos(start),
            end: Nanos(end),
        }
    }

    fn found(entries: &[(&str, Found)], files: &[(u64, u32, &[u8])]) -> Recovered {
        Recovered {
            entries: entries.iter().map(|(p, f)| (p.to_string(), *f)).collect(),
            files: files
                .iter()
                .map(|(ino, nlink, d)| {
                    (
                        *ino,
                        FoundFile {
                            nlink: *nlink,
                            data: d.to_vec(),
                        },
                    )
                })
                .collect(),
        }
    }

    /// create /a; write "xy"; fsync /a (done at 30); write "xyz" (starts at 40).
    fn fsynced_file() -> History {
        let d = Entry::Dir;
        let a = Entry::File(1);
        History {
            states: vec![
                state(&[("/d", d)], &[]),
                state(&[("/d", d), ("/d/a", a)], &[(1, b"")]),
                state(&[("/d", d), ("/d/a", a)], &[(1, b"xy")]),
                state(&[("/d", d), ("/d/a", a)], &[(1, b"xy")]),
                state(&[("/d", d), ("/d/a", a)], &[(1, b"xyz")]),
            ],
            ops: vec![
                op("create /d/a", 0, 10),
                op("write /d/a", 10, 20),
                op("fsync /d/a", 20, 30),
                op("write /d/a", 40, 50),
            ],
            guarantees: vec![Guarantee {
                at: Nanos(30),
                state: 3,
                scope: Scope::File(1),
            }],
        }
    }

    #[test]
    fn before_the_fsync_completes_anything_begun_may_show() {
        let h = fsynced_file();
        // Cut at 25: the fsync had begun; /d/a may be absent or hold any of its sizes.
        assert!(
            h.check(Nanos(25), &found(&[("/d", Found::Dir)], &[]))
                .is_empty()
        );
        let r = found(
            &[("/d", Found::Dir), ("/d/a", Found::File(5))],
            &[(5, 1, b"xy")],
        );
        assert!(h.check(Nanos(25), &r).is_empty());
        // A size the file never had is a failure.
        let r = found(
            &[("/d", Found::Dir), ("/d/a", Found::File(5))],
            &[(5, 1, b"q")],
        );
        let p = h.check(Nanos(25), &r);
        assert!(p.len() == 1 && p[0].contains("size 1"), "{p:?}");
        // The directory was durable from the start.
        let p = h.check(Nanos(25), &found(&[], &[]));
        assert!(p.len() == 1 && p[0].starts_with("/d: absent"), "{p:?}");
    }

    #[test]
    fn after_the_fsync_the_file_is_exact_until_changed_again() {
        let h = fsynced_file();
        let good = found(
            &[("/d", Found::Dir), ("/d/a", Found::File(5))],
            &[(5, 1, b"xy")],
        );
        assert!(h.check(Nanos(35), &good).is_empty());
        let p = h.check(Nanos(35), &found(&[("/d", Found::Dir)], &[]));
        assert!(p.len() == 1 && p[0].contains("durably file #1"), "{p:?}");
        let stale = found(
            &[("/d", Found::Dir), ("/d/a", Found::File(5))],
            &[(5, 1, b"xq")],
        );
        let p = h.check(Nanos(35), &stale);
        assert!(
            p.len() == 1 && p[0].contains("first difference at byte 1"),
            "{p:?}"
        );
        // The later write began at 40: "xy" or "xyz", nothing else.
        let newer = found(
            &[("/d", Found::Dir), ("/d/a", Found::File(5))],
            &[(5, 1, b"xyz")],
        );
        assert!(h.check(Nanos(45), &newer).is_empty());
        assert!(!h.check(Nanos(35), &newer).is_empty());
        // A name that never existed.
        let extra = found(
            &[
                ("/d", Found::Dir),
                ("/d/a", Found::File(5)),
                ("/d/zz", Found::Dir),
            ],
            &[(5, 1, b"xy")],
        );
        let p = h.check(Nanos(35), &extra);
        assert!(p.len() == 1 && p[0].starts_with("/d/zz"), "{p:?}");
    }

    #[test]
    fn link_counts_and_identities_are_checked() {
        let d = Entry::Dir;
        let h = History {
            states: vec![state(
                &[
                    ("/d", d),
                    ("/d/a", Entry::File(1)),
                    ("/d/b", Entry::File(1)),
                    ("/c", Entry::File(2)),
                ],
                &[(1, b"1"), (2, b"2")],
            )],
            ops: vec![],
            guarantees: vec![],
        };
        let good = found(
            &[
                ("/d", Found::Dir),
                ("/d/a", Found::File(7)),
                ("/d/b", Found::File(7)),
                ("/c", Found::File(8)),
            ],
            &[(7, 2, b"1"), (8, 1, b"2")],
        );
        assert!(h.check(Nanos(0), &good).is_empty());
        let mut bad = good.clone();
        bad.files.get_mut(&7).unwrap().nlink = 1;
        let p = h.check(Nanos(0), &bad);
        assert!(p.len() == 1 && p[0].contains("link count 1 but 2"), "{p:?}");
        let split = found(
            &[
                ("/d", Found::Dir),
                ("/d/a", Found::File(7)),
                ("/d/b", Found::File(9)),
                ("/c", Found::File(8)),
            ],
            &[(7, 1, b"1"), (8, 1, b"2"), (9, 1, b"1")],
        );
        let p = h.check(Nanos(0), &split);
        assert!(p.iter().any(|m| m.contains("link to one file")), "{p:?}");
    }

    #[test]
    fn directory_fsync_settles_absent_names_too() {
        let d = Entry::Dir;
        let h = History {
            states: vec![
                state(
                    &[("/d", d), ("/d/a", Entry::File(1)), ("/e", d)],
                    &[(1, b"")],
                ),
                state(&[("/d", d), ("/e", d)], &[]),
                state(&[("/d", d), ("/e", d)], &[]),
                state(
                    &[("/d", d), ("/e", d), ("/e/b", Entry::File(2))],
                    &[(2, b"")],
                ),
            ],
            ops: vec![
                op("unlink /d/a", 0, 10),
                op("fsync /d", 10, 20),
                op("create /e/b", 20, 30),
            ],
            guarantees: vec![Guarantee {
                at: Nanos(20),
                state: 2,
                scope: Scope::DirEntries("/d".into()),
            }],
        };
        let back = found(
            &[
                ("/d", Found::Dir),
                ("/d/a", Found::File(3)),
                ("/e", Found::Dir),
            ],
            &[(3, 1, b"")],
        );
        assert!(h.check(Nanos(15), &back).is_empty());
        let p = h.check(Nanos(25), &back);
        assert!(p.len() == 1 && p[0].starts_with("/d/a: a file"), "{p:?}");
        // /e/b was never made durable: either way is fine.
        let with_b = found(
            &[
                ("/d", Found::Dir),
                ("/e", Found::Dir),
                ("/e/b", Found::File(4)),
            ],
            &[(4, 1, b"")],
        );
        assert!(h.check(Nanos(35), &with_b).is_empty());
        assert!(
            h.check(
                Nanos(35),
                &found(&[("/d", Found::Dir), ("/e", Found::Dir)], &[])
            )
            .is_empty()
        );
    }

    #[test]
    fn parents_of_paths() {
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/d/a"), "/d");
        assert!(is_ancestor("/d", "/d/a"));
        assert!(!is_ancestor("/d", "/dd/a"));
        assert!(!is_ancestor("/", "/d"));
    }
}
