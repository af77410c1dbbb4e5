//! Device image files: a simulated ZNS device and its virtual clock, kept on disk between
//! `zonelab zns` commands so that a sequence of invocations is one consistent timeline.
//!
//! Layout (integers little-endian):
//!
//! ```text
//! offset size  field
//!      0    8  magic     b"ZONELAB\0"
//!      8    4  version   FORMAT_VERSION
//!     12    4  flags     bit 0: the body holds a conventional namespace (FLAG_CONVENTIONAL);
//!                        unknown bits are refused
//!     16    8  body_len  bytes of body that follow the header
//!     24    4  body_crc  CRC-32 (IEEE) of the body
//!     28    4  reserved  0
//!     32    …  body      postcard encoding of { clock: Nanos, device: ZonedDevice }, or with
//!                        FLAG_CONVENTIONAL of { clock: Nanos, device: ConventionalDevice }
//! ```
//!
//! A conventional-namespace image (`zonelab zns create --profile sn640`, [`FLAG_CONVENTIONAL`])
//! is the companion device F2FS keeps its metadata on beside a zoned drive without conventional
//! zones (`zonelab mkfs --companion`); the zns tools refuse it. Its profile is stored as text
//! too; conventional images exist from format 3 on.
//!
//! Postcard writes fields one after another without names, so the body's layout is the exact
//! field list of the device at the time. The device's profile, its first field, is stored as
//! its TOML text (a postcard string, [`zonelab_device::profile::as_toml_text`]): profile fields
//! are read by name, and a profile field added with `#[serde(default)]` loads from images
//! written before it existed without a new format version. Any other change of the device's
//! fields needs a new version and a reader of the old one here.
//!
//! Older formats still load:
//! * Format 5 (current) adds the block counts of the ZNS+ counters (blocks copied by copyback
//!   and by read + program), the last fields of the device. A format 4 body followed by their
//!   encoding at their defaults is a format 5 body
//!   ([`ZonedDevice::fields_added_since_image_v4`]).
//! * Format 4 adds the device's ZNS+ state (TL_opened zones, copies in flight, counters) as
//!   its last field. A format 3 body followed by the encoding of that field at its default
//!   (in this build's layout, block counts included) is a format 5 body
//!   ([`ZonedDevice::fields_added_since_image_v3`]).
//! * Format 3 stores the profile as text.
//! * Format 2 stored the profile field by field, with the controller section that lacked
//!   `reset_unmap_variation`, `housekeeping_tick` and `management_window_ticks`. The profile at
//!   the start of the device is read in that layout
//!   ([`zonelab_device::profile::image_v2_layout`]; the three are off) and written back as text,
//!   which makes the body a format 3 body ([`profile_as_text`]).
//! * Format 1 is format 2 without the device's power-loss bookkeeping (the last device field).
//!   After the same profile rewrite, a format 1 body followed by the encoding of the fields
//!   added since, at their defaults, is a format 3 body
//!   ([`ZonedDevice::fields_added_since_image_v1`]). Format 1 images were written with and
//!   without the management queue (added without a version change), and both are read.
//!
//! Loading checks each layer before trusting the next (signature, version, length, checksum,
//! decoding, then [`ZonedDevice::validate_loaded`]) and never panics, whatever the bytes.
//! Saving writes a temporary file next to the image, flushes it, renames it over the old one
//! and flushes the directory, so an image is always either the old state or the new one.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use zonelab_device::profile::{as_toml_text, image_v2_layout};
use zonelab_device::{ConventionalDevice, Profile, ZonedDevice};
use zonelab_sim::Nanos;

/// The file signature.
pub const MAGIC: [u8; 8] = *b"ZONELAB\0";
/// The body layout this build writes (it also reads formats 1 to 4).
pub const FORMAT_VERSION: u32 = 5;
/// Bytes before the body.
pub const HEADER_LEN: usize = 32;
/// Header flag: the body holds a [`ConventionalDevice`].
pub const FLAG_CONVENTIONAL: u32 = 1;

/// A conventional (block-interface) device and its virtual clock.
#[derive(Clone, Debug)]
pub struct ConventionalImage {
    pub clock: Nanos,
    pub device: ConventionalDevice,
}

/// An image of either kind.
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum AnyImage {
    Zoned(Image),
    Conventional(ConventionalImage),
}

/// A device and its virtual clock: when the next command arrives.
#[derive(Clone, Debug)]
pub struct Image {
    pub clock: Nanos,
    pub device: ZonedDevice,
}

