//! End-to-end tests of `zonelab profiles` and `zonelab bench` on input that means nothing:
//! refused with a reason and a non-zero exit, not ignored.

mod common;
use common::{stderr, zonelab};

#[test]
fn profiles_lists_prints_and_refuses_overrides_without_a_profile() {
    let o = zonelab(&["profiles"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("zn540"));
    let o = zonelab(&["profiles", "zn540", "--set", "zones=64"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("zones = 64"));
    let o = zonelab(&["profiles", "--set", "zones=64"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("`zonelab profiles zn540 --set zones=64`"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bench_needs_at_least_one_command() {
    let o = zonelab(&["bench", "--commands", "0"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("at least 1 command"), "{}", stderr(&o));
}
