//! Runs fio jobs on a simulated device: a zoned namespace, or a conventional one (block
//! interface; `zonemode=zbd` and `zone_append` need zones and are refused there).
//!
//! Every job clone (`numjobs`) is `iodepth` simulated threads sharing one offset generator, so
//! up to `iodepth` I/Os are in flight. Jobs of one stonewall group run concurrently in virtual
//! time; groups run one after another. With `zonemode=zbd` writes go to zone write pointers the
//! way fio's zbd mode places them: sequential jobs fill zones in order, random jobs pick a
//! random zone among at most `max_open_zones` open ones; a full zone is reset before it is
//! written again; reads stay below the write pointer; a trim resets one zone (fio's
//! `zbd_do_io_u_trim`).

use super::options::{
    Dir, IoEngine as FioEngine, IoScheduler as FioScheduler, JobSpec, PerDir, Rw, ZoneMode,
};
use super::stats::{BwLog, DirStats, LatKind, LatLog};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use zonelab_device::{
    HostStack, IoCmd, IoDone, IoEngine, IoScheduler, Lba, Namespace, OwnedData, PayloadMode,
    Profile, ZoneAction, ZoneState,
};
use zonelab_sim::sync::Notify;
use zonelab_sim::{Divisor, Nanos, Raced, Sim, SimRng, race};

/// How to run a set of jobs.
#[derive(Clone, Debug)]
pub struct RunSettings {
    pub payload: PayloadMode,
    /// Seed for jobs that set none.
    pub seed: u64,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            payload: PayloadMode::Fingerprint,
            seed: 1,
        }
    }
}

/// What one job clone did.
#[derive(Clone, Debug)]
pub struct CloneResult {
    pub job: usize,
    pub clone: u32,
    pub stats: PerDir<DirStats>,
    /// From the end of ramp time to the last completion.
    pub runtime_ns: u64,
    pub error: Option<String>,
    /// The logs it asked for (`write_bw_log`, `write_iops_log`, `write_lat_log`): file name
    /// and text.
    pub logs: Vec<(String, String)>,
    pub zone_resets: u64,
}

/// Results of a run.
#[derive(Debug)]
pub struct RunOutput {
    pub clones: Vec<CloneResult>,
    pub device: Rc<RefCell<Namespace>>,
    pub simulated_ns: u64,
    pub host_merged: u64,
    pub host_dispatched: u64,
    pub sim_polls: u64,
}

/// A job that cannot run on this device, with what to change.
#[derive(Debug, thiserror::Error)]
#[error("job '{job}': {msg}")]
pub struct RunError {
    pub job: String,
    pub msg: String,
}

fn engine_of(spec: &JobSpec) -> (IoEngine, IoScheduler) {
    let e = match spec.ioengine {
        FioEngine::Spdk => IoEngine::Spdk,
        FioEngine::IoUring => IoEngine::IoUring,
    };
    let s = match spec.ioscheduler {
        FioScheduler::None => IoScheduler::None,
        FioScheduler::MqDeadline => IoScheduler::MqDeadline,
    };
    (e, s)
}

/// The host's view of the zones: write pointers as issued (ahead of completions), zones in
/// use, and I/Os in flight per zone. Shared by every job of a run, as fio shares it.
struct ZoneView {
    zone_size: u64,
    capacity: u64,
    wp: Vec<u64>,
    in_flight: Vec<u32>,
    open: Vec<u32>,
    max_open: usize,
    /// Notified when a thread waiting for a zone may now find one: a zone leaves or joins
    /// the open set, or a zone's last write in flight completes (it may be reset then).
    changed: Notify,
    /// Threads of the running group that are not parked on `changed` nor finished: those
    /// that can still change the zones (a thread with I/O in flight is one of them), and
    /// those woken to look again.
    running: usize,
    /// Set when no thread can change the zones any more while some wait for one: they give up.
    stuck: bool,
}

impl ZoneView {
    fn from_device(dev: &Namespace, max_open: usize) -> ZoneView {
        let (zone_size, capacity, wp, open) = match dev.zoned() {
            // No zones: the view is never consulted (validate refuses zoned options).
            None => (dev.total_lbas().max(1), 0, Vec::new(), Vec::new()),
            Some(zoned) => {
                let zs = zoned.zones();
                let g = zs.geometry();
                let mut wp = Vec::with_capacity(g.zones as usize);
                let mut open = Vec::new();
                for z in zs.zones() {
                    wp.push(match z.state {
                        ZoneState::Full => z.capacity,
                        _ => z.wp.0 - z.start.0,
                    });
                    if z.state.is_active() {
                        open.push(z.id.0);
                    }
                }
                (g.zone_size, g.zone_capacity, wp, open)
            }
        };
        ZoneView {
            zone_size,
            capacity,
            in_flight: vec![0; wp.len()],
            wp,
            open,
            max_open,
            changed: Notify::new(),
            running: 0,
            stuck: false,
        }
    }
    fn is_full(&self, z: u32) -> bool {
        self.wp[z as usize] >= self.capacity
    }
    #[inline]
    fn mark_open(&mut self, z: u32) {
        if !self.open.contains(&z) {
            self.open.push(z);
            self.wake_waiters();
        }
    }
    fn mark_closed(&mut self, z: u32) {
        let before = self.open.len();
        self.open.retain(|&o| o != z);
        if self.open.len() != before {
            self.wake_waiters();
        }
    }
    /// Wakes the threads waiting for a zone; they count as running until they wait again.
    fn wake_waiters(&mut self) {
        self.running += self.changed.waiters();
        self.changed.notify_all();
    }
    /// A thread stops running: it finished, or it waits for a zone. When it was the last
    /// that could change the zones, nothing will: the waiting threads give up.
    fn leave(&mut self) {
        self.running -= 1;
        if self.running == 0 && self.changed.waiters() > 0 {
            self.stuck = true;
            self.wake_waiters();
        }
    }
}

/// What a clone completed in a stretch of time starting at `start`: after its ramp (what it
/// reports), or during it.
struct Window {
    start: Nanos,
    stats: PerDir<DirStats>,
    /// Completed bytes per interval since `start`: fio's bw samples, `write_bw_log` and
    /// `write_iops_log`.
    bw: PerDir<BwLog>,
    /// Latencies per interval, kept for `write_lat_log` only.
    lat: Option<PerDir<LatLog>>,
    last_completion: Nanos,
}

impl Window {
    fn new(spec: &JobSpec, start: Nanos) -> Window {
        Window {
            start,
            stats: PerDir::default(),
            bw: PerDir::from_fn(|_| BwLog::new(sample_ms(spec))),
            lat: spec
                .write_lat_log
                .is_some()
                .then(|| PerDir::from_fn(|_| LatLog::new(sample_ms(spec)))),
            last_completion: start,
        }
    }

    fn record(&mut self, dir: Dir, bytes: u64, done: &IoDone) {
        let (slat, clat, t) = (
            done.slat().0,
            done.clat().0,
            (done.completed - self.start).0,
        );
        self.stats[dir].record(bytes, slat, clat);
        self.bw[dir].record(t, bytes);
        if let Some(lat) = &mut self.lat {
            lat[dir].record(t, slat, clat);
        }
        self.last_completion = self.last_completion.max(done.completed);
    }
}