/// An image body: the virtual clock, then the device (zoned or conventional), written from a
/// reference and read as a value.
#[derive(Serialize, Deserialize)]
struct Body<D> {
    clock: Nanos,
    device: D,
}

/// Why bytes are not a usable device image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageError {
    NotAnImage,
    Truncated {
        expected: u64,
        got: u64,
    },
    Version {
        found: u32,
    },
    UnknownFlags(u32),
    TrailingBytes(u64),
    Checksum {
        stored: u32,
        computed: u32,
    },
    Decode(String),
    Inconsistent(String),
    Encode(String),
    /// A conventional-namespace image where a zoned one is needed.
    Conventional,
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageError::NotAnImage => write!(
                f,
                "not a ZoneLab device image (it does not start with the ZONELAB signature); \
                 make one with `zonelab zns create IMAGE --profile NAME`"
            ),
            ImageError::Truncated { expected, got } => write!(
                f,
                "truncated device image: {expected} bytes expected, the file has {got}; it was \
                 cut short (disk full, interrupted copy?) — restore it or create a new one"
            ),
            ImageError::Version { found } => {
                let age = if *found > FORMAT_VERSION {
                    "newer"
                } else {
                    "older"
                };
                write!(
                    f,
                    "device image made by a {age} ZoneLab: format version {found}, this build \
                     reads version {FORMAT_VERSION}; use a matching zonelab or create the image \
                     again"
                )
            }
            ImageError::UnknownFlags(flags) => write!(
                f,
                "device image uses features this build does not know (flags {flags:#x}); it \
                 was made by a newer ZoneLab"
            ),
            ImageError::TrailingBytes(n) => write!(
                f,
                "device image has {n} unexpected bytes after its end; the file is damaged"
            ),
            ImageError::Checksum { stored, computed } => write!(
                f,
                "device image checksum mismatch (stored CRC32 {stored:08x}, computed \
                 {computed:08x}): the file is corrupt; restore it or create a new one"
            ),
            ImageError::Decode(e) => write!(
                f,
                "device image cannot be decoded ({e}); the file is corrupt or was written by an \
                 incompatible build"
            ),
            ImageError::Inconsistent(e) => write!(
                f,
                "device image describes an impossible device ({e}); the file is damaged or was \
                 written by a faulty build"
            ),
            ImageError::Encode(e) => write!(f, "cannot encode the device image: {e}"),
            ImageError::Conventional => write!(
                f,
                "this image holds a conventional (block-interface) namespace, a companion device \
                 for `zonelab mkfs --companion`; this command needs a zoned device image (create \
                 one with `zonelab zns create IMAGE --profile zn540`)"
            ),
        }
    }
}

impl std::error::Error for ImageError {}

/// The complete file contents for `clock` and `device`.
pub fn encode(clock: Nanos, device: &ZonedDevice) -> Result<Vec<u8>, ImageError> {
    // Images keep no queued in-storage copies: they are started first.
    let started;
    let device = if device.has_queued_copies() {
        let mut d = device.clone();
        d.start_queued_copies();
        started = d;
        &started
    } else {
        device
    };
    let body = postcard::to_stdvec(&Body { clock, device })
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    Ok(with_header(body, 0))
}

/// The complete file contents for a conventional image.
pub fn encode_conventional(
    clock: Nanos,
    device: &ConventionalDevice,
) -> Result<Vec<u8>, ImageError> {
    let body = postcard::to_stdvec(&Body { clock, device })
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    Ok(with_header(body, FLAG_CONVENTIONAL))
}

