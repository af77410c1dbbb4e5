//! Writes the seed corpus of the fuzz targets that take binary input (`lfs_ondisk`,
//! `device_image`) under the directory given (`fuzz/corpus/` for `scripts/fuzz-smoke`): valid
//! encodings, so fuzzing starts from real structure. From the repository's root:
//! `cargo run --example fuzz_seeds -- fuzz/corpus`. (The text targets' seeds are copies of
//! `experiments/*.toml`, `profiles/*.toml` and hand-written fio job files.) It lives in the
//! workspace, not in `fuzz/`, so the test build already holds it and the fuzz run needs no
//! second build of the simulator without instrumentation.

use std::fs;
use std::path::{Path, PathBuf};
use zonelab_cli::image;
use zonelab_device::{PayloadMode, Profile, ZonedDevice};
use zonelab_lfs::FileKind;
use zonelab_lfs::layout::{DeviceShape, FormatOptions, plan};
use zonelab_lfs::ondisk::{
    self, BODY, Checkpoint, Dentry, Footer, InodeData, Node, NodeBody, Temp,
};

/// Writes seed `name` of fuzz target `target` under the corpus directory `corpus`.
fn seed(corpus: &Path, target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus.join(target);
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create the corpus directory {}: {e}", dir.display()));
    fs::write(dir.join(name), bytes).expect("seed file");
}

/// A sealed block as the `lfs_ondisk` target takes it: the selector, then the body without
/// its CRC and trailing zeros.
fn block_seed(sel: u8, blocks: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![sel];
    for (i, b) in blocks.iter().enumerate() {
        let body = &b[..BODY];
        if i + 1 == blocks.len() {
            let end = body.iter().rposition(|&x| x != 0).map_or(0, |p| p + 1);
            out.extend_from_slice(&body[..end]);
        } else {
            out.extend_from_slice(body);
        }
    }
    out
}

fn main() {
    let Some(corpus) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fuzz_seeds CORPUS_DIR (scripts/fuzz-smoke passes fuzz/corpus)");
        std::process::exit(2);
    };
    let write = |target: &str, name: &str, bytes: &[u8]| seed(&corpus, target, name, bytes);
    let overrides = |s: &[&str]| {
        Profile::parse_overrides(&s.iter().map(|x| x.to_string()).collect::<Vec<_>>())
            .expect("overrides")
    };
    // The small device `zonelab crashtest` formats (40 zones of 2 MiB, 2 conventional).
    let p = Profile::load(
        "znsplus-mlc",
        &overrides(&[
            "zones=40",
            "conventional_zones=2",
            "pages_per_block=8",
            "zone_size=2MiB",
            "blocks_per_plane=64",
        ]),
    )
    .expect("znsplus-mlc");
    let sb = plan(DeviceShape::of(&p), FormatOptions::default(), true).expect("mkfs plan");
    write("lfs_ondisk", "superblock", &block_seed(0, &[sb.encode()]));
    let cp = Checkpoint {
        version: 3,
        time: 1_000_000,
        next_nid: 9,
        valid_nodes: 4,
        valid_inodes: 2,
        valid_blocks: 10,
        nat_copy: vec![true, false, true],
        sit_copy: vec![false, true],
        orphans: vec![5],
        ..Default::default()
    };
    write("lfs_ondisk", "checkpoint", &block_seed(1, &cp.encode()));
    let nat = [ondisk::NatEntry { ino: 3, addr: 700 }; 4];
    write(
        "lfs_ondisk",
        "nat",
        &block_seed(2, &[ondisk::encode_nat(0, &nat)]),
    );
    let mut sit = ondisk::SitEntry::new(512);
    sit.set(3, true);
    sit.set(100, true);
    sit.log = Some(Temp::WarmData);
    // The target reads blocks_per_seg from the input's last two bytes.
    let mut seed = block_seed(3, &[ondisk::encode_sit(0, &[sit])]);
    seed.extend_from_slice(&512u16.to_le_bytes());
    write("lfs_ondisk", "sit", &seed);
    let ssa = [ondisk::Summary { nid: 4, ofs: 2 }; 8];
    write(
        "lfs_ondisk",
        "ssa",
        &block_seed(4, &[ondisk::encode_ssa(0, 0, &ssa)]),
    );
    let inode = Node {
        body: NodeBody::Inode(Box::new(InodeData {
            kind: FileKind::File,
            perm: 0o644,
            uid: 0,
            gid: 0,
            nlink: 1,
            size: 8192,
            blocks: 2,
            atime: 1,
            mtime: 2,
            ctime: 3,
            parent: 1,
            name: b"file".to_vec(),
            nids: [0; 5],
        })),
        addrs: vec![600, 601],
        footer: Footer {
            nid: 4,
            ino: 4,
            cp_ver: 3,
            ..Default::default()
        },
    };
    write("lfs_ondisk", "inode", &block_seed(5, &[inode.encode()]));
    let indirect = Node {
        body: NodeBody::Indirect(vec![7, 8]),
        addrs: Vec::new(),
        footer: Footer {
            nid: 6,
            ino: 4,
            ..Default::default()
        },
    };
    write(
        "lfs_ondisk",
        "indirect",
        &block_seed(5, &[indirect.encode()]),
    );
    let dents = [
        Dentry {
            ino: 4,
            kind: FileKind::File,
            name: b"file".to_vec(),
        },
        Dentry {
            ino: 5,
            kind: FileKind::Dir,
            name: b"dir".to_vec(),
        },
    ];
    write(
        "lfs_ondisk",
        "dentries",
        &block_seed(6, &[ondisk::encode_dentries(&dents)]),
    );

    let small = overrides(&["zones=4", "blocks_per_plane=8"]);
    let dev = ZonedDevice::new(
        Profile::load("zn540", &small).expect("zn540"),
        PayloadMode::Fingerprint,
    )
    .expect("device");
    let file = image::encode(zonelab_sim::Nanos(0), &dev).expect("image");
    write("device_image", "zoned-file", &[&[1u8][..], &file].concat());
    write(
        "device_image",
        "zoned-body",
        &[&[0u8][..], &file[image::HEADER_LEN..]].concat(),
    );
}
