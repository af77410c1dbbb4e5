//! Device profile TOML (`--profile FILE.toml`): any text must give a valid profile or an
//! error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zonelab_device::Profile;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Profile::from_toml(text, "fuzz.toml", &[]);
    }
});
