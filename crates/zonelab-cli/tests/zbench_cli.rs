//! Tests of `zonelab zbench`: the binary end to end on a small device, and ZoneLab's zn540
//! distributions against the real ZN540 measurements of the characterization paper's artifact
//! (`../shared/data/zn540-measurements` beside the workspace; override with
//! `ZONELAB_ZN540_DATA=DIR`). The comparison tests skip, with a message, when the data is absent.
//!
//! Tolerances: relative error of ZoneLab's mean and median against the real distribution's.
//! Cases today's model does not match are separate `#[ignore]` tests named for what is off; run
//! them with `cargo test -p zonelab-cli --test zbench_cli -- --ignored` while calibrating.

use std::path::PathBuf;
use std::sync::OnceLock;
use zonelab_device::Profile;
use zonelab_workload::zbench::measurements::{self, ComparisonRow, Measurements};
use zonelab_workload::zbench::{self, ZbenchOptions, ZbenchReport};

mod common;
use common::{stdout, zonelab};

/// A zn540 of 16 zones of 8 MiB with 8 pages per block: a quick run takes well under a second.
const SMALL: &[&str] = &[
    "--set",
    "zones=16",
    "--set",
    "zone_size=8MiB",
    "--set",
    "pages_per_block=8",
];

fn zbench_json(extra: &[&str]) -> (String, serde_json::Value) {
    let mut args = vec!["zbench", "--quick", "-o", "json"];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    let o = zonelab(&args);
    assert!(
        o.status.success(),
        "zonelab {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = stdout(&o);
    let v = serde_json::from_str(&text).expect("zbench JSON parses");
    (text, v)
}

#[test]
fn same_seed_gives_identical_json_with_every_case() {
    let (a, v) = zbench_json(&["--seed", "3"]);
    let (b, _) = zbench_json(&["--seed", "3"]);
    assert_eq!(a, b, "zbench output must be deterministic");
    assert_eq!(v["profile"], "zn540");
    let cap = v["device"]["zone_capacity_lbas"].as_u64().unwrap();
    let cases = v["cases"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c["name"].as_str().unwrap()).collect();
    for want in [
        "reset_0".to_string(),
        "reset_1".into(),
        format!("reset_{}", cap / 16),
        format!("reset_{cap}"),
        format!("finish_{}", cap - 1),
        format!("reset_finished_{}", cap / 2),
        "open".into(),
        "close".into(),
        "close_implicit_write".into(),
        "write_implicit_opened".into(),
        "append_explicit".into(),
        "reset_no_interference".into(),
        "reset_interference_read".into(),
        "write_interference".into(),
        "reset_interference_append".into(),
    ] {
        assert!(
            names.contains(&want.as_str()),
            "case {want} missing from {names:?}"
        );
    }
    for c in cases {
        for k in [
            "count", "mean_ns", "p50_ns", "p95_ns", "p99_ns", "min_ns", "max_ns",
        ] {
            assert!(c[k].is_number(), "{} lacks {k}", c["name"]);
        }
        assert!(c["p50_ns"].as_u64() <= c["p95_ns"].as_u64());
        assert!(c["p95_ns"].as_u64() <= c["p99_ns"].as_u64());
    }
    // A full zone takes longer to reset than an empty one (seed 001 obs. 10).
    let mean = |n: &str| {
        cases.iter().find(|c| c["name"] == n).unwrap()["mean_ns"]
            .as_f64()
            .unwrap()
    };
    assert!(mean(&format!("reset_{cap}")) > mean("reset_0"));
    assert!(mean("finish_1") > mean(&format!("finish_{}", cap - 1)));
}

#[test]
fn groups_select_cases_and_table_is_readable() {
    let (_, v) = zbench_json(&["--group", "open_close"]);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.iter().all(|c| c["group"] == "open_close"));
    let mut args = vec!["zbench", "--quick", "--group", "reset_occupancy"];
    args.extend_from_slice(SMALL);
    let o = zonelab(&args);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("[reset_occupancy]") && out.contains("reset_0") && out.contains("p95"));
}

#[test]
fn bad_inputs_are_errors_with_a_message() {
    let mut args = vec![
        "zbench",
        "--quick",
        "--compare-measurements",
        "/nonexistent/zn540",
    ];
    args.extend_from_slice(SMALL);
    let o = zonelab(&args);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no measurement files"));
    let o = zonelab(&["zbench", "--quick", "--group", "nope"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown case group"));
}

#[test]
fn comparison_is_printed_and_in_json_when_data_is_present() {
    let Some(dir) = data_dir() else { return };
    let d = dir.to_string_lossy().into_owned();
    let (_, v) = zbench_json(&["--group", "open_close", "--compare-measurements", &d]);
    let rows = v["comparison"].as_array().expect("comparison rows");
    assert!(
        rows.iter()
            .any(|r| r["case"] == "close" && r["rel_err"]["mean"].is_number())
    );
}

// ---- ZoneLab's zn540 against the real ZN540 ----

fn data_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os("ZONELAB_ZN540_DATA") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/data/zn540-measurements"),
    };
    if dir.join("partial_reset").is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: real ZN540 measurements not found at {} (set ZONELAB_ZN540_DATA)",
            dir.display()
        );
        None
    }
}

/// The zn540 run the comparisons share: quick mode (the model's zone state after a fill and an
/// idle second does not depend on the fill's write size), all groups.
fn comparison() -> Option<&'static (ZbenchReport, Vec<ComparisonRow>)> {
    static RUN: OnceLock<Option<(ZbenchReport, Vec<ComparisonRow>)>> = OnceLock::new();
    RUN.get_or_init(|| {
        let dir = data_dir()?;
        let real = Measurements::load(&dir).expect("measurements load");
        let profile = Profile::load("zn540", &[]).expect("zn540 profile");
        let report = zbench::run(&profile, &ZbenchOptions::quick(1)).expect("zbench runs");
        let rows = measurements::compare(&report, &real);
        eprintln!("{}", measurements::table(&rows));
        Some((report, rows))
    })
    .as_ref()
}

