//! The page cache: file data pages and node pages under one memory limit, evicted least
//! recently used first (clean ones only), with the dirty sets writeback works from.

use crate::ondisk::{BLOCK, Nid, Node};
use crate::vfs::Ino;
use std::collections::{BTreeMap, BTreeSet};
use zonelab_device::payload::fingerprint;

/// A data page: bytes (full payload, and directory and symlink blocks always), or the
/// fingerprint of the block (fingerprint payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageData {
    Bytes(Box<[u8]>),
    Fp(u64),
}

impl PageData {
    pub fn zero(fingerprint_mode: bool) -> PageData {
        if fingerprint_mode {
            PageData::Fp(fingerprint(&[0u8; BLOCK]))
        } else {
            PageData::Bytes(vec![0u8; BLOCK].into())
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Page(Ino, u64),
    Node(Nid),
}

struct Page {
    data: PageData,
    dirty: bool,
    /// Dirty with no block on the device yet (holds a space reservation).
    fresh: bool,
    tick: u64,
}

struct CachedNode {
    node: Node,
    dirty: bool,
    tick: u64,
}

pub struct Cache {
    limit: usize,
    pages: BTreeMap<(Ino, u64), Page>,
    nodes: BTreeMap<Nid, CachedNode>,
    /// Clean pages and nodes by last use; dirty ones cannot be evicted and stay off it, so
    /// eviction never walks past them.
    lru: BTreeMap<u64, Key>,
    tick: u64,
    /// Dirty data pages by inode, and when the inode first became dirty.
    dirty: BTreeMap<Ino, BTreeSet<u64>>,
    dirty_since: BTreeMap<(u64, Ino), ()>,
    inode_dirty_tick: BTreeMap<Ino, u64>,
    ndirty: usize,
    nfresh: u64,
    dirty_nodes: BTreeSet<Nid>,
}

impl Cache {
    pub fn new(limit_pages: u64) -> Cache {
        Cache {
            limit: limit_pages as usize,
            pages: BTreeMap::new(),
            nodes: BTreeMap::new(),
            lru: BTreeMap::new(),
            tick: 0,
            dirty: BTreeMap::new(),
            dirty_since: BTreeMap::new(),
            inode_dirty_tick: BTreeMap::new(),
            ndirty: 0,
            nfresh: 0,
            dirty_nodes: BTreeSet::new(),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
    pub fn dirty_pages(&self) -> usize {
        self.ndirty + self.dirty_nodes.len()
    }
    /// Dirty pages without a device block yet.
    pub fn new_pages(&self) -> u64 {
        self.nfresh
    }
    pub fn resident(&self) -> usize {
        self.pages.len() + self.nodes.len()
    }

    /// A new use tick for an entry last used at `old`; a clean entry moves to the back of the
    /// eviction order.
    fn bump(&mut self, old: u64, key: Key, clean: bool) -> u64 {
        self.lru.remove(&old);
        self.tick += 1;
        if clean {
            self.lru.insert(self.tick, key);
        }
        self.tick
    }

    // ---- data pages ----

    /// A copy of a cached page, marking it recently used.
    pub fn page(&mut self, ino: Ino, idx: u64) -> Option<PageData> {
        let p = self.pages.get(&(ino, idx))?;
        let (old, clean) = (p.tick, !p.dirty);
        let t = self.bump(old, Key::Page(ino, idx), clean);
        let p = self.pages.get_mut(&(ino, idx)).expect("present");
        p.tick = t;
        Some(p.data.clone())
    }

    pub fn has_page(&self, ino: Ino, idx: u64) -> bool {
        self.pages.contains_key(&(ino, idx))
    }

    pub fn is_dirty(&self, ino: Ino, idx: u64) -> bool {
        self.pages.get(&(ino, idx)).is_some_and(|p| p.dirty)
    }

    fn set_dirty(&mut self, ino: Ino, idx: u64) {
        let set = self.dirty.entry(ino).or_default();
        if set.is_empty() {
            self.tick += 1;
            self.dirty_since.insert((self.tick, ino), ());
            self.inode_dirty_tick.insert(ino, self.tick);
        }
        if set.insert(idx) {
            self.ndirty += 1;
        }
    }

    fn clear_dirty(&mut self, ino: Ino, idx: u64) {
        if let Some(set) = self.dirty.get_mut(&ino)
            && set.remove(&idx)
        {
            self.ndirty -= 1;
            if set.is_empty() {
                self.dirty.remove(&ino);
                if let Some(t) = self.inode_dirty_tick.remove(&ino) {
                    self.dirty_since.remove(&(t, ino));
                }
            }
        }
    }

    /// Inserts or replaces a page. `fresh`: it has no device block (a new block of the file).
    /// Returns whether it now holds a new space reservation.
    pub fn put_page_with(
        &mut self,
        ino: Ino,
        idx: u64,
        data: PageData,
        dirty: bool,
        fresh: bool,
    ) -> bool {
        let old_tick = self.pages.get(&(ino, idx)).map(|p| p.tick).unwrap_or(0);
        let was_fresh = self.pages.get(&(ino, idx)).is_some_and(|p| p.fresh);
        let was_dirty = self.pages.get(&(ino, idx)).is_some_and(|p| p.dirty);
        let t = self.bump(old_tick, Key::Page(ino, idx), !(dirty || was_dirty));
        let fresh = dirty && (fresh || was_fresh);
        self.pages.insert(
            (ino, idx),
            Page {
                data,
                dirty: dirty || was_dirty,
                fresh,
                tick: t,
            },
        );
        if dirty {
            self.set_dirty(ino, idx);
        }
        let added = fresh && !was_fresh;
        if added {
            self.nfresh += 1;
        }
        added
    }

    pub fn put_page(&mut self, ino: Ino, idx: u64, data: PageData, dirty: bool) -> bool {
        self.put_page_with(ino, idx, data, dirty, false)
    }

    /// The data of a dirty page, which becomes clean (writeback has taken it).
    pub fn take_dirty(&mut self, ino: Ino, idx: u64) -> Option<PageData> {
        let p = self.pages.get_mut(&(ino, idx))?;
        if !p.dirty {
            return None;
        }
        p.dirty = false;
        if p.fresh {
            p.fresh = false;
            self.nfresh -= 1;
        }
        let d = p.data.clone();
        self.lru.insert(p.tick, Key::Page(ino, idx));
        self.clear_dirty(ino, idx);
        Some(d)
    }

    /// New dirty pages (no device block yet) of an inode.
    pub fn fresh_of(&self, ino: Ino) -> u64 {
        self.dirty.get(&ino).map_or(0, |s| {
            s.iter()
                .filter(|&&i| self.pages.get(&(ino, i)).is_some_and(|p| p.fresh))
                .count() as u64
        })
    }

    /// Dirty page indices of an inode, in file order.
    pub fn dirty_of(&self, ino: Ino) -> Vec<u64> {
        self.dirty
            .get(&ino)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The inode dirty for the longest time.
    pub fn oldest_dirty_inode(&self) -> Option<Ino> {
        self.dirty_since.keys().next().map(|&(_, i)| i)
    }

    pub fn dirty_inodes(&self) -> impl Iterator<Item = Ino> + '_ {
        self.dirty.keys().copied()
    }

    /// Drops an inode's pages from `from` on; returns how many held space reservations.
    pub fn drop_pages_from(&mut self, ino: Ino, from: u64) -> u64 {
        let keys: Vec<(Ino, u64)> = self
            .pages
            .range((ino, from)..=(ino, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        let mut fresh = 0;
        for k in keys {
            let p = self.pages.remove(&k).expect("listed");
            self.lru.remove(&p.tick);
            if p.dirty {
                self.clear_dirty(k.0, k.1);
            }
            if p.fresh {
                fresh += 1;
                self.nfresh -= 1;
            }
        }
        fresh
    }

    pub fn drop_inode_pages(&mut self, ino: Ino) -> u64 {
        self.drop_pages_from(ino, 0)
    }

    /// Makes a page dirty so it is written again (cleaning moves it), keeping newer dirty
    /// contents if it has them.
    pub fn mark_for_move(&mut self, ino: Ino, idx: u64, data: PageData) {
        if self.is_dirty(ino, idx) {
            return;
        }
        self.put_page(ino, idx, data, true);
    }

    // ---- nodes ----

    /// Whether the node is resident; marks it recently used.
    pub fn touch_node(&mut self, nid: Nid) -> bool {
        let Some(old) = self.nodes.get(&nid).map(|n| n.tick) else {
            return false;
        };
        let clean = !self.nodes[&nid].dirty;
        let t = self.bump(old, Key::Node(nid), clean);
        self.nodes.get_mut(&nid).expect("present").tick = t;
        true
    }

    pub fn put_node(&mut self, nid: Nid, node: Node, dirty: bool) {
        let old = self.nodes.get(&nid).map(|n| n.tick).unwrap_or(0);
        let was_dirty = self.nodes.get(&nid).is_some_and(|n| n.dirty);
        let t = self.bump(old, Key::Node(nid), !(dirty || was_dirty));
        self.nodes.insert(
            nid,
            CachedNode {
                node,
                dirty: dirty || was_dirty,
                tick: t,
            },
        );
        if dirty {
            self.dirty_nodes.insert(nid);
        }
    }

    pub fn node(&self, nid: Nid) -> Option<&Node> {
        self.nodes.get(&nid).map(|n| &n.node)
    }

    pub fn node_mut(&mut self, nid: Nid) -> Option<&mut Node> {
        self.nodes.get_mut(&nid).map(|n| &mut n.node)
    }

    pub fn dirty_node(&mut self, nid: Nid) {
        let n = self
            .nodes
            .get_mut(&nid)
            .unwrap_or_else(|| panic!("node {nid} dirtied while not resident"));
        n.dirty = true;
        self.lru.remove(&n.tick);
        self.dirty_nodes.insert(nid);
    }

    pub fn dirty_nodes(&self) -> impl Iterator<Item = Nid> + '_ {
        self.dirty_nodes.iter().copied()
    }

    /// A copy of a dirty node, which becomes clean.
    pub fn take_dirty_node(&mut self, nid: Nid) -> Option<Node> {
        let n = self.nodes.get_mut(&nid)?;
        if !n.dirty {
            return None;
        }
        n.dirty = false;
        self.lru.insert(n.tick, Key::Node(nid));
        self.dirty_nodes.remove(&nid);
        Some(n.node.clone())
    }

    pub fn drop_node(&mut self, nid: Nid) {
        if let Some(n) = self.nodes.remove(&nid) {
            self.lru.remove(&n.tick);
        }
        self.dirty_nodes.remove(&nid);
    }

    /// Evicts clean pages and nodes, least recently used first, down to the limit.
    pub fn shrink(&mut self) {
        while self.resident() > self.limit {
            let Some((_, k)) = self.lru.pop_first() else {
                return;
            };
            match k {
                Key::Page(i, x) => {
                    let p = self.pages.remove(&(i, x));
                    assert!(
                        p.is_some_and(|p| !p.dirty),
                        "dirty page {i}:{x} on the clean LRU"
                    );
                }
                Key::Node(n) => {
                    let c = self.nodes.remove(&n);
                    assert!(
                        c.is_some_and(|c| !c.dirty),
                        "dirty node {n} on the clean LRU"
                    );
                }
            }
        }
    }
}
