//! What the device stores for each written logical block.
//!
//! `full` keeps every byte (tests, device images, FUSE); `fingerprint` keeps a 64-bit digest per
//! block so multi-terabyte experiments still verify every read (DESIGN.md principle 5), and keeps
//! whole the blocks written as bytes rather than fingerprints (a file system's metadata, which
//! must read back to be parsed). Storage grows with the data written, never with the device's
//! capacity.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadMode {
    Full,
    Fingerprint,
}

impl std::str::FromStr for PayloadMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "full" => Ok(PayloadMode::Full),
            "fingerprint" => Ok(PayloadMode::Fingerprint),
            _ => Err(format!("payload mode '{s}': use 'full' or 'fingerprint'")),
        }
    }
}

/// Data carried by a write: whole blocks, or one fingerprint per block.
#[derive(Clone, Copy, Debug)]
pub enum WriteData<'a> {
    Bytes(&'a [u8]),
    Fingerprints(&'a [u64]),
}

impl<'a> WriteData<'a> {
    /// Number of logical blocks carried (bytes must be whole blocks; checked by the device).
    pub fn blocks(&self, lba_size: u64) -> u64 {
        match self {
            WriteData::Bytes(b) => b.len() as u64 / lba_size,
            WriteData::Fingerprints(f) => f.len() as u64,
        }
    }

    /// Block `i` alone.
    pub fn block(&self, lba_size: u64, i: u64) -> WriteData<'a> {
        match *self {
            WriteData::Bytes(b) => {
                let s = (i * lba_size) as usize;
                WriteData::Bytes(&b[s..s + lba_size as usize])
            }
            WriteData::Fingerprints(f) => WriteData::Fingerprints(&f[i as usize..=i as usize]),
        }
    }
}

/// Owned write data, for commands queued in the host stack.
#[derive(Clone, Debug)]
pub enum OwnedData {
    Bytes(Vec<u8>),
    Fingerprints(Vec<u64>),
    /// One block's fingerprint, held inline: the most common write (one block in fingerprint
    /// mode) then needs no allocation. Equal to `Fingerprints` holding the same single value.
    Fingerprint(u64),
}

impl OwnedData {
    pub fn as_ref(&self) -> WriteData<'_> {
        match self {
            OwnedData::Bytes(b) => WriteData::Bytes(b),
            OwnedData::Fingerprints(f) => WriteData::Fingerprints(f),
            OwnedData::Fingerprint(f) => WriteData::Fingerprints(std::slice::from_ref(f)),
        }
    }
    /// Appends `other` to this data, as a merged request carries both; false (and nothing
    /// changes) when the two are of different kinds and cannot merge.
    pub fn try_extend(&mut self, other: &OwnedData) -> bool {
        match (&mut *self, other.as_ref()) {
            (OwnedData::Bytes(a), WriteData::Bytes(b)) => a.extend_from_slice(b),
            (OwnedData::Fingerprints(a), WriteData::Fingerprints(b)) => a.extend_from_slice(b),
            (OwnedData::Fingerprint(a), WriteData::Fingerprints(b)) => {
                let mut v = Vec::with_capacity(1 + b.len());
                v.push(*a);
                v.extend_from_slice(b);
                *self = OwnedData::Fingerprints(v);
            }
            _ => return false,
        }
        true
    }
    pub fn blocks(&self, lba_size: u64) -> u64 {
        self.as_ref().blocks(lba_size)
    }
    /// This data cut into pieces of at most `max_blocks` blocks each, in order.
    pub fn split(self, lba_size: u64, max_blocks: u64) -> Vec<OwnedData> {
        assert!(max_blocks > 0, "pieces of no blocks");
        if self.blocks(lba_size) <= max_blocks {
            return vec![self];
        }
        match self {
            OwnedData::Bytes(b) => b
                .chunks((max_blocks * lba_size) as usize)
                .map(|c| OwnedData::Bytes(c.to_vec()))
                .collect(),
            OwnedData::Fingerprints(f) => f
                .chunks(max_blocks as usize)
                .map(|c| OwnedData::Fingerprints(c.to_vec()))
                .collect(),
            OwnedData::Fingerprint(_) => unreachable!("one block fits any piece"),
        }
    }
    /// One fingerprint per block.
    pub fn fingerprints(&self, lba_size: u64) -> Vec<u64> {
        match self.as_ref() {
            WriteData::Fingerprints(f) => f.to_vec(),
            WriteData::Bytes(b) => b.chunks(lba_size as usize).map(fingerprint).collect(),
        }
    }
}

