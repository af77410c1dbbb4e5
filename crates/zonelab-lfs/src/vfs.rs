//! The file-system interface: inode-based like FUSE and the Linux VFS, asynchronous (every call
//! runs in virtual time), used by workloads, the FUSE mount and the tests.
//!
//! File contents travel as [`OwnedData`]: bytes in `full` payload mode; in `fingerprint` mode
//! one 64-bit fingerprint per 4 KiB block, so offsets and lengths must then be block aligned.

use serde::{Deserialize, Serialize};
use zonelab_device::OwnedData;
use zonelab_sim::Nanos;

/// An inode number.
pub type Ino = u64;

/// The root directory's inode number.
pub const ROOT_INO: Ino = 1;

/// Longest name of a directory entry, in bytes (as F2FS and ext4).
pub const NAME_MAX: usize = 255;

/// Most hard links to one inode.
pub const LINK_MAX: u32 = 65_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FileKind {
    File,
    Dir,
    Symlink,
}

/// What `stat` shows of an inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    pub ino: Ino,
    pub kind: FileKind,
    /// Permission bits (0o7777).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    /// Bytes (the target's length for a symlink).
    pub size: u64,
    /// 4 KiB blocks allocated to data.
    pub blocks: u64,
    /// Virtual time.
    pub atime: Nanos,
    pub mtime: Nanos,
    pub ctime: Nanos,
}

/// Changes asked by `setattr` (chmod, chown, truncate, utimes); `None` leaves a field alone.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    pub perm: Option<u16>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<Nanos>,
    pub mtime: Option<Nanos>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub ino: Ino,
    pub kind: FileKind,
}

/// Capacity figures of `statfs`, in 4 KiB blocks and inodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFs {
    pub block_size: u64,
    pub blocks: u64,
    pub blocks_free: u64,
    pub files: u64,
    pub files_free: u64,
}

/// A failed file-system call; [`FsError::errno`] gives the POSIX error number.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    #[error("no such file or directory")]
    NotFound,
    #[error("file exists")]
    Exists,
    #[error("not a directory")]
    NotDir,
    #[error("is a directory")]
    IsDir,
    #[error("directory not empty")]
    NotEmpty,
    #[error("no space left on the file system")]
    NoSpace,
    #[error("file name longer than {NAME_MAX} bytes")]
    NameTooLong,
    #[error("too many links")]
    TooManyLinks,
    #[error("invalid argument: {0}")]
    Invalid(String),
    #[error("file too large")]
    TooLarge,
    #[error("device error: {0}")]
    Io(String),
    #[error("file system is corrupt: {0}")]
    Corrupt(String),
}

impl FsError {
    /// The POSIX errno of this error (Linux numbering).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotFound => 2,
            FsError::Exists => 17,
            FsError::NotDir => 20,
            FsError::IsDir => 21,
            FsError::NotEmpty => 39,
            FsError::NoSpace => 28,
            FsError::NameTooLong => 36,
            FsError::TooManyLinks => 31,
            FsError::Invalid(_) => 22,
            FsError::TooLarge => 27,
            FsError::Io(_) => 5,
            FsError::Corrupt(_) => 117,
        }
    }
}

pub type FsResult<T> = Result<T, FsError>;

/// How a caller issues its reads and writes of a file, as open(2) flags say it: a hint for
/// file systems whose call path depends on it; they may ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoOptions {
    /// O_DIRECT: data moves between the caller and the device without the page cache.
    pub direct: bool,
}

/// A file system as workloads and clients see it. Calls may run concurrently from many
/// simulated threads (tasks on one `zonelab_sim::Sim`); each call returns when its modelled
/// work is done in virtual time.
#[allow(async_fn_in_trait)]
pub trait FileSystem {
    /// The entry `name` of directory `parent`.
    async fn lookup(&self, parent: Ino, name: &str) -> FsResult<Attr>;
    async fn getattr(&self, ino: Ino) -> FsResult<Attr>;
    /// chmod/chown/truncate/utimes; ctime is set to now.
    async fn setattr(&self, ino: Ino, set: SetAttr) -> FsResult<Attr>;
    /// A new empty regular file; `Exists` if the name is taken.
    async fn create(
        &self,
        parent: Ino,
        name: &str,
        perm: u16,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr>;
    async fn mkdir(&self, parent: Ino, name: &str, perm: u16, uid: u32, gid: u32)
    -> FsResult<Attr>;
    async fn symlink(
        &self,
        parent: Ino,
        name: &str,
        target: &str,
        uid: u32,
        gid: u32,
    ) -> FsResult<Attr>;
    async fn readlink(&self, ino: Ino) -> FsResult<String>;
    /// A hard link to `ino` (not a directory) as `newparent/newname`.
    async fn link(&self, ino: Ino, newparent: Ino, newname: &str) -> FsResult<Attr>;
    /// Removes a non-directory entry; the inode goes when its last link does.
    async fn unlink(&self, parent: Ino, name: &str) -> FsResult<()>;
    /// Removes an empty directory.
    async fn rmdir(&self, parent: Ino, name: &str) -> FsResult<()>;
    /// POSIX rename: replaces an existing target (a file by a file, an empty directory by a
    /// directory); moving a directory into its own subtree is `Invalid`.
    async fn rename(&self, parent: Ino, name: &str, newparent: Ino, newname: &str) -> FsResult<()>;
    /// Entries of a directory, without "." and "..", in a stable order.
    async fn readdir(&self, ino: Ino) -> FsResult<Vec<DirEntry>>;
    /// Up to `len` bytes from `off` (fewer at the end of the file).
    async fn read(&self, ino: Ino, off: u64, len: u64) -> FsResult<OwnedData>;
    /// Writes `data` at `off`, extending the file as needed; returns the bytes written.
    async fn write(&self, ino: Ino, off: u64, data: OwnedData) -> FsResult<u64>;
    /// Makes the file's data and metadata durable (`datasync`: data and size only).
    async fn fsync(&self, ino: Ino, datasync: bool) -> FsResult<()>;
    /// Makes everything durable (a checkpoint).
    async fn sync(&self) -> FsResult<()>;
    fn statfs(&self) -> StatFs;
    /// Hints how later reads and writes of `ino` are issued ([`IoOptions`]); by default
    /// ignored.
    fn set_io_options(&self, _ino: Ino, _opts: IoOptions) {}
}
