//! What the workloads write and how reads are checked against it.
//!
//! Data is a pure function of (seed, file incarnation, block index, block version), so a
//! workload keeps only a few numbers per file instead of the data (DESIGN.md principle 5):
//! in fingerprint mode a block's fingerprint is a hash of those four; in full mode its bytes
//! are the fill [`block_from_fingerprint`] makes of that hash. Version 0 is a block never
//! written (zeros). Each file incarnation (a create) gets a fresh id, so a read that returns
//! a deleted file's data, another file's data or a stale version is caught.
//!
//! Two kinds of file models:
//! - *write-once* ([`Versions::Once`]): every byte below the size was written exactly once,
//!   by appends at the end of file (all filebench and mdtest files); every block has version 1;
//! - *per block* ([`Versions::PerBlock`]): block-aligned overwrites (fio jobs), one version
//!   counter per block.

use super::config::BLOCK;
use zonelab_device::payload::{block_from_fingerprint, fingerprint};
use zonelab_device::{OwnedData, PayloadMode, WriteData};

/// Block versions of a file.
#[derive(Clone, Copy, Debug)]
pub enum Versions<'a> {
    /// Every block below the file size has version 1.
    Once,
    /// Version of each block; blocks past the slice have version 0.
    PerBlock(&'a [u32]),
}

impl Versions<'_> {
    fn of(&self, block: u64) -> u32 {
        match self {
            Versions::Once => 1,
            Versions::PerBlock(v) => v.get(block as usize).copied().unwrap_or(0),
        }
    }
}

/// A read whose data is not what was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Byte offset in the file of the first difference.
    pub offset: u64,
    pub expected: String,
    pub got: String,
}

/// The data generator and checker of one run.
#[derive(Clone, Debug)]
pub struct Content {
    seed: u64,
    mode: PayloadMode,
    zero_fp: u64,
}

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Content {
    pub fn new(seed: u64, mode: PayloadMode) -> Content {
        Content {
            seed,
            mode,
            zero_fp: fingerprint(&[0u8; BLOCK as usize]),
        }
    }

    pub fn mode(&self) -> PayloadMode {
        self.mode
    }

    /// Fingerprint of block `block` of file incarnation `uid` at `version` (0: a zero block).
    pub fn fingerprint(&self, uid: u64, block: u64, version: u32) -> u64 {
        if version == 0 {
            return self.zero_fp;
        }
        mix(mix(mix(self.seed ^ 0x5a4f_4e45_4c41_4221) ^ uid) ^ block) ^ mix(version as u64)
    }

    /// Bytes `off..off+len` of the file as `versions` describe it (full mode's view).
    fn bytes(&self, uid: u64, off: u64, len: u64, versions: Versions<'_>) -> Vec<u8> {
        let mut out = Vec::with_capacity(len as usize);
        let mut blk = Vec::with_capacity(BLOCK as usize);
        let end = off + len;
        let mut pos = off;
        while pos < end {
            let b = pos / BLOCK;
            let in_blk = (pos % BLOCK) as usize;
            let take = (BLOCK - in_blk as u64).min(end - pos) as usize;
            let v = versions.of(b);
            if v == 0 {
                out.resize(out.len() + take, 0);
            } else {
                blk.clear();
                block_from_fingerprint(self.fingerprint(uid, b, v), BLOCK, &mut blk);
                out.extend_from_slice(&blk[in_blk..in_blk + take]);
            }
            pos += take as u64;
        }
        out
    }

    /// The data a write of `off..off+len` carries. In fingerprint mode both must be block
    /// aligned (the workloads round their sizes up to whole blocks in that mode).
    pub fn data(&self, uid: u64, off: u64, len: u64, versions: Versions<'_>) -> OwnedData {
        match self.mode {
            PayloadMode::Full => OwnedData::Bytes(self.bytes(uid, off, len, versions)),
            PayloadMode::Fingerprint => {
                assert!(
                    off.is_multiple_of(BLOCK) && len.is_multiple_of(BLOCK),
                    "fingerprint-mode I/O must be block aligned: {off}+{len}"
                );
                let first = off / BLOCK;
                let n = len / BLOCK;
                if n == 1 {
                    return OwnedData::Fingerprint(self.fingerprint(
                        uid,
                        first,
                        versions.of(first),
                    ));
                }
                OwnedData::Fingerprints(
                    (first..first + n)
                        .map(|b| self.fingerprint(uid, b, versions.of(b)))
                        .collect(),
                )
            }
        }
    }

    /// Number of bytes `got` carries.
    pub fn len_of(&self, got: &OwnedData) -> u64 {
        match got.as_ref() {
            WriteData::Bytes(b) => b.len() as u64,
            WriteData::Fingerprints(f) => f.len() as u64 * BLOCK,
        }
    }

    /// Checks that `got`, returned by a read at `off`, is the file's data there.
    pub fn check(
        &self,
        uid: u64,
        off: u64,
        got: &OwnedData,
        versions: Versions<'_>,
    ) -> Result<(), Mismatch> {
        match (self.mode, got.as_ref()) {
            (PayloadMode::Full, WriteData::Bytes(b)) => {
                let want = self.bytes(uid, off, b.len() as u64, versions);
                if let Some(i) = want.iter().zip(b.iter()).position(|(x, y)| x != y) {
                    let w = |v: &[u8]| {
                        let end = (i + 8).min(v.len());
                        format!("bytes {:02x?}", &v[i..end])
                    };
                    return Err(Mismatch {
                        offset: off + i as u64,
                        expected: w(&want),
                        got: w(b),
                    });
                }
                Ok(())
            }
            (PayloadMode::Full, WriteData::Fingerprints(_)) => {
                // A fingerprint stands for the bytes the device would store for it.
                let bytes = OwnedData::Bytes(expand(got));
                self.check(uid, off, &bytes, versions)
            }
            (PayloadMode::Fingerprint, data) => {
                let owned;
                let fps: &[u64] = match data {
                    WriteData::Fingerprints(f) => f,
                    WriteData::Bytes(b) => {
                        owned = b
                            .chunks(BLOCK as usize)
                            .map(fingerprint)
                            .collect::<Vec<_>>();
                        &owned
                    }
                };
                let first = off / BLOCK;
                for (i, &fp) in fps.iter().enumerate() {
                    let b = first + i as u64;
                    let want = self.fingerprint(uid, b, versions.of(b));
                    if fp != want {
                        let show = |v: u64| {
                            if v == self.zero_fp {
                                format!("fingerprint {v:#018x} (a zero block)")
                            } else {
                                format!("fingerprint {v:#018x}")
                            }
                        };
                        return Err(Mismatch {
                            offset: b * BLOCK,
                            expected: show(want),
                            got: show(fp),
                        });
                    }
                }
                Ok(())
            }
        }
    }
}

