//! The device image loader (`zonelab_cli::image::decode_any`: header, checksum, versioned
//! postcard body, device validation) on arbitrary files: a damaged image must be an error.
//!
//! Input: a selector byte, then file contents. With selector bit 0 clear the contents are a
//! body given a valid header (format version from bits 1, 2 and 4, every version this build
//! reads; conventional flag from bit 3; body length and CRC computed), so the fuzzer reaches the body decoder behind the checksum; with
//! bit 0 set the contents are the whole file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zonelab_cli::image::{self, FLAG_CONVENTIONAL, FORMAT_VERSION, MAGIC};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel & 1 != 0 {
        let _ = image::decode_any(rest);
        return;
    }
    let pick = u32::from((sel >> 1) & 3) | u32::from((sel >> 4) & 1) << 2;
    let version = FORMAT_VERSION - pick % FORMAT_VERSION;
    let flags = if sel & 8 != 0 { FLAG_CONVENTIONAL } else { 0 };
    let mut file = Vec::with_capacity(32 + rest.len());
    file.extend_from_slice(&MAGIC);
    file.extend_from_slice(&version.to_le_bytes());
    file.extend_from_slice(&flags.to_le_bytes());
    file.extend_from_slice(&(rest.len() as u64).to_le_bytes());
    file.extend_from_slice(&crc32fast::hash(rest).to_le_bytes());
    file.extend_from_slice(&0u32.to_le_bytes());
    file.extend_from_slice(rest);
    let _ = image::decode_any(&file);
});
