//! `zbench`: the zone-management benchmark of the characterization paper (seed 001 §III-E and
//! §III-G), whose custom SPDK benchmarks produced the real ZN540 measurements in
//! `../shared/data/zn540-measurements`.
//!
//! Every case follows the procedure of the paper's artifact, at QD1 through the SPDK host path:
//!
//! * `reset_occupancy`: explicitly open a zone, fill it to an occupancy level with sequential
//!   writes, idle 1 s (simulated), reset. Levels: 0, 1 LBA, 1/16, 1/8, 1/4, 1/2 and all of the
//!   zone capacity. Cases `reset_<lbas>`.
//! * `finish_occupancy`: the same fill for levels 0, 1 LBA, 1/16, 1/8, 1/4, 1/2 and capacity − 1,
//!   idle 1 s, finish (`finish_<lbas>`); after all zones of a level are finished they are reset
//!   back to back (`reset_finished_<lbas>`).
//! * `open_close`: fill a zone to capacity − 1 (implicitly opened by the writes, or after an
//!   explicit `open`), idle 1 s, close (`close_implicit` / `close`), idle 1 s, write the last LBA,
//!   which reopens the closed zone (`close_implicit_write` / `close_write`). `open` is the
//!   explicit open of an empty zone.
//! * `explicit_implicit_io`: 4 KiB writes and appends in explicitly opened zones
//!   (`write_explicit`, `append_explicit`) and in zones opened by the I/O itself: the first I/O
//!   (`write_implicit_opened`, `append_implicit_opened`) and the later ones (`write_implicit`,
//!   `append_implicit`).
//! * `reset_interference` (§III-G): resets of full zones in the first half of the device, issued
//!   by one simulated thread, while another issues QD1 4 KiB random reads, sequential writes or
//!   sequential appends to the second half and queues one more reset every 400 I/Os; the run ends
//!   when every queued zone is reset. Cases `reset_interference_<io>` and `<io>_interference`;
//!   `reset_no_interference` resets the same full zones back to back without concurrent I/O.
//!
//! Statistics are exact (nearest-rank percentiles over all samples). The report holds no wall
//! time: the same profile, options and seed give byte-identical JSON.

pub mod measurements;

use serde::Serialize;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use zonelab_device::{
    HostStack, IoCmd, IoDone, IoEngine, IoScheduler, Lba, Namespace, OwnedData, PayloadMode,
    Profile, ZoneAction, ZonedDevice,
};
use zonelab_sim::sync::Notify;
use zonelab_sim::{Nanos, Sim, SimRng};

/// Idle time between filling a zone and the measured management command (seed 001 §III-E: "we
/// pause for a second to let the device stabilize").
pub const IDLE: Nanos = Nanos::from_secs(1);

/// I/Os the interference thread issues per queued reset (the artifact's `reset_tresh`).
pub const INTERFERENCE_INTERVAL: u64 = 400;

/// The groups of cases, in the order they run.
pub const GROUPS: [&str; 5] = [
    "reset_occupancy",
    "finish_occupancy",
    "open_close",
    "explicit_implicit_io",
    "reset_interference",
];

/// What to run and how often.
#[derive(Clone, Debug, Serialize)]
pub struct ZbenchOptions {
    pub seed: u64,
    pub quick: bool,
    /// Zones per occupancy level for reset and finish, per variant for close.
    pub reps: u32,
    /// Full-zone resets per interference case (and of the no-I/O baseline): their p95 is what
    /// obs. 13 compares, and on the ZN540 only ~1 reset in 10 lands in the tail, so a p95
    /// needs a few dozen of them.
    pub interference_resets: u32,
    /// Zones per explicit/implicit I/O variant, and I/Os per zone.
    pub io_zones: u32,
    pub ios_per_zone: u64,
    /// Zones of the second half that the random reads of the interference run cover.
    pub read_zones: u32,
    /// LBAs per write when filling zones before a measured command (1 = 4 KiB, the paper's).
    pub fill_lbas: u64,
    /// Groups to run (all when empty).
    pub groups: Vec<String>,
}

impl ZbenchOptions {
    /// Full mode: 100 zones per level (the paper used ~900 per run; 100 give stable p95s),
    /// fills with 4 KiB writes as the paper did.
    pub fn full(seed: u64) -> ZbenchOptions {
        ZbenchOptions {
            seed,
            quick: false,
            reps: 100,
            interference_resets: 100,
            io_zones: 100,
            ios_per_zone: 1000,
            read_zones: 16,
            fill_lbas: 1,
            groups: Vec::new(),
        }
    }