impl PartialEq for OwnedData {
    /// Same kind and same contents, whether fingerprints are held inline or in a vector.
    fn eq(&self, other: &Self) -> bool {
        match (self.as_ref(), other.as_ref()) {
            (WriteData::Bytes(a), WriteData::Bytes(b)) => a == b,
            (WriteData::Fingerprints(a), WriteData::Fingerprints(b)) => a == b,
            _ => false,
        }
    }
}
impl Eq for OwnedData {}

/// 64-bit digest of a block's bytes (FNV-1a over 8-byte words, then a splitmix finalizer).
pub fn fingerprint(block: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut words = block.chunks_exact(8);
    for w in &mut words {
        h ^= u64::from_le_bytes(w.try_into().expect("8 bytes"));
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    for &b in words.remainder() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 31;
    h = h.wrapping_mul(0x7fb5_d329_728e_a185);
    h ^ (h >> 27)
}

/// The bytes a full-payload device stores for a block written as fingerprint `fp`: a
/// deterministic pseudo-random fill, so the same fingerprint always reads back the same bytes.
pub fn block_from_fingerprint(fp: u64, lba_size: u64, out: &mut Vec<u8>) {
    let mut x = fp;
    for _ in 0..lba_size / 8 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
}

/// Blocks read back, in the device's payload mode.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadData {
    pub bytes: Vec<u8>,
    pub fingerprints: Vec<u64>,
}

impl ReadData {
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.fingerprints.clear();
    }
}

/// One block as an in-device copy (zone compaction, internal plugging) carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum BlockCopy {
    Bytes(Vec<u8>),
    Fingerprint(u64),
    Zero,
}

/// Contents of one zone (or of a conventional zone, randomly written).
#[derive(Clone, Debug, Serialize, Deserialize)]
enum ZoneContent {
    /// Sequential zone: blocks from the zone start up to the write pointer.
    SeqFull(Vec<u8>),
    SeqFingerprint(Vec<u64>),
    /// Conventional zone: written blocks by offset in the zone.
    RandFull(BTreeMap<u64, Vec<u8>>),
    RandFingerprint(BTreeMap<u64, u64>),
}

/// Earlier contents of some blocks of a randomly written zone (the undo record of a write that
/// may not survive a power loss). Unwritten blocks are `None`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Prior {
    /// Blocks covered.
    n: u64,
    blocks: PriorBlocks,
    /// Fingerprint mode with blocks kept whole: the whole copy of each block, if any.
    whole: Option<Vec<Option<Vec<u8>>>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
enum PriorBlocks {
    /// The zone held nothing.
    Unwritten,
    Full(Vec<Option<Vec<u8>>>),
    Fingerprint(Vec<Option<u64>>),
}

impl Prior {
    /// Blocks covered.
    pub(crate) fn len(&self) -> u64 {
        self.n
    }

    /// Whether this record fits a store in `mode` (checks of loaded images).
    pub(crate) fn fits(&self, mode: PayloadMode) -> bool {
        let n = self.n as usize;
        let blocks = match (&self.blocks, mode) {
            (PriorBlocks::Unwritten, _) => true,
            (PriorBlocks::Full(v), PayloadMode::Full) => v.len() == n,
            (PriorBlocks::Fingerprint(v), PayloadMode::Fingerprint) => v.len() == n,
            _ => false,
        };
        let whole = match (&self.whole, mode) {
            (None, _) => true,
            (Some(w), PayloadMode::Fingerprint) => w.len() == n,
            (Some(_), PayloadMode::Full) => false,
        };
        blocks && whole
    }
}

