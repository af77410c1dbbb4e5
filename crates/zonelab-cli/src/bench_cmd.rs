//! `zonelab bench`: simulation speed.
//!
//! Two device cases from the foundation issue, in simulated commands per wall-clock second on
//! the zn540 profile: (a) QD1 4 KiB sequential writes to one zone (the zone is reset and
//! rewritten when full, as fio's zbd mode does), (b) QD32 4 KiB random reads over 16 zones
//! filled beforehand (the fill is not timed). Both go through the same path as `zonelab fio`:
//! job parsing aside, runner, host stack, device, flash model.
//!
//! One file-system case (`--case fileserver`, run only when asked: it takes minutes): the ZNS+
//! paper's fileserver at full scale (experiments/fileserver-paper.toml: 16 GiB, 90%, 50
//! threads), in simulated seconds of the measured phase per wall-clock second, with the
//! process's peak memory.

use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::cell::RefCell;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;
use zonelab_device::{Namespace, PayloadMode, Profile, ZonedDevice};
use zonelab_workload::fio::options;
use zonelab_workload::fio::run::{self, RunSettings};

#[derive(Args)]
pub struct BenchArgs {
    /// Simulated commands per case (at least 1).
    #[arg(long, default_value_t = 1_000_000, value_parser = at_least_one)]
    commands: u64,
    /// Run one case only: `write` (a), `read` (b), or `fileserver` (the paper-scale file-system
    /// run; never run by default).
    #[arg(long, value_parser = ["write", "read", "fileserver"])]
    case: Option<String>,
    /// Override a key of the fileserver experiment, e.g. --fs-set run.duration=10s (repeatable).
    #[arg(long = "fs-set", value_name = "KEY=VALUE")]
    fs_set: Vec<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Override a zn540 profile field, e.g. `--set power_loss_protection=false` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
}

fn jobs(args: &[&str]) -> Result<Vec<options::JobSpec>> {
    let a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    Ok(options::parse_cli(&a, &|p| zonelab_device::profile::read_text(p))?.jobs)
}

/// `--commands`: a whole number of at least 1 (a case of no commands measures nothing).
fn at_least_one(v: &str) -> Result<u64, String> {
    match v.parse::<u64>() {
        Ok(0) => Err("a case needs at least 1 command".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// One measured case: (simulated commands, wall seconds).
fn measure(device: &Rc<RefCell<Namespace>>, job: &[&str]) -> Result<(u64, f64)> {
    let specs = jobs(job)?;
    let settings = RunSettings {
        payload: PayloadMode::Fingerprint,
        seed: 1,
    };
    let t0 = Instant::now();
    let out = run::run_on(&specs, device.clone(), &settings)?;
    let wall = t0.elapsed().as_secs_f64();
    let cmds: u64 = out.clones.iter().map(|c| c.stats.ios()).sum();
    if let Some(e) = out.clones.iter().find_map(|c| c.error.clone()) {
        anyhow::bail!("benchmark job failed: {e}");
    }
    Ok((cmds, wall))
}

/// Case (a): QD1 4 KiB sequential writes to one zone, reset and rewritten when full.
fn seq_write_case(profile: &Profile, commands: u64) -> Result<(u64, f64)> {
    let dev = Rc::new(RefCell::new(Namespace::from(ZonedDevice::new(
        profile.clone(),
        PayloadMode::Fingerprint,
    )?)));
    let size = format!("--size={}", profile.zns.zone_size.0);
    let ios = format!("--number_ios={commands}");
    let io_size = format!("--io_size={}", commands * 4096 * 2);
    measure(
        &dev,
        &[
            "--name=seqwrite-qd1",
            "--rw=write",
            "--bs=4k",
            "--iodepth=1",
            "--zonemode=zbd",
            &size,
            &ios,
            &io_size,
        ],
    )
}

/// Case (b): QD32 4 KiB random reads over 16 zones filled first (the fill is not timed).
fn rand_read_case(profile: &Profile, commands: u64) -> Result<(u64, f64)> {
    let dev = Rc::new(RefCell::new(Namespace::from(ZonedDevice::new(
        profile.clone(),
        PayloadMode::Fingerprint,
    )?)));
    let span = format!("--size={}", 16 * profile.zns.zone_size.0);
    let ios = format!("--number_ios={commands}");
    measure(
        &dev,
        &[
            "--name=fill",
            "--rw=write",
            "--bs=512k",
            "--iodepth=4",
            "--zonemode=zbd",
            &span,
        ],
    )?;
    measure(
        &dev,
        &[
            "--name=randread-qd32",
            "--rw=randread",
            "--bs=4k",
            "--iodepth=32",
            "--zonemode=zbd",
            &span,
            &ios,
        ],
    )
}

/// The paper-scale fileserver experiment, built into the binary so the case runs anywhere.
const FILESERVER_PAPER: &str = include_str!("../../../experiments/fileserver-paper.toml");

/// Peak resident memory of this process (Linux), in bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn fileserver_case(sets: &[String]) -> Result<ExitCode> {
    let o = crate::run_cmd::execute(FILESERVER_PAPER, "experiments/fileserver-paper.toml", sets)?;
    let w = &o.wall;
    let speed = if w.measured_s > 0.0 {
        w.measured_simulated_s / w.measured_s
    } else {
        0.0
    };
    let rss = peak_rss();
    println!("{}", o.summary);
    println!(
        "{:<32} {:>12} {:>10} {:>18} {:>14}",
        "case", "simulated s", "wall s", "simulated s/wall s", "peak memory"
    );
    println!(
        "{:<32} {:>12.1} {:>10.1} {:>18.2} {:>14}",
        "fileserver-16g-90pct (measured)",
        w.measured_simulated_s,
        w.measured_s,
        speed,
        rss.map_or("?".to_string(), |b| format!(
            "{:.2} GiB",
            b as f64 / (1u64 << 30) as f64
        ))
    );
    println!(
        "{:<32} {:>12.1} {:>10.1}",
        "whole run (mkfs, fill, fsck)", w.simulated_s, w.total_s
    );
    Ok(if o.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(4)
    })
}

pub fn run(args: BenchArgs) -> Result<ExitCode> {
    if args.case.as_deref() == Some("fileserver") {
        return fileserver_case(&args.fs_set);
    }
    let profile = Profile::load("zn540", &Profile::parse_overrides(&args.set)?)?;
    let n = args.commands;
    let want = |c: &str| args.case.as_deref().is_none_or(|x| x == c);
    let mut cases = Vec::new();
    if want("write") {
        let (c, w) = seq_write_case(&profile, n)?;
        cases.push(("qd1-4k-seqwrite-1zone", c, w));
    }
    if want("read") {
        let (c, w) = rand_read_case(&profile, n)?;
        cases.push(("qd32-4k-randread-16zones", c, w));
    }
    let rate = |c: u64, w: f64| if w > 0.0 { c as f64 / w } else { 0.0 };
    if args.json {
        let v: Vec<_> = cases
            .iter()
            .map(|(name, c, w)| json!({"case": name, "commands": c, "wall_seconds": w, "commands_per_second": rate(*c, *w)}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"profile": "zn540", "cases": v}))?
        );
    } else {
        println!(
            "{:<28} {:>12} {:>10} {:>16}",
            "case (zn540)", "commands", "wall s", "commands/s"
        );
        for (name, c, w) in cases {
            println!("{name:<28} {c:>12} {w:>10.3} {:>16.0}", rate(c, w));
        }
    }
    Ok(ExitCode::SUCCESS)
}