fn with_header(body: Vec<u8>, flags: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// Parses and checks a whole zoned image file's contents.
pub fn decode(bytes: &[u8]) -> Result<Image, ImageError> {
    match decode_any(bytes)? {
        AnyImage::Zoned(i) => Ok(i),
        AnyImage::Conventional(_) => Err(ImageError::Conventional),
    }
}

/// Parses and checks a whole image file's contents, of either kind.
pub fn decode_any(bytes: &[u8]) -> Result<AnyImage, ImageError> {
    let got = bytes.len() as u64;
    let sig = bytes.len().min(MAGIC.len());
    if bytes[..sig] != MAGIC[..sig] || bytes.is_empty() {
        return Err(ImageError::NotAnImage);
    }
    if bytes.len() < HEADER_LEN {
        return Err(ImageError::Truncated {
            expected: HEADER_LEN as u64,
            got,
        });
    }
    let version = le_u32(bytes, 8);
    if version == 0 || version > FORMAT_VERSION {
        return Err(ImageError::Version { found: version });
    }
    let flags = le_u32(bytes, 12);
    let known = if version == 1 { 0 } else { FLAG_CONVENTIONAL };
    if flags & !known != 0 || le_u32(bytes, 28) != 0 {
        return Err(ImageError::UnknownFlags(flags));
    }
    let body_len = le_u64(bytes, 16);
    let have = got - HEADER_LEN as u64;
    if body_len > have {
        return Err(ImageError::Truncated {
            expected: (HEADER_LEN as u64).saturating_add(body_len),
            got,
        });
    }
    if body_len < have {
        return Err(ImageError::TrailingBytes(have - body_len));
    }
    let body = &bytes[HEADER_LEN..];
    let stored = le_u32(bytes, 24);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(ImageError::Checksum { stored, computed });
    }
    if flags & FLAG_CONVENTIONAL != 0 {
        if version < 3 {
            return Err(ImageError::Decode(format!(
                "a conventional-namespace image of format {version}: they exist from format 3 on"
            )));
        }
        return decode_conventional_body(body).map(AnyImage::Conventional);
    }
    match version {
        1 => decode_v1_body(&profile_as_text(body)?),
        2 => decode_body(&with_v4_fields(&profile_as_text(body)?)?),
        3 => decode_body(&with_v4_fields(body)?),
        4 => decode_body(&with_v5_fields(body)?),
        _ => decode_body(body),
    }
    .map(AnyImage::Zoned)
}

fn decode_conventional_body(body: &[u8]) -> Result<ConventionalImage, ImageError> {
    let b = decode_device(body, |d: &mut ConventionalDevice| {
        d.restore_from_profile();
        d.validate_loaded()
    })?;
    Ok(ConventionalImage {
        clock: b.clock,
        device: b.device,
    })
}

/// Decodes a body whose checksum already matched; `finish` restores what the image leaves out
/// and validates the device.
fn decode_device<D: serde::de::DeserializeOwned>(
    body: &[u8],
    finish: fn(&mut D) -> Result<(), String>,
) -> Result<Body<D>, ImageError> {
    let (mut b, rest): (Body<D>, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| decode_error(body, e))?;
    if !rest.is_empty() {
        return Err(ImageError::TrailingBytes(rest.len() as u64));
    }
    finish(&mut b.device).map_err(ImageError::Inconsistent)?;
    Ok(b)
}

/// A format 1 or 2 body with its profile rewritten as format 3 stores it: the body starts with
/// the clock and then the device, whose first field is the profile, so only that prefix
/// changes.
fn profile_as_text(body: &[u8]) -> Result<Vec<u8>, ImageError> {
    #[derive(Deserialize)]
    struct Old {
        clock: Nanos,
        #[serde(deserialize_with = "image_v2_layout::deserialize")]
        profile: Profile,
    }
    #[derive(Serialize)]
    struct New<'a> {
        clock: Nanos,
        #[serde(serialize_with = "as_toml_text::serialize")]
        profile: &'a Profile,
    }
    let (old, rest): (Old, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| ImageError::Decode(e.to_string()))?;
    old.profile
        .validate()
        .map_err(|e| ImageError::Inconsistent(format!("device profile: {e}")))?;
    let mut new = postcard::to_stdvec(&New {
        clock: old.clock,
        profile: &old.profile,
    })
    .map_err(|e| ImageError::Encode(e.to_string()))?;
    new.extend_from_slice(rest);
    Ok(new)
}

/// A format 2 or 3 body (profile as text) completed with the default of the field added in
/// format 4, in this build's layout: a current body.
fn with_v4_fields(body: &[u8]) -> Result<Vec<u8>, ImageError> {
    let plus = postcard::to_stdvec(&ZonedDevice::fields_added_since_image_v3())
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    Ok([body, &plus].concat())
}

/// A format 4 body completed with the fields added in format 5 (at their defaults).
fn with_v5_fields(body: &[u8]) -> Result<Vec<u8>, ImageError> {
    let blocks = postcard::to_stdvec(&ZonedDevice::fields_added_since_image_v4())
        .map_err(|e| ImageError::Encode(e.to_string()))?;
    Ok([body, &blocks].concat())
}

