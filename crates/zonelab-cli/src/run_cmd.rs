//! `zonelab run EXPERIMENT.toml`: one file-system experiment (device profile, policy, workload,
//! seed, length) with its result JSON in DESIGN.md's schema.

use anyhow::{Context, Result, anyhow};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{Value, json};
use std::cell::{Cell, RefCell};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;
use zonelab_cli::experiment::{Plan, parse_experiment};
use zonelab_device::{HostStack, IoEngine, Namespace};
use zonelab_flash::BUSY_BUCKET;
use zonelab_lfs::dev::Devices;
use zonelab_lfs::fs::{Fs, FsStats};
use zonelab_lfs::gc_log::GcEvent;
use zonelab_lfs::policy::{HsrProfile, VictimKind};
use zonelab_lfs::{FileSystem, FsError};
use zonelab_sim::{Nanos, Sim};
use zonelab_workload::fs::{FsWorkloadError, MeasureHook, WarmGate};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Experiment file (TOML; see experiments/ and DESIGN.md "Experiment and result schema").
    experiment: PathBuf,
    /// Override a key of the experiment, e.g. --set fs.policy=f2fs --set device.set.zones=64
    /// --set workload.params.nfiles=1000 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Where to write the result JSON (default: result.json).
    #[arg(long, short = 'o', default_value = "result.json")]
    output: PathBuf,
    /// Also write the file system's reclamation log here, one JSON object a line: every
    /// compaction (victim, method, blocks, phases), every choice between threaded logging and
    /// compaction with the costs hybrid segment recycling weighed, and every periodic
    /// checkpoint, with simulated times; `measured` marks the events of the measured window.
    #[arg(long, value_name = "FILE")]
    gc_log: Option<PathBuf>,
}

/// Samples taken every 100 simulated ms over the whole run (setup included).
#[derive(Default)]
struct Timeline {
    free_segments: Vec<u64>,
    mb_per_sec: Vec<f64>,
    /// Share of the dies' time spent on flash operations (seed 000 Fig. 10).
    chip_utilization: Vec<f64>,
}

/// The cumulative counters a result reports for its measured window.
pub(crate) fn counters(stats: &FsStats, ns: &Namespace, companion: Option<&Namespace>) -> Value {
    let mut v = json!({
        "traffic": stats.traffic,
        "fs": {
            "checkpoints": stats.checkpoints, "zones_cleaned": stats.zones_cleaned,
            "foreground_cleanings": stats.foreground_cleanings,
            "background_cleanings": stats.background_cleanings,
            "blocks_moved": stats.blocks_moved,
            "zones_cleaned_in_device": stats.zones_cleaned_in_device,
            "zones_cleaned_by_log": stats.zones_cleaned_by_log,
            "blocks_copied_in_device": stats.blocks_copied_in_device,
            "device_copy_full_chunk_blocks": stats.device_copy_full_chunk_blocks,
            "device_copy_copyback_blocks": stats.device_copy_copyback_blocks,
            "periodic_checkpoints": stats.periodic_checkpoints,
            "threaded": stats.threaded,
            "hsr": stats.hsr,
        },
        "device": ns.counters(),
        "flash": ns.flash_counters(),
        "znsplus": ns.zoned().map(|d| d.znsplus_counters()).unwrap_or_default(),
    });
    if let Some(c) = companion {
        v["companion"] = json!({
            "device": c.counters(),
            "flash": c.flash_counters(),
            "ftl": c.gc_counters(),
        });
    }
    v
}