/// Per-clone state shared by its `iodepth` threads.
struct CloneState {
    spec: Rc<JobSpec>,
    job: usize,
    clone: u32,
    rng: SimRng,
    lba_size: u64,
    /// Region in LBAs.
    start: u64,
    lbas: u64,
    /// Sequential positions per direction: relative to the region's start, or under zbd the
    /// reader's within its current zone.
    seq: PerDir<u64>,
    /// zbd: current zone of a sequential writer, reader and trimmer.
    zone_cursor: PerDir<u64>,
    issued_bytes: u64,
    issued_ios: u64,
    byte_limit: Option<u64>,
    io_limit: Option<u64>,
    ramp_end: Nanos,
    t_end: Option<Nanos>,
    rate_next: PerDir<Nanos>,
    /// I/Os issued from the end of the ramp on.
    measured: Window,
    /// The same for I/Os issued during `ramp_time` (kept only when there is one): fio resets
    /// its statistics when the ramp ends, so a job that ends within its ramp reports all of
    /// its I/O.
    ramp: Option<Box<Window>>,
    error: Option<String>,
    stop: bool,
    zone_resets: u64,
    fp_counter: u64,
    /// Per-command constant of the job, worked out once: blocks per read and per write.
    nlb: PerDir<u64>,
    /// The read size as a divisor (slots of a zone's written part).
    read_nlb_div: Divisor,
    /// Whole zones in the region, `first..end` (see [`CloneState::zones_in_region`]).
    zone_range: (u32, u32),
    random: bool,
    zbd: bool,
    /// Whether `rate` or `rate_iops` limits any direction.
    rate_limited: bool,
}

/// One planned I/O.
enum Planned {
    Io {
        dir: Dir,
        cmd: IoCmd,
        bytes: u64,
        zone: Option<u32>,
        /// When the rate limits let it issue.
        gate: Nanos,
    },
    Reset {
        zone: u32,
    },
    /// A trim of `zone`, which fio's zbd mode turns into a reset of the zone when it holds
    /// data (`had_data`; fio sends no command for an empty zone, and counts only the resets).
    Trim {
        zone: u32,
        had_data: bool,
        bytes: u64,
    },
    /// The rate limits hold the next I/O until then.
    Pause {
        until: Nanos,
    },
    Wait,
    Done,
}

impl CloneState {
    fn next_fingerprint(&mut self) -> u64 {
        self.fp_counter += 1;
        self.rng.next_u64() ^ self.fp_counter
    }

    #[inline(always)]
    fn next_fingerprints(&mut self, n: u64) -> OwnedData {
        if n == 1 {
            return OwnedData::Fingerprint(self.next_fingerprint());
        }
        self.next_fingerprint_vec(n)
    }

    #[inline(never)]
    fn next_fingerprint_vec(&mut self, n: u64) -> OwnedData {
        // The generator and counter in locals, so the loop keeps them in registers.
        let mut rng = self.rng.clone();
        let mut counter = self.fp_counter;
        let mut v = vec![0u64; n as usize];
        for fp in v.iter_mut() {
            counter += 1;
            *fp = rng.next_u64() ^ counter;
        }
        self.rng = rng;
        self.fp_counter = counter;
        OwnedData::Fingerprints(v)
    }

    fn exhausted(&self, now: Nanos) -> bool {
        if self.stop || self.error.is_some() {
            return true;
        }
        if let Some(end) = self.t_end
            && now >= end
        {
            return true;
        }
        if let Some(l) = self.io_limit
            && self.issued_ios >= l
        {
            return true;
        }
        if let Some(l) = self.byte_limit
            && self.issued_bytes >= l
        {
            return true;
        }
        false
    }

    fn choose_dir(&mut self) -> Dir {
        match self.spec.rw {
            Rw::Read | Rw::RandRead => Dir::Read,
            Rw::Write | Rw::RandWrite => Dir::Write,
            Rw::ReadWrite | Rw::RandReadWrite => {
                if self.rng.below(100) >= self.spec.rwmixread as u64 {
                    Dir::Write
                } else {
                    Dir::Read
                }
            }
            Rw::Trim | Rw::RandTrim => Dir::Trim,
        }
    }

    /// Next offset (relative to the region) for a non-zoned access of `nlb` blocks.
    fn next_offset(&mut self, dir: Dir, nlb: u64) -> u64 {
        let span = self.lbas.max(nlb);
        if self.random {
            let slots = (span / nlb).max(1);
            self.rng.below(slots) * nlb
        } else {
            let pos = &mut self.seq[dir];
            if *pos + nlb > span {
                *pos = 0;
            }
            let off = *pos;
            *pos += nlb;
            off
        }
    }

    /// Plans the next I/O and counts it as issued (see [`CloneState::issue`]).
    #[inline(always)]
    fn plan(&mut self, now: Nanos, view: &mut ZoneView) -> Planned {
        if self.exhausted(now) {
            return Planned::Done;
        }
        let dir = self.choose_dir();
        let nlb = self.nlb[dir];
        if self.zbd {
            return match dir {
                Dir::Read => self.plan_zbd_read(now, view, nlb),
                Dir::Write => self.plan_zbd_write(now, view, nlb),
                Dir::Trim => self.plan_zbd_trim(now, view),
            };
        }
        assert!(
            dir != Dir::Trim,
            "validate lets trims run under zonemode=zbd only"
        );
        let write = dir == Dir::Write;
        let off = self.next_offset(dir, nlb);
        let slba = Lba(self.start + off);
        let cmd = if write {
            let data = self.next_fingerprints(nlb);
            if self.spec.zone_append {
                let zs = view.zone_size;
                IoCmd::Append {
                    zslba: Lba(slba.0 / zs * zs),
                    data,
                }
            } else {
                IoCmd::Write { slba, data }
            }
        } else {
            IoCmd::Read {
                slba,
                nlb,
                want_data: false,
            }
        };
        self.issue(now, view, dir, cmd, nlb * self.lba_size, None)
    }

    /// A planned I/O, counted as issued: in flight on its zone from now on (so no reset is
    /// planned for the zone meanwhile), and against the job's limits.
    #[inline(always)]
    fn issue(
        &mut self,
        now: Nanos,
        view: &mut ZoneView,
        dir: Dir,
        cmd: IoCmd,
        bytes: u64,
        zone: Option<u32>,
    ) -> Planned {
        if let Some(z) = zone {
            view.in_flight[z as usize] += 1;
        }
        let gate = self.count_issued(now, dir, bytes);
        Planned::Io {
            dir,
            cmd,
            bytes,
            zone,
            gate,
        }
    }

    /// Counts an I/O of `bytes` in direction `dir` against the job's limits; returns when the
    /// rate limits let it issue.
    #[inline(always)]
    fn count_issued(&mut self, now: Nanos, dir: Dir, bytes: u64) -> Nanos {
        self.issued_bytes += bytes;
        self.issued_ios += 1;
        rate_gate(self, dir, bytes, now)
    }

    /// Accounts for a completed I/O planned as `dir`, `bytes` and `zone`.
    #[inline(always)]
    fn complete(
        &mut self,
        view: &mut ZoneView,
        dir: Dir,
        bytes: u64,
        zone: Option<u32>,
        done: &IoDone,
    ) {
        let write = dir == Dir::Write;
        if let Some(z) = zone {
            view.in_flight[z as usize] -= 1;
            if view.in_flight[z as usize] == 0 {
                if write && view.is_full(z) {
                    view.mark_closed(z);
                }
                // Waiters look again: one waiting to reset this zone, when full, may go on.
                view.wake_waiters();
            }
        }
        match done.status {
            Err(e) => {
                if self.error.is_none() {
                    let advice = if self.spec.zonemode == ZoneMode::None && write {
                        " (with zonemode=zbd, writes go to zone write pointers as the device requires)"
                    } else {
                        ""
                    };
                    self.error = Some(format!("{} error: {e} — {}{advice}", dir.name(), e.hint()));
                }
            }
            Ok(_) => {
                if done.issued >= self.ramp_end {
                    self.measured.record(dir, bytes, done);
                } else if let Some(r) = &mut self.ramp {
                    r.record(dir, bytes, done);
                }
            }
        }
    }

