//! The host I/O stack between a workload and the device (seed 001 §III-C/D).
//!
//! * `spdk`: user-space polled driver, no scheduler; lowest per-command cost.
//! * `io_uring` with `none`: kernel path, more cost per command, requests go straight down.
//! * `io_uring` with `mq-deadline`: the zoned-device write path of Linux — at most one write per
//!   zone is dispatched at a time (zone write locking) and writes queued behind it that continue
//!   each other are merged into one larger request, up to `mq_deadline_max_merge`.
//!
//! On a conventional namespace there are no zones to lock: mq-deadline dispatches writes
//! straight down (with its dispatch cost), as Linux does for a non-zoned disk.
//!
//! Submission cost is paid before the command reaches the device (fio's `slat`), completion cost
//! after the device completes it.

use crate::Profile;
use crate::namespace::Namespace;
use crate::payload::WriteData;
use crate::payload::{OwnedData, ReadData};
use crate::record::{CommandLog, DeviceCmd};
use crate::status::NvmeStatus;
use crate::zns::{Completion, ZoneAction, ZonedDevice};
use crate::znsplus::TlOpenZone;
use crate::zone::{Lba, ZoneId};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use zonelab_sim::sync::{Notify, OneshotReceiver, OneshotSender, oneshot};
use zonelab_sim::{Nanos, Sim};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    Spdk,
    IoUring,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoScheduler {
    None,
    MqDeadline,
}

impl std::str::FromStr for IoEngine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "spdk" => Ok(IoEngine::Spdk),
            "io_uring" => Ok(IoEngine::IoUring),
            _ => Err(format!("ioengine '{s}': use spdk or io_uring")),
        }
    }
}

impl std::str::FromStr for IoScheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(IoScheduler::None),
            "mq-deadline" => Ok(IoScheduler::MqDeadline),
            _ => Err(format!("ioscheduler '{s}': use none or mq-deadline")),
        }
    }
}

/// What the host stack needs of a device: the commands, and the zone size for zone locking.
/// [`Namespace`] (the default) and [`ZonedDevice`] implement it.
pub trait StackDevice {
    fn read(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        nlb: u64,
        out: Option<&mut ReadData>,
    ) -> Completion;
    fn write(
        &mut self,
        now: Nanos,
        at: Nanos,
        slba: Lba,
        data: WriteData<'_>,
        append: bool,
    ) -> Completion;
    fn zone_mgmt(
        &mut self,
        now: Nanos,
        at: Nanos,
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    ) -> Completion;
    fn flush(&mut self, now: Nanos, at: Nanos) -> Completion;
    /// ZNS+ zone_compaction (seed 000 §3.2.1).
    fn zone_compaction(&mut self, now: Nanos, at: Nanos, src: &[Lba], dst: &[Lba]) -> Completion;
    /// ZNS+ TL_open (seed 000 §3.2.2).
    fn tl_open(&mut self, now: Nanos, at: Nanos, zones: &[TlOpenZone]) -> Completion;
    /// The device acts at `now` with no command: queued in-storage copies start as their
    /// chips allow.
    fn settle(&mut self, now: Nanos);
    /// Whether ZNS+ copies wait for their chips: a write may then complete only as they go
    /// (it takes a ticket).
    fn has_queued_copies(&self) -> bool;
    /// After a zone_compaction or a write: its ticket if flash operations it completes after
    /// were queued, its completion then coming from [`StackDevice::ticket_status`] (the
    /// returned `done` is only when to ask first).
    fn take_ticket(&mut self) -> Option<u64>;
    /// The completion of a command with queued operations, or `Err(t)`: settle at `t` and
    /// ask again.
    fn ticket_status(&mut self, ticket: u64) -> Result<Nanos, Nanos>;
    fn profile(&self) -> &Profile;
    fn lba_size(&self) -> u64;
    fn buffer_limit(&self) -> u64;
    /// Zone size in LBAs, or None for a namespace without zones.
    fn zone_size(&self) -> Option<u64>;
    fn total_lbas(&self) -> u64;
    /// When a management command that promised completion at `promised` now completes (zone
    /// resets run at low priority and are pushed back by I/O handled meanwhile).
    fn management_completion(&self, promised: Nanos) -> Nanos;
}

