//! The kernel's side of a mount: a [`fuser::Filesystem`] that answers nothing itself. Each FUSE
//! request, with its reply handle, becomes a [`Request`] sent over a channel to the simulation
//! thread ([`super::serve`]), which runs it as a task in virtual time and replies from there.
//! The FUSE session thread never waits for the file system, so several requests can be in
//! flight at once (as the kernel sends them: concurrent processes, asynchronous reads).

use fuser::{
    FileHandle, INodeNo, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData,
    ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, TimeOrNow,
    WriteFlags,
};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::mpsc::Sender;
use std::time::SystemTime;

/// Who asks: the calling process's credentials, from the FUSE request header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caller {
    pub uid: u32,
    pub gid: u32,
}

/// Changes of a setattr request, as the kernel gives them.
#[derive(Debug, Default)]
pub(crate) struct AttrChange {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    pub size: Option<u64>,
    pub atime: Option<TimeOrNow>,
    pub mtime: Option<TimeOrNow>,
}

/// One FUSE request and the handle its answer goes to. Names are bytes as the kernel sent
/// them (the file system takes UTF-8 names; others are refused when served).
pub(crate) enum Op {
    Lookup {
        parent: u64,
        name: Vec<u8>,
        reply: ReplyEntry,
    },
    Getattr {
        ino: u64,
        reply: ReplyAttr,
    },
    Setattr {
        ino: u64,
        change: AttrChange,
        reply: ReplyAttr,
    },
    Readlink {
        ino: u64,
        reply: ReplyData,
    },
    Mknod {
        parent: u64,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    },
    Mkdir {
        parent: u64,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    },
    Unlink {
        parent: u64,
        name: Vec<u8>,
        reply: ReplyEmpty,
    },
    Rmdir {
        parent: u64,
        name: Vec<u8>,
        reply: ReplyEmpty,
    },
    Symlink {
        parent: u64,
        name: Vec<u8>,
        target: Vec<u8>,
        reply: ReplyEntry,
    },
    Rename {
        parent: u64,
        name: Vec<u8>,
        newparent: u64,
        newname: Vec<u8>,
        flags: RenameFlags,
        reply: ReplyEmpty,
    },
    Link {
        ino: u64,
        newparent: u64,
        newname: Vec<u8>,
        reply: ReplyEntry,
    },
    Open {
        ino: u64,
        flags: i32,
        reply: ReplyOpen,
    },
    Create {
        parent: u64,
        name: Vec<u8>,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    },
    Read {
        ino: u64,
        fh: u64,
        offset: u64,
        size: u32,
        reply: ReplyData,
    },
    Write {
        ino: u64,
        offset: u64,
        data: Vec<u8>,
        reply: ReplyWrite,
    },
    Release {
        fh: u64,
        reply: ReplyEmpty,
    },
    Fsync {
        ino: u64,
        datasync: bool,
        reply: ReplyEmpty,
    },
    Opendir {
        reply: ReplyOpen,
    },
    Readdir {
        ino: u64,
        fh: u64,
        offset: u64,
        reply: ReplyDirectory,
    },
    Releasedir {
        fh: u64,
        reply: ReplyEmpty,
    },
    Statfs {
        reply: ReplyStatfs,
    },
    Fallocate {
        ino: u64,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    },
}

impl Op {
    /// The request's name in `zonelab stats` (FUSE's opcode names, lower case).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Op::Lookup { .. } => "lookup",
            Op::Getattr { .. } => "getattr",
            Op::Setattr { .. } => "setattr",
            Op::Readlink { .. } => "readlink",
            Op::Mknod { .. } => "mknod",
            Op::Mkdir { .. } => "mkdir",
            Op::Unlink { .. } => "unlink",
            Op::Rmdir { .. } => "rmdir",
            Op::Symlink { .. } => "symlink",
            Op::Rename { .. } => "rename",
            Op::Link { .. } => "link",
            Op::Open { .. } => "open",
            Op::Create { .. } => "create",
            Op::Read { .. } => "read",
            Op::Write { .. } => "write",
            Op::Release { .. } => "release",
            Op::Fsync { .. } => "fsync",
            Op::Opendir { .. } => "opendir",
            Op::Readdir { .. } => "readdir",
            Op::Releasedir { .. } => "releasedir",
            Op::Statfs { .. } => "statfs",
            Op::Fallocate { .. } => "fallocate",
        }
    }
}

/// What reaches the simulation thread.
pub(crate) enum Msg {
    Op(Op, Caller),
    /// The FUSE session ended: the file system was unmounted (`zonelab umount`, umount(8)).
    SessionEnded(io::Result<()>),
    /// SIGINT, SIGTERM or SIGHUP: finish the requests in flight, then unmount and save.
    Stop,
}