    /// Whole zones inside the region `start..start + lbas` of a device with `nzones` zones of
    /// `zs` LBAs: `first..end` (empty when there are none).
    fn zones_in_region(start: u64, lbas: u64, zs: u64, nzones: u64) -> (u32, u32) {
        let first = start.div_ceil(zs).min(nzones);
        let end = ((start + lbas) / zs).min(nzones);
        // A region smaller than a zone but starting at a zone start still covers that zone.
        let end = if end <= first && start.is_multiple_of(zs) && first < nzones {
            first + 1
        } else {
            end
        };
        (first as u32, end.max(first) as u32)
    }

    #[inline(always)]
    fn plan_zbd_write(&mut self, now: Nanos, view: &mut ZoneView, nlb: u64) -> Planned {
        let (first, end) = self.zone_range;
        assert!(first < end, "validate checked that the region holds a zone");
        let nzones = (end - first) as u64;
        let candidate = if self.random {
            first + self.rng.below(nzones) as u32
        } else {
            first + (self.zone_cursor.write % nzones) as u32
        };
        let mut zone = candidate;
        if view.open.len() >= view.max_open && !view.open.contains(&zone) {
            // No room for another open zone: write to an open one of this job's region.
            let open_in_region: Vec<u32> = view
                .open
                .iter()
                .copied()
                .filter(|&z| z >= first && z < end && !view.is_full(z))
                .collect();
            match open_in_region.is_empty() {
                true => return Planned::Wait,
                false => {
                    zone = if self.random {
                        open_in_region[self.rng.below(open_in_region.len() as u64) as usize]
                    } else {
                        open_in_region[0]
                    }
                }
            }
        }
        if view.is_full(zone) {
            if view.in_flight[zone as usize] > 0 {
                return Planned::Wait;
            }
            // The reset reaches the device before any write planned after it, so the host view
            // can take the zone as empty from now on.
            view.wp[zone as usize] = 0;
            view.mark_closed(zone);
            return Planned::Reset { zone };
        }
        let remaining = view.capacity - view.wp[zone as usize];
        let n = nlb.min(remaining);
        let zslba = zone as u64 * view.zone_size;
        let slba = zslba + view.wp[zone as usize];
        view.wp[zone as usize] += n;
        view.mark_open(zone);
        // A zone filled by this write stays counted as open until the write completes: the
        // device holds it open until then (rate limits can delay the submission).
        if view.is_full(zone) && !self.random {
            self.zone_cursor.write += 1;
        }
        let data = self.next_fingerprints(n);
        let cmd = if self.spec.zone_append {
            IoCmd::Append {
                zslba: Lba(zslba),
                data,
            }
        } else {
            IoCmd::Write {
                slba: Lba(slba),
                data,
            }
        };
        self.issue(now, view, Dir::Write, cmd, n * self.lba_size, Some(zone))
    }

    #[inline(always)]
    fn plan_zbd_read(&mut self, now: Nanos, view: &mut ZoneView, nlb: u64) -> Planned {
        let (first, end) = self.zone_range;
        assert!(first < end, "validate checked that the region holds a zone");
        let nzones = end - first;
        let written = |z: u32| view.wp[z as usize];
        if self.random {
            // A random zone holding data, then a random block-aligned offset below its wp.
            let mut zone = None;
            for _ in 0..8 {
                let z = first + self.rng.below(nzones as u64) as u32;
                if written(z) >= nlb {
                    zone = Some(z);
                    break;
                }
            }
            if zone.is_none() {
                let with: Vec<u32> = (first..end).filter(|&z| written(z) >= nlb).collect();
                if with.is_empty() {
                    self.stop = true;
                    return Planned::Done;
                }
                zone = Some(with[self.rng.below(with.len() as u64) as usize]);
            }
            let z = zone.expect("chosen");
            let slots = self.read_nlb_div.quotient(written(z));
            let off = self.rng.below(slots) * nlb;
            return self.read_io(now, view, z as u64 * view.zone_size + off, nlb, z);
        }
        // Sequential: walk zones in order, reading what each holds.
        for _ in 0..=nzones {
            let z = first + (self.zone_cursor.read % nzones as u64) as u32;
            if self.seq.read + nlb <= written(z) {
                let slba = z as u64 * view.zone_size + self.seq.read;
                self.seq.read += nlb;
                return self.read_io(now, view, slba, nlb, z);
            }
            self.zone_cursor.read += 1;
            self.seq.read = 0;
        }
        self.stop = true;
        Planned::Done
    }

    #[inline(always)]
    fn read_io(
        &mut self,
        now: Nanos,
        view: &mut ZoneView,
        slba: u64,
        nlb: u64,
        zone: u32,
    ) -> Planned {
        let cmd = IoCmd::Read {
            slba: Lba(slba),
            nlb,
            want_data: false,
        };
        self.issue(now, view, Dir::Read, cmd, nlb * self.lba_size, Some(zone))
    }

    /// A trim under zonemode=zbd (fio's `zbd_adjust_block` and `zbd_do_io_u_trim`): the next
    /// zone of the region in order, or for `randtrim` a random one, or the nearest to it that
    /// holds data (none left: the job ends). The zone is reset, and written from its start
    /// again by any job. It waits while I/O is in flight on the zone, as a wrap-around reset
    /// does, and is issued as soon as it is planned, so every write planned after it reaches
    /// the device after it. A zone without data is left alone, as fio's `__zbd_reset_zone`
    /// leaves it: the trim costs only the host's submission and completion.
    fn plan_zbd_trim(&mut self, now: Nanos, view: &mut ZoneView) -> Planned {
        if self.rate_limited && self.rate_next.trim > now {
            return Planned::Pause {
                until: self.rate_next.trim,
            };
        }
        let (first, end) = self.zone_range;
        assert!(first < end, "validate checked that the region holds a zone");
        let nzones = end - first;
        let zone = if self.random {
            let pick = self.rng.below(nzones as u64) as u32;
            // The nearest zone that holds data, at each distance the one above before the one
            // below, as fio's zbd_find_zone.
            let found = (0..nzones).find_map(|d| {
                [pick.checked_add(d), pick.checked_sub(d)]
                    .into_iter()
                    .flatten()
                    .filter(|&i| i < nzones)
                    .map(|i| first + i)
                    .find(|&z| view.wp[z as usize] > 0)
            });
            match found {
                Some(z) => z,
                None => {
                    self.stop = true;
                    return Planned::Done;
                }
            }
        } else {
            first + (self.zone_cursor.trim % nzones as u64) as u32
        };
        if view.in_flight[zone as usize] > 0 {
            return Planned::Wait;
        }
        if !self.random {
            self.zone_cursor.trim += 1;
        }
        let had_data = view.wp[zone as usize] > 0;
        view.wp[zone as usize] = 0;
        view.mark_closed(zone);
        view.in_flight[zone as usize] += 1;
        let bytes = self.spec.bs.trim;
        let gate = self.count_issued(now, Dir::Trim, bytes);
        debug_assert!(gate <= now, "paused above until the rate limits let it go");
        Planned::Trim {
            zone,
            had_data,
            bytes,
        }
    }
}

/// Runs `jobs` on a fresh device built from `profile`.
pub fn run(
    jobs: &[JobSpec],
    profile: &Profile,
    settings: &RunSettings,
) -> Result<RunOutput, RunError> {
    let device = Namespace::new(profile.clone(), settings.payload).map_err(|e| RunError {
        job: "device".into(),
        msg: e.to_string(),
    })?;
    run_on(jobs, device.shared(), settings)
}

/// The most I/Os the jobs running at once (one stonewall group) may keep in flight, summed
/// over their clones: `numjobs` x `iodepth` each. Every one is a simulated thread (about 1 KiB,
/// with its clone's statistics more), so this bounds a run's memory near 300 MiB; 2^18 is four
/// times an NVMe I/O queue's 65,536 entries, far deeper than any device's queues serve (the
/// rest would only wait in the host).
pub const MAX_IOS_IN_FLIGHT: u64 = 1 << 18;

