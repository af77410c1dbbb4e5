//! `zonelab zbench`: the zone-management benchmark of the characterization paper (seed 001
//! §III-E, §III-G) on a simulated device, optionally compared with real measurements.
//! The benchmark itself is `zonelab_workload::zbench`.

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use zonelab_device::Profile;
use zonelab_workload::zbench::measurements::{self, Measurements};
use zonelab_workload::zbench::{self, ZbenchOptions, ZbenchReport};

#[derive(Args)]
#[command(
    after_help = "Case groups: reset_occupancy, finish_occupancy, open_close, \
    explicit_implicit_io, reset_interference.\n\n\
    Examples:\n  zonelab zbench --quick\n  \
    zonelab zbench -o json --output zbench.json\n  \
    zonelab zbench --compare-measurements ../shared/data/zn540-measurements\n  \
    zonelab zbench --quick --set zones=32 --set zone_size=64MiB --set pages_per_block=64"
)]
pub struct ZbenchArgs {
    /// Device profile: a built-in name or a TOML file.
    #[arg(long, default_value = "zn540")]
    profile: String,
    /// Override a profile field, e.g. --set zones=64 (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Seed of the random reads (the only randomness).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Few repetitions and 128 KiB fill writes: seconds instead of minutes.
    #[arg(long)]
    quick: bool,
    /// Zones per occupancy level / close variant, and resets per interference run (default
    /// 100; quick 5 and 40).
    #[arg(long)]
    reps: Option<u32>,
    /// Write size of the unmeasured fills, in LBAs (default 1 = 4 KiB as in the paper; quick 32).
    #[arg(long, value_name = "LBAS")]
    fill_lbas: Option<u64>,
    /// Run only these case groups (repeatable).
    #[arg(long = "group", value_name = "GROUP")]
    groups: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long = "output-format", value_parser = ["normal", "json"], default_value = "normal")]
    format: String,
    /// Write the output to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Compare with the real measurements in DIR (e.g. ../shared/data/zn540-measurements).
    #[arg(long, value_name = "DIR")]
    compare_measurements: Option<PathBuf>,
}

pub fn run(a: ZbenchArgs) -> Result<ExitCode> {
    let profile = Profile::load(&a.profile, &Profile::parse_overrides(&a.set)?)?;
    let mut opts = if a.quick {
        ZbenchOptions::quick(a.seed)
    } else {
        ZbenchOptions::full(a.seed)
    };
    if let Some(r) = a.reps {
        if r == 0 {
            bail!("--reps must be at least 1");
        }
        opts.reps = r;
        opts.interference_resets = r;
    }
    if let Some(f) = a.fill_lbas {
        opts.fill_lbas = f;
    }
    opts.groups = a.groups.clone();
    // Load the data first: a wrong path should fail before minutes of simulation.
    let real = match &a.compare_measurements {
        Some(dir) => Some(Measurements::load(dir).map_err(anyhow::Error::msg)?),
        None => None,
    };
    let verbose = a.format == "normal" && std::io::stderr().is_terminal();
    let t0 = Instant::now();
    let report = zbench::run_with_progress(&profile, &opts, &mut |g| {
        if verbose {
            eprintln!("zbench: {g} ({:.1} s)", t0.elapsed().as_secs_f64());
        }
    })
    .map_err(anyhow::Error::msg)?;
    let wall = t0.elapsed().as_secs_f64();
    let rows = real.as_ref().map(|m| measurements::compare(&report, m));
    let text = if a.format == "json" {
        let mut v = serde_json::to_value(&report)?;
        if let Some(rows) = &rows {
            v["comparison"] = json!(rows);
        }
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        let mut s = table(&report);
        s.push_str(&format!(
            "\n{} commands, {:.3} s simulated, {:.2} s wall\n",
            report.sim.commands,
            report.sim.simulated_ns as f64 / 1e9,
            wall
        ));
        if let Some(rows) = &rows {
            s.push_str(&format!(
                "\nZoneLab vs real ({}); err = (ZoneLab - real) / real\n",
                a.compare_measurements
                    .as_ref()
                    .expect("rows imply a folder")
                    .display()
            ));
            s.push_str(&measurements::table(rows));
        }
        s
    };
    match &a.output {
        Some(p) => std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?,
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn table(r: &ZbenchReport) -> String {
    let f = |ns: f64| measurements::fmt_ns(ns);
    let d = &r.device;
    let mut s = format!(
        "zbench on {}: {} zones, zone size {} LBAs, capacity {} LBAs, {} B LBAs; seed {}{}\n\n",
        r.profile,
        d.zones,
        d.zone_size_lbas,
        d.zone_capacity_lbas,
        d.lba_size,
        r.options.seed,
        if r.options.quick { ", quick" } else { "" }
    );
    s.push_str(&format!(
        "{:<26} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n",
        "case", "count", "mean", "p50", "p95", "p99", "min", "max"
    ));
    let mut group = "";
    for c in &r.cases {
        if c.group != group {
            group = &c.group;
            s.push_str(&format!("[{group}]\n"));
        }
        let st = &c.stats;
        s.push_str(&format!(
            "{:<26} {:>6} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}\n",
            c.name,
            st.count,
            f(st.mean_ns),
            f(st.p50_ns as f64),
            f(st.p95_ns as f64),
            f(st.p99_ns as f64),
            f(st.min_ns as f64),
            f(st.max_ns as f64)
        ));
    }
    s
}
