//! `zonelab-lfs`: a log-structured file system for zoned namespaces in the shape of F2FS
//! (superblock, checkpoint packs, NAT, SIT, SSA, node and data logs), running in virtual time on
//! the `zonelab-sim` executor (DESIGN.md, File system).
//!
//! [`vfs`] is the interface every file system here offers and every workload and client uses.
//! [`memfs`] is its in-memory reference implementation, the model the real file system is
//! tested against.

pub mod cache;
pub mod dev;
pub mod fs;
#[cfg(test)]
mod fs_tests;
pub mod fsck;
pub mod gc_log;
pub mod layout;
pub mod memfs;
pub mod ondisk;
pub mod policy;
pub mod recovery;
pub mod segment;
pub mod vfs;

pub use memfs::{MemFs, MemFsConfig};
pub use vfs::{
    Attr, DirEntry, FileKind, FileSystem, FsError, FsResult, Ino, IoOptions, ROOT_INO, SetAttr,
    StatFs,
};
