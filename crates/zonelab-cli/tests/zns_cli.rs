//! End-to-end tests of `zonelab zns`: they drive the built binary on device images in a fresh
//! temporary directory per test, on small devices so that each test stays fast.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

const LBA: usize = 4096;
/// Zone size of the test device (znsplus-mlc with 8 zones: 32 MiB zones of 4 KiB LBAs).
const ZS: u64 = 0x2000;

/// A unique directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "zonelab-zns-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&p);
        fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn zonelab(args: &[&str]) -> Output {
    zonelab_stdin(args, None)
}

fn zonelab_stdin(args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run zonelab");
    if let Some(data) = stdin {
        child.stdin.take().unwrap().write_all(data).unwrap();
    }
    child.wait_with_output().expect("wait for zonelab")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs a command that must succeed; returns its stdout.
fn ok(args: &[&str]) -> String {
    let o = zonelab(args);
    assert!(
        o.status.success(),
        "zonelab {args:?} failed\nstdout: {}\nstderr: {}",
        out(&o),
        err(&o)
    );
    out(&o)
}

/// Runs a command that must fail; returns its stderr.
fn fails(args: &[&str]) -> String {
    let o = zonelab(args);
    assert!(
        !o.status.success(),
        "zonelab {args:?} succeeded\nstdout: {}",
        out(&o)
    );
    assert_eq!(o.status.code(), Some(1), "stderr: {}", err(&o));
    let e = err(&o);
    assert!(!e.contains("panicked"), "zonelab panicked: {e}");
    e
}

/// Runs a command that must fail with an NVMe status naming `status`, and checks that the image
/// is byte-for-byte unchanged.
fn nvme_fails(img: &Path, args: &[&str], status: &str) -> String {
    let before = fs::read(img).unwrap();
    let e = fails(args);
    assert!(e.contains(status), "expected {status:?} in: {e}");
    assert!(e.contains("SCT"), "status code missing in: {e}");
    assert_eq!(
        fs::read(img).unwrap(),
        before,
        "a failed command changed the image"
    );
    e
}

/// A device with 8 zones of 0x2000 LBAs, max open/active 16 unless overridden.
fn create(dir: &TempDir, sets: &[&str]) -> PathBuf {
    let img = dir.path("dev.img");
    let s = img.to_str().unwrap().to_string();
    let mut args = vec![
        "zns",
        "create",
        &s,
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=8",
    ];
    for x in sets {
        args.push("--set");
        args.push(x);
    }
    let o = ok(&args);
    assert!(o.contains("8 zones"), "{o}");
    img
}

fn blocks(n: usize, seed: u8) -> Vec<u8> {
    (0..n * LBA)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn data_file(dir: &TempDir, name: &str, bytes: &[u8]) -> String {
    let p = dir.path(name);
    fs::write(&p, bytes).unwrap();
    p.to_str().unwrap().to_string()
}

fn report_json(img: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["zns", "report-zones", img, "-o", "json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&args)).expect("report-zones JSON")
}

fn zone_field(report: &serde_json::Value, i: usize, key: &str) -> serde_json::Value {
    report["zone_list"][i][key].clone()
}

#[test]
fn create_reports_all_zones_empty_and_identify_parses() {
    let dir = TempDir::new("create");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let table = ok(&["zns", "report-zones", s]);
    assert!(table.starts_with("nr_zones: 8\n"), "{table}");
    let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("SLBA:")).collect();
    assert_eq!(rows.len(), 8);
    assert!(rows.iter().all(|r| r.contains("State: EMPTY")), "{table}");
    assert!(
        rows[1].starts_with("SLBA: 0x2000     WP: 0x2000"),
        "{}",
        rows[1]
    );
    assert!(table.contains("latency: "), "{table}");

    let r = report_json(s, &[]);
    assert_eq!(r["nr_zones"], 8);
    assert_eq!(r["zone_list"].as_array().unwrap().len(), 8);
    assert_eq!(zone_field(&r, 7, "slba"), 7 * ZS);
    assert_eq!(zone_field(&r, 7, "cap"), ZS);
    assert_eq!(zone_field(&r, 7, "state"), "EMPTY");
    assert_eq!(zone_field(&r, 7, "type"), "SEQWRITE_REQ");

    let id: serde_json::Value =
        serde_json::from_str(&ok(&["zns", "id-ns", s, "-o", "json"])).expect("id-ns JSON");
    assert_eq!(id["nsze"], 8 * ZS);
    assert_eq!(id["lbafe"][0]["zsze"], ZS);
    assert_eq!(id["mor"], 15, "MOR is 0's based");
    assert_eq!(id["zonelab"]["profile"], "znsplus-mlc");
    let text = ok(&["zns", "id-ns", s]);
    assert!(text.contains("zsze:0x2000"), "{text}");
    assert!(text.contains("mar     : 0xf"), "{text}");

    // Paging and state filter.
    let r = report_json(s, &["-s", "0x4000", "-d", "2"]);
    assert_eq!(r["zone_list"].as_array().unwrap().len(), 2);
    assert_eq!(zone_field(&r, 0, "slba"), 2 * ZS);
    let r = report_json(s, &["--state", "full"]);
    assert_eq!(r["nr_zones"], 0);

    // An existing image is not overwritten without --force.
    let before = fs::read(&img).unwrap();
    let e = fails(&[
        "zns",
        "create",
        s,
        "--profile",
        "zn540",
        "--set",
        "zones=16",
    ]);
    assert!(e.contains("--force"), "{e}");
    assert_eq!(fs::read(&img).unwrap(), before);
    let o = ok(&[
        "zns",
        "create",
        s,
        "--profile",
        "zn540",
        "--set",
        "zones=16",
        "--force",
    ]);
    assert!(o.contains("16 zones"), "{o}");
}

#[test]
fn write_advances_the_write_pointer_and_misplaced_write_changes_nothing() {
    let dir = TempDir::new("write");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let d = data_file(&dir, "a.bin", &blocks(2, 1));
    let o = ok(&["zns", "write", s, "--slba", "0", "--data", &d]);
    assert!(o.contains("write: Success"), "{o}");
    assert!(o.contains("latency: "), "{o}");
    let r = report_json(s, &[]);
    assert_eq!(zone_field(&r, 0, "wp"), 2);
    assert_eq!(zone_field(&r, 0, "state"), "IMP_OPENED");

    // Not at the write pointer.
    let e = nvme_fails(
        &img,
        &["zns", "write", s, "-s", "0", "-d", &d],
        "Zone Invalid Write",
    );
    assert!(e.contains("write pointer"), "hint missing: {e}");
    nvme_fails(
        &img,
        &["zns", "write", s, "-s", "0x2001", "-d", &d],
        "Zone Invalid Write",
    );

    // Continues at the write pointer, given in hex; data from stdin.
    let o = zonelab_stdin(
        &["zns", "write", s, "-s", "0x2", "-d", "-"],
        Some(&blocks(1, 2)),
    );
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(zone_field(&report_json(s, &[]), 0, "wp"), 3);

    // Data that is not whole blocks is refused before reaching the device.
    let bad = data_file(&dir, "bad.bin", &[0u8; 100]);
    let before = fs::read(&img).unwrap();
    let e = fails(&["zns", "write", s, "-s", "3", "-d", &bad]);
    assert!(e.contains("multiple of the 4096-byte LBA size"), "{e}");
    assert_eq!(fs::read(&img).unwrap(), before);
}

#[test]
fn append_reports_its_lba_and_reads_return_the_bytes() {
    let dir = TempDir::new("append");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let first = blocks(3, 7);
    let second = blocks(2, 99);
    let a = data_file(&dir, "a.bin", &first);
    let b = data_file(&dir, "b.bin", &second);
    let o = ok(&["zns", "zone-append", s, "--zslba", "0x2000", "--data", &a]);
    assert!(o.contains("Success appended data to LBA 0x2000"), "{o}");
    let o = ok(&["zns", "zone-append", s, "-s", "0x2000", "-d", &b]);
    assert!(o.contains("Success appended data to LBA 0x2003"), "{o}");
    // Zone append needs the zone start.
    nvme_fails(
        &img,
        &["zns", "zone-append", s, "-s", "0x2001", "-d", &b],
        "Invalid Field in Command",
    );

    // Read to a file with the 1-based count.
    let outp = dir.path("out.bin");
    let o = ok(&[
        "zns",
        "read",
        s,
        "--slba",
        "0x2000",
        "--nlb",
        "5",
        "--data",
        outp.to_str().unwrap(),
    ]);
    assert!(o.contains("latency: "), "{o}");
    assert_eq!(
        fs::read(&outp).unwrap(),
        [first.clone(), second.clone()].concat()
    );

    // Read to stdout with nvme-cli's 0's based count: -c 1 is two blocks.
    let o = zonelab(&["zns", "read", s, "-s", "0x2003", "-c", "1"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(o.stdout, second);
    assert!(err(&o).contains("read: Success"));

    // Past the end of the namespace.
    nvme_fails(
        &img,
        &["zns", "read", s, "-s", "0x10000", "--nlb", "1"],
        "LBA Out of Range",
    );
}

#[test]
fn zone_management_transitions_and_their_errors() {
    let dir = TempDir::new("mgmt");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let d = data_file(&dir, "a.bin", &blocks(1, 3));
    ok(&["zns", "write", s, "-s", "0", "-d", &d]);

    let o = ok(&[
        "zns",
        "zone-mgmt-send",
        s,
        "--zslba",
        "0",
        "--zsa",
        "finish",
    ]);
    assert!(o.contains("Success"), "{o}");
    let r = report_json(s, &[]);
    assert_eq!(zone_field(&r, 0, "state"), "FULL");
    nvme_fails(
        &img,
        &["zns", "zone-append", s, "-s", "0", "-d", &d],
        "Zone Is Full",
    );

    ok(&["zns", "zone-mgmt-send", s, "-s", "0", "-z", "reset"]);
    let r = report_json(s, &[]);
    assert_eq!(zone_field(&r, 0, "state"), "EMPTY");
    assert_eq!(zone_field(&r, 0, "wp"), 0);
    ok(&["zns", "write", s, "-s", "0", "-d", &d]);

    // An empty zone cannot be closed.
    let e = nvme_fails(
        &img,
        &["zns", "zone-mgmt-send", s, "-s", "0x4000", "--zsa", "close"],
        "Invalid Zone State Transition",
    );
    assert!(e.contains("zone-mgmt-send"), "{e}");
    nvme_fails(
        &img,
        &["zns", "close-zone", s, "-s", "0x4000"],
        "Invalid Zone State Transition",
    );

    // nvme-cli's numeric action codes and the select-all flag.
    ok(&["zns", "zone-mgmt-send", s, "-s", "0x4000", "-z", "3"]);
    assert_eq!(zone_field(&report_json(s, &[]), 2, "state"), "EXP_OPENED");
    ok(&["zns", "zone-mgmt-send", s, "-z", "close", "-a"]);
    let r = report_json(s, &["--state", "closed"]);
    assert_eq!(r["nr_zones"], 2, "{r}");
    ok(&["zns", "reset-zone", s, "-a"]);
    assert_eq!(report_json(s, &["--state", "empty"])["nr_zones"], 8);
}

#[test]
fn opening_more_zones_than_the_limit_is_refused() {
    let dir = TempDir::new("limits");
    let img = create(&dir, &["max_open=2", "max_active=2"]);
    let s = img.to_str().unwrap();
    ok(&["zns", "open-zone", s, "-s", "0"]);
    ok(&["zns", "open-zone", s, "-s", "0x2000"]);
    let e = nvme_fails(
        &img,
        &["zns", "zone-mgmt-send", s, "-s", "0x4000", "-z", "open"],
        "Too Many",
    );
    assert!(
        e.contains("Too Many Active Zones") || e.contains("Too Many Open Zones"),
        "{e}"
    );
    let id: serde_json::Value =
        serde_json::from_str(&ok(&["zns", "id-ns", s, "-o", "json"])).unwrap();
    assert_eq!(id["zonelab"]["open_zones"], 2);
}

#[test]
fn injected_failures_make_zones_read_only_or_offline() {
    let dir = TempDir::new("inject");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let d = data_file(&dir, "a.bin", &blocks(1, 5));
    ok(&["zns", "write", s, "-s", "0x2000", "-d", &d]);
    let o = ok(&["zns", "inject", s, "--zone", "1", "--state", "read-only"]);
    assert!(o.contains("READONLY"), "{o}");
    nvme_fails(
        &img,
        &["zns", "zone-append", s, "-s", "0x2000", "-d", &d],
        "Zone Is Read Only",
    );
    // Data stays readable.
    let o = zonelab(&["zns", "read", s, "-s", "0x2000", "--nlb", "1"]);
    assert_eq!(o.stdout, blocks(1, 5));
    ok(&["zns", "inject", s, "--zone", "2", "--state", "offline"]);
    let r = report_json(s, &["--state", "offline"]);
    assert_eq!(r["nr_zones"], 1);
    assert_eq!(zone_field(&r, 0, "slba"), 2 * ZS);
    nvme_fails(
        &img,
        &["zns", "read", s, "-s", "0x4000", "--nlb", "1"],
        "Zone Is Offline",
    );
    let e = fails(&["zns", "inject", s, "--zone", "8", "--state", "offline"]);
    assert!(e.contains("does not exist"), "{e}");
    let e = fails(&["zns", "inject", s, "--zone", "0", "--state", "full"]);
    assert!(e.contains("read-only or offline"), "{e}");
}

#[test]
fn damaged_and_foreign_files_are_refused_clearly() {
    let dir = TempDir::new("damage");
    let img = create(&dir, &[]);
    let s = img.to_str().unwrap();
    let good = fs::read(&img).unwrap();

    // One corrupted byte in the body.
    let mut bytes = good.clone();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x10;
    let bad = dir.path("corrupt.img");
    fs::write(&bad, &bytes).unwrap();
    let e = fails(&["zns", "report-zones", bad.to_str().unwrap()]);
    assert!(e.contains("checksum"), "{e}");
    assert!(
        e.contains("corrupt.img"),
        "the error must name the file: {e}"
    );

    // Truncated.
    let short = dir.path("short.img");
    fs::write(&short, &good[..good.len() - 10]).unwrap();
    let e = fails(&["zns", "id-ns", short.to_str().unwrap()]);
    assert!(e.contains("truncated"), "{e}");

    // Not an image at all.
    let other = dir.path("notes.txt");
    fs::write(&other, "some text, not a device\n").unwrap();
    let e = fails(&["zns", "report-zones", other.to_str().unwrap()]);
    assert!(e.contains("not a ZoneLab device image"), "{e}");
    let empty = dir.path("empty.img");
    fs::write(&empty, b"").unwrap();
    let e = fails(&["zns", "report-zones", empty.to_str().unwrap()]);
    assert!(e.contains("not a ZoneLab device image"), "{e}");

    // Newer format version.
    let mut newer = good.clone();
    newer[8] = newer[8].wrapping_add(1);
    let nv = dir.path("newer.img");
    fs::write(&nv, &newer).unwrap();
    let e = fails(&["zns", "report-zones", nv.to_str().unwrap()]);
    assert!(e.contains("newer ZoneLab"), "{e}");

    // Missing file, bad numbers, missing data file.
    let e = fails(&[
        "zns",
        "report-zones",
        dir.path("missing.img").to_str().unwrap(),
    ]);
    assert!(e.contains("missing.img"), "{e}");
    let o = zonelab(&["zns", "read", s, "-s", "12k", "--nlb", "1"]);
    assert!(!o.status.success());
    assert!(err(&o).contains("not a number"), "{}", err(&o));
    let e = fails(&[
        "zns",
        "write",
        s,
        "-s",
        "0",
        "-d",
        dir.path("nope.bin").to_str().unwrap(),
    ]);
    assert!(e.contains("nope.bin"), "{e}");
    let e = fails(&[
        "zns",
        "create",
        dir.path("x.img").to_str().unwrap(),
        "--profile",
        "no-such",
    ]);
    assert!(e.contains("unknown device profile"), "{e}");
    assert_eq!(fs::read(&img).unwrap(), good);
}

/// A format 2 image written by the previous build (see tests/fixtures/README.md) loads, reports
/// the zones that build reported, keeps working, and is saved in the current format.
#[test]
fn images_of_the_previous_build_still_load() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let old = fs::read(fixtures.join("v2-znsplus-mlc.img")).unwrap();
    let want = fs::read_to_string(fixtures.join("v2-znsplus-mlc.report-zones.txt")).unwrap();
    assert_eq!(old[8], 2, "the fixture is a format 2 image");
    let dir = TempDir::new("v2");
    let img = dir.path("v2.img");
    let s = img.to_str().unwrap();
    fs::write(&img, &old).unwrap();
    assert_eq!(ok(&["zns", "report-zones", s]), want);
    // Saved by this build: the current format, same zones, and the old data still reads.
    assert!(fs::read(&img).unwrap()[8] > 2);
    let r = report_json(s, &[]);
    assert_eq!(zone_field(&r, 0, "wp"), 1);
    let d = dir.path("back.bin");
    ok(&[
        "zns",
        "read",
        s,
        "-s",
        "0",
        "--nlb",
        "1",
        "-d",
        d.to_str().unwrap(),
    ]);
    let block: Vec<u8> = (0..LBA).map(|i| (i % 251) as u8).collect();
    assert_eq!(fs::read(&d).unwrap(), block);
    let more = data_file(&dir, "more.bin", &blocks(1, 3));
    ok(&["zns", "write", s, "-s", "1", "-d", &more]);
    assert_eq!(zone_field(&report_json(s, &[]), 0, "wp"), 2);
}

#[test]
fn the_clock_carries_over_and_runs_are_deterministic() {
    let run = |tag: &str| -> Vec<u8> {
        let dir = TempDir::new(tag);
        let img = create(&dir, &[]);
        let s = img.to_str().unwrap();
        let d = data_file(&dir, "a.bin", &blocks(4, 9));
        ok(&["zns", "write", s, "-s", "0", "-d", &d]);
        ok(&["zns", "zone-append", s, "-s", "0x2000", "-d", &d]);
        ok(&["zns", "finish-zone", s, "-s", "0"]);
        let id: serde_json::Value =
            serde_json::from_str(&ok(&["zns", "id-ns", s, "-o", "json"])).unwrap();
        assert!(id["zonelab"]["clock_ns"].as_u64().unwrap() > 0, "{id}");
        fs::read(&img).unwrap()
    };
    assert_eq!(
        run("det-a"),
        run("det-b"),
        "same commands, different images"
    );
}

/// A ZNS+ image of 8 zones of 64 LBAs: 16 chunks of 4 LBAs over 4 chips.
fn create_small_znsplus(dir: &TempDir) -> PathBuf {
    create(
        dir,
        &[
            "channels=2",
            "chips_per_channel=2",
            "pages_per_block=4",
            "blocks_per_plane=12",
            "zone_dies=4",
            "zone_size=256KiB",
        ],
    )
}

/// ZNS+ commands (seed 000 §3.2): identify-mapping, zone-compaction (copyback for whole chunks
/// on the same chip), tl-open and a threaded-logging write, and bad ranges that fail with an
/// NVMe status and leave the image as it was.
#[test]
fn znsplus_commands_copy_plug_and_refuse_bad_ranges() {
    let dir = TempDir::new("znsplus");
    let img = create_small_znsplus(&dir);
    let s = img.to_str().unwrap();
    let m: serde_json::Value =
        serde_json::from_str(&ok(&["zns", "identify-mapping", s, "-o", "json"])).unwrap();
    assert_eq!(m["lbas_per_chunk"], 4);
    assert_eq!(m["chip_id"]["lsb"], 2);
    assert_eq!(m["chip_id"]["bits"], 2);
    assert_eq!(m["fcgs"], 1);
    let table = ok(&["zns", "identify-mapping", s]);
    assert!(table.contains("chip ID        : LBA bits 2..3"), "{table}");

    let data = blocks(64, 3);
    let d = data_file(&dir, "zone0.bin", &data);
    ok(&["zns", "write", s, "-s", "0", "-d", &d]);
    // Chunks 0-1 to chunks 0-1 of zone 1 (copyback), chunk 3 to chunk 2 (read and program).
    let o = ok(&[
        "zns",
        "zone-compaction",
        s,
        "--src",
        "0+8,12+4",
        "--dst",
        "64+12",
    ]);
    assert!(
        o.contains("12 blocks copied (2 chunks by copyback, 1 by read and program)"),
        "{o}"
    );
    let r = zonelab(&["zns", "read", s, "-s", "64", "--nlb", "12"]);
    assert!(r.status.success(), "{}", err(&r));
    let want = [&data[..8 * LBA], &data[12 * LBA..16 * LBA]].concat();
    assert_eq!(r.stdout, want);
    assert_eq!(zone_field(&report_json(s, &[]), 1, "wp"), 76);

    // Bad ranges: behind the write pointer, past the namespace, lists of different lengths,
    // unwritten sources, falling destinations; each says which block breaks which rule.
    let e = nvme_fails(
        &img,
        &["zns", "zone-compaction", s, "--src", "0", "--dst", "70"],
        "Zone Invalid Write",
    );
    assert!(
        e.contains("destination LBA 0x46 is below zone 1's write pointer (0x4c)"),
        "{e}"
    );
    let e = nvme_fails(
        &img,
        &[
            "zns",
            "zone-compaction",
            s,
            "--src",
            "0",
            "--dst",
            "0x10000",
        ],
        "LBA Out of Range",
    );
    assert!(e.contains("LBA 0x10000 is past the namespace"), "{e}");
    let e = nvme_fails(
        &img,
        &["zns", "zone-compaction", s, "--src", "130", "--dst", "80"],
        "Invalid Field in Command",
    );
    assert!(e.contains("source LBA 0x82 holds no data"), "{e}");
    let e = nvme_fails(
        &img,
        &[
            "zns",
            "zone-compaction",
            s,
            "--src",
            "0,1",
            "--dst",
            "81,80",
        ],
        "Zone Invalid Write",
    );
    assert!(
        e.contains("destinations in zone 1 must rise: LBA 0x50 comes after 0x51"),
        "{e}"
    );
    let before = fs::read(&img).unwrap();
    let e = fails(&["zns", "zone-compaction", s, "--src", "0+2", "--dst", "80"]);
    assert!(e.contains("one destination per source"), "{e}");
    let o = zonelab(&["zns", "zone-compaction", s, "--src", "0+0", "--dst", "80"]);
    assert!(!o.status.success());
    assert!(err(&o).contains("at least one block"), "{}", err(&o));
    assert_eq!(fs::read(&img).unwrap(), before);

    // Threaded logging on zone 0: blocks 0-31 stay valid, the rest is overwritten.
    let e = nvme_fails(
        &img,
        &["zns", "tl-open", s, "-s", "64", "--valid", "0+4"],
        "Invalid Zone State Transition",
    );
    assert!(
        e.contains("zone 0x40 is IMP_OPENED; TL_open reopens a FULL zone"),
        "{e}"
    );
    let o = ok(&["zns", "tl-open", s, "-s", "0", "--valid", "0+32"]);
    assert!(o.contains("valid blocks:32 of 64"), "{o}");
    let new = blocks(4, 9);
    let d2 = data_file(&dir, "new.bin", &new);
    let e = nvme_fails(
        &img,
        &["zns", "write", s, "-s", "8", "-d", &d2],
        "Zone Invalid Write",
    );
    assert!(
        e.contains("zone 0x0 is TL_opened") && e.contains("not valid at TL_open"),
        "{e}"
    );
    // An append lands at the write pointer, on a valid block: refused, with the TL rule.
    let one = data_file(&dir, "one.bin", &blocks(1, 3));
    let e = nvme_fails(
        &img,
        &["zns", "zone-append", s, "-s", "0", "-d", &one],
        "Zone Invalid Write",
    );
    assert!(
        e.contains("zone append lands at the write pointer")
            && e.contains("any block it would cover from there was valid at TL_open")
            && !e.contains("use zone append"),
        "{e}"
    );
    ok(&["zns", "write", s, "-s", "40", "-d", &d2]);
    ok(&["zns", "close-zone", s, "-s", "0"]);
    let r = report_json(s, &[]);
    assert_eq!(zone_field(&r, 0, "state"), "FULL");
    let o = zonelab(&["zns", "read", s, "-s", "0", "--nlb", "44"]);
    assert!(o.status.success(), "{}", err(&o));
    let want = [&data[..40 * LBA], &new[..]].concat();
    assert_eq!(o.stdout, want);
}

/// A media failure on a TL_opened zone: read-only, its data reads back and writes, finish and
/// close are refused without a crash; offline, it reads as offline.
#[test]
fn a_tl_opened_zone_survives_a_media_failure() {
    let dir = TempDir::new("tl-failure");
    let img = create_small_znsplus(&dir);
    let s = img.to_str().unwrap();
    let data = blocks(64, 3);
    let d = data_file(&dir, "zone0.bin", &data);
    ok(&["zns", "write", s, "-s", "0", "-d", &d]);
    ok(&["zns", "tl-open", s, "-s", "0", "--valid", "0+32,50+4"]);
    let new = blocks(4, 9);
    let d2 = data_file(&dir, "new.bin", &new);
    ok(&["zns", "write", s, "-s", "40", "-d", &d2]);
    ok(&["zns", "inject", s, "--zone", "0", "--state", "read-only"]);
    let o = zonelab(&["zns", "read", s, "-s", "0", "--nlb", "44"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(o.stdout, [&data[..40 * LBA], &new[..]].concat());
    let o = zonelab(&["zns", "read", s, "-s", "50", "--nlb", "4"]);
    assert!(o.status.success(), "{}", err(&o));
    assert_eq!(
        o.stdout,
        &data[50 * LBA..54 * LBA],
        "valid blocks past the write pointer"
    );
    nvme_fails(
        &img,
        &["zns", "write", s, "-s", "44", "-d", &d2],
        "Zone Is Read Only",
    );
    nvme_fails(
        &img,
        &["zns", "finish-zone", s, "-s", "0"],
        "Invalid Zone State Transition",
    );
    ok(&["zns", "zone-mgmt-send", s, "-a", "-z", "close"]);
    assert_eq!(zone_field(&report_json(s, &[]), 0, "state"), "READONLY");
    ok(&["zns", "offline-zone", s, "-s", "0"]);
    nvme_fails(
        &img,
        &["zns", "read", s, "-s", "50", "--nlb", "1"],
        "Zone Is Offline",
    );
}
