//! `zonelab run EXPERIMENT.toml`: one file-system experiment (device profile, policy, workload,
//! seed, length) with its result JSON in DESIGN.md's schema.

use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;
use zonelab_device::{
    HostStack, IoEngine, IoScheduler, Namespace, NamespaceKind, PayloadMode, Profile,
};
use zonelab_flash::BUSY_BUCKET;
use zonelab_flash::units::{parse_duration, parse_size};
use zonelab_lfs::FileSystem;
use zonelab_lfs::dev::Devices;
use zonelab_lfs::fs::{Fs, FsOptions, FsStats, HostModel};
use zonelab_lfs::layout::{DeviceShape, FormatOptions, plan};
use zonelab_lfs::policy;
use zonelab_sim::{Nanos, Sim};
use zonelab_workload::fs::{FsWorkload, MeasureHook, Preset, RunConfig, RunLength, WarmGate};

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
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Experiment {
    #[serde(default = "one")]
    seed: u64,
    device: DeviceCfg,
    #[serde(default)]
    host: HostCfg,
    #[serde(default)]
    fs: FsCfg,
    workload: WorkloadCfg,
    #[serde(default)]
    run: RunCfg,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct DeviceCfg {
    profile: String,
    #[serde(default = "fingerprint")]
    payload: String,
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
    /// Where the file system's metadata lives: "zones" (conventional zones of the device, added
    /// when its profile has none) or "companion" (a companion conventional device,
    /// `[device.companion]`). Left out of the result when "zones", so results of experiments
    /// from before the key stay byte-identical.
    #[serde(default = "zones", skip_serializing_if = "is_zones")]
    metadata: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    companion: Option<CompanionCfg>,
}

/// The companion conventional device holding the metadata with `metadata = "companion"`
/// (F2FS on ZNS drives without conventional zones: mkfs.f2fs -c).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct CompanionCfg {
    /// A profile with namespace = "conventional" (sn640, sn640-op7, sn640-op28, or a path).
    #[serde(default = "sn640")]
    profile: String,
    /// Profile overrides, e.g. { blocks_per_plane = 16 } to shrink it.
    #[serde(default)]
    set: BTreeMap<String, toml::Value>,
}

