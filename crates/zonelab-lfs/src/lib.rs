//! `zonelab-lfs`: a log-structured file system for zoned namespaces in the shape of F2FS
//! (superblock, checkpoint packs, NAT, SIT, SSA, node and data logs), running in virtual time on
//! the `zonelab-sim` executor (DESIGN.md, File system).
//!
//! [`vfs`] is the interface every file system here offers and every workload and client uses.

pub mod cache;
pub mod dev;
pub mod fs;
#[cfg(test)]
mod fs_tests;
pub mod fsck;
pub mod layout;
pub mod ondisk;
pub mod policy;
pub mod recovery;
pub mod segment;
pub mod vfs;

pub use vfs::{Attr, DirEntry, FileKind, FileSystem, FsError, FsResult, Ino, SetAttr, StatFs};