/// Data of every zone. Zones without data cost one small enum each.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DataStore {
    mode: PayloadMode,
    lba_size: u64,
    /// Shared between clones until written (`Arc::make_mut`): crash testing copies the device
    /// at every crash point, and most zones do not change between two points.
    zones: Vec<Option<Arc<ZoneContent>>>,
    zero_fingerprint: u64,
    /// Fingerprint mode: blocks written as bytes, kept whole, by (zone, block offset).
    #[serde(default)]
    whole: BTreeMap<(u32, u64), Vec<u8>>,
}

impl DataStore {
    pub fn new(mode: PayloadMode, lba_size: u64, zones: u32) -> DataStore {
        DataStore {
            mode,
            lba_size,
            zones: vec![None; zones as usize],
            zero_fingerprint: fingerprint(&vec![0u8; lba_size as usize]),
            whole: BTreeMap::new(),
        }
    }

    pub fn mode(&self) -> PayloadMode {
        self.mode
    }

    /// Bytes of payload held, for memory reports.
    pub fn stored_bytes(&self) -> u64 {
        self.zones
            .iter()
            .flatten()
            .map(|z| match &**z {
                ZoneContent::SeqFull(v) => v.len() as u64,
                ZoneContent::SeqFingerprint(v) => v.len() as u64 * 8,
                ZoneContent::RandFull(m) => m.len() as u64 * self.lba_size,
                ZoneContent::RandFingerprint(m) => m.len() as u64 * 8,
            })
            .sum::<u64>()
            + self.whole.len() as u64 * self.lba_size
    }

    /// Stores `data` in `zone` at block offset `off`. `sequential`: the zone is written in
    /// order (`off` must be the current end of its data, the write pointer) and holds at most
    /// this many blocks, for whose fingerprints its content is allocated at its first write,
    /// so that it never grows by reallocation (copying the zone's fingerprints each time);
    /// None: written anywhere.
    pub fn write(&mut self, zone: u32, off: u64, sequential: Option<u64>, data: WriteData<'_>) {
        let lba = self.lba_size;
        let mode = self.mode;
        if mode == PayloadMode::Fingerprint {
            match data {
                WriteData::Bytes(b) => {
                    for (i, blk) in b.chunks(lba as usize).enumerate() {
                        self.whole.insert((zone, off + i as u64), blk.to_vec());
                    }
                }
                WriteData::Fingerprints(f) if !self.whole.is_empty() => {
                    for i in 0..f.len() as u64 {
                        self.whole.remove(&(zone, off + i));
                    }
                }
                WriteData::Fingerprints(_) => {}
            }
        }
        let slot = &mut self.zones[zone as usize];
        let content = slot.get_or_insert_with(|| {
            Arc::new(match (sequential, mode) {
                // Bytes grow as written: a zone's whole capacity could be a gigabyte.
                (Some(_), PayloadMode::Full) => ZoneContent::SeqFull(Vec::new()),
                (Some(blocks), PayloadMode::Fingerprint) => {
                    ZoneContent::SeqFingerprint(Vec::with_capacity(blocks as usize))
                }
                (None, PayloadMode::Full) => ZoneContent::RandFull(BTreeMap::new()),
                (None, PayloadMode::Fingerprint) => ZoneContent::RandFingerprint(BTreeMap::new()),
            })
        });
        match Arc::make_mut(content) {
            ZoneContent::SeqFull(v) => {
                assert_eq!(
                    v.len() as u64,
                    off * lba,
                    "sequential data must continue at the write pointer"
                );
                match data {
                    WriteData::Bytes(b) => v.extend_from_slice(b),
                    WriteData::Fingerprints(f) => {
                        for &fp in f {
                            block_from_fingerprint(fp, lba, v);
                        }
                    }
                }
            }
            ZoneContent::SeqFingerprint(v) => {
                assert_eq!(
                    v.len() as u64,
                    off,
                    "sequential data must continue at the write pointer"
                );
                match data {
                    WriteData::Bytes(b) => v.extend(b.chunks(lba as usize).map(fingerprint)),
                    WriteData::Fingerprints(f) => v.extend_from_slice(f),
                }
            }
            ZoneContent::RandFull(m) => match data {
                WriteData::Bytes(b) => {
                    for (i, blk) in b.chunks(lba as usize).enumerate() {
                        m.insert(off + i as u64, blk.to_vec());
                    }
                }
                WriteData::Fingerprints(f) => {
                    for (i, &fp) in f.iter().enumerate() {
                        let mut blk = Vec::with_capacity(lba as usize);
                        block_from_fingerprint(fp, lba, &mut blk);
                        m.insert(off + i as u64, blk);
                    }
                }
            },
            ZoneContent::RandFingerprint(m) => match data {
                WriteData::Bytes(b) => {
                    for (i, blk) in b.chunks(lba as usize).enumerate() {
                        m.insert(off + i as u64, fingerprint(blk));
                    }
                }
                WriteData::Fingerprints(f) => {
                    for (i, &fp) in f.iter().enumerate() {
                        m.insert(off + i as u64, fp);
                    }
                }
            },
        }
    }