fn fingerprint() -> String {
    "fingerprint".into()
}
fn zones() -> String {
    "zones".into()
}
fn is_zones(s: &str) -> bool {
    s == "zones"
}
fn sn640() -> String {
    "sn640".into()
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct HostCfg {
    #[serde(default = "four")]
    cores: u32,
    /// Page-cache memory.
    #[serde(default = "two_gib")]
    dram: String,
}

fn four() -> u32 {
    4
}
fn two_gib() -> String {
    "2GiB".into()
}

impl Default for HostCfg {
    fn default() -> Self {
        HostCfg {
            cores: 4,
            dram: two_gib(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct FsCfg {
    #[serde(default = "f2fs")]
    policy: String,
    /// Fileset size as a share of the file system's capacity (passed to the workload, which
    /// draws files until they fill it, or sizes an OLTP database to fill it; excludes
    /// `workload.params.nfiles` and `workload.params.db_size`).
    utilization: Option<f64>,
    #[serde(default = "one_u32")]
    segs_per_zone: u32,
    /// Policy options (none for f2fs yet).
    #[serde(default)]
    options: BTreeMap<String, toml::Value>,
}

fn f2fs() -> String {
    "f2fs".into()
}
fn one_u32() -> u32 {
    1
}

impl Default for FsCfg {
    fn default() -> Self {
        FsCfg {
            policy: f2fs(),
            utilization: None,
            segs_per_zone: 1,
            options: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct WorkloadCfg {
    kind: String,
    /// Parameter preset: filebench (default), seed000 (ZNS+ Table 3), seed002 (Z-LFS §6.2).
    preset: Option<String>,
    threads: Option<u32>,
    #[serde(default)]
    params: BTreeMap<String, toml::Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RunCfg {
    /// Simulated time excluded from the figures.
    warmup: Option<String>,
    /// Zones the file system must clean (by any method) after `warmup` before the measured
    /// phase starts: the steady state of a GC study rather than the first pass over
    /// free space.
    warmup_cleaned: Option<u64>,
    /// Longest simulated warm-up while waiting for `warmup_cleaned` (default 10 min).
    warmup_limit: Option<String>,
    /// Simulated length of the measured phase ...
    duration: Option<String>,
    /// ... or its number of operations.
    ops: Option<u64>,
}

fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Applies `a.b.c=value` to the experiment's TOML tree (the value parsed as TOML when it can
/// be, else taken as a string).
fn apply_override(root: &mut toml::Value, kv: &str) -> Result<()> {
    let (key, raw) = kv
        .split_once('=')
        .ok_or_else(|| anyhow!("--set {kv}: expected KEY=VALUE, e.g. fs.policy=f2fs"))?;
    let value: toml::Value = toml::from_str::<toml::Table>(&format!("v = {raw}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| toml::Value::String(raw.to_string()));
    let parts: Vec<&str> = key.split('.').collect();
    let mut cur = root;
    for (i, p) in parts.iter().enumerate() {
        let table = cur
            .as_table_mut()
            .ok_or_else(|| anyhow!("--set {key}: {} is not a table", parts[..i].join(".")))?;
        if i + 1 == parts.len() {
            table.insert(p.to_string(), value);
            return Ok(());
        }
        cur = table
            .entry(p.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    }
    bail!("--set {kv}: empty key")
}

/// The profile with the experiment's overrides; when it has no conventional zones, enough are
/// added (beside its sequential zones, which keep the file system's size) for the metadata,
/// standing for the companion conventional device F2FS on ZNS needs.
fn device_profile(d: &DeviceCfg, fmt: FormatOptions, fp: bool) -> Result<(Profile, u32)> {
    let sets = profile_sets(&d.set);
    let p = Profile::load(&d.profile, &sets)?;
    if p.zns.conventional_zones > 0 || d.metadata == "companion" {
        return Ok((p, 0));
    }
    for k in 1..=64u32 {
        let mut s = sets.clone();
        s.push(("zones".into(), (p.zns.zones + k).to_string()));
        s.push(("conventional_zones".into(), k.to_string()));
        let Ok(q) = Profile::load(&d.profile, &s) else {
            continue;
        };
        if plan(DeviceShape::of(&q), fmt, fp).is_ok() {
            return Ok((q, k));
        }
    }
    bail!(
        "profile {} cannot hold the file system's metadata on up to 64 added conventional zones (are there enough flash blocks? try --set device.set.blocks_per_plane=...)",
        d.profile
    )
}

/// Profile overrides of `device.set`: `{ zones = 64 }`, and a section's field as a dotted
/// key or a table (`--set device.set.znsplus.copyback=false` makes `{ znsplus = { copyback =
/// false } }`), both `znsplus.copyback` for the profile.
fn profile_sets(set: &BTreeMap<String, toml::Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (k, v) in set {
        match v {
            toml::Value::Table(t) => {
                for (f, x) in t {
                    out.push((format!("{k}.{f}"), value_text(x)));
                }
            }
            x => out.push((k.clone(), value_text(x))),
        }
    }
    out
}

/// The companion conventional device's profile when the experiment asks for one.
fn companion_profile(d: &DeviceCfg) -> Result<Option<Profile>> {
    match (d.metadata.as_str(), &d.companion) {
        ("zones", None) => Ok(None),
        ("zones", Some(_)) => bail!(
            "[device.companion] is used only with device.metadata = \"companion\"; set that or remove the section"
        ),
        ("companion", c) => {
            let c = c.clone().unwrap_or(CompanionCfg {
                profile: sn640(),
                set: BTreeMap::new(),
            });
            let sets = profile_sets(&c.set);
            let p = Profile::load(&c.profile, &sets)
                .with_context(|| format!("device.companion.profile {}", c.profile))?;
            if p.namespace != NamespaceKind::Conventional {
                bail!(
                    "device.companion.profile '{}' is a zoned namespace; the companion must be a conventional one (sn640, sn640-op7, sn640-op28)",
                    c.profile
                );
            }
            Ok(Some(p))
        }
        (m, _) => bail!("device.metadata '{m}': use \"zones\" or \"companion\""),
    }
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
            "blocks_copied_in_device": stats.blocks_copied_in_device,
            "periodic_checkpoints": stats.periodic_checkpoints,
            "threaded": stats.threaded,
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
pub(crate) fn counter_sections(w: &Value, segs_per_zone: u64, izc: bool) -> Value {
    let n = |section: &str, key: &str| w[section][key].as_u64().unwrap_or(0);
    let n2 = |section: &str, sub: &str, key: &str| w[section][sub][key].as_u64().unwrap_or(0);
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
                "host_copy": if izc { 0 } else { n("fs", "zones_cleaned") },
                "izc": if izc { n("fs", "zones_cleaned") } else { 0 },
                "zone_md": 0, "threaded_logging": n2("fs", "threaded", "tl_opens"),
            },
            "threaded_logging": {
                "blocks_written": n2("fs", "threaded", "tl_blocks"),
                "blocks_skipped": n2("fs", "threaded", "skipped_blocks"),
                "compaction_preferred": n2("fs", "threaded", "compaction_preferred"),
                "periodic_checkpoints": n("fs", "periodic_checkpoints"),
            },
            "blocks_copied_in_device": n("fs", "blocks_copied_in_device"),
        },
        "device": {
            "flash_reads": n("flash", "reads"), "flash_programs": n("flash", "programs"),
            "erases": n("flash", "erases"), "copybacks": n("flash", "copybacks"),
            "readprogram_copies": n("znsplus", "readprogram_copies"),
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
    let text = std::fs::read_to_string(&a.experiment)
        .with_context(|| format!("cannot read experiment {}", a.experiment.display()))?;
    let o = execute(&text, &a.experiment.display().to_string(), &a.set)?;
    let json = serde_json::to_string_pretty(&o.result)?;
    std::fs::write(&a.output, json + "\n")
        .with_context(|| format!("cannot write {}", a.output.display()))?;
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
    let mut tree: toml::Value =
        toml::from_str(text).with_context(|| format!("{origin} is not valid TOML"))?;
    for kv in sets {
        apply_override(&mut tree, kv)?;
    }
    let exp: Experiment = tree
        .try_into()
        .with_context(|| format!("{origin}: not an experiment"))?;
    let payload: PayloadMode = exp.device.payload.parse().map_err(|e: String| anyhow!(e))?;
    let fmt = FormatOptions {
        segs_per_zone: exp.fs.segs_per_zone,
        ..Default::default()
    };
    let (profile, added) = device_profile(&exp.device, fmt, payload == PayloadMode::Fingerprint)?;
    let companion_profile = companion_profile(&exp.device)?;
    let policy_options: BTreeMap<String, String> = exp
        .fs
        .options
        .iter()
        .map(|(k, v)| (k.clone(), value_text(v)))
        .collect();
    let policy_box = policy::build(&exp.fs.policy, &policy_options)
        .map_err(|e| anyhow!("fs.policy = '{}': {e}", exp.fs.policy))?;
    let policy_migration = policy_box.migration();
    let preset = match exp.workload.preset.as_deref() {
        None | Some("filebench") => Preset::Filebench,
        Some("seed000") => Preset::Seed000,
        Some("seed002") => Preset::Seed002,
        Some(p) => bail!("workload.preset '{p}': use filebench, seed000 or seed002"),
    };
    let mut w = FsWorkload::preset(&exp.workload.kind, preset).map_err(|e| anyhow!(e))?;
    if let Some(t) = exp.workload.threads {
        w.set("threads", &t.to_string()).map_err(|e| anyhow!(e))?;
    }
    for (k, v) in &exp.workload.params {
        w.set(k, &value_text(v))
            .map_err(|e| anyhow!("workload.params.{k}: {e}"))?;
    }
    // The experiment's fill target sizes the fileset; a file count would size it again.
    if let Some(u) = exp.fs.utilization {
        if let Some(n) = exp.workload.params.get("nfiles") {
            bail!(
                "the experiment sizes the fileset twice: fs.utilization = {u} and \
                 workload.params.nfiles = {n}; keep one (utilization fills that share of the \
                 file system, nfiles sets the number of files)"
            );
        }
        if let Some(n) = exp.workload.params.get("db_size") {
            bail!(
                "the experiment sizes the database twice: fs.utilization = {u} and \
                 workload.params.db_size = {n}; keep one (utilization fills that share of the \
                 file system with the database files, db_size sets the tablespaces' bytes)"
            );
        }
        w.set("utilization", &u.to_string())
            .map_err(|e| anyhow!("fs.utilization: {e}"))?;
    }
    let warmup = match &exp.run.warmup {
        Some(s) => parse_duration(s).map_err(|e| anyhow!("run.warmup: {e}"))?,
        None => Nanos::ZERO,
    };
    let warmup_cleaned = exp.run.warmup_cleaned;
    let warmup_limit = match &exp.run.warmup_limit {
        Some(s) => parse_duration(s).map_err(|e| anyhow!("run.warmup_limit: {e}"))?,
        None => Nanos::from_secs(600),
    };
    let length = match (&exp.run.duration, exp.run.ops) {
        (Some(_), Some(_)) => bail!("run: give duration or ops, not both"),
        (Some(d), None) => Some(RunLength::Time(
            parse_duration(d).map_err(|e| anyhow!("run.duration: {e}"))?,
        )),
        (None, Some(n)) => Some(RunLength::Ops(n)),
        (None, None) => None,
    };
    let cache_bytes = parse_size(&exp.host.dram).map_err(|e| anyhow!("host.dram: {e}"))?;
    let opts = FsOptions {
        host: HostModel {
            cores: exp.host.cores.max(1),
            ..Default::default()
        },
        cache_bytes,
        ..Default::default()
    };
    let cfg = RunConfig {
        seed: exp.seed,
        payload,
        run: length,
        warmup,
        stop_on_mismatch: true,
        on_measure: None,
        warm_until: None,
    };

    let sim = Sim::new();
    let page = profile.geometry.page_size.0;
    let ns = Namespace::new(profile.clone(), payload)?.shared();
    let stack = HostStack::new(
        sim.clone(),
        ns.clone(),
        IoEngine::IoUring,
        IoScheduler::MqDeadline,
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
                IoScheduler::MqDeadline,
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
                    *ws.borrow_mut() = Some((s2.now(), snapshot, stats.compaction.len()));
                    ww.set(Some(Instant::now()));
                })));
            }
            if let Some(n) = warmup_cleaned.filter(|&n| n > 0) {
                let (fs, first) = (fs.clone(), Rc::new(Cell::new(None::<u64>)));
                cfg.warm_until = Some(WarmGate {
                    // Counted from the end of `warmup` (the first check): zones cleaned while
                    // the fileset was built do not make the run warm.
                    ready: Rc::new(move || {
                        let cleaned = fs.stats().zones_cleaned;
                        let base = first.get().unwrap_or(cleaned);
                        first.set(Some(base));
                        cleaned >= base + n
                    }),
                    limit: warmup_limit,
                    what: format!("the file system to clean {n} zones (run.warmup_cleaned)"),
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
                    while !dn.get() {
                        let next = tl.borrow().free_segments.len() as u64 + 1;
                        s2.sleep_until(bucket.times(next)).await;
                        let stats = fs.stats();
                        let t = &stats.traffic;
                        let written =
                            t.user_write + t.node + t.meta + t.checkpoint + t.gc_host_write;
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
                end_stats.compaction,
            );
            drop(c);
            dn.set(true);
            let report = report.map_err(|e| zonelab_lfs::FsError::Io(e.to_string()))?;
            fs.sync().await?;
            let problems = fs.check().await?;
            Ok::<_, zonelab_lfs::FsError>((report, end, problems, fs.statfs()))
        })
        .context("the simulation stalled")?;
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let (report, (report_end, end, compactions), problems, statfs) =
        outcome.map_err(|e| anyhow!("{e}"))?;
    let wall_s = wall.elapsed().as_secs_f64();

    // Counters of the measured window: their values at its end less those at its start.
    // (A run that ends before its warm-up has an empty window.)
    let (from, start, first_compaction) = window_start
        .borrow_mut()
        .take()
        .unwrap_or_else(|| (report_end, end.clone(), compactions.len()));
    let w = delta(&end, &start);
    let n = |section: &str, key: &str| w[section][key].as_u64().unwrap_or(0);
    let fs_writes: u64 = ["user_write", "node", "meta", "checkpoint", "gc_host_write"]
        .iter()
        .map(|k| n("traffic", k))
        .sum();
    // A ratio over nothing written is undefined: null in the JSON, "n/a" on the console.
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let host_waf = ratio(fs_writes, report.bytes_written);
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
    let izc = matches!(
        policy_migration,
        zonelab_lfs::policy::Migration::InStorage(_)
    );
    let c = &compactions[first_compaction.min(compactions.len())..];
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
        "waf": { "host": host_waf, "flash": flash_waf, "total": total_waf },
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
    let sections = counter_sections(&w, exp.fs.segs_per_zone as u64, izc);
    for key in ["traffic_bytes", "gc", "device"] {
        result[key] = sections[key].clone();
    }
    result["fs"]["checkpoints"] = sections["fs"]["checkpoints"].clone();
    result["gc"]["compaction_ns"] = json!({ "init": init, "read": read, "write": write,
        "checkpoint": cp, "mean_total": init + read + write + cp });
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
        "write amplification: host {}, flash {}; zones cleaned {}; reads checked {}, mismatches {}; fsck {}",
        show(host_waf),
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
    })
}
