//! The scripted mix of `zonelab crashtest --workload mix`: one simulated thread doing seeded
//! random create, write, truncate, rename (also over an existing file), link, unlink, mkdir,
//! rmdir, fsync of files and directories, sync and idle time on a small tree, recording the
//! namespace after every operation and what each fsync, sync and checkpoint made durable
//! ([`History`], checked by [`super::oracle`]).

use super::oracle::{Entry, FileId, Guarantee, History, OpRecord, Scope, State, parent};
use std::collections::BTreeMap;
use std::rc::Rc;
use zonelab_device::OwnedData;
use zonelab_lfs::fs::Fs;
use zonelab_lfs::{FileSystem, FsError, Ino, ROOT_INO, SetAttr};
use zonelab_sim::{Nanos, SimRng};

/// Directories of the tree: two that always exist, one made and removed by the mix.
const FIXED_DIRS: [&str; 2] = ["/d0", "/d1"];
const LOOSE_DIR: &str = "/d2";
/// File names per directory.
const NAMES: u64 = 5;
/// Largest file the mix writes.
const MAX_FILE: u64 = 48 * 1024;

/// The mix's live view: the state, and the inode behind every path.
struct Live {
    state: State,
    inos: BTreeMap<String, Ino>,
    next_id: FileId,
}

fn err(what: &str, e: FsError) -> anyhow::Error {
    anyhow::anyhow!("mix: {what} failed: {e}")
}

impl Live {
    fn ino(&self, path: &str) -> Ino {
        if path == "/" {
            ROOT_INO
        } else {
            self.inos[path]
        }
    }

    fn dirs(&self) -> Vec<String> {
        let mut v = vec!["/".to_string()];
        v.extend(
            self.state
                .entries
                .iter()
                .filter(|(_, e)| **e == Entry::Dir)
                .map(|(p, _)| p.clone()),
        );
        v
    }

    fn files(&self) -> Vec<(String, FileId)> {
        self.state
            .entries
            .iter()
            .filter_map(|(p, e)| match e {
                Entry::File(id) => Some((p.clone(), *id)),
                Entry::Dir => None,
            })
            .collect()
    }

    /// A path in an existing directory (maybe taken).
    fn any_path(&self, rng: &mut SimRng) -> String {
        let dirs = self.dirs();
        let d = &dirs[rng.below(dirs.len() as u64) as usize];
        let name = format!("f{}", rng.below(NAMES));
        if d == "/" {
            format!("/{name}")
        } else {
            format!("{d}/{name}")
        }
    }

    fn free_path(&self, rng: &mut SimRng) -> Option<String> {
        (0..8)
            .map(|_| self.any_path(rng))
            .find(|p| !self.state.entries.contains_key(p))
    }

    fn pick_file(&self, rng: &mut SimRng) -> Option<(String, FileId)> {
        let f = self.files();
        (!f.is_empty()).then(|| f[rng.below(f.len() as u64) as usize].clone())
    }

    /// Drops the contents of files no path links to any more.
    fn gc(&mut self) {
        let live: std::collections::BTreeSet<FileId> = self
            .state
            .entries
            .values()
            .filter_map(|e| match e {
                Entry::File(id) => Some(*id),
                Entry::Dir => None,
            })
            .collect();
        self.state.files.retain(|id, _| live.contains(id));
    }
}

fn split(path: &str) -> (&str, &str) {
    let i = path.rfind('/').expect("absolute path");
    (parent(path), &path[i + 1..])
}

/// The mix on a file system: its live view and random stream.
pub struct Mix {
    fs: Rc<Fs>,
    live: Live,
    rng: SimRng,
}

impl Mix {
    /// Makes the tree's fixed directories on `fs` (freshly made, empty) and syncs: the state
    /// the history starts from, durable before anything is recorded.
    pub async fn prepare(fs: Rc<Fs>, seed: u64) -> anyhow::Result<Mix> {
        let mut live = Live {
            state: State::default(),
            inos: BTreeMap::new(),
            next_id: 1,
        };
        for d in FIXED_DIRS {
            let a = fs
                .mkdir(ROOT_INO, &d[1..], 0o755, 0, 0)
                .await
                .map_err(|e| err("mkdir", e))?;
            live.inos.insert(d.to_string(), a.ino);
            live.state.entries.insert(d.to_string(), Entry::Dir);
        }
        fs.sync().await.map_err(|e| err("sync", e))?;
        Ok(Mix {
            fs,
            live,
            rng: SimRng::stream(seed, 0x6d6978),
        })
    }

