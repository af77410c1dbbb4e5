//! The page cache: file data pages and node pages under one memory limit, with the dirty sets
//! writeback works from. Clean entries are evicted in the order of Linux's two page lists
//! (mm/swap.c, mm/vmscan.c): an entry enters the inactive list referenced; used again there it
//! moves to the active list; the active list is kept at most `ratio` times the inactive one
//! by moving its oldest entries back to the inactive list (referenced if used while active,
//! so that one more use activates them again); eviction takes the oldest inactive entry. So
//! pages used once (streamed file data) pass through the inactive list while pages used again
//! and again (inodes and other node pages, which every file operation touches) stay, as in the
//! paper's guest, whose cleaning found a victim's nodes "generally being cached" (seed 000
//! §4.1).
//!
//! Lookups go through hash maps with a fixed hasher (runs stay deterministic); each list is an
//! intrusive doubly-linked list of clean entries, so a use, a dirtying and an eviction each
//! cost O(1). A dirty entry is off the lists (it cannot be evicted); when writeback cleans it,
//! it stays off them until its write completes (Linux keeps pages under writeback in the page
//! cache: a read meanwhile finds the page, not a block the device has not written yet), then
//! goes back at the young end of its list.

use crate::ondisk::{BLOCK, Nid, Node};
use crate::vfs::{FileKind, Ino};
use rustc_hash::{FxHashMap, FxHashSet};
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
    Meta(u64),
}

/// Position on an eviction list: an index into [`Lru::links`], or `NONE` when off it.
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
    lru: Residence,
}

struct CachedNode {
    node: Node,
    dirty: bool,
    writeback: u32,
    generation: u64,
    lru: Residence,
}

/// Where an entry stands in the eviction order: its list (Linux's PG_active), whether it was
/// used since it entered or left the active list (PG_referenced), and its link on the list
/// (`NONE` while dirty or under writeback).
#[derive(Clone, Copy, Debug)]
struct Residence {
    link: Link,
    active: bool,
    referenced: bool,
}

impl Residence {
    /// A page just cached: inactive and referenced (Linux's page cache lookups that create a
    /// page mark it accessed), so its next use activates it.
    fn new() -> Residence {
        Residence {
            link: NONE,
            active: false,
            referenced: true,
        }
    }
}

struct LruLink {
    prev: Link,
    next: Link,
    key: Key,
}

/// A list of clean entries, oldest at the head.
struct Lru {
    links: Vec<LruLink>,
    free: Vec<Link>,
    head: Link,
    tail: Link,
    len: usize,
}

impl Lru {
    fn new() -> Lru {
        Lru {
            links: Vec::new(),
            free: Vec::new(),
            head: NONE,
            tail: NONE,
            len: 0,
        }
    }

    /// Appends `key` at the young end; returns its link.
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
        self.len += 1;
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
        self.len -= 1;
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

/// Linux's inactive_ratio for a page cache of `bytes` (mm/vmscan.c, inactive_list_is_low, as
/// in the paper's Linux 4.10): the active list may hold up to sqrt(10 x GiB) times the
/// inactive one, and as much as it under 1 GiB. So a larger cache keeps a larger share of its
/// pages on the active list.
pub fn linux_inactive_ratio(bytes: u64) -> u32 {
    let gib = bytes >> 30;
    if gib == 0 {
        1
    } else {
        (10 * gib).isqrt() as u32
    }
}

/// The inactive and the active list of clean entries.
struct Lists {
    inactive: Lru,
    active: Lru,
    /// How many times the inactive list the active one may hold ([`linux_inactive_ratio`]
    /// unless the mount gives one).
    ratio: usize,
}

impl Lists {
    fn new(ratio: u32) -> Lists {
        assert!(
            ratio >= 1,
            "an inactive ratio of 0 would let nothing stay active"
        );
        Lists {
            inactive: Lru::new(),
            active: Lru::new(),
            ratio: ratio as usize,
        }
    }

    fn list(&mut self, active: bool) -> &mut Lru {
        if active {
            &mut self.active
        } else {
            &mut self.inactive
        }
    }

    /// A clean entry becomes evictable: at the young end of its list.
    fn enlist(&mut self, r: &mut Residence, key: Key) {
        debug_assert_eq!(r.link, NONE, "{key:?} is listed twice");
        r.link = self.list(r.active).push_back(key);
    }

