//! The page cache: file data pages and node pages under one memory limit, evicted least
//! recently used first (clean ones only), with the dirty sets writeback works from.
//!
//! Lookups go through hash maps with a fixed hasher (runs stay deterministic); the eviction
//! order is an intrusive doubly-linked list of the clean entries, so a use, a dirtying and an
//! eviction each cost O(1). A dirty entry is off the list (it cannot be evicted); when
//! writeback cleans it, it stays off the list until its write completes (Linux keeps pages
//! under writeback in the page cache: a read meanwhile finds the page, not a block the device
//! has not written yet), then goes back at the most recently used end.

use crate::ondisk::{BLOCK, Nid, Node};
use crate::vfs::Ino;
use rustc_hash::FxHashMap;
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    Page(Ino, u64),
    Node(Nid),
}

/// Position on the eviction list: an index into [`Lru::links`], or `NONE` when off it.
type Link = u32;
const NONE: Link = u32::MAX;

/// A write in flight of a cached page or node, taken by [`Cache::take_dirty`] or
/// [`Cache::take_dirty_node`]: the entry stays resident until [`Cache::end_writeback`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnderWriteback {
    key: Key,
    /// The entry's generation: an entry dropped and cached again is not pinned by the old
    /// entry's writes.
    generation: u64,
}

struct Page {
    data: PageData,
    dirty: bool,
    /// Dirty with no block on the device yet (holds a space reservation).
    fresh: bool,
    /// Writes of it in flight.
    writeback: u32,
    generation: u64,
    link: Link,
}

struct CachedNode {
    node: Node,
    dirty: bool,
    writeback: u32,
    generation: u64,
    link: Link,
}

struct LruLink {
    prev: Link,
    next: Link,
    key: Key,
}

/// The clean entries, least recently used at the head.
struct Lru {
    links: Vec<LruLink>,
    free: Vec<Link>,
    head: Link,
    tail: Link,
}

impl Lru {
    fn new() -> Lru {
        Lru {
            links: Vec::new(),
            free: Vec::new(),
            head: NONE,
            tail: NONE,
        }
    }

    /// Appends `key` at the most recently used end; returns its link.
    fn push_back(&mut self, key: Key) -> Link {
        let link = LruLink {
            prev: self.tail,
            next: NONE,
            key,
        };
        let at = match self.free.pop() {
            Some(i) => {
                self.links[i as usize] = link;
                i
            }
            None => {
                self.links.push(link);
                (self.links.len() - 1) as Link
            }
        };
        match self.tail {
            NONE => self.head = at,
            t => self.links[t as usize].next = at,
        }
        self.tail = at;
        at
    }

