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

/// Order and active-zone budget of the commands to each zone of the zoned device.
///
/// Order: every command to a zone takes a ticket when the file system issues it and goes to
/// the host stack when all earlier tickets of the zone have, so a zone receives its writes in
/// the order their blocks were taken. Commands that change what a zone is (TL_open, finish,
/// reset) are barriers: they also wait until every earlier command of the zone has completed,
/// as the device requires (TL_open needs a Full zone, finish must not overtake a write).
///
/// Budget (NVMe ZNS Maximum Active Resources): a zone takes a share when a command makes it
/// active (its first write or copy, a TL_open) and gives it back when it is written to its
/// capacity, finished or reset; a command waiting for a share holds back the later commands of
/// its zone. Without it, writeback that runs far ahead of the device (a sync of a large page
/// cache) starts more zones than the drive allows and fails with Too Many Active Zones; in
/// Linux the block layer's request limit keeps F2FS from getting that far ahead.
/// Deadlock-free when the limit is at least [`LOGS`]: a log moves to a new zone only after
/// handing out every block of the old one, whose commands then complete and give back its
/// share (or finish it, for a threaded-logging zone).
struct ZoneOrder {
    /// `None` when the device sets no active-zone limit.
    shares: Option<Semaphore>,
    zone_lbas: u64,
    cap_lbas: u64,
    zones: RefCell<FxHashMap<u64, Rc<ZoneGate>>>,
}

/// The commands of one zone while any is pending or the zone holds a share.
struct ZoneGate {
    share: RefCell<Option<SemaphorePermit>>,
    /// Tickets handed out, passed to the stack, and completed.
    issued: Cell<u64>,
    passed: Cell<u64>,
    completed: Cell<u64>,
    notify: Notify,
}

/// A command's place in its zone's order.
struct Ticket {
    zone: u64,
    gate: Rc<ZoneGate>,
    n: u64,
}

/// What a command does to its zone, for ordering and the budget.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ZoneEffect {
    /// Writes or copies into the zone (needs a share; gives it back when it reaches the
    /// capacity).
    Fill,
    /// TL_open: a barrier that makes the zone active again.
    Reopen,
    /// Finish or reset: a barrier that ends the zone's activity.
    Close,
    /// Nothing: waits for the zone's earlier commands.
    Quiesce,
}

impl ZoneOrder {
    fn gate_entry(share: Option<SemaphorePermit>) -> Rc<ZoneGate> {
        Rc::new(ZoneGate {
            share: RefCell::new(share),
            issued: Cell::new(0),
            passed: Cell::new(0),
            completed: Cell::new(0),
            notify: Notify::new(),
        })
    }

    /// A ticket for a command to the zone holding `lba`, taken when the command is issued.
    fn ticket(&self, lba: u64) -> Ticket {
        let zone = lba / self.zone_lbas;
        let gate = self
            .zones
            .borrow_mut()
            .entry(zone)
            .or_insert_with(|| ZoneOrder::gate_entry(None))
            .clone();
        let n = gate.issued.get();
        gate.issued.set(n + 1);
        Ticket { zone, gate, n }
    }

    /// Waits for the command's turn (and share). The caller hands the command to the stack
    /// right after, in the same poll, so no later command of the zone can get there first.
    async fn pass(&self, t: &Ticket, effect: ZoneEffect) {
        let g = &t.gate;
        let barrier = effect != ZoneEffect::Fill;
        while !(g.passed.get() == t.n && (!barrier || g.completed.get() == t.n)) {
            g.notify.notified().await;
        }
        if matches!(effect, ZoneEffect::Fill | ZoneEffect::Reopen)
            && g.share.borrow().is_none()
            && let Some(s) = &self.shares
        {
            let permit = s.acquire(1).await;
            *g.share.borrow_mut() = Some(permit);
        }
        g.passed.set(t.n + 1);
        g.notify.notify_all();
    }

    /// The command completed; `releases`: the zone is no longer active (written to its
    /// capacity, finished or reset).
    fn done(&self, t: Ticket, releases: bool) {
        let g = &t.gate;
        g.completed.set(g.completed.get() + 1);
        if releases {
            g.share.borrow_mut().take();
        }
        if g.completed.get() == g.issued.get() && g.share.borrow().is_none() {
            let mut zones = self.zones.borrow_mut();
            if zones.get(&t.zone).is_some_and(|e| Rc::ptr_eq(e, g)) {
                zones.remove(&t.zone);
            }
        }
        g.notify.notify_all();
    }

