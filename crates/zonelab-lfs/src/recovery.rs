//! Roll-forward recovery (seed 002 §4.7: "roll-forward restores the state to that after the
//! last fsync() call from the last committed CP", as F2FS does).
//!
//! fsync writes a file's data, then its node blocks to the warm node log with an fsync mark;
//! every node footer names the log's next block. At mount, after rolling back to the
//! checkpoint, the chain is followed from where the warm node log stood at the checkpoint:
//! while blocks decode as nodes of the checkpoint's version, the newest marked copy of each
//! node is kept. Each file with recovered nodes is then switched to them: the NAT points at the
//! recovered nodes, the SIT validates the blocks the new node tree reaches and invalidates what
//! only the old tree reached, and the inode's directory entry is restored if missing.
//!
//! Data a marked node points at may not be on the device: on a drive without power-loss
//! protection, fsync's data and node writes complete into the drive's volatile cache, and a
//! cut before fsync's flush can keep the node (its page programmed) and lose the data (its page
//! still buffered), leaving the zone's write pointer before the data's block. That fsync was
//! never acknowledged. The newest copy of a node whose data blocks the device holds (valid at
//! the checkpoint, or below their zones' write pointers as the cut left them, before mount
//! finishes the TL_opened zones) is recovered instead: an earlier fsync's, which may have been
//! acknowledged; without one, the newest copy with the lost blocks as holes. Recovering an
//! address past the write pointer would make it valid where the log continues writing (the
//! next block written there would take it over), or, in a zone mount finishes, where the
//! device pads.

use crate::dev::Traffic;
use crate::fs::Fs;
use crate::ondisk::{
    BlkAddr, Checkpoint, FLAG_DENT, FLAG_FSYNC, NULL_ADDR, NatEntry, Nid, Node, NodeBody, Summary,
};
use crate::segment::Temp;
use crate::vfs::{FsResult, Ino};
use std::collections::{BTreeMap, BTreeSet};

/// A file's node tree: node ids with their block addresses, and data blocks with their owner.
#[derive(Default)]
struct Tree {
    nodes: BTreeMap<Nid, BlkAddr>,
    data: BTreeMap<BlkAddr, Summary>,
}

impl Fs {
    /// Follows the warm node log from the checkpoint and applies what fsync made durable;
    /// `durable_offsets` holds each main-area zone's write pointer (offset) as the device
    /// came up. Returns whether anything was recovered.
    pub(crate) async fn roll_forward(
        &self,
        cp: &Checkpoint,
        durable_offsets: &[u32],
    ) -> FsResult<bool> {
        let start = cp.cursegs[Temp::WarmNode as usize];
        let layout = self.inner.st.borrow().segs.layout.clone();
        if start.zone >= layout.sb.main_zones || start.offset >= layout.blocks_per_zone {
            return Ok(false);
        }
        let mut addr = layout.addr(start.zone, start.offset);
        // Every marked copy of each node, oldest first.
        let mut found: BTreeMap<Nid, Vec<(BlkAddr, Node)>> = BTreeMap::new();
        // Per inode: the place in the log of its last fsynced node, its own block preferred.
        let mut last: BTreeMap<u32, (bool, usize)> = BTreeMap::new();
        let mut seen = BTreeSet::new();
        while addr != NULL_ADDR && seen.insert(addr) && layout.locate(addr).is_some() {
            let Ok(d) = self.inner.dev.read(addr as u64, 1, Traffic::Node).await else {
                break;
            };
            let Ok(node) = Node::decode(&d.bytes) else {
                break;
            };
            if node.footer.cp_ver != cp.version {
                break;
            }
            let next = node.footer.next;
            if node.footer.flags & FLAG_FSYNC != 0 {
                let ino = node.footer.ino;
                let own = node.footer.nid == ino;
                let place = (own, seen.len());
                last.entry(ino)
                    .and_modify(|p| {
                        if own || !p.0 {
                            *p = place;
                        }
                    })
                    .or_insert(place);
                found.entry(node.footer.nid).or_default().push((addr, node));
            }
            addr = next;
        }
        if found.is_empty() {
            return Ok(false);
        }
        let found = self.durable_copies(found, durable_offsets);
        // In the order of the log, as F2FS restores each file's directory entry where its
        // last fsynced inode block lies: a name fsynced for two files since the checkpoint
        // (the first unlinked in between) ends with the second.
        let mut order: Vec<(usize, u32)> = last.iter().map(|(&ino, &(_, at))| (at, ino)).collect();
        order.sort_unstable();
        for (_, ino) in order {
            self.recover_inode(ino, &found).await?;
        }
        Ok(true)
    }

    /// For each node, the copy to recover (see the module's doc): the newest whose data blocks
    /// the device holds, else the newest with the blocks it lost as holes (marked `true`: it
    /// differs from its block and must be written again). Called before any file is recovered,
    /// while the SIT is the checkpoint's.
    pub(crate) fn durable_copies(
        &self,
        found: BTreeMap<Nid, Vec<(BlkAddr, Node)>>,
        durable_offsets: &[u32],
    ) -> BTreeMap<Nid, (BlkAddr, Node, bool)> {
        let st = self.inner.st.borrow();
        let segs = &st.segs;
        let held = |a: BlkAddr| {
            a == NULL_ADDR
                || segs.is_valid(a)
                || segs
                    .layout
                    .locate(a)
                    .is_some_and(|(z, off)| off < durable_offsets[z as usize])
        };
        found
            .into_iter()
            .map(|(nid, mut copies)| {
                let whole = copies
                    .iter()
                    .rposition(|(_, n)| n.addrs.iter().all(|&a| held(a)));
                let (addr, mut node) = match whole {
                    Some(i) => copies.swap_remove(i),
                    None => copies.pop().expect("a node found has a copy"),
                };
                let mut holed = false;
                for a in node.addrs.iter_mut().filter(|a| !held(**a)) {
                    *a = NULL_ADDR;
                    holed = true;
                }
                (nid, (addr, node, holed))
            })
            .collect()
    }

