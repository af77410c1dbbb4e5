//! End-to-end tests of the conventional (block-interface) namespace through `zonelab fio`, and
//! seed 001 observation 11: under sustained writes a conventional SSD's write bandwidth swings
//! and concurrent reads wait behind garbage collection, while the ZNS twin stays steady.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

fn zonelab(dir: &Path, args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run zonelab")
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// The same shrunken flash for both devices (64 dies x 96 blocks x 32 pages of 16 KiB = 3 GiB),
/// so the conventional one fills and collects garbage within seconds.
const GEOMETRY: &[&str] = &[
    "--set",
    "blocks_per_plane=96",
    "--set",
    "pages_per_block=32",
];

struct Outcome {
    json: serde_json::Value,
    /// Write bandwidth of the four writers together per 200 ms interval (KiB/s), edges dropped.
    write_bw: Vec<f64>,
    read_iops: f64,
}

/// Fill the device, then four writers (128 KiB, QD 8 each) for 4 s with one 4 KiB QD 32 random
/// reader beside them — seed 001 §III-F's setup, unthrottled.
fn observation_11(profile: &str, extra_sets: &[&str], zoned: bool) -> Outcome {
    let dir = std::env::temp_dir().join(format!("zonelab-conv-{}-{profile}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut args = s(&["fio", &format!("--profile={profile}")]);
    args.extend(s(GEOMETRY));
    args.extend(s(extra_sets));
    args.extend(s(&["--output-format=json", "--bs=128k", "--iodepth=8"]));
    if zoned {
        args.push("--zonemode=zbd".into());
    }
    args.extend(s(&["--name=fill", "--rw=write"]));
    args.extend(s(&[
        "--name=w",
        "--stonewall",
        "--rw=randwrite",
        "--numjobs=4",
        "--time_based",
        "--runtime=4s",
        "--write_bw_log=obs11",
        "--log_avg_msec=200",
    ]));
    if zoned {
        args.push("--zone_append=1".into());
    }
    args.extend(s(&[
        "--name=r",
        "--rw=randread",
        "--bs=4k",
        "--iodepth=32",
        "--time_based",
        "--runtime=4s",
    ]));
    let o = zonelab(&dir, &args);
    assert!(
        o.status.success(),
        "zonelab {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).expect("fio JSON");
    let mut by_t: BTreeMap<u64, f64> = BTreeMap::new();
    for clone in 1..=4 {
        let log = std::fs::read_to_string(dir.join(format!("obs11_bw.{clone}.log")))
            .expect("bandwidth log of each writer");
        for line in log.lines() {
            let f: Vec<u64> = line.split(',').map(|x| x.trim().parse().unwrap()).collect();
            if f[2] == 1 {
                *by_t.entry(f[0]).or_default() += f[1] as f64;
            }
        }
    }
    let mut write_bw: Vec<f64> = by_t.into_values().collect();
    // The first and last intervals are partial.
    write_bw.remove(0);
    write_bw.pop();
    let read_iops = json["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["jobname"] == "r")
        .expect("reader job")["read"]["iops"]
        .as_f64()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    Outcome {
        json,
        write_bw,
        read_iops,
    }
}

fn cv(v: &[f64]) -> f64 {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64;
    var.sqrt() / mean
}

fn range(v: &[f64]) -> (f64, f64) {
    let min = v.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = v.iter().cloned().fold(0.0, f64::max);
    (min / 1024.0, max / 1024.0)
}

#[test]
fn garbage_collection_makes_the_conventional_ssd_swing_and_starve_reads() {
    let conv = observation_11("sn640-op7", &[], false);
    let zns = observation_11("zn540", &["--set", "zones=96"], true);

    let z = &conv.json["zonelab"];
    assert_eq!(z["namespace"], "conventional");
    let waf = z["device_write_amplification"].as_f64().unwrap();
    assert!(waf > 1.1, "conventional WAF {waf}");
    assert!(z["gc"]["copies"].as_u64().unwrap() > 0, "{z}");
    assert!(z["gc"]["erases"].as_u64().unwrap() > 0, "{z}");
    assert_eq!(zns.json["zonelab"]["namespace"], "zoned");
    assert!(zns.json["zonelab"].get("gc").is_none());

    let (cmin, cmax) = range(&conv.write_bw);
    let (zmin, zmax) = range(&zns.write_bw);
    let (ccv, zcv) = (cv(&conv.write_bw), cv(&zns.write_bw));
    let ratio = zns.read_iops / conv.read_iops;
    eprintln!(
        "observation 11: write MiB/s per 200 ms: conventional {cmin:.0}..{cmax:.0} (cv {ccv:.2}), \
         zns {zmin:.0}..{zmax:.0} (cv {zcv:.2}); read IOPS conventional {:.0}, zns {:.0} ({ratio:.1}x)",
        conv.read_iops, zns.read_iops
    );
    assert!(
        ccv > 1.5 * zcv,
        "conventional write bandwidth should swing more: cv {ccv:.3} vs {zcv:.3}"
    );
    let spread = |min: f64, max: f64, v: &[f64]| {
        (max - min) * 1024.0 * v.len() as f64 / v.iter().sum::<f64>()
    };
    let (cs, zs) = (
        spread(cmin, cmax, &conv.write_bw),
        spread(zmin, zmax, &zns.write_bw),
    );
    assert!(
        cs > 2.0 * zs,
        "(max - min) / mean of write bandwidth: conventional {cs:.2}, zns {zs:.2}"
    );
    // Seed 001 reports 3x; assert a conservative bound.
    assert!(
        ratio > 2.0,
        "reads beside writes: zns {} vs conventional {} IOPS",
        zns.read_iops,
        conv.read_iops
    );
}

#[test]
fn zoned_options_on_a_conventional_device_are_explained() {
    let dir = std::env::temp_dir();
    for opt in ["--zonemode=zbd", "--zone_append=1"] {
        let o = zonelab(
            &dir,
            &s(&[
                "fio",
                "--profile=sn640",
                "--name=x",
                "--rw=randwrite",
                "--bs=4k",
                "--number_ios=10",
                opt,
            ]),
        );
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("conventional") && err.contains("zn540"),
            "{err}"
        );
    }
    let o = zonelab(
        &dir,
        &s(&[
            "fio",
            "--profile=sn640",
            "--name=x",
            "--rw=randwrite",
            "--bs=4k",
            "--iodepth=4",
            "--number_ios=2000",
        ]),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("conventional"), "{out}");
    // zns create makes a conventional image (a companion for mkfs --companion), which the
    // zoned tools refuse by name.
    let path = dir.join(format!("zonelab-companion-{}.img", std::process::id()));
    let img = path.to_str().unwrap();
    let o = zonelab(
        &dir,
        &s(&[
            "zns",
            "create",
            img,
            "--profile",
            "sn640",
            "--set",
            "blocks_per_plane=32",
            "--set",
            "pages_per_block=64",
        ]),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("companion"));
    let o = zonelab(&dir, &s(&["zns", "report-zones", img]));
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("conventional") && err.contains("zoned device image"),
        "{err}"
    );
    let _ = std::fs::remove_file(&path);
}