macro_rules! stack_device {
    ($t:ty, $zs:expr, $total:expr) => {
        impl StackDevice for $t {
            fn read(
                &mut self,
                now: Nanos,
                at: Nanos,
                slba: Lba,
                nlb: u64,
                out: Option<&mut ReadData>,
            ) -> Completion {
                <$t>::read(self, now, at, slba, nlb, out)
            }
            fn write(
                &mut self,
                now: Nanos,
                at: Nanos,
                slba: Lba,
                data: WriteData<'_>,
                append: bool,
            ) -> Completion {
                <$t>::write(self, now, at, slba, data, append)
            }
            fn zone_mgmt(
                &mut self,
                now: Nanos,
                at: Nanos,
                action: ZoneAction,
                zslba: Lba,
                select_all: bool,
            ) -> Completion {
                <$t>::zone_mgmt(self, now, at, action, zslba, select_all)
            }
            fn flush(&mut self, now: Nanos, at: Nanos) -> Completion {
                <$t>::flush(self, now, at)
            }
            fn zone_compaction(
                &mut self,
                now: Nanos,
                at: Nanos,
                src: &[Lba],
                dst: &[Lba],
            ) -> Completion {
                <$t>::zone_compaction(self, now, at, src, dst)
            }
            fn tl_open(&mut self, now: Nanos, at: Nanos, zones: &[TlOpenZone]) -> Completion {
                <$t>::tl_open(self, now, at, zones)
            }
            fn settle(&mut self, now: Nanos) {
                <$t>::settle(self, now)
            }
            fn has_queued_copies(&self) -> bool {
                <$t>::has_queued_copies(self)
            }
            fn take_ticket(&mut self) -> Option<u64> {
                <$t>::take_ticket(self)
            }
            fn ticket_status(&mut self, ticket: u64) -> Result<Nanos, Nanos> {
                <$t>::ticket_status(self, ticket)
            }
            fn management_completion(&self, promised: Nanos) -> Nanos {
                <$t>::management_completion(self, promised)
            }
            fn profile(&self) -> &Profile {
                <$t>::profile(self)
            }
            fn lba_size(&self) -> u64 {
                <$t>::lba_size(self)
            }
            fn buffer_limit(&self) -> u64 {
                <$t>::buffer_limit(self)
            }
            fn zone_size(&self) -> Option<u64> {
                let f: fn(&$t) -> Option<u64> = $zs;
                f(self)
            }
            fn total_lbas(&self) -> u64 {
                let f: fn(&$t) -> u64 = $total;
                f(self)
            }
        }
    };
}

stack_device!(ZonedDevice, |d| Some(d.zones().geometry().zone_size), |d| d
    .zones()
    .total_lbas());
stack_device!(
    Namespace,
    |d| d.zoned().map(|z| z.zones().geometry().zone_size),
    |d| d.total_lbas()
);

/// A command as a workload issues it.
#[derive(Clone, Debug)]
pub enum IoCmd {
    Read {
        slba: Lba,
        nlb: u64,
        want_data: bool,
    },
    Write {
        slba: Lba,
        data: OwnedData,
    },
    Append {
        zslba: Lba,
        data: OwnedData,
    },
    ZoneMgmt {
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    },
    Flush,
    /// ZNS+ zone_compaction: block `src[i]` is copied to `dst[i]` inside the device. The
    /// completion comes when the last copy is on flash; the host need not wait for it.
    ZoneCompaction {
        src: Vec<Lba>,
        dst: Vec<Lba>,
    },
    /// ZNS+ TL_open of Full zones with their valid bitmaps.
    TlOpen {
        zones: Vec<TlOpenZone>,
    },
}

/// A completed command with its timestamps.
#[derive(Clone, Debug)]
pub struct IoDone {
    pub status: Result<Option<Lba>, NvmeStatus>,
    /// When the workload issued it.
    pub issued: Nanos,
    /// When it reached the device (issued + submission cost, + scheduler wait).
    pub submitted: Nanos,
    /// When the workload saw the completion.
    pub completed: Nanos,
    /// The data of a read that asked for it (boxed: most commands carry none, and this type
    /// is held across every command's wait).
    pub data: Option<Box<ReadData>>,
}

impl IoDone {
    /// The completion of a command split into pieces, before any piece is folded in.
    fn split(issued: Nanos) -> IoDone {
        IoDone {
            status: Ok(None),
            issued,
            submitted: Nanos::MAX,
            completed: issued,
            data: None,
        }
    }

    /// Folds in the completion of the next piece of a split command (in LBA order): its status
    /// is the first piece's, or the first error; it reached the device with its first piece
    /// and completes with its last.
    fn merge_piece(&mut self, piece: IoDone) {
        let first = self.submitted == Nanos::MAX;
        if first || (self.status.is_ok() && piece.status.is_err()) {
            self.status = piece.status;
        }
        self.submitted = self.submitted.min(piece.submitted);
        self.completed = self.completed.max(piece.completed);
    }
    /// Submission latency (fio's slat).
    pub fn slat(&self) -> Nanos {
        self.submitted - self.issued
    }
    /// Completion latency (fio's clat).
    pub fn clat(&self) -> Nanos {
        self.completed - self.submitted
    }
    /// Total latency.
    pub fn lat(&self) -> Nanos {
        self.completed - self.issued
    }
}

/// Counters of the host stack.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct HostStackCounters {
    /// Requests the device saw.
    pub dispatched: u64,
    /// Requests merged into another one before dispatch.
    pub merged: u64,
}

struct Queued {
    slba: Lba,
    op: QueuedOp,
    issued: Nanos,
    /// Its place among the zone's queued commands (see [`ZoneQueue::dispatched`]).
    seq: u64,
    reply: OneshotSender<IoDone>,
}

