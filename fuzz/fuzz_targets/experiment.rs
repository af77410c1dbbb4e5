//! `zonelab run` experiment files: any text must be read and checked into a plan or give an
//! error (no simulation runs).
#![no_main]

use libfuzzer_sys::fuzz_target;
use zonelab_cli::experiment::parse_experiment;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_experiment(text, "fuzz.toml", &[]);
    }
});
