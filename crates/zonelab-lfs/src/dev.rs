//! The file system's access to its device: block reads and writes through the host I/O stack
//! (the kernel path, io_uring with mq-deadline, as F2FS on a zoned drive uses), zone resets and
//! finishes, cache flushes, and byte counters by traffic class.
//!
//! A file system spans one zoned device or, as F2FS on ZNS drives without conventional zones
//! (`mkfs.f2fs -c`), a companion conventional device for the metadata followed by the zoned
//! device in one address space ([`Devices`]); [`Dev`] sends each request to the device holding
//! its blocks and refuses one that would cross from one device into the other.

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

/// The devices a file system lives on: the zoned device and, optionally, a companion
/// conventional device holding the metadata areas (addresses `0 .. companion size`, the zoned
/// device's LBAs following).
#[derive(Clone)]
pub struct Devices {
    pub zoned: Rc<HostStack>,
    pub companion: Option<Rc<HostStack>>,
}

impl From<Rc<HostStack>> for Devices {
    fn from(zoned: Rc<HostStack>) -> Devices {
        Devices {
            zoned,
            companion: None,
        }
    }
}

impl Devices {
    /// The zoned device with the companion conventional device `companion`.
    pub fn with_companion(zoned: Rc<HostStack>, companion: Rc<HostStack>) -> Devices {
        Devices {
            zoned,
            companion: Some(companion),
        }
    }

    /// Logical blocks of the companion (0 without one).
    pub fn companion_lbas(&self) -> u64 {
        self.companion
            .as_ref()
            .map_or(0, |c| c.device().borrow().total_lbas())
    }

    /// Every device loses power at `at` (one power supply) and power returns.
    pub fn power_cut(&self, at: zonelab_sim::Nanos) {
        self.zoned.device().borrow_mut().power_cut(at);
        if let Some(c) = &self.companion {
            c.device().borrow_mut().power_cut(at);
        }
    }
}

pub struct Dev {
    pub sim: Sim,
    /// The zoned device.
    pub stack: Rc<HostStack>,
    /// The companion conventional device, holding addresses `0 .. base`.
    pub companion: Option<Rc<HostStack>>,
    /// Where the zoned device starts in the address space: its LBA = address - `base`.
    base: u64,
    traffic: Cell<TrafficBytes>,
}

fn status(d: &IoDone, what: &str) -> FsResult<()> {
    d.status
        .map(|_| ())
        .map_err(|s| FsError::Io(format!("{what}: {s}")))
}

impl Dev {
    pub fn new(sim: Sim, devices: Devices) -> Dev {
        let base = devices.companion_lbas();
        Dev {
            sim,
            stack: devices.zoned,
            companion: devices.companion,
            base,
            traffic: Cell::new(TrafficBytes::default()),
        }
    }

    /// The devices behind this one.
    pub fn devices(&self) -> Devices {
        Devices {
            zoned: self.stack.clone(),
            companion: self.companion.clone(),
        }
    }

    /// The device holding blocks `addr .. addr + n` and the LBA of `addr` on it.
    fn route(&self, addr: u64, n: u64, what: &str) -> FsResult<(&Rc<HostStack>, u64)> {
        match &self.companion {
            Some(c) if addr < self.base => {
                if addr + n > self.base {
                    return Err(FsError::Io(format!(
                        "{what} of {n} blocks at {addr} crosses from the companion device into the zoned device (at {})",
                        self.base
                    )));
                }
                Ok((c, addr))
            }
            _ => Ok((&self.stack, addr - self.base)),
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
        let (stack, lba) = self.route(addr, n, "read")?;
        let d = stack
            .submit(IoCmd::Read {
                slba: Lba(lba),
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
        let routed = self
            .route(addr, n, "write")
            .map(|(stack, lba)| (stack.clone(), lba));
        self.sim.spawn(async move {
            let (stack, lba) = routed?;
            let d = stack
                .submit(IoCmd::Write {
                    slba: Lba(lba),
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
        if zslba < self.base {
            return Err(FsError::Io(format!(
                "zone {action:?} at {zslba}: that address is on the companion conventional device, which has no zones"
            )));
        }
        let d = self
            .stack
            .submit(IoCmd::ZoneMgmt {
                action,
                zslba: Lba(zslba - self.base),
                select_all: false,
            })
            .await;
        status(&d, &format!("zone {action:?} at {zslba}"))
    }

    /// Flushes the zoned device's cache, then the companion's.
    pub async fn flush(&self) -> FsResult<()> {
        let d = self.stack.submit(IoCmd::Flush).await;
        status(&d, "flush")?;
        if let Some(c) = &self.companion {
            let d = c.submit(IoCmd::Flush).await;
            status(&d, "flush of the companion device")?;
        }
        Ok(())
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
