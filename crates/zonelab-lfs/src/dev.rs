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
use rustc_hash::FxHashMap;
use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use zonelab_device::{
    ChunkMapping, HostStack, IoCmd, IoDone, Lba, OwnedData, ReadData, ZoneAction,
};
use zonelab_sim::sync::{Notify, Semaphore, SemaphorePermit};
use zonelab_sim::{JoinHandle, Sim};

/// Logs the file system writes at once, each holding at most one zone it is still filling.
pub const LOGS: u32 = 6;

/// The zoned device's active-zone budget (NVMe ZNS Maximum Active Resources). A zone takes a
/// share when the file system first writes it and gives it back when its last block is
/// written or it is finished or reset; a write to a zone without one waits, in order, until a
/// zone gives one back. Without it, writeback that runs far ahead of the device (a sync of a
/// large page cache) starts more zones than the drive allows and fails with Too Many Active
/// Zones; in Linux the block layer's request limit keeps F2FS from getting that far ahead.
/// Deadlock-free when the limit is at least [`LOGS`]: a log moves to a new zone only after
/// handing out every block of the old one, whose writes then complete and give back its share.
struct ActiveZones {
    shares: Semaphore,
    zone_lbas: u64,
    cap_lbas: u64,
    zones: RefCell<FxHashMap<u64, Rc<ZoneGate>>>,
}

/// The writes to one zone while it holds, or waits for, a share. Writes go to the stack in the
/// order the file system issued them (a zone is written sequentially): each takes a ticket
/// and passes when every earlier ticket has.
struct ZoneGate {
    /// The zone's share once it has one (`Some(None)`: it was already active when the file
    /// system attached).
    share: RefCell<Option<Option<SemaphorePermit>>>,
    issued: Cell<u64>,
    passed: Cell<u64>,
    notify: Notify,
}

impl ZoneGate {
    fn held(&self) -> bool {
        self.share.borrow().is_some()
    }
}

/// What a write must wait for before it goes to the device.
enum Gate {
    Go,
    /// The first write of a zone without a share: take one.
    Take(Rc<ZoneGate>),
    /// A write behind others of its zone still waiting: its ticket.
    Wait(Rc<ZoneGate>, u64),
}

impl ActiveZones {
    fn gate(&self, lba: u64) -> Gate {
        let z = lba / self.zone_lbas;
        let mut zones = self.zones.borrow_mut();
        match zones.get(&z) {
            Some(g) if g.held() && g.passed.get() == g.issued.get() => Gate::Go,
            Some(g) => {
                let ticket = g.issued.get();
                g.issued.set(ticket + 1);
                Gate::Wait(g.clone(), ticket)
            }
            None => {
                let g = Rc::new(ZoneGate {
                    share: RefCell::new(None),
                    issued: Cell::new(1),
                    passed: Cell::new(0),
                    notify: Notify::new(),
                });
                zones.insert(z, g.clone());
                Gate::Take(g)
            }
        }
    }

    /// Waits for the write's turn. The caller hands the write to the stack right after, in
    /// the same poll, so no later write of the zone can get there first.
    async fn pass(&self, gate: Gate) {
        let g = match gate {
            Gate::Go => return,
            Gate::Take(g) => {
                let share = self.shares.acquire(1).await;
                *g.share.borrow_mut() = Some(Some(share));
                g
            }
            Gate::Wait(g, ticket) => {
                while !(g.held() && g.passed.get() == ticket) {
                    g.notify.notified().await;
                }
                g
            }
        };
        g.passed.set(g.passed.get() + 1);
        g.notify.notify_all();
    }

    /// A write of `lba .. end` completed: a zone written to its capacity is no longer active.
    fn written(&self, lba: u64, end: u64) {
        let z = lba / self.zone_lbas;
        if end == z * self.zone_lbas + self.cap_lbas {
            self.zones.borrow_mut().remove(&z);
        }
    }

    /// Zone `z` was finished or reset.
    fn closed(&self, z: u64) {
        let mut zones = self.zones.borrow_mut();
        if zones.get(&z).is_some_and(|g| g.held()) {
            zones.remove(&z);
        }
    }
}

/// One zone_compaction into one zone: sources, destinations, and its place among the zone's
/// writes when the device limits active zones.
type CompactionCmd = (Vec<Lba>, Vec<Lba>, Option<(Gate, Rc<ActiveZones>)>);

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
    /// Blocks the device copied for cleaning (zone_compaction): no host transfer.
    GcDeviceCopy,
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
    /// Bytes copied inside the device by zone_compaction (seed 000 IZC).
    pub gc_device_copy: u64,
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
    /// `None` when the zoned device sets no active-zone limit.
    active: Option<Rc<ActiveZones>>,
    /// The zoned device's chunk mapping (identify_mapping, asked once at mount as seed 000
    /// §3.3.1 does).
    mapping: ChunkMapping,
}

fn status(d: &IoDone, what: &str) -> FsResult<()> {
    d.status
        .map(|_| ())
        .map_err(|s| FsError::Io(format!("{what}: {s}")))
}

