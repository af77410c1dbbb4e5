//! `zonelab fio`: parse fio options and job files, run the jobs, print fio's output.

use anyhow::{Context, Result};
use serde_json::json;
use std::process::ExitCode;
use zonelab_device::{Namespace, PayloadMode, Profile};
use zonelab_workload::fio::options::{self, JobSpec, OutputFormat};
use zonelab_workload::fio::report::{self, JobReport, ReportHeader};
use zonelab_workload::fio::run::{self, RunOutput, RunSettings};

const HELP: &str = "\
zonelab fio: fio-compatible jobs on a simulated ZNS SSD (or its conventional twin)

usage: zonelab fio [--profile=NAME] [--set KEY=VALUE]... [--output-format=normal|json]
                   [global options] --name=JOB [job options]... [JOBFILE]...

fio options: rw (read, write, randread, randwrite, rw, randrw; trim and randtrim with
zonemode=zbd, a zone reset per trim of bs = the zone size), rwmixread, bs, iodepth,
numjobs, size, offset, offset_increment, io_size, number_ios, runtime, time_based,
ramp_time, rate, rate_iops, zonemode=zbd, max_open_zones, zonerange, group_reporting,
stonewall, write_bw_log, write_iops_log, write_lat_log, log_avg_msec, seed.
ZoneLab options: profile (device profile, default zn540; sn640, sn640-op7 and sn640-op28 are
conventional block-interface namespaces, without zonemode=zbd or zone_append), set (profile
override), zone_append=1, ioengine=spdk|io_uring, ioscheduler=none|mq-deadline.

Profiles: zonelab profiles. Sizes follow fio: 4k = 4096 bytes (kb_base=1024).
";

pub fn run(args: &[String]) -> Result<ExitCode> {
    if args.is_empty() || args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return Ok(if args.is_empty() {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        });
    }
    let parsed = options::parse_cli(args, &|p| zonelab_device::profile::read_text(p))?;
    let profile_name = parsed
        .profile
        .clone()
        .unwrap_or_else(|| "zn540".to_string());
    let profile = Profile::load(&profile_name, &parsed.sets)?;
    let seed = parsed.jobs.iter().find_map(|j| j.seed).unwrap_or(1);
    let settings = RunSettings {
        payload: PayloadMode::Fingerprint,
        seed,
    };
    let out = run::run(&parsed.jobs, &profile, &settings)?;
    let reports = reports(&parsed.jobs, &out);
    let extra = zonelab_section(&profile, &settings, &out);
    let text = match parsed.output_format {
        OutputFormat::Json => {
            let header = ReportHeader {
                global_options: parsed.global_options.clone(),
                ..ReportHeader::default()
            };
            report::render_json(&header, &reports, "zonelab", extra)
        }
        OutputFormat::Normal => report::render_normal(&reports, &summary(&extra)),
    };
    match &parsed.output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing --output={path}"))?
        }
        None => print!("{text}"),
    }
    for c in &out.clones {
        for (file, content) in &c.logs {
            std::fs::write(file, content).with_context(|| format!("writing log {file}"))?;
        }
    }
    let mut failed = false;
    for c in &out.clones {
        if let Some(e) = &c.error {
            eprintln!(
                "zonelab: job '{}' (clone {}): {e}",
                parsed.jobs[c.job].name, c.clone
            );
            failed = true;
        }
    }
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// fio's per-job reports: one per clone, or one per job with group_reporting.
fn reports(jobs: &[JobSpec], out: &RunOutput) -> Vec<JobReport> {
    let mut groupid = 0u32;
    let mut groups = Vec::with_capacity(jobs.len());
    for (i, j) in jobs.iter().enumerate() {
        if i > 0 && j.new_group {
            groupid += 1;
        }
        groups.push(groupid);
    }
    let mut reports: Vec<JobReport> = Vec::new();
    for (ji, spec) in jobs.iter().enumerate() {
        let mut merged: Option<JobReport> = None;
        for c in out.clones.iter().filter(|c| c.job == ji) {
            let mut r = JobReport::new(&spec.name, groups[ji]);
            r.description = spec.description.clone();
            r.stats = c.stats.clone();
            r.runtime_ns = c.runtime_ns;
            r.elapsed_ns = c.runtime_ns + spec.ramp_time_ns;
            r.error = if c.error.is_some() { 5 } else { 0 };
            r.job_options = spec.job_options.clone();
            r.zone_resets = (spec.zonemode == options::ZoneMode::Zbd).then_some(c.zone_resets);
            if spec.group_reporting {
                match merged.as_mut() {
                    Some(m) => m.merge(&r),
                    None => merged = Some(r),
                }
            } else {
                reports.push(r);
            }
        }
        if let Some(m) = merged {
            reports.push(m);
        }
    }
    reports
}

