//! On-media format: every metadata block is 4 KiB, starts with a magic number naming what it
//! is, and ends with a CRC-32 of the rest, so a torn or foreign block is refused rather than
//! half-read. Integers are little-endian. The structures follow F2FS (seed 000 §2.3, Fig. 2):
//! superblock, checkpoint pack, NAT, SIT and SSA blocks, node blocks (inode, direct, indirect)
//! with a footer, and directory (dentry) blocks; the encodings are ZoneLab's own.

use crate::vfs::{FileKind, FsError, FsResult};

/// File-system block size in bytes (one device LBA; mkfs refuses other LBA sizes).
pub const BLOCK: usize = 4096;
/// Bytes of a block before its CRC.
pub const BODY: usize = BLOCK - 4;

/// Block addresses are device LBAs; 0 (the superblock) is never a data or node address.
pub type BlkAddr = u32;
pub const NULL_ADDR: BlkAddr = 0;

/// Node ids index the NAT; 0 is "none".
pub type Nid = u32;

pub const MAGIC_SUPER: u32 = 0x5a4c_5342; // "ZLSB"
pub const MAGIC_CP: u32 = 0x5a4c_4350; // "ZLCP"
pub const MAGIC_NAT: u32 = 0x5a4c_4e41;
pub const MAGIC_SIT: u32 = 0x5a4c_5349;
pub const MAGIC_SSA: u32 = 0x5a4c_5353;
pub const MAGIC_NODE: u32 = 0x5a4c_4e44;
pub const MAGIC_DENT: u32 = 0x5a4c_4445;

/// Format version of this encoding.
pub const FORMAT_VERSION: u32 = 1;

/// Data block addresses held by an inode (F2FS keeps 923; ours leave room for the name).
pub const INODE_ADDRS: usize = 860;
/// Data block addresses held by a direct node, and node ids by an indirect node.
pub const NODE_ENTRIES: usize = 1000;
/// Node ids in an inode: two direct, two indirect, one double-indirect (as F2FS).
pub const INODE_NIDS: usize = 5;

/// Footer flag: node written by fsync (roll-forward recovers it).
pub const FLAG_FSYNC: u32 = 1;
/// Footer flag: the inode's directory entry must be recovered with it.
pub const FLAG_DENT: u32 = 2;

fn corrupt(what: &str, why: impl std::fmt::Display) -> FsError {
    FsError::Corrupt(format!("{what}: {why}"))
}

/// Little-endian writer into one block body.
pub struct Enc {
    buf: Vec<u8>,
}

impl Enc {
    pub fn new(magic: u32) -> Enc {
        let mut e = Enc {
            buf: Vec::with_capacity(BLOCK),
        };
        e.u32(magic);
        e
    }
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// Pads to a block and seals it with the CRC. The body must fit (a model invariant: the
    /// encoders below bound their contents).
    pub fn finish(mut self) -> Vec<u8> {
        assert!(
            self.buf.len() <= BODY,
            "block body of {} bytes overflows {BODY}",
            self.buf.len()
        );
        self.buf.resize(BODY, 0);
        let crc = crc32fast::hash(&self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

/// Bounds-checked little-endian reader of one sealed block.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Dec<'a> {
    /// Checks length, CRC and magic.
    pub fn open(buf: &'a [u8], magic: u32, what: &'static str) -> FsResult<Dec<'a>> {
        if buf.len() != BLOCK {
            return Err(corrupt(
                what,
                format!("block of {} bytes, expected {BLOCK}", buf.len()),
            ));
        }
        if buf.iter().all(|&b| b == 0) {
            return Err(corrupt(what, "blank block (never written)"));
        }
        let stored = u32::from_le_bytes(buf[BODY..].try_into().expect("4 bytes"));
        if crc32fast::hash(&buf[..BODY]) != stored {
            return Err(corrupt(what, "checksum mismatch"));
        }
        let mut d = Dec {
            buf: &buf[..BODY],
            pos: 0,
            what,
        };
        let m = d.u32()?;
        if m != magic {
            return Err(corrupt(what, format!("magic {m:#x}, expected {magic:#x}")));
        }
        Ok(d)
    }
    fn take(&mut self, n: usize) -> FsResult<&'a [u8]> {
        if self.pos + n > self.buf.len() {
            return Err(corrupt(self.what, "field runs past the block"));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub fn u8(&mut self) -> FsResult<u8> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> FsResult<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    pub fn u32(&mut self) -> FsResult<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    pub fn u64(&mut self) -> FsResult<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    pub fn bytes(&mut self, n: usize) -> FsResult<&'a [u8]> {
        self.take(n)
    }
    pub fn err(&self, why: impl std::fmt::Display) -> FsError {
        corrupt(self.what, why)
    }
}

fn kind_code(k: FileKind) -> u8 {
    match k {
        FileKind::File => 1,
        FileKind::Dir => 2,
        FileKind::Symlink => 3,
    }
}

fn kind_of(c: u8, d: &Dec) -> FsResult<FileKind> {
    Ok(match c {
        1 => FileKind::File,
        2 => FileKind::Dir,
        3 => FileKind::Symlink,
        _ => return Err(d.err(format!("unknown file kind {c}"))),
    })
}

/// Where everything is, fixed at mkfs (all in LBAs of 4 KiB).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub version: u32,
    /// Device LBAs in total and the zone size, to refuse a different device.
    pub device_lbas: u64,
    pub zone_size: u64,
    /// Checkpoint packs: two, each `cp_blocks` long, at `cp_start` and `cp_start + cp_blocks`.
    pub cp_start: u64,
    pub cp_blocks: u32,
    /// SIT: two copies of `sit_blocks` blocks each (copy 1 right after copy 0).
    pub sit_start: u64,
    pub sit_blocks: u32,
    /// NAT: two copies of `nat_blocks` blocks each.
    pub nat_start: u64,
    pub nat_blocks: u32,
    /// SSA: `ssa_per_seg` blocks per segment, segment by segment.
    pub ssa_start: u64,
    pub ssa_per_seg: u32,
    /// Main area: zones `main_first_zone ..` (`main_zones` of them), each holding
    /// `segs_per_zone` segments of `blocks_per_seg` blocks from its start.
    pub main_first_zone: u32,
    pub main_zones: u32,
    pub segs_per_zone: u32,
    pub blocks_per_seg: u32,
    /// Node ids available (NAT entries).
    pub max_nids: u32,
    /// 0 = full payload, 1 = fingerprint payload.
    pub payload: u8,
    /// Blocks of the companion conventional device holding the metadata areas, or 0 when they
    /// are on conventional zones of the zoned device. With a companion the address space is
    /// the companion's blocks first, then the zoned device's (mkfs.f2fs -c, as on drives
    /// without conventional zones); mount refuses a companion of another size. Encoded last,
    /// so a superblock from before the field reads as 0 from the zero padding.
    pub companion_lbas: u64,
}