impl Dev {
    /// The file system's access to `devices`; refuses a zoned device whose active-zone limit
    /// is below the [`LOGS`] the file system keeps.
    pub fn new(sim: Sim, devices: Devices) -> FsResult<Dev> {
        let base = devices.companion_lbas();
        let mapping = match devices.zoned.device().borrow().zoned() {
            Some(d) => d.chunk_mapping(),
            None => {
                return Err(FsError::Invalid(
                    "the file system needs a zoned device (this namespace is conventional)".into(),
                ));
            }
        };
        let active = {
            let ns = devices.zoned.device().borrow();
            match ns.zoned() {
                Some(d) if ns.profile().zns.max_active != 0 => {
                    let limit = ns.profile().zns.max_active;
                    if limit < LOGS {
                        return Err(FsError::Invalid(format!(
                            "the device allows {limit} active zones; the file system writes {LOGS} logs at once and needs at least {LOGS} (set zns.max_active)"
                        )));
                    }
                    let shares = Semaphore::new(limit as u64);
                    let zones = d.zones().zones();
                    let zone_lbas = zones.first().map_or(1, |z| z.size);
                    let cap_lbas = zones.first().map_or(1, |z| z.capacity);
                    let held: FxHashMap<u64, Rc<ZoneGate>> = zones
                        .iter()
                        .filter(|z| z.state.is_active())
                        .map(|z| {
                            let g = ZoneGate {
                                share: RefCell::new(Some(shares.try_acquire(1))),
                                issued: Cell::new(0),
                                passed: Cell::new(0),
                                notify: Notify::new(),
                            };
                            (z.id.0 as u64, Rc::new(g))
                        })
                        .collect();
                    Some(Rc::new(ActiveZones {
                        shares,
                        zone_lbas,
                        cap_lbas,
                        zones: RefCell::new(held),
                    }))
                }
                _ => None,
            }
        };
        Ok(Dev {
            sim,
            stack: devices.zoned,
            companion: devices.companion,
            base,
            traffic: Cell::new(TrafficBytes::default()),
            active,
            mapping,
        })
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
            Traffic::GcDeviceCopy => t.gc_device_copy += b,
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
        // Only the zoned device has zones to account.
        let active = match &routed {
            Ok((stack, lba)) if Rc::ptr_eq(stack, &self.stack) => {
                self.active.clone().map(|a| (a.gate(*lba), a))
            }
            _ => None,
        };
        self.sim.spawn(async move {
            let (stack, lba) = routed?;
            let active = match active {
                Some((gate, a)) => {
                    a.pass(gate).await;
                    Some(a)
                }
                None => None,
            };
            let d = stack
                .submit(IoCmd::Write {
                    slba: Lba(lba),
                    data,
                })
                .await;
            status(&d, &format!("write of {n} blocks at {addr}"))?;
            if let Some(a) = active {
                a.written(lba, lba + n);
            }
            Ok(())
        })
    }

    /// The flash chip (chip group, chip in the group) holding zoned-device block `addr`, and
    /// the chunk (flash page) it is in: blocks with the same chunk number are copied together;
    /// chunks on the same chip can be copied back (seed 000 §3.3.1).
    pub fn chip_of(&self, addr: u64) -> ((u32, u32), u64) {
        let lba = addr - self.base;
        (
            self.mapping.chip_of(Lba(lba)),
            lba / self.mapping.lbas_per_chunk,
        )
    }

    /// Blocks per chunk of the zoned device.
    pub fn blocks_per_chunk(&self) -> u64 {
        self.mapping.lbas_per_chunk
    }

    /// Starts an in-device copy of block `src[i]` to block `dst[i]` for every i (ZNS+
    /// zone_compaction, seed 000 §3.2.1) and returns a handle to await its completion. Every
    /// block is on the zoned device; one command goes to each destination zone, its
    /// destinations in rising order, ordered with the writes to that zone like [`Dev::write`].
    pub fn compact(&self, pairs: Vec<(u64, u64)>) -> JoinHandle<FsResult<()>> {
        let mut pairs = pairs;
        pairs.sort_by_key(|p| p.1);
        self.count(Traffic::GcDeviceCopy, pairs.len() as u64);
        let mut cmds: Vec<CompactionCmd> = Vec::new();
        let mut bad = None;
        let mut zone = None;
        for (src, dst) in pairs {
            if src < self.base || dst < self.base {
                bad = Some(format!(
                    "zone_compaction from {src} to {dst}: the companion device has no zones"
                ));
                break;
            }
            let (s, d) = (src - self.base, dst - self.base);
            let z = d / self.mapping.zone_size;
            if zone != Some(z) {
                zone = Some(z);
                let gate = self.active.clone().map(|a| (a.gate(d), a));
                cmds.push((Vec::new(), Vec::new(), gate));
            }
            let c = cmds.last_mut().expect("pushed above");
            c.0.push(Lba(s));
            c.1.push(Lba(d));
        }
        let stack = self.stack.clone();
        self.sim.spawn(async move {
            if let Some(e) = bad {
                return Err(FsError::Io(e));
            }
            let mut handles = Vec::new();
            for (src, dst, gate) in cmds {
                let active = match gate {
                    Some((g, a)) => {
                        a.pass(g).await;
                        Some(a)
                    }
                    None => None,
                };
                let (first, last, n) = (dst[0].0, dst[dst.len() - 1].0, dst.len());
                // Handed to the stack now, in order; completions awaited together below.
                let done = stack.submit(IoCmd::ZoneCompaction { src, dst });
                handles.push(async move {
                    let d = done.await;
                    status(
                        &d,
                        &format!("zone_compaction of {n} blocks to {first}..={last}"),
                    )?;
                    if let Some(a) = active {
                        a.written(first, last + 1);
                    }
                    FsResult::Ok(())
                });
            }
            let mut first = Ok(());
            for h in handles {
                let r = h.await;
                if first.is_ok() {
                    first = r;
                }
            }
            first
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
        let lba = zslba - self.base;
        let d = self
            .stack
            .submit(IoCmd::ZoneMgmt {
                action,
                zslba: Lba(lba),
                select_all: false,
            })
            .await;
        status(&d, &format!("zone {action:?} at {zslba}"))?;
        if let Some(a) = &self.active
            && matches!(action, ZoneAction::Finish | ZoneAction::Reset)
        {
            a.closed(lba / a.zone_lbas);
        }
        Ok(())
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