/// A format 1 body (profile already as text): completed with the defaults of the fields added
/// since. Format 1 bodies
/// from before the management queue lack that field too; a body decodes under only one of the
/// two readings (the other leaves bytes over or runs short).
fn decode_v1_body(body: &[u8]) -> Result<Image, ImageError> {
    let (management, durability) = ZonedDevice::fields_added_since_image_v1();
    let enc = |e: postcard::Error| ImageError::Encode(e.to_string());
    let management = postcard::to_stdvec(&management).map_err(enc)?;
    let durability = postcard::to_stdvec(&durability).map_err(enc)?;
    let plus = postcard::to_stdvec(&ZonedDevice::fields_added_since_image_v3()).map_err(enc)?;
    let with_management_queue = [body, &durability, &plus].concat();
    match decode_body(&with_management_queue) {
        Err(ImageError::Decode(_) | ImageError::TrailingBytes(_)) => {
            decode_body(&[body, &management, &durability, &plus].concat())
        }
        other => other,
    }
}

/// Decodes and validates a body whose checksum already matched.
fn decode_body(body: &[u8]) -> Result<Image, ImageError> {
    let b = decode_device(body, |d: &mut ZonedDevice| {
        d.restore_from_profile();
        d.validate_loaded()
    })?;
    Ok(Image {
        clock: b.clock,
        device: b.device,
    })
}

/// Why `body` does not decode. Postcard keeps no message of errors raised by the types it
/// decodes, so a profile text that does not read as a profile is read again on its own to say
/// why (a field this build does not know, say).
fn decode_error(body: &[u8], e: postcard::Error) -> ImageError {
    if let Ok(((_, text), _)) = postcard::take_from_bytes::<(Nanos, String)>(body)
        && let Err(pe) = Profile::from_toml(&text, as_toml_text::SOURCE, &[])
    {
        return ImageError::Decode(pe.to_string());
    }
    ImageError::Decode(e.to_string())
}

/// Reads a zoned image file.
pub fn load(path: &Path) -> anyhow::Result<Image> {
    let bytes =
        fs::read(path).with_context(|| format!("cannot read device image {}", path.display()))?;
    decode(&bytes).with_context(|| format!("{}", path.display()))
}

/// Reads an image file of either kind.
pub fn load_any(path: &Path) -> anyhow::Result<AnyImage> {
    let bytes =
        fs::read(path).with_context(|| format!("cannot read device image {}", path.display()))?;
    decode_any(&bytes).with_context(|| format!("{}", path.display()))
}

/// Writes `image` to `path` atomically: a temporary file in the same directory, flushed to disk,
/// then renamed over `path`. With `replace` false an existing `path` is refused.
pub fn save(path: &Path, image: &Image, replace: bool) -> anyhow::Result<()> {
    write_atomically(path, &encode(image.clock, &image.device)?, replace)
}

/// [`save`] for a conventional image.
pub fn save_conventional(
    path: &Path,
    image: &ConventionalImage,
    replace: bool,
) -> anyhow::Result<()> {
    write_atomically(
        path,
        &encode_conventional(image.clock, &image.device)?,
        replace,
    )
}

