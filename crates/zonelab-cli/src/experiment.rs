//! The experiment file of `zonelab run` (DESIGN.md "Experiment and result schema"): its TOML
//! schema, `--set` overrides, and [`parse_experiment`], which reads and checks a whole
//! experiment (profiles, policy, workload parameters, run length) without simulating anything.

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use zonelab_device::{IoScheduler, NamespaceKind, PayloadMode, Profile};
use zonelab_flash::units::{parse_duration, parse_size};
use zonelab_lfs::fs::{FsOptions, HostModel};
use zonelab_lfs::layout::{DeviceShape, FormatOptions, plan};
use zonelab_lfs::policy::{self, Policy};
use zonelab_sim::Nanos;
use zonelab_workload::fs::config::parse_duration as run_time;
use zonelab_workload::fs::{FsWorkload, Preset, RunConfig, RunLength};

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    #[serde(default = "one")]
    pub seed: u64,
    pub device: DeviceCfg,
    #[serde(default)]
    pub host: HostCfg,
    #[serde(default)]
    pub fs: FsCfg,
    pub workload: WorkloadCfg,
    #[serde(default)]
    pub run: RunCfg,
}

fn one() -> u64 {
    1
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceCfg {
    pub profile: String,
    #[serde(default = "fingerprint")]
    pub payload: String,
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
    /// Where the file system's metadata lives: "zones" (conventional zones of the device, added
    /// when its profile has none) or "companion" (a companion conventional device,
    /// `[device.companion]`). Left out of the result when "zones", so results of experiments
    /// from before the key stay byte-identical.
    #[serde(default = "zones", skip_serializing_if = "is_zones")]
    pub metadata: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub companion: Option<CompanionCfg>,
}

/// The companion conventional device holding the metadata with `metadata = "companion"`
/// (F2FS on ZNS drives without conventional zones: mkfs.f2fs -c).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CompanionCfg {
    /// A profile with namespace = "conventional" (sn640, sn640-op7, sn640-op28, or a path).
    #[serde(default = "sn640")]
    pub profile: String,
    /// Profile overrides, e.g. { blocks_per_plane = 16 } to shrink it.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
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
pub struct HostCfg {
    #[serde(default = "four")]
    pub cores: u32,
    /// Page-cache memory.
    #[serde(default = "two_gib")]
    pub dram: String,
    /// The block layer's I/O scheduler: `mq-deadline` (default; one write in flight per zone,
    /// Linux's zone write locking) or `none` (a zone's writes are issued as they come, in
    /// order, and may be in flight together).
    #[serde(default = "mq_deadline")]
    pub scheduler: IoScheduler,
    /// CPU time to hand one dirty page to the device at writeback (file data or node; see
    /// `zonelab_lfs::fs::HostModel::write_page`), e.g. "8us"; not modelled when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_page: Option<String>,
    /// How many times the page cache's inactive list its active list may hold (Linux's
    /// inactive_ratio, at least 1); absent: Linux's for `dram`, sqrt(10 x GiB), 1 under 1 GiB.
    /// A scaled-down model of a larger host gives the larger host's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inactive_ratio: Option<u32>,
}

fn mq_deadline() -> IoScheduler {
    IoScheduler::MqDeadline
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
            scheduler: mq_deadline(),
            write_page: None,
            inactive_ratio: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FsCfg {
    #[serde(default = "f2fs")]
    pub policy: String,
    /// Fileset size as a share of the file system's capacity (passed to the workload, which
    /// draws files until they fill it, or sizes an OLTP database to fill it; excludes
    /// `workload.params.nfiles` and `workload.params.db_size`).
    pub utilization: Option<f64>,
    #[serde(default = "one_u32")]
    pub segs_per_zone: u32,
    /// Zones kept free for cleaning: writers clean when fewer are free; they and
    /// `overprovision_zones` are left out of the capacity users see (default: 4 + 2% of the
    /// zones).
    pub reserved_zones: Option<u32>,
    /// Zones beyond the reserve left out of the capacity users see (F2FS's overprovision;
    /// default: as many as the reserve).
    pub overprovision_zones: Option<u32>,
    /// Raise the cleaning and threaded-logging thresholds by the zones the dirty nodes and
    /// dentry blocks would fill, counting one dirty page a whole zone, as F2FS 4.10 does
    /// (default: false).
    #[serde(default)]
    pub dirty_zones_raise_thresholds: bool,
    /// Policy options (none for f2fs yet).
    #[serde(default)]
    pub options: BTreeMap<String, toml::Value>,
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
            reserved_zones: None,
            overprovision_zones: None,
            dirty_zones_raise_thresholds: false,
            options: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCfg {
    pub kind: String,
    /// Parameter preset: filebench (default), seed000 (ZNS+ Table 3), seed002 (Z-LFS §6.2).
    pub preset: Option<String>,
    pub threads: Option<u32>,
    #[serde(default)]
    pub params: BTreeMap<String, toml::Value>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RunCfg {
    /// Simulated time excluded from the figures. The run's times read as fio's do: a bare
    /// number is seconds, with us, ms, s, m, h or d.
    pub warmup: Option<String>,
    /// Zones the file system must reclaim (clean by any method, or reopen for threaded
    /// logging) after `warmup` before the measured
    /// phase starts: the steady state of a GC study rather than the first pass over
    /// free space.
    pub warmup_cleaned: Option<u64>,
    /// User data the workload must write after `warmup` before the measured phase starts
    /// (a size: "4GiB"): rewriting the file system's data turns its zones over, which a
    /// workload that overwrites files in place (OLTP) needs before its zones reach their
    /// steady mix. Both gates must be passed when both are given.
    pub warmup_written: Option<String>,
    /// Longest simulated warm-up while waiting for `warmup_cleaned` and `warmup_written`
    /// (default 10 min).
    pub warmup_limit: Option<String>,
    /// Simulated length of the measured phase ...
    pub duration: Option<String>,
    /// ... or its number of operations.
    pub ops: Option<u64>,
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
    // Why the tries failed: the layout's complaints (the first and the last), else why the
    // profile could not take more zones.
    let (mut layout_errs, mut profile_err) = (Vec::new(), String::new());
    for k in 1..=64u32 {
        let mut s = sets.clone();
        s.push(("zones".into(), (p.zns.zones + k).to_string()));
        s.push(("conventional_zones".into(), k.to_string()));
        let q = match Profile::load(&d.profile, &s) {
            Ok(q) => q,
            Err(e) => {
                profile_err = e.to_string();
                continue;
            }
        };
        match plan(DeviceShape::of(&q), fmt, fp) {
            Ok(_) => return Ok((q, k)),
            Err(e) => layout_errs.push(e.to_string()),
        }
    }
    // The same complaint with more room and with less: the format cannot work at all (e.g.
    // segments that do not divide a zone).
    if layout_errs.len() > 1 && layout_errs.first() == layout_errs.last() {
        bail!(
            "cannot format the file system on profile {}: {}",
            d.profile,
            layout_errs[0]
        );
    }
    let last = layout_errs.pop().unwrap_or(profile_err);
    bail!(
        "profile {} cannot hold the file system's metadata on up to 64 added conventional zones: {last} (are there enough flash blocks? try --set device.set.blocks_per_plane=...)",
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

/// An experiment read and checked, ready to simulate.
pub struct Plan {
    pub exp: Experiment,
    pub payload: PayloadMode,
    pub fmt: FormatOptions,
    /// The device profile with the experiment's overrides (and added conventional zones).
    pub profile: Profile,
    /// Conventional zones added to the profile for the metadata.
    pub added: u32,
    pub companion_profile: Option<Profile>,
    pub policy: Box<dyn Policy>,
    pub workload: FsWorkload,
    pub warmup_cleaned: Option<u64>,
    /// Bytes of user data to write after the warm-up ([`RunCfg::warmup_written`]).
    pub warmup_written: Option<u64>,
    pub warmup_limit: Nanos,
    pub opts: FsOptions,
    pub cfg: RunConfig,
}

/// The experiment in TOML `text` (named `origin` in errors) with `KEY=VALUE` overrides applied,
/// as TOML text that `zonelab run` reads as the same experiment; checked as
/// [`parse_experiment`] checks it. Comments of `text` are not kept.
pub fn with_overrides(text: &str, origin: &str, sets: &[String]) -> Result<String> {
    let tree = overridden(text, origin, sets)?;
    plan_of(tree.clone(), origin)?;
    toml::to_string(&tree).with_context(|| format!("{origin}: writing it back as TOML"))
}

/// The TOML tree of `text` with `KEY=VALUE` overrides applied.
fn overridden(text: &str, origin: &str, sets: &[String]) -> Result<toml::Value> {
    let mut tree: toml::Value =
        toml::from_str(text).with_context(|| format!("{origin} is not valid TOML"))?;
    for kv in sets {
        apply_override(&mut tree, kv)?;
    }
    Ok(tree)
}

/// Reads the experiment in TOML `text` (named `origin` in errors) with `KEY=VALUE` overrides
/// and checks everything that needs no simulation; any mistake is an error naming the key.
pub fn parse_experiment(text: &str, origin: &str, sets: &[String]) -> Result<Plan> {
    plan_of(overridden(text, origin, sets)?, origin)
}

/// The experiment in TOML `tree` (named `origin` in errors), checked as [`parse_experiment`]
/// says.
fn plan_of(tree: toml::Value, origin: &str) -> Result<Plan> {
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
        Some(s) => run_time(s).map_err(|e| anyhow!("run.warmup: {e}"))?,
        None => Nanos::ZERO,
    };
    let warmup_cleaned = exp.run.warmup_cleaned;
    let warmup_written = match &exp.run.warmup_written {
        Some(s) => Some(parse_size(s).map_err(|e| anyhow!("run.warmup_written: {e}"))?),
        None => None,
    };
    let warmup_limit = match &exp.run.warmup_limit {
        Some(s) => run_time(s).map_err(|e| anyhow!("run.warmup_limit: {e}"))?,
        None => Nanos::from_secs(600),
    };
    let length = match (&exp.run.duration, exp.run.ops) {
        (Some(_), Some(_)) => bail!("run: give duration or ops, not both"),
        (Some(d), None) => {
            let t = run_time(d).map_err(|e| anyhow!("run.duration: {e}"))?;
            if t == Nanos::ZERO {
                bail!("run.duration: {d} measures nothing; give a positive time, e.g. \"8s\"");
            }
            Some(RunLength::Time(t))
        }
        (None, Some(0)) => bail!("run.ops: 0 measures nothing; give at least 1"),
        (None, Some(n)) => Some(RunLength::Ops(n)),
        (None, None) => None,
    };
    let cache_bytes = parse_size(&exp.host.dram).map_err(|e| anyhow!("host.dram: {e}"))?;
    let min_cache = zonelab_lfs::fs::MIN_CACHE_PAGES * 4096;
    if cache_bytes < min_cache {
        bail!(
            "host.dram: {} is less than the page cache's minimum of {} KiB",
            exp.host.dram,
            min_cache >> 10
        );
    }
    if exp.host.cores == 0 {
        bail!("host.cores: the host needs at least 1 core");
    }
    if exp.host.inactive_ratio == Some(0) {
        bail!(
            "host.inactive_ratio: 0 would keep no page active; give at least 1, or leave it \
             out for Linux's ratio for host.dram"
        );
    }
    let write_page = match &exp.host.write_page {
        Some(t) => parse_duration(t).map_err(|e| {
            anyhow!("host.write_page: {e} (the CPU time per page written back, e.g. \"8us\")")
        })?,
        None => Nanos::ZERO,
    };
    let opts = FsOptions {
        host: HostModel {
            cores: exp.host.cores,
            write_page,
            ..Default::default()
        },
        cache_bytes,
        inactive_ratio: exp.host.inactive_ratio,
        reserved_zones: exp.fs.reserved_zones,
        overprovision_zones: exp.fs.overprovision_zones,
        dirty_zones_raise_thresholds: exp.fs.dirty_zones_raise_thresholds,
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
    Ok(Plan {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = include_str!("../../../experiments/fileserver-small.toml");

    fn resolved(text: &str, sets: &[String]) -> serde_json::Value {
        serde_json::to_value(parse_experiment(text, "test", sets).unwrap().exp).unwrap()
    }

    #[test]
    fn overrides_written_back_read_as_the_same_experiment() {
        let sets: Vec<String> = [
            "seed=7",
            "fs.policy=znsplus",
            "fs.options.checkpoint_pre_invalid=\"32MiB\"",
            "fs.dirty_zones_raise_thresholds=true",
            "device.set.znsplus.plugging=lba",
            "host.scheduler=none",
            "run.warmup_written=\"64MiB\"",
        ]
        .map(String::from)
        .to_vec();
        let text = with_overrides(SMALL, "test", &sets).unwrap();
        assert_eq!(resolved(&text, &[]), resolved(SMALL, &sets));
        assert_ne!(resolved(&text, &[]), resolved(SMALL, &[]));
    }

    #[test]
    fn overrides_that_break_the_experiment_are_refused() {
        let e = with_overrides(SMALL, "test", &["fs.policy=lfs".to_string()]).unwrap_err();
        assert!(format!("{e:#}").contains("fs.policy"), "{e:#}");
    }
}
