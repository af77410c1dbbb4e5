//! Every file-system workload through `zonelab run` on a small ZNS+ MLC device filled to 90%:
//! reads verified, fsck clean, and for fileserver, varmail (issue 4's check) and the OLTP kinds
//! (tpcc, YCSB a and f) cleaning and zone resets in the measured window with write
//! amplification explained by its parts.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn experiment() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../experiments/fileserver-small.toml")
}

/// Runs the small fileserver experiment with `sets` (each `KEY=VALUE`) and returns its result.
fn run(name: &str, sets: &[&str]) -> Value {
    let out = std::env::temp_dir().join(format!(
        "zonelab-workloads-{}-{name}.json",
        std::process::id()
    ));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_zonelab"));
    cmd.arg("run").arg(experiment()).arg("-o").arg(&out);
    for s in ["device.set.zones=20", "fs.utilization=0.9"]
        .iter()
        .chain(sets)
    {
        cmd.arg("--set").arg(s);
    }
    let o = cmd.output().expect("zonelab runs");
    assert!(
        o.status.success(),
        "{name}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    std::fs::remove_file(&out).ok();
    assert_eq!(v["fsck"]["clean"], true, "{name}: {}", v["fsck"]);
    assert_eq!(v["verify"]["mismatches"], 0, "{name}");
    assert!(v["throughput"]["ops"].as_u64().unwrap() > 0, "{name}");
    v
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// Cleaning ran in the measured window and write amplification adds up.
fn check_cleaning(name: &str, v: &Value) {
    assert!(v["verify"]["reads_checked"].as_u64().unwrap() > 0, "{name}");
    let gc = &v["gc"];
    assert!(u(&gc["zones_cleaned"]) > 0, "{name}: no cleaning: {gc}");
    assert!(u(&gc["blocks_moved"]) > 0, "{name}: {gc}");
    assert!(
        u(&v["device"]["zone_resets"]) >= u(&gc["zones_cleaned"]),
        "{name}: every cleaned zone is reset: {}",
        v["device"]
    );
    let c = &gc["compaction_ns"];
    // Timed: the data victims (as the authors' F2FS times Fig. 6's).
    assert!(u(&c["victims"]) > 0, "{name}: {c}");
    assert_eq!(
        u(&c["mean_total"]),
        u(&c["init"]) + u(&c["read"]) + u(&c["write"]) + u(&c["checkpoint"])
    );
    // The write phase issues the moved pages' writes without waiting for them (the checkpoint
    // phase does), so it takes simulated time only when the cleaner waits for a file's lock; it
    // is reported all the same.
    assert!(u(&c["read"]) > 0 && c["write"].is_u64(), "{name}: {c}");
    // Host WAF: file-system writes of every class over the workload's writes.
    let t = &v["traffic_bytes"];
    let fs_writes: u64 = ["user_write", "node", "meta", "checkpoint", "gc_host_write"]
        .iter()
        .map(|k| u(&t[k]))
        .sum();
    let host = v["waf"]["host"].as_f64().unwrap();
    let user = u(&v["workload"]["bytes_written"]) as f64;
    assert!(
        (host - fs_writes as f64 / user).abs() < 1e-9,
        "{name}: {host} vs parts {t}"
    );
    assert!(host > 1.0, "{name}: cleaning and nodes cost writes: {host}");
    assert!(
        u(&t["gc_host_write"]) > 0 && u(&t["node"]) > 0,
        "{name}: {t}"
    );
    // Cleaning by host copy reads the valid blocks not in the page cache, then writes all.
    assert!(
        u(&t["gc_host_read"]) <= u(&t["gc_host_write"]),
        "{name}: {t}"
    );
    let flash = v["waf"]["flash"].as_f64().unwrap();
    assert!(
        (0.9..1.2).contains(&flash),
        "{name}: a ZNS drive adds little: {flash}"
    );
}

#[test]
fn fileserver_at_90_percent_cleans_and_verifies() {
    let v = run(
        "fileserver",
        &[
            "workload.threads=16",
            "run.warmup=\"0.5s\"",
            "run.duration=\"2s\"",
        ],
    );
    check_cleaning("fileserver", &v);
}

#[test]
fn varmail_at_90_percent_cleans_and_verifies() {
    let v = run(
        "varmail",
        &[
            "workload.kind=varmail",
            "workload.threads=16",
            "run.warmup=\"0.5s\"",
            "run.duration=\"2s\"",
        ],
    );
    check_cleaning("varmail", &v);
    // varmail fsyncs every file it writes.
    assert!(v["throughput"]["by_op"]["fsync"]["ops"].as_u64().unwrap() > 0);
}

#[test]
fn webserver_videoserver_fio_and_mdtest_run_verified() {
    let common = [
        "workload.preset=seed002",
        "workload.threads=8",
        "run.duration=\"1s\"",
    ];
    let cases: [(&str, &[&str]); 5] = [
        ("webserver", &["workload.kind=webserver"]),
        (
            "videoserver",
            &[
                "workload.kind=videoserver",
                "workload.params.filesize=\"64m\"",
            ],
        ),
        (
            "fio-randwrite-fsync",
            &[
                "workload.kind=fio",
                "workload.params.rw=randwrite",
                "workload.params.fsync=8",
            ],
        ),
        (
            "fio-read-direct",
            &[
                "workload.kind=fio",
                "workload.params.rw=read",
                "workload.params.direct=true",
            ],
        ),
        ("mdtest", &["workload.kind=mdtest"]),
    ];
    for (name, sets) in cases {
        let all: Vec<&str> = common.iter().chain(sets).copied().collect();
        let v = run(name, &all);
        if !matches!(name, "mdtest" | "fio-randwrite-fsync") {
            assert!(
                v["verify"]["reads_checked"].as_u64().unwrap() > 0,
                "{name}: reads are verified"
            );
        }
    }
}

#[test]
fn oltp_at_90_percent_cleans_and_verifies() {
    for (kind, write_op) in [
        ("tpcc", "new_order"),
        ("ycsb-a", "update"),
        ("ycsb-f", "read_modify_write"),
    ] {
        let k = format!("workload.kind={kind}");
        let v = run(
            kind,
            &[
                &k,
                "workload.threads=16",
                "run.warmup=\"0.5s\"",
                "run.duration=\"2s\"",
            ],
        );
        check_cleaning(kind, &v);
        let w = &v["workload"];
        assert_eq!(w["name"], kind);
        assert!(u(&v["throughput"]["by_op"][write_op]["ops"]) > 0, "{kind}");
        // Transactions are the operations; every commit reached a synced redo log.
        let c = &w["counters"];
        assert!(
            u(&c["commits"]) > 0 && u(&c["redo_fsyncs"]) > 0,
            "{kind}: {c}"
        );
        // Each log write is a commit's (group commit), a checkpoint's, or write-ahead logging
        // before a page flush; a write crossing from one log file to the next syncs both.
        let syncs = u(&c["commits"])
            + u(&c["checkpoints"])
            + u(&c["flush_batches"])
            + u(&c["single_page_flushes"]);
        assert!(u(&c["redo_fsyncs"]) <= 2 * syncs, "{kind}: {c}");
        assert!(u(&c["page_writes"]) > 0, "{kind}: {c}");
        // Every page written in place went to the doublewrite area first (a batch of up to
        // 120 pages and single-page flushes may straddle the window's start).
        let dw = u(&c["doublewrite_pages"]);
        assert!(dw.abs_diff(u(&c["page_writes"])) <= 256, "{kind}: {c}");
        // Page reads of the warm-up are checked too.
        assert!(u(&v["verify"]["reads_checked"]) >= u(&c["page_reads"]));
        let f = &w["fileset"];
        assert!(
            (f["utilization"].as_f64().unwrap() - 0.9).abs() < 0.01,
            "{kind}: {f}"
        );
    }
}
