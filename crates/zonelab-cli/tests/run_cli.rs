//! End-to-end tests of `zonelab run`: a small fileserver experiment, its JSON, determinism, and
//! a malformed experiment.

use std::path::{Path, PathBuf};

mod common;
use common::zonelab;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("zonelab-run-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// A run's `waf.logical` is seed 000's WAF (§4.2): its host WAF plus the device's copies for the
/// file system (zone_compaction and plugging) per byte users wrote.
fn the_logical_waf_counts_the_device_copies(v: &serde_json::Value) {
    let (t, w) = (&v["traffic_bytes"], &v["waf"]);
    let copies = t["device_copy"].as_u64().unwrap() + t["plugging"].as_u64().unwrap();
    let user = v["workload"]["bytes_written"].as_u64().unwrap() as f64;
    let (host, logical) = (w["host"].as_f64().unwrap(), w["logical"].as_f64().unwrap());
    assert!(
        (logical - host - copies as f64 / user).abs() < 1e-9,
        "{w} {t}"
    );
}

fn experiment() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/fileserver-small.toml")
}

const SMALL: [&str; 8] = [
    "--set",
    "device.set.zones=20",
    "--set",
    "fs.utilization=0.5",
    "--set",
    "workload.threads=8",
    "--set",
    "run.duration=\"0.5s\"",
];