fn expand(d: &OwnedData) -> Vec<u8> {
    let mut out = Vec::new();
    if let WriteData::Fingerprints(f) = d.as_ref() {
        for &fp in f {
            block_from_fingerprint(fp, BLOCK, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_and_differs_by_file_block_and_version() {
        for mode in [PayloadMode::Full, PayloadMode::Fingerprint] {
            let c = Content::new(3, mode);
            let d = c.data(7, 4096, 8192, Versions::Once);
            assert_eq!(c.len_of(&d), 8192);
            assert_eq!(c.check(7, 4096, &d, Versions::Once), Ok(()));
            let e = c.check(8, 4096, &d, Versions::Once).unwrap_err();
            assert_eq!(e.offset, 4096);
            let e = c.check(7, 0, &d, Versions::Once).unwrap_err();
            assert_eq!(e.offset, 0);
            let v = [1u32, 1, 2];
            let e = c.check(7, 4096, &d, Versions::PerBlock(&v)).unwrap_err();
            assert_eq!(e.offset, 8192);
            // Version 0 is a zero block.
            let z = c.data(7, 0, 4096, Versions::PerBlock(&[]));
            assert_eq!(c.check(9, 0, &z, Versions::PerBlock(&[0])), Ok(()));
        }
    }

    #[test]
    fn full_mode_unaligned_pieces_compose() {
        let c = Content::new(1, PayloadMode::Full);
        let whole = c.data(5, 0, 10_000, Versions::Once);
        let a = c.data(5, 0, 3_333, Versions::Once);
        let b = c.data(5, 3_333, 6_667, Versions::Once);
        let (OwnedData::Bytes(w), OwnedData::Bytes(mut x), OwnedData::Bytes(y)) = (whole, a, b)
        else {
            panic!("full mode gives bytes");
        };
        x.extend_from_slice(&y);
        assert_eq!(w, x);
        let mut bad = x.clone();
        bad[5_000] ^= 1;
        let e = c
            .check(5, 0, &OwnedData::Bytes(bad), Versions::Once)
            .unwrap_err();
        assert_eq!(e.offset, 5_000);
        assert_ne!(e.expected, e.got);
    }
}