impl Superblock {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new(MAGIC_SUPER);
        e.u32(self.version);
        e.u64(self.device_lbas);
        e.u64(self.zone_size);
        e.u64(self.cp_start);
        e.u32(self.cp_blocks);
        e.u64(self.sit_start);
        e.u32(self.sit_blocks);
        e.u64(self.nat_start);
        e.u32(self.nat_blocks);
        e.u64(self.ssa_start);
        e.u32(self.ssa_per_seg);
        e.u32(self.main_first_zone);
        e.u32(self.main_zones);
        e.u32(self.segs_per_zone);
        e.u32(self.blocks_per_seg);
        e.u32(self.max_nids);
        e.u8(self.payload);
        e.u64(self.companion_lbas);
        e.finish()
    }
    pub fn decode(b: &[u8]) -> FsResult<Superblock> {
        let mut d = Dec::open(b, MAGIC_SUPER, "superblock")?;
        let sb = Superblock {
            version: d.u32()?,
            device_lbas: d.u64()?,
            zone_size: d.u64()?,
            cp_start: d.u64()?,
            cp_blocks: d.u32()?,
            sit_start: d.u64()?,
            sit_blocks: d.u32()?,
            nat_start: d.u64()?,
            nat_blocks: d.u32()?,
            ssa_start: d.u64()?,
            ssa_per_seg: d.u32()?,
            main_first_zone: d.u32()?,
            main_zones: d.u32()?,
            segs_per_zone: d.u32()?,
            blocks_per_seg: d.u32()?,
            max_nids: d.u32()?,
            payload: d.u8()?,
            companion_lbas: d.u64()?,
        };
        if sb.version != FORMAT_VERSION {
            return Err(d.err(format!(
                "format version {} (this ZoneLab reads version {FORMAT_VERSION})",
                sb.version
            )));
        }
        if sb.blocks_per_seg == 0 || sb.segs_per_zone == 0 || sb.cp_blocks < 2 {
            return Err(d.err("zero-sized area"));
        }
        Ok(sb)
    }
}

/// One log's position at a checkpoint: its zone (main-area index) and next block offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CursegState {
    pub zone: u32,
    pub offset: u32,
}

/// The checkpoint: the file system's consistent state (seed 000 §2.3). Encoded over several
/// blocks: a head block, payload blocks, and a tail repeating the version; a pack is valid
/// only when head and tail agree and every block's checksum holds.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Checkpoint {
    pub version: u64,
    /// Virtual time of the checkpoint (ns): the age origin of segments after mount.
    pub time: u64,
    pub cursegs: [CursegState; 6],
    pub next_nid: u32,
    pub valid_nodes: u64,
    pub valid_inodes: u64,
    pub valid_blocks: u64,
    /// Per NAT block and per SIT block, which of the two copies is current.
    pub nat_copy: Vec<bool>,
    pub sit_copy: Vec<bool>,
    /// Inodes unlinked while open (none survive a clean unmount).
    pub orphans: Vec<u32>,
}