/// Refuses jobs that would run more than [`MAX_IOS_IN_FLIGHT`] I/Os at once, before anything
/// is allocated for them.
fn check_in_flight(jobs: &[JobSpec]) -> Result<(), RunError> {
    let mut group: Vec<&JobSpec> = Vec::new();
    let check = |group: &[&JobSpec]| {
        let total: u64 = group
            .iter()
            .map(|j| j.numjobs as u64 * j.iodepth as u64)
            .sum();
        if total > MAX_IOS_IN_FLIGHT {
            let each: Vec<String> = group
                .iter()
                .map(|j| format!("'{}' {} x {}", j.name, j.numjobs, j.iodepth))
                .collect();
            return Err(RunError {
                job: group[0].name.clone(),
                msg: format!(
                    "numjobs x iodepth of the jobs running together comes to {total} I/Os in flight ({}); the limit is {MAX_IOS_IN_FLIGHT}: lower iodepth or numjobs (or separate jobs with stonewall)",
                    each.join(", ")
                ),
            });
        }
        Ok(())
    };
    for j in jobs {
        if j.stonewall && !group.is_empty() {
            check(&group)?;
            group.clear();
        }
        group.push(j);
    }
    check(&group)
}

/// The most job clones one run may have, summed over its jobs (`numjobs` each): fio's own
/// limit (its `REAL_MAX_JOBS`; fio 3.33 stops with "maximum number of jobs reached" before any
/// job starts). Every clone keeps its statistics, latency histograms of up to about 1 MiB for
/// a job that reads and writes, until the report, whatever its stonewall group, so this also
/// bounds that memory to a few GiB ([`MAX_IOS_IN_FLIGHT`] bounds the simulated threads).
pub const MAX_JOBS: u64 = 4096;

/// Refuses a run of more than [`MAX_JOBS`] clones, before anything is allocated for them.
fn check_job_count(jobs: &[JobSpec]) -> Result<(), RunError> {
    let total: u64 = jobs.iter().map(|j| j.numjobs as u64).sum();
    if total <= MAX_JOBS {
        return Ok(());
    }
    let each: Vec<String> = jobs
        .iter()
        .map(|j| format!("'{}' {}", j.name, j.numjobs))
        .collect();
    Err(RunError {
        job: jobs[0].name.clone(),
        msg: format!(
            "the jobs come to {total} clones (numjobs: {}); fio's limit, and ZoneLab's, is {MAX_JOBS} in one run: lower numjobs, or split the jobs over several runs",
            each.join(", ")
        ),
    })
}

/// Checks a job against the device before anything runs.
fn validate(spec: &JobSpec, dev: &Namespace) -> Result<(), RunError> {
    let err = |msg: String| {
        Err(RunError {
            job: spec.name.clone(),
            msg,
        })
    };
    let lba = dev.lba_size();
    // The sizes of the directions the job uses (a trim's is the zone size, checked below).
    for dir in [Dir::Read, Dir::Write]
        .into_iter()
        .filter(|&d| spec.rw.does(d))
    {
        let bs = spec.bs[dir];
        // One size for both directions (plain `bs=`) is named as the user gave it.
        let what = if spec.bs.read == spec.bs.write {
            format!("bs ({bs})")
        } else {
            format!("bs for {} ({bs})", dir.name())
        };
        if !bs.is_multiple_of(lba) {
            return err(format!(
                "{what} must be a multiple of the device's {lba}-byte logical block"
            ));
        }
        if bs / lba > dev.buffer_limit() {
            return err(format!(
                "{what} exceeds the largest transfer the device accepts ({} bytes)",
                dev.buffer_limit() * lba
            ));
        }
    }
    let total = dev.total_lbas() * lba;
    if let Some(size) = spec.size.map(|s| s.resolve(total))
        && size < lba
    {
        return err(format!(
            "size ({size} bytes) must hold at least one {lba}-byte logical block; leave it out to use the whole device"
        ));
    }
    let off = spec.offset.resolve(total);
    if !off.is_multiple_of(lba) {
        return err(format!(
            "offset ({off}) must be a multiple of the {lba}-byte logical block"
        ));
    }
    if off >= total {
        return err(format!(
            "offset ({off}) is beyond the device's {total} bytes"
        ));
    }
    if spec.zone_append && !spec.rw.writes() {
        return err(
            "zone_append=1 needs a job that writes (rw=write, randwrite, rw or randrw)".into(),
        );
    }
    if spec.ioengine == FioEngine::Spdk && spec.ioscheduler != FioScheduler::None {
        return err("ioscheduler applies to the kernel path only: use ioengine=io_uring with ioscheduler=mq-deadline".into());
    }
    if spec.rw.trims() {
        let rw = spec.rw.as_fio_str();
        let Some(zoned) = dev.zoned() else {
            return err(format!(
                "rw={rw} needs a zoned device with zonemode=zbd, where fio resets a zone per trim; profile '{}' is a conventional namespace, which takes no deallocate in ZoneLab",
                dev.profile().name
            ));
        };
        if spec.zonemode != ZoneMode::Zbd {
            return err(format!(
                "rw={rw} on a zoned device needs zonemode=zbd (fio then resets a zone per trim; a zoned block device takes no plain discard)"
            ));
        }
        let zs = zoned.zones().geometry().zone_size * lba;
        if spec.bs.trim != zs {
            return err(format!(
                "trim block size {} is not the zone size {zs}: with zonemode=zbd each trim resets one zone; set bs={zs} (or bs=,,{zs} for the trims alone)",
                spec.bs.trim
            ));
        }
    }
    let Some(zoned) = dev.zoned() else {
        let profile = &dev.profile().name;
        if spec.zonemode == ZoneMode::Zbd {
            return err(format!(
                "zonemode=zbd needs a zoned device, but profile '{profile}' is a conventional (block-interface) namespace; drop zonemode=zbd, or use a zoned profile such as zn540"
            ));
        }
        if spec.zone_append {
            return err(format!(
                "zone_append=1 needs a zoned device, but profile '{profile}' is a conventional (block-interface) namespace; use plain writes, or a zoned profile such as zn540"
            ));
        }
        return Ok(());
    };
    if spec.zonemode == ZoneMode::Zbd {
        let zs = zoned.zones().geometry().zone_size * lba;
        if let Some(zr) = spec.zonerange
            && zr != zs
        {
            return err(format!(
                "zonerange ({zr}) must equal the device's zone size ({zs}) with zonemode=zbd"
            ));
        }
        if let Some(zsz) = spec.zonesize
            && zsz != zs
        {
            return err(format!(
                "zonesize ({zsz}) must equal the device's zone size ({zs}) with zonemode=zbd"
            ));
        }
        if let Some(m) = spec.max_open_zones
            && m > dev.profile().zns.max_open
        {
            return err(format!(
                "max_open_zones ({m}) exceeds the device's limit of {} open zones",
                dev.profile().zns.max_open
            ));
        }
        // Every clone's region must hold a zone to work in (checked here, before any job runs).
        let geometry = zoned.zones().geometry();
        let zs = geometry.zone_size;
        for clone in 0..spec.numjobs {
            let (start, lbas) = region(spec, clone, dev.total_lbas(), lba);
            let (first, end) = CloneState::zones_in_region(start, lbas, zs, geometry.zones as u64);
            if first == end {
                return err(format!(
                    "with zonemode=zbd the region of clone {clone} (offset {} bytes, size {} bytes) must start at a zone start or contain a whole zone; align offset to the zone size ({} bytes)",
                    start * lba,
                    lbas * lba,
                    zs * lba
                ));
            }
        }
    }
    Ok(())
}