/// The counter sections of a result — `traffic_bytes`, `gc` (without `compaction_ns`),
/// `device` (without `chip_utilization_mean`) and `fs.checkpoints` — from a [`counters`]
/// snapshot, or the difference of two. `zonelab stats` shows a mount's live counters under the
/// same names.
pub(crate) fn counter_sections(w: &Value, segs_per_zone: u64) -> Value {
    let n = |section: &str, key: &str| w[section][key].as_u64().unwrap_or(0);
    let n2 = |section: &str, sub: &str, key: &str| w[section][sub][key].as_u64().unwrap_or(0);
    // Hybrid segment recycling's alpha and beta over the window (null before an observation).
    let hsr: HsrProfile = serde_json::from_value(w["fs"]["hsr"].clone()).unwrap_or_default();
    json!({
        "traffic_bytes": {
            "user_write": n("traffic", "user_write"), "user_read": n("traffic", "user_read"),
            "node": n("traffic", "node"), "meta": n("traffic", "meta"),
            "checkpoint": n("traffic", "checkpoint"), "gc_host_read": n("traffic", "gc_host_read"),
            "gc_host_write": n("traffic", "gc_host_write"),
            "device_copy": n("traffic", "gc_device_copy"),
            "plugging": (n("znsplus", "plugged_blocks_background") + n("znsplus", "plugged_blocks_on_demand")) * 4096,
        },
        "gc": {
            "segments_cleaned": n("fs", "zones_cleaned") * segs_per_zone,
            "zones_cleaned": n("fs", "zones_cleaned"),
            "foreground": n("fs", "foreground_cleanings"),
            "background": n("fs", "background_cleanings"),
            "blocks_moved": n("fs", "blocks_moved"),
            "by_method": {
                "host_copy": n("fs", "zones_cleaned") - n("fs", "zones_cleaned_in_device"),
                "izc": n("fs", "zones_cleaned_in_device"),
                "zone_md": 0, "threaded_logging": n2("fs", "threaded", "tl_opens"),
            },
            // The zones cleaned, by the log that wrote each (threaded logging never reopens the
            // cold data log's: that log takes a free zone whenever compaction's moves fill its
            // own).
            "by_victim_log": w["fs"]["zones_cleaned_by_log"],
            "threaded_logging": {
                "blocks_written": n2("fs", "threaded", "tl_blocks"),
                "blocks_skipped": n2("fs", "threaded", "skipped_blocks"),
                "blocks_skipped_pre_invalid": n2("fs", "threaded", "skipped_pre_invalid"),
                "compaction_preferred": n2("fs", "threaded", "compaction_preferred"),
                // Why (the first that holds): B_cold decided it, the victim was another log's
                // zone, or the log's own that threaded logging passed over for its pre-invalid
                // blocks, or one it could not take then.
                "compaction_preferred_for": w["fs"]["threaded"]["compaction_preferred_for"],
                "unweighed": n2("fs", "threaded", "unweighed"),
                "periodic_checkpoints": n("fs", "periodic_checkpoints"),
                "alpha_data": hsr.alpha(VictimKind::Data),
                "alpha_node": hsr.alpha(VictimKind::Node),
                "beta": hsr.beta.beta(),
                // What beta came from: blocks cold at a zone's previous TL_open (and those the
                // log wrote since), and how many of them were still valid at its next one.
                "beta_observed": hsr.beta,
            },
            "blocks_copied_in_device": n("fs", "blocks_copied_in_device"),
            // Of those, the blocks in fully valid source chunks (the most copyback can move)
            // and the blocks the allocation placed for copyback (seed 000 §3.3.1).
            "blocks_in_fully_valid_chunks": n("fs", "device_copy_full_chunk_blocks"),
            "blocks_placed_for_copyback": n("fs", "device_copy_copyback_blocks"),
        },
        "device": {
            "flash_reads": n("flash", "reads"), "flash_programs": n("flash", "programs"),
            "erases": n("flash", "erases"), "copybacks": n("flash", "copybacks"),
            "readprogram_copies": n("znsplus", "readprogram_copies"),
            "copyback_blocks": n("znsplus", "copyback_blocks"),
            "readprogram_blocks": n("znsplus", "readprogram_blocks"),
            "copyback_limit_hits": n("znsplus", "copyback_limit_hits"),
            "zone_compactions": n("znsplus", "compactions"),
            "tl_opens": n("znsplus", "tl_opens"),
            "plugged_blocks_background": n("znsplus", "plugged_blocks_background"),
            "plugged_blocks_on_demand": n("znsplus", "plugged_blocks_on_demand"),
            "zone_resets": n("device", "zone_resets"), "zone_finishes": n("device", "zone_finishes"),
            "padded_pages": n("device", "padded_pages"),
        },
        "fs": { "checkpoints": n("fs", "checkpoints") },
    })
}

