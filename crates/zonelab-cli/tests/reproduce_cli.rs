//! End-to-end test of `zonelab reproduce zns-plus --quick` (seed 000 §4): every item of the
//! paper has its value and ZoneLab's in table.json, the plots exist, and every run was
//! verified and fsck-clean. Also: bad papers and options are explained.

use std::path::PathBuf;

mod common;
use common::zonelab;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("zonelab-repro-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

#[test]
fn zns_plus_quick_has_every_item_plot_and_clean_run() {
    let out = temp("zns-plus");
    let o = zonelab(&[
        "reproduce",
        "zns-plus",
        "--quick",
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("items within tolerance"), "{stdout}");
    assert!(
        stdout.contains("every run verified and fsck-clean"),
        "{stdout}"
    );
    let dir = out.join("zns-plus");
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("table.json")).unwrap()).unwrap();
    assert_eq!(table["quick"], true);
    // --quick runs each experiment once (seed 1); the full reproduction averages seeds.
    assert_eq!(table["seeds"], serde_json::json!([1]));
    // Table 4 takes three times the seeds, but --quick keeps to fewer repetitions.
    assert_eq!(table["table4_seeds"], serde_json::json!([1]));
    let items = table["items"].as_array().unwrap();
    for obs in [
        "Fig 6", "Table 4", "Fig 7a", "Fig 7b", "Table 5", "§3.3.2", "Fig 8", "Fig 9", "Fig 10",
        "Fig 11a", "Fig 11b", "Fig 12a", "Fig 12b",
    ] {
        let of: Vec<_> = items.iter().filter(|i| i["observation"] == obs).collect();
        assert!(!of.is_empty(), "no item for {obs}");
        // Judged items carry the paper's number and ZoneLab's.
        for i in of.iter().filter(|i| i["check"] != "report") {
            assert!(i["paper"].is_number(), "{i}");
            assert!(i["zonelab"].is_number(), "{i}");
            assert!(i["ok"].is_boolean(), "{i}");
        }
    }
    // The paper's stated numbers are there beside ZoneLab's.
    let paper = |metric: &str| {
        items
            .iter()
            .find(|i| i["metric"].as_str().unwrap().starts_with(metric))
            .unwrap_or_else(|| panic!("no item {metric}"))["paper"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(
        paper("copyback share of IZC's in-storage copies, varmail"),
        74.0
    );
    assert_eq!(paper("segments reclaimed by threaded logging, tpcc"), 85.8);
    assert_eq!(paper("θ_PI with the highest mean ZNS+ throughput"), 128.0);
    assert_eq!(paper("ZNS fileserver bandwidth, MLC"), 84.5);
    // Of the blocks IZC-H and IZC-D move, the device copies a share, and the host the rest.
    for (metric, stated) in [
        ("block copies IZC-H offloads to the device", 89.6),
        ("block copies IZC-D offloads to the device", 99.4),
    ] {
        assert_eq!(paper(metric), stated);
        let item = items
            .iter()
            .find(|i| i["metric"].as_str().unwrap().starts_with(metric))
            .unwrap();
        let share = item["zonelab"].as_f64().unwrap();
        assert!(share > 0.0 && share <= 100.0, "{item}");
    }
    for fig in [
        "fig6", "table4", "fig7", "table5", "theta", "fig8", "fig9", "fig10", "fig11", "fig12",
    ] {
        assert!(
            table["figures"][fig].is_object() || table["figures"][fig].is_array(),
            "{fig}"
        );
    }
    for png in [
        "fig6_compaction_time.png",
        "fig6_copyback_share.png",
        "table4_media.png",
        "fig7a_throughput.png",
        "fig7b_metadata_overhead.png",
        "table5_tl_bp.png",
        "theta_pi_sweep.png",
        "fig8a_throughput.png",
        "fig8b_waf.png",
        "fig9_chip_utilization.png",
        "fig10_chip_utilization_timeline.png",
        "fig11a_bandwidth.png",
        "fig11b_copyback_share.png",
        "fig12a_bandwidth.png",
        "fig12b_chip_utilization.png",
    ] {
        let b = std::fs::read(dir.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert!(b.starts_with(b"\x89PNG"), "{png}");
    }
    // Every run read back what it wrote and left a clean file system.
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runs.json")).unwrap()).unwrap();
    let runs = runs["runs"].as_array().unwrap();
    assert!(runs.len() >= 50, "{}", runs.len());
    for r in runs {
        assert_eq!(r["result"]["fsck_clean"], true, "{}", r["key"]);
        assert_eq!(r["result"]["verify"]["mismatches"], 0, "{}", r["key"]);
        assert!(
            r["result"]["verify"]["reads_checked"].as_u64().unwrap() > 0,
            "{}",
            r["key"]
        );
    }
    // The schemes ran as asked: no copyback without copyback, threaded logging under ZNS+.
    let run = |key: &str| {
        &runs
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("no run {key}"))["result"]
    };
    let nocb = run("fileserver/IZC w/o cpbk/mlc/u90/c16/l2");
    assert_eq!(nocb["device"]["copybacks"], 0);
    assert!(nocb["device"]["readprogram_copies"].as_u64().unwrap() > 0);
    // A run carries the override that makes it what its key says.
    let ran_with = |key: &str, set: &str| {
        let sets = &runs
            .iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("no run {key}"))["sets"];
        assert!(
            sets.as_array().unwrap().iter().any(|s| s == set),
            "{key}: {sets}"
        );
    };
    ran_with(
        "tpcc/ZNS+ HSR per freed block/mlc/u90/c16/l2",
        "fs.options.hsr_weighing=per-freed-block",
    );
    // The θ_PI sweep ran ZNS+ at the paper's 512 MB, scaled with the file system (32 zones:
    // 32 MiB).
    ran_with(
        "fileserver/ZNS+/mlc/u90/c16/l2/pi512",
        "fs.options.checkpoint_pre_invalid=\"32MiB\"",
    );
    // ZoneLab's value of the item named `metric` (exactly).
    let zonelab_of = |metric: &str| {
        items
            .iter()
            .find(|i| i["metric"] == metric)
            .unwrap_or_else(|| panic!("no item {metric}"))["zonelab"]
            .as_f64()
            .unwrap()
    };
    // Fig 6 reports how full the cleaned zones were, from the run's own counters: blocks
    // moved per zone cleaned, of a 16-chip zone's 8192 blocks.
    let izc = run("fileserver/IZC/mlc/u90/c16/l2");
    let valid = zonelab_of("valid share of the zones compaction cleaned, fileserver, IZC");
    let want = 100.0 * izc["gc"]["blocks_moved"].as_f64().unwrap()
        / izc["gc"]["zones_cleaned"].as_f64().unwrap()
        / 8192.0;
    assert!(
        (valid - want).abs() < 1e-9 && valid > 0.0 && valid <= 100.0,
        "{valid} vs {want}"
    );
    let plus = run("fileserver/ZNS+/mlc/u90/c16/l2");
    assert!(
        plus["gc"]["by_method"]["threaded_logging"]
            .as_u64()
            .unwrap()
            > 0
    );
    // Fig 8's WAF is the paper's: the device's plugging counts (§4.2), so it is above the
    // host's.
    let waf = zonelab_of("WAF at 90% utilization, ZNS+");
    assert_eq!(waf, plus["waf"]["logical"].as_f64().unwrap());
    assert!(waf > plus["waf"]["host"].as_f64().unwrap(), "{waf}");
    // --experiment prints a run's experiment; `zonelab run` on it gives that run's result.
    let key = "varmail/ZNS+/mlc/u90/c16/l2";
    let o = zonelab(&["reproduce", "zns-plus", "--quick", "--experiment", key]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exp = out.join("varmail-znsplus.toml");
    std::fs::write(&exp, &o.stdout).unwrap();
    let json = out.join("varmail-znsplus.json");
    let o = zonelab(&["run", exp.to_str().unwrap(), "-o", json.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alone: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ran = run(key);
    for (section, field) in [
        ("throughput", "mb_per_sec"),
        ("throughput", "ops_per_sec"),
        ("gc", "by_method"),
        ("gc", "blocks_copied_in_device"),
    ] {
        assert_eq!(
            alone[section][field], ran[section][field],
            "{section}.{field}"
        );
    }
    assert_eq!(alone["waf"], ran["waf"]);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_papers_and_options_are_explained() {
    let o = zonelab(&["reproduce", "zns_plus"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("zns-plus") && e.contains("characterization"),
        "{e}"
    );
    let out = temp("jobs0");
    let o = zonelab(&[
        "reproduce",
        "zns-plus",
        "--quick",
        "--jobs",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--jobs"));
    for (flag, value, names) in [
        ("--seeds", "0", "--seeds"),
        ("--only", "fig6,fig13", "fig13"),
        (
            "--zones",
            "30",
            "--zones 30: give a multiple of 4, at least 32",
        ),
        ("--zones", "34", "--zones 34"),
        ("--duration", "0s", "--duration 0s measures nothing"),
        ("--duration", "8 parsecs", "--duration 8 parsecs"),
        (
            "--experiment",
            "varmail/ZNS+",
            "varmail/ZNS+/mlc/u90/c16/l2",
        ),
        // --set may not change what tells the runs apart, nor a table that holds such a key,
        // and a key the experiment does not have is named before any run.
        (
            "--set",
            "fs.policy=f2fs",
            "the reproduction sets fs.policy itself",
        ),
        (
            "--set",
            "fs.options={}",
            "the reproduction sets fs.options.",
        ),
        (
            "--set",
            "run.duration=1s",
            "the reproduction sets run.duration itself",
        ),
        ("--set", "fs.raise=true", "unknown field `raise`"),
    ] {
        let mut args = vec!["reproduce", "zns-plus", "--quick", flag, value];
        // --experiment writes no folder (and refuses --out).
        if flag != "--experiment" {
            args.extend(["--out", out.to_str().unwrap()]);
        }
        let o = zonelab(&args);
        assert!(!o.status.success(), "{flag} {value}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(names), "{e}");
    }
    // The zns-plus options are refused by characterization, not ignored.
    for (flag, value) in [
        ("--zones", "64"),
        ("--duration", "32s"),
        ("--jobs", "2"),
        ("--seeds", "2"),
        ("--only", "fig6"),
        ("--experiment", "varmail/ZNS/mlc/u90/c16/l2"),
        ("--set", "fs.dirty_zones_raise_thresholds=true"),
    ] {
        let o = zonelab(&["reproduce", "characterization", flag, value]);
        assert!(!o.status.success(), "{flag}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            e.contains(&format!("{flag} applies to the zns-plus reproduction")),
            "{e}"
        );
    }
    // A key that is not one lists the keys that start with it, or else all of them.
    let listed = |key: &str| {
        let o = zonelab(&["reproduce", "zns-plus", "--experiment", key]);
        assert!(!o.status.success(), "{key}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = listed("varmail/ZNS+");
    assert!(e.contains("  varmail/ZNS+ (LP)/mlc/u90/c16/l2\n"), "{e}");
    assert!(!e.contains("fileserver/"), "{e}");
    let e = listed("varmail/IZC-H");
    assert!(e.contains("  fileserver/ZNS/mlc/u90/c16/l2\n"), "{e}");
    // The experiment `--experiment key` prints with the options `opts` before it.
    let printed = |opts: &[&str], key: &str| {
        let mut args = vec!["reproduce", "zns-plus"];
        args.extend(opts);
        args.extend(["--experiment", key]);
        let o = zonelab(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // --duration sets the printed run's window, and its header names it.
    let toml = printed(&["--duration", "16s"], "varmail/ZNS/mlc/u90/c16/l2");
    assert!(
        toml.contains("`zonelab reproduce zns-plus --duration 16s --seed 1`"),
        "{toml}"
    );
    assert!(toml.contains("duration = \"16s\""), "{toml}");
    // Without --duration the window grows with --zones: 32 s at 128 zones, 128 s at 512.
    let toml = printed(&["--zones", "512"], "varmail/ZNS/mlc/u90/c16/l2");
    assert!(toml.contains("duration = \"128s\""), "{toml}");
    // --set overrides a key of the printed run, and its header names it.
    let toml = printed(
        &["--set", "fs.dirty_zones_raise_thresholds=true"],
        "varmail/ZNS+/mlc/u90/c16/l2",
    );
    assert!(
        toml.contains(
            "`zonelab reproduce zns-plus --set fs.dirty_zones_raise_thresholds=true --seed 1`"
        ),
        "{toml}"
    );
    assert!(
        toml.contains("dirty_zones_raise_thresholds = true"),
        "{toml}"
    );
    // --experiment prints one run to standard output: options of a whole reproduction, and
    // a folder to write to, are refused.
    for (flag, value) in [("--seeds", "2"), ("--out", out.to_str().unwrap())] {
        let o = zonelab(&[
            "reproduce",
            "zns-plus",
            "--experiment",
            "varmail/ZNS/mlc/u90/c16/l2",
            flag,
            value,
        ]);
        assert!(!o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("{flag} does not apply")),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn only_runs_the_figures_asked_for() {
    let out = temp("only");
    let o = zonelab(&[
        "reproduce",
        "zns-plus",
        "--quick",
        "--only",
        "table5",
        "--zones",
        "36",
        "--duration",
        "0.5s",
        "--seeds",
        "2",
        "--set",
        "fs.dirty_zones_raise_thresholds=true",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Two seeds: the table judges their mean and shows each seed's value beside it.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("| seeds (min–max) |"), "{stdout}");
    assert!(
        stdout.contains("hold on each seed's runs alone"),
        "{stdout}"
    );
    let dir = out.join("zns-plus");
    let table: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("table.json")).unwrap()).unwrap();
    assert_eq!(table["figures_run"], serde_json::json!(["table5"]));
    assert_eq!(table["seeds"], serde_json::json!([1, 2]));
    let items = table["items"].as_array().unwrap();
    assert!(!items.is_empty());
    for i in items {
        assert_eq!(i["per_seed"].as_array().map(Vec::len), Some(2), "{i}");
    }
    assert!(
        items.iter().all(|i| i["observation"] == "Table 5"),
        "{items:?}"
    );
    // HSR's profiled beta per workload: a survival-rate difference floored at 0, or none
    // (no zone reopened a second time in the window).
    let betas: Vec<&serde_json::Value> = items
        .iter()
        .filter(|i| {
            i["metric"]
                .as_str()
                .unwrap()
                .starts_with("HSR's profiled beta")
        })
        .collect();
    assert_eq!(betas.len(), 5, "{items:?}");
    for b in betas {
        let v = &b["zonelab"];
        assert!(
            v.is_null() || v.as_f64().is_some_and(|x| (0.0..=100.0).contains(&x)),
            "{b}"
        );
    }
    // Three ZNS+ runs per workload (as the paper's, without B_cold, HSR per freed block), and
    // only Table 5's plot.
    assert_eq!(table["experiments"], 15);
    assert_eq!(table["runs"], 30);
    let pngs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".png"))
        .collect();
    assert_eq!(pngs, ["table5_tl_bp.png"]);
    // --zones sized the file system, and θ_PI with it (128 MB at 512 zones: 9 MiB at 36);
    // --duration set every run's measured window.
    assert_eq!(table["scale"]["zones_at_16_chips"], 36);
    assert_eq!(table["scale"]["duration"], "0.5s");
    assert_eq!(
        table["scale"]["overrides"],
        serde_json::json!(["fs.dirty_zones_raise_thresholds=true"])
    );
    assert!(
        stdout.contains("every run with --set fs.dirty_zones_raise_thresholds=true"),
        "{stdout}"
    );
    let runs: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runs.json")).unwrap()).unwrap();
    for r in runs["runs"].as_array().unwrap() {
        let sets = r["sets"].as_array().unwrap();
        assert!(sets.iter().any(|s| s == "device.set.zones=36"), "{sets:?}");
        assert!(
            sets.iter().any(|s| s == "run.duration=\"0.5s\""),
            "{sets:?}"
        );
        assert!(
            sets.iter()
                .any(|s| s == "fs.options.checkpoint_pre_invalid=\"9MiB\""),
            "{sets:?}"
        );
        // --set came last, after the reproduction's own keys.
        assert_eq!(
            sets.last().unwrap(),
            "fs.dirty_zones_raise_thresholds=true",
            "{sets:?}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}