/// Runs `jobs` on an existing device (e.g. one loaded from an image).
pub fn run_on(
    jobs: &[JobSpec],
    device: Rc<RefCell<Namespace>>,
    settings: &RunSettings,
) -> Result<RunOutput, RunError> {
    if jobs.is_empty() {
        return Err(RunError {
            job: "(none)".into(),
            msg: "no jobs given: name one with --name=NAME and an rw= option, or pass a job file"
                .into(),
        });
    }
    for spec in jobs {
        validate(spec, &device.borrow())?;
    }
    check_job_count(jobs)?;
    check_in_flight(jobs)?;
    let sim = Sim::new();
    // One host stack per (engine, scheduler) in use, so zone write locks are shared.
    let mut stacks: BTreeMap<(u8, u8), Rc<HostStack<Namespace>>> = BTreeMap::new();
    for spec in jobs {
        let (e, s) = engine_of(spec);
        let key = (e as u8, s as u8);
        if let std::collections::btree_map::Entry::Vacant(v) = stacks.entry(key) {
            let st = HostStack::new(sim.clone(), device.clone(), e, s).map_err(|msg| RunError {
                job: spec.name.clone(),
                msg,
            })?;
            v.insert(st);
        }
    }
    let max_open = jobs
        .iter()
        .filter_map(|j| j.max_open_zones)
        .filter(|&m| m > 0)
        .min()
        .unwrap_or(device.borrow().profile().zns.max_open.max(1)) as usize;
    let view = Rc::new(RefCell::new(ZoneView::from_device(
        &device.borrow(),
        max_open,
    )));
    // Stonewall groups run one after another.
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, spec) in jobs.iter().enumerate() {
        if groups.is_empty() || spec.stonewall {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("pushed").push(i);
    }
    let dev_lbas = device.borrow().total_lbas();
    let lba_size = device.borrow().lba_size();
    let specs: Vec<Rc<JobSpec>> = jobs.iter().map(|j| Rc::new(j.clone())).collect();
    let s = sim.clone();
    let seed = settings.seed;
    let stacks2 = stacks.clone();
    let results = sim
        .block_on(async move {
            let mut results: Vec<CloneResult> = Vec::new();
            for group in groups {
                let mut handles = Vec::new();
                for &ji in &group {
                    let spec = specs[ji].clone();
                    let (e, sch) = engine_of(&spec);
                    let stack = stacks2[&(e as u8, sch as u8)].clone();
                    for clone in 0..spec.numjobs {
                        let st = make_clone(
                            &spec,
                            ji,
                            clone,
                            s.now(),
                            dev_lbas,
                            lba_size,
                            seed,
                            &view.borrow(),
                        );
                        let st = Rc::new(RefCell::new(st));
                        let mut workers = Vec::new();
                        for _ in 0..spec.iodepth {
                            {
                                // The group's threads all count as running from the start,
                                // and nothing is stuck for a new group.
                                let mut v = view.borrow_mut();
                                v.running += 1;
                                v.stuck = false;
                            }
                            workers.push(s.spawn(worker(
                                s.clone(),
                                st.clone(),
                                stack.clone(),
                                view.clone(),
                            )));
                        }
                        let st2 = st.clone();
                        handles.push(s.spawn(async move {
                            for w in workers {
                                w.await;
                            }
                            finish_clone(st2)
                        }));
                    }
                }
                for h in handles {
                    results.push(h.await);
                }
            }
            results
        })
        .map_err(|e| RunError {
            job: "(run)".into(),
            msg: e.to_string(),
        })?;
    let (merged, dispatched) = stacks.values().fold((0, 0), |(m, d), st| {
        let c = st.counters();
        (m + c.merged, d + c.dispatched)
    });
    Ok(RunOutput {
        clones: results,
        device,
        simulated_ns: sim.now().0,
        host_merged: merged,
        host_dispatched: dispatched,
        sim_polls: sim.stats().polls,
    })
}

/// The LBAs clone `clone` of `spec` works on, as (first, count): from its offset (plus the
/// clone's offset_increment) for `size` bytes, or to the device's end; at least one block, and
/// within the device.
fn region(spec: &JobSpec, clone: u32, dev_lbas: u64, lba_size: u64) -> (u64, u64) {
    let total = dev_lbas * lba_size;
    let base = spec.offset.resolve(total) + clone as u64 * spec.offset_increment.resolve(total);
    let start = (base / lba_size).min(dev_lbas.saturating_sub(1));
    let size = spec
        .size
        .map(|s| s.resolve(total))
        .unwrap_or(total - base.min(total));
    let lbas = (size / lba_size).min(dev_lbas - start).max(1);
    (start, lbas)
}

#[allow(clippy::too_many_arguments)]
fn make_clone(
    spec: &Rc<JobSpec>,
    job: usize,
    clone: u32,
    now: Nanos,
    dev_lbas: u64,
    lba_size: u64,
    seed: u64,
    view: &ZoneView,
) -> CloneState {
    let total = dev_lbas * lba_size;
    let (start, lbas) = region(spec, clone, dev_lbas, lba_size);
    let region_bytes = lbas * lba_size;
    let ramp_end = now + Nanos(spec.ramp_time_ns);
    let t_end = spec.runtime_ns.map(|r| ramp_end + Nanos(r));
    let byte_limit = if spec.time_based && spec.runtime_ns.is_some() {
        None
    } else {
        Some(
            spec.io_size
                .map(|s| s.resolve(total))
                .unwrap_or(region_bytes),
        )
    };
    let job_seed = spec.seed.unwrap_or(seed);
    // `validate` made the block sizes of the directions the job uses whole, non-zero numbers of
    // blocks.
    let nlb = PerDir::from_fn(|dir| spec.bs[dir] / lba_size);
    let zone_range = CloneState::zones_in_region(start, lbas, view.zone_size, view.wp.len() as u64);
    let limited = |r: Option<u64>| r.is_some_and(|r| r > 0);
    let rate_limited = Dir::ALL
        .into_iter()
        .any(|d| limited(spec.rate[d]) || limited(spec.rate_iops[d]));
    CloneState {
        nlb,
        read_nlb_div: Divisor::new(nlb.read.max(1)),
        zone_range,
        random: spec.rw.is_random(),
        zbd: spec.zonemode == ZoneMode::Zbd,
        rate_limited,
        rng: SimRng::stream(job_seed, ((job as u64) << 32) | clone as u64),
        lba_size,
        start,
        lbas,
        seq: PerDir::default(),
        zone_cursor: PerDir::default(),
        issued_bytes: 0,
        issued_ios: 0,
        byte_limit,
        io_limit: spec.number_ios.filter(|&n| n > 0),
        ramp_end,
        t_end,
        rate_next: PerDir::all(now),
        measured: Window::new(spec, ramp_end),
        ramp: (spec.ramp_time_ns > 0).then(|| Box::new(Window::new(spec, now))),
        error: None,
        stop: false,
        zone_resets: 0,
        fp_counter: 0,
        spec: spec.clone(),
        job,
        clone,
    }
}

/// Earliest time an I/O of `bytes` in direction `dir` may issue under `rate`/`rate_iops`.
fn rate_gate(st: &mut CloneState, dir: Dir, bytes: u64, now: Nanos) -> Nanos {
    if !st.rate_limited {
        return now;
    }
    let (rate, iops) = (st.spec.rate[dir], st.spec.rate_iops[dir]);
    let mut gap = Nanos::ZERO;
    if let Some(r) = rate.filter(|&r| r > 0) {
        gap = gap.max(Nanos::for_transfer(bytes, r));
    }
    if let Some(i) = iops.filter(|&i| i > 0) {
        gap = gap.max(Nanos(1_000_000_000 / i));
    }
    if gap == Nanos::ZERO {
        return now;
    }
    let at = st.rate_next[dir].max(now);
    st.rate_next[dir] = at + gap;
    at
}

