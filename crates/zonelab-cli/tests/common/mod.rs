//! What the end-to-end tests share: running the built `zonelab` binary as a user would, and
//! reading its output. Each test file is a crate of its own and uses only some of these.
#![allow(dead_code)]

use std::process::{Command, Output};

/// Runs `zonelab` with `args` and waits for it.
pub fn zonelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zonelab"))
        .args(args)
        .output()
        .expect("run zonelab")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