/// Asserts |error| <= `tol` of the mean and the median for each case; reports every miss.
fn check(cases: &[String], tol: f64) {
    let Some((_, rows)) = comparison() else {
        return;
    };
    let mut misses = Vec::new();
    for case in cases {
        let r = rows
            .iter()
            .find(|r| &r.case == case)
            .unwrap_or_else(|| panic!("no comparison row for {case}"));
        for (what, e) in [("mean", r.rel_err.mean), ("p50", r.rel_err.p50)] {
            let e = e.unwrap_or_else(|| panic!("{case}: no {what} to compare"));
            if e.abs() > tol {
                misses.push(format!("{case} {what}: {:+.1}%", e * 100.0));
            }
        }
    }
    assert!(
        misses.is_empty(),
        "outside ±{:.0}%: {misses:?}",
        tol * 100.0
    );
}

/// Like [`check`] for a paper value (one statistic only).
fn check_paper(case: &str, tol: f64) {
    let Some((_, rows)) = comparison() else {
        return;
    };
    let r = rows.iter().find(|r| r.case == case).expect("row");
    let e = [r.rel_err.mean, r.rel_err.p50, r.rel_err.p95]
        .into_iter()
        .flatten()
        .next()
        .expect("a paper statistic");
    assert!(
        e.abs() <= tol,
        "{case}: {:+.1}% vs the paper (±{:.0}%)",
        e * 100.0,
        tol * 100.0
    );
}

const CAP: u64 = 275_712;

fn names(prefix: &str, levels: &[u64]) -> Vec<String> {
    levels.iter().map(|l| format!("{prefix}{l}")).collect()
}

/// Seed 001 obs. 10, Fig. 5a: reset latency at every occupancy level within 15%.
#[test]
fn zn540_reset_by_occupancy_matches_real() {
    check(&names("reset_", &zbench::reset_levels(CAP)), 0.15);
}

/// Seed 001 obs. 10, Fig. 5b: finish latency at 1 LBA .. capacity − 1 within 15%, and the reset
/// of the finished zones.
#[test]
fn zn540_finish_by_occupancy_matches_real() {
    let levels: Vec<u64> = zbench::finish_levels(CAP)
        .into_iter()
        .filter(|&l| l > 0)
        .collect();
    check(&names("finish_", &levels), 0.15);
    check(&names("reset_finished_", &zbench::finish_levels(CAP)), 0.15);
}

#[test]
#[ignore = "model off: finishing an explicitly opened empty zone takes ~11.0 us (no padding, close-like firmware work); the ZN540 takes ~13.5 us (-18%)"]
fn zn540_finish_of_empty_open_zone_matches_real() {
    check(&["finish_0".into()], 0.15);
}

#[test]
fn zn540_close_matches_real() {
    check(&["close".into(), "close_implicit".into()], 0.15);
}

/// The write that reopens a closed zone (seed 001 §III-E, the artifact's close test).
#[test]
fn zn540_write_to_closed_zone_matches_real() {
    check(&["close_write".into(), "close_implicit_write".into()], 0.15);
}

#[test]
fn zn540_open_matches_paper() {
    check_paper("open", 0.15);
}

/// Seed 001 obs. 9: writes and appends in explicitly and implicitly opened zones, and the first
/// I/O of an implicitly opened zone.
#[test]
fn zn540_explicit_and_implicit_io_match_real() {
    let cases: Vec<String> = ["write", "append"]
        .iter()
        .flat_map(|op| {
            ["explicit", "implicit", "implicit_opened"]
                .iter()
                .map(move |k| format!("{op}_{k}"))
        })
        .collect();
    check(&cases, 0.15);
}

/// Seed 001 obs. 12: resets do not change the median latency of concurrent I/O.
#[test]
fn zn540_io_median_under_reset_matches_real() {
    let Some((_, rows)) = comparison() else {
        return;
    };
    for case in [
        "read_interference",
        "write_interference",
        "append_interference",
    ] {
        let r = rows.iter().find(|r| r.case == case).expect("row");
        let e = r.rel_err.p50.expect("p50");
        assert!(e.abs() <= 0.15, "{case} p50: {:+.1}%", e * 100.0);
    }
}

/// Seed 001 §III-G: the real ZN540's writes and appends stall 16 ms in the management windows
/// of concurrent resets, which doubles their mean; the model's windows hold I/O the same way.
#[test]
fn zn540_io_mean_under_reset_matches_real() {
    check(
        &["write_interference".into(), "append_interference".into()],
        0.15,
    );
}

/// Seed 001 obs. 13: resets with concurrent reads mostly finish by 15.6 ms, ~9% on the
/// housekeeping grid at 20-40 ms (p95 28 ms); with writes or appends they wait for the
/// management window (32 ms).
#[test]
fn zn540_reset_p95_under_io_matches_real() {
    let Some((_, rows)) = comparison() else {
        return;
    };
    let mut misses = Vec::new();
    for io in ["read", "write", "append"] {
        let case = format!("reset_interference_{io}");
        let r = rows.iter().find(|r| r.case == case).expect("row");
        let e = r.rel_err.p95.expect("p95");
        if e.abs() > 0.15 {
            misses.push(format!("{case} p95: {:+.1}%", e * 100.0));
        }
    }
    assert!(misses.is_empty(), "outside ±15%: {misses:?}");
}