#[test]
fn a_small_fileserver_run_is_verified_clean_and_deterministic() {
    let exp = experiment();
    let (a, b) = (temp("a.json"), temp("b.json"));
    for out in [&a, &b] {
        let mut args = vec!["run", exp.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(SMALL);
        let o = zonelab(&args);
        assert!(
            o.status.success(),
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let ja = std::fs::read(&a).unwrap();
    assert_eq!(
        ja,
        std::fs::read(&b).unwrap(),
        "same experiment, same bytes"
    );
    let v: serde_json::Value = serde_json::from_slice(&ja).unwrap();
    for k in [
        "config",
        "sim",
        "throughput",
        "traffic_bytes",
        "waf",
        "gc",
        "device",
        "timeline",
        "verify",
        "fsck",
    ] {
        assert!(v.get(k).is_some(), "result has no {k}");
    }
    assert_eq!(v["fsck"]["clean"], true);
    assert_eq!(v["verify"]["mismatches"], 0);
    assert!(v["verify"]["reads_checked"].as_u64().unwrap() > 0);
    assert!(v["throughput"]["ops_per_sec"].as_f64().unwrap() > 0.0);
    // Below 1 is possible: files deleted before writeback never reach the device.
    assert!(v["waf"]["host"].as_f64().unwrap() > 0.0);
    the_logical_waf_counts_the_device_copies(&v);
    // Counters cover the measured window; the timeline the whole run, per 100 ms.
    let (from, to) = (
        v["window"]["from_ns"].as_u64().unwrap(),
        v["window"]["to_ns"].as_u64().unwrap(),
    );
    assert!(from > 0 && from < to && to <= v["sim"]["simulated_ns"].as_u64().unwrap());
    let tl = &v["timeline"];
    let util: Vec<f64> = tl["chip_utilization"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    assert_eq!(util.len(), tl["free_segments"].as_array().unwrap().len());
    assert!(util.iter().all(|&u| (0.0..=1.0).contains(&u)), "{util:?}");
    assert!(
        util.iter().any(|&u| u > 0.1),
        "the fill keeps the chips busy: {util:?}"
    );
    let mean = v["device"]["chip_utilization_mean"].as_f64().unwrap();
    assert!(mean > 0.0 && mean <= 1.0, "{mean}");
    std::fs::remove_file(&a).ok();
    std::fs::remove_file(&b).ok();
}

#[test]
fn the_block_layer_scheduler_is_the_experiments_choice() {
    let exp = experiment();
    let out = temp("none.json");
    let mut args = vec!["run", exp.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(SMALL);
    args.extend(["--set", "host.scheduler=none"]);
    let o = zonelab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["config"]["experiment"]["host"]["scheduler"], "none");
    assert_eq!(v["fsck"]["clean"], true);
    assert_eq!(v["verify"]["mismatches"], 0);
    std::fs::remove_file(&out).ok();
}

#[test]
fn bad_experiments_are_explained() {
    let exp = experiment();
    let exp = exp.to_str().unwrap();
    let tpcc = experiment().with_file_name("tpcc-small.toml");
    let tpcc = tpcc.to_str().unwrap();
    let out = temp("bad.json");
    let out = out.to_str().unwrap();
    // The same experiment measured by operations instead of time.
    let by_ops = temp("no-duration.toml");
    let text = std::fs::read_to_string(exp).unwrap();
    std::fs::write(
        &by_ops,
        text.lines()
            .filter(|l| !l.starts_with("duration"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let no_duration = by_ops.to_str().unwrap();
    // The arguments after `run`, and what the error must say.
    let cases: [(&[&str], &str); 20] = [
        (
            &[exp, "-o", out, "--set", "fs.policy=nonsense"],
            "unknown policy",
        ),
        (&[exp, "--set", "workload.kind=nope"], "workload kind"),
        (
            &[exp, "--set", "workload.params.nfiles=100"],
            "sizes the fileset twice",
        ),
        (
            &[
                exp,
                "--set",
                "fs.policy=izc",
                "--set",
                "fs.options.cached_pages=maybe",
            ],
            "use host (IZC-H) or device (IZC-D)",
        ),
        (
            &[exp, "--set", "fs.options.allocation=cab"],
            "takes no option",
        ),
        (
            &[exp, "--set", "run.warmup_written=\"lots\""],
            "run.warmup_written",
        ),
        (
            &[
                exp,
                "--set",
                "fs.policy=znsplus",
                "--set",
                "fs.options.cold_benefit=some",
            ],
            "use none",
        ),
        (
            &[exp, "--set", "host.scheduler=deadline"],
            "expected `none` or `mq-deadline`",
        ),
        (
            &[exp, "--set", "host.write_page=\"fast\""],
            "host.write_page",
        ),
        (&["/nonexistent.toml"], "cannot read experiment"),
        (
            &[exp, "--set", "fs.reserved_zones=100000"],
            "reserved_zones = 100000 does not fit",
        ),
        (
            &[exp, "--set", "run.duration=\"0s\""],
            "run.duration: 0s measures nothing",
        ),
        (
            &[no_duration, "--set", "run.ops=0"],
            "run.ops: 0 measures nothing",
        ),
        (
            &[exp, "--set", "host.dram=\"100KiB\""],
            "less than the page cache's minimum of 256 KiB",
        ),
        (&[exp, "--set", "host.cores=0"], "at least 1 core"),
        (
            &[exp, "--set", "host.inactive_ratio=0"],
            "host.inactive_ratio: 0 would keep no page active",
        ),
        (
            &[exp, "--set", "fs.segs_per_zone=3"],
            "cannot format the file system on profile znsplus-mlc: invalid argument: segs_per_zone (3) must divide",
        ),
        // A workload's own error is not reported as the device's.
        (
            &[exp, "--set", "workload.threads=0"],
            "error: threads = 0: use 1 to 4096 simulated threads",
        ),
        // A data set that fills the file system: what to change.
        (
            &[tpcc, "--set", "fs.utilization=1.0"],
            "no space left on the file system: the workload outgrew the file system; lower \
             fs.utilization",
        ),
        // The run's times read as fio's: minutes and hours too.
        (
            &[exp, "--set", "run.warmup=\"10x\""],
            "run.warmup: duration '10x': use a number with us, ms, s, m or h",
        ),
    ];
    for (args, says) in cases {
        let o = zonelab(&[&["run"], args].concat());
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    std::fs::remove_file(&by_ops).ok();
}

/// `--gc-log` to a path that cannot be written fails before the run; a run that fails leaves
/// an existing log as it was and creates none.
#[test]
fn the_reclamation_log_needs_a_writable_path_and_survives_a_failed_run() {
    let exp = experiment();
    let exp = exp.to_str().unwrap();
    let o = zonelab(&["run", exp, "--gc-log", "/nonexistent-dir/gc.jsonl"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("cannot write the reclamation log /nonexistent-dir/gc.jsonl"),
        "{err}"
    );
    let (kept, new) = (temp("kept-gc.jsonl"), temp("new-gc.jsonl"));
    std::fs::write(&kept, "an earlier log\n").unwrap();
    for log in [&kept, &new] {
        let o = zonelab(&[
            "run",
            exp,
            "--gc-log",
            log.to_str().unwrap(),
            "--set",
            "fs.policy=nope",
        ]);
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("unknown policy 'nope'"));
    }
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "an earlier log\n");
    assert!(!new.exists(), "no log from a failed run");
    std::fs::remove_file(&kept).ok();
}

#[test]
fn a_run_with_the_metadata_on_a_companion_device_is_verified_and_clean() {
    let exp = experiment();
    let out = temp("companion.json");
    let mut args = vec!["run", exp.to_str().unwrap(), "-o", out.to_str().unwrap()];
    args.extend(SMALL);
    args.extend([
        // Long enough for checkpoints inside the measured window.
        "--set",
        "run.duration=\"2s\"",
        "--set",
        "device.metadata=\"companion\"",
        "--set",
        "device.companion.profile=\"sn640\"",
        "--set",
        "device.companion.set.blocks_per_plane=32",
        "--set",
        "device.companion.set.pages_per_block=64",
    ]);
    let o = zonelab(&args);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["fsck"]["clean"], true);
    assert_eq!(v["verify"]["mismatches"], 0);
    assert!(v["verify"]["reads_checked"].as_u64().unwrap() > 0);
    // No conventional zones added to the zoned device; the companion took the metadata.
    assert_eq!(v["config"]["metadata_zones_added"], 0);
    assert_eq!(v["config"]["profile"]["zns"]["conventional_zones"], 0);
    assert_eq!(v["config"]["experiment"]["device"]["metadata"], "companion");
    assert_eq!(
        v["config"]["companion_profile"]["namespace"],
        "conventional"
    );
    let c = &v["device"]["companion"];
    assert!(c["written_lbas"].as_u64().unwrap() > 0, "{c}");
    assert!(c["flash_programs"].is_u64(), "{c}");
    std::fs::remove_file(&out).ok();

    // A zoned companion, an unknown metadata place and a stray companion section say what to do.
    for (sets, want) in [
        (
            vec![
                "device.metadata=\"companion\"",
                "device.companion.profile=\"zn540\"",
            ],
            "must be a conventional one",
        ),
        (
            vec!["device.metadata=\"elsewhere\""],
            "use \"zones\" or \"companion\"",
        ),
        (
            vec!["device.companion.profile=\"sn640\""],
            "only with device.metadata = \"companion\"",
        ),
    ] {
        let mut args = vec!["run", exp.to_str().unwrap(), "-o", out.to_str().unwrap()];
        for s in &sets {
            args.extend(["--set", s]);
        }
        let o = zonelab(&args);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{sets:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// Runs `exp` with file-system policy `policy` on 24 zones, 90% full, for 1 simulated second,
/// writing the result to `out` and the reclamation log to `log`; the run must succeed.
fn run_at_90_percent(exp: &Path, policy: &str, out: &Path, log: &Path) {
    let policy = format!("fs.policy={policy}");
    let o = zonelab(&[
        "run",
        exp.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--gc-log",
        log.to_str().unwrap(),
        "--set",
        "device.set.zones=24",
        "--set",
        "fs.utilization=0.9",
        "--set",
        "workload.threads=8",
        "--set",
        "run.duration=\"1s\"",
        "--set",
        &policy,
    ]);
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// IZC (seed 000 §3.2.1): cleaning at 90% is done by the device's zone_compaction, mostly by
/// copyback with copyback-aware allocation; the run is verified and fsck-clean, and its
/// reclamation log is the same bytes on a second run.
#[test]
fn an_izc_run_compacts_zones_inside_the_device() {
    let exp = experiment();
    let out = temp("izc.json");
    let (log, again) = (temp("izc-gc.jsonl"), temp("izc-gc-again.jsonl"));
    for l in [&log, &again] {
        run_at_90_percent(&exp, "izc", &out, l);
    }
    assert_eq!(
        std::fs::read(&log).unwrap(),
        std::fs::read(&again).unwrap(),
        "same experiment, same log"
    );
    std::fs::remove_file(&again).ok();
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["fsck"]["clean"], true);
    assert_eq!(v["verify"]["mismatches"], 0);
    let gc = &v["gc"];
    let izc = gc["by_method"]["izc"].as_u64().unwrap();
    assert!(izc > 0, "{gc}");
    assert_eq!(gc["by_method"]["host_copy"], 0);
    let d = &v["device"];
    let (cb, rp) = (
        d["copybacks"].as_u64().unwrap(),
        d["readprogram_copies"].as_u64().unwrap(),
    );
    assert!(d["zone_compactions"].as_u64().unwrap() > 0, "{d}");
    // In blocks: a copyback moves a whole chunk (4 blocks of 4 KiB in a 16 KiB page), a read
    // + program chunk 1 to 4, and together they are every block IZC copied.
    let (cb_blocks, rp_blocks) = (
        d["copyback_blocks"].as_u64().unwrap(),
        d["readprogram_blocks"].as_u64().unwrap(),
    );
    assert_eq!(cb_blocks, 4 * cb, "{d}");
    assert!((rp..=4 * rp).contains(&rp_blocks), "{d}");
    assert_eq!(
        cb_blocks + rp_blocks,
        gc["blocks_copied_in_device"].as_u64().unwrap(),
        "{v}"
    );
    assert!(
        cb > rp,
        "copyback-aware allocation: {cb} copybacks, {rp} read+program"
    );
    assert!(v["traffic_bytes"]["device_copy"].as_u64().unwrap() > 0);
    the_logical_waf_counts_the_device_copies(&v);
    the_reclamation_log_accounts_for_the_window(&std::fs::read_to_string(&log).unwrap(), &v);
    std::fs::remove_file(&out).ok();
    std::fs::remove_file(&log).ok();
}

/// ZNS+ (seed 000 §3.2.2, §3.3.2, Table 5): at 90% hybrid segment recycling reclaims most
/// zones by threaded logging, whose skipped blocks the device plugs, rather than by
/// compaction; the run is verified and fsck-clean.
#[test]
fn a_znsplus_run_reclaims_zones_by_threaded_logging() {
    let exp = experiment();
    let out = temp("znsplus.json");
    let log = temp("znsplus-gc.jsonl");
    run_at_90_percent(&exp, "znsplus", &out, &log);
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["fsck"]["clean"], true);
    assert_eq!(v["verify"]["mismatches"], 0);
    let by = &v["gc"]["by_method"];
    let tl = by["threaded_logging"].as_u64().unwrap();
    let sc = by["izc"].as_u64().unwrap();
    assert!(tl > 0 && tl >= sc, "{by}");
    // Hybrid segment recycling's profile over the window: alpha once the device copied a
    // data victim's blocks, beta a non-negative number or not yet known.
    let t = &v["gc"]["threaded_logging"];
    if v["gc"]["blocks_copied_in_device"].as_u64().unwrap() > 0 {
        assert!(t["alpha_data"].as_f64().is_some_and(|a| a >= 0.0), "{t}");
    }
    assert!(
        t["beta"].is_null() || t["beta"].as_f64().unwrap() >= 0.0,
        "{t}"
    );
    let seen = &t["beta_observed"];
    for kind in ["cold", "other"] {
        let n = |k: &str| seen[format!("{kind}_{k}")].as_u64().unwrap();
        assert!(n("still") <= n("seen"), "{seen}");
    }
    let d = &v["device"];
    // The device counts a TL_open when it runs, the file system when it asks: one may cross
    // a window edge.
    assert!(d["tl_opens"].as_u64().unwrap().abs_diff(tl) <= 1, "{d}");
    let plugged = d["plugged_blocks_background"].as_u64().unwrap()
        + d["plugged_blocks_on_demand"].as_u64().unwrap();
    assert!(plugged > 0, "{d}");
    assert_eq!(
        v["traffic_bytes"]["plugging"].as_u64().unwrap(),
        plugged * 4096
    );
    the_logical_waf_counts_the_device_copies(&v);
    the_reclamation_log_accounts_for_the_window(&std::fs::read_to_string(&log).unwrap(), &v);
    std::fs::remove_file(&out).ok();
    std::fs::remove_file(&log).ok();
}

/// `--gc-log`: one JSON object a line, in the order the events ended; the measured window's compactions and
/// threaded-logging choices are the result's counts, its data victims' phases Fig. 6's means,
/// and every choice HSR weighed went to the cheaper way.
fn the_reclamation_log_accounts_for_the_window(text: &str, v: &serde_json::Value) {
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let measured: Vec<_> = events.iter().filter(|e| e["measured"] == true).collect();
    let first = events.iter().position(|e| e["measured"] == true).unwrap();
    assert!(
        events[first..].iter().all(|e| e["measured"] == true),
        "one window"
    );
    let of = |kind: &'static str| measured.iter().filter(move |e| e["event"] == kind);
    let u = |x: &serde_json::Value| x.as_u64().unwrap();
    assert_eq!(
        of("compaction").count() as u64,
        u(&v["gc"]["zones_cleaned"])
    );
    // The zones cleaned by the log that wrote each, as the log names the victims' logs.
    let by_log = v["gc"]["by_victim_log"].as_object().expect("by_victim_log");
    assert_eq!(by_log.len(), 6, "{by_log:?}");
    for (log, n) in by_log {
        let logged = of("compaction")
            .filter(|e| e["log"] == log.as_str())
            .count() as u64;
        assert_eq!(logged, u(n), "{log}");
    }
    let chose = |how: &str| of("reclaim_choice").filter(|e| e["chose"] == how).count() as u64;
    // A log chooses its next zone when its zone fills and reopens it at its next block, so
    // each of the five logs that can reopen zones may have a choice on either side of a
    // window edge from its TL_open.
    let opened = u(&v["gc"]["by_method"]["threaded_logging"]);
    assert!(
        chose("threaded_logging").abs_diff(opened) <= 5,
        "{} {opened}",
        chose("threaded_logging")
    );
    assert_eq!(
        chose("compaction"),
        u(&v["gc"]["threaded_logging"]["compaction_preferred"])
    );
    // Each choice of compaction has one cause.
    let why = &v["gc"]["threaded_logging"]["compaction_preferred_for"];
    assert_eq!(
        ["cold_benefit", "other_log", "pre_invalid", "unavailable"]
            .iter()
            .map(|k| u(&why[k]))
            .sum::<u64>(),
        chose("compaction"),
        "{why}"
    );
    for e in of("reclaim_choice") {
        let w = &e["weighed"];
        if !w.is_null() {
            let (tl, sc) = (
                w["c_tl_ns"].as_f64().unwrap(),
                w["c_sc_ns"].as_f64().unwrap(),
            );
            assert_eq!(tl <= sc, e["chose"] == "threaded_logging", "{e}");
            // The victim's pre-invalid blocks are counted as the candidate's are: the same
            // zone gives the same counts.
            let victim_pre_invalid = u(&w["victim_pre_invalid_blocks"]);
            if w["victim_zone"] == e["zone"] {
                assert_eq!(victim_pre_invalid, u(&e["pre_invalid_blocks"]), "{e}");
                assert_eq!(w["victim_valid_blocks"], e["valid_blocks"], "{e}");
            }
        }
    }
    let data: Vec<u64> = of("compaction")
        .filter(|e| e["log"].as_str().unwrap().ends_with("_data"))
        .map(|e| {
            ["init", "read", "write", "checkpoint"]
                .iter()
                .map(|p| u(&e["phases_ns"][p]))
                .sum()
        })
        .collect();
    let fig6 = &v["gc"]["compaction_ns"];
    assert_eq!(data.len() as u64, u(&fig6["victims"]));
    if !data.is_empty() {
        let mean = data.iter().sum::<u64>() / data.len() as u64;
        // The result sums the phases' means, each rounded down.
        assert!(mean.abs_diff(u(&fig6["mean_total"])) < 4, "{mean} {fig6}");
    }
    // Each event is logged when it is over: a choice when made, a compaction once durable, a
    // periodic checkpoint at its end.
    let logged: Vec<u64> = events
        .iter()
        .map(|e| match e["event"].as_str().unwrap() {
            "compaction" => u(&e["durable_ns"]),
            "reclaim_choice" => u(&e["at_ns"]),
            "periodic_checkpoint" => u(&e["end_ns"]),
            other => panic!("unknown event {other}"),
        })
        .collect();
    assert!(logged.windows(2).all(|w| w[0] <= w[1]), "{logged:?}");
}

/// `run.warmup_written`: the measured window opens only once the workload has written that
/// much user data after `warmup`.
#[test]
fn the_window_opens_after_the_data_asked_for_is_written() {
    let exp = experiment();
    let window = |extra: &[&str]| {
        let out = temp(&format!("warm{}.json", extra.len()));
        let mut args = vec!["run", exp.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend(SMALL);
        args.extend(extra);
        let o = zonelab(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        std::fs::remove_file(&out).ok();
        v["window"]["from_ns"].as_u64().unwrap()
    };
    let plain = window(&[]);
    let warm = window(&["--set", "run.warmup_written=\"64MiB\""]);
    // 8 threads of fileserver write well under 64 MiB per 0.1 s of simulated time.
    assert!(warm > plain + 100_000_000, "{plain} -> {warm}");
}