/// The `zonelab` section of the JSON output: what the device did.
fn zonelab_section(
    profile: &Profile,
    settings: &RunSettings,
    out: &RunOutput,
) -> serde_json::Value {
    let dev: std::cell::Ref<'_, Namespace> = out.device.borrow();
    let c = dev.counters();
    let f = dev.flash_counters();
    let page = profile.geometry.page_size.0;
    let mut v = json!({
        "profile": profile.name,
        "payload": match settings.payload { PayloadMode::Full => "full", PayloadMode::Fingerprint => "fingerprint" },
        "seed": settings.seed,
        "simulated_seconds": out.simulated_ns as f64 / 1e9,
        "simulated_ns": out.simulated_ns,
        "flash": {
            "reads": f.reads,
            "programs": f.programs,
            "erases": f.erases,
            "copybacks": f.copybacks,
            "padded_pages": c.padded_pages,
        },
        "zone_resets": c.zone_resets,
        "zone_finishes": c.zone_finishes,
        "zone_opens": c.zone_opens,
        "implicit_opens": c.implicit_opens,
        "zone_closes": c.zone_closes,
        "host_written_bytes": c.written_lbas * dev.lba_size(),
        "host_read_bytes": c.read_lbas * dev.lba_size(),
        "flash_written_bytes": (f.programs + f.copybacks) * page,
        "device_write_amplification": dev.write_amplification(),
        "write_buffer_stall_ns": dev.buffer_stall().0,
        "buffer_read_hits": c.buffer_hits,
        "command_errors": c.errors,
        "host_stack": { "dispatched": out.host_dispatched, "merged": out.host_merged },
        "events": out.sim_polls,
    });
    v["namespace"] = json!(if dev.zoned().is_some() {
        "zoned"
    } else {
        "conventional"
    });
    if let Some(g) = dev.gc_counters() {
        // Device garbage collection of a conventional namespace: logical blocks copied, victim
        // blocks erased, flash pages programmed by the copies, cleaning passes.
        v["gc"] = json!({
            "copies": g.gc_copies,
            "erases": g.gc_erases,
            "pages_programmed": g.gc_pages,
            "runs": g.gc_runs,
        });
    }
    v
}

fn summary(extra: &serde_json::Value) -> String {
    format!(
        "\nZoneLab device ({}) {} namespace: simulated {:.6}s; flash reads={} programs={} erases={} copybacks={}; \
         zone resets={} finishes={}; {}device WAF={:.3}\n",
        extra["profile"].as_str().unwrap_or("?"),
        extra["namespace"].as_str().unwrap_or("?"),
        extra["simulated_seconds"].as_f64().unwrap_or(0.0),
        extra["flash"]["reads"],
        extra["flash"]["programs"],
        extra["flash"]["erases"],
        extra["flash"]["copybacks"],
        extra["zone_resets"],
        extra["zone_finishes"],
        match extra.get("gc") {
            Some(g) => format!("GC copies={} erases={}; ", g["copies"], g["erases"]),
            None => String::new(),
        },
        extra["device_write_amplification"].as_f64().unwrap_or(0.0),
    )
}