    /// The node tree of `ino` as the NAT and node cache describe it now.
    async fn tree_of(&self, ino: u32) -> FsResult<Tree> {
        let mut t = Tree::default();
        let exists = self.inner.st.borrow().nat.entries[ino as usize].ino == ino;
        if !exists {
            return Ok(t);
        }
        let mut stack = vec![ino as Nid];
        while let Some(nid) = stack.pop() {
            self.ensure_node(nid).await?;
            let st = self.inner.st.borrow();
            t.nodes.insert(nid, st.nat.entries[nid as usize].addr);
            let n = st.cache.node(nid).expect("resident");
            for (slot, &a) in n.addrs.iter().enumerate() {
                if a != NULL_ADDR {
                    t.data.insert(
                        a,
                        Summary {
                            nid,
                            ofs: slot as u16,
                        },
                    );
                }
            }
            match &n.body {
                NodeBody::Inode(i) => stack.extend(i.nids.iter().filter(|&&c| c != 0)),
                NodeBody::Indirect(v) => stack.extend(v.iter().filter(|&&c| c != 0)),
                NodeBody::Direct => {}
            }
        }
        Ok(t)
    }

    async fn recover_inode(
        &self,
        ino: u32,
        found: &BTreeMap<Nid, (BlkAddr, Node, bool)>,
    ) -> FsResult<()> {
        let old = self.tree_of(ino).await?;
        let t = self.inner.sim.now().0;
        let mut dent = None;
        {
            let mut st = self.inner.st.borrow_mut();
            for (&nid, (addr, node, holed)) in
                found.iter().filter(|(_, (_, n, _))| n.footer.ino == ino)
            {
                if nid as usize >= st.nat.entries.len() {
                    continue;
                }
                st.nat.set(nid, NatEntry { ino, addr: *addr });
                st.nat.free.remove(&nid);
                st.nat.next_nid = st.nat.next_nid.max(nid + 1);
                st.cache.drop_node(nid);
                st.cache.put_node(nid, node.clone(), *holed);
                if nid == ino && node.footer.flags & FLAG_DENT != 0 {
                    let i = node.inode().expect("an inode's own node");
                    dent = Some((i.parent as Ino, i.name.clone(), i.kind));
                }
            }
        }
        let new = self.tree_of(ino).await?;
        {
            let mut st = self.inner.st.borrow_mut();
            let st = &mut *st;
            for (nid, &a) in &old.nodes {
                if new.nodes.get(nid) != Some(&a) {
                    st.segs.invalidate(a, Summary { nid: *nid, ofs: 0 }, t);
                }
                if !new.nodes.contains_key(nid) {
                    st.nat.set(*nid, NatEntry::default());
                    st.nat.valid_nodes -= 1;
                    st.nat.free.insert(*nid);
                }
            }
            for (nid, &a) in &new.nodes {
                if old.nodes.get(nid) != Some(&a) && a != NULL_ADDR && !st.segs.is_valid(a) {
                    st.segs.validate(a, Summary { nid: *nid, ofs: 0 }, t);
                }
                if !old.nodes.contains_key(nid) {
                    st.nat.valid_nodes += 1;
                    if *nid == ino {
                        st.nat.valid_inodes += 1;
                    }
                }
            }
            for (&a, &owner) in &old.data {
                if !new.data.contains_key(&a) {
                    st.segs.invalidate(a, owner, t);
                }
            }
            for (&a, &owner) in &new.data {
                if !old.data.contains_key(&a) && !st.segs.is_valid(a) {
                    st.segs.validate(a, owner, t);
                }
            }
        }
        // The directory entry of a file created after the checkpoint.
        if let Some((parent, name, kind)) = dent {
            let name = String::from_utf8_lossy(&name).into_owned();
            let parent_ok = {
                let st = self.inner.st.borrow();
                st.nat
                    .entries
                    .get(parent as usize)
                    .is_some_and(|e| e.ino == parent as u32)
            };
            if parent_ok && self.load_dir(parent).await.is_ok() {
                match self.dir_entry(parent, &name) {
                    Some((other, _)) if other == ino => {}
                    present => {
                        // The name meant this inode when it was fsynced: an older inode
                        // under it (unlinked since the checkpoint) gives way.
                        if let Some((other, okind)) = present {
                            self.dir_remove(parent, &name).await?;
                            if okind == crate::vfs::FileKind::Dir {
                                self.modify_inode(parent, |i| i.nlink -= 1).await?;
                            }
                            self.drop_link(other as Ino).await?;
                        }
                        self.dir_add(parent, &name, ino, kind).await?;
                    }
                }
            }
        }
        Ok(())
    }
}
