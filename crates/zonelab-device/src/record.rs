//! The command stream a device receives, recorded for crash-consistency testing (`zonelab
//! crashtest`, in the manner of CrashMonkey, OSDI'18: record the block I/O of a workload, then
//! rebuild the device as it was at chosen instants and check the file system there).
//!
//! The model applies a command to its state when the host stack hands it over (`now`), so the
//! device's state at any instant `t` is a pure function of the commands handed over by `t`:
//! replaying them, with their original `now` and `at`, onto a copy of the device as it was
//! when recording started rebuilds exactly the state the live run had at `t`, and
//! [`ZonedDevice::power_cut`](crate::ZonedDevice::power_cut) at `t` then gives what survives a
//! power loss there. [`Replayer::advance`] checks every replayed completion against the
//! recorded one, so a replay that drifts from the live run is an error, never a silent wrong
//! state.

use crate::host_stack::StackDevice;
use crate::payload::OwnedData;
use crate::status::NvmeStatus;
use crate::zns::{Completion, ZoneAction};
use crate::znsplus::TlOpenZone;
use crate::zone::Lba;
use std::cell::RefCell;
use zonelab_sim::Nanos;

/// A device command as the host stack hands it to the device.
#[derive(Clone, Debug)]
pub enum DeviceCmd {
    Read {
        slba: Lba,
        nlb: u64,
    },
    /// Write, or Zone Append when `append`.
    Write {
        slba: Lba,
        data: OwnedData,
        append: bool,
    },
    ZoneMgmt {
        action: ZoneAction,
        zslba: Lba,
        select_all: bool,
    },
    Flush,
    ZoneCompaction {
        src: Vec<Lba>,
        dst: Vec<Lba>,
    },
    TlOpen {
        zones: Vec<TlOpenZone>,
    },
    /// No command: the host looked at a zone_compaction's progress, and the device acted
    /// then (queued copies started, [`StackDevice::settle`]).
    Settle,
}

/// One recorded command: when the host issued it to the device model (`now`), when it reached
/// the device (`at`), and the completion the device gave.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub now: Nanos,
    pub at: Nanos,
    pub cmd: DeviceCmd,
    pub done: Nanos,
    pub status: Result<Option<Lba>, NvmeStatus>,
}

/// The commands one device received, in the order it received them.
#[derive(Debug, Default)]
pub struct CommandLog {
    cmds: RefCell<Vec<Recorded>>,
}

impl CommandLog {
    pub fn new() -> CommandLog {
        CommandLog::default()
    }

    /// Appends a command and its completion.
    pub fn push(&self, now: Nanos, at: Nanos, cmd: DeviceCmd, c: &Completion) {
        self.cmds.borrow_mut().push(Recorded {
            now,
            at,
            cmd,
            done: c.done,
            status: c.status,
        });
    }

    pub fn len(&self) -> usize {
        self.cmds.borrow().len()
    }

    pub fn is_empty(&self) -> bool {
        self.cmds.borrow().is_empty()
    }

    /// The recorded commands (the log is left empty).
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.cmds.borrow_mut())
    }
}

/// Sends `cmd` to `dev` as the host stack did, returning the device's completion.
pub fn apply<D: StackDevice>(dev: &mut D, now: Nanos, at: Nanos, cmd: &DeviceCmd) -> Completion {
    match cmd {
        DeviceCmd::Read { slba, nlb } => dev.read(now, at, *slba, *nlb, None),
        DeviceCmd::Write { slba, data, append } => {
            dev.write(now, at, *slba, data.as_ref(), *append)
        }
        DeviceCmd::ZoneMgmt {
            action,
            zslba,
            select_all,
        } => dev.zone_mgmt(now, at, *action, *zslba, *select_all),
        DeviceCmd::Flush => dev.flush(now, at),
        DeviceCmd::ZoneCompaction { src, dst } => dev.zone_compaction(now, at, src, dst),
        DeviceCmd::TlOpen { zones } => dev.tl_open(now, at, zones),
        DeviceCmd::Settle => {
            dev.settle(now);
            Completion {
                done: now,
                status: Ok(None),
            }
        }
    }
}

/// A replay of a recorded command stream onto a copy of the device it was recorded on.
pub struct Replayer<'a, D> {
    dev: D,
    cmds: &'a [Recorded],
    next: usize,
}

/// A replayed command completed differently from the recorded one: the device model is not
/// a pure function of its commands (a determinism bug).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "replay diverged at command {index} ({cmd}): recorded completion {recorded}, replayed {replayed}"
)]
pub struct Divergence {
    pub index: usize,
    pub cmd: String,
    pub recorded: String,
    pub replayed: String,
}

impl<'a, D: StackDevice> Replayer<'a, D> {
    /// `dev` is the device as it was when `cmds` began to be recorded.
    pub fn new(dev: D, cmds: &'a [Recorded]) -> Replayer<'a, D> {
        Replayer { dev, cmds, next: 0 }
    }

    /// Replays every command the device received by `t` (handed over at `now <= t`); `t`
    /// never goes back.
    pub fn advance(&mut self, t: Nanos) -> Result<(), Divergence> {
        while let Some(r) = self.cmds.get(self.next)
            && r.now <= t
        {
            let c = apply(&mut self.dev, r.now, r.at, &r.cmd);
            if c.done != r.done || c.status != r.status {
                return Err(Divergence {
                    index: self.next,
                    cmd: format!("{:?} at {}", kind(&r.cmd), r.now),
                    recorded: format!("{} {:?}", r.done, r.status),
                    replayed: format!("{} {:?}", c.done, c.status),
                });
            }
            self.next += 1;
        }
        Ok(())
    }

    /// Commands replayed so far.
    pub fn replayed(&self) -> usize {
        self.next
    }

    /// The device as replayed so far.
    pub fn device(&self) -> &D {
        &self.dev
    }
}

fn kind(c: &DeviceCmd) -> &'static str {
    match c {
        DeviceCmd::Read { .. } => "read",
        DeviceCmd::Write { append: false, .. } => "write",
        DeviceCmd::Write { append: true, .. } => "append",
        DeviceCmd::ZoneMgmt { .. } => "zone management",
        DeviceCmd::Flush => "flush",
        DeviceCmd::ZoneCompaction { .. } => "zone_compaction",
        DeviceCmd::TlOpen { .. } => "tl_open",
        DeviceCmd::Settle => "settle",
    }
}