    /// Quick mode: a few zones per case and fills with 128 KiB writes (the zone state a fill
    /// leaves after the idle second does not depend on the write size in the model).
    pub fn quick(seed: u64) -> ZbenchOptions {
        ZbenchOptions {
            seed,
            quick: true,
            reps: 5,
            interference_resets: 40,
            io_zones: 8,
            ios_per_zone: 200,
            read_zones: 2,
            fill_lbas: 32,
            groups: Vec::new(),
        }
    }

    fn runs(&self, group: &str) -> bool {
        self.groups.is_empty() || self.groups.iter().any(|g| g == group)
    }
}

/// Latency statistics of one case, in nanoseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatStats {
    pub count: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl LatStats {
    /// Exact statistics; nearest-rank percentiles. None for no samples.
    pub fn from_samples(samples: &[u64]) -> Option<LatStats> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_unstable();
        let n = s.len();
        let rank = |q: f64| s[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        let sum: u128 = s.iter().map(|&v| v as u128).sum();
        Some(LatStats {
            count: n as u64,
            mean_ns: sum as f64 / n as f64,
            p50_ns: rank(0.50),
            p95_ns: rank(0.95),
            p99_ns: rank(0.99),
            min_ns: s[0],
            max_ns: s[n - 1],
        })
    }
}

