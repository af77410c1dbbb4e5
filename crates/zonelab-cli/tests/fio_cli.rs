//! End-to-end tests of `zonelab fio`: they run the built binary as a user would.

mod common;
use common::{stderr, stdout, zonelab};

/// A small zn540 so each run takes milliseconds.
const SMALL: &[&str] = &["--profile=zn540", "--set", "zones=16"];

/// `zonelab fio` on the small zn540 with `extra`, which must succeed: its output.
fn fio_ok(extra: &[&str]) -> String {
    let mut args = vec!["fio"];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    let o = zonelab(&args);
    assert!(
        o.status.success(),
        "zonelab {args:?} failed: {}",
        stderr(&o)
    );
    stdout(&o)
}

fn fio_json(extra: &[&str]) -> serde_json::Value {
    let args = [&["--output-format=json"][..], extra].concat();
    serde_json::from_str(&fio_ok(&args)).expect("fio JSON output parses")
}

#[test]
fn same_job_and_seed_give_identical_json() {
    let job = [
        "--name=mix",
        "--rw=randrw",
        "--bs=4k",
        "--iodepth=8",
        "--zonemode=zbd",
        "--size=64m",
        "--number_ios=3000",
        "--seed=42",
    ];
    let mut args = vec!["fio"];
    args.extend_from_slice(SMALL);
    args.push("--output-format=json");
    args.extend_from_slice(&job);
    let a = zonelab(&args);
    let b = zonelab(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn json_has_fio_shape_and_zonelab_section() {
    let v = fio_json(&[
        "--name=w",
        "--rw=write",
        "--bs=4k",
        "--zonemode=zbd",
        "--size=16m",
    ]);
    let job = &v["jobs"][0];
    assert_eq!(job["jobname"], "w");
    let w = &job["write"];
    assert_eq!(w["io_bytes"], 16 << 20);
    assert_eq!(w["total_ios"], 4096);
    assert!(w["iops"].as_f64().unwrap() > 1000.0);
    for key in ["lat_ns", "clat_ns", "slat_ns"] {
        for f in ["min", "max", "mean", "stddev"] {
            assert!(w[key][f].is_number(), "{key}.{f}");
        }
    }
    let pct = &w["clat_ns"]["percentile"];
    for p in ["50.000000", "99.000000", "99.900000"] {
        assert!(pct[p].as_u64().unwrap() > 0, "percentile {p}");
    }
    assert_eq!(job["read"]["total_ios"], 0);
    let z = &v["zonelab"];
    assert!(z["simulated_seconds"].as_f64().unwrap() > 0.0);
    // 16 MiB of 16 KiB pages = 1024 programs.
    assert_eq!(z["flash"]["programs"], 1024);
    assert_eq!(z["device_write_amplification"].as_f64().unwrap(), 1.0);
    assert_eq!(z["zone_resets"], 0);
}

#[test]
fn write_latency_follows_the_io_stack() {
    let lat = |extra: &[&str]| {
        let mut args = vec![
            "--name=w",
            "--rw=write",
            "--bs=4k",
            "--zonemode=zbd",
            "--size=8m",
        ];
        args.extend_from_slice(extra);
        let v = fio_json(&args);
        v["jobs"][0]["write"]["lat_ns"]["mean"].as_f64().unwrap()
    };
    let spdk = lat(&["--ioengine=spdk"]);
    let uring = lat(&["--ioengine=io_uring"]);
    let deadline = lat(&["--ioengine=io_uring", "--ioscheduler=mq-deadline"]);
    assert!(
        spdk < uring && uring < deadline,
        "{spdk} {uring} {deadline}"
    );
    let append = {
        let v = fio_json(&[
            "--name=a",
            "--rw=write",
            "--bs=4k",
            "--zonemode=zbd",
            "--size=8m",
            "--zone_append=1",
        ]);
        v["jobs"][0]["write"]["lat_ns"]["mean"].as_f64().unwrap()
    };
    assert!(append > spdk, "append {append} vs write {spdk}");
}

#[test]
fn mq_deadline_merges_queued_writes_to_a_zone() {
    let v = fio_json(&[
        "--name=w",
        "--rw=write",
        "--bs=4k",
        "--iodepth=32",
        "--zonemode=zbd",
        "--size=16m",
        "--ioengine=io_uring",
        "--ioscheduler=mq-deadline",
    ]);
    assert!(v["zonelab"]["host_stack"]["merged"].as_u64().unwrap() > 1000);
    let qd1 = fio_json(&[
        "--name=w",
        "--rw=write",
        "--bs=4k",
        "--zonemode=zbd",
        "--size=16m",
        "--ioengine=io_uring",
        "--ioscheduler=mq-deadline",
    ]);
    let iops = |v: &serde_json::Value| v["jobs"][0]["write"]["iops"].as_f64().unwrap();
    assert!(iops(&v) > 2.0 * iops(&qd1));
}

#[test]
fn job_files_with_global_sections_run() {
    let dir = std::env::temp_dir().join(format!("zonelab-fio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("jobs.fio");
    std::fs::write(
        &file,
        "; two jobs on separate zones\n[global]\nbs=8k\nzonemode=zbd\nsize=32m\n\n[a]\nrw=write\n\n[b]\nrw=write\noffset=2g\nnumjobs=2\noffset_increment=2g\ngroup_reporting\n",
    )
    .unwrap();
    let f = file.to_string_lossy().into_owned();
    let v = fio_json(&[&f]);
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[1]["jobname"], "b");
    assert_eq!(jobs[1]["write"]["io_bytes"], 2 * (32 << 20));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn normal_output_reads_like_fio() {
    let s = fio_ok(&[
        "--name=seq",
        "--rw=write",
        "--bs=4k",
        "--zonemode=zbd",
        "--size=8m",
    ]);
    assert!(s.contains("seq: (groupid=0, jobs=1)"), "{s}");
    assert!(s.contains("write: IOPS="), "{s}");
    assert!(s.contains("clat percentiles"), "{s}");
    assert!(s.contains("Run status group 0"), "{s}");
    assert!(s.contains("ZoneLab device (zn540)"), "{s}");
}

#[test]
fn zbd_trims_reset_zones_and_report_as_fio_trim() {
    // zn540: 2 GiB zones. Fill two of them, then trim the first four in order: four trims,
    // two of them resets (the empty zones' trims change nothing), with a ZN540 reset's
    // latency, reported in fio's "trim" section and TRIM group line.
    let job = [
        "--zonemode=zbd",
        "--name=fill",
        "--rw=write",
        "--bs=1m",
        "--size=4g",
        "--io_size=2g",
        "--name=trim",
        "--stonewall",
        "--rw=trim",
        "--bs=2g",
        "--size=8g",
    ];
    let v = fio_json(&job);
    let t = &v["jobs"][1]["trim"];
    assert_eq!(t["total_ios"], 4);
    assert_eq!(t["io_bytes"], 4u64 << 31);
    assert!(t["lat_ns"]["max"].as_u64().unwrap() > 1_000_000, "{t}");
    assert_eq!(v["jobs"][1]["write"]["total_ios"], 0);
    assert_eq!(v["zonelab"]["zone_resets"], 2);
    let s = fio_ok(&job);
    assert!(s.contains("  trim: IOPS="), "{s}");
    assert!(s.contains("; 2 zone resets"), "{s}");
    assert!(s.contains("   TRIM: bw="), "{s}");
}

#[test]
fn bad_options_are_named_and_fail() {
    let o = zonelab(&["fio", "--name=a", "--rw=write", "--blocksizee=4k"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("blocksizee"), "{}", stderr(&o));
    let o = zonelab(&["fio", "--name=a", "--rw=sideways"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("rw"), "{}", stderr(&o));
    let o = zonelab(&["fio", "--name=a", "--rw=write", "--bs=4x"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("bs"), "{}", stderr(&o));
    let o = zonelab(&[
        "fio",
        "--profile=zn540",
        "--set",
        "zone_dies=48",
        "--name=a",
        "--rw=read",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("zone_dies"), "{}", stderr(&o));
    let o = zonelab(&["fio", "--profile=nosuch", "--name=a", "--rw=read"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("zn540"), "{}", stderr(&o));
    let o = zonelab(&[
        "fio",
        "--name=a",
        "--rw=write",
        "--ioengine=spdk",
        "--ioscheduler=mq-deadline",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("ioscheduler"), "{}", stderr(&o));
    // Regions and sizes that cannot work are refused before any job runs (no report printed).
    for (args, says) in [
        (
            &["--rw=write", "--size=0"][..],
            "size (0 bytes) must hold at least one 4096-byte logical block",
        ),
        (
            &["--rw=write", "--bs=3k"][..],
            "bs (3072) must be a multiple of the device's 4096-byte logical block",
        ),
        (
            &["--rw=write", "--zonemode=zbd", "--offset=1g", "--size=1m"][..],
            "region of clone 0 (offset 1073741824 bytes, size 1048576 bytes) must start at a zone start",
        ),
        (
            &[
                "--rw=write",
                "--zonemode=zbd",
                "--size=2m",
                "--numjobs=2",
                "--offset_increment=1m",
            ][..],
            "region of clone 1",
        ),
        (
            &["--rw=write", "--numjobs=4096", "--name=b", "--rw=write"][..],
            "the jobs come to 4097 clones (numjobs: 'a' 4096, 'b' 1)",
        ),
        (
            &["--rw=trim", "--zonemode=zbd"][..],
            "trim block size 4096 is not the zone size 2147483648",
        ),
    ] {
        let o = zonelab(&[&["fio", "--profile=zn540", "--name=a"][..], args].concat());
        assert!(!o.status.success(), "{args:?}");
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    }
}

#[test]
fn writes_outside_zbd_mode_break_zone_rules_with_nvme_status() {
    let mut args = vec!["fio"];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(&[
        "--name=rw",
        "--rw=randwrite",
        "--bs=4k",
        "--size=64m",
        "--number_ios=10",
    ]);
    let o = zonelab(&args);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("Zone Invalid Write"), "{}", stderr(&o));
}

#[test]
fn bandwidth_iops_and_latency_logs_are_written() {
    let dir = std::env::temp_dir().join(format!("zonelab-bwlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("run").to_string_lossy().into_owned();
    let opt = format!("--write_bw_log={prefix}");
    let iops_opt = format!("--write_iops_log={prefix}");
    let lat_opt = format!("--write_lat_log={prefix}");
    fio_ok(&[
        "--name=w",
        "--rw=write",
        "--bs=128k",
        "--iodepth=8",
        "--zonemode=zbd",
        "--size=512m",
        "--log_avg_msec=50",
        &opt,
        &iops_opt,
        &lat_opt,
    ]);
    // Each log's rows: (time_ms, value), every one a write of 128 KiB.
    let rows = |kind: &str| -> Vec<(u64, u64)> {
        let file = format!("{prefix}_{kind}.1.log");
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        text.lines()
            .map(|l| {
                let f: Vec<u64> = l.split(", ").map(|x| x.parse().unwrap()).collect();
                assert_eq!(&f[2..], &[1, 128 << 10, 0], "{l}");
                (f[0], f[1])
            })
            .collect()
    };
    let bw = rows("bw");
    assert!(bw.len() >= 3, "{bw:?}");
    assert_eq!(bw[0].0, 50);
    // The IOPS log counts the same completions: IOPS x 128 KiB is the bandwidth in KiB/s.
    let iops = rows("iops");
    assert_eq!(iops.len(), bw.len());
    for (b, i) in bw.iter().zip(&iops) {
        assert_eq!((b.0, b.1), (i.0, i.1 * 128), "{bw:?} {iops:?}");
    }
    // Latency logs: an interval's mean total latency is its mean submission plus completion
    // latency (to a nanosecond of rounding).
    let (slat, clat, lat) = (rows("slat"), rows("clat"), rows("lat"));
    assert_eq!(lat.len(), bw.len());
    for ((s, c), l) in slat.iter().zip(&clat).zip(&lat) {
        assert!(
            s.0 == l.0 && c.0 == l.0 && l.1.abs_diff(s.1 + c.1) <= 1,
            "{s:?} {c:?} {l:?}"
        );
        assert!(c.1 > 10_000, "a 128 KiB write takes more than 10 us: {c:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
