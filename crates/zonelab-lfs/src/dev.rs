//! The file system's access to its device: block reads and writes through the host I/O stack
//! (the kernel path, io_uring with mq-deadline, as F2FS on a zoned drive uses), zone resets and
//! finishes, cache flushes, and byte counters by traffic class.

use crate::ondisk::BLOCK;
use crate::vfs::{FsError, FsResult};
use serde::Serialize;
use std::cell::Cell;
use std::rc::Rc;
use zonelab_device::{HostStack, IoCmd, IoDone, Lba, OwnedData, ReadData, ZoneAction};
use zonelab_sim::{JoinHandle, Sim};

/// Why blocks move; result JSON reports bytes per class (DESIGN.md result schema).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traffic {
    UserWrite,
    UserRead,
    Node,
    Meta,
    Checkpoint,
    GcRead,
    GcWrite,
}

/// Bytes moved per class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TrafficBytes {
    pub user_write: u64,
    pub user_read: u64,
    pub node: u64,
    pub meta: u64,
    pub checkpoint: u64,
    pub gc_host_read: u64,
    pub gc_host_write: u64,
}

pub struct Dev {
    pub sim: Sim,
    pub stack: Rc<HostStack>,
    traffic: Cell<TrafficBytes>,
}

fn status(d: &IoDone, what: &str) -> FsResult<()> {
    d.status
        .map(|_| ())
        .map_err(|s| FsError::Io(format!("{what}: {s}")))
}

impl Dev {
    pub fn new(sim: Sim, stack: Rc<HostStack>) -> Dev {
        Dev {
            sim,
            stack,
            traffic: Cell::new(TrafficBytes::default()),
        }
    }

    pub fn traffic(&self) -> TrafficBytes {
        self.traffic.get()
    }

    fn count(&self, class: Traffic, blocks: u64) {
        let mut t = self.traffic.get();
        let b = blocks * BLOCK as u64;
        match class {
            Traffic::UserWrite => t.user_write += b,
            Traffic::UserRead => t.user_read += b,
            Traffic::Node => t.node += b,
            Traffic::Meta => t.meta += b,
            Traffic::Checkpoint => t.checkpoint += b,
            Traffic::GcRead => t.gc_host_read += b,
            Traffic::GcWrite => t.gc_host_write += b,
        }
        self.traffic.set(t);
    }

    /// Reads `n` blocks from `addr`.
    pub async fn read(&self, addr: u64, n: u64, class: Traffic) -> FsResult<ReadData> {
        self.count(class, n);
        let d = self
            .stack
            .submit(IoCmd::Read {
                slba: Lba(addr),
                nlb: n,
                want_data: true,
            })
            .await;
        status(&d, &format!("read of {n} blocks at {addr}"))?;
        d.data
            .map(|b| *b)
            .ok_or_else(|| FsError::Io(format!("read at {addr} returned no data")))
    }

    /// Reads one metadata block as bytes.
    pub async fn read_meta(&self, addr: u64, class: Traffic) -> FsResult<Vec<u8>> {
        let d = self.read(addr, 1, class).await?;
        if d.bytes.len() != BLOCK {
            return Err(FsError::Corrupt(format!(
                "block {addr} holds no metadata (never written, or written as file data)"
            )));
        }
        Ok(d.bytes)
    }

    /// Starts a write of `data` at `addr` and returns a handle to await. Writes are handed to
    /// the stack in the order of these calls, which keeps a zone's writes in LBA order.
    pub fn write(&self, addr: u64, data: OwnedData, class: Traffic) -> JoinHandle<FsResult<()>> {
        let n = data.blocks(BLOCK as u64);
        self.count(class, n);
        let stack = self.stack.clone();
        self.sim.spawn(async move {
            let d = stack
                .submit(IoCmd::Write {
                    slba: Lba(addr),
                    data,
                })
                .await;
            status(&d, &format!("write of {n} blocks at {addr}"))
        })
    }

    pub async fn write_now(&self, addr: u64, data: OwnedData, class: Traffic) -> FsResult<()> {
        self.write(addr, data, class).await
    }

    pub async fn zone(&self, action: ZoneAction, zslba: u64) -> FsResult<()> {
        let d = self
            .stack
            .submit(IoCmd::ZoneMgmt {
                action,
                zslba: Lba(zslba),
                select_all: false,
            })
            .await;
        status(&d, &format!("zone {action:?} at {zslba}"))
    }

    pub async fn flush(&self) -> FsResult<()> {
        let d = self.stack.submit(IoCmd::Flush).await;
        status(&d, "flush")
    }
}

/// Awaits every write handle; the first error wins.
pub async fn join_all(handles: Vec<JoinHandle<FsResult<()>>>) -> FsResult<()> {
    let mut first = Ok(());
    for h in handles {
        let r = h.await;
        if first.is_ok() {
            first = r;
        }
    }
    first
}