    /// Appends blocks `off..off+n` of `zone` to `out` (unwritten blocks read as zeros). In
    /// fingerprint mode `out.bytes` also receives the blocks when every one of them was written
    /// as bytes.
    pub fn read(&self, zone: u32, off: u64, n: u64, out: &mut ReadData) {
        let lba = self.lba_size;
        if self.mode == PayloadMode::Fingerprint
            && !self.whole.is_empty()
            && self.whole.range((zone, off)..(zone, off + n)).count() as u64 == n
        {
            for (_, b) in self.whole.range((zone, off)..(zone, off + n)) {
                out.bytes.extend_from_slice(b);
            }
        }
        let content = self.zones[zone as usize].as_deref();
        for i in off..off + n {
            match (self.mode, content) {
                (PayloadMode::Full, Some(ZoneContent::SeqFull(v))) => {
                    let s = (i * lba) as usize;
                    match v.get(s..s + lba as usize) {
                        Some(b) => out.bytes.extend_from_slice(b),
                        None => out.bytes.resize(out.bytes.len() + lba as usize, 0),
                    }
                }
                (PayloadMode::Full, Some(ZoneContent::RandFull(m))) => match m.get(&i) {
                    Some(b) => out.bytes.extend_from_slice(b),
                    None => out.bytes.resize(out.bytes.len() + lba as usize, 0),
                },
                (PayloadMode::Full, _) => out.bytes.resize(out.bytes.len() + lba as usize, 0),
                (PayloadMode::Fingerprint, Some(ZoneContent::SeqFingerprint(v))) => {
                    out.fingerprints
                        .push(v.get(i as usize).copied().unwrap_or(self.zero_fingerprint));
                }
                (PayloadMode::Fingerprint, Some(ZoneContent::RandFingerprint(m))) => {
                    out.fingerprints
                        .push(m.get(&i).copied().unwrap_or(self.zero_fingerprint));
                }
                (PayloadMode::Fingerprint, _) => out.fingerprints.push(self.zero_fingerprint),
            }
        }
    }