fn pack_bits(bits: &[bool]) -> Vec<u8> {
    let mut v = vec![0u8; bits.len().div_ceil(8)];
    for (i, &b) in bits.iter().enumerate() {
        if b {
            v[i / 8] |= 1 << (i % 8);
        }
    }
    v
}

fn unpack_bits(bytes: &[u8], n: usize) -> Vec<bool> {
    (0..n).map(|i| bytes[i / 8] >> (i % 8) & 1 == 1).collect()
}

impl Checkpoint {
    /// Payload bytes per checkpoint block (after magic, version, index, count, length).
    const CHUNK: usize = BODY - 4 - 8 - 4 - 4 - 4;

    fn payload(&self) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&self.time.to_le_bytes());
        for c in &self.cursegs {
            p.extend_from_slice(&c.zone.to_le_bytes());
            p.extend_from_slice(&c.offset.to_le_bytes());
        }
        p.extend_from_slice(&self.next_nid.to_le_bytes());
        p.extend_from_slice(&self.valid_nodes.to_le_bytes());
        p.extend_from_slice(&self.valid_inodes.to_le_bytes());
        p.extend_from_slice(&self.valid_blocks.to_le_bytes());
        for bits in [&self.nat_copy, &self.sit_copy] {
            p.extend_from_slice(&(bits.len() as u32).to_le_bytes());
            p.extend_from_slice(&pack_bits(bits));
        }
        p.extend_from_slice(&(self.orphans.len() as u32).to_le_bytes());
        for o in &self.orphans {
            p.extend_from_slice(&o.to_le_bytes());
        }
        p
    }

    /// Blocks a pack needs for `nat_blocks` and `sit_blocks` copy bits and `orphans` orphans
    /// (head and tail included).
    pub fn blocks_needed(nat_blocks: u32, sit_blocks: u32, orphans: usize) -> u32 {
        let payload = 8
            + 6 * 8
            + 4
            + 24
            + 8
            + (nat_blocks as usize).div_ceil(8)
            + (sit_blocks as usize).div_ceil(8)
            + 4
            + 4 * orphans;
        payload.div_ceil(Self::CHUNK) as u32 + 1
    }

    /// The pack's blocks: payload chunks, each stamped with the version, then the tail.
    pub fn encode(&self) -> Vec<Vec<u8>> {
        let payload = self.payload();
        let chunks: Vec<&[u8]> = payload.chunks(Self::CHUNK).collect();
        let n = chunks.len() as u32;
        let mut out = Vec::new();
        for (i, c) in chunks.iter().enumerate() {
            let mut e = Enc::new(MAGIC_CP);
            e.u64(self.version);
            e.u32(i as u32);
            e.u32(n);
            e.u32(c.len() as u32);
            e.bytes(c);
            out.push(e.finish());
        }
        let mut tail = Enc::new(MAGIC_CP);
        tail.u64(self.version);
        tail.u32(u32::MAX);
        tail.u32(n);
        tail.u32(0);
        out.push(tail.finish());
        out
    }

    /// Decodes a pack from its blocks (at least as many as it says it has, plus the tail).
    pub fn decode(blocks: &[Vec<u8>]) -> FsResult<Checkpoint> {
        let first = blocks
            .first()
            .ok_or_else(|| corrupt("checkpoint", "empty pack"))?;
        let mut d = Dec::open(first, MAGIC_CP, "checkpoint")?;
        let version = d.u64()?;
        let _ = d.u32()?;
        let n = d.u32()? as usize;
        if n == 0 || n + 1 > blocks.len() {
            return Err(corrupt("checkpoint", format!("pack of {n} blocks")));
        }
        let mut payload = Vec::new();
        for (i, b) in blocks[..n].iter().enumerate() {
            let mut d = Dec::open(b, MAGIC_CP, "checkpoint")?;
            if d.u64()? != version || d.u32()? != i as u32 || d.u32()? as usize != n {
                return Err(corrupt("checkpoint", "torn pack (block versions differ)"));
            }
            let len = d.u32()? as usize;
            if len > Self::CHUNK {
                return Err(corrupt("checkpoint", "chunk too long"));
            }
            payload.extend_from_slice(d.bytes(len)?);
        }
        let mut t = Dec::open(&blocks[n], MAGIC_CP, "checkpoint tail")?;
        if t.u64()? != version || t.u32()? != u32::MAX || t.u32()? as usize != n {
            return Err(corrupt(
                "checkpoint",
                "tail does not match head (torn write)",
            ));
        }
        let mut r = Rd(&payload, 0);
        let time = r.u64()?;
        let mut cursegs = [CursegState::default(); 6];
        for c in cursegs.iter_mut() {
            c.zone = r.u32()?;
            c.offset = r.u32()?;
        }
        let next_nid = r.u32()?;
        let valid_nodes = r.u64()?;
        let valid_inodes = r.u64()?;
        let valid_blocks = r.u64()?;
        let mut copies = Vec::new();
        for _ in 0..2 {
            let n = r.u32()? as usize;
            let bytes = r.bytes(n.div_ceil(8))?;
            copies.push(unpack_bits(bytes, n));
        }
        let norph = r.u32()? as usize;
        let mut orphans = Vec::with_capacity(norph.min(1 << 16));
        for _ in 0..norph {
            orphans.push(r.u32()?);
        }
        let sit_copy = copies.pop().expect("two");
        let nat_copy = copies.pop().expect("two");
        Ok(Checkpoint {
            version,
            time,
            cursegs,
            next_nid,
            valid_nodes,
            valid_inodes,
            valid_blocks,
            nat_copy,
            sit_copy,
            orphans,
        })
    }
}