    /// Runs `ops` operations and returns what they did.
    pub async fn run(self, ops: u32) -> anyhow::Result<History> {
        let Mix {
            fs,
            mut live,
            mut rng,
        } = self;
        let sim = fs.sim().clone();
        let mut h = History {
            states: vec![live.state.clone()],
            ..History::default()
        };
        for _ in 0..ops {
            let start = sim.now();
            let cps = fs.stats().checkpoints;
            let Some((desc, durable)) = step(&fs, &mut live, &mut rng).await? else {
                continue;
            };
            live.gc();
            let end = sim.now();
            h.ops.push(OpRecord { desc, start, end });
            h.states.push(live.state.clone());
            let i = h.states.len() - 1;
            if let Some(scope) = durable {
                h.guarantees.push(Guarantee {
                    at: end,
                    state: i,
                    scope,
                });
            }
            if fs.stats().checkpoints > cps {
                // A checkpoint completed during the operation: it holds the state before or after
                // it (a checkpoint excludes every other call while it runs).
                h.guarantees.push(Guarantee {
                    at: end,
                    state: i - 1,
                    scope: Scope::Names,
                });
            }
            // Think time; now and then a longer pause for background writeback and checkpoints.
            let pause = if rng.below(25) == 0 {
                Nanos::from_ms(1 + rng.below(400))
            } else {
                Nanos(rng.below(200_000))
            };
            let cps = fs.stats().checkpoints;
            sim.sleep(pause).await;
            if fs.stats().checkpoints > cps {
                h.guarantees.push(Guarantee {
                    at: sim.now(),
                    state: i,
                    scope: Scope::Names,
                });
            }
        }
        Ok(h)
    }
}