    /// The entry leaves its list (dirtied, or dropped).
    fn delist(&mut self, r: &mut Residence) {
        if r.link != NONE {
            let link = r.link;
            self.list(r.active).unlink(link);
            r.link = NONE;
        }
    }

    /// A use of the entry (Linux's mark_page_accessed): a referenced inactive entry moves to
    /// the active list, any other becomes referenced.
    fn accessed(&mut self, r: &mut Residence, key: Key) {
        if !r.active && r.referenced {
            let listed = r.link != NONE;
            self.delist(r);
            r.active = true;
            r.referenced = false;
            if listed {
                self.enlist(r, key);
            }
        } else {
            r.referenced = true;
        }
    }

    /// Whether the active list has outgrown its share (Linux's inactive_list_is_low).
    fn inactive_is_low(&self) -> bool {
        self.active.len > 0
            && (self.inactive.len == 0 || self.active.len > self.inactive.len * self.ratio)
    }
}

/// The residence of the entry `key`, which must be resident.
fn residence<'a>(
    pages: &'a mut FxHashMap<Ino, BTreeMap<u64, Page>>,
    nodes: &'a mut FxHashMap<Nid, CachedNode>,
    meta: &'a mut FxHashMap<u64, Residence>,
    key: Key,
) -> &'a mut Residence {
    match key {
        Key::Page(i, x) => {
            &mut pages
                .get_mut(&i)
                .and_then(|f| f.get_mut(&x))
                .expect("listed page is resident")
                .lru
        }
        Key::Node(n) => &mut nodes.get_mut(&n).expect("listed node is resident").lru,
        Key::Meta(a) => meta.get_mut(&a).expect("listed meta page is resident"),
    }
}

pub struct Cache {
    limit: usize,
    /// Data pages by inode, each inode's in file order (truncation drops a range).
    pages: FxHashMap<Ino, BTreeMap<u64, Page>>,
    npages: usize,
    nodes: FxHashMap<Nid, CachedNode>,
    /// Meta pages (F2FS's meta inode mapping: here the SSA blocks) by block address. The file
    /// system keeps their contents in its own tables; the cache holds only whether one is
    /// resident, which decides whether reading it takes a device read, and charges its memory.
    meta: FxHashMap<u64, Residence>,
    lists: Lists,
    tick: u64,
    /// Dirty data pages by inode, and when the inode first became dirty.
    dirty: BTreeMap<Ino, BTreeSet<u64>>,
    dirty_since: BTreeMap<(u64, Ino), ()>,
    inode_dirty_tick: BTreeMap<Ino, u64>,
    ndirty: usize,
    nfresh: u64,
    dirty_nodes: BTreeSet<Nid>,
    /// Directories (their inode nodes have passed through the cache): their data pages are
    /// dentry blocks, whose dirty ones F2FS counts apart (F2FS_DIRTY_DENTS).
    directories: FxHashSet<Ino>,
    /// Dirty data pages of directories.
    ndirty_dents: usize,
    /// The dirty nodes of each inode (by the owner in their footers), for fsync.
    dirty_nodes_of: FxHashMap<u32, BTreeSet<Nid>>,
    /// Generations handed to entries as they are cached.
    generations: u64,
    /// Writes of data pages in flight by inode ([`Cache::take_dirty`] until
    /// [`Cache::end_writeback`]), whether or not the pages are still cached.
    page_writes: FxHashMap<Ino, u32>,
}

impl Cache {
    /// A cache of `limit_pages` pages whose lists keep Linux's balance for its size.
    pub fn new(limit_pages: u64) -> Cache {
        Cache::with_inactive_ratio(
            limit_pages,
            linux_inactive_ratio(limit_pages * BLOCK as u64),
        )
    }