/// A command held in a zone's queue: a write, or a zone_compaction into the zone (a copy is a
/// write of its destinations, so the zone write lock orders it with the zone's writes).
enum QueuedOp {
    Write(OwnedData),
    Compaction { src: Vec<Lba>, dst: Vec<Lba> },
}

#[derive(Default)]
struct ZoneQueue {
    busy: bool,
    pending: VecDeque<Queued>,
    /// Commands queued so far, and handed to the device so far.
    enqueued: u64,
    dispatched: u64,
    /// Notified whenever one is handed to the device.
    on_dispatch: Notify,
}

impl QueuedOp {
    /// Whether it writes any of the LBAs `slba .. end` (`from`: where a write starts).
    fn writes_into(&self, from: Lba, lba_size: u64, slba: u64, end: u64) -> bool {
        match self {
            QueuedOp::Write(d) => from.0 < end && slba < from.0 + d.blocks(lba_size),
            QueuedOp::Compaction { dst, .. } => dst.iter().any(|l| (slba..end).contains(&l.0)),
        }
    }
}

/// The host side of one device: engine, scheduler and the device itself.
pub struct HostStack<D: StackDevice = Namespace> {
    sim: Sim,
    device: Rc<RefCell<D>>,
    engine: IoEngine,
    scheduler: IoScheduler,
    /// Whether writes are zone-locked (zoned namespaces under mq-deadline).
    zone_locking: bool,
    submit_cost: Nanos,
    complete_cost: Nanos,
    dispatch_cost: Nanos,
    max_merge_lbas: u64,
    /// Largest write the device takes in one command; larger ones are split (as the block
    /// layer splits a bio at the queue's max_hw_sectors).
    max_transfer_lbas: u64,
    zone_size: u64,
    lba_size: u64,
    zones: RefCell<BTreeMap<u32, ZoneQueue>>,
    counters: Cell<HostStackCounters>,
    /// Where every command handed to the device is recorded, if anywhere ([`crate::record`]).
    recorder: RefCell<Option<Rc<CommandLog>>>,
}

