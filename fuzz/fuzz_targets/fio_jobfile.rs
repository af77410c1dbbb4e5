//! fio job files (`zonelab fio JOBFILE`): any text must parse or give an error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zonelab_workload::fio::options;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = options::parse_jobfile_text(text, "fuzz.fio");
    }
});
