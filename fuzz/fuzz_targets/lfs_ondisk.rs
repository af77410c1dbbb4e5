//! The file system's on-media decoders (superblock and layout, checkpoint pack, NAT, SIT, SSA,
//! node and directory blocks) on arbitrary blocks: corrupt metadata must be an error.
//!
//! Input: a selector byte, then block contents. Selector bits 0-2 pick the decoder; with bit 3
//! clear the contents are a block body that is padded and sealed with a valid CRC (so the
//! fuzzer reaches the field checks behind it), with bit 3 set they are passed as they are.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zonelab_lfs::layout::Layout;
use zonelab_lfs::ondisk::{self, BLOCK, BODY, Checkpoint, Node, Superblock};

/// `body` padded (or cut) to a block body and sealed with its CRC.
fn seal(body: &[u8]) -> Vec<u8> {
    let mut b = body[..body.len().min(BODY)].to_vec();
    b.resize(BODY, 0);
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let raw = sel & 8 != 0;
    let one = || if raw { rest.to_vec() } else { seal(rest) };
    match sel & 7 {
        0 => {
            if let Ok(sb) = Superblock::decode(&one()) {
                let _ = Layout::new(sb);
            }
        }
        1 => {
            let blocks: Vec<Vec<u8>> = if raw {
                rest.chunks(BLOCK).map(<[u8]>::to_vec).collect()
            } else {
                rest.chunks(BODY).map(seal).collect()
            };
            let _ = Checkpoint::decode(&blocks);
        }
        2 => {
            let _ = ondisk::decode_nat(&one(), 0);
        }
        3 | 4 => {
            // Segment sizes as a superblock may give them, from the block's last bytes.
            let bps = match rest {
                [.., a, b] => u16::from_le_bytes([*a, *b]) as u32,
                _ => 512,
            };
            if sel & 7 == 3 {
                let _ = ondisk::decode_sit(&one(), 0, ondisk::sit_per_block(bps), bps);
            } else {
                let _ = ondisk::decode_ssa(&one(), 0, 0, ondisk::SSA_PER_BLOCK);
            }
        }
        5 => {
            let _ = Node::decode(&one());
        }
        _ => {
            let _ = ondisk::decode_dentries(&one());
        }
    }
});