/// Reader over a checkpoint payload.
struct Rd<'a>(&'a [u8], usize);
impl<'a> Rd<'a> {
    fn bytes(&mut self, n: usize) -> FsResult<&'a [u8]> {
        if self.1 + n > self.0.len() {
            return Err(corrupt("checkpoint", "payload ends early"));
        }
        let s = &self.0[self.1..self.1 + n];
        self.1 += n;
        Ok(s)
    }
    fn u32(&mut self) -> FsResult<u32> {
        Ok(u32::from_le_bytes(self.bytes(4)?.try_into().expect("4")))
    }
    fn u64(&mut self) -> FsResult<u64> {
        Ok(u64::from_le_bytes(self.bytes(8)?.try_into().expect("8")))
    }
}

/// NAT entry: which inode a node belongs to and where the node block is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NatEntry {
    pub ino: u32,
    pub addr: BlkAddr,
}

/// NAT entries per block.
pub const NAT_PER_BLOCK: usize = (BODY - 8) / 8;

pub fn encode_nat(block_index: u32, entries: &[NatEntry]) -> Vec<u8> {
    assert!(entries.len() <= NAT_PER_BLOCK);
    let mut e = Enc::new(MAGIC_NAT);
    e.u32(block_index);
    for n in entries {
        e.u32(n.ino);
        e.u32(n.addr);
    }
    e.finish()
}

pub fn decode_nat(b: &[u8], block_index: u32) -> FsResult<Vec<NatEntry>> {
    let mut d = Dec::open(b, MAGIC_NAT, "NAT block")?;
    if d.u32()? != block_index {
        return Err(d.err(format!("not NAT block {block_index}")));
    }
    (0..NAT_PER_BLOCK)
        .map(|_| {
            Ok(NatEntry {
                ino: d.u32()?,
                addr: d.u32()?,
            })
        })
        .collect()
}

/// The six logs, in checkpoint order (F2FS's CURSEG_* numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Temp {
    HotData = 0,
    WarmData = 1,
    ColdData = 2,
    HotNode = 3,
    WarmNode = 4,
    ColdNode = 5,
}

impl Temp {
    pub const ALL: [Temp; 6] = [
        Temp::HotData,
        Temp::WarmData,
        Temp::ColdData,
        Temp::HotNode,
        Temp::WarmNode,
        Temp::ColdNode,
    ];
}

/// SIT entry of one segment: valid blocks, their bitmap, the last modification time, and the
/// log that wrote the valid blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SitEntry {
    pub valid: u32,
    pub mtime: u64,
    pub bitmap: Vec<u64>,
    /// The log that wrote the segment's blocks, while it holds a valid one (F2FS keeps a
    /// segment's type in its SIT entry, above the valid count). Threaded logging reopens only
    /// its own log's zones (seed 000 §3.3), so a remount must know them. `None` for a segment
    /// without valid blocks, for blocks roll-forward recovered into a zone whose log mount did
    /// not know, and in images from before the field (whose counts leave the bits zero).
    pub log: Option<Temp>,
}

/// Bits of a SIT entry's first word that hold the valid count; the log is above them.
const SIT_VALID_BITS: u32 = 24;

impl SitEntry {
    pub fn new(blocks_per_seg: u32) -> SitEntry {
        SitEntry {
            valid: 0,
            mtime: 0,
            bitmap: vec![0; (blocks_per_seg as usize).div_ceil(64)],
            log: None,
        }
    }
    pub fn is_valid(&self, off: u32) -> bool {
        self.bitmap[off as usize / 64] >> (off % 64) & 1 == 1
    }
    /// Sets or clears a block's bit; returns whether it changed.
    pub fn set(&mut self, off: u32, valid: bool) -> bool {
        let w = &mut self.bitmap[off as usize / 64];
        let bit = 1u64 << (off % 64);
        let was = *w & bit != 0;
        if was == valid {
            return false;
        }
        if valid {
            *w |= bit;
            self.valid += 1;
        } else {
            *w &= !bit;
            self.valid -= 1;
        }
        true
    }
}

/// SIT entries per block for segments of `blocks_per_seg` blocks.
pub fn sit_per_block(blocks_per_seg: u32) -> usize {
    let entry = 4 + 8 + (blocks_per_seg as usize).div_ceil(64) * 8;
    ((BODY - 8) / entry).max(1)
}

