//! End-to-end tests of `zonelab mkfs` and `zonelab fsck` on device images.

use std::path::PathBuf;
use std::process::{Command, Output};

mod common;
use common::zonelab;

fn temp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("zonelab-fs-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn mkfs_then_fsck_is_clean() {
    let img = temp("ok.img");
    let i = img.to_str().unwrap();
    let o = zonelab(&[
        "zns",
        "create",
        i,
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=32",
        "--set",
        "conventional_zones=2",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let o = zonelab(&["mkfs", i]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("file system created"), "{}", text(&o));
    let o = zonelab(&["fsck", i, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], true);
    // A second mkfs would erase the file system: refused without --force, image unchanged.
    let before = std::fs::read(&img).unwrap();
    let o = zonelab(&["mkfs", i]);
    assert!(!o.status.success());
    assert!(text(&o).contains("--force"), "{}", text(&o));
    assert_eq!(std::fs::read(&img).unwrap(), before);
    let o = zonelab(&["mkfs", i, "--force"]);
    assert!(o.status.success(), "{}", text(&o));
    // Damage that keeps the file system from mounting is a finding (exit 4, in the JSON):
    // here both checkpoint packs (blocks 2..8, after the two superblock copies) overwritten.
    let junk = temp("junk.bin");
    std::fs::write(&junk, vec![0x5a; 6 * 4096]).unwrap();
    let o = zonelab(&[
        "zns",
        "write",
        i,
        "-s",
        "2",
        "-z",
        &(6 * 4096).to_string(),
        "-d",
        junk.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o));
    std::fs::remove_file(&junk).ok();
    let o = zonelab(&["fsck", i, "--json"]);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], false);
    let p = v["problems"][0].as_str().unwrap();
    assert!(
        p.contains("cannot mount") && p.contains("checkpoint"),
        "{v}"
    );
    std::fs::remove_file(&img).ok();
}

#[test]
fn mkfs_explains_missing_conventional_zones_and_fsck_refuses_unformatted_devices() {
    let img = temp("noconv.img");
    let i = img.to_str().unwrap();
    let o = zonelab(&[
        "zns",
        "create",
        i,
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=32",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let before = std::fs::read(&img).unwrap();
    let o = zonelab(&["mkfs", i]);
    assert!(!o.status.success());
    assert!(text(&o).contains("conventional_zones"), "{}", text(&o));
    assert_eq!(
        std::fs::read(&img).unwrap(),
        before,
        "a failed mkfs leaves the image alone"
    );
    let o = zonelab(&["fsck", i]);
    assert!(!o.status.success());
    assert!(text(&o).contains("mkfs"), "{}", text(&o));
    std::fs::remove_file(&img).ok();
}

#[test]
fn a_closed_pipe_ends_output_without_a_panic() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let img = temp("pipe.img");
    let i = img.to_str().unwrap();
    let o = zonelab(&["zns", "create", i, "--profile", "zn540"]);
    assert!(o.status.success(), "{}", text(&o));
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(["zns", "report-zones", i])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.contains("nr_zones"), "{first}");
    // The reader is gone (its end of the pipe closed when dropped above).
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_file(&img).ok();
}

#[test]
fn mkfs_and_fsck_with_a_companion_image() {
    let (zimg, cimg, other) = (temp("zoned.img"), temp("comp.img"), temp("other.img"));
    let (z, c, x) = (
        zimg.to_str().unwrap(),
        cimg.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    // A zoned device without conventional zones and a small sn640 companion.
    let o = zonelab(&[
        "zns",
        "create",
        z,
        "--profile",
        "znsplus-mlc",
        "--set",
        "zones=32",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    for (img, bpp) in [(c, "16"), (x, "24")] {
        let o = zonelab(&[
            "zns",
            "create",
            img,
            "--profile",
            "sn640-op28",
            "--set",
            &format!("blocks_per_plane={bpp}"),
            "--set",
            "pages_per_block=64",
        ]);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = zonelab(&["mkfs", z, "--companion", c]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("file system created"), "{}", text(&o));
    let o = zonelab(&["fsck", z, "--companion", c, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["clean"], true);

    // Without the companion, with another one, with a zoned image as companion, with a
    // missing file: clear errors, no panic.
    for (args, want) in [
        (vec!["fsck", z], "attach that companion (--companion)"),
        (vec!["fsck", z, "--companion", x], "attach the companion"),
        (
            vec!["fsck", z, "--companion", z],
            "the companion must be a conventional one",
        ),
        (
            vec!["mkfs", z, "--companion", z],
            "the companion must be a conventional one",
        ),
        (
            vec!["fsck", z, "--companion", "/nonexistent/c.img"],
            "cannot read device image",
        ),
        (vec!["zns", "report-zones", c], "conventional"),
    ] {
        let o = zonelab(&args);
        assert!(!o.status.success(), "{args:?}");
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
    }
    // The companion the error suggests can be created as it says.
    let o = zonelab(&["mkfs", z, "--companion", z]);
    let hint = text(&o);
    let cmd = hint.split('`').nth(1).expect("a suggested command");
    let hinted = temp("hinted.img");
    let args: Vec<&str> = cmd
        .split_whitespace()
        .skip(1)
        .map(|a| {
            if a == "meta.img" {
                hinted.to_str().unwrap()
            } else {
                a
            }
        })
        .collect();
    assert!(args.contains(&hinted.to_str().unwrap()), "{cmd}");
    let o = zonelab(&args);
    assert!(o.status.success(), "`{cmd}`: {}", text(&o));
    for p in [&zimg, &cimg, &other, &hinted] {
        std::fs::remove_file(p).ok();
    }
}
