//! fsck: every invariant of the file system, checked on a mounted instance (after a workload)
//! or on a fresh mount of an image.
//!
//! Checked: every allocated node's NAT address is a valid block whose summary names the node;
//! every data address in a node is a valid block whose summary names that node and slot; no
//! block is owned twice; SIT valid counts equal the blocks reached from the NAT; directory
//! entries point at live inodes of the right kind and link counts match the entries; every
//! inode's parent chain reaches the root. At rest (a fresh mount, nothing in flight), also
//! that both superblock copies are intact and that every valid block is data the zoned device
//! still holds.

use crate::fs::{Fs, superblock_copy};
use crate::ondisk::{NULL_ADDR, Nid, NodeBody};
use crate::vfs::{FileKind, FileSystem, FsResult, Ino, ROOT_INO};
use std::collections::{BTreeMap, BTreeSet};
use zonelab_device::ZoneState;

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
        // The log each zone's segments name (seed 000 §3.3: threaded logging reopens only its
        // own log's zones) is one log, the one the zone is known to have.
        for z in 0..layout.sb.main_zones {
            let named: BTreeSet<_> = st
                .segs
                .zone_sit(z)
                .iter()
                .filter_map(|e| e.log)
                .chain(st.segs.zone_temp[z as usize].filter(|_| st.segs.zone_valid(z) > 0))
                .collect();
            if named.len() > 1 {
                problems.push(format!(
                    "zone {z}: its segments' SIT entries and the file system name logs {named:?}"
                ));
            }
        }
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

/// Problems only a file system at rest can be checked for (a fresh mount, before anything it
/// starts reaches the device): on a running one, a block is valid from its allocation, before
/// its write reaches the zoned device.
///
/// - Both superblock copies decode and agree: mount uses the first intact one, so a damaged
///   copy is otherwise silent, and nothing is left for the next damage. (The two checkpoint
///   packs are not compared: the older one is legitimately torn after a power cut during a
///   checkpoint.)
/// - Every block the SIT calls valid lies in data its zone holds: below the zone's written
///   part (a zone reset or finished behind the file system's back holds zeros there), and not
///   in an offline zone (unreadable). Reads of such blocks succeed, so nothing else notices
///   that the files' data is gone.
pub async fn check_at_rest(fs: &Fs) -> FsResult<Vec<String>> {
    // First, before anything awaits (and lets the file system's background work begin).
    let mut problems = check_zones_hold_valid_blocks(fs);
    let sb = fs.inner.st.borrow().segs.layout.sb.clone();
    for copy in [0u64, 1] {
        match superblock_copy(&fs.inner.dev, copy).await {
            Ok(s) if s == sb => {}
            Ok(_) => problems.push(format!(
                "superblock copy {copy} differs from the one mounted: the copies must be equal (there is no repair: save the files, then `zonelab mkfs --force`)"
            )),
            Err(e) => problems.push(format!(
                "superblock copy {copy} is damaged ({e}); the file system mounts from the other copy, but has no spare left"
            )),
        }
    }
    Ok(problems)
}

/// Valid blocks against the zoned device's zones (see [`check_at_rest`]); one problem per zone.
/// Cheap enough for every mount, which warns of them as F2FS does of valid blocks beyond a
/// zone's write pointer.
pub fn check_zones_hold_valid_blocks(fs: &Fs) -> Vec<String> {
    let st = fs.inner.st.borrow();
    let segs = &st.segs;
    let layout = &segs.layout;
    let ns = fs.inner.dev.stack.device().borrow();
    let Some(dev) = ns.zoned() else {
        return vec!["the file system is not on a zoned device".into()];
    };
    let base = layout.zoned_base();
    let mut problems = Vec::new();
    for z in 0..layout.sb.main_zones {
        if segs.zone_valid(z) == 0 {
            continue;
        }
        let id = layout.zone_id(z);
        let zone = dev.zone(id);
        if zone.is_conventional() || dev.is_tl_open(id) {
            continue;
        }
        let offline = zone.state == ZoneState::Offline;
        let held = zone.start.0 + zone.written;
        let mut lost = (0..layout.blocks_per_zone)
            .map(|off| layout.addr(z, off))
            .filter(|&a| segs.is_valid(a) && (offline || a as u64 - base >= held));
        let Some(first) = lost.next() else { continue };
        let lost = 1 + lost.count();
        let s = segs.owner(first);
        let ino = st.nat.entries.get(s.nid as usize).map_or(0, |e| e.ino);
        let why = if offline {
            "is offline, so they cannot be read".to_string()
        } else {
            format!(
                "holds only {} written blocks ({}), so they read back as zeros: the zone was reset or finished behind the file system",
                zone.written,
                zone.state.name()
            )
        };
        problems.push(format!(
            "zone {} (LBA {:#x}): {lost} blocks the SIT calls valid are lost, the first block {first} of inode {ino} (node {} slot {}); the zone {why}",
            id.0, zone.start.0, s.nid, s.ofs
        ));
    }
    problems
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