    fn unlink(&mut self, at: Link) {
        if at == NONE {
            return;
        }
        let LruLink { prev, next, .. } = self.links[at as usize];
        match prev {
            NONE => self.head = next,
            p => self.links[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.links[n as usize].prev = prev,
        }
        self.free.push(at);
    }

    /// Moves an entry to the most recently used end; returns its new link.
    fn touch(&mut self, at: Link, key: Key) -> Link {
        if at != NONE && at == self.tail {
            return at;
        }
        self.unlink(at);
        self.push_back(key)
    }

    fn pop_front(&mut self) -> Option<Key> {
        if self.head == NONE {
            return None;
        }
        let at = self.head;
        let key = self.links[at as usize].key;
        self.unlink(at);
        Some(key)
    }
}

pub struct Cache {
    limit: usize,
    /// Data pages by inode, each inode's in file order (truncation drops a range).
    pages: FxHashMap<Ino, BTreeMap<u64, Page>>,
    npages: usize,
    nodes: FxHashMap<Nid, CachedNode>,
    lru: Lru,
    tick: u64,
    /// Dirty data pages by inode, and when the inode first became dirty.
    dirty: BTreeMap<Ino, BTreeSet<u64>>,
    dirty_since: BTreeMap<(u64, Ino), ()>,
    inode_dirty_tick: BTreeMap<Ino, u64>,
    ndirty: usize,
    nfresh: u64,
    dirty_nodes: BTreeSet<Nid>,
    /// The dirty nodes of each inode (by the owner in their footers), for fsync.
    dirty_nodes_of: FxHashMap<u32, BTreeSet<Nid>>,
    /// Generations handed to entries as they are cached.
    generations: u64,
}

impl Cache {
    pub fn new(limit_pages: u64) -> Cache {
        Cache {
            limit: limit_pages as usize,
            pages: FxHashMap::default(),
            npages: 0,
            nodes: FxHashMap::default(),
            lru: Lru::new(),
            tick: 0,
            dirty: BTreeMap::new(),
            dirty_since: BTreeMap::new(),
            inode_dirty_tick: BTreeMap::new(),
            ndirty: 0,
            nfresh: 0,
            dirty_nodes: BTreeSet::new(),
            dirty_nodes_of: FxHashMap::default(),
            generations: 0,
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generations += 1;
        self.generations
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
        self.npages + self.nodes.len()
    }

    // ---- data pages ----

    /// A copy of a cached page, marking it recently used.
    pub fn page(&mut self, ino: Ino, idx: u64) -> Option<PageData> {
        let p = self.pages.get_mut(&ino)?.get_mut(&idx)?;
        if p.link != NONE {
            p.link = self.lru.touch(p.link, Key::Page(ino, idx));
        }
        Some(p.data.clone())
    }

    pub fn has_page(&self, ino: Ino, idx: u64) -> bool {
        self.pages.get(&ino).is_some_and(|m| m.contains_key(&idx))
    }

    pub fn is_dirty(&self, ino: Ino, idx: u64) -> bool {
        self.pages
            .get(&ino)
            .and_then(|m| m.get(&idx))
            .is_some_and(|p| p.dirty)
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
        let file = self.pages.entry(ino).or_default();
        let was_fresh = match file.get_mut(&idx) {
            Some(p) => {
                let was_fresh = p.fresh;
                p.data = data;
                if dirty || p.dirty {
                    // Dirty (already or now): off the eviction list.
                    self.lru.unlink(p.link);
                    p.link = NONE;
                    p.dirty = true;
                    p.fresh |= dirty && fresh;
                } else if p.link != NONE {
                    p.link = self.lru.touch(p.link, Key::Page(ino, idx));
                }
                was_fresh
            }
            None => {
                let link = if dirty {
                    NONE
                } else {
                    self.lru.push_back(Key::Page(ino, idx))
                };
                self.generations += 1;
                file.insert(
                    idx,
                    Page {
                        data,
                        dirty,
                        fresh: dirty && fresh,
                        writeback: 0,
                        generation: self.generations,
                        link,
                    },
                );
                self.npages += 1;
                false
            }
        };
        if dirty {
            self.set_dirty(ino, idx);
        }
        let added = dirty && fresh && !was_fresh;
        if added {
            self.nfresh += 1;
        }
        added
    }

    pub fn put_page(&mut self, ino: Ino, idx: u64, data: PageData, dirty: bool) -> bool {
        self.put_page_with(ino, idx, data, dirty, false)
    }

    /// A dirty page's contents for writing: the page is clean and under writeback from now
    /// until [`Cache::end_writeback`].
    pub fn take_dirty(&mut self, ino: Ino, idx: u64) -> Option<(PageData, UnderWriteback)> {
        let p = self.pages.get_mut(&ino)?.get_mut(&idx)?;
        if !p.dirty {
            return None;
        }
        p.dirty = false;
        if p.fresh {
            p.fresh = false;
            self.nfresh -= 1;
        }
        p.writeback += 1;
        let w = UnderWriteback {
            key: Key::Page(ino, idx),
            generation: p.generation,
        };
        let d = p.data.clone();
        self.clear_dirty(ino, idx);
        Some((d, w))
    }

    /// A write taken by [`Cache::take_dirty`] or [`Cache::take_dirty_node`] completed: the
    /// entry may be evicted again once no other write of it is in flight and it is clean.
    pub fn end_writeback(&mut self, w: UnderWriteback) {
        let (writeback, dirty, link, generation) = match w.key {
            Key::Page(ino, idx) => {
                let Some(p) = self.pages.get_mut(&ino).and_then(|f| f.get_mut(&idx)) else {
                    return;
                };
                (&mut p.writeback, p.dirty, &mut p.link, p.generation)
            }
            Key::Node(nid) => {
                let Some(n) = self.nodes.get_mut(&nid) else {
                    return;
                };
                (&mut n.writeback, n.dirty, &mut n.link, n.generation)
            }
        };
        if generation != w.generation {
            return;
        }
        assert!(*writeback > 0, "{:?}: more writes ended than began", w.key);
        *writeback -= 1;
        if *writeback == 0 && !dirty {
            debug_assert_eq!(*link, NONE);
            *link = self.lru.push_back(w.key);
        }
    }

    /// New dirty pages (no device block yet) of an inode.
    pub fn fresh_of(&self, ino: Ino) -> u64 {
        let (Some(set), Some(file)) = (self.dirty.get(&ino), self.pages.get(&ino)) else {
            return 0;
        };
        set.iter()
            .filter(|&i| file.get(i).is_some_and(|p| p.fresh))
            .count() as u64
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
        let Some(file) = self.pages.get_mut(&ino) else {
            return 0;
        };
        let dropped = file.split_off(&from);
        if file.is_empty() {
            self.pages.remove(&ino);
        }
        let mut fresh = 0;
        for (idx, p) in dropped {
            self.npages -= 1;
            self.lru.unlink(p.link);
            if p.dirty {
                self.clear_dirty(ino, idx);
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
        let Some(n) = self.nodes.get_mut(&nid) else {
            return false;
        };
        if n.link != NONE {
            n.link = self.lru.touch(n.link, Key::Node(nid));
        }
        true
    }

    pub fn put_node(&mut self, nid: Nid, node: Node, dirty: bool) {
        match self.nodes.get_mut(&nid) {
            Some(n) => {
                n.node = node;
                if dirty || n.dirty {
                    self.lru.unlink(n.link);
                    n.link = NONE;
                    n.dirty = true;
                } else if n.link != NONE {
                    n.link = self.lru.touch(n.link, Key::Node(nid));
                }
            }
            None => {
                let link = if dirty {
                    NONE
                } else {
                    self.lru.push_back(Key::Node(nid))
                };
                let generation = self.next_generation();
                self.nodes.insert(
                    nid,
                    CachedNode {
                        node,
                        dirty,
                        writeback: 0,
                        generation,
                        link,
                    },
                );
            }
        }
        if dirty {
            self.mark_node_dirty(nid);
        }
    }

    fn mark_node_dirty(&mut self, nid: Nid) {
        if self.dirty_nodes.insert(nid) {
            let ino = self.nodes[&nid].node.footer.ino;
            self.dirty_nodes_of.entry(ino).or_default().insert(nid);
        }
    }

    fn unmark_node_dirty(&mut self, nid: Nid, ino: u32) {
        if self.dirty_nodes.remove(&nid)
            && let Some(set) = self.dirty_nodes_of.get_mut(&ino)
        {
            set.remove(&nid);
            if set.is_empty() {
                self.dirty_nodes_of.remove(&ino);
            }
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
        self.lru.unlink(n.link);
        n.link = NONE;
        self.mark_node_dirty(nid);
    }

    pub fn is_dirty_node(&self, nid: Nid) -> bool {
        self.dirty_nodes.contains(&nid)
    }

    pub fn dirty_nodes(&self) -> impl Iterator<Item = Nid> + '_ {
        self.dirty_nodes.iter().copied()
    }

    /// The dirty nodes of inode `ino`, in node-id order.
    pub fn dirty_nodes_of(&self, ino: u32) -> impl Iterator<Item = Nid> + '_ {
        self.dirty_nodes_of.get(&ino).into_iter().flatten().copied()
    }

    /// A copy of a dirty node, which becomes clean.
    /// A dirty node for writing: clean and under writeback from now until
    /// [`Cache::end_writeback`].
    pub fn take_dirty_node(&mut self, nid: Nid) -> Option<(Node, UnderWriteback)> {
        let n = self.nodes.get_mut(&nid)?;
        if !n.dirty {
            return None;
        }
        n.dirty = false;
        n.writeback += 1;
        let w = UnderWriteback {
            key: Key::Node(nid),
            generation: n.generation,
        };
        let node = n.node.clone();
        self.unmark_node_dirty(nid, node.footer.ino);
        Some((node, w))
    }

    pub fn drop_node(&mut self, nid: Nid) {
        if let Some(n) = self.nodes.remove(&nid) {
            self.lru.unlink(n.link);
            self.unmark_node_dirty(nid, n.node.footer.ino);
        }
        debug_assert!(
            !self.dirty_nodes.contains(&nid),
            "dirty node {nid} not resident"
        );
    }

    /// Evicts clean pages and nodes, least recently used first, down to the limit.
    pub fn shrink(&mut self) {
        while self.resident() > self.limit {
            let Some(k) = self.lru.pop_front() else {
                return;
            };
            match k {
                Key::Page(i, x) => {
                    let file = self.pages.get_mut(&i).expect("listed page is resident");
                    let p = file.remove(&x).expect("listed page is resident");
                    assert!(
                        !p.dirty && p.writeback == 0,
                        "page {i}:{x} on the LRU is dirty or under writeback"
                    );
                    if file.is_empty() {
                        self.pages.remove(&i);
                    }
                    self.npages -= 1;
                }
                Key::Node(n) => {
                    let c = self.nodes.remove(&n).expect("listed node is resident");
                    assert!(
                        !c.dirty && c.writeback == 0,
                        "node {n} on the LRU is dirty or under writeback"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_least_recently_used_clean_entries_only() {
        let mut c = Cache::new(3);
        c.put_page(1, 0, PageData::Fp(10), false);
        c.put_page(1, 1, PageData::Fp(11), true);
        c.put_page(1, 2, PageData::Fp(12), false);
        c.put_page(2, 0, PageData::Fp(20), false);
        // Page 1:0 was used again: 1:2 is now the oldest clean one.
        assert_eq!(c.page(1, 0), Some(PageData::Fp(10)));
        c.shrink();
        assert_eq!(c.resident(), 3);
        assert!(!c.has_page(1, 2) && c.has_page(1, 0) && c.has_page(1, 1));
        // Dirty pages stay however old; clean ones go.
        c.limit = 1;
        c.shrink();
        assert!(c.has_page(1, 1) && c.resident() == 1);
        // Cleaned by writeback, it becomes evictable once its write completes.
        let (data, w) = c.take_dirty(1, 1).expect("dirty");
        assert_eq!(data, PageData::Fp(11));
        c.limit = 0;
        c.shrink();
        assert_eq!(c.resident(), 1, "under writeback: kept");
        c.end_writeback(w);
        c.shrink();
        assert_eq!(c.resident(), 0);
    }

    #[test]
    fn a_page_written_twice_stays_until_both_writes_end() {
        let mut c = Cache::new(0);
        c.put_page(1, 0, PageData::Fp(1), true);
        let (_, first) = c.take_dirty(1, 0).expect("dirty");
        // Changed and written again while the first write is in flight.
        c.put_page(1, 0, PageData::Fp(2), true);
        let (_, second) = c.take_dirty(1, 0).expect("dirty again");
        c.end_writeback(first);
        c.shrink();
        assert_eq!(
            c.page(1, 0),
            Some(PageData::Fp(2)),
            "second write in flight"
        );
        c.end_writeback(second);
        c.shrink();
        assert!(!c.has_page(1, 0));
    }

    #[test]
    fn a_write_of_a_dropped_page_does_not_pin_its_successor() {
        let mut c = Cache::new(0);
        c.put_page(3, 7, PageData::Fp(1), true);
        let (_, old) = c.take_dirty(3, 7).expect("dirty");
        c.drop_inode_pages(3);
        // Cached again (a new file at that inode number, say), clean.
        c.put_page(3, 7, PageData::Fp(9), false);
        c.end_writeback(old);
        c.shrink();
        assert!(
            !c.has_page(3, 7),
            "the old write neither pinned nor unbalanced it"
        );
    }

    #[test]
    fn dropping_a_range_releases_reservations_and_dirty_state() {
        let mut c = Cache::new(100);
        assert!(c.put_page_with(7, 0, PageData::Fp(1), true, true));
        assert!(c.put_page_with(7, 5, PageData::Fp(2), true, true));
        assert!(
            !c.put_page_with(7, 5, PageData::Fp(3), true, false),
            "already reserved"
        );
        c.put_page(7, 9, PageData::Fp(4), false);
        assert_eq!((c.new_pages(), c.dirty_pages(), c.fresh_of(7)), (2, 2, 2));
        assert_eq!(c.drop_pages_from(7, 3), 1);
        assert_eq!((c.new_pages(), c.dirty_pages(), c.resident()), (1, 1, 1));
        assert_eq!(c.dirty_of(7), vec![0]);
        assert_eq!(c.drop_inode_pages(7), 1);
        assert_eq!((c.resident(), c.oldest_dirty_inode()), (0, None));
    }

    #[test]
    fn nodes_share_the_limit_and_the_order() {
        let mut c = Cache::new(2);
        let node = |nid| Node {
            body: crate::ondisk::NodeBody::Direct,
            addrs: Vec::new(),
            footer: crate::ondisk::Footer {
                nid,
                ..Default::default()
            },
        };
        c.put_node(5, node(5), false);
        c.put_page(1, 0, PageData::Fp(1), false);
        assert!(c.touch_node(5));
        c.put_node(6, node(6), true);
        c.shrink();
        assert!(!c.has_page(1, 0) && c.node(5).is_some() && c.node(6).is_some());
        assert_eq!(c.dirty_nodes().collect::<Vec<_>>(), vec![6]);
        let (_, w) = c.take_dirty_node(6).expect("dirty");
        c.dirty_node(5);
        c.limit = 1;
        c.shrink();
        assert!(c.node(6).is_some(), "under writeback");
        c.end_writeback(w);
        c.shrink();
        assert!(c.node(6).is_none() && c.node(5).is_some());
    }
}