/// The [`fuser::Filesystem`] of a mount: forwards every request to the simulation thread.
pub(crate) struct Kernel {
    pub tx: Sender<Msg>,
}

impl Kernel {
    fn send(&self, req: &fuser::Request, op: Op) {
        let caller = Caller {
            uid: req.uid(),
            gid: req.gid(),
        };
        // The simulation thread outlives the session; if it is gone, the reply handle is
        // dropped, which answers EIO.
        let _ = self.tx.send(Msg::Op(op, caller));
    }
}

fn bytes(s: &OsStr) -> Vec<u8> {
    s.as_bytes().to_vec()
}

impl fuser::Filesystem for Kernel {
    fn lookup(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.send(
            req,
            Op::Lookup {
                parent: parent.0,
                name: bytes(name),
                reply,
            },
        );
    }

    fn getattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: Option<FileHandle>,
        reply: ReplyAttr,
    ) {
        self.send(req, Op::Getattr { ino: ino.0, reply });
    }

    fn setattr(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let change = AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        };
        self.send(
            req,
            Op::Setattr {
                ino: ino.0,
                change,
                reply,
            },
        );
    }

    fn readlink(&self, req: &fuser::Request, ino: INodeNo, reply: ReplyData) {
        self.send(req, Op::Readlink { ino: ino.0, reply });
    }

    fn mknod(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        self.send(
            req,
            Op::Mknod {
                parent: parent.0,
                name: bytes(name),
                mode,
                umask,
                reply,
            },
        );
    }

    fn mkdir(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        self.send(
            req,
            Op::Mkdir {
                parent: parent.0,
                name: bytes(name),
                mode,
                umask,
                reply,
            },
        );
    }

    fn unlink(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.send(
            req,
            Op::Unlink {
                parent: parent.0,
                name: bytes(name),
                reply,
            },
        );
    }

    fn rmdir(&self, req: &fuser::Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.send(
            req,
            Op::Rmdir {
                parent: parent.0,
                name: bytes(name),
                reply,
            },
        );
    }

    fn symlink(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        self.send(
            req,
            Op::Symlink {
                parent: parent.0,
                name: bytes(link_name),
                target: bytes(target.as_os_str()),
                reply,
            },
        );
    }

    fn rename(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        self.send(
            req,
            Op::Rename {
                parent: parent.0,
                name: bytes(name),
                newparent: newparent.0,
                newname: bytes(newname),
                flags,
                reply,
            },
        );
    }

    fn link(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        self.send(
            req,
            Op::Link {
                ino: ino.0,
                newparent: newparent.0,
                newname: bytes(newname),
                reply,
            },
        );
    }

    fn open(&self, req: &fuser::Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        self.send(
            req,
            Op::Open {
                ino: ino.0,
                flags: flags.0,
                reply,
            },
        );
    }

    fn read(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.send(
            req,
            Op::Read {
                ino: ino.0,
                fh: fh.0,
                offset,
                size,
                reply,
            },
        );
    }

    fn write(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        self.send(
            req,
            Op::Write {
                ino: ino.0,
                offset,
                data: data.to_vec(),
                reply,
            },
        );
    }

    /// close(2) of one descriptor: nothing to do (data reaches the file system with each
    /// write; durability is fsync's), as on a local file system.
    fn flush(
        &self,
        _req: &fuser::Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn release(
        &self,
        req: &fuser::Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.send(req, Op::Release { fh: fh.0, reply });
    }

    fn fsync(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.send(
            req,
            Op::Fsync {
                ino: ino.0,
                datasync,
                reply,
            },
        );
    }

    fn opendir(&self, req: &fuser::Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.send(req, Op::Opendir { reply });
    }

    fn readdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        self.send(
            req,
            Op::Readdir {
                ino: ino.0,
                fh: fh.0,
                offset,
                reply,
            },
        );
    }

    fn releasedir(
        &self,
        req: &fuser::Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        self.send(req, Op::Releasedir { fh: fh.0, reply });
    }

    fn fsyncdir(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        self.send(
            req,
            Op::Fsync {
                ino: ino.0,
                datasync,
                reply,
            },
        );
    }

    fn statfs(&self, req: &fuser::Request, _ino: INodeNo, reply: ReplyStatfs) {
        self.send(req, Op::Statfs { reply });
    }

    fn create(
        &self,
        req: &fuser::Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        self.send(
            req,
            Op::Create {
                parent: parent.0,
                name: bytes(name),
                mode,
                umask,
                flags,
                reply,
            },
        );
    }

    fn fallocate(
        &self,
        req: &fuser::Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        self.send(
            req,
            Op::Fallocate {
                ino: ino.0,
                offset,
                length,
                mode,
                reply,
            },
        );
    }
}