    /// A cache of `limit_pages` pages whose active list may hold up to `ratio` times the
    /// inactive one (at least 1).
    pub fn with_inactive_ratio(limit_pages: u64, ratio: u32) -> Cache {
        Cache {
            limit: limit_pages as usize,
            pages: FxHashMap::default(),
            npages: 0,
            nodes: FxHashMap::default(),
            meta: FxHashMap::default(),
            lists: Lists::new(ratio),
            tick: 0,
            dirty: BTreeMap::new(),
            dirty_since: BTreeMap::new(),
            inode_dirty_tick: BTreeMap::new(),
            ndirty: 0,
            nfresh: 0,
            dirty_nodes: BTreeSet::new(),
            directories: FxHashSet::default(),
            ndirty_dents: 0,
            dirty_nodes_of: FxHashMap::default(),
            generations: 0,
            page_writes: FxHashMap::default(),
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
    /// Dirty node pages (F2FS_DIRTY_NODES).
    pub fn dirty_node_pages(&self) -> usize {
        self.dirty_nodes.len()
    }
    /// Dirty dentry blocks: data pages of directories (F2FS_DIRTY_DENTS).
    pub fn dirty_dentry_pages(&self) -> usize {
        self.ndirty_dents
    }
    /// Dirty pages without a device block yet.
    pub fn new_pages(&self) -> u64 {
        self.nfresh
    }
    pub fn resident(&self) -> usize {
        self.npages + self.nodes.len() + self.meta.len()
    }

    // ---- data pages ----

    /// A copy of a cached page; counts as a use of it.
    pub fn page(&mut self, ino: Ino, idx: u64) -> Option<PageData> {
        let p = self.pages.get_mut(&ino)?.get_mut(&idx)?;
        self.lists.accessed(&mut p.lru, Key::Page(ino, idx));
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
            if self.directories.contains(&ino) {
                self.ndirty_dents += 1;
            }
        }
    }

    fn clear_dirty(&mut self, ino: Ino, idx: u64) {
        if let Some(set) = self.dirty.get_mut(&ino)
            && set.remove(&idx)
        {
            self.ndirty -= 1;
            if self.directories.contains(&ino) {
                self.ndirty_dents -= 1;
            }
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
                self.lists.accessed(&mut p.lru, Key::Page(ino, idx));
                if dirty || p.dirty {
                    // Dirty (already or now): off the eviction lists.
                    self.lists.delist(&mut p.lru);
                    p.dirty = true;
                    p.fresh |= dirty && fresh;
                }
                was_fresh
            }
            None => {
                let mut lru = Residence::new();
                if !dirty {
                    self.lists.enlist(&mut lru, Key::Page(ino, idx));
                }
                self.generations += 1;
                file.insert(
                    idx,
                    Page {
                        data,
                        dirty,
                        fresh: dirty && fresh,
                        writeback: 0,
                        generation: self.generations,
                        lru,
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
        *self.page_writes.entry(ino).or_insert(0) += 1;
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
        if let Key::Page(ino, _) = w.key
            && let Some(n) = self.page_writes.get_mut(&ino)
        {
            *n -= 1;
            if *n == 0 {
                self.page_writes.remove(&ino);
            }
        }
        let (writeback, dirty, lru, generation) = match w.key {
            Key::Page(ino, idx) => {
                let Some(p) = self.pages.get_mut(&ino).and_then(|f| f.get_mut(&idx)) else {
                    return;
                };
                (&mut p.writeback, p.dirty, &mut p.lru, p.generation)
            }
            Key::Node(nid) => {
                let Some(n) = self.nodes.get_mut(&nid) else {
                    return;
                };
                (&mut n.writeback, n.dirty, &mut n.lru, n.generation)
            }
            Key::Meta(_) => unreachable!("meta pages are not written from the cache"),
        };
        if generation != w.generation {
            return;
        }
        assert!(*writeback > 0, "{:?}: more writes ended than began", w.key);
        *writeback -= 1;
        if *writeback == 0 && !dirty {
            self.lists.enlist(lru, w.key);
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

    /// Whether a write of a page of `ino` is in flight ([`Cache::take_dirty`] until
    /// [`Cache::end_writeback`]).
    pub fn under_writeback(&self, ino: Ino) -> bool {
        self.page_writes.contains_key(&ino)
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
        for (idx, mut p) in dropped {
            self.npages -= 1;
            self.lists.delist(&mut p.lru);
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

    /// Drops the pages of an inode that is gone (its number may come back as another
    /// file's); returns how many held space reservations.
    pub fn drop_inode_pages(&mut self, ino: Ino) -> u64 {
        let fresh = self.drop_pages_from(ino, 0);
        self.directories.remove(&ino);
        fresh
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

    /// Whether the node is resident; counts as a use of it.
    pub fn touch_node(&mut self, nid: Nid) -> bool {
        let Some(n) = self.nodes.get_mut(&nid) else {
            return false;
        };
        self.lists.accessed(&mut n.lru, Key::Node(nid));
        true
    }

    pub fn put_node(&mut self, nid: Nid, node: Node, dirty: bool) {
        match self.nodes.get_mut(&nid) {
            Some(n) => {
                n.node = node;
                self.lists.accessed(&mut n.lru, Key::Node(nid));
                if dirty || n.dirty {
                    self.lists.delist(&mut n.lru);
                    n.dirty = true;
                }
            }
            None => {
                let mut lru = Residence::new();
                if !dirty {
                    self.lists.enlist(&mut lru, Key::Node(nid));
                }
                let generation = self.next_generation();
                self.nodes.insert(
                    nid,
                    CachedNode {
                        node,
                        dirty,
                        writeback: 0,
                        generation,
                        lru,
                    },
                );
            }
        }
        if dirty {
            self.mark_node_dirty(nid);
        }
        if let Some(i) = self.nodes[&nid].node.inode()
            && i.kind == FileKind::Dir
            && self.directories.insert(nid as Ino)
        {
            // Pages dirtied before the inode came in (cleaning moves them by address).
            self.ndirty_dents += self.dirty.get(&(nid as Ino)).map_or(0, |d| d.len());
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
        self.lists.delist(&mut n.lru);
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
        if let Some(mut n) = self.nodes.remove(&nid) {
            self.lists.delist(&mut n.lru);
            self.unmark_node_dirty(nid, n.node.footer.ino);
        }
        debug_assert!(
            !self.dirty_nodes.contains(&nid),
            "dirty node {nid} not resident"
        );
    }

    // ---- meta pages ----

    /// Whether the meta page at `addr` is resident; counts as a use of it.
    pub fn touch_meta(&mut self, addr: u64) -> bool {
        let Some(r) = self.meta.get_mut(&addr) else {
            return false;
        };
        self.lists.accessed(r, Key::Meta(addr));
        true
    }

    /// The meta page at `addr` is resident and clean (just read or written); a use of it if
    /// it already was.
    pub fn put_meta(&mut self, addr: u64) {
        if !self.touch_meta(addr) {
            let mut r = Residence::new();
            self.lists.enlist(&mut r, Key::Meta(addr));
            self.meta.insert(addr, r);
        }
    }

    /// Evicts clean pages and nodes down to the limit, the oldest inactive first, moving the
    /// oldest active ones to the inactive list while it is short (Linux's shrink_active_list).
    pub fn shrink(&mut self) {
        while self.resident() > self.limit {
            while self.lists.inactive_is_low() {
                let k = self
                    .lists
                    .active
                    .pop_front()
                    .expect("active list not empty");
                let r = residence(&mut self.pages, &mut self.nodes, &mut self.meta, k);
                // Off the active list now; back at the young end of the inactive one.
                r.link = NONE;
                r.active = false;
                self.lists.enlist(r, k);
            }
            let Some(k) = self.lists.inactive.pop_front() else {
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
                Key::Meta(a) => {
                    self.meta.remove(&a).expect("listed meta page is resident");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_pages_take_memory_and_are_evicted_like_pages_used_once() {
        let mut c = Cache::new(3);
        c.put_meta(100);
        c.put_meta(101);
        assert_eq!(c.resident(), 2);
        // A second use activates 101; streamed pages then push out 100 only.
        assert!(c.touch_meta(101));
        c.put_page(7, 0, PageData::Fp(0), false);
        c.put_page(7, 1, PageData::Fp(1), false);
        c.shrink();
        assert_eq!(c.resident(), 3);
        assert!(
            !c.touch_meta(100),
            "the meta page used once is evicted first"
        );
        assert!(c.touch_meta(101), "the meta page used twice stays");
    }

    /// An inode's page writes in flight are counted from take_dirty to end_writeback, even
    /// when its pages leave the cache meanwhile (a truncation drops them).
    #[test]
    fn page_writes_in_flight_are_counted_per_inode() {
        let mut c = Cache::new(8);
        c.put_page(1, 0, PageData::Fp(10), true);
        c.put_page(1, 1, PageData::Fp(11), true);
        c.put_page(2, 0, PageData::Fp(20), true);
        assert!(!c.under_writeback(1));
        let (_, a) = c.take_dirty(1, 0).unwrap();
        let (_, b) = c.take_dirty(1, 1).unwrap();
        assert!(c.under_writeback(1) && !c.under_writeback(2));
        c.end_writeback(a);
        assert!(
            c.under_writeback(1),
            "one of its two writes is still in flight"
        );
        c.drop_inode_pages(1);
        c.end_writeback(b);
        assert!(!c.under_writeback(1));
    }

    #[test]
    fn evicts_clean_entries_only_oldest_inactive_first() {
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

    fn direct_node(nid: Nid) -> Node {
        Node {
            body: crate::ondisk::NodeBody::Direct,
            addrs: Vec::new(),
            footer: crate::ondisk::Footer {
                nid,
                ..Default::default()
            },
        }
    }

    #[test]
    fn nodes_share_the_limit_and_the_order() {
        let mut c = Cache::new(2);
        c.put_node(5, direct_node(5), false);
        c.put_page(1, 0, PageData::Fp(1), false);
        assert!(c.touch_node(5));
        c.put_node(6, direct_node(6), true);
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

    /// Linux's two lists: a node used again is active, and pages streamed through once are
    /// evicted before it however recent they are (a plain LRU would evict it after 8 pages).
    #[test]
    fn entries_used_again_outlive_a_stream_used_once() {
        let mut c = Cache::new(8);
        c.put_node(1, direct_node(1), false);
        assert!(c.touch_node(1));
        for i in 0..100 {
            c.put_page(9, i, PageData::Fp(i), false);
            c.shrink();
        }
        assert!(c.node(1).is_some(), "the node used twice was evicted");
        assert_eq!(c.resident(), 8);
        assert!(c.has_page(9, 99) && !c.has_page(9, 90));
    }

    /// Under 1 GiB the active list holds at most as many entries as the inactive one: its
    /// oldest entries move back, return if used again, and are evicted if not.
    #[test]
    fn the_active_list_keeps_at_most_its_share() {
        let mut c = Cache::new(4);
        for n in 1..=4 {
            c.put_node(n, direct_node(n), false);
            assert!(c.touch_node(n));
        }
        c.put_page(9, 0, PageData::Fp(0), false);
        c.put_page(9, 1, PageData::Fp(1), false);
        c.shrink();
        // Nodes 1 and 2 moved to the inactive list; the pages went first.
        assert!((1..=4).all(|n| c.node(n).is_some()) && !c.has_page(9, 0) && !c.has_page(9, 1));
        assert!(
            c.touch_node(1) && c.touch_node(1),
            "used twice more: active again"
        );
        c.put_page(9, 2, PageData::Fp(2), false);
        c.shrink();
        assert!(c.node(2).is_none(), "moved back and not used: evicted");
        assert!(c.node(1).is_some() && c.has_page(9, 2));
    }

    /// A larger ratio lets more of the cache stay active: six nodes in use outlive a stream
    /// through a cache of eight under a ratio of 3 (6 active, 2 inactive); under Linux's ratio
    /// for a small cache (1) only four may stay active and the stream evicts the other two.
    #[test]
    fn the_inactive_ratio_sets_the_active_share() {
        let survivors = |mut c: Cache| {
            for n in 1..=6 {
                c.put_node(n, direct_node(n), false);
                assert!(c.touch_node(n));
            }
            for i in 0..100 {
                c.put_page(9, i, PageData::Fp(i), false);
                c.shrink();
            }
            (1..=6).filter(|&n| c.node(n).is_some()).count()
        };
        assert_eq!(survivors(Cache::new(8)), 4);
        assert_eq!(survivors(Cache::with_inactive_ratio(8, 1)), 4);
        assert_eq!(survivors(Cache::with_inactive_ratio(8, 3)), 6);
    }

    #[test]
    fn linux_inactive_ratio_grows_with_the_square_root_of_the_cache() {
        let gib = 1u64 << 30;
        assert_eq!(linux_inactive_ratio(512 << 20), 1);
        assert_eq!(linux_inactive_ratio(gib), 3);
        assert_eq!(linux_inactive_ratio(2 * gib), 4);
        assert_eq!(linux_inactive_ratio(10 * gib), 10);
    }
}