pub fn encode_sit(block_index: u32, entries: &[SitEntry]) -> Vec<u8> {
    let mut e = Enc::new(MAGIC_SIT);
    e.u32(block_index);
    for s in entries {
        assert!(s.valid < 1 << SIT_VALID_BITS, "layout keeps segments small");
        let log = s.log.map_or(0, |t| t as u32 + 1);
        e.u32(s.valid | log << SIT_VALID_BITS);
        e.u64(s.mtime);
        for w in &s.bitmap {
            e.u64(*w);
        }
    }
    e.finish()
}

pub fn decode_sit(
    b: &[u8],
    block_index: u32,
    count: usize,
    blocks_per_seg: u32,
) -> FsResult<Vec<SitEntry>> {
    let mut d = Dec::open(b, MAGIC_SIT, "SIT block")?;
    if d.u32()? != block_index {
        return Err(d.err(format!("not SIT block {block_index}")));
    }
    let words = (blocks_per_seg as usize).div_ceil(64);
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let word = d.u32()?;
        let valid = word & ((1 << SIT_VALID_BITS) - 1);
        let log = match word >> SIT_VALID_BITS {
            0 => None,
            n => Some(*Temp::ALL.get(n as usize - 1).ok_or_else(|| {
                d.err(format!("segment names log {n}; logs are numbered 1 to 6"))
            })?),
        };
        let mtime = d.u64()?;
        let bitmap = (0..words)
            .map(|_| d.u64())
            .collect::<FsResult<Vec<u64>>>()?;
        let s = SitEntry {
            valid,
            mtime,
            bitmap,
            log,
        };
        let ones: u32 = s.bitmap.iter().map(|w| w.count_ones()).sum();
        if ones != s.valid {
            return Err(d.err(format!(
                "segment counts {} valid blocks but its bitmap has {ones}",
                s.valid
            )));
        }
        if let (0, Some(t)) = (s.valid, s.log) {
            return Err(d.err(format!(
                "segment holds no valid block but names the {t:?} log"
            )));
        }
        out.push(s);
    }
    Ok(out)
}

/// SSA entry: the owner of a main-area block — the node holding its address and the index in
/// that node (F2FS's summary); for a node block, the node itself with index 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub nid: Nid,
    pub ofs: u16,
}

/// Summary entries per SSA block.
pub const SSA_PER_BLOCK: usize = (BODY - 12) / 6;

pub fn encode_ssa(seg: u32, part: u32, entries: &[Summary]) -> Vec<u8> {
    assert!(entries.len() <= SSA_PER_BLOCK);
    let mut e = Enc::new(MAGIC_SSA);
    e.u32(seg);
    e.u32(part);
    for s in entries {
        e.u32(s.nid);
        e.u16(s.ofs);
    }
    e.finish()
}

pub fn decode_ssa(b: &[u8], seg: u32, part: u32, count: usize) -> FsResult<Vec<Summary>> {
    let mut d = Dec::open(b, MAGIC_SSA, "SSA block")?;
    if d.u32()? != seg || d.u32()? != part {
        return Err(d.err(format!("not SSA block {part} of segment {seg}")));
    }
    (0..count)
        .map(|_| {
            Ok(Summary {
                nid: d.u32()?,
                ofs: d.u16()?,
            })
        })
        .collect()
}

/// The inode part of an inode block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InodeData {
    pub kind: FileKind,
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u32,
    pub size: u64,
    pub blocks: u64,
    pub atime: u64,
    pub mtime: u64,
    pub ctime: u64,
    /// Parent directory and name at creation or last rename (F2FS's i_pino/i_name), for
    /// roll-forward recovery of the directory entry.
    pub parent: u32,
    pub name: Vec<u8>,
    pub nids: [Nid; INODE_NIDS],
}

/// What a node block holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeBody {
    /// An inode with its first data addresses.
    Inode(Box<InodeData>),
    /// Data block addresses.
    Direct,
    /// Node ids of direct nodes (or of indirect nodes, for the double-indirect node).
    Indirect(Vec<Nid>),
}

/// A node block (seed 000 §2.3: "a node block contains an inode or indices of data blocks").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub body: NodeBody,
    /// Data addresses (inode: up to INODE_ADDRS; direct node: up to NODE_ENTRIES); trailing
    /// unused entries are not stored.
    pub addrs: Vec<BlkAddr>,
    pub footer: Footer,
}

/// Node footer (F2FS's node_footer): identity, file offset, fsync marks, checkpoint version
/// and the log's next block, so roll-forward can follow the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Footer {
    pub nid: Nid,
    pub ino: u32,
    /// First file block index this node maps (0 for the inode; meaningless for indirect).
    pub base: u64,
    pub flags: u32,
    pub cp_ver: u64,
    pub next: BlkAddr,
}

