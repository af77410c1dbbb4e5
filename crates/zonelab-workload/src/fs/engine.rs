//! The machinery every file-system workload shares: the run context (file system, clock,
//! budget of operations or time, statistics, verification counters, first error) and the
//! simulated threads.

use super::config::{RunConfig, RunLength, WarmGate};
use super::content::{Content, Mismatch, Versions};
use super::report::{Recorder, SetupReport, VerifyReport};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;
use zonelab_device::OwnedData;
use zonelab_lfs::{FileSystem, FsError};
use zonelab_sim::sync::Notify;
use zonelab_sim::{Nanos, Sim};

/// Why a file-system workload failed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FsWorkloadError {
    /// A read returned data other than what was written.
    #[error("verification failed: {file} at offset {offset}: expected {expected}, got {got}")]
    Mismatch {
        file: String,
        offset: u64,
        expected: String,
        got: String,
    },
    /// A read returned more or fewer bytes than the file holds, or `lookup`/`stat` showed
    /// another inode or size than the workload created.
    #[error("{file}: {detail}")]
    Metadata { file: String, detail: String },
    /// A file-system call failed.
    #[error("{op} of {file} failed: {err}")]
    Fs {
        op: &'static str,
        file: String,
        err: FsError,
    },
    /// filebench's "could not obtain a file": a flowop found no file of the kind it needs.
    #[error("flowop {flowop} found no {kind} file in fileset {fileset}: {hint}")]
    NoFile {
        flowop: &'static str,
        fileset: String,
        kind: &'static str,
        /// What to change: the parameter that sizes the fileset (and the threads that share it).
        hint: &'static str,
    },
    /// The parameters cannot describe a run (with what to change).
    #[error("invalid workload parameters: {0}")]
    Config(String),
    /// The simulation stopped with threads waiting for each other.
    #[error("{0}")]
    Stuck(String),
}

pub type FsWorkloadResult<T> = Result<T, FsWorkloadError>;

/// How a flowop or a thread's loop ends early.
#[derive(Debug)]
pub(crate) enum Halt {
    /// The run's budget is used up (time or operations), or another thread failed.
    Done,
    Error(FsWorkloadError),
}

impl From<FsWorkloadError> for Halt {
    fn from(e: FsWorkloadError) -> Halt {
        Halt::Error(e)
    }
}

pub(crate) type Step<T = ()> = Result<T, Halt>;

/// Operations at one virtual instant after which a time-bounded run is declared stuck.
const SAME_INSTANT_LIMIT: u64 = 2_000_000;

/// State shared by every simulated thread of a run.
pub(crate) struct Ctx<F> {
    pub sim: Sim,
    pub fs: Rc<F>,
    pub content: Content,
    pub cfg: RunConfig,
    /// Wakes threads waiting for a file to become free (busy flags, write locks).
    pub notify: Notify,
    measuring: Cell<bool>,
    measure_from: Cell<Nanos>,
    deadline: Cell<Option<Nanos>>,
    ops_started: Cell<u64>,
    stopped: Cell<bool>,
    error: RefCell<Option<FsWorkloadError>>,
    rec: RefCell<Recorder>,
    verify: Cell<VerifyReport>,
    counters: RefCell<BTreeMap<String, u64>>,
    pub setup: RefCell<SetupReport>,
    last_end: Cell<Nanos>,
    same_instant: Cell<(Nanos, u64)>,
    next_uid: Cell<u64>,
}