    /// Block `off` of `zone` as an in-device copy carries it (unwritten blocks are `Zero`).
    pub(crate) fn snapshot(&self, zone: u32, off: u64) -> BlockCopy {
        if self.mode == PayloadMode::Fingerprint
            && let Some(b) = self.whole.get(&(zone, off))
        {
            return BlockCopy::Bytes(b.clone());
        }
        let lba = self.lba_size as usize;
        match self.zones[zone as usize].as_deref() {
            Some(ZoneContent::SeqFull(v)) => {
                let s = off as usize * lba;
                v.get(s..s + lba)
                    .map_or(BlockCopy::Zero, |b| BlockCopy::Bytes(b.to_vec()))
            }
            Some(ZoneContent::RandFull(m)) => m
                .get(&off)
                .map_or(BlockCopy::Zero, |b| BlockCopy::Bytes(b.clone())),
            Some(ZoneContent::SeqFingerprint(v)) => v
                .get(off as usize)
                .map_or(BlockCopy::Zero, |&f| BlockCopy::Fingerprint(f)),
            Some(ZoneContent::RandFingerprint(m)) => m
                .get(&off)
                .map_or(BlockCopy::Zero, |&f| BlockCopy::Fingerprint(f)),
            None => BlockCopy::Zero,
        }
    }

    /// Blocks of data a sequential zone holds (the end of its stored data).
    pub(crate) fn seq_len(&self, zone: u32) -> u64 {
        match self.zones[zone as usize].as_deref() {
            Some(ZoneContent::SeqFull(v)) => v.len() as u64 / self.lba_size,
            Some(ZoneContent::SeqFingerprint(v)) => v.len() as u64,
            Some(_) => panic!("sequential length of a randomly written zone"),
            None => 0,
        }
    }

    /// Stores `b` at block `off` of sequential `zone`, replacing what is there (a TL_opened
    /// zone is overwritten in place, seed 000 §3.2.2) or extending the data, with zeros in
    /// any gap before `off`.
    pub(crate) fn put(&mut self, zone: u32, off: u64, b: &BlockCopy) {
        let len = self.seq_len(zone);
        let lba = self.lba_size;
        for gap in len..off {
            self.put(zone, gap, &BlockCopy::Zero);
        }
        if self.mode == PayloadMode::Fingerprint {
            match b {
                BlockCopy::Bytes(bytes) => {
                    self.whole.insert((zone, off), bytes.clone());
                }
                _ => {
                    self.whole.remove(&(zone, off));
                }
            }
        }
        let zero_fp = self.zero_fingerprint;
        let mode = self.mode;
        let content = self.zones[zone as usize].get_or_insert_with(|| {
            Arc::new(match mode {
                PayloadMode::Full => ZoneContent::SeqFull(Vec::new()),
                PayloadMode::Fingerprint => ZoneContent::SeqFingerprint(Vec::new()),
            })
        });
        match Arc::make_mut(content) {
            ZoneContent::SeqFull(v) => {
                let mut blk = Vec::with_capacity(lba as usize);
                match b {
                    BlockCopy::Bytes(bytes) => blk.extend_from_slice(bytes),
                    BlockCopy::Fingerprint(f) => block_from_fingerprint(*f, lba, &mut blk),
                    BlockCopy::Zero => blk.resize(lba as usize, 0),
                }
                let s = (off * lba) as usize;
                if s == v.len() {
                    v.extend_from_slice(&blk);
                } else {
                    v[s..s + lba as usize].copy_from_slice(&blk);
                }
            }
            ZoneContent::SeqFingerprint(v) => {
                let f = match b {
                    BlockCopy::Bytes(bytes) => fingerprint(bytes),
                    BlockCopy::Fingerprint(f) => *f,
                    BlockCopy::Zero => zero_fp,
                };
                if off as usize == v.len() {
                    v.push(f);
                } else {
                    v[off as usize] = f;
                }
            }
            _ => panic!("in-place store into a randomly written zone"),
        }
    }

    /// [`DataStore::put`] of host data, block by block.
    pub(crate) fn put_data(&mut self, zone: u32, off: u64, data: WriteData<'_>) {
        let lba = self.lba_size;
        let n = data.blocks(lba);
        for i in 0..n {
            let b = match data.block(lba, i) {
                WriteData::Bytes(bytes) => BlockCopy::Bytes(bytes.to_vec()),
                WriteData::Fingerprints(f) => BlockCopy::Fingerprint(f[0]),
            };
            self.put(zone, off + i, &b);
        }
    }