impl<D: StackDevice + 'static> HostStack<D> {
    /// Builds the stack. `spdk` has no scheduler; asking for one is an error.
    pub fn new(
        sim: Sim,
        device: Rc<RefCell<D>>,
        engine: IoEngine,
        scheduler: IoScheduler,
    ) -> Result<Rc<HostStack<D>>, String> {
        if engine == IoEngine::Spdk && scheduler != IoScheduler::None {
            return Err("ioscheduler applies to the kernel path only: use ioengine=io_uring with ioscheduler=mq-deadline, or ioscheduler=none with spdk".into());
        }
        let (h, lba_size, zone_size, zoned) = {
            let d = device.borrow();
            (
                d.profile().host.clone(),
                d.lba_size(),
                d.zone_size().unwrap_or(d.total_lbas().max(1)),
                d.zone_size().is_some(),
            )
        };
        let (submit_cost, complete_cost) = match engine {
            IoEngine::Spdk => (h.spdk_submit.0, h.spdk_complete.0),
            IoEngine::IoUring => (h.io_uring_submit.0, h.io_uring_complete.0),
        };
        let dispatch_cost = match scheduler {
            IoScheduler::None => Nanos::ZERO,
            IoScheduler::MqDeadline => h.mq_deadline_dispatch.0,
        };
        let max_transfer_lbas = device.borrow().buffer_limit();
        let max_merge_lbas = (h.mq_deadline_max_merge.0 / lba_size).clamp(1, max_transfer_lbas);
        Ok(Rc::new(HostStack {
            sim,
            device,
            engine,
            scheduler,
            zone_locking: zoned && scheduler == IoScheduler::MqDeadline,
            submit_cost,
            complete_cost,
            dispatch_cost,
            max_merge_lbas,
            max_transfer_lbas,
            zone_size,
            lba_size,
            zones: RefCell::new(BTreeMap::new()),
            counters: Cell::new(HostStackCounters::default()),
            recorder: RefCell::new(None),
        }))
    }

    pub fn device(&self) -> &Rc<RefCell<D>> {
        &self.device
    }
    pub fn engine(&self) -> IoEngine {
        self.engine
    }
    pub fn scheduler(&self) -> IoScheduler {
        self.scheduler
    }
    pub fn counters(&self) -> HostStackCounters {
        self.counters.get()
    }

    /// The host restarts (after a power loss that took it down with the device): the writes
    /// its scheduler held back for busy zones are gone and every zone's write lock is free.
    /// The tasks that were waiting for them are not resumed (the simulation drops them), so a
    /// lock they held must not outlive them.
    pub fn restart(&self) {
        self.zones.borrow_mut().clear();
    }

    /// Records every command handed to the device from now on into `log` (`None`: stops).
    pub fn record_into(&self, log: Option<Rc<CommandLog>>) {
        *self.recorder.borrow_mut() = log;
    }

    /// Records a command handed to the device, if recording; `cmd` builds it only then.
    fn recorded(&self, now: Nanos, at: Nanos, c: &Completion, cmd: impl FnOnce() -> DeviceCmd) {
        if let Some(log) = &*self.recorder.borrow() {
            log.push(now, at, cmd(), c);
        }
    }

    fn count(&self, f: impl FnOnce(&mut HostStackCounters)) {
        let mut c = self.counters.get();
        f(&mut c);
        self.counters.set(c);
    }

    /// A request the host completes itself, with no device command (fio's trim of a zone that
    /// holds no data under zonemode=zbd): it costs the engine's submission and completion,
    /// and at least a nanosecond, so a loop of them still advances virtual time. Resolves
    /// when the workload sees it.
    pub async fn complete_in_host(&self) -> IoDone {
        let issued = self.sim.now();
        let submitted = issued + self.submit_cost;
        let completed = (submitted + self.complete_cost).max(issued + Nanos(1));
        self.sim.sleep_until(completed).await;
        IoDone {
            status: Ok(None),
            issued,
            submitted,
            completed,
            data: None,
        }
    }

    /// Issues a command and resolves when the workload sees its completion.
    pub async fn submit(self: &Rc<Self>, cmd: IoCmd) -> IoDone {
        match self.dispatch(cmd) {
            Ok(done) => {
                self.sim.sleep_until(done.completed).await;
                done
            }
            // Boxed: the rarer path's future is large and would size every caller's future.
            Err(cmd) => Box::pin(self.submit_waiting(cmd)).await,
        }
    }

    /// Issues `cmd` now when its completion time is known at once (reads, and writes, appends
    /// and flushes that no zone lock holds back): the device handles it, and the result is what
    /// [`HostStack::submit`] resolves to at `completed`; the caller waits until then. Zone
    /// management and zone-locked writes come back unissued (`Err`), for `submit`.
    ///
    /// `submit` is this plus the wait; callers that issue many commands use it to keep their
    /// own futures small.
    #[inline(always)]
    pub fn dispatch(&self, cmd: IoCmd) -> Result<IoDone, IoCmd> {
        match &cmd {
            IoCmd::ZoneMgmt { .. } => return Err(cmd),
            IoCmd::Write { .. } if self.zone_locking => return Err(cmd),
            // Its completion may come later than the device first says (programs queued
            // behind copies).
            IoCmd::Write { .. } | IoCmd::Append { .. }
                if self.device.borrow().has_queued_copies() =>
            {
                return Err(cmd);
            }
            IoCmd::Write { data, .. } if data.blocks(self.lba_size) > self.max_transfer_lbas => {
                return Err(cmd);
            }
            IoCmd::Read { nlb, .. } if *nlb > self.max_transfer_lbas => return Err(cmd),
            IoCmd::Read { slba, nlb, .. }
                if self.zone_locking && self.queued_write_into(*slba, *nlb).is_some() =>
            {
                return Err(cmd);
            }
            // Its completion may come later than the device first says (copies queued).
            IoCmd::ZoneCompaction { .. } => return Err(cmd),
            _ => {}
        }
        let issued = self.sim.now();
        let at = issued + self.submit_cost + self.dispatch_cost;
        let now = issued;
        let mut data = None;
        let completion: Completion = {
            let mut dev = self.device.borrow_mut();
            match &cmd {
                IoCmd::Read {
                    slba,
                    nlb,
                    want_data,
                } => {
                    if *want_data {
                        let mut out = ReadData::default();
                        let c = dev.read(now, at, *slba, *nlb, Some(&mut out));
                        data = Some(Box::new(out));
                        c
                    } else {
                        dev.read(now, at, *slba, *nlb, None)
                    }
                }
                IoCmd::Write { slba, data } => dev.write(now, at, *slba, data.as_ref(), false),
                IoCmd::Append { zslba, data } => dev.write(now, at, *zslba, data.as_ref(), true),
                IoCmd::Flush => dev.flush(now, at),
                IoCmd::TlOpen { zones } => dev.tl_open(now, at, zones),
                IoCmd::ZoneMgmt { .. } | IoCmd::ZoneCompaction { .. } => {
                    unreachable!("returned above")
                }
            }
        };
        self.recorded(now, at, &completion, || match cmd {
            IoCmd::Read { slba, nlb, .. } => DeviceCmd::Read { slba, nlb },
            IoCmd::Write { slba, data } => DeviceCmd::Write {
                slba,
                data,
                append: false,
            },
            IoCmd::Append { zslba, data } => DeviceCmd::Write {
                slba: zslba,
                data,
                append: true,
            },
            IoCmd::Flush => DeviceCmd::Flush,
            IoCmd::TlOpen { zones } => DeviceCmd::TlOpen { zones },
            IoCmd::ZoneMgmt { .. } | IoCmd::ZoneCompaction { .. } => {
                unreachable!("returned above")
            }
        });
        self.count(|c| c.dispatched += 1);
        Ok(IoDone {
            status: completion.status,
            issued,
            submitted: at,
            completed: completion.done + self.complete_cost,
            data,
        })
    }

    /// The last command still queued behind a zone write lock that writes into `slba ..
    /// slba + nlb`, as (zone, its place in the zone's queue).
    fn queued_write_into(&self, slba: Lba, nlb: u64) -> Option<(u32, u64)> {
        let end = slba.0 + nlb;
        let zones = self.zones.borrow();
        let (first, last) = (slba.0 / self.zone_size, (end - 1) / self.zone_size);
        (first..=last).rev().find_map(|z| {
            let q = zones.get(&(z as u32))?;
            q.pending
                .iter()
                .rev()
                .find(|c| c.op.writes_into(c.slba, self.lba_size, slba.0, end))
                .map(|c| (z as u32, c.seq))
        })
    }

    /// Zone management, zone-locked writes, and reads of blocks a zone-locked write or copy
    /// still queued will write: their completion is not known when issued.
    async fn submit_waiting(self: &Rc<Self>, cmd: IoCmd) -> IoDone {
        let issued = self.sim.now();
        // A read waits until the queued commands that write its blocks have reached the
        // device (which then orders the read after them): the block layer's zone write lock
        // holds writes back, and a read must not overtake them to blocks not yet written.
        if let IoCmd::Read { slba, nlb, .. } = &cmd
            && self.zone_locking
        {
            while let Some((zone, seq)) = self.queued_write_into(*slba, *nlb) {
                let wait = {
                    let zones = self.zones.borrow();
                    let q = &zones[&zone];
                    (q.dispatched <= seq).then(|| q.on_dispatch.notified())
                };
                if let Some(dispatch) = wait {
                    dispatch.await;
                }
            }
        }
        let cmd = match cmd {
            IoCmd::Write { slba, data } if data.blocks(self.lba_size) > self.max_transfer_lbas => {
                return self.submit_split_write(issued, slba, data).await;
            }
            IoCmd::Read {
                slba,
                nlb,
                want_data,
            } if nlb > self.max_transfer_lbas => {
                return self.submit_split_read(issued, slba, nlb, want_data).await;
            }
            cmd @ IoCmd::Read { .. } => {
                let Ok(mut done) = self.dispatch(cmd) else {
                    unreachable!("no queued write holds the read back any more")
                };
                done.issued = issued;
                self.sim.sleep_until(done.completed).await;
                return done;
            }
            IoCmd::Write { slba, data } if self.zone_locking => {
                return self
                    .write_through_scheduler(issued, slba, QueuedOp::Write(data))
                    .await;
            }
            cmd @ (IoCmd::Write { .. } | IoCmd::Append { .. }) => {
                return self.submit_write_with_ticket(issued, cmd).await;
            }
            IoCmd::ZoneCompaction { src, dst } if self.zone_locking && !dst.is_empty() => {
                let slba = dst[0];
                return self
                    .write_through_scheduler(issued, slba, QueuedOp::Compaction { src, dst })
                    .await;
            }
            IoCmd::ZoneCompaction { src, dst } => {
                let at = issued + self.submit_cost + self.dispatch_cost;
                let (completion, ticket) = self.compaction_to_device(issued, at, &src, &dst);
                self.recorded(issued, at, &completion, || DeviceCmd::ZoneCompaction {
                    src,
                    dst,
                });
                self.count(|c| c.dispatched += 1);
                let done = self.ticket_done(issued, at, completion, ticket).await;
                self.sim.sleep_until(done.completed).await;
                return done;
            }
            cmd => cmd,
        };
        let IoCmd::ZoneMgmt {
            action,
            zslba,
            select_all,
        } = cmd
        else {
            unreachable!("dispatch issues every other command")
        };
        let at = issued + self.submit_cost + self.dispatch_cost;
        let now = issued;
        let completion = self
            .device
            .borrow_mut()
            .zone_mgmt(now, at, action, zslba, select_all);
        self.recorded(now, at, &completion, || DeviceCmd::ZoneMgmt {
            action,
            zslba,
            select_all,
        });
        self.count(|c| c.dispatched += 1);
        let mut device_done = completion.done;
        self.sim.sleep_until(device_done + self.complete_cost).await;
        // A reset's completion moves later while I/O preempts it; wait until it holds.
        loop {
            let now_expected = self.device.borrow().management_completion(device_done);
            if now_expected <= device_done {
                break;
            }
            device_done = now_expected;
            self.sim.sleep_until(device_done + self.complete_cost).await;
        }
        IoDone {
            status: completion.status,
            issued,
            submitted: at,
            completed: device_done + self.complete_cost,
            data: None,
        }
    }

    /// A write or append (one command) while ZNS+ copies are queued: the device may queue its
    /// programs behind them, and its completion then comes as they start.
    async fn submit_write_with_ticket(&self, issued: Nanos, cmd: IoCmd) -> IoDone {
        let (slba, data, append) = match cmd {
            IoCmd::Write { slba, data } => (slba, data, false),
            IoCmd::Append { zslba, data } => (zslba, data, true),
            _ => unreachable!("only writes and appends come here"),
        };
        let (at, completion, ticket) = self.write_taking_ticket(issued, slba, data, append);
        let done = self.ticket_done(issued, at, completion, ticket).await;
        self.sim.sleep_until(done.completed).await;
        done
    }

    /// Hands a write to the device now: when it was submitted, its completion, and its ticket
    /// if its programs were queued.
    fn write_taking_ticket(
        &self,
        issued: Nanos,
        slba: Lba,
        data: OwnedData,
        append: bool,
    ) -> (Nanos, Completion, Option<u64>) {
        let at = issued + self.submit_cost + self.dispatch_cost;
        let (completion, ticket) = {
            let mut dev = self.device.borrow_mut();
            let c = dev.write(issued, at, slba, data.as_ref(), append);
            (c, dev.take_ticket())
        };
        self.recorded(issued, at, &completion, || DeviceCmd::Write {
            slba,
            data,
            append,
        });
        self.count(|c| c.dispatched += 1);
        (at, completion, ticket)
    }

    /// The result of a command (a write, a zone_compaction) handed over at `at` with
    /// `completion` and its `ticket`, once its completion is known ([`HostStack::queued_done`]).
    async fn ticket_done(
        &self,
        issued: Nanos,
        at: Nanos,
        completion: Completion,
        ticket: Option<u64>,
    ) -> IoDone {
        let completed = self.queued_done(ticket, completion.done).await + self.complete_cost;
        IoDone {
            status: completion.status,
            issued,
            submitted: at,
            completed,
            data: None,
        }
    }

    /// Hands a zone_compaction to the device: its completion, and its ticket if the copies
    /// were queued (then the completion is only when to ask first, see
    /// [`HostStack::queued_done`]).
    fn compaction_to_device(
        &self,
        now: Nanos,
        at: Nanos,
        src: &[Lba],
        dst: &[Lba],
    ) -> (Completion, Option<u64>) {
        let mut dev = self.device.borrow_mut();
        let c = dev.zone_compaction(now, at, src, dst);
        (c, dev.take_ticket())
    }

    /// The device's completion of a zone_compaction or write that gave `first`: that, unless
    /// flash operations it waits for were queued (`ticket`); then the device is asked from
    /// `first` on, acting at each time it names, until all of them have started (seed 000
    /// §3.2.1: the copies run behind normal requests, so the completion is known only as they
    /// go).
    async fn queued_done(&self, ticket: Option<u64>, first: Nanos) -> Nanos {
        let Some(ticket) = ticket else {
            return first;
        };
        let mut next = first;
        loop {
            self.sim.sleep_until(next).await;
            let now = self.sim.now();
            let status = {
                let mut dev = self.device.borrow_mut();
                dev.settle(now);
                dev.ticket_status(ticket)
            };
            let settled = Completion {
                done: now,
                status: Ok(None),
            };
            self.recorded(now, now, &settled, || DeviceCmd::Settle);
            match status {
                Ok(done) => return done,
                Err(t) => next = t.max(now + Nanos(1)),
            }
        }
    }

    /// A write larger than the device takes in one command (MDTS): its pieces are issued at
    /// once, in LBA order, and it completes when the last does (the first error is its status).
    async fn submit_split_write(
        self: &Rc<Self>,
        issued: Nanos,
        slba: Lba,
        data: OwnedData,
    ) -> IoDone {
        let mut done = IoDone::split(issued);
        let mut queued = Vec::new();
        let mut with_tickets = Vec::new();
        let behind_copies = self.device.borrow().has_queued_copies();
        let mut off = 0;
        for piece in data.split(self.lba_size, self.max_transfer_lbas) {
            let at = slba + off;
            off += piece.blocks(self.lba_size);
            // Every piece is issued (or queued behind its zone's lock) before any is awaited,
            // so they reach the device in LBA order and ahead of later writes.
            if self.zone_locking {
                queued.push(self.enqueue(issued, at, QueuedOp::Write(piece)));
            } else if behind_copies {
                with_tickets.push(self.write_taking_ticket(issued, at, piece, false));
            } else {
                let cmd = IoCmd::Write {
                    slba: at,
                    data: piece,
                };
                let Ok(d) = self.dispatch(cmd) else {
                    unreachable!("a piece fits one command and no zone lock holds it")
                };
                done.merge_piece(d);
            }
        }
        for rx in queued {
            done.merge_piece(rx.await.expect("the zone dispatcher always replies"));
        }
        for (at, completion, ticket) in with_tickets {
            done.merge_piece(self.ticket_done(issued, at, completion, ticket).await);
        }
        self.sim.sleep_until(done.completed).await;
        done
    }

    /// A read larger than the device takes in one command (MDTS): its pieces are issued at
    /// once and their data joined in order.
    async fn submit_split_read(
        self: &Rc<Self>,
        issued: Nanos,
        slba: Lba,
        nlb: u64,
        want_data: bool,
    ) -> IoDone {
        let mut done = IoDone::split(issued);
        let mut data = ReadData::default();
        let mut every_piece_has_bytes = true;
        let mut off = 0;
        while off < nlb {
            let n = (nlb - off).min(self.max_transfer_lbas);
            let cmd = IoCmd::Read {
                slba: slba + off,
                nlb: n,
                want_data,
            };
            let Ok(mut d) = self.dispatch(cmd) else {
                unreachable!("a piece fits one command")
            };
            if let Some(piece) = d.data.take() {
                every_piece_has_bytes &= piece.bytes.len() as u64 == n * self.lba_size;
                data.bytes.extend_from_slice(&piece.bytes);
                data.fingerprints.extend_from_slice(&piece.fingerprints);
            }
            done.merge_piece(d);
            off += n;
        }
        if want_data {
            // Bytes come back only when every block has them (see `Payload::read`).
            if !every_piece_has_bytes {
                data.bytes.clear();
            }
            done.data = Some(Box::new(data));
        }
        self.sim.sleep_until(done.completed).await;
        done
    }

    async fn write_through_scheduler(
        self: &Rc<Self>,
        issued: Nanos,
        slba: Lba,
        op: QueuedOp,
    ) -> IoDone {
        let rx = self.enqueue(issued, slba, op);
        rx.await.expect("the zone dispatcher always replies")
    }

    /// Queues a zone-locked write or compaction behind the others of its zone (now, in the
    /// order of the calls) and returns where its completion will arrive.
    fn enqueue(self: &Rc<Self>, issued: Nanos, slba: Lba, op: QueuedOp) -> OneshotReceiver<IoDone> {
        let zone = (slba.0 / self.zone_size) as u32;
        let (tx, rx) = oneshot();
        let start = {
            let mut zones = self.zones.borrow_mut();
            let q = zones.entry(zone).or_default();
            q.pending.push_back(Queued {
                slba,
                op,
                issued,
                seq: q.enqueued,
                reply: tx,
            });
            q.enqueued += 1;
            if q.busy {
                false
            } else {
                q.busy = true;
                true
            }
        };
        if start {
            let me = self.clone();
            self.sim
                .spawn(async move { me.drain_zone(ZoneId(zone)).await });
        }
        rx
    }

    /// Dispatches a zone's queued writes one (merged) request at a time until none is left.
    async fn drain_zone(self: Rc<Self>, zone: ZoneId) {
        loop {
            let batch = {
                let mut zones = self.zones.borrow_mut();
                let q = zones.get_mut(&zone.0).expect("queue exists while busy");
                if q.pending.is_empty() {
                    q.busy = false;
                    return;
                }
                let first = q.pending.pop_front().expect("non-empty");
                let mut op = match &first.op {
                    QueuedOp::Write(d) => QueuedOp::Write(d.clone()),
                    QueuedOp::Compaction { src, dst } => QueuedOp::Compaction {
                        src: src.clone(),
                        dst: dst.clone(),
                    },
                };
                let mut batch = vec![first];
                // Consecutive writes merge; a compaction goes alone.
                if let QueuedOp::Write(data) = &mut op {
                    let mut end = batch[0].slba.0 + data.blocks(self.lba_size);
                    while let Some(Queued {
                        op: QueuedOp::Write(next),
                        slba,
                        ..
                    }) = q.pending.front()
                    {
                        let n = next.blocks(self.lba_size);
                        if slba.0 != end || data.blocks(self.lba_size) + n > self.max_merge_lbas {
                            break;
                        }
                        if !data.try_extend(next) {
                            break;
                        }
                        end += n;
                        batch.push(q.pending.pop_front().expect("peeked"));
                    }
                }
                (batch, op)
            };
            let (requests, op) = batch;
            let now = self.sim.now();
            let earliest = requests
                .iter()
                .map(|r| r.issued + self.submit_cost)
                .max()
                .expect("batch not empty");
            let at = earliest.max(now) + self.dispatch_cost;
            let (completion, ticket) = match &op {
                QueuedOp::Write(data) => {
                    let mut dev = self.device.borrow_mut();
                    let c = dev.write(now, at, requests[0].slba, data.as_ref(), false);
                    (c, dev.take_ticket())
                }
                QueuedOp::Compaction { src, dst } => self.compaction_to_device(now, at, src, dst),
            };
            self.recorded(now, at, &completion, || match op {
                QueuedOp::Write(data) => DeviceCmd::Write {
                    slba: requests[0].slba,
                    data,
                    append: false,
                },
                QueuedOp::Compaction { src, dst } => DeviceCmd::ZoneCompaction { src, dst },
            });
            self.count(|c| {
                c.dispatched += 1;
                c.merged += requests.len() as u64 - 1;
            });
            if let Some(q) = self.zones.borrow_mut().get_mut(&zone.0) {
                q.dispatched += requests.len() as u64;
                q.on_dispatch.notify_all();
            }
            let completed = self.queued_done(ticket, completion.done).await + self.complete_cost;
            self.sim.sleep_until(completed).await;
            for r in requests {
                let status = completion.status.map(|_| Some(r.slba));
                r.reply.send(IoDone {
                    status,
                    issued: r.issued,
                    submitted: at,
                    completed,
                    data: None,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`crate::zns::tests::small`]: 64-LBA zones, at most 16 LBAs per command.
    fn stack(scheduler: IoScheduler) -> (Sim, Rc<HostStack>) {
        let dev = Namespace::from(crate::zns::tests::small(&[])).shared();
        let sim = Sim::new();
        let stack = HostStack::new(sim.clone(), dev, IoEngine::IoUring, scheduler).unwrap();
        (sim, stack)
    }

    #[test]
    fn commands_larger_than_the_device_takes_are_split() {
        for scheduler in [IoScheduler::None, IoScheduler::MqDeadline] {
            let (sim, st) = stack(scheduler);
            assert_eq!(st.device().borrow().buffer_limit(), 16);
            let bytes: Vec<u8> = (0..40 * 4096).map(|i| (i / 4096) as u8).collect();
            let s = st.clone();
            let data = bytes.clone();
            let (w, next, r) = sim
                .block_on(async move {
                    let w = s.submit(IoCmd::Write {
                        slba: Lba(0),
                        data: OwnedData::Bytes(data),
                    });
                    // A write issued right after lands behind all the pieces.
                    let next = s.submit(IoCmd::Write {
                        slba: Lba(40),
                        data: OwnedData::Bytes(vec![7; 4096]),
                    });
                    let (w, next) = (w.await, next.await);
                    let r = s
                        .submit(IoCmd::Read {
                            slba: Lba(0),
                            nlb: 41,
                            want_data: true,
                        })
                        .await;
                    (w, next, r)
                })
                .unwrap();
            assert_eq!(w.status, Ok(Some(Lba(0))), "{scheduler:?}");
            assert!(next.status.is_ok(), "{scheduler:?}");
            assert!(w.completed >= w.submitted && w.submitted > w.issued);
            let got = r.data.expect("read data").bytes;
            assert_eq!(&got[..40 * 4096], &bytes[..], "{scheduler:?}");
            assert_eq!(&got[40 * 4096..], &[7; 4096][..]);
            // 3 write pieces, 1 write, 3 read pieces.
            assert_eq!(st.counters().dispatched, 7, "{scheduler:?}");
        }
    }

    #[test]
    fn after_a_restart_zones_locked_by_lost_writes_take_writes_again() {
        let (sim, st) = stack(IoScheduler::MqDeadline);
        // A write still in flight when the run stops: its task is dropped with the zone lock.
        let (s, clock) = (st.clone(), sim.clone());
        sim.block_on(async move {
            clock.spawn(async move {
                s.submit(IoCmd::Write {
                    slba: Lba(0),
                    data: OwnedData::Bytes(vec![1; 4096]),
                })
                .await
            });
            clock.sleep(Nanos(1)).await;
        })
        .unwrap();
        let write_at_4 = |st: &Rc<HostStack>| {
            let s = st.clone();
            sim.block_on(async move {
                s.submit(IoCmd::Write {
                    slba: Lba(4),
                    data: OwnedData::Bytes(vec![2; 4096]),
                })
                .await
            })
        };
        // Without a restart the zone's lock is never released.
        assert!(write_at_4(&st).is_err());
        st.restart();
        let done = write_at_4(&st).expect("the zone takes writes again");
        // Block 4 is past the zone's write pointer (0 or 1): the device's refusal comes back.
        assert!(done.status.is_err(), "{:?}", done.status);
    }

    #[test]
    fn a_read_waits_for_the_queued_write_of_its_blocks() {
        let (sim, st) = stack(IoScheduler::MqDeadline);
        let (s, clock) = (st.clone(), sim.clone());
        let (before, read, other) = sim
            .block_on(async move {
                let write = |slba: u64, v: u8| {
                    let s = s.clone();
                    clock.spawn(async move {
                        s.submit(IoCmd::Write {
                            slba: Lba(slba),
                            data: OwnedData::Bytes(vec![v; 8 * 4096]),
                        })
                        .await
                    })
                };
                // The second write waits behind the first (already at the device) for the
                // zone's write lock.
                let first = write(0, 1);
                clock.sleep(Nanos(1)).await;
                let second = write(8, 2);
                clock.sleep(Nanos(1)).await;
                let before = s.counters().dispatched;
                let read = |slba: u64| {
                    let s = s.clone();
                    clock.spawn(async move {
                        s.submit(IoCmd::Read {
                            slba: Lba(slba),
                            nlb: 8,
                            want_data: true,
                        })
                        .await
                    })
                };
                // Blocks of the queued write: the read goes once the write has reached the
                // device. Blocks of the first write: at once.
                let (read, other) = (read(8), read(0));
                let (read, other) = (read.await, other.await);
                assert!(first.await.status.is_ok() && second.await.status.is_ok());
                (before, read, other)
            })
            .unwrap();
        assert_eq!(before, 1, "one write in flight, one queued");
        assert_eq!(read.data.expect("data").bytes, vec![2; 8 * 4096]);
        assert_eq!(other.data.expect("data").bytes, vec![1; 8 * 4096]);
        assert!(other.submitted < read.submitted && read.issued == other.issued);
    }
}