/// One simulated thread of a clone (one of its `iodepth`), counted in the view's `running`
/// from its spawn; it leaves the count when it ends.
async fn worker(
    sim: Sim,
    st: Rc<RefCell<CloneState>>,
    stack: Rc<HostStack<Namespace>>,
    view: Rc<RefCell<ZoneView>>,
) {
    run_thread(&sim, &st, &stack, &view).await;
    view.borrow_mut().leave();
}

async fn run_thread(
    sim: &Sim,
    st: &Rc<RefCell<CloneState>>,
    stack: &Rc<HostStack<Namespace>>,
    view: &Rc<RefCell<ZoneView>>,
) {
    loop {
        let now = sim.now();
        let planned = st.borrow_mut().plan(now, &mut view.borrow_mut());
        match planned {
            Planned::Done => return,
            Planned::Wait => {
                // Another thread holds what we need: wait until the zones change, or the job's
                // time is up. As fio's zbd_convert_to_write_zone, which waits while any I/O is
                // in flight, the thread gives up once no other thread can change the zones:
                // every open zone is held by a job that has finished or that waits as well.
                let changed = {
                    let mut v = view.borrow_mut();
                    if v.stuck || v.running == 1 {
                        v.stuck = true;
                        let limit = v.max_open;
                        drop(v);
                        st.borrow_mut().error.get_or_insert_with(|| {
                            format!(
                                "no zone could be opened: all {limit} open zones (max_open_zones) are held by jobs that have finished or wait as well (fio ends such a job early); raise max_open_zones (device limit permitting), let each job fill the zones it opens (size and io_size a multiple of the zone capacity), or run fewer concurrent zone writers"
                            )
                        });
                        return;
                    }
                    v.leave();
                    v.changed.notified()
                };
                let t_end = st.borrow().t_end;
                match t_end {
                    Some(end) => {
                        if let Raced::Second(()) = race(changed, sim.sleep_until(end)).await {
                            // Time is up (the next plan says so); it runs again.
                            view.borrow_mut().running += 1;
                        }
                    }
                    None => changed.await,
                }
            }
            Planned::Reset { zone } => {
                let done = reset_zone(stack, view, zone).await;
                let mut s = st.borrow_mut();
                match done.status {
                    Ok(_) => s.zone_resets += 1,
                    Err(e) => s.error = Some(format!("zone reset of zone {zone} failed: {e}")),
                }
            }
            Planned::Trim {
                zone,
                had_data,
                bytes,
            } => {
                let done = if had_data {
                    reset_zone(stack, view, zone).await
                } else {
                    stack.complete_in_host().await
                };
                let mut s = st.borrow_mut();
                if had_data && done.status.is_ok() {
                    s.zone_resets += 1;
                }
                s.complete(&mut view.borrow_mut(), Dir::Trim, bytes, Some(zone), &done);
            }
            Planned::Pause { until } => sim.sleep_until(until).await,
            Planned::Io {
                dir,
                cmd,
                bytes,
                zone,
                gate,
            } => {
                if gate > sim.now() {
                    sim.sleep_until(gate).await;
                }
                // Commands with a completion time known at once are issued here, so this future
                // holds a sleep rather than the whole of `submit`'s.
                let done = match stack.dispatch(cmd) {
                    Ok(done) => {
                        sim.sleep_until(done.completed).await;
                        done
                    }
                    Err(cmd) => stack.submit(cmd).await,
                };
                st.borrow_mut()
                    .complete(&mut view.borrow_mut(), dir, bytes, zone, &done);
            }
        }
    }
}

/// Resets zone `zone` (a wrap-around before rewriting it, or a trim).
async fn reset_zone(
    stack: &Rc<HostStack<Namespace>>,
    view: &RefCell<ZoneView>,
    zone: u32,
) -> IoDone {
    let zs = view.borrow().zone_size;
    stack
        .submit(IoCmd::ZoneMgmt {
            action: ZoneAction::Reset,
            zslba: Lba(zone as u64 * zs),
            select_all: false,
        })
        .await
}

/// Interval of bandwidth samples: `log_avg_msec`, or fio's default of 500 ms.
fn sample_ms(spec: &JobSpec) -> u64 {
    if spec.log_avg_msec > 0 {
        spec.log_avg_msec
    } else {
        500
    }
}

fn finish_clone(st: Rc<RefCell<CloneState>>) -> CloneResult {
    let mut s = st.borrow_mut();
    // Nothing was issued after the ramp: the job ended within it, and (as in fio, which
    // resets its statistics only when the ramp ends) all of its I/O counts.
    if s.measured.stats.ios() == 0
        && let Some(r) = s.ramp.take()
    {
        s.measured = *r;
    }
    let w = &mut s.measured;
    let runtime = w.last_completion.saturating_sub(w.start).0;
    let end = runtime;
    let mut stats = std::mem::take(&mut w.stats);
    for dir in Dir::ALL {
        w.bw[dir].feed_samples(&mut stats[dir], end);
    }
    // fio's logs, named `PREFIX_KIND.N.log` (N: the clone, from 1).
    let mut logs = Vec::new();
    let mut add = |prefix: &Option<String>, kind: &str, rows: &dyn Fn(Dir) -> Vec<(u64, u64)>| {
        if let Some(prefix) = prefix {
            logs.push((
                format!("{prefix}_{kind}.{}.log", s.clone + 1),
                fio_log_text(&s.spec, rows),
            ));
        }
    };
    let w = &s.measured;
    add(&s.spec.write_bw_log, "bw", &|d| w.bw[d].rows());
    add(&s.spec.write_iops_log, "iops", &|d| w.bw[d].iops_rows());
    if let Some(lat) = &w.lat {
        for kind in LatKind::ALL {
            add(&s.spec.write_lat_log, kind.suffix(), &|d| lat[d].rows(kind));
        }
    }
    CloneResult {
        job: s.job,
        clone: s.clone,
        stats,
        runtime_ns: runtime,
        error: s.error.clone(),
        logs,
        zone_resets: s.zone_resets,
    }
}