/// `end - start` for every counter of two [`counters`] snapshots.
fn delta(end: &Value, start: &Value) -> Value {
    match (end, start) {
        (Value::Object(e), Value::Object(s)) => Value::Object(
            e.iter()
                .map(|(k, v)| (k.clone(), delta(v, s.get(k).unwrap_or(&Value::Null))))
                .collect(),
        ),
        (Value::Number(e), s) => json!(
            e.as_u64()
                .unwrap_or(0)
                .saturating_sub(s.as_u64().unwrap_or(0))
        ),
        (e, _) => e.clone(),
    }
}

/// Share of the dies' time busy with flash operations per 100 ms, from the device's busy log
/// (10 ms buckets summed over `dies`), for `buckets` buckets.
fn chip_utilization(log: &[u64], dies: u32, buckets: usize) -> Vec<f64> {
    let per = (Nanos::from_ms(100).0 / BUSY_BUCKET.0) as usize;
    (0..buckets)
        .map(|b| {
            let busy: u64 = log.iter().skip(b * per).take(per).sum();
            busy as f64 / (dies as f64 * Nanos::from_ms(100).0 as f64)
        })
        .collect()
}

fn mean(v: impl Iterator<Item = u64>) -> u64 {
    let (s, n) = v.fold((0u128, 0u64), |(s, n), x| (s + x as u128, n + 1));
    if n == 0 { 0 } else { (s / n as u128) as u64 }
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let text = zonelab_device::profile::read_text(&a.experiment)
        .with_context(|| format!("cannot read experiment {}", a.experiment.display()))?;
    // The log's file is opened first, so a path that cannot be written fails before the run;
    // an existing file keeps its contents until the run has succeeded, and a file opened here
    // is removed if it fails.
    let gc_log = a
        .gc_log
        .as_ref()
        .map(|path| {
            let existed = path.exists();
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map(|f| (path, f, existed))
                .with_context(|| format!("cannot write the reclamation log {}", path.display()))
        })
        .transpose()?;
    let o = match execute(&text, &a.experiment.display().to_string(), &a.set) {
        Ok(o) => o,
        Err(e) => {
            if let Some((path, _, false)) = &gc_log {
                let _ = std::fs::remove_file(path);
            }
            return Err(e);
        }
    };
    let json = serde_json::to_string_pretty(&o.result)?;
    std::fs::write(&a.output, json + "\n")
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    if let Some((path, mut file, _)) = gc_log {
        use std::io::Write;
        let lines = gc_log_lines(&o.gc_log, &o.gc_log_measured)?;
        file.set_len(0)
            .and_then(|()| file.write_all(lines.as_bytes()))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    println!("{}", o.summary);
    println!(
        "{:.1} s wall for {:.1} simulated s; result: {}",
        o.wall.total_s,
        o.wall.simulated_s,
        a.output.display()
    );
    Ok(if o.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

/// The reclamation log as JSON lines, each event with `measured`: whether it falls in the
/// measured window (its index in `measured`).
fn gc_log_lines(log: &[GcEvent], measured: &std::ops::Range<usize>) -> Result<String> {
    #[derive(serde::Serialize)]
    struct Line<'a> {
        #[serde(flatten)]
        event: &'a GcEvent,
        measured: bool,
    }
    let mut out = String::new();
    for (i, event) in log.iter().enumerate() {
        out += &serde_json::to_string(&Line {
            event,
            measured: measured.contains(&i),
        })?;
        out.push('\n');
    }
    Ok(out)
}

/// Wall-clock figures of one experiment (printed, never part of the result JSON).
pub struct Wall {
    /// The whole run: mkfs, fileset, warm-up, measured phase, final sync and fsck.
    pub total_s: f64,
    pub simulated_s: f64,
    /// The measured phase alone.
    pub measured_s: f64,
    pub measured_simulated_s: f64,
}

/// What one experiment produced.
pub struct Outcome {
    /// The result JSON (DESIGN.md "Experiment and result schema").
    pub result: Value,
    /// Two lines for the console: throughput, then write amplification, cleaning, checks.
    pub summary: String,
    /// Every read verified and fsck clean.
    pub ok: bool,
    pub wall: Wall,
    /// The file system's reclamation log over the whole run, and the events of the measured
    /// window in it.
    pub gc_log: Vec<GcEvent>,
    pub gc_log_measured: std::ops::Range<usize>,
}

/// Runs the experiment in TOML `text` (named `origin` in errors) with `KEY=VALUE` overrides,
/// with a spinner on a terminal.
pub fn execute(text: &str, origin: &str, sets: &[String]) -> Result<Outcome> {
    execute_with(text, origin, sets, true)
}

/// [`execute`] without the spinner (for callers that show their own progress).
pub fn execute_quiet(text: &str, origin: &str, sets: &[String]) -> Result<Outcome> {
    execute_with(text, origin, sets, false)
}

fn execute_with(text: &str, origin: &str, sets: &[String], spinner: bool) -> Result<Outcome> {
    let Plan {
        exp,
        payload,
        fmt,
        profile,
        added,
        companion_profile,
        policy: policy_box,
        workload: w,
        warmup_cleaned,
        warmup_written,
        warmup_limit,
        opts,
        cfg,
    } = parse_experiment(text, origin, sets)?;

    let sim = Sim::new();
    let page = profile.geometry.page_size.0;
    let ns = Namespace::new(profile.clone(), payload)?.shared();
    let stack = HostStack::new(
        sim.clone(),
        ns.clone(),
        IoEngine::IoUring,
        exp.host.scheduler,
    )
    .map_err(|e| anyhow!(e))?;
    let companion = match &companion_profile {
        Some(p) => {
            let cns = Namespace::new(p.clone(), payload)
                .context("device.companion")?
                .shared();
            let cstack = HostStack::new(
                sim.clone(),
                cns.clone(),
                IoEngine::IoUring,
                exp.host.scheduler,
            )
            .map_err(|e| anyhow!(e))?;
            Some((cns, cstack))
        }
        None => None,
    };
    let devices = match &companion {
        Some((_, c)) => Devices::with_companion(stack.clone(), c.clone()),
        None => Devices::from(stack.clone()),
    };
    let cns = companion.as_ref().map(|(n, _)| n.clone());
    let bar = (spinner && std::io::stderr().is_terminal()).then(|| {
        let b = ProgressBar::new_spinner();
        b.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        b
    });
    let timeline = Rc::new(RefCell::new(Timeline::default()));
    let window_start: Rc<RefCell<Option<(Nanos, Value, usize)>>> = Rc::new(RefCell::new(None));
    let done = Rc::new(Cell::new(false));
    let (s, st, tl, dn, b2, ns2, ws, cns2) = (
        sim.clone(),
        devices,
        timeline.clone(),
        done.clone(),
        bar.clone(),
        ns.clone(),
        window_start.clone(),
        cns.clone(),
    );
    let mut cfg = cfg;
    let wall = Instant::now();
    let wall_at_window = Rc::new(Cell::new(None::<Instant>));
    let end_wall = Rc::new(Cell::new(wall));
    let (ww, ew) = (wall_at_window.clone(), end_wall.clone());
    let outcome = sim
        .block_on(async move {
            let fs = Rc::new(Fs::mkfs(s.clone(), st, fmt, opts, policy_box).await?);
            {
                let (fs, s2, ns, cns) = (fs.clone(), s.clone(), ns2.clone(), cns2.clone());
                cfg.on_measure = Some(MeasureHook(Rc::new(move || {
                    let stats = fs.stats();
                    let c = cns.as_ref().map(|c| c.borrow());
                    let snapshot = counters(&stats, &ns.borrow(), c.as_deref());
                    *ws.borrow_mut() = Some((s2.now(), snapshot, fs.gc_log_len()));
                    ww.set(Some(Instant::now()));
                })));
            }
            let cleaned = warmup_cleaned.filter(|&n| n > 0);
            let written = warmup_written.filter(|&n| n > 0);
            let asked: Vec<String> = [
                cleaned
                    .map(|n| format!("the file system to reclaim {n} zones (run.warmup_cleaned)")),
                written.map(|b| format!("the workload to write {b} bytes (run.warmup_written)")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !asked.is_empty() {
                let (fs, first) = (fs.clone(), Rc::new(Cell::new(None::<(u64, u64)>)));
                cfg.warm_until = Some(WarmGate {
                    // Counted from the end of `warmup` (the first check): what happened while
                    // the fileset was built does not make the run warm. Zones are reclaimed
                    // either way: cleaned, or reopened by threaded logging (znsplus), so every
                    // policy warms up alike.
                    ready: Rc::new(move || {
                        let st = fs.stats();
                        let now = (
                            st.zones_cleaned + st.threaded.tl_opens,
                            st.traffic.user_write,
                        );
                        let base = first.get().unwrap_or(now);
                        first.set(Some(base));
                        now.0 >= base.0 + cleaned.unwrap_or(0)
                            && now.1 >= base.1 + written.unwrap_or(0)
                    }),
                    limit: warmup_limit,
                    what: asked.join(" and "),
                });
            }
            // 100 ms samples of free zones and file-system write bandwidth.
            {
                let (fs, s2, dn) = (fs.clone(), s.clone(), dn.clone());
                s.spawn(async move {
                    // Sample i covers [i, i+1) x 100 ms of simulated time (mkfs, before
                    // the first, wrote nothing counted).
                    let bucket = Nanos::from_ms(100);
                    let mut last = 0u64;
                    let first = (s2.now().0 / bucket.0) as usize;
                    {
                        let mut tl = tl.borrow_mut();
                        tl.free_segments.resize(first, fs.free_zones() as u64);
                        tl.mb_per_sec.resize(first, 0.0);
                    }
                    // Samples in a row in which the file system moved no byte: this task
                    // alone keeps the simulation going once the workload's tasks all wait on
                    // one another, so after STALLED of them it ends, and the simulation
                    // reports the deadlock instead of sampling an idle clock until memory
                    // runs out.
                    const STALLED: u32 = 6000; // 10 simulated minutes
                    let (mut idle, mut moved) = (0u32, 0u64);
                    while !dn.get() && idle < STALLED {
                        let next = tl.borrow().free_segments.len() as u64 + 1;
                        s2.sleep_until(bucket.times(next)).await;
                        let stats = fs.stats();
                        let t = &stats.traffic;
                        let written =
                            t.user_write + t.node + t.meta + t.checkpoint + t.gc_host_write;
                        let all = written + t.user_read + t.gc_host_read + t.gc_device_copy;
                        idle = if all == moved { idle + 1 } else { 0 };
                        moved = all;
                        let mut tl = tl.borrow_mut();
                        tl.free_segments.push(fs.free_zones() as u64);
                        tl.mb_per_sec.push((written - last) as f64 / 1e6 / 0.1);
                        last = written;
                        if let Some(b) = &b2 {
                            b.set_message(format!(
                                "simulated {:.1} s, {} zones cleaned",
                                s2.now().as_secs_f64(),
                                stats.zones_cleaned
                            ));
                            b.tick();
                        }
                    }
                });
            }
            let report = zonelab_workload::fs::run(s.clone(), fs.clone(), w, cfg).await;
            ew.set(Instant::now());
            let end_stats = fs.stats();
            let c = cns2.as_ref().map(|c| c.borrow());
            let end = (
                s.now(),
                counters(&end_stats, &ns2.borrow(), c.as_deref()),
                fs.gc_log(0),
            );
            drop(c);
            dn.set(true);
            // A workload's own error (bad parameters, a mismatch) keeps its message: it is not
            // the device's. A full file system is the experiment's sizing: say what to change.
            let report = report.map_err(|e| match e {
                FsWorkloadError::Fs {
                    err: FsError::NoSpace,
                    ..
                } => anyhow!(
                    "{e}: the workload outgrew the file system; lower fs.utilization or the \
                     workload's sizes (workload.params)"
                ),
                e => anyhow!(e),
            })?;
            fs.sync().await?;
            let problems = fs.check().await?;
            Ok::<_, anyhow::Error>((report, end, problems, fs.statfs()))
        })
        .context("the simulation stalled")?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let (report, (report_end, end, gc_log), problems, statfs) = outcome?;
    let wall_s = wall.elapsed().as_secs_f64();

    // Counters of the measured window: their values at its end less those at its start.
    // (A run that ends before its warm-up has an empty window.)
    let (from, start, first_event) = window_start
        .borrow_mut()
        .take()
        .unwrap_or_else(|| (report_end, end.clone(), gc_log.len()));
    let measured = first_event.min(gc_log.len())..gc_log.len();
    let w = delta(&end, &start);
    let n = |section: &str, key: &str| w[section][key].as_u64().unwrap_or(0);
    let fs_writes: u64 = ["user_write", "node", "meta", "checkpoint", "gc_host_write"]
        .iter()
        .map(|k| n("traffic", k))
        .sum();
    // A ratio over nothing written is undefined: null in the JSON, "n/a" on the console.
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let host_waf = ratio(fs_writes, report.bytes_written);
    // Seed 000's WAF (§4.2, Fig. 8b): the file system's writes and the copies the device makes
    // on its behalf (IZC's zone_compaction, ZNS+'s internal plugging), per byte users wrote.
    let sections = counter_sections(&w, exp.fs.segs_per_zone as u64);
    let traffic = |key: &str| sections["traffic_bytes"][key].as_u64().unwrap_or(0);
    let device_copies = traffic("device_copy") + traffic("plugging");
    let logical_waf = ratio(fs_writes + device_copies, report.bytes_written);
    // Flash programs per host write, over both devices when the metadata is on a companion.
    let cn = |section: &str, key: &str| w["companion"][section][key].as_u64().unwrap_or(0);
    let cpage = companion_profile
        .as_ref()
        .map_or(0, |p| p.geometry.page_size.0);
    // Pages copied back are programmed too.
    let flash_waf = ratio(
        (n("flash", "programs") + n("flash", "copybacks")) * page
            + (cn("flash", "programs") + cn("flash", "copybacks")) * cpage,
        (n("device", "written_lbas") + cn("device", "written_lbas")) * 4096,
    );
    let total_waf = host_waf.zip(flash_waf).map(|(h, f)| h * f);
    let show = |x: Option<f64>| x.map_or("n/a".to_string(), |x| format!("{x:.2}"));
    // Data victims only, as the authors' F2FS times them for Fig. 6 (gc.c adds a victim's
    // time to `gc_data_time` only for data segments, and debug.c reports the phases of
    // gc_data_segment).
    let c: Vec<_> = gc_log[measured.clone()]
        .iter()
        .filter_map(GcEvent::compaction)
        .filter(|x| VictimKind::of(x.log) == VictimKind::Data)
        .map(|x| x.phases_ns)
        .collect();
    let (init, read, write, cp) = (
        mean(c.iter().map(|x| x.init.0)),
        mean(c.iter().map(|x| x.read.0)),
        mean(c.iter().map(|x| x.write.0)),
        mean(c.iter().map(|x| x.checkpoint.0)),
    );
    let mut tl = timeline.borrow_mut();
    let dies = profile.flash_geometry().total_dies();
    let busy_log = ns.borrow().die_busy_log().to_vec();
    tl.chip_utilization = chip_utilization(&busy_log, dies, tl.free_segments.len());
    // Over the measured window, to the 10 ms of the busy log.
    let (b0, b1) = (
        (from.0 / BUSY_BUCKET.0) as usize,
        (report_end.0 / BUSY_BUCKET.0) as usize,
    );
    let window_busy: u64 = busy_log.iter().skip(b0).take(b1.saturating_sub(b0)).sum();
    let chip_utilization_mean = window_busy as f64
        / (dies as f64 * ((b1.saturating_sub(b0)) as u64 * BUSY_BUCKET.0).max(1) as f64);
    let mut result = json!({
        "config": {
            "experiment": exp,
            "profile": profile,
            "metadata_zones_added": added,
        },
        "sim": { "simulated_ns": sim.now().0, "events": sim.stats().polls },
        "throughput": report.throughput,
        "workload": {
            "name": report.workload, "params": report.params, "threads": report.threads,
            "measured_ns": report.simulated_ns, "fileset": report.fileset, "setup": report.setup,
            "bytes_read": report.bytes_read, "bytes_written": report.bytes_written,
            "counters": report.counters,
        },
        "window": { "from_ns": from.0, "to_ns": report_end.0 },
        "waf": { "host": host_waf, "logical": logical_waf, "flash": flash_waf, "total": total_waf },
        "fs": { "statfs": statfs },
        "timeline": {
            "bucket_ms": 100,
            "free_segments": tl.free_segments.iter().map(|z| z * exp.fs.segs_per_zone as u64).collect::<Vec<_>>(),
            "mb_per_sec": tl.mb_per_sec,
            "chip_utilization": tl.chip_utilization,
        },
        "verify": report.verify,
        "fsck": { "clean": problems.is_empty(), "problems": problems },
    });
    for key in ["traffic_bytes", "gc", "device"] {
        result[key] = sections[key].clone();
    }
    result["fs"]["checkpoints"] = sections["fs"]["checkpoints"].clone();
    result["gc"]["compaction_ns"] = json!({ "init": init, "read": read, "write": write,
        "checkpoint": cp, "mean_total": init + read + write + cp, "victims": c.len() });
    result["device"]["chip_utilization_mean"] = json!(chip_utilization_mean);
    if let Some(p) = &companion_profile {
        result["config"]["companion_profile"] = json!(p);
        let c = &w["companion"];
        result["device"]["companion"] = json!({
            "reads": c["device"]["reads"], "writes": c["device"]["writes"],
            "read_lbas": c["device"]["read_lbas"], "written_lbas": c["device"]["written_lbas"],
            "flash_reads": c["flash"]["reads"], "flash_programs": c["flash"]["programs"],
            "erases": c["flash"]["erases"], "copybacks": c["flash"]["copybacks"],
            "gc_runs": c["ftl"]["gc_runs"], "gc_pages": c["ftl"]["gc_pages"],
            "gc_erases": c["ftl"]["gc_erases"],
        });
    }
    let mut summary = format!(
        "{} on {} ({}), {} threads: {:.0} ops/s, {:.1} MB/s over {:.2} simulated s\n",
        report.workload,
        exp.device.profile,
        exp.fs.policy,
        report.threads,
        report.throughput.ops_per_sec,
        report.throughput.mb_per_sec,
        report.simulated_secs
    );
    summary += &format!(
        "write amplification: host {}, with device copies {}, flash {}; zones cleaned {}; reads checked {}, mismatches {}; fsck {}",
        show(host_waf),
        show(logical_waf),
        show(flash_waf),
        n("fs", "zones_cleaned"),
        report.verify.reads_checked,
        report.verify.mismatches,
        if problems.is_empty() {
            "clean"
        } else {
            "PROBLEMS"
        }
    );
    let measured_wall = match wall_at_window.get() {
        Some(t) => end_wall.get().saturating_duration_since(t).as_secs_f64(),
        None => 0.0,
    };
    Ok(Outcome {
        result,
        summary,
        ok: problems.is_empty() && report.verify.mismatches == 0,
        wall: Wall {
            total_s: wall_s,
            simulated_s: sim.now().as_secs_f64(),
            measured_s: measured_wall,
            measured_simulated_s: (report_end - from).as_secs_f64(),
        },
        gc_log,
        gc_log_measured: measured,
    })
}