/// One operation; `None` when the drawn operation has nothing to act on. Returns its
/// description and what it makes durable.
async fn step(
    fs: &Fs,
    live: &mut Live,
    rng: &mut SimRng,
) -> anyhow::Result<Option<(String, Option<Scope>)>> {
    let roll = rng.below(100);
    Ok(match roll {
        0..=14 => {
            let Some(p) = live.free_path(rng) else {
                return Ok(None);
            };
            let (dir, name) = split(&p);
            let a = fs
                .create(live.ino(dir), name, 0o644, 0, 0)
                .await
                .map_err(|e| err(&format!("create {p}"), e))?;
            let id = live.next_id;
            live.next_id += 1;
            live.inos.insert(p.clone(), a.ino);
            live.state.entries.insert(p.clone(), Entry::File(id));
            live.state.files.insert(id, Rc::new(Vec::new()));
            Some((format!("create {p} (inode {})", a.ino), None))
        }
        15..=36 => {
            let Some((p, id)) = live.pick_file(rng) else {
                return Ok(None);
            };
            let size = live.state.files[&id].len() as u64;
            let off = rng.below((size + 4096).min(MAX_FILE - 1));
            let len = 1 + rng.below(16 * 1024).min(MAX_FILE - off - 1);
            let fill = rng.next_u64();
            let data: Vec<u8> = (0..len)
                .map(|i| (fill.rotate_left((i % 64) as u32) as u8) ^ (i / 64) as u8)
                .collect();
            fs.write(live.ino(&p), off, OwnedData::Bytes(data.clone()))
                .await
                .map_err(|e| err(&format!("write {p}"), e))?;
            let c = Rc::make_mut(live.state.files.get_mut(&id).expect("file of a path"));
            let end = (off + len) as usize;
            if c.len() < end {
                c.resize(end, 0);
            }
            c[off as usize..end].copy_from_slice(&data);
            Some((format!("write {p} {off}+{len}"), None))
        }
        37..=43 => {
            let Some((p, id)) = live.pick_file(rng) else {
                return Ok(None);
            };
            let size = live.state.files[&id].len() as u64;
            let to = rng.below(size + 8192);
            fs.setattr(
                live.ino(&p),
                SetAttr {
                    size: Some(to),
                    ..SetAttr::default()
                },
            )
            .await
            .map_err(|e| err(&format!("truncate {p}"), e))?;
            Rc::make_mut(live.state.files.get_mut(&id).expect("file")).resize(to as usize, 0);
            Some((format!("truncate {p} {to}"), None))
        }
        44..=53 => {
            let Some((src, id)) = live.pick_file(rng) else {
                return Ok(None);
            };
            let dst = live.any_path(rng);
            // Not onto a directory, nor onto another link of the same file (a no-op in POSIX).
            if matches!(live.state.entries.get(&dst), Some(Entry::Dir))
                || live.state.entries.get(&dst) == Some(&Entry::File(id))
            {
                return Ok(None);
            }
            let ((sd, sn), (dd, dn)) = (split(&src), split(&dst));
            let replaced = match live.inos.get(&dst) {
                Some(i) => format!(", replacing inode {i}"),
                None => String::new(),
            };
            fs.rename(live.ino(sd), sn, live.ino(dd), dn)
                .await
                .map_err(|e| err(&format!("rename {src} {dst}"), e))?;
            let ino = live.inos.remove(&src).expect("source");
            live.state.entries.remove(&src);
            live.inos.insert(dst.clone(), ino);
            live.state.entries.insert(dst.clone(), Entry::File(id));
            Some((format!("rename {src} {dst} (inode {ino}{replaced})"), None))
        }
        54..=59 => {
            let Some((src, id)) = live.pick_file(rng) else {
                return Ok(None);
            };
            let Some(dst) = live.free_path(rng) else {
                return Ok(None);
            };
            let (dd, dn) = split(&dst);
            let ino = live.ino(&src);
            fs.link(ino, live.ino(dd), dn)
                .await
                .map_err(|e| err(&format!("link {src} {dst}"), e))?;
            live.inos.insert(dst.clone(), ino);
            live.state.entries.insert(dst.clone(), Entry::File(id));
            Some((format!("link {src} {dst} (inode {ino})"), None))
        }
        60..=67 => {
            let Some((p, _)) = live.pick_file(rng) else {
                return Ok(None);
            };
            let (d, n) = split(&p);
            fs.unlink(live.ino(d), n)
                .await
                .map_err(|e| err(&format!("unlink {p}"), e))?;
            live.inos.remove(&p);
            live.state.entries.remove(&p);
            Some((format!("unlink {p}"), None))
        }
        68..=71 => {
            if !live.state.entries.contains_key(LOOSE_DIR) {
                let a = fs
                    .mkdir(ROOT_INO, &LOOSE_DIR[1..], 0o755, 0, 0)
                    .await
                    .map_err(|e| err("mkdir", e))?;
                live.inos.insert(LOOSE_DIR.into(), a.ino);
                live.state.entries.insert(LOOSE_DIR.into(), Entry::Dir);
                Some((format!("mkdir {LOOSE_DIR}"), None))
            } else if live.state.entries.keys().any(|p| parent(p) == LOOSE_DIR) {
                return Ok(None);
            } else {
                fs.rmdir(ROOT_INO, &LOOSE_DIR[1..])
                    .await
                    .map_err(|e| err("rmdir", e))?;
                live.inos.remove(LOOSE_DIR);
                live.state.entries.remove(LOOSE_DIR);
                Some((format!("rmdir {LOOSE_DIR}"), None))
            }
        }
        72..=90 => {
            let Some((p, id)) = live.pick_file(rng) else {
                return Ok(None);
            };
            fs.fsync(live.ino(&p), false)
                .await
                .map_err(|e| err(&format!("fsync {p}"), e))?;
            Some((
                format!("fsync {p} (inode {})", live.ino(&p)),
                Some(Scope::File(id)),
            ))
        }
        91..=96 => {
            let dirs = live.dirs();
            let d = dirs[rng.below(dirs.len() as u64) as usize].clone();
            fs.fsync(live.ino(&d), false)
                .await
                .map_err(|e| err(&format!("fsync {d}"), e))?;
            Some((format!("fsync {d}"), Some(Scope::DirEntries(d))))
        }
        _ => {
            fs.sync().await.map_err(|e| err("sync", e))?;
            Some(("sync".into(), Some(Scope::All)))
        }
    })
}
