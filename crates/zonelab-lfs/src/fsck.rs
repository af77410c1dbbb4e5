//! fsck: every invariant of the file system, checked on a mounted instance (after a workload)
//! or on a fresh mount of an image.
//!
//! Checked: every allocated node's NAT address is a valid block whose summary names the node;
//! every data address in a node is a valid block whose summary names that node and slot; no
//! block is owned twice; SIT valid counts equal the blocks reached from the NAT; directory
//! entries point at live inodes of the right kind and link counts match the entries; every
//! inode's parent chain reaches the root.

use crate::fs::Fs;
use crate::ondisk::{NULL_ADDR, Nid, NodeBody};
use crate::vfs::{FileKind, FileSystem, FsResult, Ino, ROOT_INO};
use std::collections::{BTreeMap, BTreeSet};

/// Problems found (empty when clean).
pub async fn check_mounted(fs: &Fs) -> FsResult<Vec<String>> {
    let mut problems = Vec::new();
    let (entries, layout) = {
        let st = fs.inner.st.borrow();
        (st.nat.entries.clone(), st.segs.layout.clone())
    };
    let mut owned: BTreeSet<u32> = BTreeSet::new();
    let mut inodes = Vec::new();
    for (nid, e) in entries.iter().enumerate() {
        if e.ino == 0 {
            continue;
        }
        let nid = nid as Nid;
        if e.ino == nid {
            inodes.push(nid as Ino);
        }
        if e.addr != NULL_ADDR {
            let st = fs.inner.st.borrow();
            if !st.segs.is_valid(e.addr) {
                problems.push(format!(
                    "node {nid} at block {} which the SIT calls free",
                    e.addr
                ));
            } else if st.segs.owner(e.addr).nid != nid {
                problems.push(format!(
                    "summary of block {} does not name node {nid}",
                    e.addr
                ));
            }
            drop(st);
            claim(&mut owned, e.addr, || format!("node {nid}"), &mut problems);
        }
        if let Err(err) = fs.ensure_node(nid).await {
            problems.push(format!("node {nid}: {err}"));
            continue;
        }
        let st = fs.inner.st.borrow();
        let Some(n) = st.cache.node(nid) else {
            continue;
        };
        if n.footer.nid != nid || n.footer.ino != e.ino {
            problems.push(format!(
                "node {nid} footer names node {} of inode {}",
                n.footer.nid, n.footer.ino
            ));
        }
        let addrs = n.addrs.clone();
        let is_indirect = matches!(n.body, NodeBody::Indirect(_));
        for (slot, &a) in addrs.iter().enumerate() {
            if a == NULL_ADDR {
                continue;
            }
            if is_indirect {
                problems.push(format!("indirect node {nid} holds a data address"));
                continue;
            }
            if !st.segs.is_valid(a) {
                problems.push(format!("node {nid} slot {slot} points at free block {a}"));
                continue;
            }
            let s = st.segs.owner(a);
            if s.nid != nid || s.ofs as usize != slot {
                problems.push(format!(
                    "summary of block {a} names node {} slot {}, not node {nid} slot {slot}",
                    s.nid, s.ofs
                ));
            }
            claim(
                &mut owned,
                a,
                || format!("node {nid} slot {slot}"),
                &mut problems,
            );
        }
    }
    // SIT counts against what the NAT reaches.
    {
        let st = fs.inner.st.borrow();
        let total: u64 = st.segs.valid_blocks;
        let reached = owned.len() as u64;
        if total != reached {
            problems.push(format!(
                "SIT counts {total} valid blocks; nodes reach {reached}"
            ));
        }
        for (seg, e) in st.segs.sit.iter().enumerate() {
            let ones: u32 = e.bitmap.iter().map(|w| w.count_ones()).sum();
            if ones != e.valid {
                problems.push(format!(
                    "segment {seg}: count {} but bitmap {ones}",
                    e.valid
                ));
            }
        }
        let _ = layout;
    }
    // Directory tree: entries, link counts, kinds.
    let mut links: BTreeMap<Ino, u32> = BTreeMap::new();
    let mut subdirs: BTreeMap<Ino, u32> = BTreeMap::new();
    let mut stack = vec![ROOT_INO];
    let mut seen = BTreeSet::new();
    while let Some(d) = stack.pop() {
        if !seen.insert(d) {
            problems.push(format!("directory {d} reached twice"));
            continue;
        }
        let ents = match fs.readdir(d).await {
            Ok(v) => v,
            Err(e) => {
                problems.push(format!("directory {d}: {e}"));
                continue;
            }
        };
        for ent in ents {
            match fs.getattr(ent.ino).await {
                Ok(a) if a.kind != ent.kind => problems.push(format!(
                    "entry {:?} in {d} says {:?}, inode {} is {:?}",
                    ent.name, ent.kind, ent.ino, a.kind
                )),
                Ok(_) => {}
                Err(e) => {
                    problems.push(format!(
                        "entry {:?} in {d} -> inode {}: {e}",
                        ent.name, ent.ino
                    ));
                    continue;
                }
            }
            *links.entry(ent.ino).or_default() += 1;
            if ent.kind == FileKind::Dir {
                *subdirs.entry(d).or_default() += 1;
                stack.push(ent.ino);
            }
        }
    }
    for ino in inodes {
        let a = match fs.getattr(ino).await {
            Ok(a) => a,
            Err(e) => {
                problems.push(format!("inode {ino}: {e}"));
                continue;
            }
        };
        let expect = if a.kind == FileKind::Dir {
            2 + subdirs.get(&ino).copied().unwrap_or(0)
        } else {
            links.get(&ino).copied().unwrap_or(0)
        };
        if ino != ROOT_INO && !links.contains_key(&ino) {
            problems.push(format!("inode {ino} is in no directory (lost)"));
        } else if a.nlink != expect {
            problems.push(format!(
                "inode {ino} has nlink {} but {expect} links",
                a.nlink
            ));
        }
    }
    Ok(problems)
}

/// Records that `owner()` points at block `a`; a second owner is a problem.
fn claim(
    owned: &mut BTreeSet<u32>,
    a: u32,
    owner: impl FnOnce() -> String,
    problems: &mut Vec<String>,
) {
    if !owned.insert(a) {
        problems.push(format!("block {a} owned twice (again by {})", owner()));
    }
}