impl<F: FileSystem + 'static> Ctx<F> {
    pub fn new(sim: Sim, fs: Rc<F>, cfg: RunConfig) -> Rc<Ctx<F>> {
        Rc::new(Ctx {
            content: Content::new(cfg.seed, cfg.payload),
            sim,
            fs,
            cfg,
            notify: Notify::new(),
            measuring: Cell::new(false),
            measure_from: Cell::new(Nanos::MAX),
            deadline: Cell::new(None),
            ops_started: Cell::new(0),
            stopped: Cell::new(false),
            error: RefCell::new(None),
            rec: RefCell::new(Recorder::default()),
            verify: Cell::new(VerifyReport::default()),
            counters: RefCell::new(BTreeMap::new()),
            setup: RefCell::new(SetupReport::default()),
            last_end: Cell::new(Nanos::ZERO),
            same_instant: Cell::new((Nanos::MAX, 0)),
            next_uid: Cell::new(1),
        })
    }

    /// A fresh file-incarnation id for [`Content`].
    pub fn new_uid(&self) -> u64 {
        let u = self.next_uid.get();
        self.next_uid.set(u + 1);
        u
    }

    /// Ends the setup phase: operations from now on count toward the run's budget and, after
    /// the warm-up, toward the statistics.
    ///
    /// With [`RunConfig::warm_until`] the measured phase starts at the first check after the
    /// warm-up time at which the condition holds; the run fails if it does not hold within the
    /// gate's limit.
    pub fn start_measuring(self: &Rc<Self>) {
        let now = self.sim.now();
        self.setup.borrow_mut().simulated_ns = now.0;
        let from = now + self.cfg.warmup;
        self.measuring.set(true);
        let Some(gate) = self.cfg.warm_until.clone() else {
            self.open_window(from);
            if let Some(hook) = self.cfg.on_measure.clone() {
                let sim = self.sim.clone();
                self.sim.spawn(async move {
                    sim.sleep_until(from).await;
                    (hook.0)();
                });
            }
            return;
        };
        // Nothing counts until the gate opens the window.
        self.measure_from.set(Nanos::MAX);
        let ctx = self.clone();
        self.sim.spawn(async move {
            ctx.sim.sleep_until(from).await;
            loop {
                if ctx.stopped.get() {
                    return;
                }
                let t = ctx.sim.now();
                if (gate.ready)() {
                    ctx.open_window(t);
                    if let Some(hook) = ctx.cfg.on_measure.clone() {
                        (hook.0)();
                    }
                    return;
                }
                if t - now >= gate.limit {
                    ctx.fail(FsWorkloadError::Config(format!(
                        "the warm-up waited {} of simulated time for {} and it did not \
                         happen: write more (a longer run, a higher utilization) or wait \
                         for less",
                        gate.limit, gate.what
                    )));
                    return;
                }
                ctx.sim.sleep(WarmGate::POLL).await;
            }
        });
    }

    /// The measured phase starts at `from`.
    fn open_window(&self, from: Nanos) {
        self.measure_from.set(from);
        self.last_end.set(from);
        if let Some(RunLength::Time(d)) = self.cfg.run {
            self.deadline.set(Some(from + d));
        }
    }

    pub fn stopped(&self) -> bool {
        self.stopped.get()
    }

    /// Records the first error and stops every thread.
    pub fn fail(&self, e: FsWorkloadError) {
        let mut err = self.error.borrow_mut();
        if err.is_none() {
            *err = Some(e);
        }
        self.stopped.set(true);
        self.notify.notify_all();
    }

    pub fn take_error(&self) -> Option<FsWorkloadError> {
        self.error.borrow_mut().take()
    }

    /// Called before each operation: lets the other threads run, then says whether an
    /// operation may start and when it starts.
    pub async fn begin(&self) -> Step<Nanos> {
        self.sim.yield_now().await;
        if self.stopped.get() {
            return Err(Halt::Done);
        }
        let now = self.sim.now();
        if !self.measuring.get() {
            return Ok(now);
        }
        if self.deadline.get().is_some_and(|d| now >= d) {
            return Err(Halt::Done);
        }
        let waits_for_time = self.deadline.get().is_some() || now < self.measure_from.get();
        if waits_for_time {
            let (at, n) = self.same_instant.get();
            let n = if at == now { n + 1 } else { 0 };
            self.same_instant.set((now, n));
            if n > SAME_INSTANT_LIMIT {
                return Err(Halt::Error(FsWorkloadError::Config(format!(
                    "{SAME_INSTANT_LIMIT} operations at the simulated instant {now} and the run \
                     waits for time to pass: the file system takes no virtual time; give the \
                     run a number of operations instead of a duration (and no warm-up)"
                ))));
            }
        }
        if let Some(RunLength::Ops(n)) = self.cfg.run
            && now >= self.measure_from.get()
        {
            if self.ops_started.get() >= n {
                return Err(Halt::Done);
            }
            self.ops_started.set(self.ops_started.get() + 1);
        }
        Ok(now)
    }

    /// An operation that [`Ctx::begin`] admitted did nothing (filebench skips it without
    /// recording): its place in an operation budget is given back.
    pub fn unbegin(&self, start: Nanos) {
        if self.measuring.get()
            && start >= self.measure_from.get()
            && matches!(self.cfg.run, Some(RunLength::Ops(_)))
        {
            self.ops_started.set(self.ops_started.get() - 1);
        }
    }

    /// Records a completed operation that started at `start`.
    pub fn end(&self, op: &'static str, start: Nanos, read: u64, written: u64) {
        let now = self.sim.now();
        if !self.measuring.get() {
            let mut s = self.setup.borrow_mut();
            s.bytes_written += written;
            return;
        }
        if start >= self.measure_from.get() {
            self.rec
                .borrow_mut()
                .record(op, (now - start).0, read, written);
            if now > self.last_end.get() {
                self.last_end.set(now);
            }
        }
    }

    /// Counts a workload-specific event.
    pub fn bump(&self, counter: &str) {
        *self
            .counters
            .borrow_mut()
            .entry(counter.to_string())
            .or_default() += 1;
    }

    /// Whether the measured phase has begun (setup and warm-up are over) at this instant.
    pub fn in_window(&self) -> bool {
        self.measuring.get() && self.sim.now() >= self.measure_from.get()
    }

    /// Adds `n` to a workload-specific counter if the measured phase has begun (events of the
    /// setup and the warm-up are not counted).
    pub fn add_measured(&self, counter: &str, n: u64) {
        if self.in_window() {
            *self
                .counters
                .borrow_mut()
                .entry(counter.to_string())
                .or_default() += n;
        }
    }

    /// A counter's value so far.
    pub fn counter(&self, counter: &str) -> u64 {
        self.counters.borrow().get(counter).copied().unwrap_or(0)
    }

    /// Sleeps until `at`, or until the end of a time-bounded run if that comes first.
    pub async fn sleep_until(&self, at: Nanos) {
        let at = match self.deadline.get() {
            Some(d) if self.measuring.get() => at.min(d),
            _ => at,
        };
        self.sim.sleep_until(at).await;
    }

    /// Checks data a read returned at `off` of `file` (`uid`'s data, as `versions` say).
    pub fn check_read(
        &self,
        file: &dyn Fn() -> String,
        uid: u64,
        off: u64,
        got: &OwnedData,
        versions: Versions<'_>,
    ) -> FsWorkloadResult<()> {
        let n = self.content.len_of(got);
        let mut v = self.verify.get();
        v.reads_checked += 1;
        v.bytes_checked += n;
        let r = self.content.check(uid, off, got, versions);
        if r.is_err() {
            v.mismatches += 1;
        }
        self.verify.set(v);
        match r {
            Ok(()) => Ok(()),
            Err(Mismatch {
                offset,
                expected,
                got,
            }) => {
                if self.cfg.stop_on_mismatch {
                    Err(FsWorkloadError::Mismatch {
                        file: file(),
                        offset,
                        expected,
                        got,
                    })
                } else {
                    Ok(())
                }
            }
        }
    }

    pub fn verify_report(&self) -> VerifyReport {
        self.verify.get()
    }

    pub fn counters(&self) -> BTreeMap<String, u64> {
        self.counters.borrow().clone()
    }

    pub fn recorder(&self) -> Recorder {
        self.rec.borrow().clone()
    }

    /// Simulated length of the measured phase so far.
    pub fn measured_ns(&self) -> u64 {
        self.last_end
            .get()
            .0
            .saturating_sub(self.measure_from.get().0)
    }

    /// Runs `n` simulated threads of `body` and waits for all; the first error any of them
    /// meets stops the others and is returned.
    pub async fn run_threads<Fut>(
        self: &Rc<Self>,
        n: u32,
        body: impl Fn(u32) -> Fut,
    ) -> FsWorkloadResult<()>
    where
        Fut: Future<Output = Step> + 'static,
    {
        let mut handles = Vec::with_capacity(n as usize);
        for t in 0..n {
            let ctx = self.clone();
            let fut = body(t);
            handles.push(self.sim.spawn(async move {
                if let Err(Halt::Error(e)) = fut.await {
                    ctx.fail(e);
                }
            }));
        }
        for h in handles {
            h.await;
        }
        match self.take_error() {
            Some(e) => {
                self.stopped.set(true);
                Err(e)
            }
            None => Ok(()),
        }
    }
}

/// The error of a failed call `op` on `file`.
pub(crate) fn fs_err(op: &'static str, file: String, err: FsError) -> Halt {
    Halt::Error(FsWorkloadError::Fs { op, file, err })
}