    /// Waits until every command ordered so far in the zones of `lba .. lba + n` has been
    /// handed to the stack. A read of blocks that a write or zone_compaction still waiting for
    /// its turn (or for an active-zone share) will fill then reaches the device after that
    /// command, which holds it until the data is there (seed 000 §3.2.1), instead of before it,
    /// when the zone may still be empty.
    async fn handed_over(&self, lba: u64, n: u64) {
        for zone in lba / self.zone_lbas..=(lba + n.max(1) - 1) / self.zone_lbas {
            let Some(g) = self.zones.borrow().get(&zone).cloned() else {
                continue;
            };
            let ordered = g.issued.get();
            while g.passed.get() < ordered {
                g.notify.notified().await;
            }
        }
    }

    /// Whether a fill of `lba .. end` reaches the zone's capacity.
    fn fills_zone(&self, lba: u64, end: u64) -> bool {
        end == lba / self.zone_lbas * self.zone_lbas + self.cap_lbas
    }
}

/// One zone_compaction into one zone: sources, destinations, and its place among the zone's
/// writes when the device limits active zones.
type CompactionCmd = (Vec<Lba>, Vec<Lba>, Ticket);

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

    /// Every device loses power at `at` (one power supply, the host's too) and power returns:
    /// the devices come back as their power cut leaves them, the host stacks empty.
    pub fn power_cut(&self, at: zonelab_sim::Nanos) {
        for stack in std::iter::once(&self.zoned).chain(&self.companion) {
            stack.device().borrow_mut().power_cut(at);
            stack.restart();
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
    order: Rc<ZoneOrder>,
    /// The zoned device's chunk mapping (identify_mapping, asked once at mount as seed 000
    /// §3.3.1 does).
    mapping: ChunkMapping,
}

/// The most blocks one merged metadata write carries: Linux's BIO_MAX_PAGES (256 pages, 1 MiB).
const MERGED_WRITE_BLOCKS: usize = 256;

/// Splits addresses in increasing order into runs of consecutive addresses (index ranges) of
/// at most [`MERGED_WRITE_BLOCKS`], starting a new run wherever `starts_zone` holds.
pub(crate) fn merged_runs(
    addrs: &[u64],
    starts_zone: impl Fn(u64) -> bool,
) -> Vec<std::ops::Range<usize>> {
    let mut runs: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, &a) in addrs.iter().enumerate() {
        match runs.last_mut() {
            Some(r)
                if addrs[r.end - 1] + 1 == a
                    && r.len() < MERGED_WRITE_BLOCKS
                    && !starts_zone(a) =>
            {
                r.end = i + 1
            }
            _ => runs.push(i..i + 1),
        }
    }
    runs
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
        let order = {
            let ns = devices.zoned.device().borrow();
            let d = ns.zoned().expect("checked above");
            let limit = ns.profile().zns.max_active;
            if limit != 0 && limit < LOGS {
                return Err(FsError::Invalid(format!(
                    "the device allows {limit} active zones; the file system writes {LOGS} logs at once and needs at least {LOGS} (set zns.max_active)"
                )));
            }
            let shares = (limit != 0).then(|| Semaphore::new(limit as u64));
            let zones = d.zones().zones();
            let zone_lbas = zones.first().map_or(1, |z| z.size);
            // The capacity of the sequential zones the logs fill: a conventional zone's is its
            // size, larger when the sequential zones' capacity is less than theirs.
            let cap_lbas = zones
                .iter()
                .find(|z| !z.is_conventional())
                .map_or(zone_lbas, |z| z.capacity);
            // Zones already active when the file system attaches hold a share.
            let held: FxHashMap<u64, Rc<ZoneGate>> = match &shares {
                Some(sem) => zones
                    .iter()
                    .filter(|z| z.state.is_active())
                    .map(|z| (z.id.0 as u64, ZoneOrder::gate_entry(sem.try_acquire(1))))
                    .collect(),
                None => FxHashMap::default(),
            };
            Rc::new(ZoneOrder {
                shares,
                zone_lbas,
                cap_lbas,
                zones: RefCell::new(held),
            })
        };
        Ok(Dev {
            sim,
            stack: devices.zoned,
            companion: devices.companion,
            base,
            traffic: Cell::new(TrafficBytes::default()),
            order,
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
        if Rc::ptr_eq(stack, &self.stack) {
            self.order.handed_over(lba, n).await;
        }
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
        // Only the zoned device has zones to order.
        let ticket = match &routed {
            Ok((stack, lba)) if Rc::ptr_eq(stack, &self.stack) => Some(self.order.ticket(*lba)),
            _ => None,
        };
        let order = self.order.clone();
        self.sim.spawn(async move {
            let (stack, lba) = routed?;
            if let Some(t) = &ticket {
                order.pass(t, ZoneEffect::Fill).await;
            }
            let d = stack
                .submit(IoCmd::Write {
                    slba: Lba(lba),
                    data,
                })
                .await;
            if let Some(t) = ticket {
                order.done(t, d.status.is_ok() && order.fills_zone(lba, lba + n));
            }
            status(&d, &format!("write of {n} blocks at {addr}"))
        })
    }

    /// Starts the writes of metadata blocks `blocks` (address, one block of bytes each), the
    /// blocks at consecutive addresses in one write of up to [`MERGED_WRITE_BLOCKS`] within a
    /// zone, as F2FS writes its meta pages: `sync_meta_pages` submits them in address order
    /// into one merged bio (`f2fs_submit_page_mbio` extends the bio while the next page
    /// follows the last), and the block layer splits bios at zone boundaries. On a page-mapped
    /// region a lone 4 KiB block costs a read-modify-write of a whole flash page; a run fills
    /// pages. Returns the handles of the writes.
    pub fn write_merged(
        &self,
        mut blocks: Vec<(u64, Vec<u8>)>,
        class: Traffic,
    ) -> Vec<JoinHandle<FsResult<()>>> {
        blocks.sort_unstable_by_key(|b| b.0);
        let addrs: Vec<u64> = blocks.iter().map(|b| b.0).collect();
        let starts_zone =
            |a: u64| a >= self.base && (a - self.base).is_multiple_of(self.order.zone_lbas);
        let mut blocks = blocks.into_iter();
        merged_runs(&addrs, starts_zone)
            .into_iter()
            .map(|run| {
                let mut data = Vec::with_capacity(run.len() * BLOCK);
                for (_, bytes) in blocks.by_ref().take(run.len()) {
                    debug_assert_eq!(bytes.len(), BLOCK, "a metadata write is whole blocks");
                    data.extend_from_slice(&bytes);
                }
                self.write(addrs[run.start], OwnedData::Bytes(data), class)
            })
            .collect()
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
        if let Some(&(src, dst)) = pairs.iter().find(|(s, d)| *s < self.base || *d < self.base) {
            return self.sim.spawn(async move {
                Err(FsError::Io(format!(
                    "zone_compaction from {src} to {dst}: the companion device has no zones"
                )))
            });
        }
        self.count(Traffic::GcDeviceCopy, pairs.len() as u64);
        let mut cmds: Vec<CompactionCmd> = Vec::new();
        let mut zone = None;
        for (src, dst) in pairs {
            let (s, d) = (src - self.base, dst - self.base);
            let z = d / self.mapping.zone_size;
            if zone != Some(z) {
                zone = Some(z);
                cmds.push((Vec::new(), Vec::new(), self.order.ticket(d)));
            }
            let c = cmds.last_mut().expect("pushed above");
            c.0.push(Lba(s));
            c.1.push(Lba(d));
        }
        // One task per destination zone: each goes to the stack in its zone's order.
        let tasks: Vec<JoinHandle<FsResult<()>>> = cmds
            .into_iter()
            .map(|(src, dst, ticket)| {
                let (stack, order) = (self.stack.clone(), self.order.clone());
                self.sim.spawn(async move {
                    order.pass(&ticket, ZoneEffect::Fill).await;
                    let (first, last, n) = (dst[0].0, dst[dst.len() - 1].0, dst.len());
                    let d = stack.submit(IoCmd::ZoneCompaction { src, dst }).await;
                    order.done(
                        ticket,
                        d.status.is_ok() && order.fills_zone(first, last + 1),
                    );
                    status(
                        &d,
                        &format!("zone_compaction of {n} blocks to {first}..={last}"),
                    )
                })
            })
            .collect();
        self.sim.spawn(join_all(tasks))
    }

    /// Starts a TL_open (ZNS+, seed 000 §3.2.2) of the Full zone at `zslba` with its valid
    /// bitmap, after every command issued to the zone before it has completed.
    pub fn tl_open(&self, zslba: u64, valid: Vec<bool>) -> JoinHandle<FsResult<()>> {
        let lba = zslba - self.base;
        let ticket = self.order.ticket(lba);
        let (stack, order) = (self.stack.clone(), self.order.clone());
        self.sim.spawn(async move {
            order.pass(&ticket, ZoneEffect::Reopen).await;
            let d = stack
                .submit(IoCmd::TlOpen {
                    zones: vec![zonelab_device::TlOpenZone {
                        zslba: Lba(lba),
                        valid,
                    }],
                })
                .await;
            let ok = d.status.is_ok();
            // A refused TL_open leaves the zone as it was: inactive.
            order.done(ticket, !ok);
            status(&d, &format!("TL_open of the zone at {zslba}"))
        })
    }

    /// Waits until every command issued so far to the zone holding `addr` has completed.
    pub async fn quiesce(&self, addr: u64) {
        if addr < self.base {
            return;
        }
        let t = self.order.ticket(addr - self.base);
        self.order.pass(&t, ZoneEffect::Quiesce).await;
        self.order.done(t, false);
    }

    pub async fn write_now(&self, addr: u64, data: OwnedData, class: Traffic) -> FsResult<()> {
        self.write(addr, data, class).await
    }

    /// Sends zone management `action` to the zone at `zslba`, after every command issued to
    /// the zone before it has completed.
    pub async fn zone(&self, action: ZoneAction, zslba: u64) -> FsResult<()> {
        self.zone_cmd(action, zslba).await
    }

    /// [`Dev::zone`], started now (its place in the zone's order taken at this call).
    pub fn zone_cmd(&self, action: ZoneAction, zslba: u64) -> JoinHandle<FsResult<()>> {
        if zslba < self.base {
            return self.sim.spawn(async move {
                Err(FsError::Io(format!(
                    "zone {action:?} at {zslba}: that address is on the companion conventional device, which has no zones"
                )))
            });
        }
        let lba = zslba - self.base;
        let ticket = self.order.ticket(lba);
        let closes = matches!(action, ZoneAction::Finish | ZoneAction::Reset);
        let effect = if closes {
            ZoneEffect::Close
        } else {
            ZoneEffect::Quiesce
        };
        let (stack, order) = (self.stack.clone(), self.order.clone());
        self.sim.spawn(async move {
            order.pass(&ticket, effect).await;
            let d = stack
                .submit(IoCmd::ZoneMgmt {
                    action,
                    zslba: Lba(lba),
                    select_all: false,
                })
                .await;
            order.done(ticket, closes && d.status.is_ok());
            status(&d, &format!("zone {action:?} at {zslba}"))
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use zonelab_sim::Nanos;

    /// A read of a zone whose fill waits for an active-zone share waits until that fill is
    /// handed to the stack (before it, the device would find the zone empty: zero blocks); a
    /// read of a zone with nothing queued goes at once.
    #[test]
    fn a_read_waits_until_the_zones_queued_fills_are_handed_over() {
        let sim = Sim::new();
        let order = Rc::new(ZoneOrder {
            shares: Some(Semaphore::new(1)),
            zone_lbas: 100,
            cap_lbas: 100,
            zones: RefCell::new(FxHashMap::default()),
        });
        let s = sim.clone();
        let times = sim
            .block_on(async move {
                // Zone 0 holds the only share; a fill of zone 1 waits for it.
                let first = order.ticket(0);
                order.pass(&first, ZoneEffect::Fill).await;
                let second = order.ticket(100);
                let (o, t) = (order.clone(), s.clone());
                let fill = s.spawn(async move {
                    o.pass(&second, ZoneEffect::Fill).await;
                    t.now()
                });
                let (o, t) = (order.clone(), s.clone());
                let read = s.spawn(async move {
                    o.handed_over(150, 1).await;
                    t.now()
                });
                order.handed_over(10, 1).await;
                let idle_read = s.now();
                // Zone 0 reaches its capacity 5 us later and gives its share back.
                s.sleep(Nanos(5_000)).await;
                order.done(first, true);
                (idle_read, fill.await, read.await)
            })
            .expect("simulation finishes");
        assert_eq!(times, (Nanos(0), Nanos(5_000), Nanos(5_000)));
    }

    #[test]
    fn merged_runs_break_at_gaps_zone_starts_and_the_bio_limit() {
        let addrs = [1, 2, 3, 5, 6, 7, 8, 9];
        assert_eq!(
            merged_runs(&addrs, |a| a.is_multiple_of(8)),
            vec![0..3, 3..6, 6..8],
            "a gap after 3, a zone starting at 8"
        );
        let long: Vec<u64> = (0..MERGED_WRITE_BLOCKS as u64 + 2).collect();
        assert_eq!(
            merged_runs(&long, |_| false),
            vec![
                0..MERGED_WRITE_BLOCKS,
                MERGED_WRITE_BLOCKS..MERGED_WRITE_BLOCKS + 2
            ]
        );
        assert!(merged_runs(&[], |_| false).is_empty());
    }
}