fn write_atomically(path: &Path, bytes: &[u8], replace: bool) -> anyhow::Result<()> {
    let tmp = temp_path(path);
    let written = (|| -> std::io::Result<()> {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write device image {}", path.display()));
    }
    if !replace && path.exists() {
        let _ = fs::remove_file(&tmp);
        anyhow::bail!(
            "{} already exists; use --force to overwrite it",
            path.display()
        );
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot replace device image {}", path.display()));
    }
    // The rename is durable once the directory is: a crash after this returns keeps the new
    // image.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot flush directory {}", dir.display()))?;
    Ok(())
}

/// `dir/.name.tmp-PID` next to `path`.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonelab_device::{Lba, ZoneState};
    use zonelab_device::{PayloadMode, Profile, WriteData, ZoneAction};

    fn device() -> ZonedDevice {
        let ov = Profile::parse_overrides(&["zones=4".to_string()]).unwrap();
        let p = Profile::load("znsplus-mlc", &ov).unwrap();
        let mut d = ZonedDevice::new(p, PayloadMode::Full).unwrap();
        let t = Nanos::ZERO;
        let buf: Vec<u8> = (0..d.lba_size() * 3).map(|i| (i % 251) as u8).collect();
        assert!(
            d.write(t, t, Lba(0), WriteData::Bytes(&buf), false)
                .status
                .is_ok()
        );
        let zs = d.zones().geometry().zone_size;
        assert!(
            d.zone_mgmt(t, t, ZoneAction::Open, Lba(zs), false)
                .status
                .is_ok()
        );
        d
    }

    fn image_bytes() -> Vec<u8> {
        encode(Nanos(12_345), &device()).unwrap()
    }

    /// Small deterministic generator for the corruption tests.
    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
        let crc = crc32fast::hash(&bytes[HEADER_LEN..]);
        bytes[24..28].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    #[test]
    fn roundtrip_keeps_clock_zones_and_data() {
        let bytes = image_bytes();
        let img = decode(&bytes).unwrap();
        assert_eq!(img.clock, Nanos(12_345));
        // Decoding then encoding gives the same bytes.
        assert_eq!(encode(img.clock, &img.device).unwrap(), bytes);
        let z = img.device.zones().zones();
        assert_eq!(z[0].wp, Lba(3));
        assert_eq!(z[1].state, ZoneState::ExplicitlyOpened);
        let mut out = zonelab_device::ReadData::default();
        let mut d = img.device;
        assert!(
            d.read(Nanos(0), Nanos(0), Lba(0), 3, Some(&mut out))
                .status
                .is_ok()
        );
        let want: Vec<u8> = (0..d.lba_size() * 3).map(|i| (i % 251) as u8).collect();
        assert_eq!(out.bytes, want);
    }

    #[test]
    fn an_image_starts_the_queued_copies_it_does_not_keep() {
        let mut d = device();
        let zs = d.zones().geometry().zone_size;
        let t = Nanos::ZERO;
        let fps: Vec<u64> = (0..64).collect();
        let w = d.write(t, t, Lba(3), WriteData::Fingerprints(&fps[3..]), false);
        assert!(w.status.is_ok());
        // Two whole chunks copied into zone 2: queued for their chips.
        let t = w.done;
        let src: Vec<Lba> = (0..8).map(Lba).collect();
        let dst: Vec<Lba> = (0..8).map(|k| Lba(2 * zs + k)).collect();
        assert!(d.zone_compaction(t, t, &src, &dst).status.is_ok());
        assert!(d.has_queued_copies());
        let img = decode(&encode(t, &d).unwrap()).unwrap();
        let mut d = img.device;
        assert!(!d.has_queued_copies());
        // The copied pages are programmed: the zone's next pages on the same chips follow.
        let more: Vec<u64> = (0..64).collect();
        let t = Nanos(1_000_000_000);
        let w = d.write(t, t, Lba(2 * zs + 8), WriteData::Fingerprints(&more), false);
        assert!(w.status.is_ok(), "{:?}", w.status);
        let (mut a, mut b) = (
            zonelab_device::ReadData::default(),
            zonelab_device::ReadData::default(),
        );
        assert!(
            d.read(w.done, w.done, Lba(0), 8, Some(&mut a))
                .status
                .is_ok()
        );
        assert!(
            d.read(w.done, w.done, Lba(2 * zs), 8, Some(&mut b))
                .status
                .is_ok()
        );
        assert_eq!(a.bytes, b.bytes);
    }

    #[test]
    fn each_layer_has_its_error() {
        let good = image_bytes();
        assert_eq!(decode(b"hello, world").unwrap_err(), ImageError::NotAnImage);
        assert_eq!(decode(b"").unwrap_err(), ImageError::NotAnImage);
        assert!(matches!(
            decode(&good[..20]).unwrap_err(),
            ImageError::Truncated { .. }
        ));
        assert!(matches!(
            decode(&good[..good.len() - 1]).unwrap_err(),
            ImageError::Truncated { .. }
        ));
        let mut longer = good.clone();
        longer.push(0);
        assert_eq!(decode(&longer).unwrap_err(), ImageError::TrailingBytes(1));
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        let e = decode(&newer).unwrap_err();
        assert!(e.to_string().contains("newer"), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("this build reads version {FORMAT_VERSION}"))
        );
        let mut flagged = good.clone();
        flagged[12] = 2;
        assert_eq!(decode(&flagged).unwrap_err(), ImageError::UnknownFlags(2));
        let mut corrupt = good.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0x40;
        let e = decode(&corrupt).unwrap_err();
        assert!(matches!(e, ImageError::Checksum { .. }));
        assert!(e.to_string().contains("checksum"));
        let garbage = reseal(
            [
                good[..HEADER_LEN].to_vec(),
                vec![0xff; good.len() - HEADER_LEN],
            ]
            .concat(),
        );
        assert!(matches!(
            decode(&garbage).unwrap_err(),
            ImageError::Decode(_)
        ));
    }

    /// A format 2 image as the previous build wrote it (commit 7ec32f5; see
    /// `tests/fixtures/README.md`): znsplus-mlc with 4 zones, one block written at LBA 0
    /// (bytes `i % 251`), zone 1 explicitly opened. Its profile is stored field by
    /// field, with the controller section before `reset_unmap_variation`, `housekeeping_tick`
    /// and `management_window_ticks`.
    const V2_IMAGE: &[u8] = include_bytes!("../tests/fixtures/v2-znsplus-mlc.img");

    /// `bytes` with version `version` and a new body (length and checksum updated).
    fn with_body(bytes: &[u8], version: u32, body: &[u8]) -> Vec<u8> {
        let mut b = [&bytes[..HEADER_LEN], body].concat();
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[16..24].copy_from_slice(&(body.len() as u64).to_le_bytes());
        reseal(b)
    }

    #[test]
    fn format_2_images_of_the_previous_build_load() {
        assert_eq!(le_u32(V2_IMAGE, 8), 2);
        let img = decode(V2_IMAGE).unwrap();
        // The old profile layout was read field by field; the fields added since are off: its
        // link stays the full-duplex one it was written with, its writes complete from the
        // buffer, its reads free their die after sensing and its programs hold their die
        // for the transfer, as they did.
        let ov = Profile::parse_overrides(&[
            "zones=4".to_string(),
            "pcie_duplex=\"full\"".to_string(),
            "write_completion=\"buffered\"".to_string(),
            "read_holds_die=false".to_string(),
            "cache_program=false".to_string(),
        ])
        .unwrap();
        let want = Profile::load("znsplus-mlc", &ov).unwrap();
        assert_eq!(img.device.profile(), &want);
        let c = &img.device.profile().controller;
        assert_eq!(c.reset_unmap_variation, 0.0);
        assert_eq!(c.housekeeping_tick.0, Nanos::ZERO);
        assert_eq!(c.management_window_ticks, 0);
        // The same zones and data as when it was written.
        let z = img.device.zones().zones();
        assert_eq!(z.len(), 4);
        assert_eq!((z[0].state, z[0].wp), (ZoneState::ImplicitlyOpened, Lba(1)));
        assert_eq!(z[1].state, ZoneState::ExplicitlyOpened);
        assert!(z[2..].iter().all(|z| z.state == ZoneState::Empty));
        let mut d = img.device.clone();
        let mut out = zonelab_device::ReadData::default();
        assert!(
            d.read(img.clock, img.clock, Lba(0), 1, Some(&mut out))
                .status
                .is_ok()
        );
        let want: Vec<u8> = (0..d.lba_size()).map(|i| (i % 251) as u8).collect();
        assert_eq!(out.bytes, want);
        // Saved again it is a current image of the same device.
        let again = encode(img.clock, &img.device).unwrap();
        assert_eq!(le_u32(&again, 8), FORMAT_VERSION);
        let reloaded = decode(&again).unwrap();
        assert_eq!(reloaded.clock, img.clock);
        assert_eq!(reloaded.device.zones().zones(), z);
        assert_eq!(encode(reloaded.clock, &reloaded.device).unwrap(), again);
        // The old layout is not the current one: labelled format 3 the body does not decode.
        let as_v3 = with_body(V2_IMAGE, 3, &V2_IMAGE[HEADER_LEN..]);
        assert!(matches!(decode(&as_v3).unwrap_err(), ImageError::Decode(_)));
        // A version beyond this build's is refused as such.
        let newer = with_body(V2_IMAGE, FORMAT_VERSION + 1, &V2_IMAGE[HEADER_LEN..]);
        let e = decode(&newer).unwrap_err();
        assert_eq!(
            e,
            ImageError::Version {
                found: FORMAT_VERSION + 1
            }
        );
        assert!(e.to_string().contains("newer ZoneLab"), "{e}");
    }

    /// A format 1 image of the fixture's device: the format 2 body without the fields added
    /// since (`drop` of them, newest first), which the fixture holds at their defaults.
    fn v1_bytes(drop: usize) -> Vec<u8> {
        let (management, durability) = ZonedDevice::fields_added_since_image_v1();
        let mut tail = postcard::to_stdvec(&durability).unwrap();
        if drop == 2 {
            tail = [postcard::to_stdvec(&management).unwrap(), tail].concat();
        }
        assert!(V2_IMAGE.ends_with(&tail));
        let body = &V2_IMAGE[HEADER_LEN..V2_IMAGE.len() - tail.len()];
        with_body(V2_IMAGE, 1, body)
    }

    #[test]
    fn format_1_images_still_load() {
        let v2 = decode(V2_IMAGE).unwrap();
        for drop in [1, 2] {
            let img = decode(&v1_bytes(drop)).unwrap_or_else(|e| panic!("drop {drop}: {e}"));
            assert_eq!(img.clock, v2.clock);
            // Saved again, it is a current image of the same device.
            assert_eq!(
                encode(img.clock, &img.device).unwrap(),
                encode(v2.clock, &v2.device).unwrap()
            );
        }
        // Without the completion, a format 1 body does not decode as format 2.
        let as_v2 = v1_bytes(1);
        let as_v2 = with_body(&as_v2, 2, &as_v2[HEADER_LEN..]);
        assert!(matches!(decode(&as_v2).unwrap_err(), ImageError::Decode(_)));
    }

    /// A format `version` image of the test device: the current body without `added` (the
    /// encoding of the fields added since, at their defaults, which the device holds). It loads
    /// and saves back to the current bytes; labelled one format later, the shorter body does
    /// not decode. Returns the loaded image.
    fn older_format_loads(version: u32, added: &impl Serialize) -> Image {
        let good = image_bytes();
        let added = postcard::to_stdvec(added).unwrap();
        assert!(good.ends_with(&added));
        let old = with_body(&good, version, &good[HEADER_LEN..good.len() - added.len()]);
        let img = decode(&old).unwrap();
        assert_eq!(encode(img.clock, &img.device).unwrap(), good);
        let as_next = with_body(&old, version + 1, &old[HEADER_LEN..]);
        assert!(decode(&as_next).is_err());
        img
    }

    #[test]
    fn format_3_images_load_without_the_znsplus_state() {
        older_format_loads(3, &ZonedDevice::fields_added_since_image_v3());
    }

    /// The flash array's modes that images leave out come back from the profile: the ZNS+
    /// profiles' reads hold their die until the data is out, and their dies cache programs.
    #[test]
    fn loaded_devices_take_the_flash_modes_from_their_profile() {
        let modes = |d: &ZonedDevice| {
            let t = d.flash().timing();
            (t.read_holds_die, t.cache_program)
        };
        assert_eq!(modes(&device()), (true, true));
        let img = decode(&image_bytes()).unwrap();
        assert_eq!(modes(&img.device), (true, true));
        let ov = Profile::parse_overrides(&[
            "read_holds_die=false".to_string(),
            "cache_program=false".to_string(),
        ])
        .unwrap();
        let p = Profile::load("znsplus-mlc", &ov).unwrap();
        let off = ZonedDevice::new(p, PayloadMode::Full).unwrap();
        let img = decode(&encode(Nanos::ZERO, &off).unwrap()).unwrap();
        assert_eq!(modes(&img.device), (false, false));
    }

    /// A format 4 image (before the ZNS+ counters' block counts) loads, with those counts at
    /// zero, and is saved again as the current format.
    #[test]
    fn format_4_images_load_without_the_block_counts() {
        let img = older_format_loads(4, &ZonedDevice::fields_added_since_image_v4());
        assert_eq!(img.device.znsplus_counters().copyback_blocks, 0);
    }

    /// The profile text at the start of a format 3 body, and the rest of the body.
    fn split_profile_text(bytes: &[u8]) -> (Nanos, String, Vec<u8>) {
        let ((clock, text), rest): ((Nanos, String), &[u8]) =
            postcard::take_from_bytes(&bytes[HEADER_LEN..]).unwrap();
        (clock, text, rest.to_vec())
    }

    #[test]
    fn profile_fields_added_later_load_from_older_format_3_images() {
        let good = image_bytes();
        let (clock, text, rest) = split_profile_text(&good);
        // As a build before the four controller fields would have written it.
        let older: String = text
            .lines()
            .filter(|l| {
                ![
                    "reset_unmap_variation",
                    "housekeeping_tick",
                    "management_window_ticks",
                    "management_window_holds_io",
                ]
                .iter()
                .any(|f| l.starts_with(f))
            })
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(text.lines().count(), older.lines().count() + 4, "{text}");
        let body = [postcard::to_stdvec(&(clock, &older)).unwrap(), rest.clone()].concat();
        let img = decode(&with_body(&good, FORMAT_VERSION, &body)).unwrap();
        // The fields took their defaults, which is what the device had.
        assert_eq!(encode(img.clock, &img.device).unwrap(), good);
        // A profile field this build does not know (a newer build's image) is refused by name.
        let newer = text.replace("[controller]\n", "[controller]\nwarp_drive = 1\n");
        let body = [postcard::to_stdvec(&(clock, &newer)).unwrap(), rest].concat();
        let e = decode(&with_body(&good, FORMAT_VERSION, &body)).unwrap_err();
        assert!(
            matches!(&e, ImageError::Decode(m) if m.contains("warp_drive")),
            "{e}"
        );
    }

    #[test]
    fn images_keep_power_loss_bookkeeping() {
        let ov = Profile::parse_overrides(&[
            "zones=4".to_string(),
            "power_loss_protection=false".to_string(),
        ])
        .unwrap();
        let p = Profile::load("znsplus-mlc", &ov).unwrap();
        let mut d = ZonedDevice::new(p, PayloadMode::Full).unwrap();
        let t = Nanos::ZERO;
        let buf = vec![9u8; d.lba_size() as usize * 6];
        let w = d.write(t, t, Lba(0), WriteData::Bytes(&buf), false);
        let bytes = encode(w.done, &d).unwrap();
        let mut loaded = decode(&bytes).unwrap().device;
        // The loaded device loses what the original would.
        let a = d.power_cut(w.done);
        let b = loaded.power_cut(w.done);
        assert_eq!(a, b);
        assert!(a.lost_blocks > 0);
        assert_eq!(loaded.zones().zones(), d.zones().zones());
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_refused() {
        let good = image_bytes();
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x01;
            assert!(decode(&b).is_err(), "flip at byte {i} accepted");
            assert!(
                decode(&good[..i]).is_err(),
                "truncation to {i} bytes accepted"
            );
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let good = image_bytes();
        for round in 0..3000u32 {
            let len = (rng.next() % 2048) as usize;
            let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if round.is_multiple_of(2) && len >= HEADER_LEN {
                // A plausible header, so decoding and validation see the random body.
                b[..HEADER_LEN].copy_from_slice(&good[..HEADER_LEN]);
                b[16..24].copy_from_slice(&((len - HEADER_LEN) as u64).to_le_bytes());
                b = reseal(b);
            }
            assert!(decode(&b).is_err());
        }
    }

    #[test]
    fn resealed_body_mutations_never_panic() {
        // Corruption that the checksum cannot see (it was recomputed): decoding and validation
        // must still refuse or accept cleanly, never panic.
        let good = image_bytes();
        let mut rng = XorShift(42);
        for _ in 0..3000 {
            let mut b = good.clone();
            for _ in 0..1 + rng.next() % 4 {
                let i = HEADER_LEN + (rng.next() as usize) % (good.len() - HEADER_LEN);
                b[i] = rng.next() as u8;
            }
            let _ = decode(&reseal(b));
        }
    }

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "zonelab-image-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos()
        ));
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn save_is_atomic_and_refuses_to_clobber() {
        let dir = temp_dir("save");
        let path = dir.join("dev.img");
        let img = Image {
            clock: Nanos(7),
            device: device(),
        };
        save(&path, &img, false).unwrap();
        let first = fs::read(&path).unwrap();
        let e = save(&path, &img, false).unwrap_err();
        assert!(e.to_string().contains("--force"), "{e}");
        assert_eq!(fs::read(&path).unwrap(), first);
        let later = Image {
            clock: Nanos(8),
            device: img.device.clone(),
        };
        save(&path, &later, true).unwrap();
        assert_eq!(load(&path).unwrap().clock, Nanos(8));
        // No temporary files are left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);
        let e = load(&dir.join("missing.img")).unwrap_err();
        assert!(format!("{e:#}").contains("missing.img"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn conventional_images_round_trip_and_zoned_readers_refuse_them() {
        let ov = Profile::parse_overrides(&[
            "blocks_per_plane=16".to_string(),
            "pages_per_block=64".to_string(),
        ])
        .unwrap();
        let p = Profile::load("sn640-op28", &ov).unwrap();
        let d = ConventionalDevice::new(p, PayloadMode::Full).unwrap();
        let bytes = encode_conventional(Nanos(7), &d).unwrap();
        match decode_any(&bytes).unwrap() {
            AnyImage::Conventional(c) => {
                assert_eq!(c.clock, Nanos(7));
                assert_eq!(c.device.total_lbas(), d.total_lbas());
            }
            AnyImage::Zoned(_) => panic!("a conventional image decoded as zoned"),
        }
        let e = decode(&bytes).unwrap_err();
        assert_eq!(e, ImageError::Conventional);
        assert!(e.to_string().contains("zoned device image"), "{e}");
    }
}