/// A fio log's text: `time_ms, value, ddir, bs, offset` per interval and direction the job
/// uses, in time order; `rows(dir)` gives a direction's `(time_ms, value)`. The offset is 0
/// (an interval's average has no single offset).
fn fio_log_text(spec: &JobSpec, rows: &dyn Fn(Dir) -> Vec<(u64, u64)>) -> String {
    let mut all: Vec<(u64, u8, u64, u64)> = Vec::new();
    for dir in Dir::ALL.into_iter().filter(|&d| spec.rw.does(d)) {
        let bs = spec.bs[dir];
        all.extend(rows(dir).into_iter().map(|(t, v)| (t, dir as u8, v, bs)));
    }
    all.sort();
    all.into_iter()
        .map(|(t, dir, v, bs)| format!("{t}, {v}, {dir}, {bs}, 0\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fio::options::parse_cli;
    use proptest::prelude::*;

    fn profile() -> Profile {
        let ov = [
            ("zones", "8"),
            ("zone_size", "32MiB"),
            ("max_open", "4"),
            ("max_active", "4"),
        ];
        let ov: Vec<(String, String)> = ov
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Profile::load("znsplus-mlc", &ov).unwrap()
    }

    fn jobs(args: &[String]) -> Vec<JobSpec> {
        parse_cli(args, &|_| Err(std::io::Error::other("no files")))
            .unwrap()
            .jobs
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn zbd_sequential_write_fills_zones_in_order_and_resets_on_wrap() {
        let j = jobs(&s(&[
            "--name=w",
            "--rw=write",
            "--bs=64k",
            "--zonemode=zbd",
            "--size=64m",
            "--io_size=96m",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        let c = &out.clones[0];
        assert!(c.error.is_none(), "{:?}", c.error);
        assert_eq!(c.stats.write.bytes(), 96 << 20);
        // 64 MiB = two zones; the third 32 MiB wraps to the first zone after a reset.
        assert_eq!(c.zone_resets, 1);
        assert_eq!(out.device.borrow().counters().zone_resets, 1);
    }

    /// Jobs `--name=j0 ..` that each write `zone_bytes` into a zone of their own, one open zone
    /// allowed.
    fn one_zone_each(writers: usize, zone_bytes: &str) -> Vec<JobSpec> {
        let mut a = s(&[
            "--rw=write",
            "--bs=64k",
            "--zonemode=zbd",
            "--max_open_zones=1",
            "--size=32m",
        ]);
        for w in 0..writers {
            a.push(format!("--name=j{w}"));
            a.push(format!("--offset={}m", 32 * w));
            a.push(format!("--io_size={zone_bytes}"));
        }
        jobs(&a)
    }

    /// With one open zone allowed, writers take turns: each waits for the zone before it to
    /// fill and close, and goes on the moment it does, however long the queue (six zones
    /// take about 1.5 simulated s here; a one-second bound on waiting used to fail the last).
    #[test]
    fn writers_waiting_for_an_open_zone_take_turns_as_zones_close() {
        let alone = run(
            &one_zone_each(1, "32m"),
            &profile(),
            &RunSettings::default(),
        )
        .unwrap();
        let one = alone.clones[0].runtime_ns;
        let out = run(
            &one_zone_each(6, "32m"),
            &profile(),
            &RunSettings::default(),
        )
        .unwrap();
        for (i, c) in out.clones.iter().enumerate() {
            assert!(c.error.is_none(), "writer {i}: {:?}", c.error);
            assert_eq!(c.stats.write.bytes(), 32 << 20);
            // Writer i waited for the i zones before its own, then wrote its zone.
            let expected = (i as u64 + 1) * one;
            assert!(
                c.runtime_ns.abs_diff(expected) < 1_000_000 * (i as u64 + 1),
                "writer {i}: {} ns, expected about {expected}",
                c.runtime_ns
            );
        }
        assert!(out.simulated_ns > 1_000_000_000);
    }

    #[test]
    fn rate_limited_writers_never_exceed_the_open_zone_limit() {
        // Rate limits delay submissions after planning; a zone filled by a delayed write must
        // still count as open until that write completes.
        let j = jobs(&s(&[
            "--name=w",
            "--rw=randwrite",
            "--bs=128k",
            "--iodepth=8",
            "--numjobs=4",
            "--zonemode=zbd",
            "--zone_append=1",
            "--rate=60m",
            "--time_based",
            "--runtime=2s",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        for c in &out.clones {
            assert!(c.error.is_none(), "{:?}", c.error);
            assert!(c.stats.write.ios() > 0);
        }
    }

    #[test]
    fn rate_limit_paces_the_job() {
        let j = jobs(&s(&[
            "--name=w",
            "--rw=write",
            "--bs=4k",
            "--zonemode=zbd",
            "--size=4m",
            "--rate=1m",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        // 4 MiB at 1 MiB/s takes about four simulated seconds.
        let secs = out.simulated_ns as f64 / 1e9;
        assert!((3.9..4.2).contains(&secs), "{secs}");
    }

    #[test]
    fn more_ios_in_flight_than_the_limit_are_refused_before_anything_runs() {
        // Each job alone is inside its option ranges; together they are too deep.
        let two = |b_waits: bool| {
            let mut a = s(&["--rw=write", "--bs=4k", "--size=4m", "--iodepth=65535"]);
            a.extend(s(&["--name=a", "--numjobs=2", "--name=b", "--numjobs=3"]));
            if b_waits {
                a.push("--stonewall".into());
            }
            jobs(&a)
        };
        let e = match run(&two(false), &profile(), &RunSettings::default()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("5 x 65535 I/Os in flight ran"),
        };
        assert!(
            e.contains("327675 I/Os in flight") && e.contains("'a' 2 x 65535, 'b' 3 x 65535"),
            "{e}"
        );
        // With b after a (stonewall), each group is within the limit.
        assert!(check_in_flight(&two(true)).is_ok());
    }

    #[test]
    fn more_clones_than_fios_job_limit_are_refused_before_anything_runs() {
        // Each numjobs is inside its range (1..=4096); together the run has 4097 clones, which
        // kept about 1 MiB of statistics each until the report.
        let clones = |b: &str| {
            jobs(&s(&[
                "--rw=write",
                "--bs=4k",
                "--size=4m",
                "--name=a",
                "--numjobs=4096",
                "--name=b",
                "--stonewall",
                &format!("--numjobs={b}"),
            ]))
        };
        let e = match run(&clones("1"), &profile(), &RunSettings::default()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("4097 clones ran"),
        };
        assert!(
            e.contains("4097 clones (numjobs: 'a' 4096, 'b' 1)") && e.contains("lower numjobs"),
            "{e}"
        );
        // Stonewall groups do not help: every clone's statistics last until the report.
        assert!(check_job_count(&clones("1")).is_err());
        assert!(check_job_count(&jobs(&s(&["--name=a", "--rw=read", "--numjobs=4096"]))).is_ok());
    }

    #[test]
    fn a_job_that_ends_within_its_ramp_reports_all_of_its_io_as_fio_does() {
        let with_ramp = |ramp: &str| {
            let j = jobs(&s(&[
                "--name=w",
                "--rw=write",
                "--bs=64k",
                "--zonemode=zbd",
                "--size=32m",
                &format!("--ramp_time={ramp}"),
            ]));
            let out = run(&j, &profile(), &RunSettings::default()).unwrap();
            let c = &out.clones[0];
            (c.stats.write.bytes(), c.runtime_ns)
        };
        let (all, _) = with_ramp("0");
        assert_eq!(all, 32 << 20);
        // The ramp outlasts the job: nothing was reset, all of it counts.
        let (bytes, runtime) = with_ramp("10000h");
        assert_eq!(bytes, 32 << 20);
        assert!(runtime > 0);
        // A ramp that ends mid-job drops what was issued before its end.
        let (bytes, _) = with_ramp("5ms");
        assert!(bytes > 0 && bytes < 32 << 20, "{bytes}");
    }

    /// A job writing 96 MiB into three of the eight 32 MiB zones, then (after a stonewall) a
    /// trim job of one zone per trim with the options `trim`: the run.
    fn trims_after_filling_three_zones(trim: &[&str]) -> RunOutput {
        let mut a = s(&[
            "--zonemode=zbd",
            "--name=fill",
            "--rw=write",
            "--bs=128k",
            "--size=96m",
            "--name=trim",
            "--stonewall",
            "--bs=32m",
        ]);
        a.extend(s(trim));
        run(&jobs(&a), &profile(), &RunSettings::default()).unwrap()
    }

    #[test]
    fn zbd_trims_reset_the_zones_that_hold_data_and_randtrim_ends_when_none_is_left() {
        // A sequential trim of the device issues a trim per zone and resets the three that
        // hold data (fio counts only those).
        let out = trims_after_filling_three_zones(&["--rw=trim"]);
        let t = &out.clones[1];
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!(
            (t.stats.trim.ios(), t.stats.trim.bytes()),
            (8, 8 * (32 << 20))
        );
        assert_eq!(t.zone_resets, 3);
        assert_eq!(t.stats.write.ios() + t.stats.read.ios(), 0);
        assert!(
            t.stats.trim.lat.mean() > 0.0,
            "a reset takes the device's time"
        );
        let dev = out.device.borrow();
        assert_eq!(dev.counters().zone_resets, 3);
        let zones = dev.zoned().expect("zoned").zones();
        assert!(zones.zones().iter().all(|z| z.state == ZoneState::Empty));
        drop(dev);
        // randtrim finds the zones with data wherever it lands, and ends once none is left,
        // short of its number_ios.
        let out = trims_after_filling_three_zones(&["--rw=randtrim", "--number_ios=100"]);
        let t = &out.clones[1];
        assert!(t.error.is_none(), "{:?}", t.error);
        assert_eq!((t.stats.trim.ios(), t.zone_resets), (3, 3));
    }

    #[test]
    fn a_trim_of_a_zone_without_data_sends_no_command() {
        // As fio: the trims of empty zones cost the host's submission and completion only,
        // and a time-based job of them still ends.
        let j = jobs(&s(&[
            "--name=t",
            "--rw=trim",
            "--bs=32m",
            "--zonemode=zbd",
            "--time_based",
            "--runtime=10ms",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        let t = &out.clones[0];
        assert!(t.error.is_none(), "{:?}", t.error);
        assert!(t.stats.trim.ios() > 8, "it wraps round the empty zones");
        assert_eq!(t.zone_resets, 0);
        assert!(
            t.stats.trim.lat.mean() < 10_000.0,
            "{}",
            t.stats.trim.lat.mean()
        );
        assert_eq!(out.host_dispatched, 0, "no command reached the device");
    }

    #[test]
    fn trims_run_only_where_fio_resets_zones_with_them() {
        let fail = |args: &[&str], profile: &Profile| {
            run(&jobs(&s(args)), profile, &RunSettings::default())
                .unwrap_err()
                .to_string()
        };
        let e = fail(&["--name=t", "--rw=trim", "--bs=32m"], &profile());
        assert!(e.contains("needs zonemode=zbd"), "{e}");
        let e = fail(&["--name=t", "--rw=randtrim", "--zonemode=zbd"], &profile());
        assert!(
            e.contains("trim block size 4096 is not the zone size 33554432"),
            "{e}"
        );
        let conventional = Profile::load("sn640", &[]).unwrap();
        let e = fail(&["--name=t", "--rw=trim"], &conventional);
        assert!(e.contains("conventional namespace"), "{e}");
        // The trims' size is the zone size; the job's read and write sizes are not checked
        // against the device when it neither reads nor writes.
        let ok = jobs(&s(&["--name=t", "--rw=trim", "--bs=32m", "--zonemode=zbd"]));
        assert!(run(&ok, &profile(), &RunSettings::default()).is_ok());
    }

    #[test]
    fn trims_and_writes_to_the_same_zones_keep_to_the_zone_rules() {
        // A QD8 writer and a rate-limited random trimmer share the device for a second: each
        // trim resets a zone the writer has filled or is filling, and the writer goes on at
        // the zone's start; no command fails.
        let j = jobs(&s(&[
            "--zonemode=zbd",
            "--time_based",
            "--runtime=1s",
            "--name=w",
            "--rw=write",
            "--bs=64k",
            "--iodepth=8",
            "--name=t",
            "--rw=randtrim",
            "--bs=32m",
            "--rate_iops=,,20",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        for c in &out.clones {
            assert!(c.error.is_none(), "{:?}", c.error);
        }
        let t = &out.clones[1];
        assert!(
            (1..=20).contains(&t.stats.trim.ios()) && t.zone_resets <= t.stats.trim.ios(),
            "20 trims a second at most (each waits for the writes in flight on its zone): {} trims, {} resets",
            t.stats.trim.ios(),
            t.zone_resets
        );
        let dev = out.device.borrow();
        assert_eq!(dev.counters().errors, 0);
        let inv = dev.zoned().expect("zoned").zones().check_invariants();
        assert!(inv.is_ok(), "{inv:?}");
    }

    #[test]
    fn jobs_that_cannot_get_an_open_zone_fail_instead_of_spinning() {
        // Job a stops after ten writes and leaves its zone open; b can never open one.
        let j = jobs(&s(&[
            "--zonemode=zbd",
            "--max_open_zones=1",
            "--rw=write",
            "--bs=4k",
            "--size=32m",
            "--name=a",
            "--number_ios=10",
            "--name=b",
            "--offset=64m",
        ]));
        let out = run(&j, &profile(), &RunSettings::default()).unwrap();
        let errors: Vec<_> = out.clones.iter().filter_map(|c| c.error.as_ref()).collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("max_open_zones") && errors[0].contains("finished"));
        // b gives up as a finishes (as fio ends such a job once no I/O is in flight), not
        // after a timeout.
        let a = &out.clones[0];
        assert!(
            out.simulated_ns <= a.runtime_ns + 1_000,
            "{} {}",
            out.simulated_ns,
            a.runtime_ns
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// Any combination of these options runs to an end (Ok, or an error naming the problem)
        /// without panicking, and two runs give identical statistics.
        #[test]
        fn random_jobs_run_and_repeat(
            rw in prop::sample::select(vec!["read", "write", "randread", "randwrite", "rw", "randrw", "trim", "randtrim"]),
            bs in prop::sample::select(vec!["4k", "8k", "16k", "128k", "512", "3k"]),
            iodepth in 1u32..40,
            numjobs in 1u32..4,
            zbd in any::<bool>(),
            append in any::<bool>(),
            engine in prop::sample::select(vec!["spdk", "io_uring"]),
            sched in prop::sample::select(vec!["none", "mq-deadline"]),
            size_mb in 0u64..300,
            offset_mb in 0u64..300,
            ios in 1u64..400,
            seed in 0u64..1000,
            max_open in 0u32..4,
            second in prop::sample::select(vec![
                "", "--name=q", "--name=q --stonewall",
                "--name=q --rw=randtrim --bs=32m", "--name=q --rw=trim --bs=32m --rate_iops=,,100",
            ]),
        ) {
            // Options before the first --name apply to every job.
            let mut a = Vec::new();
            a.push(format!("--rw={rw}"));
            a.push(format!("--bs={bs}"));
            a.push(format!("--iodepth={iodepth}"));
            a.push(format!("--numjobs={numjobs}"));
            a.push(format!("--size={size_mb}m"));
            a.push(format!("--offset={offset_mb}m"));
            a.push(format!("--number_ios={ios}"));
            a.push(format!("--seed={seed}"));
            a.push(format!("--ioengine={engine}"));
            a.push(format!("--ioscheduler={sched}"));
            if zbd { a.push("--zonemode=zbd".into()); }
            if append { a.push("--zone_append=1".into()); }
            if max_open > 0 { a.push(format!("--max_open_zones={max_open}")); }
            a.push("--name=p".into());
            a.extend(second.split_whitespace().map(String::from));
            let Ok(parsed) = parse_cli(&a, &|_| Err(std::io::Error::other("no files"))) else { return Ok(()); };
            let r1 = run(&parsed.jobs, &profile(), &RunSettings::default());
            let r2 = run(&parsed.jobs, &profile(), &RunSettings::default());
            match (r1, r2) {
                (Ok(o1), Ok(o2)) => {
                    prop_assert_eq!(o1.simulated_ns, o2.simulated_ns);
                    for (c1, c2) in o1.clones.iter().zip(&o2.clones) {
                        prop_assert_eq!(c1.stats.read.ios(), c2.stats.read.ios());
                        prop_assert_eq!(c1.stats.write.ios(), c2.stats.write.ios());
                        prop_assert_eq!(c1.stats.trim.ios(), c2.stats.trim.ios());
                        prop_assert_eq!(&c1.error, &c2.error);
                        prop_assert!(c1.stats.read.ios() + c1.stats.write.ios() + c1.stats.trim.ios() <= ios);
                        // Under zonemode=zbd the jobs keep to the zone rules: no command fails.
                        prop_assert!(
                            !zbd || c1.error.as_deref().is_none_or(|e| e.starts_with("no zone could be opened")),
                            "{:?}", c1.error
                        );
                    }
                    let inv = o1.device.borrow().zoned().expect("zoned profile").zones().check_invariants();
                    prop_assert!(inv.is_ok(), "{:?}", inv);
                }
                (Err(e1), Err(e2)) => prop_assert_eq!(e1.to_string(), e2.to_string()),
                _ => prop_assert!(false, "runs disagree"),
            }
        }
    }
}