impl Node {
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new(MAGIC_NODE);
        let f = &self.footer;
        e.u32(f.nid);
        e.u32(f.ino);
        e.u64(f.base);
        e.u32(f.flags);
        e.u64(f.cp_ver);
        e.u32(f.next);
        let mut used = self.addrs.len();
        while used > 0 && self.addrs[used - 1] == NULL_ADDR {
            used -= 1;
        }
        match &self.body {
            NodeBody::Inode(i) => {
                assert!(used <= INODE_ADDRS && i.name.len() <= 255);
                e.u8(1);
                e.u8(kind_code(i.kind));
                e.u16(i.perm);
                e.u32(i.uid);
                e.u32(i.gid);
                e.u32(i.nlink);
                e.u64(i.size);
                e.u64(i.blocks);
                e.u64(i.atime);
                e.u64(i.mtime);
                e.u64(i.ctime);
                e.u32(i.parent);
                e.u8(i.name.len() as u8);
                e.bytes(&i.name);
                for n in i.nids {
                    e.u32(n);
                }
            }
            NodeBody::Direct => {
                assert!(used <= NODE_ENTRIES);
                e.u8(2);
            }
            NodeBody::Indirect(nids) => {
                assert!(nids.len() <= NODE_ENTRIES);
                e.u8(3);
                let mut n = nids.len();
                while n > 0 && nids[n - 1] == 0 {
                    n -= 1;
                }
                e.u16(n as u16);
                for x in &nids[..n] {
                    e.u32(*x);
                }
            }
        }
        e.u16(used as u16);
        for a in &self.addrs[..used] {
            e.u32(*a);
        }
        e.finish()
    }

    pub fn decode(b: &[u8]) -> FsResult<Node> {
        let mut d = Dec::open(b, MAGIC_NODE, "node block")?;
        let footer = Footer {
            nid: d.u32()?,
            ino: d.u32()?,
            base: d.u64()?,
            flags: d.u32()?,
            cp_ver: d.u64()?,
            next: d.u32()?,
        };
        let tag = d.u8()?;
        let (body, max) = match tag {
            1 => {
                let kind = kind_of(d.u8()?, &d)?;
                let perm = d.u16()?;
                let uid = d.u32()?;
                let gid = d.u32()?;
                let nlink = d.u32()?;
                let size = d.u64()?;
                let blocks = d.u64()?;
                let atime = d.u64()?;
                let mtime = d.u64()?;
                let ctime = d.u64()?;
                let parent = d.u32()?;
                let nl = d.u8()? as usize;
                let name = d.bytes(nl)?.to_vec();
                let mut nids = [0; INODE_NIDS];
                for n in nids.iter_mut() {
                    *n = d.u32()?;
                }
                (
                    NodeBody::Inode(Box::new(InodeData {
                        kind,
                        perm,
                        uid,
                        gid,
                        nlink,
                        size,
                        blocks,
                        atime,
                        mtime,
                        ctime,
                        parent,
                        name,
                        nids,
                    })),
                    INODE_ADDRS,
                )
            }
            2 => (NodeBody::Direct, NODE_ENTRIES),
            3 => {
                let n = d.u16()? as usize;
                if n > NODE_ENTRIES {
                    return Err(d.err("indirect node with too many entries"));
                }
                let nids = (0..n).map(|_| d.u32()).collect::<FsResult<Vec<_>>>()?;
                (NodeBody::Indirect(nids), 0)
            }
            t => return Err(d.err(format!("unknown node type {t}"))),
        };
        let used = d.u16()? as usize;
        if used > max {
            return Err(d.err(format!("{used} addresses in a node holding {max}")));
        }
        let addrs = (0..used).map(|_| d.u32()).collect::<FsResult<Vec<_>>>()?;
        Ok(Node {
            body,
            addrs,
            footer,
        })
    }

    pub fn inode(&self) -> Option<&InodeData> {
        match &self.body {
            NodeBody::Inode(i) => Some(i),
            _ => None,
        }
    }
    pub fn inode_mut(&mut self) -> Option<&mut InodeData> {
        match &mut self.body {
            NodeBody::Inode(i) => Some(i),
            _ => None,
        }
    }
}

/// One directory entry as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dentry {
    pub ino: u32,
    pub kind: FileKind,
    pub name: Vec<u8>,
}

impl Dentry {
    /// Bytes it takes in a dentry block.
    pub fn size(&self) -> usize {
        4 + 1 + 1 + self.name.len()
    }
}

/// Bytes of dentries a directory block holds.
pub const DENT_SPACE: usize = BODY - 4 - 2;

pub fn encode_dentries(entries: &[Dentry]) -> Vec<u8> {
    let mut e = Enc::new(MAGIC_DENT);
    e.u16(entries.len() as u16);
    for d in entries {
        e.u32(d.ino);
        e.u8(kind_code(d.kind));
        e.u8(d.name.len() as u8);
        e.bytes(&d.name);
    }
    e.finish()
}