    /// Drops a zone's data (zone reset).
    pub fn clear(&mut self, zone: u32) {
        self.zones[zone as usize] = None;
        if !self.whole.is_empty() {
            let keys: Vec<(u32, u64)> = self
                .whole
                .range((zone, 0)..(zone + 1, 0))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                self.whole.remove(&k);
            }
        }
    }

    /// Whether a zone holds sequential (`Some(true)`) or randomly written (`Some(false)`)
    /// content, or nothing.
    pub(crate) fn is_sequential(&self, zone: u32) -> Option<bool> {
        self.zones
            .get(zone as usize)?
            .as_deref()
            .map(|c| matches!(c, ZoneContent::SeqFull(_) | ZoneContent::SeqFingerprint(_)))
    }

    /// Keeps only the first `blocks` blocks of a sequential zone's data (a power loss dropped
    /// the rest: the write pointer fell back).
    pub(crate) fn truncate(&mut self, zone: u32, blocks: u64) {
        if blocks == 0 {
            self.clear(zone);
            return;
        }
        let lba = self.lba_size;
        match self.zones[zone as usize].as_mut().map(Arc::make_mut) {
            Some(ZoneContent::SeqFull(v)) => v.truncate((blocks * lba) as usize),
            Some(ZoneContent::SeqFingerprint(v)) => v.truncate(blocks as usize),
            Some(ZoneContent::RandFull(_) | ZoneContent::RandFingerprint(_)) => {
                panic!("truncate of a randomly written zone")
            }
            None => {}
        }
        if !self.whole.is_empty() {
            let keys: Vec<(u32, u64)> = self
                .whole
                .range((zone, blocks)..(zone + 1, 0))
                .map(|(k, _)| *k)
                .collect();
            for k in keys {
                self.whole.remove(&k);
            }
        }
    }

    /// What blocks `off..off+n` of a randomly written zone hold now, to put back with
    /// [`DataStore::restore`] if a later write to them is lost.
    pub(crate) fn prior(&self, zone: u32, off: u64, n: u64) -> Prior {
        let whole = (self.mode == PayloadMode::Fingerprint && !self.whole.is_empty()).then(|| {
            (off..off + n)
                .map(|i| self.whole.get(&(zone, i)).cloned())
                .collect()
        });
        let blocks = match self.zones[zone as usize].as_deref() {
            Some(ZoneContent::RandFull(m)) => {
                PriorBlocks::Full((off..off + n).map(|i| m.get(&i).cloned()).collect())
            }
            Some(ZoneContent::RandFingerprint(m)) => {
                PriorBlocks::Fingerprint((off..off + n).map(|i| m.get(&i).copied()).collect())
            }
            Some(ZoneContent::SeqFull(_) | ZoneContent::SeqFingerprint(_)) => {
                panic!("prior contents of a sequential zone")
            }
            None => PriorBlocks::Unwritten,
        };
        Prior { n, blocks, whole }
    }

    /// Puts block `i` of `prior` (taken at offset `off` of `zone`) back.
    pub(crate) fn restore(&mut self, zone: u32, off: u64, prior: &Prior, i: usize) {
        let at = off + i as u64;
        match &prior.whole {
            Some(w) => match &w[i] {
                Some(b) => {
                    self.whole.insert((zone, at), b.clone());
                }
                None => {
                    self.whole.remove(&(zone, at));
                }
            },
            None => {
                if !self.whole.is_empty() {
                    self.whole.remove(&(zone, at));
                }
            }
        }
        match (
            self.zones[zone as usize].as_mut().map(Arc::make_mut),
            &prior.blocks,
        ) {
            (Some(ZoneContent::RandFull(m)), PriorBlocks::Full(v)) => match &v[i] {
                Some(b) => {
                    m.insert(at, b.clone());
                }
                None => {
                    m.remove(&at);
                }
            },
            (Some(ZoneContent::RandFingerprint(m)), PriorBlocks::Fingerprint(v)) => match v[i] {
                Some(fp) => {
                    m.insert(at, fp);
                }
                None => {
                    m.remove(&at);
                }
            },
            (Some(ZoneContent::RandFull(m)), PriorBlocks::Unwritten) => {
                m.remove(&at);
            }
            (Some(ZoneContent::RandFingerprint(m)), PriorBlocks::Unwritten) => {
                m.remove(&at);
            }
            (None, PriorBlocks::Unwritten) => {}
            _ => panic!("restore into a zone of another kind"),
        }
    }

    /// Whether `got` (as this store returns it) equals blocks written as `expected` fingerprints
    /// (or bytes). Used by verifying workloads.
    pub fn matches(&self, expected: WriteData<'_>, got: &ReadData) -> bool {
        let lba = self.lba_size as usize;
        match (self.mode, expected) {
            (PayloadMode::Fingerprint, WriteData::Fingerprints(f)) => got.fingerprints == f,
            (PayloadMode::Fingerprint, WriteData::Bytes(b)) => b
                .chunks(lba)
                .map(fingerprint)
                .eq(got.fingerprints.iter().copied()),
            (PayloadMode::Full, WriteData::Bytes(b)) => got.bytes == b,
            (PayloadMode::Full, WriteData::Fingerprints(f)) => {
                let mut exp = Vec::with_capacity(f.len() * lba);
                for &fp in f {
                    block_from_fingerprint(fp, lba as u64, &mut exp);
                }
                got.bytes == exp
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_fingerprint_behaves_like_a_one_element_vector() {
        let one = OwnedData::Fingerprint(7);
        assert_eq!(one, OwnedData::Fingerprints(vec![7]));
        assert_ne!(one, OwnedData::Fingerprints(vec![7, 8]));
        assert_eq!(one.blocks(4096), 1);
        assert_eq!(one.fingerprints(4096), vec![7]);
        let mut merged = one.clone();
        assert!(merged.try_extend(&OwnedData::Fingerprint(8)));
        assert!(merged.try_extend(&OwnedData::Fingerprints(vec![9])));
        assert_eq!(merged, OwnedData::Fingerprints(vec![7, 8, 9]));
        assert!(!merged.try_extend(&OwnedData::Bytes(vec![0; 4096])));
        assert_eq!(merged.blocks(4096), 3);
    }

    #[test]
    fn sequential_round_trip_in_both_modes() {
        for mode in [PayloadMode::Full, PayloadMode::Fingerprint] {
            let mut s = DataStore::new(mode, 512, 4);
            s.write(1, 0, Some(1000), WriteData::Fingerprints(&[7, 8]));
            s.write(1, 2, Some(1000), WriteData::Bytes(&[3u8; 512]));
            let mut out = ReadData::default();
            s.read(1, 0, 2, &mut out);
            assert!(s.matches(WriteData::Fingerprints(&[7, 8]), &out));
            out.clear();
            s.read(1, 2, 1, &mut out);
            assert!(s.matches(WriteData::Bytes(&[3u8; 512]), &out));
            out.clear();
            s.read(1, 3, 1, &mut out); // above the write pointer: zeros
            assert!(s.matches(WriteData::Bytes(&[0u8; 512]), &out));
            s.clear(1);
            out.clear();
            s.read(1, 0, 1, &mut out);
            assert!(!s.matches(WriteData::Fingerprints(&[7]), &out));
        }
    }

    #[test]
    fn conventional_zone_overwrites() {
        let mut s = DataStore::new(PayloadMode::Fingerprint, 4096, 2);
        s.write(0, 5, None, WriteData::Fingerprints(&[1]));
        s.write(0, 5, None, WriteData::Fingerprints(&[2]));
        let mut out = ReadData::default();
        s.read(0, 5, 1, &mut out);
        assert_eq!(out.fingerprints, vec![2]);
        assert_eq!(s.stored_bytes(), 8);
    }

    #[test]
    fn fingerprint_mode_keeps_blocks_written_as_bytes() {
        let mut s = DataStore::new(PayloadMode::Fingerprint, 512, 4);
        s.write(1, 0, Some(1000), WriteData::Bytes(&[5u8; 1024]));
        s.write(1, 2, Some(1000), WriteData::Fingerprints(&[9]));
        let mut out = ReadData::default();
        s.read(1, 0, 2, &mut out);
        assert_eq!(out.bytes, vec![5u8; 1024]);
        assert_eq!(out.fingerprints.len(), 2);
        out.clear();
        s.read(1, 1, 2, &mut out);
        assert!(out.bytes.is_empty(), "a fingerprinted block is not whole");
        // Conventional zone: a fingerprint overwrite drops the whole copy.
        s.write(0, 3, None, WriteData::Bytes(&[1u8; 512]));
        s.write(0, 3, None, WriteData::Fingerprints(&[4]));
        out.clear();
        s.read(0, 3, 1, &mut out);
        assert!(out.bytes.is_empty());
        assert_eq!(out.fingerprints, vec![4]);
        s.clear(1);
        out.clear();
        s.read(1, 0, 1, &mut out);
        assert!(out.bytes.is_empty());
        assert_eq!(s.stored_bytes(), 8);
    }

    #[test]
    fn truncate_drops_the_tail_of_a_sequential_zone() {
        for mode in [PayloadMode::Full, PayloadMode::Fingerprint] {
            let mut s = DataStore::new(mode, 512, 2);
            s.write(1, 0, Some(1000), WriteData::Fingerprints(&[1, 2]));
            s.write(1, 2, Some(1000), WriteData::Bytes(&[3u8; 1024]));
            let mut kept = ReadData::default();
            s.read(1, 0, 3, &mut kept);
            s.truncate(1, 3);
            let mut out = ReadData::default();
            s.read(1, 0, 3, &mut out);
            assert_eq!(out, kept);
            out.clear();
            s.read(1, 3, 1, &mut out);
            assert!(s.matches(WriteData::Bytes(&[0u8; 512]), &out));
            // Writing continues at the new end.
            s.write(1, 3, Some(1000), WriteData::Fingerprints(&[9]));
            out.clear();
            s.read(1, 3, 1, &mut out);
            assert!(s.matches(WriteData::Fingerprints(&[9]), &out));
            s.truncate(1, 0);
            assert_eq!(s.stored_bytes(), 0);
        }
    }

    #[test]
    fn restore_puts_back_what_a_random_write_replaced() {
        for mode in [PayloadMode::Full, PayloadMode::Fingerprint] {
            let mut s = DataStore::new(mode, 512, 1);
            let p0 = s.prior(0, 4, 2);
            s.write(0, 4, None, WriteData::Fingerprints(&[1, 2]));
            let mut before = ReadData::default();
            s.read(0, 3, 4, &mut before);
            let p1 = s.prior(0, 5, 2);
            assert_eq!(p1.len(), 2);
            s.write(0, 5, None, WriteData::Bytes(&[7u8; 1024]));
            for i in 0..2 {
                s.restore(0, 5, &p1, i);
            }
            let mut after = ReadData::default();
            s.read(0, 3, 4, &mut after);
            assert_eq!(before, after);
            for i in 0..2 {
                s.restore(0, 4, &p0, i);
            }
            assert_eq!(s.stored_bytes(), 0);
        }
    }

    #[test]
    fn fingerprint_mode_memory_grows_with_data() {
        let mut s = DataStore::new(PayloadMode::Fingerprint, 4096, 40_704);
        assert_eq!(s.stored_bytes(), 0);
        s.write(9, 0, Some(1000), WriteData::Fingerprints(&[1; 1000]));
        assert_eq!(s.stored_bytes(), 8000);
    }
}