/// One measured case.
#[derive(Clone, Debug, Serialize)]
pub struct CaseResult {
    /// The label the paper's artifact prints for this case (e.g. `reset_17232`).
    pub name: String,
    pub group: String,
    /// The measured command: reset, finish, open, close, write, append, read.
    pub op: String,
    /// LBAs written to the zone before the measured command, for occupancy cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub occupancy_lbas: Option<u64>,
    #[serde(flatten)]
    pub stats: LatStats,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceInfo {
    pub zones: u32,
    pub zone_size_lbas: u64,
    pub zone_capacity_lbas: u64,
    pub lba_size: u64,
    pub max_active: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct SimInfo {
    pub simulated_ns: u64,
    pub commands: u64,
}

/// The benchmark's result (`zonelab zbench -o json`).
#[derive(Clone, Debug, Serialize)]
pub struct ZbenchReport {
    pub benchmark: String,
    pub profile: String,
    pub options: ZbenchOptions,
    pub device: DeviceInfo,
    pub cases: Vec<CaseResult>,
    pub sim: SimInfo,
}

impl ZbenchReport {
    pub fn case(&self, name: &str) -> Option<&CaseResult> {
        self.cases.iter().find(|c| c.name == name)
    }
}

/// Occupancy levels of the reset cases: 0, 1 LBA, 1/16, 1/8, 1/4, 1/2, all of `cap`.
pub fn reset_levels(cap: u64) -> Vec<u64> {
    dedup(vec![0, 1, cap / 16, cap / 8, cap / 4, cap / 2, cap])
}

/// Occupancy levels of the finish cases: 0, 1 LBA, 1/16, 1/8, 1/4, 1/2, `cap` − 1.
pub fn finish_levels(cap: u64) -> Vec<u64> {
    dedup(vec![0, 1, cap / 16, cap / 8, cap / 4, cap / 2, cap - 1])
}

fn dedup(mut v: Vec<u64>) -> Vec<u64> {
    v.dedup();
    v
}

/// Samples by case name, plus the case's metadata, in first-recorded order.
#[derive(Default)]
struct Recorder {
    order: Vec<(String, String, String, Option<u64>)>,
    samples: BTreeMap<String, Vec<u64>>,
}

impl Recorder {
    fn add(&mut self, name: &str, group: &str, op: &str, occ: Option<u64>, ns: Nanos) {
        if !self.samples.contains_key(name) {
            self.order.push((name.into(), group.into(), op.into(), occ));
        }
        self.samples.entry(name.into()).or_default().push(ns.0);
    }
}

/// The benchmark's view of the device: the host stack, zone geometry and the recorder.
struct Bench {
    sim: Sim,
    stack: Rc<HostStack>,
    zone_size: u64,
    cap: u64,
    first_zone: u32,
    zones: u32,
    fill_lbas: u64,
    fingerprint: Cell<u64>,
    commands: Cell<u64>,
    rec: RefCell<Recorder>,
}

type BResult<T> = Result<T, String>;

impl Bench {
    fn zslba(&self, zone: u32) -> Lba {
        Lba(zone as u64 * self.zone_size)
    }

    fn data(&self, nlb: u64) -> OwnedData {
        let f = self.fingerprint.get();
        self.fingerprint.set(f + nlb);
        OwnedData::Fingerprints(
            (f..f + nlb)
                .map(|x| x.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
                .collect(),
        )
    }

    async fn cmd(&self, cmd: IoCmd, what: &str) -> BResult<IoDone> {
        self.commands.set(self.commands.get() + 1);
        let d = self.stack.submit(cmd).await;
        match d.status {
            Ok(_) => Ok(d),
            Err(s) => Err(format!("{what} failed: {s:?}")),
        }
    }

    async fn mgmt(&self, action: ZoneAction, zone: u32) -> BResult<Nanos> {
        let d = self
            .cmd(
                IoCmd::ZoneMgmt {
                    action,
                    zslba: self.zslba(zone),
                    select_all: false,
                },
                &format!("{action:?} of zone {zone}"),
            )
            .await?;
        Ok(d.lat())
    }

    async fn write(&self, zone: u32, off: u64, nlb: u64) -> BResult<Nanos> {
        let slba = Lba(self.zslba(zone).0 + off);
        let data = self.data(nlb);
        let d = self
            .cmd(
                IoCmd::Write { slba, data },
                &format!("write of {nlb} LBAs at zone {zone} + {off}"),
            )
            .await?;
        Ok(d.lat())
    }

    async fn append(&self, zone: u32, nlb: u64) -> BResult<Nanos> {
        let zslba = self.zslba(zone);
        let data = self.data(nlb);
        let d = self
            .cmd(
                IoCmd::Append { zslba, data },
                &format!("append of {nlb} LBAs to zone {zone}"),
            )
            .await?;
        Ok(d.lat())
    }

    async fn read(&self, lba: Lba) -> BResult<Nanos> {
        let d = self
            .cmd(
                IoCmd::Read {
                    slba: lba,
                    nlb: 1,
                    want_data: false,
                },
                &format!("read of LBA {}", lba.0),
            )
            .await?;
        Ok(d.lat())
    }

    /// Sequential writes of LBAs `from..to` of `zone`, `fill_lbas` at a time (not measured).
    async fn fill(&self, zone: u32, from: u64, to: u64) -> BResult<()> {
        let mut off = from;
        while off < to {
            let n = self.fill_lbas.min(to - off);
            self.write(zone, off, n).await?;
            off += n;
        }
        Ok(())
    }

    async fn idle(&self) {
        self.sim.sleep(IDLE).await;
    }

    fn record(&self, name: &str, group: &str, op: &str, occ: Option<u64>, ns: Nanos) {
        self.rec.borrow_mut().add(name, group, op, occ, ns);
    }

    /// The `i`-th zone of the benchmark's rotation over the sequential zones.
    fn zone(&self, i: u64) -> u32 {
        self.first_zone + (i % self.zones as u64) as u32
    }
}

/// Runs the benchmark on a fresh device of `profile`.
pub fn run(profile: &Profile, opts: &ZbenchOptions) -> Result<ZbenchReport, String> {
    run_with_progress(profile, opts, &mut |_| {})
}

/// [`run`], calling `progress` with each group's name before it starts.
pub fn run_with_progress(
    profile: &Profile,
    opts: &ZbenchOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<ZbenchReport, String> {
    for g in &opts.groups {
        if !GROUPS.contains(&g.as_str()) {
            return Err(format!(
                "unknown case group '{g}': use one of {}",
                GROUPS.join(", ")
            ));
        }
    }
    if opts.fill_lbas == 0 {
        return Err("fill size must be at least one LBA".into());
    }
    let dev = ZonedDevice::new(profile.clone(), PayloadMode::Fingerprint)
        .map_err(|e| format!("profile {}: {e}", profile.name))?;
    let geom = *dev.zones().geometry();
    let first_zone = geom.conventional_zones;
    let zones = geom.zones - geom.conventional_zones;
    if zones < 4 {
        return Err(format!(
            "zbench needs at least 4 sequential zones; the profile has {zones}"
        ));
    }
    let lba_size = dev.lba_size();
    let max_fill = dev.buffer_limit();
    let device = DeviceInfo {
        zones,
        zone_size_lbas: geom.zone_size,
        zone_capacity_lbas: geom.zone_capacity,
        lba_size,
        max_active: geom.max_active,
    };
    let dev = Rc::new(RefCell::new(Namespace::Zoned(dev)));
    let sim = Sim::new();
    let stack = HostStack::new(sim.clone(), dev, IoEngine::Spdk, IoScheduler::None)?;
    let bench = Rc::new(Bench {
        sim: sim.clone(),
        stack,
        zone_size: geom.zone_size,
        cap: geom.zone_capacity,
        first_zone,
        zones,
        fill_lbas: opts.fill_lbas.min(max_fill),
        fingerprint: Cell::new(1),
        commands: Cell::new(0),
        rec: RefCell::new(Recorder::default()),
    });
    let mut opts = opts.clone();
    // Distinct zones per level (finish) and per half (interference).
    opts.reps = opts.reps.clamp(1, zones / 2);
    opts.interference_resets = opts.interference_resets.clamp(1, zones / 2);
    opts.read_zones = opts.read_zones.clamp(1, zones - zones / 2);
    opts.io_zones = opts.io_zones.max(1);
    opts.ios_per_zone = opts.ios_per_zone.clamp(2, geom.zone_capacity);
    for group in GROUPS {
        if !opts.runs(group) {
            continue;
        }
        progress(group);
        let b = bench.clone();
        let o = opts.clone();
        let out = sim
            .block_on(async move {
                match group {
                    "reset_occupancy" => reset_occupancy(&b, &o).await,
                    "finish_occupancy" => finish_occupancy(&b, &o).await,
                    "open_close" => open_close(&b, &o).await,
                    "explicit_implicit_io" => explicit_implicit_io(&b, &o).await,
                    _ => reset_interference(&b, &o).await,
                }
            })
            .map_err(|e| format!("{group}: simulation deadlock: {e:?}"))?;
        out.map_err(|e| format!("{group}: {e}"))?;
    }
    let rec = bench.rec.borrow();
    let cases = rec
        .order
        .iter()
        .map(|(name, group, op, occ)| CaseResult {
            name: name.clone(),
            group: group.clone(),
            op: op.clone(),
            occupancy_lbas: *occ,
            stats: LatStats::from_samples(&rec.samples[name]).expect("recorded cases have samples"),
        })
        .collect();
    Ok(ZbenchReport {
        benchmark: "zbench".into(),
        profile: profile.name.clone(),
        options: opts,
        device,
        cases,
        sim: SimInfo {
            simulated_ns: sim.now().0,
            commands: bench.commands.get(),
        },
    })
}

/// §III-E, Fig. 5a: reset latency by occupancy.
async fn reset_occupancy(b: &Rc<Bench>, o: &ZbenchOptions) -> BResult<()> {
    let mut next = 0u64;
    for lbas in reset_levels(b.cap) {
        let name = format!("reset_{lbas}");
        for _ in 0..o.reps {
            let z = b.zone(next);
            next += 1;
            b.mgmt(ZoneAction::Open, z).await?;
            b.fill(z, 0, lbas).await?;
            b.idle().await;
            let lat = b.mgmt(ZoneAction::Reset, z).await?;
            b.record(&name, "reset_occupancy", "reset", Some(lbas), lat);
        }
    }
    Ok(())
}

/// §III-E, Fig. 5b: finish latency by occupancy, then the reset of the finished zones.
async fn finish_occupancy(b: &Rc<Bench>, o: &ZbenchOptions) -> BResult<()> {
    let mut next = 0u64;
    for lbas in finish_levels(b.cap) {
        let zones: Vec<u32> = (0..o.reps)
            .map(|_| {
                next += 1;
                b.zone(next - 1)
            })
            .collect();
        for &z in &zones {
            b.mgmt(ZoneAction::Open, z).await?;
            b.fill(z, 0, lbas).await?;
            b.idle().await;
            let lat = b.mgmt(ZoneAction::Finish, z).await?;
            b.record(
                &format!("finish_{lbas}"),
                "finish_occupancy",
                "finish",
                Some(lbas),
                lat,
            );
        }
        for &z in &zones {
            let lat = b.mgmt(ZoneAction::Reset, z).await?;
            b.record(
                &format!("reset_finished_{lbas}"),
                "finish_occupancy",
                "reset",
                Some(lbas),
                lat,
            );
        }
    }
    Ok(())
}

/// §III-E obs. 9: close of a zone written to capacity − 1, and the write that reopens it.
async fn open_close(b: &Rc<Bench>, o: &ZbenchOptions) -> BResult<()> {
    let g = "open_close";
    let mut next = 0u64;
    for explicit in [false, true] {
        let (close, write) = if explicit {
            ("close", "close_write")
        } else {
            ("close_implicit", "close_implicit_write")
        };
        let mut used = Vec::new();
        for _ in 0..o.reps {
            let z = b.zone(next);
            next += 1;
            used.push(z);
            if explicit {
                let lat = b.mgmt(ZoneAction::Open, z).await?;
                b.record("open", g, "open", None, lat);
            }
            b.fill(z, 0, b.cap - 1).await?;
            b.idle().await;
            let lat = b.mgmt(ZoneAction::Close, z).await?;
            b.record(close, g, "close", None, lat);
            b.idle().await;
            let lat = b.write(z, b.cap - 1, 1).await?;
            b.record(write, g, "write", None, lat);
        }
        for z in used {
            b.mgmt(ZoneAction::Reset, z).await?;
        }
    }
    Ok(())
}

/// §III-E obs. 9: 4 KiB writes and appends in explicitly and implicitly opened zones.
async fn explicit_implicit_io(b: &Rc<Bench>, o: &ZbenchOptions) -> BResult<()> {
    let g = "explicit_implicit_io";
    let mut next = 0u64;
    for append in [false, true] {
        let op = if append { "append" } else { "write" };
        for explicit in [true, false] {
            for _ in 0..o.io_zones {
                let z = b.zone(next);
                next += 1;
                if explicit {
                    let lat = b.mgmt(ZoneAction::Open, z).await?;
                    b.record("open", "open_close", "open", None, lat);
                }
                for i in 0..o.ios_per_zone {
                    let lat = if append {
                        b.append(z, 1).await?
                    } else {
                        b.write(z, i, 1).await?
                    };
                    let name = match (explicit, i) {
                        (true, _) => format!("{op}_explicit"),
                        (false, 0) => format!("{op}_implicit_opened"),
                        (false, _) => format!("{op}_implicit"),
                    };
                    b.record(&name, g, op, None, lat);
                }
                // Not measured: frees the zone's active slot for the next one.
                b.mgmt(ZoneAction::Reset, z).await?;
            }
        }
    }
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum IoKind {
    Read,
    Write,
    Append,
}

/// §III-G, Fig. 7: reset latency with and without concurrent I/O, and that I/O's latency.
async fn reset_interference(b: &Rc<Bench>, o: &ZbenchOptions) -> BResult<()> {
    let half = b.zones / 2;
    let n = o.interference_resets.min(half);
    // Baseline: full zones reset back to back (the artifact's pure_reset).
    for i in 0..n {
        b.fill(b.zone(i as u64), 0, b.cap).await?;
    }
    for i in 0..n {
        let lat = b.mgmt(ZoneAction::Reset, b.zone(i as u64)).await?;
        b.record(
            "reset_no_interference",
            "reset_interference",
            "reset",
            None,
            lat,
        );
    }
    for kind in [IoKind::Read, IoKind::Write, IoKind::Append] {
        interference_run(b, o, kind, n, half).await?;
    }
    Ok(())
}

async fn interference_run(
    b: &Rc<Bench>,
    o: &ZbenchOptions,
    kind: IoKind,
    n: u32,
    half: u32,
) -> BResult<()> {
    let g = "reset_interference";
    let io = match kind {
        IoKind::Read => "read",
        IoKind::Write => "write",
        IoKind::Append => "append",
    };
    let io_zones = b.zones - half;
    for i in 0..n {
        b.fill(b.zone(i as u64), 0, b.cap).await?;
    }
    if kind == IoKind::Read {
        for i in 0..o.read_zones {
            b.fill(b.zone((half + i) as u64), 0, b.cap).await?;
        }
    }
    b.idle().await;

    let queued = Rc::new(Cell::new(0u32));
    let finished = Rc::new(Cell::new(false));
    let wake = Notify::new();
    let reset_name = format!("reset_interference_{io}");
    let resetter = {
        let (b, queued, finished, wake) =
            (b.clone(), queued.clone(), finished.clone(), wake.clone());
        b.sim.clone().spawn(async move {
            for k in 0..n {
                while queued.get() <= k {
                    wake.notified().await;
                }
                let lat = b.mgmt(ZoneAction::Reset, b.zone(k as u64)).await?;
                b.record(&reset_name, g, "reset", None, lat);
            }
            finished.set(true);
            Ok::<(), String>(())
        })
    };

    let mut rng = SimRng::stream(o.seed, 0x5a + kind as u64);
    let mut count = 0u64;
    let mut zone_i = 0u32; // index into the second half
    let mut off = 0u64; // next LBA of the current zone (write/append)
    let mut touched = vec![half];
    if kind != IoKind::Read {
        b.mgmt(ZoneAction::Open, b.zone(half as u64)).await?;
    }
    let io_name = format!("{io}_interference");
    while !finished.get() {
        let lat = match kind {
            IoKind::Read => {
                let z = b.zone((half + rng.below(o.read_zones as u64) as u32) as u64);
                let lba = Lba(b.zslba(z).0 + rng.below(b.cap));
                b.read(lba).await?
            }
            IoKind::Write | IoKind::Append => {
                if off == b.cap {
                    // Next zone of the second half (wraps only on small devices).
                    zone_i = (zone_i + 1) % io_zones;
                    off = 0;
                    let z = b.zone((half + zone_i) as u64);
                    if touched.contains(&(half + zone_i)) {
                        b.mgmt(ZoneAction::Reset, z).await?;
                    } else {
                        touched.push(half + zone_i);
                    }
                    b.mgmt(ZoneAction::Open, z).await?;
                }
                let z = b.zone((half + zone_i) as u64);
                off += 1;
                if kind == IoKind::Write {
                    b.write(z, off - 1, 1).await?
                } else {
                    b.append(z, 1).await?
                }
            }
        };
        b.record(&io_name, g, io, None, lat);
        count += 1;
        if count % INTERFERENCE_INTERVAL == 1 && queued.get() < n {
            queued.set(queued.get() + 1);
            wake.notify_one();
        }
    }
    resetter.await?;
    // Not measured: leave the second half empty for the next run.
    if kind != IoKind::Read {
        for z in touched {
            b.mgmt(ZoneAction::Reset, b.zone(z as u64)).await?;
        }
    } else {
        for i in 0..o.read_zones {
            b.mgmt(ZoneAction::Reset, b.zone((half + i) as u64)).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Profile {
        let sets: Vec<(String, String)> = [
            ("zones", "16"),
            ("zone_size", "8MiB"),
            ("pages_per_block", "8"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        Profile::load("zn540", &sets).expect("small zn540")
    }

    #[test]
    fn stats_are_exact_nearest_rank() {
        let s: Vec<u64> = (1..=100).collect();
        let st = LatStats::from_samples(&s).unwrap();
        assert_eq!(
            (st.p50_ns, st.p95_ns, st.p99_ns, st.min_ns, st.max_ns),
            (50, 95, 99, 1, 100)
        );
        assert_eq!(st.mean_ns, 50.5);
        assert!(LatStats::from_samples(&[]).is_none());
    }

    #[test]
    fn levels_of_the_zn540() {
        assert_eq!(
            reset_levels(275_712),
            vec![0, 1, 17_232, 34_464, 68_928, 137_856, 275_712]
        );
        assert_eq!(
            finish_levels(275_712),
            vec![0, 1, 17_232, 34_464, 68_928, 137_856, 275_711]
        );
    }

    #[test]
    fn quick_run_on_a_small_device_is_deterministic_and_complete() {
        let p = small();
        let mut o = ZbenchOptions::quick(7);
        o.reps = 3;
        o.interference_resets = 3;
        let a = run(&p, &o).expect("runs");
        let b = run(&p, &o).expect("runs");
        let ja = serde_json::to_string(&a).unwrap();
        assert_eq!(ja, serde_json::to_string(&b).unwrap());
        for name in [
            "reset_0",
            "reset_1",
            "finish_1",
            "reset_finished_1",
            "open",
            "close",
            "close_write",
            "close_implicit",
            "close_implicit_write",
            "write_explicit",
            "write_implicit",
            "write_implicit_opened",
            "append_explicit",
            "append_implicit",
            "append_implicit_opened",
            "reset_no_interference",
            "reset_interference_read",
            "read_interference",
            "reset_interference_write",
            "write_interference",
            "reset_interference_append",
            "append_interference",
        ] {
            assert!(a.case(name).is_some(), "case {name} missing");
        }
        let cap = a.device.zone_capacity_lbas;
        assert_eq!(a.case(&format!("reset_{cap}")).unwrap().stats.count, 3);
        for c in &a.cases {
            assert!(c.stats.min_ns > 0, "{} has a zero latency", c.name);
        }
    }
}