pub fn decode_dentries(b: &[u8]) -> FsResult<Vec<Dentry>> {
    let mut d = Dec::open(b, MAGIC_DENT, "directory block")?;
    let n = d.u16()? as usize;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let ino = d.u32()?;
        let kind = kind_of(d.u8()?, &d)?;
        let len = d.u8()? as usize;
        let name = d.bytes(len)?.to_vec();
        if name.is_empty() || name.contains(&b'/') || name.contains(&0) {
            return Err(d.err("invalid entry name"));
        }
        out.push(Dentry { ino, kind, name });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inode() -> Node {
        Node {
            body: NodeBody::Inode(Box::new(InodeData {
                kind: FileKind::File,
                perm: 0o644,
                uid: 1,
                gid: 2,
                nlink: 1,
                size: 12345,
                blocks: 4,
                atime: 1,
                mtime: 2,
                ctime: 3,
                parent: 1,
                name: vec![b'x'; 255],
                nids: [5, 6, 7, 8, 9],
            })),
            addrs: vec![100; INODE_ADDRS],
            footer: Footer {
                nid: 4,
                ino: 4,
                base: 0,
                flags: FLAG_FSYNC,
                cp_ver: 7,
                next: 99,
            },
        }
    }

    #[test]
    fn nodes_round_trip_and_fit() {
        let n = inode();
        assert_eq!(Node::decode(&n.encode()).unwrap(), n);
        let d = Node {
            body: NodeBody::Direct,
            addrs: vec![7; NODE_ENTRIES],
            footer: Footer::default(),
        };
        assert_eq!(Node::decode(&d.encode()).unwrap(), d);
        let i = Node {
            body: NodeBody::Indirect(vec![3; NODE_ENTRIES]),
            addrs: vec![],
            footer: Footer::default(),
        };
        assert_eq!(Node::decode(&i.encode()).unwrap(), i);
    }

    #[test]
    fn corruption_is_refused() {
        let mut b = inode().encode();
        b[100] ^= 1;
        assert!(matches!(Node::decode(&b), Err(FsError::Corrupt(_))));
        assert!(Node::decode(&b[..100]).is_err());
        let sb = encode_nat(0, &[]);
        assert!(Node::decode(&sb).is_err(), "wrong magic");
        // A block never written says so, rather than a checksum mismatch.
        let e = Superblock::decode(&[0; BLOCK]).unwrap_err().to_string();
        assert!(e.contains("blank block (never written)"), "{e}");
        let mut one = vec![0; BLOCK];
        one[7] = 1;
        let e = Superblock::decode(&one).unwrap_err().to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
    }

    #[test]
    fn checkpoint_round_trips_across_blocks_and_detects_tears() {
        let cp = Checkpoint {
            version: 9,
            time: 5,
            next_nid: 77,
            nat_copy: (0..40_000).map(|i| i % 3 == 0).collect(),
            sit_copy: (0..5).map(|i| i % 2 == 0).collect(),
            orphans: vec![1, 2, 3],
            ..Default::default()
        };
        let blocks = cp.encode();
        assert_eq!(blocks.len() as u32, Checkpoint::blocks_needed(40_000, 5, 3));
        assert_eq!(Checkpoint::decode(&blocks).unwrap(), cp);
        let mut torn = blocks.clone();
        let old = Checkpoint {
            version: 8,
            ..cp.clone()
        }
        .encode();
        *torn.last_mut().unwrap() = old.last().unwrap().clone();
        assert!(Checkpoint::decode(&torn).is_err());
    }

    #[test]
    fn sit_ssa_and_dentries_round_trip() {
        let mut s = SitEntry::new(8192);
        assert!(s.set(5, true) && !s.set(5, true) && s.set(8191, true));
        let per = sit_per_block(8192);
        let mut v = vec![s.clone(); per];
        for (e, t) in v
            .iter_mut()
            .zip(Temp::ALL.into_iter().map(Some).chain([None]))
        {
            e.log = t;
        }
        assert_eq!(decode_sit(&encode_sit(3, &v), 3, per, 8192).unwrap(), v);
        let sums = vec![Summary { nid: 3, ofs: 9 }; SSA_PER_BLOCK];
        assert_eq!(
            decode_ssa(&encode_ssa(1, 2, &sums), 1, 2, SSA_PER_BLOCK).unwrap(),
            sums
        );
        let dents = vec![Dentry {
            ino: 5,
            kind: FileKind::Dir,
            name: b"abc".to_vec(),
        }];
        assert_eq!(decode_dentries(&encode_dentries(&dents)).unwrap(), dents);
    }

    /// A SIT entry's log lies above its valid count: a number past the six logs, or a log
    /// named for a segment without valid blocks, is corrupt; an entry from before the field
    /// (bits zero) names none.
    #[test]
    fn sit_entries_name_their_log() {
        let mut s = SitEntry::new(512);
        s.set(7, true);
        let word = |b: &[u8]| u32::from_le_bytes(b[8..12].try_into().unwrap());
        let block = encode_sit(0, std::slice::from_ref(&s));
        assert_eq!(word(&block), 1, "no log: the count alone");
        let read = |block: &[u8]| decode_sit(block, 0, 1, 512);
        assert_eq!(read(&block).unwrap()[0].log, None);
        s.log = Some(Temp::ColdNode);
        let block = encode_sit(0, std::slice::from_ref(&s));
        assert_eq!(word(&block), 6 << SIT_VALID_BITS | 1);
        assert_eq!(read(&block).unwrap()[0].log, Some(Temp::ColdNode));
        // encode_sit cannot name a seventh log; the block is written word by word.
        let mut bad = Enc::new(MAGIC_SIT);
        bad.u32(0);
        bad.u32(7 << SIT_VALID_BITS | 1);
        bad.u64(s.mtime);
        s.bitmap.iter().for_each(|&w| bad.u64(w));
        let e = read(&bad.finish()).unwrap_err().to_string();
        assert!(e.contains("names log 7"), "{e}");
        let mut empty = SitEntry::new(512);
        empty.log = Some(Temp::HotData);
        let e = read(&encode_sit(0, &[empty])).unwrap_err().to_string();
        assert!(
            e.contains("no valid block but names the HotData log"),
            "{e}"
        );
    }

    /// Valid encodings of every block kind, as (kind, blocks).
    fn valid_blocks() -> Vec<(usize, Vec<Vec<u8>>)> {
        use crate::layout::{DeviceShape, FormatOptions, plan};
        let shape = DeviceShape {
            lba_size: 4096,
            total_lbas: 64 * 8192,
            zone_size: 8192,
            zone_capacity: 8192,
            zones: 64,
            conventional_zones: 2,
            companion_lbas: None,
        };
        let sb = plan(shape, FormatOptions::default(), true).unwrap();
        let cp = Checkpoint {
            version: 2,
            nat_copy: vec![true; 70],
            sit_copy: vec![false, true],
            orphans: vec![4, 5],
            ..Default::default()
        };
        let mut sit = SitEntry::new(512);
        sit.set(9, true);
        vec![
            (0, vec![sb.encode()]),
            (1, cp.encode()),
            (2, vec![encode_nat(0, &[NatEntry { ino: 3, addr: 9 }; 20])]),
            (3, vec![encode_sit(0, &vec![sit; sit_per_block(512)])]),
            (4, vec![encode_ssa(0, 0, &[Summary { nid: 3, ofs: 1 }; 30])]),
            (5, vec![inode().encode()]),
            (
                5,
                vec![
                    Node {
                        body: NodeBody::Indirect(vec![3; 40]),
                        addrs: Vec::new(),
                        footer: Footer::default(),
                    }
                    .encode(),
                ],
            ),
            (
                6,
                vec![encode_dentries(&[Dentry {
                    ino: 5,
                    kind: FileKind::Symlink,
                    name: b"link".to_vec(),
                }])],
            ),
        ]
    }

    /// Runs the decoder of `kind` (and the layout check behind a superblock); any result but a
    /// panic is fine.
    fn decode_kind(kind: usize, blocks: &[Vec<u8>]) {
        match kind {
            0 => {
                if let Ok(sb) = Superblock::decode(&blocks[0]) {
                    let _ = crate::layout::Layout::new(sb);
                }
            }
            1 => drop(Checkpoint::decode(blocks)),
            2 => drop(decode_nat(&blocks[0], 0)),
            3 => drop(decode_sit(&blocks[0], 0, sit_per_block(512), 512)),
            4 => drop(decode_ssa(&blocks[0], 0, 0, SSA_PER_BLOCK)),
            5 => drop(Node::decode(&blocks[0])),
            _ => drop(decode_dentries(&blocks[0])),
        }
    }

    /// `b` with a fresh CRC, so the decoder's field checks (not the checksum) meet the damage.
    fn reseal(b: &mut Vec<u8>) {
        b.resize(BLOCK, 0);
        let crc = crc32fast::hash(&b[..BODY]);
        b[BODY..].copy_from_slice(&crc.to_le_bytes());
    }

    proptest::proptest! {
        /// Corrupt metadata (bit flips and random bytes, resealed or not; truncated or
        /// extended blocks) is an error or a value, never a panic (the stable-toolchain
        /// companion of the `lfs_ondisk` fuzz target).
        #[test]
        fn corrupt_blocks_never_panic(
            which in 0usize..8,
            block in 0usize..4,
            flips in proptest::collection::vec((0usize..BODY, 0u8..8), 0..6),
            words in proptest::collection::vec((0usize..BODY / 4, proptest::num::u32::ANY), 0..4),
            resize in proptest::option::of(0usize..BLOCK + 16),
            reseal_it in proptest::bool::ANY,
        ) {
            let (kind, mut blocks) = valid_blocks().swap_remove(which);
            let i = block % blocks.len();
            let b = &mut blocks[i];
            for (at, bit) in flips {
                b[at] ^= 1 << bit;
            }
            for (w, v) in words {
                b[w * 4..w * 4 + 4].copy_from_slice(&v.to_le_bytes());
            }
            if reseal_it {
                reseal(b);
            }
            if let Some(n) = resize {
                b.resize(n, 0);
            }
            decode_kind(kind, &blocks);
        }
    }
}
